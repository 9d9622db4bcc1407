"""A writer stopped (SIGSTOP) with its put already sent: the put lands after its lease ran out and
another writer moved the channel. Through the CLI, against the emulator.

SSM has no conditional put, so the window between a writer's last lease check and its put landing
cannot be closed: what the writer must do is find its stray write when it reads back, take only
that write back out (under the lease taken again), and say plainly what every region holds. The
put is held at tests/faultproxy.py's gate, the writer stopped while it waits, the lease shortened
to a few seconds: no sleep-and-hope.
"""

from __future__ import annotations

import signal
from pathlib import Path

import boto3
import pytest

import test_channel_converge
import test_channel_races
from faultproxy import FaultProxy
from test_channel_converge import ami_flag, wait_until
from test_channel_races import PUT, Cli, held_write, history_everywhere, leases_left
from test_publish import NAME, REGIONS, build, current

workdir, proxy, channels = test_channel_races.workdir, test_channel_races.proxy, test_channel_races.channels
short_lease = test_channel_converge.short_lease
TAG = "AmazonSSM.AddTagsToResource"
PARAMETER = "/recommended/image_id"


def seen(proxy: FaultProxy, op: str, region: str) -> int:
    """How many requests of `op` on the channel's parameter in `region` reached the emulator so far."""
    return proxy.count(op, "forwarded", region=region, name=PARAMETER)


def test_a_put_that_lands_after_the_writer_lost_its_lease_is_taken_back_out_and_the_channel_stays_whole(
        proxy: FaultProxy, workdir: Path, channels, short_lease) -> None:
    old, stale, fresh = channels["recommended"], build("fp7"), build("fp8")
    tagged, put = seen(proxy, TAG, "us-west-2"), seen(proxy, PUT, "eu-west-1")
    held = held_write(proxy, "recommended")  # the first writer's eu-west-1 put: sent, not yet landed
    first = Cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(stale))
    assert held.wait_held(1), first.lines
    # its us-west-2 write is done (put, read back, tagged): the state is the same on every run
    assert wait_until(lambda: seen(proxy, TAG, "us-west-2") == tagged + 1), first.lines
    first.signal(signal.SIGSTOP)
    try:
        # the lease runs out; the second writer takes it over and moves every region
        code, out, err = Cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(fresh)).finish()
        assert code == 0, err
        assert "took over the expired lease of" in out
        assert {r: current("recommended", r) for r in REGIONS} == fresh
        held.release()  # now the stopped writer's put lands, over the second writer's eu-west-1
        assert wait_until(lambda: seen(proxy, PUT, "eu-west-1") == put + 2)
        ssm = boto3.client("ssm", region_name="eu-west-1")
        assert ssm.get_parameter(Name=NAME.format(channel="recommended"))["Parameter"]["Value"] == stale["eu-west-1"]
    finally:
        first.signal(signal.SIGCONT)
    code, out, err = first.finish()
    assert code == 1, err
    last = err.strip().splitlines()[-1]
    # what it says is what is there: whole, on the other writer's image; never "nothing is left half moved"
    assert "half moved" not in err and "SPLIT" not in last, last
    assert "the channel is whole on another writer's build fp8 (run run-fp8)" in last, last
    assert f"eu-west-1: back to {fresh['eu-west-1']}" in last, last
    assert "us-west-2: left as is, another writer has moved it on since" in last, last
    # every region on the second writer's image; the stray version is in eu-west-1's history, undone
    assert {r: current("recommended", r) for r in REGIONS} == fresh
    assert history_everywhere("recommended") == {
        "us-west-2": [old["us-west-2"], stale["us-west-2"], fresh["us-west-2"]],
        "eu-west-1": [old["eu-west-1"], fresh["eu-west-1"], stale["eu-west-1"], fresh["eu-west-1"]],
    }
    assert leases_left() == []


def test_the_stray_put_is_left_and_called_a_split_when_another_writer_holds_the_lease_by_then(
        proxy: FaultProxy, workdir: Path, channels, short_lease, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stopped writer cannot take the lease again (a third writer is half way): it writes nothing
    more, and its verdict names what each region holds and how to repair it."""
    stale, fresh, third = build("fp7"), build("fp8"), build("fp6")
    tagged, put = seen(proxy, TAG, "us-west-2"), seen(proxy, PUT, "eu-west-1")
    held = held_write(proxy, "recommended")
    first = Cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(stale))
    assert held.wait_held(1), first.lines
    assert wait_until(lambda: seen(proxy, TAG, "us-west-2") == tagged + 1), first.lines
    first.signal(signal.SIGSTOP)
    late = None
    try:
        code, _, err = Cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(fresh)).finish()
        assert code == 0, err
        held.release()
        assert wait_until(lambda: seen(proxy, PUT, "eu-west-1") == put + 2)
        # a third writer takes the lease and reads the channel; its first read is held. Its lease is a
        # long one: it must not run out while the test waits for the first writer to finish
        monkeypatch.setenv("INVOKE_AMIBUILD_LEASE_TTL", "120")
        reading = proxy.gate(["DescribeImages"], count=1)
        late = Cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(third), lease_wait=60)
        assert reading.wait_held(1), late.lines
    finally:
        first.signal(signal.SIGCONT)
    code, _, err = first.finish()
    reading.release()
    late_code, _, late_err = late.finish()
    assert code == 1, err
    last = err.strip().splitlines()[-1]
    assert "half moved" not in err, last
    assert "eu-west-1: could NOT be put back" in last and "another writer holds the channel now" in last, last
    assert "the channel is SPLIT across regions" in last and "amibuild channels --repair" in last, last
    # the third writer read the split channel under its lease and moved every region
    assert late_code == 0, late_err
    assert {r: current("recommended", r) for r in REGIONS} == third
    assert leases_left() == []
