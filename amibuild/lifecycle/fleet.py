"""Where every image runs: the channels, and every consumer of an amibuild image with how far behind it is.

Three steps, as everywhere in amibuild: `gather` reads (the pipeline's images and the one gatherer
prune uses too, `amibuild.lifecycle.consumers.gather_uses`); `classify` (pure) decides, for each
consumer, which channel it follows, at which version, and how far behind that channel it is;
`report_lines` words the view (the CLI prints it, or JSON, or Markdown). With ``--verify``,
`provenance` reads the signed statements about every running image (`channels.evidence`) and
`mark` (pure) marks each consumer whose image has no valid provenance from this pipeline: an
image nobody built through the pipeline, or one whose statement does not verify.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import enum
import re
import shlex
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

from amibuild import tags
from amibuild.aws import Aws, Image, fan_out
from amibuild.aws.consumer_reads import ASG_NAME, EKS_CLUSTER, EKS_NODEGROUP, KARPENTER_NODECLASS, KARPENTER_NODEPOOL
from amibuild.channels import evidence
from amibuild.channels.publish import name_pattern, plain
from amibuild.errors import FleetBehind, SpecError, Unverified
from amibuild.lifecycle.consumers import ChannelFact, Consumer, Kind, Uses, consumers, gather_uses
from amibuild.values import parse_iso_time


VALID = "valid"


class Standing(enum.StrEnum):
    CURRENT = "current"
    BEHIND = "behind"
    ORPHANED = "orphaned"


@dataclass(frozen=True)
class ChannelRow:
    """One channel in one region: the AMI it holds now, at which version, since when."""

    variant: str
    k8s: str
    channel: str
    region: str
    parameter: str
    ami: str
    version: int
    modified: datetime | None
    age_days: float | None


@dataclass(frozen=True)
class ConsumerRow:
    """One consumer (instances: a group of them) and where its image stands in its channel."""

    kind: str  # stack, nodegroup, launch-template, auto-scaling-group, launch-configuration, instances
    name: str
    region: str
    image_id: str
    standing: Standing
    variant: str = ""
    channel: str = ""
    k8s: str = ""
    version: int | None = None  # the channel version that last held the image
    behind_versions: int | None = None
    behind_days: float | None = None
    why: str = ""  # orphaned: why
    command: str = ""  # what rolls it, when it is behind
    hint: str = ""  # what moves it otherwise (Karpenter drift, the stack that owns the group)
    instances: tuple[str, ...] = ()
    detail: str = ""
    stack: str = ""  # an Auto Scaling group: the stack that made it, which rolls it
    provenance: str = ""  # with --verify: "valid", or why its image has no valid provenance ("": not checked)

    @property
    def unverified(self) -> bool:
        return bool(self.provenance) and self.provenance != VALID


@dataclass(frozen=True)
class FleetView:
    pipeline: str
    now: datetime
    channels: tuple[ChannelRow, ...]
    consumers: tuple[ConsumerRow, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"pipeline": self.pipeline, "now": self.now.isoformat(),
                "channels": [plain(c) for c in self.channels], "consumers": [plain(c) for c in self.consumers]}

    def check(self, limit: Limit | None) -> None:
        """Raise `FleetBehind` naming every consumer further behind than `limit` (an orphaned one always:
        it has nothing to catch up with)."""
        if limit is None:
            return
        late = [c for c in self.consumers if c.standing is Standing.ORPHANED or limit.exceeded_by(c)]
        if late:
            names = "; ".join(f"{c.kind} {c.name} in {c.region} "
                              + (c.why if c.standing is Standing.ORPHANED else
                                 f"{c.behind_versions} version(s), {c.behind_days or 0:.1f} day(s) behind "
                                 f"{c.variant} {c.channel}") for c in late)
            raise FleetBehind(f"fleet: {len(late)} consumer(s) more than {limit} behind: {names}")

    def check_provenance(self) -> None:
        """Raise `Unverified` naming every consumer whose image has no valid provenance (after `mark`)."""
        bad = [c for c in self.consumers if c.unverified]
        if bad:
            raise Unverified(f"fleet: {len(bad)} consumer(s) run an image without valid provenance from "
                             f"{self.pipeline}: " + "; ".join(f"{c.kind} {c.name} in {c.region} runs {c.image_id} "
                                                            f"({c.provenance})" for c in bad))


_LIMIT = re.compile(r"([0-9]{1,6})(d?)")


@dataclass(frozen=True)
class Limit:
    """`--check-behind N` (versions) or `Nd` (days)."""

    amount: int
    days: bool = False

    @classmethod
    def parse(cls, text: str) -> Limit:
        match = _LIMIT.fullmatch(str(text).strip())
        if not match:
            raise SpecError(f"--check-behind {text!r}: give a number of versions (e.g. 1) or of days (e.g. 14d)")
        return cls(int(match.group(1)), bool(match.group(2)))

    def exceeded_by(self, row: ConsumerRow) -> bool:
        return ((row.behind_days if self.days else row.behind_versions) or 0) > self.amount

    def __str__(self) -> str:
        return f"{self.amount} day(s)" if self.days else f"{self.amount} version(s)"


# ------------------------------------------------------------------------------- gather


@dataclass(frozen=True)
class FleetFacts:
    pipeline: str
    images: Mapping[str, Image]  # image id -> this pipeline's image (any region)
    uses: Uses


def gather(aws: Aws, pipeline: Any, regions: Sequence[str]) -> FleetFacts:
    """Read the pipeline's images and every channel and consumer, the regions in parallel. Read-only."""
    path, pattern = name_pattern(pipeline)
    regions = list(dict.fromkeys(regions))
    filters = {"tag-key": [tags.FINGERPRINT], f"tag:{tags.PIPELINE}": [pipeline.name]}
    # disabled ones too: DescribeImages hides them otherwise, and their instances still run
    found = fan_out(regions, lambda region: [image for image, _ in aws.own_images(region, filters, include_disabled=True)])
    uses = gather_uses(aws, pipeline.name, regions, path, pattern,
                       {region: [i.image_id for i in found[region]] for region in regions})
    return FleetFacts(pipeline.name, {i.image_id: i for region in regions for i in found[region]}, uses)


