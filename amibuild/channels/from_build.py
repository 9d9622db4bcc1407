"""Which variants a build-ami run publishes to its channel, and with what: a pure decision.

Gather, decide, then act, as everywhere in amibuild: `channel_reads` names the channel parameters
to read first (only those of reused variants: a variant built in this run always has new images),
the caller reads them, and `plan_build_publish` decides from the plan, the outcomes and those values.
`amibuild.cli.commands.publish_outcomes` carries the decision out with `publish.publish_variant`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from amibuild.bake.executor import BuildOutcome, BuildStatus
from amibuild.bake.plan import BuildPlan
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
    return [o for o in outcomes if o.status.has_image and o.amis and o.boot_test.get("result", "passed") == "passed"]


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
