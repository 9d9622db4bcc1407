"""Which variants a build-ami run publishes to its channel, and with what: a pure decision.

Gather, decide, then act, as everywhere in amibuild: `channel_reads` names the channel parameters
to read first (only those of reused variants: a variant built in this run always has new images),
the caller reads them, and `plan_build_publish` decides from the plan, the outcomes and those values.
`publish_build` carries the decision out with `publish.publish_variant` and returns one frozen
`VariantPublished` per variant: the build's outcomes are never filled in afterwards.

A dry run shows the same step as `PublishMove`s (`preview_publish`, decided by `plan_moves`): per
variant and region, ``previous -> new`` and the version the write would make. A move to an image
built before the one the channel holds now (a reused image after a one-off build) is flagged
there, and said by the real run (`VariantPublished.older`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Callable, Mapping, Sequence

from amibuild import notify
from amibuild.aws import Aws, Parameter, fan_out
from amibuild.bake.executor import BuildOutcome, BuildStatus
from amibuild.bake.build_plan import BuildDecision, BuildPlan
from amibuild.channels import gates, publish, read
from amibuild.channels.plan import build_time, put_refusal
from amibuild.lease import Guard
from amibuild.errors import AmibuildError, GateRefused, PublishConflict, PublishFailed
from amibuild.pipeline import Variant
from amibuild.pipeline.naming import parameter_name
from amibuild.poll import settled


@dataclass(frozen=True)
class VariantPublish:
    """One variant to point `channel` at: its images per region, and whether that is needed."""

    name: str
    variant: Variant
    parameter: str  # the channel's SSM parameter name
    amis: Mapping[str, str]  # region -> AMI
    fingerprint: str
    run_id: str | None  # this run's id for images built now; None: reused images keep their own tag
    unchanged: bool  # reused, and the channel names these AMIs in every region already: nothing to write


def _ready(outcomes: Sequence[BuildOutcome]) -> list[BuildOutcome]:
    # a failed or interrupted variant publishes nothing; neither does one without images, nor one
    # whose boot test (build-ami --boot-test) did not pass
    return [o for o in outcomes if o.status.has_image and o.amis and not o.boot_error]


def _parameters(plan: BuildPlan, outcomes: Sequence[BuildOutcome], channel: str) -> dict[str, str]:
    variants = {i.name: i.rendered.variant for i in plan.items}
    return {o.name: parameter_name(plan.pipeline, variants[o.name], channel) for o in _ready(outcomes)}


def channel_reads(plan: BuildPlan, outcomes: Sequence[BuildOutcome], channel: str) -> dict[str, list[str]]:
    """Region -> the channel parameters to read before deciding: those of reused variants. Pure."""
    names = _parameters(plan, outcomes, channel)
    reused = [names[o.name] for o in _ready(outcomes) if o.status is BuildStatus.SKIPPED]
    return {region: reused for region in plan.regions} if reused else {}


def plan_build_publish(plan: BuildPlan, outcomes: Sequence[BuildOutcome], channel: str,
                       current: Mapping[str, Mapping[str, str]]) -> tuple[VariantPublish, ...]:
    """What to publish for each built or reused variant, in outcome order. Pure.

    ``current``: region -> {parameter: AMI} as read for `channel_reads` (a parameter that does not
    exist is simply absent). A reused variant whose channel already names its AMIs everywhere is
    ``unchanged``: an unchanged scheduled run makes no parameter version.
    """
    names = _parameters(plan, outcomes, channel)
    variants = {i.name: i.rendered.variant for i in plan.items}
    out = []
    for outcome in _ready(outcomes):
        parameter = names[outcome.name]
        built = outcome.status is BuildStatus.BUILT
        unchanged = not built and all(current.get(region, {}).get(parameter) == ami
                                      for region, ami in outcome.amis.items())
        out.append(VariantPublish(outcome.name, variants[outcome.name], parameter, dict(outcome.amis),
                                  outcome.fingerprint, plan.run_id if built else None, unchanged))
    return tuple(out)


@dataclass(frozen=True)
class VariantPublished:
    """What the publish step did for one variant: the versions written per region, or why not."""

    name: str
    channel: str
    parameter: str = ""
    regions: Mapping[str, object] = field(default_factory=dict)  # region -> version written, or "unchanged"
    error: str = ""  # not published: why
    stuck_regions: tuple[str, ...] = ()  # a failed write whose put-back failed there: left partly written
    older: tuple[str, ...] = ()  # regions the channel moved to an image built before the one it held

    @property
    def ok(self) -> bool:
        return not self.error

    def published(self) -> dict:
        """The run record's and JSON's ``published`` value ({} when not published)."""
        if not self.ok:
            return {}
        return {"channel": self.channel, "parameter": self.parameter, "regions": dict(self.regions),
                **({"older": list(self.older)} if self.older else {})}


PUBLISH_PARALLEL = 4
NOT_STARTED = "not published: interrupted before its turn"


# what a build refused by a channel's gate can do instead: build-ami has no --override-gate
AFTER_BUILD = 'meet the gate, or publish the images afterwards with `amibuild publish --override-gate --reason "..."`'


def publish_build(aws: Aws, plan: BuildPlan, outcomes: Sequence[BuildOutcome], channel: str,
                  say: Callable[[str], None], *, cancelled: Callable[[], bool] = lambda: False,
                  guard: Guard | None = None) -> dict[str, VariantPublished]:
    """Publish each built or reused variant to `channel`: per variant one transaction under the
    channel's lease, all regions or none. Variant name -> what happened.

    Which variants and with what is decided by `plan_build_publish` (pure); channels that already
    hold a reused image are found with GetParameters first (ten names a call per region), so an
    unchanged scheduled run makes no parameter version and few calls. Once `cancelled()` (a
    signal came) no further variant starts; those in flight finish or put back. ``guard``: the lease's
    wait and ttl and the deadline of each variant's write (its run id and `cancelled` are this run's).
    """
    reads = channel_reads(plan, outcomes, channel)
    current = fan_out(sorted(reads), lambda region: aws.get_parameters(reads[region], region))
    unchanged = str(publish.PublishAction.UNCHANGED)
    items = plan_build_publish(plan, outcomes, channel, current)
    # a reused image can be older than what the channel holds (a one-off build went there since)
    pairs = {(region, ami) for item in items if item.run_id is None and not item.unchanged
             for region, held in _held(current, item).items() for ami in (held, item.amis.get(region)) if ami}
    times = built_times(aws, pairs)

    def older_regions(item: VariantPublish) -> tuple[str, ...]:
        if item.run_id is not None:  # built by this run: the newest there is
            return ()
        return tuple(r for r, held in sorted(_held(current, item).items())
                     if is_older(times.get((r, item.amis.get(r, ""))), times.get((r, held))))

    def _send(event: notify.Event) -> None:  # a warning when it fails, never the publish's failure
        notify.send(aws, plan.pipeline.events, [event], region=plan.pipeline.build_region, say=say)

    def publish_one(item: VariantPublish) -> VariantPublished:
        if cancelled():
            return VariantPublished(item.name, channel, item.parameter, error=NOT_STARTED)
        if item.unchanged:
            return VariantPublished(item.name, channel, item.parameter, {r: unchanged for r in sorted(item.amis)})
        try:
            result = publish.publish_variant(aws, pipeline=plan.pipeline, variant=item.variant, amis=item.amis,
                                             channel=channel, fingerprint=item.fingerprint, run_id=item.run_id,
                                             guard=replace(guard or Guard(), run_id=plan.run_id, cancelled=cancelled))
        except AmibuildError as exc:
            refused = isinstance(exc, GateRefused)
            why = gates.GateDecision(channel, exc.gate, exc.missing).refusal(AFTER_BUILD) if refused else str(exc)
            say(f"{item.name}: not published: {why}")
            if refused and plan.pipeline.events:
                _send(notify.schema.gate_refused(
                    pipeline=plan.pipeline.name, variant=item.name, channel=channel, operation="publish",
                    reason=why, gate=exc.gate, missing=exc.missing, amis=exc.amis, run_id=item.run_id))
            stuck = exc.stuck_regions if isinstance(exc, (PublishFailed, PublishConflict)) else ()
            return VariantPublished(item.name, channel, item.parameter, error=why, stuck_regions=tuple(stuck))
        say(f"{item.name}: published to {channel} ({result.parameter}): "
            + ", ".join(f"{r.region}={r.ami}" for r in result.regions))
        if plan.pipeline.events:
            _send(notify.schema.channel_written("published", result, pipeline=plan.pipeline.name, run_id=item.run_id))
        older = older_regions(item)
        if older:
            say(f"{item.name}: {channel} moved to an OLDER build than it held in {', '.join(older)} (a reused "
                "image replaced one built later)")
        return VariantPublished(item.name, channel, result.parameter, {
            r.region: (r.version if r.action is publish.PublishAction.WRITE else unchanged) for r in result.regions},
            older=older)

    # Variants are independent channels: a few at once (the gateway paces and retries SSM writes,
    # whose account-wide rate is low), each still all regions or none. Signals do not raise here
    # (the caller holds them off): each variant asks `cancelled` before it starts.
    with ThreadPoolExecutor(max_workers=PUBLISH_PARALLEL) as pool:
        futures = [pool.submit(publish_one, item) for item in items]
        return {done.name: done for done in map(settled, futures)}


def _held(current: Mapping[str, Mapping[str, str]], item: VariantPublish) -> dict[str, str]:
    """Region -> the AMI the channel holds now, where it holds another than the item's."""
    return {r: current.get(r, {}).get(item.parameter, "") for r in item.amis
            if current.get(r, {}).get(item.parameter) not in (None, item.amis[r])}


