"""`channels --check` and `--repair`'s first read under a deadline (issue 29): when SSM stops
answering, they give up once it has been silent for the channel deadline, name the regions left
UNKNOWN and exit 1, writing nothing.

Through the CLI in a subprocess against the emulator behind tests/faultproxy.py, which pauses
every SSM call (of one region, or all): connections accepted, never answered, until the test
lets them go. The deadline is set to 3 s (config ``amibuild.channel_deadline``) so the test does
not wait the default 30 s; the default itself is what test_channel_deadline.py's publish uses.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from amibuild.aws import deadline
from amibuild.aws.deadline import Deadline
import test_channel_races
from faultproxy import FaultProxy
from test_channel_deadline import SSM
from test_channel_races import Cli
from test_publish import current

workdir, proxy, channels = test_channel_races.workdir, test_channel_races.proxy, test_channel_races.channels


def _frozen_run(proxy: FaultProxy, workdir: Path, *args: str, region: str | None = None) -> tuple[int, str, float]:
    proxy.pause(SSM, region=region)
    started = time.monotonic()
    try:
        code, _, err = Cli(workdir, "channels", *args, deadline=3).finish(timeout=60)
    finally:
        took = time.monotonic() - started
        caught = proxy.paused()
        proxy.resume(drop=True)
    assert caught >= 1, "no SSM call reached the frozen endpoint"
    return code, err, took


@pytest.mark.parametrize("frozen", ["eu-west-1", None], ids=["one-region", "every-region"])
def test_channels_check_gives_up_on_a_frozen_ssm_naming_the_unknown_regions(proxy, workdir, channels, frozen):
    code, err, took = _frozen_run(proxy, workdir, "--check", region=frozen)
    assert code == 1, err
    last = err.strip().splitlines()[-1]
    assert "no answer from AWS within 3 s" in last and "ssm:GetParametersByPath" in last, last
    unknown = last.split("UNKNOWN: ", 1)[1].split(";", 1)[0]
    assert unknown == ("eu-west-1" if frozen else "us-west-2, eu-west-1"), last
    assert ("read: us-west-2." if frozen else "read: none.") in last, last
    assert "split" not in last  # nothing is called split (or whole) from a read that did not finish
    assert took < 30, f"took {took:.0f} s"


def test_channels_repair_gives_up_on_a_frozen_first_read_and_writes_nothing(proxy, workdir, channels):
    before = {c: {r: current(c, r) for r in ("us-west-2", "eu-west-1")} for c in channels}
    mark = len(proxy.log)
    code, err, took = _frozen_run(proxy, workdir, "--repair", region="eu-west-1")
    assert code == 1, err
    last = err.strip().splitlines()[-1]
    assert "UNKNOWN: eu-west-1;" in last and "Nothing was written" in last, last
    # no lease taken, no channel written
    assert not [s for s in proxy.log[mark:] if s.op == "AmazonSSM.PutParameter" and s.outcome == "forwarded"]
    assert {c: {r: current(c, r) for r in ("us-west-2", "eu-west-1")} for c in channels} == before
    assert took < 30, f"took {took:.0f} s"


def test_a_deadline_between_answers_starts_again_at_every_answer() -> None:
    now = [0.0]
    limit = Deadline(30, between_answers=True, clock=lambda: now[0])

    def answer(after: float) -> None:
        now[0] += after

    with deadline.bound(limit):
        for _ in range(10):  # ten answers of 20 s each: 200 s in all, never 30 s without one
            limit.run(lambda: answer(20))
            assert limit.remaining() == 30
    assert not Deadline(30, clock=lambda: now[0]).expired()
    total = Deadline(30, clock=lambda: now[0])  # the ordinary deadline counts them all
    total.run(lambda: answer(20))
    total.run(lambda: answer(20))
    assert total.expired()
