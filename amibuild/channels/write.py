"""Carrying out a channel plan: one transaction over every region of the channel.

`transact` holds the channel's lease (`amibuild.channels.lease`) while its work reads, decides
and writes; `execute_publish` writes every region that needs it at once, reads each written version back,
then reads every region once more (the unchanged ones included). Any region that fails or does
not hold the intended image fails the transaction, and `_unwind` puts back what this run wrote
(only where its own version is still the current one) and says region by region what it did.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import replace
from typing import Callable, Mapping, Sequence

from amibuild.aws import Aws, Parameter, fan_out
from amibuild.channels.lease import ChannelLease, Guard, acquire, lease_name
from amibuild.channels.plan import (IMAGE_DATA_TYPE, Provenance, PublishPlan, PublishResult, RegionPlan,  # noqa: F401
                                    RegionResult, description, parameter_tags, provenance_of)
from amibuild.errors import AmibuildError, Interrupted, PublishConflict, PublishFailed
from amibuild.pipeline.naming import PipelineLike, VariantLike

WRITE_INTERVAL = 0.34  # seconds between two PutParameter calls in one region (about 3 per second)
READBACK_TIMEOUT = 10.0  # how long a written version may take to become readable

_PUT_BACK = "; put back by amibuild"
_UNDONE = re.compile(r": (back to |deleted again|holds .* already)")  # what `_put_back` says when it undid ours


def home_region(pipeline: PipelineLike) -> str:
    """Where a pipeline's leases live: its build region (the first region it builds in)."""
    return getattr(pipeline, "build_region", None) or pipeline.target_regions[0]


def transact(aws: Aws, *, pipeline: PipelineLike, variant: VariantLike, channels: Sequence[str], operation: str,
             guard: Guard, work: Callable[[Callable[[], bool]], PublishResult]) -> PublishResult:
    """Run `work` (read, decide, write, check) while holding the lease of every channel it touches.

    Leases are taken in name order and given back in ``finally``, whatever happened.
    """
    held: list[ChannelLease] = []
    notes: list[str] = []
    try:
        for channel in sorted(set(channels)):
            lease = acquire(aws, lease_name(pipeline, variant.name, channel), home_region(pipeline),
                            operation=f"{operation} ({variant.name})", guard=guard)
            held.append(lease)
            if lease.note:
                notes.append(lease.note)
        result = work(guard.cancelled)
        if any(lease.expired() for lease in held):
            notes.append(f"the write outlasted its lease ({guard.ttl:.0f} s): another writer may have written "
                         "at the same time; check every region with `amibuild history`")
    finally:
        for lease in reversed(held):
            try:
                note = lease.release()
            except AmibuildError as exc:
                note = f"the lease {lease.name} could not be released ({exc}); it expires by itself"
            if note:
                notes.append(note)
    return replace(result, notes=(*result.notes, *notes)) if notes else result


# ------------------------------------------------------------------------------- execute


