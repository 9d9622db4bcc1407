"""The pipeline files amibuild ships as package data: the example and the `amibuild init` starter."""

from __future__ import annotations

from importlib import resources

from amibuild.errors import PackageDataMissing

EXAMPLE = "example.hcl"  # the repository's amibuild.hcl
STARTER = "starter.hcl"  # what `amibuild init` writes


def pipeline_text(name: str) -> str:
    """The text of a shipped pipeline file; missing means a broken install (exit 1), not bad input."""
    try:
        return (resources.files("amibuild.pipeline") / name).read_text(encoding="utf-8")
    except OSError as exc:
        raise PackageDataMissing(f"amibuild/pipeline/{name} is missing ({exc.strerror}); the installation is "
                                 "incomplete: reinstall amibuild") from exc
