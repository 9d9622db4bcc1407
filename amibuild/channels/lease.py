"""A lease on a channel, kept in AWS itself, so that writers on different machines take turns.

SSM has no compare-and-swap, but PutParameter with ``Overwrite=False`` fails with
``ParameterAlreadyExists`` when the name exists: creating one parameter is an atomic "take it if
free". A channel write (publish, promote, rollback, build-ami's publish step) first creates::

    {ssm_prefix}/{pipeline}/amibuild-lease/{variant}/{channel}

in the pipeline's home region (its first build region) holding who took it (user, host, pid), the
run id, the operation and an expiry time; reads, decides and writes every region while it holds
it; and deletes it in ``finally``. The name depends on the pipeline, variant and channel only, not
on the parameter name template, so every writer of one channel meets at the same lease whatever
template or pipeline file it was started with.

A writer that finds the lease held waits (`Guard.wait` seconds, polling) and then gives up with
`ChannelBusy` naming the holder: nothing was written. A lease whose expiry has passed belongs to
a writer that died without releasing it; the next writer takes it over (an overwrite whose
returned version proves it was the only one to do so) and says whose it was.

Expiry times are written with the writer's clock: clocks of machines sharing a channel should
agree within `RELEASE_MARGIN` seconds (NTP gives milliseconds).
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable

from amibuild.aws import Aws
from amibuild.errors import AmibuildError, ChannelBusy, Interrupted

# Seconds a lease is good for. A channel write takes seconds; this leaves room for minutes of
# throttling retries before anyone may take the lease over, and is how long a writer that died
# holding it blocks the channel.
LEASE_TTL = 300.0
LEASE_WAIT = 30.0  # how long a writer waits for a busy channel by default
POLL = 0.5  # seconds between two looks at a busy lease
RELEASE_MARGIN = 30.0  # a lease released this long before its expiry cannot have been taken over
LEASE_DIR = "amibuild-lease"


def _never() -> bool:
    return False


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
    cancelled: Callable[[], bool] = _never
    owner: str = field(default_factory=lambda: default_owner())


def default_owner() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no user name in a bare container: the pid and host still tell writers apart
        user = "unknown"
    return f"{user}@{socket.gethostname()} pid {os.getpid()}"


def lease_name(pipeline, variant_name: str, channel: str) -> str:
    return f"{pipeline.ssm_prefix.rstrip('/')}/{pipeline.name}/{LEASE_DIR}/{variant_name}/{channel}"


@dataclass(frozen=True)
class Holder:
    """What a lease parameter says about its holder."""

    owner: str
    run_id: str
    operation: str
    token: str
    expires: datetime

    def to_value(self) -> str:
        return json.dumps({"owner": self.owner, "run_id": self.run_id, "operation": self.operation,
                           "token": self.token, "expires": self.expires.isoformat()}, sort_keys=True)

    @classmethod
    def from_value(cls, text: str) -> Holder | None:
        """The holder a lease names; None when the value is not a lease amibuild wrote."""
        try:
            raw = json.loads(text)
            expires = datetime.fromisoformat(raw["expires"])
            return cls(str(raw["owner"]), str(raw.get("run_id", "")), str(raw.get("operation", "")),
                       str(raw["token"]), expires if expires.tzinfo else expires.replace(tzinfo=timezone.utc))
        except (ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        run = f", run {self.run_id}" if self.run_id else ""
        return f"{self.owner} ({self.operation}{run}, lease until {self.expires:%H:%M:%S} UTC)"


class Lease:
    """A held lease; `release` gives it back (only if it is still ours)."""

    def __init__(self, aws: Aws, name: str, region: str, holder: Holder, ttl: float,
                 took_over: Holder | None = None, note: str = "") -> None:
        self.aws, self.name, self.region, self.holder, self.ttl = aws, name, region, holder, ttl
        self.took_over = took_over
        self.note = note  # said to the user: whose stale lease was taken over
        self._since = time.monotonic()

    def expired(self) -> bool:
        """True once the lease has run out on our own clock: others may have taken it over."""
        return time.monotonic() - self._since >= self.ttl

    def release(self) -> str:
        """Delete the lease if it is still ours; a note when it is not (or could not be deleted)."""
        if time.monotonic() - self._since < self.ttl - RELEASE_MARGIN:
            # well before expiry nobody can have taken it over: delete without reading it first
            try:
                self.aws.delete_parameter(self.name, self.region)
            except AmibuildError as exc:
                return f"the lease {self.name} in {self.region} could not be released ({exc}); it expires by itself"
            return ""
        current = self.aws.find_parameter(self.name, self.region)
        theirs = Holder.from_value(current.value) if current else None
        if theirs is None or theirs.token != self.holder.token:
            return (f"the lease {self.name} expired during the write and "
                    f"{'was taken over by ' + theirs.describe() if theirs else 'is gone'}")
        self.aws.delete_parameter(self.name, self.region)
        return ""


def acquire(aws: Aws, name: str, region: str, *, operation: str, guard: Guard,
            clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc)) -> Lease:
    """Take the lease `name` in `region`, waiting up to ``guard.wait`` seconds for its holder."""
    token = uuid.uuid4().hex
    deadline = time.monotonic() + guard.wait
    description = f"amibuild channel lease: {operation}"[:1024]
    while True:
        holder = Holder(guard.owner, guard.run_id, operation, token, clock() + timedelta(seconds=guard.ttl))
        if aws.create_lease(name, region, holder.to_value(), description=description) is not None:
            return Lease(aws, name, region, holder, guard.ttl)
        current = aws.find_parameter(name, region)
        if current is None:
            continue  # released between our two calls: try again at once
        theirs = Holder.from_value(current.value)
        if theirs is None or theirs.expires <= clock():
            lease = _take_over(aws, name, region, holder, current.version, theirs, guard.ttl, description)
            if lease is not None:
                return lease
            continue
        if guard.cancelled():
            raise Interrupted(f"{operation}: interrupted while waiting for {theirs.describe()}; nothing was written")
        left = deadline - time.monotonic()
        if left <= 0:
            raise ChannelBusy(
                f"{operation}: the channel is being written by {theirs.describe()}; nothing was written. "
                f"Retry when it is done (it waited {guard.wait:.0f} s; a lease left by a writer that died "
                f"is taken over once it expires)"
            )
        time.sleep(min(POLL, left))


def _take_over(aws: Aws, name: str, region: str, holder: Holder, stale_version: int, stale: Holder | None,
               ttl: float, description: str) -> Lease | None:
    """Overwrite an expired lease. Of several writers doing so at once, only the one whose put
    follows the stale version directly holds it; the others put that writer's value back."""
    version = aws.overwrite_lease(name, region, holder.to_value(), description=description)
    who = stale.describe() if stale else "an unreadable value"
    if version == stale_version + 1:
        return Lease(aws, name, region, holder, ttl, stale,
                     f"took over the expired lease of {who}: that writer stopped without releasing it")
    winner = next((p for p in aws.parameter_history(name, region) if p.version == stale_version + 1), None)
    current = aws.find_parameter(name, region)
    if winner is not None and current is not None and current.version == version:
        aws.overwrite_lease(name, region, winner.value, description=description)
    return None
