"""Channel gates: may this image enter this channel now? Pure: facts in, a decision out.

A pipeline file's ``channel "stable" { from = "recommended", requires = ["tested"], soak = "72h" }``
(`amibuild.pipeline.imagetests.Gate`) says what an image needs to enter ``stable``:

    from      it comes from that channel (a promote from it; a direct publish is refused)
    requires  "tested": in every region, a verified test statement about this very image (its
              record today), signed by the pipeline's key, whose verdict is passed, and a verified
              provenance statement from this pipeline (`Evidence`, gathered by
              `channels.evidence`); the ``amibuild:test`` tag is a display copy that decides nothing
    soak      it has been the value of ``from`` for this long, without a rollback in between

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from itertools import takewhile
from typing import Any, Iterable, Mapping, Sequence

from amibuild import tags
from amibuild.aws import Image, Parameter
from amibuild.errors import SpecError
from amibuild.inventory.scan import Finding, ScanPolicy, judge

PASSED = "passed"
MAX_REASON = 200


@dataclass(frozen=True)
class GateDecision:
    """Whether an image may enter a gated channel now, and if not, what is missing and until when."""

    channel: str
    gate: str  # the gate as the pipeline file states it
    missing: tuple[str, ...] = ()
    due_at: datetime | None = None  # when only the soak is missing: when it will be met
    overridden: str = ""  # the reason given with --override-gate

    @property
    def met(self) -> bool:
        return not self.missing

    @property
    def passes(self) -> bool:
        return self.met or bool(self.overridden)

    def refusal(self, advice: str = 'meet the gate or pass --override-gate --reason "..."') -> str:
        return f"channel {self.channel} is gated ({self.gate}): {'; '.join(self.missing)}; {advice}"

    def note(self) -> str:
        """What goes into the channel's history with the write."""
        if self.overridden and not self.met:
            return f"gate overridden: {self.overridden}"
        return ""


@dataclass(frozen=True)
class Evidence:
    """What the pipeline's signed statements prove about one region's image, verified (`channels.evidence`).

    ``provenance``: "" when a valid provenance statement from this pipeline names the image, else
    what is wrong (none: a foreign image; unsigned; signed by another key; altered; another
    pipeline's). ``test``: the verdict of the newest valid test statement ("passed", "failed", ...),
    "" when none is valid, and then ``test_problem`` says why."""

    provenance: str = ""
    test: str = ""
    test_problem: str = ""
    scan: tuple[Finding, ...] | None = None  # the newest valid scan statement's findings (None: none valid)
    scan_problem: str = ""


def check_reason(override: bool, reason: str | None) -> str:
    """The --override-gate reason, checked: needed, one line, short enough for SSM's description."""
    if not override:
        if reason:
            raise SpecError("--reason is for --override-gate; give both or neither")
        return ""
    text = (reason or "").strip()
    if not text:
        raise SpecError("--override-gate needs --reason \"...\" (why the gate is passed; it goes into the channel's history)")
    if len(text) > MAX_REASON or any(ord(ch) < 0x20 or ch in "()" for ch in text):
        raise SpecError(f"--reason: one line of at most {MAX_REASON} characters, without parentheses")
    return text


def aws_time(answers: Iterable[datetime | None]) -> datetime | None:
    """The time AWS answered with, from the ``Date`` of each region's answer: the earliest (a soak is
    never judged met early); None when no answer carried one."""
    return min((when for when in answers if when is not None), default=None)


def soaked_since(history: Sequence[Parameter], ami: str) -> datetime | None:
    """Since when ``ami`` has been the channel's value without a break (a rollback or another image
    in between resets it); None when it is not the channel's value now."""
    unbroken = list(takewhile(lambda entry: entry.value == ami, reversed(history)))
    return unbroken[-1].last_modified if unbroken else None


