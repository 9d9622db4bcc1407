"""The one lease amibuild takes: at most one holder at a time for a name, kept as an SSM parameter.

Every lease lives under one folder of the pipeline's own path, ``{ssm_prefix}/{pipeline}/_leases/``:

    _leases/build/{variant}/{fingerprint}   one build of one image at a time (`build_lease_name`)
    _leases/channel/{variant}/{channel}     one writer of a channel at a time (`channel_lease_name`)
    _leases/prune                           prune and the channel writers exclude each other (`prune_lease_name`)

The IAM policy that lets build-ami write the pipeline's channels covers the folder, and no
channel name can take that shape (variant and channel names start with a letter). `is_lease`
tells every reader that lists parameters (prune, channels, clean-run) what to skip.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import contextlib
import contextvars
import getpass
import json
import os
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterator, Protocol, Sequence

from amibuild.errors import AmibuildError, ChannelBusy, Interrupted, LeaseLost
from amibuild.poll import settled, until

DEFAULT_TTL = 900.0  # seconds; a build renews it every third of it while it works


class LeaseStore(Protocol):
    def put_parameter_if_absent(self, name: str, value: str, region: str, *, description: str = "") -> int | None: ...
    def find_parameter(self, name: str, region: str) -> Any: ...
    def parameter_history(self, name: str, region: str) -> list[Any]: ...
    def overwrite_parameter(self, name: str, value: str, region: str, *, description: str = "") -> int: ...
    def delete_parameter_if_value(self, name: str, value: str, region: str) -> bool: ...


def _utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, timezone.utc)


@dataclass(frozen=True)
class Holder:
    """Who holds a lease, as its parameter says."""

    owner: str
    run_id: str
    expires: float  # epoch seconds, on the holder's clock
    operation: str = ""
    token: str = ""
    raw: str = ""  # the parameter's value, to delete it only if unchanged
    machine: str = ""  # the holder's boot and pid namespace (`MACHINE`): "" when not recorded

    def expired(self, now: float) -> bool:
        return now >= self.expires

    def to_value(self) -> str:
        return json.dumps({"owner": self.owner, "run_id": self.run_id, "operation": self.operation, "token": self.token,
                           "expires": _utc(self.expires).isoformat(), "machine": self.machine}, sort_keys=True)

    @classmethod
    def from_value(cls, text: str) -> Holder | None:
        """The holder a lease names; None when the value is not a lease amibuild wrote."""
        try:
            raw = json.loads(text)
            expires = raw["expires"]
            if isinstance(expires, (int, float)) and not isinstance(expires, bool):
                epoch = float(expires)
            else:
                when = datetime.fromisoformat(str(expires))
                epoch = (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()
            return cls(str(raw["owner"]), str(raw.get("run_id", "")), epoch, str(raw.get("operation", "")),
                       str(raw.get("token", "")), text, str(raw.get("machine", "")))
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
            return None

    def describe(self) -> str:
        """The holder as a channel writer names it: owner first."""
        run = f", run {self.run_id}" if self.run_id else ""
        return f"{self.owner} ({self.operation}{run}, lease until {_utc(self.expires):%H:%M:%S} UTC)"

    def __str__(self) -> str:
        """The holder as a build names it: run first."""
        return f"run {self.run_id} ({self.owner}, lease until {_utc(self.expires):%Y-%m-%dT%H:%M:%SZ})"


UNREADABLE = "an unreadable value"


def parse_holder(raw: str) -> Holder:
    """The holder from a lease value; a value that is not ours reads as an already expired lease."""
    return Holder.from_value(raw) or Holder(UNREADABLE, "unknown", 0.0, raw=raw)


def _machine() -> str:
    """This boot of this machine and this process's pid namespace: containers on one host may share its
    host name, never their pids. "" where /proc does not tell."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            return f"{boot.read().strip()}:{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return ""


MACHINE = _machine()


def holder_gone(holder: Holder) -> bool:
    """True when the holder ran on this machine, in this pid namespace, and its process no longer exists:
    a crashed run whose lease need not be waited out. Other holders are judged by expiry alone."""
    host, _, pid = holder.owner.rpartition(" pid ")
    if not pid.isdigit() or host.rpartition("@")[2] != socket.gethostname() or holder.machine != MACHINE:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's live process
        return False
    return False


def default_owner() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no user name in a bare container: the pid and host still tell holders apart
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()} pid {os.getpid()}"


