"""The one lease amibuild takes: at most one holder at a time for a name, kept as an SSM parameter.

Both the build lease (one per pipeline, variant and fingerprint, `build_lease_name`) and a
channel's write lease (`amibuild.channels.lease`, which adds waiting and its errors) are this.
It lives in the build layer because both layers may import it and it needs nothing above the
gateway; the channel layer sits above the build layer.

SSM has no compare-and-swap, but PutParameter with ``Overwrite=False`` fails with
``ParameterAlreadyExists`` when the name exists: of two runs that try at once, exactly one
creates it. The value says who holds it (owner: user, host, pid; run id; operation; a token of
this `Lease`) and until when, written with the holder's clock. The holder renews it while it
works and deletes it when done, only if it still holds its own value.

A lease past its expiry belongs to a holder that died without releasing it, and so does a lease
whose holder ran on this machine in a process that no longer exists (`holder_gone`); a value that
is not a lease amibuild wrote counts as expired. The next taker overwrites it: of several taking
over at once, only the one whose put follows the stale version directly holds it (the returned
version proves it), the others put back what they replaced. The stale holder is named
(`Lease.took_over`).

The store is anything with the `Aws` methods `put_parameter_if_absent`, `find_parameter`,
`parameter_history`, `overwrite_parameter` and `delete_parameter_if_value`.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Protocol

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

    def expired(self, now: float) -> bool:
        return now >= self.expires

    def to_value(self) -> str:
        return json.dumps({"owner": self.owner, "run_id": self.run_id, "operation": self.operation,
                           "token": self.token, "expires": _utc(self.expires).isoformat()}, sort_keys=True)

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
                       str(raw.get("token", "")), text)
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


def holder_gone(holder: Holder) -> bool:
    """True when the holder ran on this machine and its process no longer exists: a crashed run
    whose lease need not be waited out. Holders on other machines are judged by expiry alone."""
    host, _, pid = holder.owner.rpartition(" pid ")
    if not pid.isdigit() or host.rpartition("@")[2] != socket.gethostname():
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
                 description: str = "") -> None:
        self.store = store
        self.name = name
        self.region = region
        self.run_id = run_id
        self.owner = owner or default_owner()
        self.operation = operation
        self.ttl = ttl
        self.clock = clock
        self.description = (description or f"amibuild lease held by run {run_id}")[:1024]
        self.token = uuid.uuid4().hex  # tells this lease's own value from any other, even of the same run
        self.took_over: Holder | None = None  # the stale holder this lease replaced, if any
        self._value: str | None = None
        self._since = 0.0  # monotonic time of the last take or renewal
        self._lock = threading.Lock()

    @property
    def held(self) -> bool:
        return self._value is not None

    def expired(self) -> bool:
        """True once the lease has run out on our own clock: others may have taken it over."""
        return time.monotonic() - self._since >= self.ttl

    def _new_value(self) -> str:
        return Holder(self.owner, self.run_id, round(self.clock() + self.ttl, 3), self.operation,
                      self.token).to_value()

    def _hold(self, value: str) -> None:
        self._value = value
        self._since = time.monotonic()

    def try_acquire(self) -> Holder | None:
        """Take the lease: None when this lease now holds it, else the live holder."""
        with self._lock:
            return self._try_acquire()

    def _try_acquire(self) -> Holder | None:
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
        if version == stale.version + 1:
            self._hold(value)
            self.took_over = parse_holder(stale.value)
            return True
        replaced = next((p for p in self.store.parameter_history(self.name, self.region)
                         if p.version == version - 1), None)
        current = self.store.find_parameter(self.name, self.region)
        if replaced is not None and current is not None and current.version == version:
            self.store.overwrite_parameter(self.name, replaced.value, self.region, description=self.description)
        return False

    def renew(self) -> bool:
        """Push the expiry out again; False when the lease is no longer ours (taken over meanwhile)."""
        with self._lock:
            if self._value is None:
                return False
            current = self.store.find_parameter(self.name, self.region)
            if current is None or current.value != self._value:
                self._value = None
                return False
            value = self._new_value()
            self.store.overwrite_parameter(self.name, value, self.region, description=self.description)
            self._hold(value)
            return True

    def release(self) -> bool:
        """Give the lease up; False when it was not (or no longer) ours."""
        with self._lock:
            value, self._value = self._value, None
        if value is None:
            return False
        return self.store.delete_parameter_if_value(self.name, value, self.region)


def build_lease_name(ssm_prefix: str, pipeline: str, variant: str, fingerprint: str) -> str:
    """The build lease of one (pipeline, variant, fingerprint), under ``_leases`` in the pipeline's own
    path: the IAM policy that lets build-ami write the pipeline's channels covers it, and no channel
    name can take that shape (variant and channel names start with a letter)."""
    return f"{ssm_prefix.rstrip('/')}/{pipeline}/_leases/build/{variant}/{fingerprint[:32]}"