# ------------------------------------------------------------------------------- classify (pure)


def standing_in(channel: ChannelFact, image_id: str, now: datetime) -> tuple[int, int, float] | None:
    """(version that last held the image, moves to another AMI since, seconds since the first move);
    None when the channel never held it."""
    held = [n for n, (_, value) in enumerate(channel.history) if value == image_id]
    if not held:
        return None
    last = held[-1]
    moves = [n for n in range(last + 1, len(channel.history))
             if channel.history[n][1] != channel.history[n - 1][1]]
    seconds = 0.0
    if moves:
        first = parse_iso_time(channel.times[moves[0]]) if moves[0] < len(channel.times) else None
        seconds = max((now - first).total_seconds(), 0.0) if first else 0.0
    return channel.history[last][0], len(moves), seconds


def _group_of(consumer: Consumer) -> tuple[str, str]:
    """(how an instance's launcher is named, what moves it) from its tags."""
    t = consumer.tags
    if t.get(KARPENTER_NODEPOOL) or t.get(KARPENTER_NODECLASS):
        return (f"karpenter nodepool {t.get(KARPENTER_NODEPOOL, '?')} / ec2nodeclass {t.get(KARPENTER_NODECLASS, '?')}",
                "karpenter")
    if t.get(EKS_NODEGROUP):
        return f"managed node group {t.get(EKS_CLUSTER, '?')}/{t[EKS_NODEGROUP]}", "group instances"
    if t.get(ASG_NAME):
        return f"Auto Scaling group {t[ASG_NAME]}", "group instances"
    return "not launched by a group", ""


