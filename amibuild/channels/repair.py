"""Channels split across regions: find them (`check`), and bring each to one build (`repair`).

A channel is *whole* when every region of the pipeline holds an image of one build (one
``amibuild:fingerprint`` and ``amibuild:run-id``: a forced rebuild of the same inputs is another
build; an image without those tags counts as a build of its own), and *split*
otherwise: regions on different builds, or published in some regions and missing in others.
`find_splits` decides that, pure, from the channel table (`amibuild.channels.read.channels`) and
each image's fingerprint.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Mapping, Sequence

from amibuild import tags
from amibuild.aws import Aws, deadline, fan_out
from amibuild.channels.plan import PublishResult, provenance_from_images
from amibuild.channels.publish import name_pattern, plan_publish
from amibuild.channels.read import ChannelEntry, channels
from amibuild.channels.write import execute_publish, transact
from amibuild.errors import AmibuildError, ChannelSplit, DeadlineExceeded, Interrupted, PublishRefused
from amibuild.lease import Guard


@dataclass(frozen=True)
class Holding:
    """What one region of a channel holds."""

    region: str
    ami: str | None  # None: the channel is not published there
    build: str | None  # the image's "fingerprint run-id"; None: untagged, deregistered or not published
    modified: datetime | None = None
    variant: str | None = None  # the image's amibuild:variant tag

    def foreign(self, variant: str) -> bool:
        """An image of another variant (a parameter set by hand): never what the channel converges on."""
        return bool(self.variant) and self.variant != variant

    def describe(self, variant: str = "") -> str:
        if self.ami is None:
            return f"{self.region} holds nothing (not published there)"
        if not self.build:
            return f"{self.region} holds {self.ami} (no amibuild build)"
        fingerprint, _, run = self.build.partition(" ")
        other = f", an image of variant {self.variant}" if variant and self.foreign(variant) else ""
        return f"{self.region} holds {self.ami} (build {fingerprint[:12]}{', run ' + run if run else ''}{other})"


def build_of(image: Any) -> str | None:
    """Which build an image is: "fingerprint run-id" from its tags; None without a fingerprint."""
    if image is None or not image.tags.get(tags.FINGERPRINT):
        return None
    run = image.tags.get(tags.RUN_ID, "")
    return f"{image.tags[tags.FINGERPRINT]} {run}".strip()


@dataclass(frozen=True)
class Split:
    """One channel whose regions disagree."""

    variant: str
    k8s: str
    channel: str
    parameter: str
    holdings: tuple[Holding, ...]

    def describe(self) -> str:
        return (f"channel {self.channel} of {self.variant} ({self.k8s or 'any version'}) is split across regions: "
                + "; ".join(h.describe(self.variant) for h in self.holdings))

    def to_dict(self) -> dict[str, Any]:
        return {"variant": self.variant, "k8s": self.k8s, "channel": self.channel, "parameter": self.parameter,
                "regions": {h.region: {"ami": h.ami, "build": h.build} for h in self.holdings}}


def find_splits(entries: Sequence[ChannelEntry], builds: Mapping[tuple[str, str], str | None],
                variants: Mapping[tuple[str, str], str | None] | None = None) -> list[Split]:
    """Every channel whose regions disagree. Pure: the channel table, {(region, ami): fingerprint} and
    {(region, ami): the image's variant} in."""
    variants = variants or {}
    grouped: dict[tuple[str, str, str], list[ChannelEntry]] = {}
    for entry in entries:
        grouped.setdefault((entry.variant, entry.k8s, entry.channel), []).append(entry)
    splits = []
    for (variant, k8s, channel), rows in sorted(grouped.items()):
        if all(r.ami is None for r in rows):
            continue  # not published anywhere: nothing to disagree about
        holdings = tuple(Holding(r.region, r.ami, builds.get((r.region, r.ami)) if r.ami else None, r.modified,
                                 variants.get((r.region, r.ami)) if r.ami else None) for r in rows)
        if any(h.ami is None for h in holdings) or len({h.build or f"image {h.ami}" for h in holdings}) > 1:
            splits.append(Split(variant, k8s, channel, next(r.parameter for r in rows if r.parameter), holdings))
    return splits


def check(aws: Aws, *, pipeline: Any, seconds: float | None = None) -> list[Split]:
    """Read every channel of the pipeline in every region and each image's build: the split ones.

    Under a deadline (`aws.deadline`, between answers): once AWS has left every call unanswered
    for `seconds` (default 30) of waiting, it gives up with `DeadlineExceeded` naming the regions
    left UNKNOWN."""
    limit = deadline.Deadline(seconds or deadline.CHANNEL_DEADLINE, between_answers=True)
    regions = tuple(pipeline.target_regions)
    path, _ = name_pattern(pipeline, None)
    unknown: dict[str, str] = {}  # region -> what went unanswered there

    def asked(region: str, what: str, work: Callable[[], Any]) -> Any:
        try:
            return work()
        except DeadlineExceeded:
            unknown.setdefault(region, what)
            return None

    with deadline.bound(limit):
        listed = fan_out(regions, lambda r: asked(r, "ssm:GetParametersByPath", lambda: aws.parameters_under(path, r)))
        _give_up(regions, unknown, limit.seconds)
        entries = channels(aws, pipeline=pipeline, regions=regions, listed=listed)
        images = aws.images_at({(e.region, e.ami) for e in entries if e.ami},
                               each=lambda region, read: asked(region, "ec2:DescribeImages", read))
        _give_up(regions, unknown, limit.seconds)
    builds = {job: build_of(image) for job, image in images.items()}
    return find_splits(entries, builds, {job: image.tags.get(tags.VARIANT) for job, image in images.items() if image})


def _give_up(regions: Sequence[str], unknown: Mapping[str, str], seconds: float) -> None:
    if not unknown:
        return
    read = [r for r in regions if r not in unknown]
    raise DeadlineExceeded(
        f"channels: no answer from AWS within {seconds:g} s ({'; '.join(f'{w} in {r}' for r, w in unknown.items())}); "
        f"gave up: UNKNOWN: {', '.join(r for r in regions if r in unknown)}; read: {', '.join(read) or 'none'}. "
        "Nothing was written; run `amibuild channels --check` again once AWS answers")


@dataclass(frozen=True)
class Choice:
    """The build a split channel converges on, its image per region, and why."""

    build: str
    amis: Mapping[str, str]
    why: str


def choose(split: Split, candidates: Mapping[str, Mapping[str, str]]) -> Choice | None:
    """The build to converge on (pure): of the builds some region holds, the one written last among those
    with an available image in every region (`candidates`: build -> {region: ami}). None: no such build."""
    regions = [h.region for h in split.holdings]
    held = sorted((h for h in split.holdings if h.build),
                  key=lambda h: (h.modified.timestamp() if h.modified else 0.0), reverse=True)
    for n, holding in enumerate(held):
        amis = candidates.get(holding.build or "", {})
        if all(r in amis for r in regions):
            newer = [h for h in held[:n] if h.build != holding.build]
            partial = sorted({_short(h.build) for h in newer if not h.foreign(split.variant)})
            others = sorted({f"{_short(h.build)} is an image of variant {h.variant}" for h in newer
                             if h.foreign(split.variant)})
            reasons = [f"{', '.join(partial)} is not available everywhere"] if partial else []
            why = (f"{holding.region} holds it from the newest write" if not newer else
                   f"it is the newest build with an available image in every region "
                   f"({'; '.join(reasons + others)})")
            return Choice(holding.build or "", {r: amis[r] for r in regions}, why)
    return None


def _candidates(aws: Aws, pipeline: Any, split: Split) -> dict[str, dict[str, str]]:
    """For every build some region holds: its available image in each region of the pipeline."""
    builds = sorted({h.build for h in split.holdings if h.build})
    regions = [h.region for h in split.holdings]

    def look(job: tuple[str, str]) -> str | None:
        build, region = job
        fingerprint, _, run = build.partition(" ")
        wanted = {f"tag:{tags.FINGERPRINT}": [fingerprint], f"tag:{tags.VARIANT}": [split.variant],
                  **({f"tag:{tags.RUN_ID}": [run]} if run else {})}
        found = [image for image, _ in aws.own_images(region, wanted) if image.state == "available"]
        return sorted(found, key=lambda i: i.creation_date)[-1].image_id if found else None

    seen = fan_out([(b, r) for b in builds for r in regions], look)
    out: dict[str, dict[str, str]] = {}
    for (build, region), ami in seen.items():
        if ami:
            out.setdefault(build, {})[region] = ami
    return out


@dataclass(frozen=True)
class Repaired:
    split: Split
    choice: Choice
    result: PublishResult


def repair(aws: Aws, *, pipeline: Any, split: Split, guard: Guard | None = None) -> Repaired:
    """Bring one split channel to one build under its lease; `PublishRefused` when no build can be chosen."""
    variant = next((v for v in pipeline.variants if v.name == split.variant
                    and (not split.k8s or v.kubernetes_version == split.k8s)), None)
    if variant is None:
        raise PublishRefused(f"{split.describe()}; variant {split.variant} {split.k8s} is not in the pipeline file, "
                             "so amibuild cannot write it: publish it from a pipeline file that has it")
    chosen: list[Choice] = []

    def work(turn: Callable[[], bool]) -> PublishResult:
        again = check_one(aws, pipeline, split)  # read again under the lease
        if again is None:
            chosen.append(Choice("", {}, "it was whole when read again under the lease"))
            raise _Whole()
        choice = choose(again, _candidates(aws, pipeline, again))
        if choice is None:
            raise PublishRefused(f"{again.describe()}; no build any region holds has an available image in every "
                                 "region, so none was chosen: publish one to every region with "
                                 "`amibuild publish --ami REGION=AMI,...`")
        chosen.append(choice)
        images = {r: aws.find_image(r, a) for r, a in choice.amis.items()}
        plan = plan_publish(aws, pipeline=pipeline, variant=variant, channel=split.channel, amis=choice.amis,
                            provenance=provenance_from_images(images), operation="repair",
                            note=f"repaired a split channel to build {_short(choice.build)}")
        return execute_publish(aws, plan, cancelled=turn)

    try:
        result = transact(aws, pipeline=pipeline, variant=variant, channels=[split.channel],
                          operation=f"repair {split.channel}", guard=guard or Guard(), work=work)
    except _Whole:
        return Repaired(split, chosen[0], PublishResult("repair", split.parameter, split.variant, split.channel, ()))
    return Repaired(split, chosen[0], result)


def _short(build: str | None) -> str:
    fingerprint, _, run = (build or "").partition(" ")
    return f"{fingerprint[:12]} (run {run})" if run else fingerprint[:12]


class _Whole(Exception):
    """Read again under the lease, the channel was whole: nothing to repair."""


def check_one(aws: Aws, pipeline: Any, split: Split) -> Split | None:
    """The split channel as it is now (None: whole again)."""
    return next((s for s in check(aws, pipeline=pipeline)
                 if (s.variant, s.k8s, s.channel) == (split.variant, split.k8s, split.channel)), None)


def repair_lines(done: Repaired) -> list[str]:
    if not done.choice.build:
        return [f"channel {done.split.channel} of {done.split.variant}: whole again, nothing written "
                f"({done.choice.why})"]
    return [f"channel {done.split.channel} of {done.split.variant}: repaired to build {_short(done.choice.build)} "
            f"because {done.choice.why}"] + [
        f"  {r.region}: " + (f"{r.previous_ami or 'nothing'} -> {r.ami} (version {r.version})" if r.action == "write"
                             else f"{r.ami} already") for r in done.result.regions]


@dataclass(frozen=True)
class RepairOutcome:
    """What `repair_all` did with one split channel: ``done`` when it was handled to its end, else
    ``error`` (refused, failed, or interrupted) and whether it was ``started`` at all."""

    split: Split
    done: Repaired | None = None
    error: str = ""
    started: bool = True

    def to_dict(self) -> dict[str, Any]:
        done = self.done
        return {"channel": self.split.channel, "variant": self.split.variant, "k8s": self.split.k8s,
                "repaired": done is not None, "started": self.started, "error": self.error or None,
                "build": done.choice.build if done else None, "why": done.choice.why if done else None,
                "result": done.result.to_dict() if done else None}


def repair_all(aws: Aws, *, pipeline: Any, splits: Sequence[Split], guard: Guard | None = None) -> list[RepairOutcome]:
    """Repair each split channel in turn; an outcome for every one, in the order handled. A channel
    that cannot be repaired does not stop the others; after a signal (``guard.cancelled``) the one
    in flight finishes and no other is started."""
    guard = guard or Guard()
    done: list[RepairOutcome] = []
    for split in splits:
        if guard.cancelled():
            done.append(RepairOutcome(split, error="not started: a signal came first", started=False))
            continue
        try:
            done.append(RepairOutcome(split, repair(aws, pipeline=pipeline, split=split, guard=guard)))
        except AmibuildError as exc:
            done.append(RepairOutcome(split, error=str(exc)))
    return done


def outcome_lines(outcome: RepairOutcome) -> list[str]:
    """The lines of one channel's repair: what moved, or why nothing did."""
    if outcome.done is not None:
        return repair_lines(outcome.done)
    split = outcome.split
    if not outcome.started:
        return [f"channel {split.channel} of {split.variant}: NOT repaired ({outcome.error}): {split.describe()}"]
    return [f"channel {split.channel} of {split.variant}: NOT repaired: {outcome.error}"]


def repair_verdict(outcomes: Sequence[RepairOutcome], *, signal: str = "", exit_code: int = 0) -> AmibuildError | None:
    """What a `--repair` run means (pure): None when every split channel was handled; `Interrupted`
    (128 + the signal) after a signal, or `ChannelSplit` when a channel is still split, each naming
    what was repaired and what was not."""
    repaired = [o.split.channel for o in outcomes if o.done is not None]
    left = [f"{o.split.channel} of {o.split.variant}" for o in outcomes if o.done is None]
    said = (f"repaired: {', '.join(repaired)}" if repaired else "nothing repaired") + (
        f"; NOT repaired: {', '.join(left)}" if left else "")
    if signal:
        return Interrupted(f"interrupted by {signal}: {said}", exit_code or Interrupted.exit_code, summary=True)
    if left:
        return ChannelSplit(f"{len(left)} of {len(outcomes)} split channel(s) NOT repaired ({said}); each line "
                            "above says why")
    return None


@dataclass(frozen=True)
class ChannelCheck:
    """`channels --check`: the split channels; with `--repair` (``repaired`` not None) what became of each."""

    splits: tuple[Split, ...]
    repaired: tuple[RepairOutcome, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        outcomes = [o.to_dict() for o in self.repaired or ()]
        return {"split": [s.to_dict() for s in self.splits],
                "repaired": [{k: o[k] for k in ("channel", "variant", "build", "why", "result")}
                             for o in outcomes if o["repaired"]],
                **({"channels": outcomes} if self.repaired is not None else {})}

    def lines(self) -> list[str]:
        """A line per split channel; with --repair a line (or more) per channel, in the order handled, moved or not."""
        lines = ([s.describe() for s in self.splits] if self.repaired is None
                 else [x for o in self.repaired for x in outcome_lines(o)])
        return lines or ["every channel is whole: each region holds an image of the same build"]

    def raise_for_status(self, signal: str = "", exit_code: int = 0) -> None:
        """`ChannelSplit` while a channel is split (with --repair: `repair_verdict`, after ``signal`` if one came)."""
        if self.repaired is not None:
            verdict = repair_verdict(self.repaired, signal=signal, exit_code=exit_code)
            if verdict is not None:
                raise verdict
        elif self.splits:
            raise ChannelSplit(f"{len(self.splits)} channel(s) split across regions; "
                               "`amibuild channels --repair` brings each to one build")
