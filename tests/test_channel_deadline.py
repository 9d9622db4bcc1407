"""A channel write whose SSM endpoint freezes part way (issue 29): the writer gives up within its
deadline (`amibuild.aws.deadline`), says which regions are UNKNOWN, and does not hold its lease.

Through the CLI in a subprocess, against the emulator behind tests/faultproxy.py: the eu-west-1
put is held at a gate, then every SSM call is paused (a frozen endpoint: connections accepted,
never answered).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from amibuild.aws import deadline
from amibuild.aws.deadline import Deadline
import test_channel_races
from faultproxy import FaultProxy
from test_channel_converge import ami_flag
from test_channel_races import Cli, held_write
from test_publish import REGIONS, build, current

workdir, proxy, channels = test_channel_races.workdir, test_channel_races.proxy, test_channel_races.channels
SSM = [f"AmazonSSM.{op}" for op in ("PutParameter", "GetParameter", "GetParameters", "GetParameterHistory",
                                    "GetParametersByPath", "DeleteParameter", "AddTagsToResource",
                                    "ListTagsForResource", "DescribeParameters")]


def test_a_frozen_ssm_endpoint_mid_publish_gives_up_within_40s_naming_the_unknown_regions(
        proxy: FaultProxy, workdir: Path, channels) -> None:
    old, new = channels["recommended"], build("fp5")
    gate = held_write(proxy, "recommended")  # the eu-west-1 put: sent, not answered
    writer = Cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(new), deadline=None)  # the default
    assert gate.wait_held(1), writer.lines
    proxy.pause(SSM)  # from now on no SSM call is answered, in any region
    frozen = time.monotonic()
    try:
        code, _, err = writer.finish(timeout=60)
    finally:
        took = time.monotonic() - frozen
        proxy.resume(drop=True)
        proxy.clear()
    assert took < 40, f"held for {took:.0f} s: {err}"
    assert code == 1, err
    last = err.strip().splitlines()[-1]
    assert "no answer from AWS within 30 s" in last, last
    assert "UNKNOWN" in last and "eu-west-1" in last, last
    assert "amibuild channels --check" in last, last
    # the lease could not be given back while SSM was frozen: said, and left to expire
    assert "could not be released" in err and "expires by itself" in err, err
    # once SSM answers again, nothing in us-west-2 but the old or the new image
    assert current("recommended", "us-west-2") in (old["us-west-2"], new["us-west-2"])
    assert set(REGIONS) == {"us-west-2", "eu-west-1"}


def test_the_deadline_counts_time_waiting_on_aws_not_time_queued_in_a_limiter() -> None:
    now = [0.0]
    limit = Deadline(30, clock=lambda: now[0])
    assert limit.remaining() == 30  # nothing sent yet: the clock has not started

    def call() -> str:
        assert deadline.current() is limit  # what a rate limiter inside the call finds
        now[0] += 10  # on the wire
        with deadline.current().queued():  # a retry waits for a token: not counted
            now[0] += 90
        now[0] += 15
        return "answer"

    with deadline.bound(limit):
        assert limit.run(call) == "answer"
    assert limit.remaining() == pytest.approx(5)
    now[0] += 400  # between calls (the writer's own pacing, lease polls): not counted
    assert limit.remaining() == pytest.approx(5)
    limit.run(lambda: now.__setitem__(0, now[0] + 6))  # an answer that came, late: it is kept
    assert limit.expired()
    with pytest.raises(deadline.Overdue):
        limit.run(lambda: pytest.fail("sent after the deadline"))