class _Pacer:
    """Spaces PutParameter calls `interval` seconds apart per region (a quota per account and region)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._next: dict[str, float] = {}
        self._lock = threading.Lock()

    def wait(self, region: str) -> None:
        with self._lock:
            now = time.monotonic()
            at = max(now, self._next.get(region, 0.0))
            self._next[region] = at + self.interval
        if at > now:
            time.sleep(at - now)


_PACER = _Pacer(WRITE_INTERVAL)


class _RegionFailed(Exception):
    """A write in one region failed; `version` is ours when our PutParameter had landed."""

    def __init__(self, region: str, error: AmibuildError, version: int | None, outside: bool = False) -> None:
        super().__init__(str(error))
        self.region, self.error, self.version = region, error, version
        self.outside = outside  # a region amibuild did not write holds another image: someone else moved it


def execute_publish(aws: Aws, plan: PublishPlan, *, force: bool = False,
            cancelled: Callable[[], bool] = lambda: False) -> PublishResult:
    """Carry out a plan: every region's write in parallel, then every region checked; all or none.

    Call it under the channel's lease (`transact`). ``cancelled`` is asked once, before the first
    write: after that the transaction runs to its end, written everywhere or put back.
    """
    plan.raise_for_status()  # refused: nothing written
    if cancelled():
        raise Interrupted(f"{plan.operation} {plan.variant} to {plan.channel} ({plan.parameter}): interrupted "
                          "before the first write; nothing was written")
    versions: dict[str, int] = {}
    failures: list[_RegionFailed] = []
    outcomes = fan_out([w.region for w in plan.writes],
                       lambda region: _guarded(lambda r: _write(aws, plan, _region_plan(plan, r), force), region))
    for region, outcome in outcomes.items():
        if isinstance(outcome, _RegionFailed):
            failures.append(outcome)
        else:
            versions[region] = outcome
    if not failures:
        failures = _check_all(aws, plan, versions)
    if failures:
        raise _unwind(aws, plan, versions, failures)
    return PublishResult(
        plan.operation, plan.parameter, plan.variant, plan.channel,
        tuple(
            RegionResult(r.region, r.ami, r.action, r.previous_ami, r.previous_version,
                         versions.get(r.region, r.previous_version))
            for r in plan.regions
        ),
    )


def _check_all(aws: Aws, plan: PublishPlan, versions: Mapping[str, int]) -> list[_RegionFailed]:
    """Read every region of the channel once more, the unchanged ones included: each must hold the
    intended AMI (and a written one, our version). A region that does not fails the transaction."""
    def look(region: str) -> Parameter | None | AmibuildError:
        try:
            return aws.find_parameter(plan.parameter, region)
        except AmibuildError as exc:
            return exc

    seen = fan_out([r.region for r in plan.regions], look)
    failures = []
    for r in plan.regions:
        got = seen[r.region]
        ours = versions.get(r.region)
        if isinstance(got, AmibuildError):
            failures.append(_RegionFailed(r.region, got, ours))
            continue
        if got is not None and got.value == r.ami and got.data_type == IMAGE_DATA_TYPE and \
                (ours is None or got.version == ours):
            continue
        holds = f"{got.value} (version {got.version})" if got is not None else "nothing (deleted)"
        failures.append(_RegionFailed(r.region, PublishConflict(
            f"read back after the write, {r.region} holds {holds}, not {r.ami}: another writer moved it"), ours,
            outside=ours is None))
    return failures


def _guarded(work: Callable[[str], int], region: str) -> int | _RegionFailed:
    try:
        return work(region)
    except _RegionFailed as failed:
        return failed


def _region_plan(plan: PublishPlan, region: str) -> RegionPlan:
    return next(r for r in plan.regions if r.region == region)


def _write(aws: Aws, plan: PublishPlan, r: RegionPlan, force: bool) -> int:
    version = _put_checked(aws, plan, r, force)
    _finish(aws, plan, r, version)
    return version


def _put_checked(aws: Aws, plan: PublishPlan, r: RegionPlan, force: bool) -> int:
    """Put, and check nobody wrote between our read and our write. Raises `_RegionFailed`."""
    try:
        _PACER.wait(r.region)
        version = aws.put_image_parameter(plan.parameter, r.ami, r.region, description=r.description)
    except AmibuildError as exc:
        raise _RegionFailed(r.region, exc, None) from exc
    if version != r.previous_version + 1 and not force:
        try:
            conflict = _conflict(aws, plan, r, version)
        except AmibuildError as exc:
            raise _RegionFailed(r.region, exc, version) from exc
        if conflict is not None:
            raise _RegionFailed(r.region, conflict, None)  # _conflict took our version back out
    return version


def _finish(aws: Aws, plan: PublishPlan, r: RegionPlan, version: int) -> None:
    """Read our version back (the proof), then tag the parameter. Raises `_RegionFailed`."""
    try:
        _read_back(aws, plan.parameter, r.region, version, r.ami)
        aws.tag_parameter(plan.parameter, r.region, r.tags)
    except AmibuildError as exc:
        raise _RegionFailed(r.region, exc, version) from exc


def _conflict(aws: Aws, plan: PublishPlan, r: RegionPlan, ours: int) -> PublishConflict | None:
    """Someone wrote between our read (version V) and our write: take ours back out, name both AMIs."""
    name = plan.parameter
    others = [p for p in aws.parameter_history(name, r.region) if r.previous_version < p.version < ours]
    if others and all(p.value == r.ami and p.description == r.description for p in others):
        return None  # an earlier attempt of this very request landed (a retried PutParameter): not a conflict
    theirs = others[-1] if others else None
    if theirs is None:
        what = f"the parameter was deleted and re-created (we read version {r.previous_version}, wrote version {ours})"
        undone = _put_back(aws, plan, r.region, ours, None, "a conflict")
    else:
        what = (f"another writer set it to {theirs.value} (version {theirs.version}"
                f"{', by ' + theirs.user if theirs.user and theirs.user != 'N/A' else ''}) "
                f"after amibuild read version {r.previous_version} ({r.previous_ami or 'no value'})")
        undone = _put_back(aws, plan, r.region, ours, theirs, "a conflict")
    return PublishConflict(
        f"conflict on {name} in {r.region}: {what}; our {r.ami} (version {ours}) was taken back out: {undone}. "
        f"Retry, or pass --force to write {r.ami} over {theirs.value if theirs else 'it'}"
    )


def _read_back(aws: Aws, name: str, region: str, version: int, ami: str) -> None:
    deadline = time.monotonic() + READBACK_TIMEOUT
    while True:
        got = aws.find_parameter(name, region, version=version)
        if got is not None:
            break
        if time.monotonic() > deadline:
            raise PublishFailed(
                f"{name} in {region}: version {version} cannot be read back after {READBACK_TIMEOUT:.0f} s; "
                f"AWS may have refused {ami} as {IMAGE_DATA_TYPE}"
            )
        time.sleep(0.5)
    if got.value != ami or got.data_type != IMAGE_DATA_TYPE:
        raise PublishFailed(
            f"{name} in {region}: read back version {version} holds {got.value} ({got.data_type}), "
            f"not {ami} ({IMAGE_DATA_TYPE})"
        )


def _unwind(aws: Aws, plan: PublishPlan, versions: Mapping[str, int], failures: list[_RegionFailed]) -> AmibuildError:
    """Put back every region this run wrote; the error to raise says what failed and what was put back."""
    to_undo = dict(versions)
    to_undo.update({f.region: f.version for f in failures if f.version is not None})

    def undo(region: str) -> str:
        r = _region_plan(plan, region)
        previous = None
        try:
            if r.previous_version:
                previous = next((p for p in aws.parameter_history(plan.parameter, region)
                                 if p.version == r.previous_version), None)
                if previous is None:  # history lost it (deleted meanwhile): put the value back all the same
                    previous = Parameter(plan.parameter, region, r.previous_ami or "", r.previous_version,
                                         IMAGE_DATA_TYPE)
            return _put_back(aws, plan, region, to_undo[region], previous, "a failed write elsewhere")
        except AmibuildError as exc:
            stuck.append(region)
            return f"{region}: could NOT be put back ({exc}); it holds {r.ami}"

    stuck: list[str] = []  # regions left holding our write: the error says so as data, not only as text
    notes = fan_out(sorted(to_undo), undo)
    failed = "; ".join(f"{f.region}: {f.error}" for f in failures)
    put_back = "; ".join(notes[region] for region in sorted(notes))
    # the claim is made only when it is true: every write of ours undone, and no region moved by
    # someone else (a writer that takes no lease) under our feet
    whole = all(_UNDONE.search(note) for note in notes.values()) and not any(f.outside for f in failures)
    verdict = "nothing is left half moved" if whole else "CHECK the channel with `amibuild history`, its regions may differ"
    summary = f"{plan.operation} {plan.variant} to {plan.channel} ({plan.parameter}) failed, {verdict}: {failed}"
    if put_back:
        summary += f". Put back: {put_back}"
    conflict = any(isinstance(f.error, PublishConflict) for f in failures)
    error = PublishConflict(summary) if conflict else PublishFailed(summary)
    error.stuck_regions = tuple(sorted(stuck))
    return error


def _put_back(aws: Aws, plan: PublishPlan, region: str, ours: int, previous: Parameter | None, why: str) -> str:
    """Replace our version `ours` by `previous` (None: delete), only while ours is still the current one."""
    name = plan.parameter
    current = aws.find_parameter(name, region)
    if current is None or current.version != ours:
        moved = f"version {current.version}: {current.value}" if current else "deleted"
        return f"{region}: left as is, another writer has moved it on since ({moved})"
    if previous is None:
        aws.delete_parameter(name, region)
        return f"{region}: deleted again (it did not exist before)"
    if current.value == previous.value:
        return f"{region}: holds {previous.value} already"
    base = (previous.description or "").split(_PUT_BACK)[0]
    if not base:
        base = description(plan.variant, plan.channel, Provenance())
    text = f"{base}{_PUT_BACK} after {why}"[:1024]
    _PACER.wait(region)
    version = aws.put_image_parameter(name, previous.value, region, description=text)
    aws.tag_parameter(name, region, parameter_tags(plan.variant, plan.channel, provenance_of(base), plan.pipeline))
    if version != ours + 1:
        return (f"{region}: put back {previous.value} as version {version}, but another writer wrote in between; "
                "check `amibuild history`")
    return f"{region}: back to {previous.value} (version {version})"