# ------------------------------------------------------------------------------- the dry run's publish plan


def is_older(new: datetime | None, held: datetime | None) -> bool:
    """A move to ``new`` goes back in time from ``held``. Pure; unknown times are not called older."""
    return new is not None and held is not None and new < held


def built_times(aws: Aws, pairs: set[tuple[str, str]]) -> dict[tuple[str, str], datetime | None]:
    """(region, AMI) -> its build time (`build_time`), one DescribeImages each, in parallel."""
    found = fan_out(sorted(pairs), lambda pair: aws.find_image(*pair))
    return {pair: build_time(found[pair]) for pair in pairs}


@dataclass(frozen=True)
class RegionMove:
    """What a build's publish would do to the channel in one region."""

    region: str
    previous: str | None  # the AMI the channel holds now (None: no parameter yet)
    previous_version: int
    new: str | None  # the AMI it would hold (None: the image this run builds)
    version: int  # the channel's version after the publish
    unchanged: bool = False
    older: bool = False  # the new image was built before the one held now

    def to_dict(self) -> dict[str, Any]:
        return {"region": self.region, "previous": self.previous, "previous_version": self.previous_version,
                "new": self.new, "version": self.version, "action": "unchanged" if self.unchanged else "write",
                "older": self.older}


@dataclass(frozen=True)
class PublishMove:
    """One variant's part of a build's publish step, as a dry run shows it."""

    variant: str
    channel: str
    parameter: str
    regions: tuple[RegionMove, ...]
    refused: str = ""  # the publish is refused whatever the images: why

    @property
    def older(self) -> tuple[str, ...]:
        return tuple(r.region for r in self.regions if r.older)

    def to_dict(self) -> dict[str, Any]:
        return {"variant": self.variant, "channel": self.channel, "parameter": self.parameter,
                "regions": [r.to_dict() for r in self.regions], "older": list(self.older), "refused": self.refused}


