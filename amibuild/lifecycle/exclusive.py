"""Prune and the channel writers exclude each other, whatever regions their pipeline files list.

Prune deregisters; a channel write names an image. Run at once, prune could deregister an image a
publish is about to name (both judged it on what they read a moment before). An image prune may
deregister in region R is at risk only from a writer that writes R, so the two meet in every
region both touch, the way two processes exclude each other with a flag each (each raises its own,
then looks at the other's: at least one of the two sees the other).

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence, TypeVar

from amibuild.aws import Aws, fan_out
from amibuild.channels.home import known_regions
from amibuild.errors import AmibuildError, ChannelBusy
from amibuild.lease import (Guard, Lease, holder_gone, is_lease, kept_alive, lease_root, parse_holder, prune_lease_name,
                            wait_for)
from amibuild.pipeline.naming import name_pattern
from amibuild.poll import until
from amibuild import tags

T = TypeVar("T")
POLL = 0.5


def prune_regions(pipeline: Any, regions: Sequence[str] = ()) -> list[str]:
    """Where prune holds its lease and looks for channel writers: every region it prunes and every
    region the pipeline knows, in name order."""
    return sorted({*regions, *known_regions(pipeline)})


def live_channel_leases(aws: Aws, pipeline: Any, regions: Sequence[str] = ()) -> list[str]:
    """Every channel lease of the pipeline someone holds now in `prune_regions`, described."""
    # a writer holds its channel lease in every region it writes (`amibuild.channels.home.write_places`)
    root = f"{lease_root(pipeline.ssm_prefix, pipeline.name)}/channel"
    now = time.time()
    listed = fan_out(prune_regions(pipeline, regions), lambda region: aws.parameters_under(root, region))
    found = [f"{holder.describe()} on {p.name.removeprefix(root + '/')}" for parameters in listed.values() for p in parameters
             if not (holder := parse_holder(p.value)).expired(now) and not holder_gone(holder)]
    return list(dict.fromkeys(found))  # a writer holds its lease in up to two regions: named once


PRUNE_TTL = 900.0  # seconds a prune lease is good for, renewed every third of it while prune works


def under_prune_lease(aws: Aws, pipeline: Any, work: Callable[[], T], *, guard: Guard,
                      say: Callable[[str], None] = lambda _: None, regions: Sequence[str] = ()) -> T:
    """Run `work` holding the prune lease in every region of `prune_regions` (`regions`: those it
    prunes), once no channel writer is half way in any of them."""
    places = prune_regions(pipeline, regions)
    taken: list[Lease] = []
    try:
        deadline = time.monotonic() + guard.wait
        for region in places:
            lease = Lease(aws, prune_lease_name(pipeline.ssm_prefix, pipeline.name), region,
                          run_id=guard.run_id, owner=guard.owner, operation="prune", ttl=max(guard.ttl, PRUNE_TTL),
                          description="amibuild prune lease: channel writers wait while it is held")
            theirs = wait_for(lease, wait=max(0.0, deadline - time.monotonic()), poll=POLL, cancelled=guard.cancelled)
            if theirs is not None:
                raise ChannelBusy(f"prune: another prune holds the lease in {region} ({theirs.describe()}); "
                                  "nothing was deleted")
            taken.append(lease)
        said = False

        def writers() -> list[str]:
            """The channel writers at work, said the first time there are any."""
            nonlocal said
            busy = live_channel_leases(aws, pipeline, places)
            if busy and not said:
                say(f"prune: waiting for channel writers to finish: {'; '.join(busy)}")
                said = True
            return busy

        waited = until(writers, done=lambda busy: not busy, timeout=guard.wait, interval=POLL,
                       cancelled=guard.cancelled)
        if not waited.done:
            raise ChannelBusy(f"prune: channel writers are still at work after {guard.wait:.0f} s "
                              f"({'; '.join(waited.value)}); nothing was deleted. Retry when they are done")
        with kept_alive(lambda: taken):  # a long prune must not look expired
            return work()
    finally:  # the work is done by now: a lease not given back must not hide what it did
        for lease in reversed(taken):
            try:
                lease.release()
            except AmibuildError as exc:
                say(f"warning: the prune lease {lease.name} in {lease.region} could not be released ({exc}); "
                    "it expires by itself")


def named_now(aws: Aws, pipeline: Any, region: str) -> set[str]:
    """The images the pipeline's channels name in `region` right now (current values only): prune's
    last look before a deregister."""
    path, _ = name_pattern(pipeline)
    values = {p.value for p in aws.parameters_under(path, region) if not is_lease(p.name)}
    tagged = aws.parameters_tagged(region, {tags.PIPELINE: [pipeline.name]})
    current = [aws.find_parameter(name, region) for name in tagged]
    return values | {p.value for p in current if p is not None}
