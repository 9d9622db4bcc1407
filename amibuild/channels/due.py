"""`promote --due`: promote every gated channel whose gate is met now; say what waits and until when.

The command a scheduled CI job runs. For each variant and each channel with a gate that names
``from`` (`amibuild.pipeline.imagetests.Gate`), it reads the source channel (every region, with the
build region's history for the soak), the target channel and the images, then `decide_one` decides
(pure): promote, wait (what is missing, and when the soak is met), or nothing to do (the target
holds the source's images already). The soak is judged at the time AWS answered the history read
with (never the local clock), or at a what-if time in a dry run. Each promote is an ordinary
`publish.promote`, which checks the gate again under the channels' leases before it writes.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Callable, Mapping, Sequence

from amibuild import notify
from amibuild.aws import Aws, Image, Parameter, fan_out
from amibuild.channels import gates
from amibuild.channels import publish as publish_mod
from amibuild.channels.plan import PublishResult
from amibuild.lease import Guard
from amibuild.errors import AmibuildError, GateRefused, PublishFailed


class DueAction(enum.StrEnum):
    PROMOTE = "promote"
    WAIT = "waits"
    CURRENT = "up to date"
    PROMOTED = "promoted"
    FAILED = "failed"


@dataclass(frozen=True)
class DueItem:
    variant: str
    channel: str
    source: str
    action: DueAction
    ami: str = ""
    detail: str = ""
    due_at: datetime | None = None
    plan: Any = None  # a dry run's promotion: the promote's own plan (every region's write, its safeguards)

    def to_dict(self) -> dict[str, Any]:
        return {"variant": self.variant, "channel": self.channel, "from": self.source, "action": str(self.action),
                "ami": self.ami or None, "detail": self.detail, "due_at": self.due_at.isoformat() if self.due_at else None,
                "plan": self.plan.to_dict() if self.plan is not None else None}


@dataclass(frozen=True)
class DueFacts:
    """What `gather` read for one variant x gated channel."""

    variant: str
    gate: Any
    source: Mapping[str, Parameter | None]  # region -> the source channel's current value
    target: Mapping[str, Parameter | None]
    images: Mapping[str, Image | None]  # region -> the source's image
    history: Mapping[str, Sequence[Parameter]]  # the source channel per region, oldest first
    answered_at: datetime | None = None  # AWS's time, from the history reads' Date headers (`gates.aws_time`)
    evidence: Mapping[str, gates.Evidence | None] | None = None  # what the signed statements prove (gates requiring tested)


def decide_one(facts: DueFacts, now: datetime | None = None) -> DueItem:
    """Promote, wait or nothing to do, for one variant x channel. Pure. ``now``: a what-if time
    (default: AWS's, as the facts carry it)."""
    gate = facts.gate
    base = dict(variant=facts.variant, channel=gate.channel, source=gate.source)
    missing = sorted(r for r, p in facts.source.items() if p is None)
    if missing:
        return DueItem(**base, action=DueAction.WAIT, detail=f"channel {gate.source} has no image in {', '.join(missing)}")
    amis = {r: p.value for r, p in facts.source.items() if p is not None}
    lead = next(iter(amis.values()))
    if all(facts.target.get(r) is not None and facts.target[r].value == ami for r, ami in amis.items()):
        return DueItem(**base, action=DueAction.CURRENT, ami=lead, detail=f"{gate.channel} holds {lead} already")
    decision = gates.decide(gate, images=facts.images, came_from=gate.source, source_history=facts.history,
                            now=now or facts.answered_at, evidence=facts.evidence)
    split = publish_mod.split_refusal(f"promote {gate.source} -> {gate.channel}", facts.variant, gate.source,
                                      facts.images) if decision.met else ""
    if split:  # the promote would refuse it: the dry run says so, and the real run does not try
        return DueItem(**base, action=DueAction.FAILED, ami=lead, detail=split)
    if decision.met:
        return DueItem(**base, action=DueAction.PROMOTE, ami=lead, detail=f"gate met ({decision.gate})")
    return DueItem(**base, action=DueAction.WAIT, ami=lead, detail="; ".join(decision.missing), due_at=decision.due_at)


_READ_STATEMENTS = frozenset({"tested", "scanned"})  # what a gate can require that the signed statements prove


def gather(aws: Aws, pipeline: Any, variant: Any, gate: Any,
           proofs: Callable[[str, Mapping[str, Image | None]], Mapping[str, gates.Evidence | None]] | None = None,
           moved: Mapping[str, Parameter] | None = None) -> DueFacts:
    """The facts `decide_one` judges; ``proofs`` (variant, images) reads what the signed statements prove,
    given whenever a gate requires it; ``moved``: a dry run's promotion into the source, as if written."""
    regions = list(pipeline.target_regions)
    source_name = publish_mod.parameter_name(pipeline, variant, gate.source)
    target_name = publish_mod.parameter_name(pipeline, variant, gate.channel)
    dated = fan_out(regions, lambda r: aws.dated_history(source_name, r))
    histories = {r: list(dated[r].versions) for r in regions}
    for r, p in (moved or {}).items():
        histories[r].append(replace(p, version=histories[r][-1].version + 1 if histories[r] else 1))
    source = {r: (histories[r] or [None])[-1] for r in regions}
    target = fan_out(regions, lambda r: aws.find_parameter(target_name, r))
    images = fan_out(regions, lambda r: aws.find_image(r, source[r].value) if source[r] is not None else None)
    found = proofs(variant.name, images) if proofs is not None and _READ_STATEMENTS & set(gate.requires) else None
    return DueFacts(variant.name, gate, source, dict(target), images, histories,
                    gates.aws_time(h.answered_at for h in dated.values()), found)


@dataclass(frozen=True)
class DueRun:
    """What `promote_due` decided and did, a `DueItem` per variant x gated channel; failed when a promote did."""

    items: tuple[DueItem, ...]
    dry_run: bool = False

    def __iter__(self):
        return iter(self.items)

    def __getitem__(self, index: int) -> DueItem:
        return self.items[index]

    def to_list(self) -> list[dict[str, Any]]:
        return [i.to_dict() for i in self.items]

    def lines(self) -> list[str]:
        return (["promote --due (dry run: nothing written)"] if self.dry_run else []) + lines(self.items)

    def raise_for_status(self) -> None:
        if any(i.action is DueAction.FAILED for i in self.items):
            raise PublishFailed("a due promotion failed (see above)")


def promote_due(aws: Aws, pipeline: Any, *, now: datetime | None = None, dry_run: bool = False,
                force: bool = False, guard: Callable[[], Guard] = Guard,
                say: Callable[[str], None] = lambda _: None) -> DueRun:
    """Every variant x gated channel: promote what is due now, in the order the file lists the channels.

    ``dry_run``: what is due (`DueAction.PROMOTE`) and what waits, nothing written; ``now``: a what-if
    time, for a dry run only (a write judges the soak on AWS's clock). ``force``: each promote writes
    even if another writer moved the target since it was read."""
    publish_mod.check_what_if(now, dry_run)
    items: list[DueItem] = []
    ordered = [g for g in pipeline.gates.values() if g.source]
    proofs = None
    if any(_READ_STATEMENTS & set(g.requires) for g in ordered):  # one statement reader for every channel: the key read once
        # deferred: in-toto's protobuf and cryptography only when a gate reads signed statements
        from amibuild.channels import evidence

        proofs = functools.partial(evidence.gather, evidence.Reader(aws, pipeline))
    planned: dict[tuple[str, str], dict[str, Parameter]] = {}  # a dry run's promotions: what each would write
    for variant in pipeline.variants:
        for gate in ordered:
            facts = gather(aws, pipeline, variant, gate, proofs, planned.get((variant.name, gate.source)))
            item = decide_one(facts, now)
            if item.action is DueAction.PROMOTE and dry_run and (variant.name, gate.source) not in planned:
                try:  # what the promote would write, region by region, as `promote --dry-run` shows it
                    promotion = publish_mod.promote(aws, pipeline=pipeline, variant=variant, now=now,
                                                    source=gate.source, target=gate.channel, dry_run=True)
                    promotion.raise_for_status()  # a write refused in a region: the real run fails so
                    item = replace(item, plan=promotion)
                except AmibuildError as exc:
                    item = replace(item, action=DueAction.FAILED, detail=str(exc))
            if item.action is DueAction.PROMOTE and dry_run:  # the real run reads a later gate's source after it
                planned[(variant.name, gate.channel)] = {r: replace(p, last_modified=now or facts.answered_at)
                                                         for r, p in facts.source.items() if p is not None}
            if item.action is DueAction.PROMOTE and not dry_run:
                say(f"promoting {variant.name} {gate.source} -> {gate.channel} ({item.ami}) ...")
                try:
                    result = publish_mod.promote(aws, pipeline=pipeline, variant=variant, source=gate.source,
                                                 target=gate.channel, guard=guard(), force=force)
                except AmibuildError as exc:
                    item = DueItem(item.variant, item.channel, item.source, DueAction.FAILED, item.ami, str(exc))
                    if isinstance(exc, GateRefused) and pipeline.events:
                        notify.send(aws, pipeline.events, [notify.schema.gate_refused(
                            pipeline=pipeline.name, variant=variant.name, channel=gate.channel, source=gate.source,
                            operation=f"promote {gate.source} -> {gate.channel}", reason=str(exc), gate=exc.gate,
                            missing=exc.missing, amis=exc.amis)], region=pipeline.build_region, say=say)
                else:
                    item = DueItem(item.variant, item.channel, item.source, DueAction.PROMOTED, item.ami, item.detail)
                    if isinstance(result, PublishResult) and pipeline.events:
                        notify.send(aws, pipeline.events, [notify.schema.channel_written(
                            "promoted", result, pipeline=pipeline.name, source=gate.source)],
                            region=pipeline.build_region, say=say)
            items.append(item)
    return DueRun(tuple(items), dry_run)


def lines(items: Sequence[DueItem]) -> list[str]:
    if not items:
        return ["no channel of this pipeline has a gate with `from`: nothing is ever due"]
    return [f"{item.variant} {item.source} -> {item.channel}: {item.action}"
            + (f" (due {item.due_at:%Y-%m-%d %H:%M} UTC)" if item.due_at else "")
            + (f" {item.ami}" if item.ami and item.action is not DueAction.WAIT else "")
            + (f": {item.detail}" if item.detail else "") for item in items]