def classify(facts: FleetFacts, now: datetime, *, variant: str | None = None, channel: str | None = None,
             region: str | None = None) -> FleetView:
    """Channels, and every consumer of an amibuild image with its channel, version and distance. Pure."""
    channels = [c for c in facts.uses.channels if c.history]
    by_parameter = {(c.region, c.name): c for c in channels}
    in_channel = {value for c in channels for _, value in c.history}
    rows = [_channel_row(c, now) for c in channels]

    found: list[ConsumerRow] = []
    # instances grouped by region, image and launcher (its name, and what moves it: one per name)
    instances: dict[tuple[str, str, str, str], list[Consumer]] = defaultdict(list)
    follows: dict[tuple[str, str, str, str], ChannelFact | None] = {}
    everything = consumers(facts.uses)
    # a template a group launches from is shown through that group (the version it launches);
    # a template nothing launches from is shown at its default version (what a new launch gets)
    launched = {(c.region, c.template) for c in everything if c.kind in (Kind.AUTO_SCALING_GROUP, Kind.NODEGROUP)}
    # the channel each stack follows: a group the stack made stands where its stack's channel says
    stack_follows = {(c.region, c.name): by_parameter.get((c.region, c.follows))
                     for c in everything if c.kind is Kind.STACK and c.follows}
    for consumer in everything:
        if consumer.kind is Kind.LAUNCH_TEMPLATE and ((consumer.region, consumer.template) in launched
                                                      or not consumer.detail.startswith("default version")):
            continue
        if consumer.kind is Kind.STACK and consumer.detail == "ROLLBACK_COMPLETE":
            continue  # its create failed and CloudFormation deleted what it made: it runs nothing, can only be deleted
        followed = by_parameter.get((consumer.region, consumer.follows)) if consumer.follows else None
        if consumer.stack:
            followed = stack_follows.get((consumer.region, consumer.stack))
        if consumer.image_id not in facts.images and consumer.image_id not in in_channel and followed is None:
            continue  # not an amibuild image of this pipeline: someone else's business
        if consumer.kind is Kind.INSTANCE:
            key = (consumer.region, consumer.image_id, *_group_of(consumer))
            instances[key].append(consumer)
            follows[key] = followed  # a group its stack made: the stack's channel
            continue
        found.append(_row(consumer.kind.value, consumer.name, consumer.region, consumer.image_id, facts, channels,
                          followed, now, detail=consumer.detail, mover=consumer.kind.value, stack=consumer.stack))
    for (where, image_id, label, mover), members in instances.items():
        ids = tuple(sorted(m.name for m in members))
        states = sorted({m.detail for m in members})
        found.append(_row("instances", label, where, image_id, facts, channels, follows[(where, image_id, label, mover)],
                          now, detail=f"{len(ids)} {'/'.join(states)}", instances=ids, mover=mover))

    def wanted(row: Any) -> bool:
        return ((variant is None or row.variant == variant) and (channel is None or row.channel == channel)
                and (region is None or row.region == region))

    order = {k: n for n, k in enumerate(["stack", "nodegroup", "launch-template", "auto-scaling-group",
                                         "launch-configuration", "instances"])}
    rows.sort(key=lambda r: (r.variant, r.channel, r.region))
    found.sort(key=lambda r: (r.region, order.get(r.kind, 99), r.name, r.image_id))
    return FleetView(facts.pipeline, now, tuple(r for r in rows if wanted(r)), tuple(r for r in found if wanted(r)))


def _channel_row(c: ChannelFact, now: datetime) -> ChannelRow:
    version, ami = c.history[-1]
    modified = parse_iso_time(c.times[-1]) if c.times else None
    age = None if modified is None else round(max((now - modified).total_seconds(), 0) / 86400, 2)
    return ChannelRow(c.variant or c.label, c.k8s, c.channel or c.name, c.region, c.name, ami, version, modified, age)