def plan_moves(plan: BuildPlan, channel: str, current: Mapping[tuple[str, str], Parameter | None],
               times: Mapping[tuple[str, str], datetime | None],
               oldest: Mapping[tuple[str, str], Parameter] | None = None) -> tuple[PublishMove, ...]:
    """Per variant of the plan, what its publish would write where. Pure.

    ``current``: (parameter, region) -> the channel's parameter now; ``times``: (region, AMI) -> build
    time, for the reused images and those the channel holds (`build_time`); ``oldest``: (parameter,
    region) -> the oldest version of a parameter that keeps SSM's 100 already (`labelled_refusal`)."""
    moves = []
    for item in plan.items:
        parameter = parameter_name(plan.pipeline, item.rendered.variant, channel)
        reused = item.decision is BuildDecision.SKIP
        # as `plan_build_publish`: a channel naming the reused images everywhere is not published at all
        skipped = reused and all((p := current.get((parameter, r))) is not None and p.value == ami
                                 for r, ami in item.existing.items())
        regions = []
        for region in plan.regions:
            now = current.get((parameter, region))
            new = item.existing.get(region) if reused else None
            held, version = (now.value, now.version) if now is not None else (None, 0)
            same = new is not None and now is not None and held == new and (
                skipped or now.data_type == publish.IMAGE_DATA_TYPE)
            older = bool(reused and held and not same and is_older(times.get((region, new or "")),
                                                                    times.get((region, held))))
            regions.append(RegionMove(region, held, version, new, version if same else version + 1, same, older))
        refused = "; ".join(why for r in regions if not r.unchanged and (why := put_refusal(
            r.region, current.get((parameter, r.region)), (oldest or {}).get((parameter, r.region)))))
        moves.append(PublishMove(item.name, channel, parameter, tuple(regions), refused))
    return tuple(moves)


