"""The prune job: gather the facts → plan (pure, `prune.plan_prune`) → unless a dry run, execute.

`run` takes one frozen `PruneSettings`, made by `amibuild.jobs.setup_commands.prune` from the flags.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Callable

from amibuild import notify
from amibuild.aws import Aws
from amibuild.lease import Guard
from amibuild.lifecycle import exclusive
from amibuild.lifecycle.prune import DEFAULT_KEEP_VERSIONS, PruneResult, execute_prune, gather, plan_prune
from amibuild.pipeline import Pipeline


@dataclass(frozen=True)
class PruneSettings:
    profile: str | None
    pipeline: Pipeline
    keep: int  # images per variant and region, newest first
    older_than: timedelta | None = None  # also keep every image younger than this
    keep_versions: int = DEFAULT_KEEP_VERSIONS
    dry_run: bool = False
    deprecate_only: bool = False
    variants: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()  # () : every target region of the pipeline
    disable_after: timedelta | None = None  # also disable the unused images older than this


def run(settings: PruneSettings, *, now: datetime | None = None, aws: Aws | None = None,
        guard: Guard | None = None, say: Callable[[str], None] = lambda _: None) -> PruneResult:
    pipeline = settings.pipeline
    if aws is None:
        aws = Aws(profile=settings.profile, region=pipeline.build_region)
    targets = tuple(dict.fromkeys(settings.regions)) or pipeline.target_regions

    def decide():
        moment = now or datetime.now(timezone.utc)
        facts = gather(aws, pipeline, targets, keep_versions=settings.keep_versions, variants=settings.variants,
                       disable_after=settings.disable_after, now=moment)
        return plan_prune(facts.images, facts.in_use, settings.keep, settings.older_than,
                          moment, snapshot_tags=facts.snapshot_tags,
                          deprecate_only=settings.deprecate_only, keep_versions=settings.keep_versions,
                          pipeline=pipeline.name, deprecated=facts.deprecated,
                          disable_after=settings.disable_after, shared=facts.shared, rules=facts.rules)

    if settings.dry_run:
        return PruneResult(decide(), None)
    # decided and carried out under the prune lease, once no channel writer is half way; each
    # deregister re-reads the region's channels right before it (`exclusive.named_now`)
    guard = guard or Guard()
    result = exclusive.under_prune_lease(
        aws, pipeline, lambda: execute_prune(aws, decide(), now=now, cancelled=guard.cancelled,
                                             named=lambda region: exclusive.named_now(aws, pipeline, region)),
        guard=guard, say=say, regions=targets)
    if pipeline.events:
        notify.send(aws, pipeline.events, deregistered_events(result, pipeline.name), region=pipeline.build_region, say=say)
    return result


def deregistered_events(result: PruneResult, pipeline: str) -> list[notify.Event]:
    """One event per image prune deregistered, a snapshot of it not deleted or not (a dry run's result has none)."""
    names = {(i.region, i.image_id): i.name for i in result.plan.images}
    return [notify.schema.deregistered({"image_id": o.image_id, "region": o.region, "variant": o.variant,
                                        "snapshots_deleted": o.snapshots_deleted},
                                       pipeline=pipeline, name=names.get((o.region, o.image_id), ""))
            for o in result.outcomes or () if o.deregistered]
