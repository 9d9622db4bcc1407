"""Pruning from the command line: task flags → gather → plan → execute (`amibuild.lifecycle.prune`)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Sequence

from amibuild.aws import Aws
from amibuild.cli.commands import load_pipeline
from amibuild.errors import SpecError
from amibuild.cli import values
from amibuild.lease import Guard
from amibuild.lifecycle import exclusive
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
    guard: Any = None,
    say: Any = None,
) -> PruneResult:
    """`invoke prune`: flags → gather → plan → (unless ``dry_run``) execute."""
    if keep in (None, ""):
        raise SpecError("prune: say how many images to keep per variant and region, e.g. --keep 5")
    count = values.count(keep, "--keep", minimum=1)
    versions = values.count(keep_versions, "--keep-versions", minimum=0, example=3)
    age = values.age(older_than, "--older-than")
    pipeline = load_pipeline(options)
    if aws is None:
        aws = Aws(profile=options.profile, region=pipeline.build_region)
    targets = tuple(dict.fromkeys(regions)) or pipeline.target_regions

    def decide():
        facts = gather(aws, pipeline, targets, keep_versions=versions, variants=variants)
        return plan_prune(facts.images, facts.in_use, count, age, now or datetime.now(timezone.utc),
                          snapshot_tags=facts.snapshot_tags, deprecate_only=deprecate_only, keep_versions=versions,
                          pipeline=pipeline.name, deprecated=facts.deprecated)

    if dry_run:
        return PruneResult(decide(), None)
    # decided and carried out under the prune lease, once no channel writer is half way
    return exclusive.under_prune_lease(
        aws, pipeline, lambda: execute_prune(aws, decide(), now=now,
                                             named=lambda region: exclusive.named_now(aws, pipeline, region)),
        guard=guard or Guard(), say=say or (lambda _: None))
