"""A channel write converges or says plainly that it did not: through the CLI, against the emulator.

Each case is made deterministic with tests/faultproxy.py (a request held at a gate until the test
lets it go) and signals sent at held points; the only wait is a lease shortened to a few seconds
(`amibuild.lease_ttl`). The end state of every region is read back with boto3.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import boto3
import pytest

from amibuild.lease import is_lease
from faultproxy import FaultProxy
import test_channel_races
from conftest import run_cli
from test_channel_races import PUT, Cli, held_write, history_everywhere, leases_left
from test_publish import NAME, REGIONS, build, current

# the same fixtures: a pipeline folder, the fault proxy, three channels published
workdir, proxy, channels = test_channel_races.workdir, test_channel_races.proxy, test_channel_races.channels

TTL = 3.0  # seconds: the lease of every writer started here (INVOKE_AMIBUILD_LEASE_TTL)


def ami_flag(amis: dict[str, str]) -> str:
    return ",".join(f"{r}={a}" for r, a in amis.items())


def wait_until(condition, timeout: float = 30.0) -> bool:
    """Poll a condition on state the test itself reads (the proxy's log): never a fixed sleep."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def short_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INVOKE_AMIBUILD_LEASE_TTL", str(TTL))


# ------------------------------------------------------------------------------- a stopped writer


def test_a_writer_stopped_past_its_lease_writes_nothing_once_resumed_and_the_channel_stays_whole(
        proxy: FaultProxy, workdir: Path, channels, short_lease) -> None:
    old, stale, fresh = channels["recommended"], build("fp7"), build("fp8")
    # the first writer holds its lease and has read the images: stop it right there
    reads = proxy.gate(["DescribeImages"], count=1)
    first = Cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(stale))
    assert reads.wait_held(1), "the first writer never read its images"
    first.signal(signal.SIGSTOP)
    reads.release()  # its answer waits in the stopped process's socket
    try:
        # the second writer waits for the first's lease to run out, takes it over and writes every region
        second = Cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(fresh))
        code, out, err = second.finish()
        assert code == 0, err
        assert "took over the expired lease of" in out
    finally:
        first.signal(signal.SIGCONT)
    code, out, err = first.finish()
    assert code == 1, err
    assert "ran out" in err and "this writer stopped writing" in err
    # every region on the second writer's image; the first wrote nothing anywhere
    assert {r: current("recommended", r) for r in REGIONS} == fresh
    assert history_everywhere("recommended") == {r: [old[r], fresh[r]] for r in REGIONS}
    assert leases_left() == []


def test_a_writer_resumed_while_the_next_one_is_mid_write_writes_nothing_and_the_next_finishes(
        proxy: FaultProxy, workdir: Path, channels, short_lease) -> None:
    old, stale, fresh = channels["recommended"], build("fp7"), build("fp8")
    reads = proxy.gate(["DescribeImages"], count=1)
    first = Cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(stale))
    assert reads.wait_held(1)
    first.signal(signal.SIGSTOP)
    reads.release()
    mid = held_write(proxy, "recommended")  # the second writer's eu-west-1 put, in flight
    second = Cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(fresh), held=True)
    try:
        assert mid.wait_held(1), f"the second writer never reached its eu-west-1 write: {second.lines}"
    finally:
        first.signal(signal.SIGCONT)
    code, _, err = first.finish()  # resumed while the second holds the lease and is half way
    mid.release()
    second_code, _, second_err = second.finish()
    assert (code, second_code) == (1, 0), (err, second_err)
    assert "this writer stopped writing" in err and "half moved" not in second_err
    assert {r: current("recommended", r) for r in REGIONS} == fresh
    assert history_everywhere("recommended") == {r: [old[r], fresh[r]] for r in REGIONS}


# ------------------------------------------------------------------------------- a retried put