def _row(kind: str, name: str, region: str, image_id: str, facts: FleetFacts, channels: Sequence[ChannelFact],
         followed: ChannelFact | None, now: datetime, *, detail: str = "", instances: tuple[str, ...] = (),
         mover: str = "", stack: str = "") -> ConsumerRow:
    image = facts.images.get(image_id)
    candidates = [followed] if followed is not None else [c for c in channels if c.region == region]
    # the channel it is least behind: fewest moves, then the shortest time since the first move,
    # then by channel name, so the answer never depends on the order AWS listed them in
    ranked = sorted(candidates, key=lambda c: (c.channel or c.name, c.name))
    held = [(c, where) for c in ranked if (where := standing_in(c, image_id, now)) is not None]
    best = min(held, key=lambda found: found[1][1:], default=None)  # (moves, seconds): the first of equals
    image_tags = image.tags if image else {}
    base = dict(kind=kind, name=name, region=region, image_id=image_id, detail=detail, instances=instances,
                k8s=image_tags.get(tags.KUBERNETES_VERSION, ""), variant=image_tags.get(tags.VARIANT, ""), stack=stack)
    # a group a stack made rolls with its stack: the command and hint name the stack
    rolled_as = ("stack", stack) if stack else (kind, name)
    if followed is not None and best is None:
        # a stack following a channel whose history never held its image: it resolved before amibuild wrote
        base.update(variant=followed.variant or base["variant"], channel=followed.channel or followed.name)
        # SSM keeps a parameter's last 100 versions: one that starts after version 1 lost its oldest
        first, last = (followed.history[0][0], followed.history[-1][0]) if followed.history else (1, 1)
        why = (f"runs an image not in its channel's kept history (versions {first}-{last}: SSM keeps a parameter's "
               "last 100)") if first > 1 else "runs an image its channel never held"
        return ConsumerRow(**base, standing=Standing.ORPHANED, why=why, command=_command(*rolled_as, region, followed))
    if best is None:
        trimmed = any(c.history and c.history[0][0] > 1 for c in candidates)
        why = "its image is gone (deregistered)" if image is None else "its image is in no channel" + (
            "'s kept history (SSM keeps a parameter's last 100 versions)" if trimmed else "")
        return ConsumerRow(**base, standing=Standing.ORPHANED, why=why, hint=_hint(mover, None, stack))
    chan, (version, moves, seconds) = best
    base.update(variant=chan.variant or base["variant"], channel=chan.channel or chan.name, k8s=base["k8s"] or chan.k8s,
                version=version, behind_versions=moves, behind_days=round(seconds / 86400, 2))
    if image is None:
        return ConsumerRow(**base, standing=Standing.ORPHANED, why="its image is gone (deregistered)",
                           command=_command(*rolled_as, region, chan), hint=_hint(mover, chan, stack))
    if not moves:
        return ConsumerRow(**base, standing=Standing.CURRENT)
    return ConsumerRow(**base, standing=Standing.BEHIND, command=_command(*rolled_as, region, chan),
                       hint=_hint(mover, chan, stack))


def _command(kind: str, name: str, region: str, chan: ChannelFact) -> str:
    """The `amibuild rollout` that moves this consumer to its channel's AMI; "" when rollout cannot."""
    target = {"stack": ["--stack", name], "nodegroup": ["--nodegroup", name]}.get(kind)
    if target is None:
        return ""
    follow = ["--variant", chan.variant, "--channel", chan.channel] if chan.variant and chan.channel else []
    return shlex.join(["amibuild", "rollout", *target, *follow, "--region", region])


