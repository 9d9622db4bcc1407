"""`amibuild init`: a starter pipeline file and a `.gitignore` entry for `build/`, in one folder.

The starter is package data (`amibuild/pipeline/starter.hcl`), so an installed amibuild writes the same
file this repository tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from amibuild.pipeline.shipped import STARTER, pipeline_text
from amibuild.errors import SpecError
from amibuild.cli.locate import PIPELINE_FILE

IGNORE_ENTRY = "/build/"


@dataclass(frozen=True)
class InitResult:
    pipeline: Path
    gitignore: Path
    gitignore_changed: bool

    def lines(self) -> list[str]:
        return [f"wrote {self.pipeline}",
                f"{'added build/ to' if self.gitignore_changed else 'build/ already in'} {self.gitignore}",
                "next: amibuild render (what Packer gets), then amibuild build-ami"]



def init(folder: Path) -> InitResult:
    """Write `amibuild.hcl` and make `.gitignore` ignore `build/`; refuse to overwrite a pipeline file."""
    pipeline = folder / PIPELINE_FILE
    if pipeline.exists() or pipeline.is_symlink():
        raise SpecError(f"{pipeline}: already exists; amibuild init does not overwrite it (edit it, or move it "
                        "away and run init again)")
    text = pipeline_text(STARTER)  # before writing anything: a broken install writes nothing
    gitignore = folder / ".gitignore"
    try:
        existing = gitignore.read_text(encoding="utf-8") if gitignore.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{gitignore}: cannot read it ({exc}); fix or remove it and run init again") from exc
    ignored = {line.strip().lstrip("/").rstrip("/") for line in existing.splitlines()}
    changed = "build" not in ignored
    try:
        with pipeline.open("x", encoding="utf-8") as out:  # "x": never clobber one made in between
            out.write(text)
        if changed:
            gitignore.write_text(existing + ("" if not existing or existing.endswith("\n") else "\n")
                                 + f"{IGNORE_ENTRY}\n", encoding="utf-8")
    except FileExistsError:
        raise SpecError(f"{pipeline}: already exists; amibuild init does not overwrite it") from None
    except OSError as exc:
        raise SpecError(f"{folder}: cannot write here ({exc.strerror}); run amibuild init in a folder you "
                        "can write to") from exc
    return InitResult(pipeline, gitignore, changed)
