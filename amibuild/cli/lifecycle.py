"""Pruning from the command line: task flags → `amibuild.lifecycle.prune_job.PruneSettings`."""

from __future__ import annotations

from typing import Any, Sequence

from amibuild import values
from amibuild.errors import SpecError
from amibuild.lifecycle.prune import DEFAULT_KEEP_VERSIONS
from amibuild.lifecycle.prune_job import PruneSettings
from amibuild.pipeline.options import load_pipeline


def settings(
    options: Any,
    *,
    keep: Any,
    older_than: str | None = None,
    keep_versions: Any = DEFAULT_KEEP_VERSIONS,
    dry_run: bool = False,
    deprecate_only: bool = False,
    variants: Sequence[str] = (),
    regions: Sequence[str] = (),
    disable_after: str | None = None,
) -> PruneSettings:
    """`amibuild prune`'s flags, each checked before the pipeline file is read or AWS asked."""
    if keep in (None, ""):
        raise SpecError("prune: say how many images to keep per variant and region, e.g. --keep 5")
    count = values.count(keep, "--keep", minimum=1)
    versions = values.count(keep_versions, "--keep-versions", minimum=0, example=3)
    age = values.age(older_than, "--older-than")
    disable = values.age(disable_after, "--disable-after")
    if disable is not None and deprecate_only:
        raise SpecError("prune: --disable-after and --deprecate-only do not go together: deprecate first, "
                        "then disable in a later run")
    return PruneSettings(options.profile, load_pipeline(options), count, age, versions, dry_run, deprecate_only,
                         tuple(variants), tuple(regions), disable)