def _hint(mover: str, chan: ChannelFact | None, stack: str = "") -> str:
    if mover == "karpenter":
        follow = (f"`amibuild karpenter --variant {chan.variant} --channel {chan.channel}`"
                  if chan is not None and chan.variant else "`amibuild karpenter`")
        return f"Karpenter replaces these nodes on drift once their EC2NodeClass follows the channel ({follow})"
    if mover == "group instances":
        return "replaced when their group rolls (see the stack or node group row)"
    if mover == "auto-scaling-group" and stack:
        return f"made by stack {stack} (its aws:cloudformation:stack-name tag): it rolls with the stack"
    if mover in ("launch-template", "auto-scaling-group", "launch-configuration"):
        return ("rolled by whatever owns it (a stack's group rolls with its stack); amibuild rolls stacks and "
                "managed node groups")
    return ""


# ------------------------------------------------------------------------------- provenance (--verify)


def provenance(aws: Aws, pipeline: Any, facts: FleetFacts, view: FleetView) -> dict[tuple[str, str], str]:
    """{(region, image id): "valid" or why not} for every image a consumer of the view runs. Read-only:
    DescribeImages for images not among the pipeline's, then the statements (`channels.evidence`)."""
    wanted = sorted({(r.region, r.image_id) for r in view.consumers})
    reader = evidence.Reader(aws, pipeline)

    def one(key: tuple[str, str]) -> str:
        region, image_id = key
        image = facts.images.get(image_id) or aws.find_image(region, image_id)
        if image is None:
            return "its image is gone (deregistered): nothing to verify"
        found = reader.about(image)
        variant = image.tags.get(tags.VARIANT, "")  # a display copy: the signed variant must match it
        if any(v.ok and evidence.built_here(v, pipeline.name, variant) for v in found.provenance):
            return VALID
        if not found.provenance:
            return evidence.FOREIGN + (f" ({found.key_problem})" if found.key_problem else "")
        return f"no valid provenance statement from this pipeline: {found.provenance[-1].reason()}"

    return fan_out(wanted, one)


def mark(view: FleetView, proofs: Mapping[tuple[str, str], str]) -> FleetView:
    """The view with each consumer's provenance as `provenance` found it. Pure."""
    rows = tuple(replace(r, provenance=proofs.get((r.region, r.image_id), r.provenance)) for r in view.consumers)
    return replace(view, consumers=rows)


# ------------------------------------------------------------------------------- report


def _behind_text(row: ConsumerRow) -> str:
    if row.standing is Standing.ORPHANED:
        return f"ORPHANED: {row.why}"
    if row.standing is Standing.CURRENT:
        return "current"
    return f"{row.behind_versions} behind ({row.behind_days or 0:.1f} days)"


def report_lines(view: FleetView) -> Iterable[str]:
    yield f"fleet of {view.pipeline}: channels"
    if not view.channels:
        yield "  no channels"
    for c in view.channels:
        age = f"{c.age_days:.1f} days old" if c.age_days is not None else "age unknown"
        yield f"  {c.variant} {c.channel} {c.region}: {c.ami} (version {c.version}, {age})"
    yield "consumers"
    if not view.consumers:
        yield "  none found running or launching an image of this pipeline"
    for r in view.consumers:
        follows = f"{r.variant} {r.channel} v{r.version}" if r.version is not None else (
            f"{r.variant} {r.channel}".strip() or "no channel")
        count = f" [{r.detail}]" if r.kind == "instances" else f" (stack {r.stack})" if r.stack else ""
        yield f"  {r.region} {r.kind} {r.name}{count}: {r.image_id} ({follows}) {_behind_text(r)}"
        if r.unverified:
            yield f"    UNVERIFIED: {r.provenance}"
        if r.command:
            yield f"    roll it: {r.command}"
        if r.hint:
            yield f"    {r.hint}"
    standings = Counter(r.standing for r in view.consumers)
    behind, orphaned = standings[Standing.BEHIND], standings[Standing.ORPHANED]
    unverified = sum(1 for r in view.consumers if r.unverified)
    yield (f"summary: {len(view.consumers)} consumer(s), {behind} behind, {orphaned} orphaned, "
           f"{len(view.consumers) - behind - orphaned} current"
           + (f", {unverified} without valid provenance" if unverified else ""))
