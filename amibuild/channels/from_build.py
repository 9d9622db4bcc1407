"""Which variants a build-ami run publishes to its channel, and with what: a pure decision.

Gather, decide, then act, as everywhere in amibuild: `channel_reads` names the channel parameters
to read first (only those of reused variants: a variant built in this run always has new images),
the caller reads them, and `plan_build_publish` decides from the plan, the outcomes and those values.
`publish_build` carries the decision out with `publish.publish_variant` and returns one frozen
`VariantPublished` per variant: the build's outcomes are never filled in afterwards.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from amibuild.aws import Aws
from amibuild.aws.session import fan_out

from amibuild.bake.executor import BuildOutcome, BuildStatus
from amibuild.bake.plan import BuildPlan
from amibuild.channels import publish, read
from amibuild.lease import Guard
from amibuild.errors import AmibuildError, PublishConflict, PublishFailed
from amibuild.pipeline import Variant
from amibuild.pipeline.naming import parameter_name


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

    @property
    def ok(self) -> bool:
        return not self.error

    def published(self) -> dict:
        """The run record's and JSON's ``published`` value ({} when not published)."""
        return {"channel": self.channel, "parameter": self.parameter, "regions": dict(self.regions)} if self.ok else {}


PUBLISH_PARALLEL = 4
NOT_STARTED = "not published: interrupted before its turn"


def publish_build(aws: Aws, plan: BuildPlan, outcomes: Sequence[BuildOutcome], channel: str,
                  say: Callable[[str], None], *, cancelled: Callable[[], bool] = lambda: False,
                  deadline: float | None = None) -> dict[str, VariantPublished]:
    """Publish each built or reused variant to `channel`: per variant one transaction under the
    channel's lease, all regions or none. Variant name -> what happened.

    Which variants and with what is decided by `plan_build_publish` (pure); channels that already
    hold a reused image are found with GetParameters first (ten names a call per region), so an
    unchanged scheduled run makes no parameter version and few calls. Once `cancelled()` (a
    signal came) no further variant starts; those in flight finish or put back.
    """
    reads = channel_reads(plan, outcomes, channel)
    current = fan_out(sorted(reads), lambda region: aws.get_parameters(reads[region], region))
    unchanged = str(publish.PublishAction.UNCHANGED)

    def publish_one(item: VariantPublish) -> VariantPublished:
        if cancelled():
            return VariantPublished(item.name, channel, item.parameter, error=NOT_STARTED)
        if item.unchanged:
            return VariantPublished(item.name, channel, item.parameter, {r: unchanged for r in sorted(item.amis)})
        try:
            result = publish.publish_variant(aws, pipeline=plan.pipeline, variant=item.variant, amis=item.amis,
                                             channel=channel, fingerprint=item.fingerprint, run_id=item.run_id,
                                             guard=Guard(run_id=plan.run_id, cancelled=cancelled, deadline=deadline))
        except AmibuildError as exc:
            say(f"{item.name}: not published: {exc}")
            stuck = exc.stuck_regions if isinstance(exc, (PublishFailed, PublishConflict)) else ()
            return VariantPublished(item.name, channel, item.parameter, error=str(exc), stuck_regions=tuple(stuck))
        say(f"{item.name}: published to {channel} ({result.parameter}): "
            + ", ".join(f"{r.region}={r.ami}" for r in result.regions))
        return VariantPublished(item.name, channel, result.parameter, {
            r.region: (r.version if r.action is publish.PublishAction.WRITE else unchanged) for r in result.regions})

    # Variants are independent channels: a few at once (the gateway paces and retries SSM writes,
    # whose account-wide rate is low), each still all regions or none. Signals do not raise here
    # (the caller holds them off): each variant asks `cancelled` before it starts.
    with ThreadPoolExecutor(max_workers=PUBLISH_PARALLEL) as pool:
        futures = [pool.submit(publish_one, item) for item in plan_build_publish(plan, outcomes, channel, current)]
        return {done.name: done for done in (future.result() for future in futures)}


def check_shared(aws: Aws, plan: BuildPlan, outcomes: Sequence[BuildOutcome]) -> list[str]:
    """Missing launch / snapshot permissions for the pipeline's ami_users, as lines to show."""
    users = plan.pipeline.ami_users
    if not users:
        return []
    problems = []
    for outcome in outcomes:
        if outcome.status.has_image and outcome.amis:
            report = read.check_sharing(aws, amis=outcome.amis, users=users)
            problems += [f"{outcome.name}: {line}" for line in report.problems()]
    return problems