def preview_publish(aws: Aws, plan: BuildPlan, channel: str, *, tested: bool = False,
                    scanned: bool = False) -> tuple[PublishMove, ...]:
    """A dry run's publish plan: read the channel in every region and the images' build times, then
    `plan_moves`. Reads only."""
    names = {i.name: parameter_name(plan.pipeline, i.rendered.variant, channel) for i in plan.items}
    current = fan_out([(n, r) for n in names.values() for r in plan.regions], lambda job: aws.find_parameter(*job))
    # only a reused image that is not what the channel holds can be older than it
    pairs = {pair for item in plan.items if item.decision is BuildDecision.SKIP
             for r, ami in item.existing.items()
             if (held := current.get((names[item.name], r))) is not None and held.value != ami
             for pair in ((r, ami), (r, held.value))}
    moves = plan_moves(plan, channel, current, built_times(aws, pairs), publish.oldest_kept(aws, current))
    gate = plan.pipeline.gates.get(channel)
    if gate is None:
        return moves
    # What the gate refuses whatever the images turn out to be: a build's never come from the gate's
    # source channel, and an image this run builds has only the statements this run signs.
    signed = gates.Evidence(test=gates.PASSED if tested else "", scan=() if scanned else None)
    built = {i.name for i in plan.items if i.decision is not BuildDecision.SKIP}

    def refusal(move: PublishMove) -> str:
        new = {r.region: None for r in move.regions} if move.variant in built else {}
        decision = gates.decide(gate, images=new, came_from=None, now=None, evidence=dict.fromkeys(new, signed))
        return "" if decision.met else decision.refusal(AFTER_BUILD)

    return tuple(replace(move, refused=move.refused or refusal(move)) for move in moves)


def check_shared(aws: Aws, plan: BuildPlan, outcomes: Sequence[BuildOutcome]) -> list[str]:
    """Missing launch / snapshot permissions for the pipeline's ami_users, as lines to show."""
    users = plan.pipeline.ami_users
    if not users:
        return []
    return [f"{outcome.name}: {line}" for outcome in outcomes if outcome.status.has_image and outcome.amis
            for line in read.check_sharing(aws, amis=outcome.amis, users=users).problems()]