def decide(gate: Any, *, images: Mapping[str, Image | None], came_from: str | None,
           source_history: Mapping[str, Sequence[Parameter]] | None = None, now: datetime | None,
           override: str = "", evidence: Mapping[str, Evidence | None] | None = None) -> GateDecision:
    """May the images ({region: Image}) enter ``gate.channel`` now?

    ``came_from``: the channel they are promoted from (None: a direct publish or build-ami's);
    ``source_history``: that channel's parameter history per region, oldest first (the soak counts
    from the latest region to take the image); ``now``: AWS's time (`aws_time`), None when unknown;
    ``evidence``: what the signed statements prove per region (for ``requires = ["tested"]``)."""
    missing: list[str] = []
    due_at = None
    if gate.source and came_from != gate.source:
        road = f"promote from {came_from}" if came_from else "a direct publish"
        missing.append(f"images enter only from channel {gate.source} (this is {road}: "
                       f"use `amibuild promote --from {gate.source} --to {gate.channel}`)")
    if "tested" in gate.requires:
        bad = [b for region, image in sorted(images.items()) if (b := _untested(region, image, (evidence or {}).get(region)))]
        if bad:
            missing.append(f"requires tested: {'; '.join(bad)}")
    if "scanned" in gate.requires:
        bad = [b for region, image in sorted(images.items())
               if (b := _unscanned(region, image, (evidence or {}).get(region), gate.scan, now))]
        if bad:
            missing.append(f"requires scanned (below {gate.scan.max_severity}): {'; '.join(bad)}")
    if gate.soak and gate.source and came_from == gate.source:
        histories = source_history or {}
        starts = {r: soaked_since(histories.get(r, ()), image.image_id) for r, image in images.items() if image}
        absent = sorted(r for r, s in starts.items() if s is None) or ([] if starts else ["every region"])
        ami = ", ".join(sorted({image.image_id for image in images.values() if image})) or "the image"
        since = None if absent else max(s for s in starts.values() if s is not None)
        if since is not None and since.tzinfo is not None:  # botocore dates it in the local zone; said as UTC
            since = since.astimezone(timezone.utc)
        needed = timedelta(seconds=gate.soak)
        if since is None:
            missing.append(f"soak: {ami} is not in {gate.source} now ({', '.join(absent)})")
        elif now is None:
            missing.append(f"soak {_human(needed)}: AWS gave no time with its answers (no Date header), "
                           "so how long the image has soaked is not known")
        elif now - since < needed:
            due_at = since + needed
            missing.append(f"soak {_human(needed)}: {ami} has been in {gate.source} for {_human(now - since)} "
                           f"(since {since:%Y-%m-%d %H:%M} UTC); due at {due_at:%Y-%m-%d %H:%M} UTC, in {_human(due_at - now)}")
    return GateDecision(gate.channel, gate.describe(), tuple(missing), due_at if len(missing) == 1 else None,
                        override)


def _unscanned(region: str, image: Image | None, proof: Evidence | None, policy: ScanPolicy,
               now: datetime | None) -> str:
    """Why one region's image does not pass its scan ("" when it does), naming each finding."""
    ami = image.image_id if image else "the image"
    if proof is None:
        return f"{region}: {ami}: no signed statements were read"
    if proof.scan is None:
        return f"{region}: {ami}: {proof.scan_problem or 'no signed scan statement'}"
    found = judge(proof.scan, policy, now or datetime.max)  # no time: every ignore counts as expired
    if now is None and found.expired and not found.refused:
        return (f"{region}: {ami}: AWS gave no time with its answers, so whether the `until` of "
                f"{', '.join(i.id for _, i in found.expired)} has passed is not known")
    return "" if found.passes else f"{region}: {ami}: {', '.join(found.reasons())}"


def _untested(region: str, image: Image | None, proof: Evidence | None) -> str:
    """Why one region's image does not count as tested ("" when it does)."""
    ami = image.image_id if image else "the image"
    if proof is None:
        return f"{region}: {ami}: no signed statements were read"
    if proof.provenance:
        return f"{region}: {ami} has no valid provenance from this pipeline ({proof.provenance})"
    if proof.test == PASSED:
        return ""
    if proof.test:
        return f"{region}: {ami}: its signed test statement says {proof.test}"
    tagged = image.tags.get(tags.TEST, "") if image else ""
    hand = (f"; its {tags.TEST} tag says {tagged}, but a tag decides nothing (anyone with ec2:CreateTags "
            "can set it)") if tagged else ""
    return (f"{region}: {ami}: {proof.test_problem or 'no signed test statement'}{hand} (run `amibuild test-ami` "
            "or build with --boot-test)")


def _human(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    # minutes only under a day
    parts = [f"{n}{unit}" for n, unit in ((days, "d"), (hours, "h"), (0 if days else minutes, "m")) if n]
    return " ".join(parts) or f"{seconds}s"
