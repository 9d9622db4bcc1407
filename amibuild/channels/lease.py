"""A channel's write lease: writers on different machines take turns at one channel.

A channel write (publish, promote, rollback, build-ami's publish step) first takes the lease
(`amibuild.bake.lease`, the one lease amibuild has, shared with builds)::

    {ssm_prefix}/{pipeline}/amibuild-lease/{variant}/{channel}

in the pipeline's home region (its first build region), naming who took it (user, host, pid), the
run id, the operation and an expiry time; reads, decides and writes every region while it holds
it; and deletes it in ``finally`` if it is still its own. The name depends on the pipeline,
variant and channel only, not on the parameter name template, so every writer of one channel
meets at the same lease whatever template or pipeline file it was started with.

A writer that finds the lease held waits (`Guard.wait` seconds, polling) and then gives up with
`ChannelBusy` naming the holder: nothing was written. A lease whose expiry has passed, or whose
holder ran on this machine in a process that is gone, belongs to a writer that died without
releasing it; the next writer takes it over and says whose it was.

Expiry times are written with the writer's clock: clocks of machines sharing a channel should
agree within a few seconds (NTP gives milliseconds).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from amibuild.aws import Aws
from amibuild.bake.lease import Holder, Lease, default_owner
from amibuild.errors import AmibuildError, ChannelBusy, Interrupted

# Seconds a lease is good for. A channel write takes seconds; this leaves room for minutes of
# throttling retries before anyone may take the lease over, and is how long a writer that died
# holding it blocks the channel.
LEASE_TTL = 300.0
LEASE_WAIT = 30.0  # how long a writer waits for a busy channel by default
POLL = 0.5  # seconds between two looks at a busy lease
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


def lease_name(pipeline, variant_name: str, channel: str) -> str:
    return f"{pipeline.ssm_prefix.rstrip('/')}/{pipeline.name}/{LEASE_DIR}/{variant_name}/{channel}"


class ChannelLease:
    """A held channel lease; `release` gives it back (only if it is still ours) and says when it was not."""

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self.name = lease.name
        self.took_over = lease.took_over
        self.note = ""  # said to the user: whose stale lease was taken over
        if lease.took_over is not None:
            stale = lease.took_over
            who = stale.describe() if Holder.from_value(stale.raw) else "an unreadable value"
            if stale.expired(lease.clock()):
                self.note = f"took over the expired lease of {who}: that writer stopped without releasing it"
            else:  # not expired yet: its holder ran here and its process is gone (`holder_gone`)
                self.note = (f"took over the lease of {who}: that writer's process on this machine is gone, "
                             "it stopped without releasing it")

    def expired(self) -> bool:
        """True once the lease has run out on our own clock: others may have taken it over."""
        return self.lease.expired()

    def release(self) -> str:
        """Delete the lease if it is still ours; a note when it is not (or could not be deleted)."""
        lease = self.lease
        try:
            if lease.release():
                return ""
            current = lease.store.find_parameter(lease.name, lease.region)
        except AmibuildError as exc:
            return f"the lease {lease.name} in {lease.region} could not be released ({exc}); it expires by itself"
        theirs = Holder.from_value(current.value) if current else None
        return (f"the lease {lease.name} expired during the write and "
                f"{'was taken over by ' + theirs.describe() if theirs else 'is gone'}")


def acquire(aws: Aws, name: str, region: str, *, operation: str, guard: Guard,
            clock: Callable[[], float] = time.time) -> ChannelLease:
    """Take the lease `name` in `region`, waiting up to ``guard.wait`` seconds for its holder."""
    lease = Lease(aws, name, region, run_id=guard.run_id, owner=guard.owner, operation=operation, ttl=guard.ttl,
                  clock=clock, description=f"amibuild channel lease: {operation}")
    deadline = time.monotonic() + guard.wait
    while True:
        theirs = lease.try_acquire()
        if theirs is None:
            return ChannelLease(lease)
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
