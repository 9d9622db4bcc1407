"""The `init` job: a starter pipeline file, a `.gitignore` entry for `build/`, and with `--ci github`
a GitHub Actions workflow that installs this amibuild's version as a package.

The starter and the workflow are package data (`amibuild/pipeline/starter.hcl`,
`amibuild/jobs/templates/github-workflow.yml`), so an installed amibuild writes what this repository tests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from amibuild import __version__
from amibuild.errors import PackageDataMissing, SpecError
from amibuild.jobs.requests_setup import InitRequest
from amibuild.locate import PIPELINE_FILE, find_pipeline, repository_root
from amibuild.pipeline.shipped import STARTER, pipeline_text

IGNORE_ENTRY = "/build/"
CI_SYSTEMS = ("github",)
WORKFLOW = Path(".github/workflows/amibuild.yml")


@dataclass(frozen=True)
class InitResult:
    pipeline: Path
    gitignore: Path
    gitignore_changed: bool
    pipeline_written: bool = True
    workflow: Path | None = None

    def lines(self) -> list[str]:
        out = [f"wrote {self.pipeline}" if self.pipeline_written else f"kept {self.pipeline} as it is",
               f"{f'added {IGNORE_ENTRY} to' if self.gitignore_changed else 'build/ already ignored in'} {self.gitignore}"]
        if self.workflow is not None:
            out.append(f"wrote {self.workflow}: set the repository variables AMIBUILD_ROLE_ARN and AWS_REGION "
                       "(amibuild's docs: CI in your repository)")
        return [*out, "next: amibuild render (what Packer gets), then amibuild build-ami"]

    def to_dict(self) -> dict:
        return {"pipeline": str(self.pipeline), "gitignore": str(self.gitignore),
                "gitignore_changed": self.gitignore_changed, "pipeline_written": self.pipeline_written,
                "workflow": str(self.workflow) if self.workflow else None}


def workflow_text(pipeline_dir: str) -> str:
    """The GitHub workflow for a pipeline file in `pipeline_dir` (relative to the repository root)."""
    try:
        text = (resources.files("amibuild.jobs") / "templates" / "github-workflow.yml").read_text(encoding="utf-8")
    except OSError as exc:
        raise PackageDataMissing(f"amibuild/jobs/templates/github-workflow.yml is missing ({exc.strerror}); the "
                                 "installation is incomplete: reinstall amibuild") from exc
    quoted = json.dumps(pipeline_dir)[1:-1]  # inside YAML's double quotes: `images #2` is no comment
    return text.replace("@AMIBUILD_VERSION@", __version__).replace("@PIPELINE_DIR@", quoted)


def run(request: InitRequest, folder: Path) -> InitResult:
    """Write what `request` asks for in ``folder``; every refusal comes before anything is written."""
    folder = folder.resolve()
    if request.ci and request.ci not in CI_SYSTEMS:
        raise SpecError(f"--ci {request.ci!r}: one of {', '.join(CI_SYSTEMS)}")
    pipeline = folder / PIPELINE_FILE
    exists = pipeline.exists() or pipeline.is_symlink()
    if exists and not request.ci:
        raise SpecError(f"{pipeline}: already exists; amibuild init does not overwrite it (edit it, or move it "
                        "away and run init again)")
    found = find_pipeline(folder).path
    if not exists and found is not None and not request.here:
        whose = "this repository" if repository_root(folder) else "a parent folder"
        raise SpecError(f"{found}: {whose} has a pipeline file already, which commands run in {folder} "
                        f"would no longer find (the nearest {PIPELINE_FILE} wins); work with that one, or run "
                        "`amibuild init --here` to start a second pipeline in this folder")
    root = repository_root(folder) or folder
    workflow = root / WORKFLOW if request.ci else None
    if workflow is not None and (workflow.exists() or workflow.is_symlink()):
        raise SpecError(f"{workflow}: already exists; amibuild init does not overwrite it (move it away, or compare "
                        "it with what amibuild's docs show under CI in your repository)")
    for place in (workflow.parent.parent, workflow.parent) if workflow is not None else ():
        if (place.exists() or place.is_symlink()) and not place.is_dir():
            raise SpecError(f"{place}: is a file, where the workflow's folder {root / WORKFLOW.parent} goes; move "
                            "it away and run init again")
    # before writing anything: a broken install writes nothing
    text = "" if exists else pipeline_text(STARTER)
    ci_text = workflow_text(folder.relative_to(root).as_posix() or ".") if workflow is not None else ""
    gitignore = folder / ".gitignore"
    try:
        existing = gitignore.read_text(encoding="utf-8") if gitignore.exists() else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{gitignore}: cannot read it ({exc}); fix or remove it and run init again") from exc
    ignored = {line.strip().lstrip("/").rstrip("/") for line in existing.splitlines()}
    changed = "build" not in ignored
    try:
        if not exists:
            with pipeline.open("x", encoding="utf-8") as out:  # "x": never clobber one made in between
                out.write(text)
        if changed:
            gitignore.write_text(existing + ("" if not existing or existing.endswith("\n") else "\n")
                                 + f"{IGNORE_ENTRY}\n", encoding="utf-8")
        if workflow is not None:
            workflow.parent.mkdir(parents=True, exist_ok=True)
            with workflow.open("x", encoding="utf-8") as out:
                out.write(ci_text)
    except FileExistsError as exc:
        raise SpecError(f"{exc.filename}: already exists; amibuild init does not overwrite it") from None
    except OSError as exc:
        raise SpecError(f"{folder}: cannot write here ({exc.strerror}); run amibuild init in a folder you "
                        "can write to") from exc
    return InitResult(pipeline, gitignore, changed, pipeline_written=not exists, workflow=workflow)

