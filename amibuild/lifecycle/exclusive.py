"""Prune and the channel writers exclude each other.

Prune deregisters; a channel write names an image. Run at once, prune could deregister an image a
publish is about to name (both judged it on what they read a moment before). So:

* prune takes the pipeline's prune lease (`amibuild.lease.prune_lease_name`, in the channels' lease
  home), then waits until no channel lease of the pipeline is held (the new and the old folder):
  a writer half way finishes first. Only then does it read what is in use and decide;
* a channel writer that finds the prune lease held gives its channel leases back and waits
  (`amibuild.channels.write.transact`), so the two never wait for each other at once;
* each side re-checks right before its irreversible step: prune reads the channels of an image's
  region again right before it deregisters it (`named_now`); a writer checks the image is
  ``available`` right before its put, and that it still exists on reading back.
"""

from __future__ import annotations

import time
from typing import Any, Callable, TypeVar

from amibuild.aws import Aws, fan_out
from amibuild.channels.home import known_regions
from amibuild.channels.write import home_region, legacy_home_region
from amibuild.errors import ChannelBusy
from amibuild.lease import (LEGACY_CHANNEL_DIR, Guard, Lease, holder_gone, is_lease, lease_root, parse_holder,
                            prune_lease_name, wait_for)
from amibuild.pipeline.naming import name_pattern
from amibuild import tags

T = TypeVar("T")
POLL = 0.5


def live_channel_leases(aws: Aws, pipeline: Any) -> list[str]:
    """Every channel lease of the pipeline someone holds now, described."""
    prefix = pipeline.ssm_prefix.rstrip("/")
    # a channel's lease lives where the channel records it (`amibuild.channels.home`): look in every region
    places = [(f"{lease_root(prefix, pipeline.name)}/channel", region) for region in known_regions(pipeline)]
    places.append((f"{prefix}/{pipeline.name}/{LEGACY_CHANNEL_DIR}", legacy_home_region(pipeline)))
    found = []
    now = time.time()
    listed = fan_out(list(dict.fromkeys(places)), lambda place: aws.parameters_under(*place))
    for (root, _), parameters in listed.items():
        for parameter in parameters:
            holder = parse_holder(parameter.value)
            if not holder.expired(now) and not holder_gone(holder):
                found.append(f"{holder.describe()} on {parameter.name.removeprefix(root + '/')}")
    return list(dict.fromkeys(found))  # a writer holds its lease in up to two regions: named once


def under_prune_lease(aws: Aws, pipeline: Any, work: Callable[[], T], *, guard: Guard,
                      say: Callable[[str], None] = lambda _: None) -> T:
    """Run `work` holding the prune lease, once no channel writer is half way."""
    lease = Lease(aws, prune_lease_name(pipeline.ssm_prefix, pipeline.name), home_region(pipeline),
                  run_id=guard.run_id, owner=guard.owner, operation="prune", ttl=max(guard.ttl, 900.0),
                  description="amibuild prune lease: channel writers wait while it is held")
    theirs = wait_for(lease, wait=guard.wait, poll=POLL, cancelled=guard.cancelled)
    if theirs is not None:
        raise ChannelBusy(f"prune: another prune holds the lease ({theirs.describe()}); nothing was deleted")
    try:
        deadline = time.monotonic() + guard.wait
        said = False
        while busy := live_channel_leases(aws, pipeline):
            if not said:
                say(f"prune: waiting for channel writers to finish: {'; '.join(busy)}")
                said = True
            if time.monotonic() >= deadline or guard.cancelled():
                raise ChannelBusy(f"prune: channel writers are still at work after {guard.wait:.0f} s "
                                  f"({'; '.join(busy)}); nothing was deleted. Retry when they are done")
            time.sleep(POLL)
        return work()
    finally:
        lease.release()


def named_now(aws: Aws, pipeline: Any, region: str) -> set[str]:
    """The images the pipeline's channels name in `region` right now (current values only): prune's
    last look before a deregister."""
    path, _ = name_pattern(pipeline)
    values = {p.value for p in aws.parameters_under(path, region) if not is_lease(p.name)}
    for name in aws.parameters_tagged(region, {tags.PIPELINE: [pipeline.name]}):
        current = aws.find_parameter(name, region)
        if current is not None:
            values.add(current.value)
    return values
