"""Finding the pipeline file the way git and invoke find theirs.

From the current folder upwards, the first `amibuild.hcl`; the search stops at the root of a
repository (a folder holding `.git`, after looking in it) or at `/`. Nothing is read here:
`pipeline.load` reads what this finds. A leaf below the stages, not in `amibuild.pipeline`: the
program looks for it (to read `amibuild.yaml` beside it) before any task runs, and `amibuild --list`
should not import the pipeline stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from amibuild import PIPELINE_FILE


@dataclass(frozen=True)
class Found:
    """The pipeline file found (None: none), and the folders looked in, nearest first."""

    path: Path | None
    searched: tuple[Path, ...]

    def not_found_note(self) -> str:
        """The one line that says no file was found, where it looked, and what happens instead."""
        first, last = self.searched[0], self.searched[-1]
        span = str(first) if first == last else f"{first} and its parents up to {last}"
        return (f"note: no {PIPELINE_FILE} in {span}; using the flags alone (the variants --variant names, else one "
                "named `default`); `amibuild init` writes a starter file")


def repository_root(folder: Path) -> Path | None:
    """The nearest folder at or above `folder` holding `.git`, or None."""
    return next((f for f in (folder, *folder.parents) if (f / ".git").exists()), None)


def find_pipeline(start: str | Path) -> Found:
    """The nearest `amibuild.hcl` at or above `start`, not crossing a repository root."""
    here = Path(start).resolve()
    searched = []
    for folder in (here, *here.parents):
        searched.append(folder)
        candidate = folder / PIPELINE_FILE
        if candidate.is_file():
            return Found(candidate, tuple(searched))
        if (folder / ".git").exists():
            break
    return Found(None, tuple(searched))
