"""Carrying out a channel plan: one transaction over every region of the channel.

`transact` holds the channel's lease (`amibuild.lease`) while its work reads, decides and writes,
all within one deadline of waiting on AWS (`amibuild.aws.deadline`: about 30 s; past it the writer
gives up, reads every region once more for its verdict, and gives its lease back when AWS answers);
`execute_publish` writes every region that needs it at once, reads each written version back,
then reads every region once more (the unchanged ones included). Any region that fails or does
not hold the intended image fails the transaction, and `_unwind` puts back what this run wrote
and says region by region what it did.

A channel write converges or says plainly that it did not.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

from amibuild import tags
from amibuild.aws import Aws, Parameter, deadline, fan_out
from amibuild.channels import safeguard
from amibuild.channels.home import known_regions, read_home, write_places
from amibuild.channels.plan import (IMAGE_DATA_TYPE, Provenance, PublishPlan, PublishResult, RegionPlan,
                                    RegionResult, description, parameter_tags, provenance_of)
from amibuild.errors import AmibuildError, ChannelBusy, Interrupted, LeaseLost, PublishConflict, PublishFailed, \
    PublishRefused
from amibuild.lease import (ChannelLease, Guard, acquire_channel, channel_lease_name, holder_gone, parse_holder,
                            prune_lease_name)
from amibuild.pipeline.naming import PipelineLike, VariantLike
from amibuild.poll import until

WRITE_INTERVAL = 0.34  # seconds between two PutParameter calls in one region (about 3 per second)
READBACK_TIMEOUT = 10.0  # how long a written version may take to become readable

PUT_BACK = "; put back by amibuild"  # in the description of a version that undid a write
_TOKEN = re.compile(r", write ([0-9a-f]{12})\)?$")


@dataclass(frozen=True)
class Turn:
    """A writer's turn at a channel, as its work sees it: whether to stop before the first write, and
    the check before every write that the leases are still its own.

    A put sent just before the writer was stopped can land after its lease ran out (SSM has no
    conditional put): found on reading back, that one write is taken back out under the lease taken
    again (`check_to_undo`, without waiting: if another writer holds it, the region is left as is)."""

    cancelled: Callable[[], bool]
    leases: tuple[ChannelLease, ...] = ()
    margin: float = 0.0  # seconds the leases must still be good for at each write
    regain: Callable[[], list[ChannelLease]] | None = None  # the leases taken again, [] when others hold them
    regained: list[ChannelLease] = field(default_factory=list)  # given back by `transact`
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self) -> bool:  # a Turn is also the `cancelled` callable
        return self.cancelled()

    def check(self, what: str) -> None:
        for lease in self.leases:
            lease.check(self.margin, what)

    def check_to_undo(self, what: str) -> None:
        """`check` before putting back a write of this writer's own; a lost lease is taken again
        (once, shared by every region's put-back). Raises `LeaseLost` when it cannot be."""
        try:
            self.check(what)
            return
        except LeaseLost as lost:
            with self._lock:
                if not self.regained and self.regain is not None:
                    self.regained.extend(self.regain())
                if not self.regained:
                    raise LeaseLost(f"{lost}; another writer holds the channel now") from lost
        for lease in self.regained:
            lease.check(self.margin, what)


def transact(aws: Aws, *, pipeline: PipelineLike, variant: VariantLike, channels: Sequence[str], operation: str,
             guard: Guard, work: Callable[[Turn], PublishResult], template: str | None = None) -> PublishResult:
    """Run `work` (read, decide, write, check) while holding the lease of every channel it touches.

    Leases are taken in name order and given back in ``finally``, whatever happened; each is held at
    the channel's home and in every region the write touches (`write_places`, which says why). While
    prune holds the pipeline's prune lease in any of those regions the writer gives its leases back
    and waits, as for a busy channel.
    """
    held: list[ChannelLease] = []
    notes: list[str] = []
    # the operation's time waiting on AWS, from its first call (`aws.deadline`)
    limit = deadline.Deadline(guard.deadline or deadline.CHANNEL_DEADLINE)
    with deadline.bound(limit):  # each recorded on its channel
        homes = {channel: read_home(aws, pipeline, variant, channel, template) for channel in sorted(set(channels))}
    wait_until = time.monotonic() + guard.wait

    def take(channel: str, wait: float) -> ChannelLease:
        lease_name = channel_lease_name(pipeline.ssm_prefix, pipeline.name, variant.name, channel)
        # meet any other first writer, and a prune of other regions, in every region both touch
        return acquire_channel(
            aws, lease_name, homes[channel], operation=f"{operation} ({variant.name})", guard=replace(guard, wait=wait),
            also=[(lease_name, region) for region in write_places(pipeline)])

    def regain() -> list[ChannelLease]:
        got: list[ChannelLease] = []
        try:
            for channel in sorted(set(channels)):
                got.append(take(channel, 0.0))
        except AmibuildError:  # busy (another writer), or AWS failed: nothing to put back under
            _release(got, [])
            return []
        return got

    def take_all() -> str | None:
        """Every lease taken, unless prune holds its lease (described): then none is kept."""
        for channel in sorted(set(channels)):
            lease = take(channel, max(0.0, wait_until - time.monotonic()))
            held.append(lease)
            if lease.note:
                notes.append(lease.note)
        pruning = _prune_holder(aws, pipeline)
        if pruning is not None:
            _release(held, [])
            held.clear()
        return pruning

    turns: list[Turn] = []
    failure: AmibuildError | None = None
    try:
        with deadline.bound(limit):  # every AWS call of the operation, in any thread it fans out to
            waited = until(take_all, done=lambda pruning: pruning is None, deadline=wait_until, interval=0.5,
                           cancelled=guard.cancelled)
            if waited.cancelled:
                raise Interrupted(f"{operation}: interrupted while prune ran ({waited.value}); nothing was written")
            if waited.timed_out:
                raise ChannelBusy(f"{operation}: prune is deregistering images of this pipeline ({waited.value}); "
                                  "nothing was written. Retry when it is done")
            margin = getattr(aws, "request_bound", lambda: 0.0)()
            turns.append(Turn(guard.cancelled, tuple(held), margin, regain))
            result = work(turns[0])
            if any(lease.expired() for lease in held):
                notes.append(f"the write outlasted its lease ({guard.ttl:.0f} s): another writer may have written "
                             "at the same time; check every region with `amibuild channels --check`")
    except AmibuildError as exc:
        failure = exc
        raise
    finally:
        # given back within what is left of the deadline, and a few seconds more when it is spent;
        # else it expires by itself, and the note says so
        with deadline.bound(deadline.Deadline(max(deadline.AFTER_DEADLINE, limit.remaining()))):
            _release([*held, *(lease for t in turns for lease in t.regained)], notes)
        if failure is not None and notes:  # the error says what became of the leases too
            failure.args = (f"{failure}; {'; '.join(notes)}", *failure.args[1:])
    return replace(result, notes=(*result.notes, *notes)) if notes else result


def _release(held: Sequence[ChannelLease], notes: list[str]) -> None:
    for lease in reversed(held):
        try:
            note = lease.release()
        except AmibuildError as exc:
            note = f"the lease {lease.name} could not be released ({exc}); it expires by itself"
        if note:
            notes.append(note)


def _prune_holder(aws: Aws, pipeline: PipelineLike) -> str | None:
    """Who holds the pipeline's prune lease (described), or None: prune may be deregistering the very
    image this write would name."""
    # in every region this writer writes: prune holds its lease in every region it prunes, so they
    # meet wherever both touch
    name = prune_lease_name(pipeline.ssm_prefix, pipeline.name)
    for current in fan_out(sorted(known_regions(pipeline)), lambda r: aws.find_parameter(name, r)).values():
        holder = parse_holder(current.value) if current is not None else None
        if holder is not None and not holder.expired(time.time()) and not holder_gone(holder):
            return holder.describe()
    return None


# ------------------------------------------------------------------------------- execute


_NEXT_PUT: dict[str, float] = {}  # region -> when its next PutParameter may go
_NEXT_PUT_LOCK = threading.Lock()


def _pace(region: str) -> None:
    """Spaces PutParameter calls `WRITE_INTERVAL` seconds apart per region (a quota per account and region)."""
    with _NEXT_PUT_LOCK:
        now = time.monotonic()
        at = max(now, _NEXT_PUT.get(region, 0.0))
        _NEXT_PUT[region] = at + WRITE_INTERVAL
    if at > now:
        time.sleep(at - now)


class _RegionFailed(Exception):
    """A write in one region failed; `version` is ours when our PutParameter had landed."""

    def __init__(self, region: str, error: AmibuildError, version: int | None) -> None:
        super().__init__(str(error))
        self.region, self.error, self.version = region, error, version


def execute_publish(aws: Aws, plan: PublishPlan, *, force: bool = False,
                    cancelled: Callable[[], bool] = lambda: False) -> PublishResult:
    """Carry out a plan: every region's write in parallel, then every region checked; all or none.

    Call it under the channel's lease (`transact`, whose `Turn` is passed as ``cancelled``: it also
    checks the lease before every write). ``cancelled`` is asked once, before the first write:
    after that the transaction runs to its end, written everywhere or put back.
    """
    turn = cancelled if isinstance(cancelled, Turn) else Turn(cancelled)
    plan.raise_for_status()  # refused: nothing written
    if turn.cancelled():
        raise Interrupted(f"{plan.operation} {plan.variant} to {plan.channel} ({plan.parameter}): interrupted "
                          "before the first write; nothing was written")
    # every image the variant's channels hold is protected (and its deprecation moved) before any
    # region points at it; a failure here stops the write with nothing written to SSM
    safeguard.apply(aws, plan.guards, turn.check)
    plan = with_token(plan, uuid.uuid4().hex[:12])
    outcomes = fan_out([w.region for w in plan.writes],
                       lambda region: _write(aws, plan, _region_plan(plan, region), force, turn))
    failures = [outcome for outcome in outcomes.values() if isinstance(outcome, _RegionFailed)]
    versions = {region: outcome for region, outcome in outcomes.items() if not isinstance(outcome, _RegionFailed)}
    if not failures:
        failures = _check_all(aws, plan, versions)
    if failures:
        raise _unwind(aws, plan, versions, failures, turn)
    return PublishResult(plan.operation, plan.parameter, plan.variant, plan.channel,
                         tuple(RegionResult(r.region, r.ami, r.action, r.previous_ami, r.previous_version,
                                            versions.get(r.region, r.previous_version)) for r in plan.regions),
                         guarded=plan.guards)


def with_token(plan: PublishPlan, token: str) -> PublishPlan:
    """The plan with this transaction's token in every write's description: how the writer tells its
    own versions (a retried put that landed twice included) from anyone else's."""
    def mark(text: str) -> str:
        text = _TOKEN.sub(")", text) if text.endswith(")") else text
        marked = f"{text[:-1]}, write {token})" if text.endswith(")") else f"{text}, write {token}"
        return marked if len(marked) <= 1024 else f"{text[:1024 - 20]}, write {token}"
    return replace(plan, regions=tuple(replace(r, description=mark(r.description)) if r.description else r
                                       for r in plan.regions))


def _ours(aws: Aws, plan: PublishPlan, r: RegionPlan, version: int) -> bool:
    """True when `version` of the channel in r.region is this transaction's write (same value, same
    tokened description): GetParameterHistory keeps each version's description."""
    entry = next((p for p in aws.parameter_history(plan.parameter, r.region) if p.version == version), None)
    return entry is not None and entry.value == r.ami and entry.description == r.description


def _check_all(aws: Aws, plan: PublishPlan, versions: dict[str, int]) -> list[_RegionFailed]:
    """Read every region of the channel once more, the unchanged ones included: each must hold the
    intended AMI (and a written one, our version). A region that does not fails the transaction."""
    seen = _read_all(aws, plan)
    failures = []
    for r in plan.regions:
        got = seen[r.region]
        ours = versions.get(r.region)
        if isinstance(got, AmibuildError):
            failures.append(_RegionFailed(r.region, got, ours))
            continue
        if got is not None and got.value == r.ami and got.data_type == IMAGE_DATA_TYPE:
            if ours is None or got.version == ours:
                continue
            try:
                if _ours(aws, plan, r, got.version):  # a retried put of ours landed after the one answered
                    versions[r.region] = got.version
                    continue
            except AmibuildError as exc:
                failures.append(_RegionFailed(r.region, exc, ours))
                continue
        holds = f"{got.value} (version {got.version})" if got is not None else "nothing (deleted)"
        failures.append(_RegionFailed(r.region, PublishConflict(
            f"read back after the write, {r.region} holds {holds}, not {r.ami}: another writer moved it"), ours))
    return failures


def _region_plan(plan: PublishPlan, region: str) -> RegionPlan:
    return next(r for r in plan.regions if r.region == region)


def _write(aws: Aws, plan: PublishPlan, r: RegionPlan, force: bool, turn: Turn) -> int | _RegionFailed:
    """One region's write: the version written, or how it failed."""
    try:
        _still_available(aws, r)
        version = _put_checked(aws, plan, r, force, turn)
        _finish(aws, plan, r, version, turn)
    except _RegionFailed as failed:
        return failed
    return version


def _still_available(aws: Aws, r: RegionPlan) -> None:
    """Right before the put: the image must be `available` in its region now (not deregistered since
    the plan read it). Raises `_RegionFailed`."""
    try:
        image = aws.find_image(r.region, r.ami)
    except AmibuildError as exc:
        raise _RegionFailed(r.region, exc, None) from exc
    if image is None or image.state != "available":
        what = "does not exist any more (deregistered)" if image is None else f"is {image.state}"
        raise _RegionFailed(r.region, PublishRefused(f"{r.region}: {r.ami} {what}; not written"), None)


def _put_checked(aws: Aws, plan: PublishPlan, r: RegionPlan, force: bool, turn: Turn) -> int:
    """Put, and check nobody wrote between our read and our write. Raises `_RegionFailed`."""
    try:
        turn.check(f"writing {r.region}")
        _pace(r.region)
        turn.check(f"writing {r.region}")
        version = aws.put_image_parameter(plan.parameter, r.ami, r.region, description=r.description)
    except AmibuildError as exc:
        raise _RegionFailed(r.region, exc, None) from exc
    if version != r.previous_version + 1 and not force:
        try:
            conflict = _conflict(aws, plan, r, version, turn)
        except AmibuildError as exc:
            raise _RegionFailed(r.region, exc, version) from exc
        if conflict is not None:
            raise _RegionFailed(r.region, conflict, None)  # _conflict took our version back out
    return version


def _finish(aws: Aws, plan: PublishPlan, r: RegionPlan, version: int, turn: Turn) -> None:
    """Read our version back (the proof), check the image is still there, then tag the parameter.
    Raises `_RegionFailed`."""
    try:
        _read_back(aws, plan.parameter, r.region, version, r.ami)
        if aws.find_image(r.region, r.ami) is None:
            raise PublishFailed(f"{plan.parameter} in {r.region}: {r.ami} was deregistered while it was written")
        turn.check(f"tagging {r.region}")
        aws.tag_parameter(plan.parameter, r.region, r.tags)
    except AmibuildError as exc:
        raise _RegionFailed(r.region, exc, version) from exc


def _conflict(aws: Aws, plan: PublishPlan, r: RegionPlan, ours: int, turn: Turn) -> PublishConflict | None:
    """Someone wrote between our read (version V) and our write: take ours back out, name both AMIs."""
    name = plan.parameter
    others = [p for p in aws.parameter_history(name, r.region) if r.previous_version < p.version < ours]
    if others and all(p.value == r.ami and p.description == r.description for p in others):
        return None  # an earlier attempt of this very request landed (a retried PutParameter): not a conflict
    theirs = next((p for p in reversed(others) if p.description != r.description), None)
    if theirs is None:
        what = f"the parameter was deleted and re-created (we read version {r.previous_version}, wrote version {ours})"
    else:
        what = (f"another writer set it to {theirs.value} (version {theirs.version}"
                f"{', by ' + theirs.user if theirs.user and theirs.user != 'N/A' else ''}) "
                f"after amibuild read version {r.previous_version} ({r.previous_ami or 'no value'})")
    stuck: tuple[str, ...] = ()
    try:
        undone = _put_back(aws, plan, r, ours, theirs, "a conflict", turn)  # theirs None: deleted again
    except LeaseLost as exc:  # another writer holds the channel now: ours stays, and the error says so as data
        undone, stuck = f"{r.region}: could NOT be put back ({exc}); it holds {r.ami}", (r.region,)
    conflict = PublishConflict(
        f"conflict on {name} in {r.region}: {what}; taking our {r.ami} (version {ours}) back out: {undone}. "
        f"Retry, or pass --force to write {r.ami} over {theirs.value if theirs else 'it'}"
    )
    conflict.stuck_regions = stuck
    return conflict


def _read_back(aws: Aws, name: str, region: str, version: int, ami: str) -> None:
    got = until(lambda: aws.find_parameter(name, region, version=version), done=lambda got: got is not None,
                timeout=READBACK_TIMEOUT, interval=0.5).value
    if got is None:
        raise PublishFailed(f"{name} in {region}: version {version} cannot be read back after {READBACK_TIMEOUT:.0f} s; "
                            f"AWS may have refused {ami} as {IMAGE_DATA_TYPE}")
    if got.value != ami or got.data_type != IMAGE_DATA_TYPE:
        raise PublishFailed(f"{name} in {region}: read back version {version} holds {got.value} ({got.data_type}), "
                            f"not {ami} ({IMAGE_DATA_TYPE})")


def _unwind(aws: Aws, plan: PublishPlan, versions: Mapping[str, int], failures: list[_RegionFailed],
            turn: Turn) -> AmibuildError:
    """Put back every region that still holds this run's write, to the value it held before the
    transaction; the error to raise says what failed, what was put back, and what every region holds."""
    to_undo = {**versions, **{f.region: f.version for f in failures if f.version is not None}}

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
            return _put_back(aws, plan, r, to_undo[region], previous, "a failed write elsewhere", turn)
        except AmibuildError as exc:
            stuck.append(region)
            return f"{region}: could NOT be put back ({exc}); it holds {r.ami}"

    # regions left holding our write: the error says so as data, not only as text (a conflict's own put-back included)
    stuck: list[str] = [f.region for f in failures if f.version is None and getattr(f.error, "stuck_regions", ())]
    notes = fan_out(sorted(to_undo), undo)
    failed = "; ".join(f"{f.region}: {f.error}" for f in failures)
    put_back = "; ".join(notes[region] for region in sorted(notes))
    verdict = after_deadline(lambda: converged(aws, plan))
    summary = f"{plan.operation} {plan.variant} to {plan.channel} ({plan.parameter}) failed, {verdict}: {failed}"
    if put_back:
        summary += f". Put back: {put_back}"
    if any(isinstance(f.error, LeaseLost) for f in failures):
        error: PublishFailed | PublishConflict = LeaseLost(summary)
    elif any(isinstance(f.error, PublishConflict) for f in failures):
        error = PublishConflict(summary)
    else:
        error = PublishFailed(summary)
    error.stuck_regions = tuple(sorted(stuck))
    return error


def after_deadline(read: Callable[[], str]) -> str:
    """``read()``; when the operation's deadline is spent, under a few seconds more of its own (one
    read of every region for the verdict: a region that answers is not called UNKNOWN)."""
    spent = deadline.current()
    if spent is None or not spent.expired():
        return read()
    with deadline.bound(deadline.Deadline(deadline.AFTER_DEADLINE)):
        return read()


def _read_all(aws: Aws, plan: PublishPlan) -> dict[str, Parameter | None | AmibuildError]:
    """Every region's channel parameter now (None: there is none), or the error reading it."""
    def look(region: str) -> Parameter | None | AmibuildError:
        try:
            return aws.find_parameter(plan.parameter, region)
        except AmibuildError as exc:
            return exc

    return fan_out([r.region for r in plan.regions], look)


def converged(aws: Aws, plan: PublishPlan) -> str:
    """The verdict on a failed transaction, from reading every region of the channel now (never from
    what this writer put back): whole when every region holds an image of one build, else SPLIT,
    and in either case what each region holds."""
    now = {region: got.value if isinstance(got, Parameter) else got for region, got in _read_all(aws, plan).items()}
    unread = [r.region for r in plan.regions if isinstance(now[r.region], AmibuildError)]
    if unread:
        return (f"what {', '.join(unread)} {'hold' if len(unread) > 1 else 'holds'} is UNKNOWN (it could not be read back: "
                f"{now[unread[0]]}); check with `amibuild channels --check` once AWS answers, and "
                "`amibuild channels --repair` if it is split")
    holds = ", ".join(f"{r.region} holds {now[r.region] or 'nothing'}" for r in plan.regions)
    before = all(now[r.region] == r.previous_ami for r in plan.regions)
    if not any(now.values()):
        return "nothing is left half moved (the channel is published in no region, as before)"
    build = _one_build(aws, now)
    if build is None:
        return (f"{holds}; whether that is one build could not be told (its images could not be read); "
                "check with `amibuild channels --check`, and `amibuild channels --repair` if it is split")
    if not build and len(now) > 1:  # regions on different builds, or published in some and not in others
        as_before = " as it was before this write" if before else ""
        return (f"the channel is SPLIT across regions{as_before} ({holds}); `amibuild channels --repair` "
                "brings it to one image, and so does the next write of it")
    if before:
        return f"nothing is left half moved (the channel is whole: every region holds what it held before; {holds})"
    if all(now[r.region] == r.ami for r in plan.regions):
        return f"yet every region holds the new image ({', '.join(f'{r.region} {r.ami}' for r in plan.regions)})"
    on = f"another writer's build {build}" if build else "another writer's image"
    return (f"the channel is whole on {on} ({', '.join(f'{r.region} {now[r.region]}' for r in plan.regions)}): "
            "this writer's own writes were taken back out")


def _one_build(aws: Aws, values: Mapping[str, str | None]) -> str | None:
    """The build (fingerprint and run id, from the images' tags) every region's value is an image
    of; "" when they are not all of one build; None when the images cannot be read."""
    if not values or not all(values.values()):
        return ""
    try:
        images = fan_out(sorted(values), lambda region: aws.find_image(region, values[region] or ""))
    except AmibuildError:
        return None
    keys = {(i.tags.get(tags.FINGERPRINT), i.tags.get(tags.RUN_ID)) if i is not None else None
            for i in images.values()}
    if len(keys) != 1 or None in keys or not next(iter(keys))[0]:
        return ""
    fingerprint, run = next(iter(keys))  # type: ignore[misc]
    return f"{fingerprint[:12]} (run {run or '-'})"


def _put_back(aws: Aws, plan: PublishPlan, r: RegionPlan, ours: int, previous: Parameter | None, why: str,
              turn: Turn) -> str:
    """Replace our write by `previous` (None: delete), only while the region still holds our write.
    Raises `LeaseLost` when the lease is lost and cannot be taken again: the region keeps our write."""
    name, region = plan.parameter, r.region
    current = aws.find_parameter(name, region)
    mine = current is not None and (current.version == ours or
                                    (current.value == r.ami and _ours(aws, plan, r, current.version)))
    if current is None or not mine:
        moved = f"version {current.version}: {current.value}" if current else "deleted"
        return f"{region}: left as is, another writer has moved it on since ({moved})"
    turn.check_to_undo(f"putting {region} back")  # LeaseLost: the caller says the region holds our write
    if turn.regained:  # the lease was lost and taken again: read once more under it
        current = aws.find_parameter(name, region)
        if current is None or not (current.version == ours or
                                   (current.value == r.ami and _ours(aws, plan, r, current.version))):
            moved = f"version {current.version}: {current.value}" if current else "deleted"
            return f"{region}: left as is, another writer has moved it on since ({moved})"
    if previous is None:
        aws.delete_parameter(name, region)
        return f"{region}: deleted again (it did not exist before)"
    if current.value == previous.value:
        return f"{region}: holds {previous.value} already"
    base = _TOKEN.sub(")", (previous.description or "").split(PUT_BACK)[0])
    if not base:
        base = description(plan.variant, plan.channel, Provenance())
    text = f"{base}{PUT_BACK} after {why}"[:1024]
    _pace(region)
    version = aws.put_image_parameter(name, previous.value, region, description=text)
    aws.tag_parameter(name, region, parameter_tags(plan.variant, plan.channel, provenance_of(base), plan.pipeline))
    if version != current.version + 1:
        return (f"{region}: put back {previous.value} as version {version}, but another writer wrote in between; "
                "check `amibuild channels --check`")
    return f"{region}: back to {previous.value} (version {version})"
