"""A lease: at most one holder at a time for a name, kept as an SSM parameter in one region.

Taking the lease is creating the parameter with ``Overwrite=False``: of two runs that try at once,
SSM lets exactly one create it. The value says who holds it (owner, run id) and until when; the
holder renews it while it works and deletes it when done (only if it still holds its own value).
A lease past its expiry belongs to a holder that died without releasing it: the next taker
removes it, takes it and names the stale holder (`Lease.took_over`). So does a lease whose holder
ran on this machine in a process that no longer exists (`holder_gone`).

Generic on purpose: the build lease (one per pipeline, variant and fingerprint, `build_lease_name`)
uses it, and so can a channel's write lease. The store is anything with the three `Aws` methods
`put_parameter_if_absent`, `find_parameter` and `delete_parameter_if_value` (plus
`overwrite_parameter` to renew), so tests can pass the gateway pointed at the emulator.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Protocol

DEFAULT_TTL = 900.0  # seconds; renewed every third of it while the holder works


class LeaseStore(Protocol):
    def put_parameter_if_absent(self, name: str, value: str, region: str, *, description: str = "") -> bool: ...
    def find_parameter(self, name: str, region: str): ...
    def delete_parameter_if_value(self, name: str, value: str, region: str) -> bool: ...
    def overwrite_parameter(self, name: str, value: str, region: str) -> None: ...


@dataclass(frozen=True)
class Holder:
    """Who holds a lease, as its parameter says."""

    owner: str
    run_id: str
    expires: float  # epoch seconds
    raw: str  # the parameter's value, to delete it only if unchanged

    def expired(self, now: float) -> bool:
        return now >= self.expires

    def __str__(self) -> str:
        until = datetime.fromtimestamp(self.expires, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"run {self.run_id} ({self.owner}, lease until {until})"


def parse_holder(raw: str) -> Holder:
    """The holder from a lease value; a value that is not ours reads as an already expired lease."""
    try:
        data = json.loads(raw)
        return Holder(str(data["owner"]), str(data["run_id"]), float(data["expires"]), raw)
    except (ValueError, KeyError, TypeError):
        return Holder("unknown", "unknown", 0.0, raw)


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
    except (KeyError, OSError):  # no passwd entry (containers)
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()} pid {os.getpid()}"


class Lease:
    """One lease on `name` in `region` for one run. Its worker and a renewing thread may share it."""

    def __init__(self, store: LeaseStore, name: str, region: str, *, run_id: str, owner: str | None = None,
                 ttl: float = DEFAULT_TTL, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.name = name
        self.region = region
        self.run_id = run_id
        self.owner = owner or default_owner()
        self.ttl = ttl
        self.clock = clock
        self.took_over: Holder | None = None  # the stale holder this lease replaced, if any
        self._value: str | None = None
        self._lock = threading.Lock()

    @property
    def held(self) -> bool:
        return self._value is not None

    def _new_value(self) -> str:
        return json.dumps({"owner": self.owner, "run_id": self.run_id, "expires": round(self.clock() + self.ttl, 3)},
                          sort_keys=True)

    def try_acquire(self) -> Holder | None:
        """Take the lease: None when this run now holds it, else the live holder."""
        with self._lock:
            return self._try_acquire()

    def _try_acquire(self) -> Holder | None:
        for _ in range(3):  # a stale lease removed, then raced for: try again a few times
            value = self._new_value()
            if self.store.put_parameter_if_absent(self.name, value, self.region,
                                                  description=f"amibuild lease held by run {self.run_id}"):
                self._value = value
                return None
            current = self.store.find_parameter(self.name, self.region)
            if current is None:
                continue  # released in between
            holder = parse_holder(current.value)
            if holder.run_id == self.run_id and holder.owner == self.owner:
                self._value = current.value  # ours already (a retry after a lost answer)
                return None
            if not holder.expired(self.clock()) and not holder_gone(holder):
                return holder
            if self.store.delete_parameter_if_value(self.name, current.value, self.region):
                self.took_over = holder
        current = self.store.find_parameter(self.name, self.region)
        return parse_holder(current.value) if current is not None else Holder("unknown", "unknown", 0.0, "")

    def renew(self) -> bool:
        """Push the expiry out again; False when the lease is no longer ours (taken over meanwhile)."""
        with self._lock:
            return self._renew()

    def _renew(self) -> bool:
        if self._value is None:
            return False
        current = self.store.find_parameter(self.name, self.region)
        if current is None or current.value != self._value:
            self._value = None
            return False
        value = self._new_value()
        self.store.overwrite_parameter(self.name, value, self.region)
        self._value = value
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
