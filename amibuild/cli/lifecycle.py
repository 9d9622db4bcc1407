"""Pruning from the command line: task flags → gather → plan → execute (`amibuild.lifecycle.prune`)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Sequence

from amibuild.aws import Aws
from amibuild.pipeline.options import load_pipeline
from amibuild.errors import SpecError
from amibuild.cli import values
from amibuild.lifecycle.prune import DEFAULT_KEEP_VERSIONS, PruneResult, execute_prune, gather, plan_prune


def prune(
    options: Any,
    *,
    keep: Any,
    older_than: str | None = None,
    keep_versions: Any = DEFAULT_KEEP_VERSIONS,
    dry_run: bool = False,
    deprecate_only: bool = False,
    variants: Sequence[str] = (),
    regions: Sequence[str] = (),
    now: datetime | None = None,
    aws: Aws | None = None,
) -> PruneResult:
    """`amibuild prune`: flags → gather → plan → (unless ``dry_run``) execute."""
    if keep in (None, ""):
        raise SpecError("prune: say how many images to keep per variant and region, e.g. --keep 5")
    count = values.count(keep, "--keep", minimum=1)
    versions = values.count(keep_versions, "--keep-versions", minimum=0, example=3)
    age = values.age(older_than, "--older-than")
    pipeline = load_pipeline(options)
    if aws is None:
        aws = Aws(profile=options.profile, region=pipeline.build_region)
    targets = tuple(dict.fromkeys(regions)) or pipeline.target_regions
    facts = gather(aws, pipeline, targets, keep_versions=versions, variants=variants)
    plan = plan_prune(facts.images, facts.in_use, count, age, now or datetime.now(timezone.utc),
                      snapshot_tags=facts.snapshot_tags, deprecate_only=deprecate_only, keep_versions=versions,
                      pipeline=pipeline.name, deprecated=facts.deprecated)
    if dry_run:
        return PruneResult(plan, None)
    return execute_prune(aws, plan, now=now)