def test_a_put_retried_after_a_read_timeout_that_lands_twice_is_the_writers_own_and_the_write_succeeds(
        proxy: FaultProxy, workdir: Path, channels, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INVOKE_AMIBUILD_READ_TIMEOUT", "1")
    old, new = channels["recommended"], build("fp9")
    slow = held_write(proxy, "recommended")  # the first attempt: held until after its retry has landed
    tagging = proxy.gate(["AmazonSSM.AddTagsToResource"], region="eu-west-1", name="/recommended/image_id")
    cli = Cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(new))
    assert slow.wait_held(1)
    # botocore gives up on the held attempt after the 1 s read timeout and sends the put again
    assert tagging.wait_held(1), f"the retried put never landed: {cli.lines}"
    slow.release()  # now the first attempt lands too: a second version with the writer's own value
    assert wait_until(lambda: proxy.count(PUT, "forwarded", region="eu-west-1", name="/recommended/image_id") == 2)
    tagging.release()
    code, out, err = cli.finish()
    assert code == 0, err
    ssm = boto3.client("ssm", region_name="eu-west-1")
    versions = ssm.get_parameter_history(Name=NAME.format(channel="recommended"))["Parameters"]
    assert [p["Value"] for p in versions] == [old["eu-west-1"], new["eu-west-1"], new["eu-west-1"]]
    # both landed versions carry the one transaction's token: that is how the writer knew them
    assert versions[1]["Description"] == versions[2]["Description"]
    assert {r: current("recommended", r) for r in REGIONS} == new
    assert "another writer" not in err


# ------------------------------------------------------------------------------- some regions only


def test_a_write_of_only_some_of_the_channels_regions_is_refused_and_writes_nothing(
        proxy: FaultProxy, workdir: Path, channels) -> None:
    """`--region` (here: a pipeline file that lists one region of the two) narrows a write; the
    channel's parameters record every region it lives in, so the narrow write is refused."""
    (workdir / "narrow").mkdir()
    (workdir / "narrow" / "amibuild.hcl").write_text((workdir / "amibuild.hcl").read_text().replace(
        'copy_to    = ["eu-west-1"]', "copy_to    = []").replace('regions    = ["us-west-2"]',
                                                                'regions    = ["eu-west-1"]'))
    new = build("fp9", regions=("eu-west-1",))
    code, _, err = Cli(workdir / "narrow", "publish", "--variant", "ceph", "--ami", ami_flag(new)).finish()
    assert code == 1, err
    assert "channel recommended is also written in us-west-2, which this write does not cover" in err
    assert "nothing written" in err
    assert {r: current("recommended", r) for r in REGIONS} == channels["recommended"]


def test_no_lease_is_read_as_a_channel_whatever_the_name_template(sandbox, tmp_path: Path) -> None:
    """A template with four open fields after the pipeline fits `_leases/build/<variant>/<fingerprint>`."""
    (tmp_path / "amibuild.hcl").write_text(
        'pipeline {\n  name = "e2e"\n  regions = ["us-west-2"]\n'
        '  parameter_template = "{prefix}/{pipeline}/{variant}/{channel}/{arch}/{k8s}"\n}\nvariant "ceph" {}\n')
    ssm = boto3.client("ssm", region_name="us-west-2")
    for name in ("/amibuild/e2e/_leases/build/ceph/" + "ab" * 16, "/amibuild/e2e/_leases/channel/ceph/stable"):
        assert is_lease(name)
        ssm.put_parameter(Name=name, Value='{"owner": "x", "expires": "2099-01-01T00:00:00+00:00"}', Type="String")
    result = run_cli(tmp_path, "channels", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert rows and all(row["variant"] == "ceph" and row["ami"] is None for row in rows), rows


# ------------------------------------------------------------------------------- endpoint loss


def test_the_endpoint_killed_during_a_channel_write_ends_it_within_30s_naming_what_each_region_holds(
        proxy: FaultProxy, workdir: Path, channels) -> None:
    new = build("fp9")
    mid = held_write(proxy, "recommended")
    cli = Cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(new))
    assert mid.wait_held(1)
    died = time.monotonic()
    proxy.die()
    mid.release()
    code, _, err = cli.finish(timeout=60)
    took = time.monotonic() - died
    assert took < 30, f"took {took:.0f}s after the endpoint died: {err}"
    assert code == 1, err
    last = err.strip().splitlines()[-1]
    # nothing could be read back or put back: the verdict says so, never that the channel is whole
    assert "half moved" not in last, last
    assert "is UNKNOWN (it could not be read back" in last and "amibuild channels --check" in last, last