class Lease:
    """One lease on `name` in `region` for one holder. Its worker and a renewing thread may share it."""

    def __init__(self, store: LeaseStore, name: str, region: str, *, run_id: str, owner: str | None = None,
                 operation: str = "", ttl: float = DEFAULT_TTL, clock: Callable[[], float] = time.time,
                 description: str = "", monotonic: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.name = name
        self.region = region
        self.run_id = run_id
        self.owner = owner or default_owner()
        self.operation = operation
        self.ttl = ttl
        self.clock = clock
        self.monotonic = monotonic
        self.description = (description or f"amibuild lease held by run {run_id}")[:1024]
        self.token = uuid.uuid4().hex  # tells this lease's own value from any other, even of the same run
        self.took_over: Holder | None = None  # the stale holder this lease replaced, if any
        self.took_over_why = ""  # "expired" or "gone" (its process on this machine no longer exists)
        self._value: str | None = None
        self._since = 0.0  # monotonic time the held value's expiry was set at (its take or renewal)
        self._made: dict[str, float] = {}  # value -> monotonic time its expiry was set at
        self._lock = threading.Lock()

    @property
    def held(self) -> bool:
        return self._value is not None

    def expired(self) -> bool:
        """True once the lease has run out on our own clock: others may have taken it over."""
        return self.remaining() <= 0

    def remaining(self) -> float:
        """Seconds left before others may take the lease over, on our own monotonic clock (which
        runs on while the process is stopped: a SIGSTOPped holder finds its lease run out)."""
        return self.ttl - (self.monotonic() - self._since) if self.held else 0.0

    def ensure(self, margin: float) -> bool:
        """Make sure the lease is still ours for at least `margin` more seconds, renewing it when
        less is left: False when it is not (expired, or taken over). A writer asks this before each
        write, with a margin longer than one request can last, so no write can land after others
        may have taken the lease over."""
        if not self.held:
            return False
        if self.remaining() > margin:
            return True
        if self.expired():  # run out: someone may hold it now, whatever the parameter says next
            with self._lock:
                self._value = None
            return False
        return self.renew()

    def _new_value(self) -> str:
        started = self.monotonic()
        value = Holder(self.owner, self.run_id, round(self.clock() + self.ttl, 3), self.operation,
                       self.token, machine=MACHINE).to_value()
        self._made[value] = started
        while len(self._made) > 8:  # a waiter makes a value a try: the latest few are the ones a put can have left
            del self._made[next(iter(self._made))]
        return value

    def _hold(self, value: str) -> None:
        # counted from when its expiry was set, not from when the put answered (a throttled put is retried
        # for a while): others may take the lease over at the expiry the value says
        self._value = value
        self._since = self._made.get(value, self.monotonic())
        self._made.clear()

    def try_acquire(self) -> Holder | None:
        """Take the lease: None when this lease now holds it, else the live holder."""
        with self._lock:
            for _ in range(3):  # released or taken over in between: look again a few times
                value = self._new_value()
                if self.store.put_parameter_if_absent(self.name, value, self.region,
                                                      description=self.description) is not None:
                    self._hold(value)
                    return None
                current = self.store.find_parameter(self.name, self.region)
                if current is None:
                    continue  # released between our two calls
                holder = parse_holder(current.value)
                if holder.token == self.token:
                    self._hold(current.value)  # ours already (a retry after a lost answer)
                    return None
                if not holder.expired(self.clock()) and not holder_gone(holder):
                    return holder
                self._take_over(current)
                if self.held:
                    return None
            current = self.store.find_parameter(self.name, self.region)
            return parse_holder(current.value) if current is not None else Holder("unknown", "unknown", 0.0)

    def _take_over(self, stale: Any) -> bool:
        """Overwrite `stale` (a parameter version whose holder expired or is gone). Of several takers
        at once only the one whose put follows the stale version directly holds the lease; the others
        put back the value their put replaced, so the winner's value stands."""
        value = self._new_value()
        version = self.store.overwrite_parameter(self.name, value, self.region, description=self.description)
        replaced = next((p for p in self.store.parameter_history(self.name, self.region)
                         if p.version == version - 1), None)
        # the version number alone does not prove it: the stale lease may have been given back and taken
        # afresh meanwhile (versions count from 1 again), so the version replaced must be the stale value
        if version == stale.version + 1 and replaced is not None and replaced.value == stale.value:
            self._hold(value)
            self.took_over = parse_holder(stale.value)
            self.took_over_why = "expired" if self.took_over.expired(self.clock()) else "gone"
            return True
        self._put_back(version, replaced)
        return False

    def _put_back(self, version: int, replaced: Any) -> None:
        """Our put (`version`) did not follow the version we read: put back the value it replaced
        (`replaced`, that version - 1), unless someone wrote after us."""
        current = self.store.find_parameter(self.name, self.region)
        if replaced is not None and current is not None and current.version == version:
            self.store.overwrite_parameter(self.name, replaced.value, self.region, description=self.description)

    def renew(self) -> bool:
        """Push the expiry out again; False when the lease is no longer ours (taken over meanwhile)."""
        with self._lock:
            if self._value is None:
                return False
            current = self.store.find_parameter(self.name, self.region)
            # another value of ours (a renewal whose put landed but whose answer was lost) is still ours
            if current is None or not self._own(current.value):
                self._value = None
                return False
            value = self._new_value()
            version = self.store.overwrite_parameter(self.name, value, self.region, description=self.description)
            if version != current.version + 1:  # a put came between our read and ours: a take-over stands,
                between = next((p for p in self.store.parameter_history(self.name, self.region)
                                if p.version == version - 1), None)
                if between is None or not self._own(between.value):  # not our own retried put
                    self._put_back(version, between)
                    self._value = None
                    return False
            self._hold(value)
            return True

    def release(self) -> bool:
        """Give the lease up; False when it was not (or no longer) ours."""
        with self._lock:
            value, self._value = self._value, None
        if value is None or self.store.delete_parameter_if_value(self.name, value, self.region):
            return value is not None
        current = self.store.find_parameter(self.name, self.region)  # ours still: a renewal's put whose answer was lost
        return (current is not None and self._own(current.value)
                and self.store.delete_parameter_if_value(self.name, current.value, self.region))

    def _own(self, value: str) -> bool:
        """Whether `value` is one this lease wrote (any of its values: each carries its token)."""
        return parse_holder(value).token == self.token


# ------------------------------------------------------------------------------- names

LEASE_DIR = "_leases"  # every lease of a pipeline lives under {ssm_prefix}/{pipeline}/_leases/


def lease_root(ssm_prefix: str, pipeline: str) -> str:
    """The folder that holds every lease of a pipeline."""
    return f"{ssm_prefix.rstrip('/')}/{pipeline}/{LEASE_DIR}"


def build_lease_name(ssm_prefix: str, pipeline: str, variant: str, fingerprint: str) -> str:
    """The build lease of one (pipeline, variant, fingerprint)."""
    return f"{lease_root(ssm_prefix, pipeline)}/build/{variant}/{fingerprint[:32]}"


def channel_lease_name(ssm_prefix: str, pipeline: str, variant: str, channel: str) -> str:
    """A channel's write lease. It depends on the pipeline, variant and channel only, not on the
    parameter name template, so every writer of one channel meets at the same lease."""
    return f"{lease_root(ssm_prefix, pipeline)}/channel/{variant}/{channel}"


def prune_lease_name(ssm_prefix: str, pipeline: str) -> str:
    """The lease prune holds while it deregisters; channel writers do not write while it is held."""
    return f"{lease_root(ssm_prefix, pipeline)}/prune"


def is_lease(name: str) -> bool:
    """True for any lease amibuild writes (build, channel, prune): what every reader that lists
    parameters skips."""
    return f"/{LEASE_DIR}/" in name or name.endswith(f"/{LEASE_DIR}")


@contextlib.contextmanager
def kept_alive(held: Callable[[], Sequence[Lease]]) -> Iterator[None]:
    """While the block runs, renew the leases `held()` names every third of their shortest ttl (of a
    minute when none is held yet): a build or a prune can outlast its lease. A renewal AWS does not
    answer is tried again the next round; expiry is the backstop."""
    done = threading.Event()

    def renew() -> None:
        while True:
            leases = [lease for lease in held() if lease.held]
            if done.wait(min((lease.ttl for lease in leases), default=60.0) / 3):
                return
            for lease in leases:
                with contextlib.suppress(AmibuildError):
                    lease.renew()

    renewer = threading.Thread(target=renew, name="lease-renewer", daemon=True)
    renewer.start()
    try:
        yield
    finally:
        done.set()
        renewer.join()


def wait_for(lease: Lease, *, wait: float, poll: float = 0.5, cancelled: Callable[[], bool] = lambda: False,
             sleep: Callable[[float], Any] = time.sleep) -> Holder | None:
    """Try to take `lease` until it is ours or `wait` seconds have passed: None when it is ours, else
    the holder that kept it. Stops early (returning the holder) when ``cancelled()`` says so."""
    return until(lease.try_acquire, done=lambda theirs: theirs is None, timeout=wait, interval=poll,
                 cancelled=cancelled, sleep=sleep).value


# ------------------------------------------------------------------------------- channel writers

# Seconds a channel lease is good for. A channel write takes seconds; this leaves room for minutes of
# throttling retries before anyone may take the lease over, and is how long a writer that died
# holding it blocks the channel. Configurable (`amibuild.lease_ttl`), e.g. shorter in tests.
LEASE_TTL = 300.0
LEASE_WAIT = 30.0  # how long a writer waits for a busy channel by default
POLL = 0.5  # seconds between two looks at a busy lease


@dataclass(frozen=True)
class Guard:
    """How a channel write waits for, holds and gives up its lease, and when it must stop early.

    ``cancelled`` is asked before the first write: True (a signal came) means stop with nothing
    written. Once the first write is sent the transaction runs to its end (written everywhere,
    or put back), whatever ``cancelled`` says.
    """

    run_id: str = ""
    wait: float = LEASE_WAIT
    ttl: float = LEASE_TTL
    cancelled: Callable[[], bool] = lambda: False
    owner: str = field(default_factory=default_owner)
    deadline: float | None = None  # seconds of waiting on AWS the operation may spend (None: `aws.deadline`'s 30)


class ChannelLease:
    """A held channel lease (and the leases beside it in the other regions); `release` gives them
    all back (only if still ours) and says when one was not; `check` refuses a write once the lease
    may be someone else's."""

    def __init__(self, lease: Lease, *others: Lease | None) -> None:
        self.lease = lease
        self.others = tuple(o for o in others if o is not None)
        self.name = lease.name
        taker = next((x for x in (lease, *self.others) if x.took_over is not None), None)
        self.took_over = taker.took_over if taker is not None else None
        self.note = ""  # said to the user: whose stale lease was taken over
        if self.took_over is not None:
            who = self.took_over.describe() if Holder.from_value(self.took_over.raw) else UNREADABLE
            if taker.took_over_why == "expired":
                self.note = f"took over the expired lease of {who}: that writer stopped without releasing it"
            else:  # not expired yet: its holder ran here and its process is gone (`holder_gone`)
                self.note = (f"took over the lease of {who}: that writer's process on this machine is gone, "
                             "it stopped without releasing it")

    def expired(self) -> bool:
        """True once the lease has run out on our own clock: others may have taken it over."""
        return self.lease.expired()

    def check(self, margin: float, what: str) -> None:
        """Raise `LeaseLost` unless the lease is ours for `margin` more seconds (renewing it if need be)."""
        for lease in (self.lease, *self.others):
            try:
                ok = lease.ensure(margin)
            except AmibuildError as exc:
                raise LeaseLost(f"the lease {lease.name} could not be checked before {what} ({exc})") from exc
            if not ok:
                raise LeaseLost(f"the lease {lease.name} ran out (it is good for {lease.ttl:.0f} s) or was taken "
                                f"over before {what}: this writer stopped writing")

    def release(self) -> str:
        """Delete the lease(s) if still ours (in parallel: one per region it writes); a note when one
        is not (or could not be deleted)."""
        return "; ".join(str(n) for n in _each([self.lease, *self.others], self._release) if n)

    @staticmethod
    def _release(lease: Lease) -> str:
        try:
            if lease.release():
                return ""
            current = lease.store.find_parameter(lease.name, lease.region)
        except AmibuildError as exc:
            return f"the lease {lease.name} in {lease.region} could not be released ({exc}); it expires by itself"
        theirs = Holder.from_value(current.value) if current else None
        return (f"the lease {lease.name} expired during the write and "
                f"{'was taken over by ' + theirs.describe() if theirs else 'is gone'}")


def acquire_channel(store: LeaseStore, name: str, region: str, *, operation: str, guard: Guard,
                    also: Sequence[tuple[str, str]] = (),
                    clock: Callable[[], float] = time.time) -> ChannelLease:
    """Take the channel lease `name` in `region` (and the leases beside it: ``also``, each (name,
    region)), waiting up to ``guard.wait`` seconds in all for their holders."""
    def make(lease_name: str, lease_region: str) -> Lease:
        return Lease(store, lease_name, lease_region, run_id=guard.run_id, owner=guard.owner, operation=operation,
                     ttl=guard.ttl, clock=clock, description=f"amibuild channel lease: {operation}")

    beside = [place for place in also if place != (name, region)]
    deadline = time.monotonic() + guard.wait

    def take() -> ChannelLease | Holder:
        """The leases, held; else the holder that keeps one of them."""
        lease = make(name, region)
        theirs = wait_for(lease, wait=max(0.0, deadline - time.monotonic()), poll=POLL, cancelled=guard.cancelled)
        if theirs is not None:
            return theirs
        others = [make(*place) for place in dict.fromkeys(beside)]  # one per region: taken at once
        answers = _each(others, lambda other: other.try_acquire())
        failed = next((a for a in answers if isinstance(a, BaseException)), None)
        theirs = next((a for a in answers if isinstance(a, Holder)), None)
        if failed is None and theirs is None:
            return ChannelLease(lease, *others)
        # another writer there (or AWS failed): let go, wait
        _each([o for o, a in zip(others, answers, strict=True) if a is None] + [lease], lambda m: m.release())
        if failed is not None:
            raise failed
        return theirs

    waited = until(take, done=lambda got: isinstance(got, ChannelLease), deadline=deadline, interval=POLL,
                   cancelled=guard.cancelled)
    if isinstance(waited.value, ChannelLease):
        return waited.value
    theirs = waited.value
    if waited.cancelled:
        raise Interrupted(f"{operation}: interrupted while waiting for {theirs.describe()}; nothing was written")
    raise ChannelBusy(
        f"{operation}: the channel is being written by {theirs.describe()}; nothing was written. "
        f"Retry when it is done (it waited {guard.wait:.0f} s; a lease left by a writer that died "
        f"is taken over once it expires)"
    )


def _each(items: Sequence[Any], work: Callable[[Any], Any]) -> list[Any]:
    """`work` for every item at once (threads: each is an AWS round trip), in order; an item whose
    work raised gives its exception instead of a result."""
    def one(item: Any) -> Any:
        try:
            return work(item)
        except Exception as exc:  # handed back: the caller releases what was taken, then raises it
            return exc

    if len(items) <= 1:
        return [one(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(16, len(items)), thread_name_prefix="amibuild-lease") as pool:
        # each in a copy of the caller's context: a channel operation's deadline goes with it
        futures = [pool.submit(contextvars.copy_context().run, one, item) for item in items]
        return [settled(future) for future in futures]
