"""Prune and the channel writers exclude each other: through the CLI against the emulator.

The race of the issue, made deterministic with a gate in tests/faultproxy.py: a publish of an older
image to a channel is half way (its eu-west-1 PutParameter held) when `prune --keep 1` starts.
Prune must neither deregister that image nor let the channel name a deregistered one.
"""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

import test_channel_races
from test_channel_races import PUT, Cli
from test_prune import build_image

REGIONS = ("us-west-2", "eu-west-1")
PIPELINE = """
pipeline {
  name       = "prune-e2e"
  ssm_prefix = "/amibuild"
  regions    = ["us-west-2"]
  copy_to    = ["eu-west-1"]
}
variant "ceph" {}
"""
CHANNEL = "/amibuild/prune-e2e/1.35/ceph/{}/image_id"
proxy = test_channel_races.proxy  # the fault proxy in front of the emulator


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    return tmp_path


def registered(region: str, ami: str) -> bool:
    return bool(boto3.client("ec2", region_name=region).describe_images(
        Filters=[{"Name": "image-id", "Values": [ami]}])["Images"])


def ami_flag(amis: dict[str, str]) -> str:
    return ",".join(f"{r}={a}" for r, a in amis.items())


def test_prune_waits_for_a_publish_half_way_and_keeps_the_image_it_names(proxy, workdir: Path) -> None:
    old = {r: build_image(1, region=r).ami for r in REGIONS}
    new = {r: build_image(2, region=r).ami for r in REGIONS}
    code, _, err = Cli(workdir, "publish", "--variant", "ceph", "--channel", "stable", "--ami", ami_flag(new)).finish()
    assert code == 0, err
    # a publish of the older build to candidate, half way: us-west-2 written, eu-west-1 in flight
    gate = proxy.gate([PUT], region="eu-west-1", name="/candidate/image_id")
    publish = Cli(workdir, "publish", "--variant", "ceph", "--channel", "candidate", "--ami", ami_flag(old), held=True)
    assert gate.wait_held(1), publish.lines
    pruning = Cli(workdir, "prune", "--keep", "1", lease_wait=60)
    pruning.wait_line("prune: waiting for channel writers to finish")
    gate.release()
    assert publish.finish()[0] == 0
    code, out, err = pruning.finish()
    assert code == 0, err
    # the older build is in use by candidate now in every region: kept, and the channel names images that exist
    for region in REGIONS:
        assert registered(region, old[region]) and registered(region, new[region])
        for channel in ("stable", "candidate"):
            value = boto3.client("ssm", region_name=region).get_parameter(Name=CHANNEL.format(channel))
            assert registered(region, value["Parameter"]["Value"])
    assert "channel candidate of ceph current in eu-west-1" in out


def test_a_publish_while_prune_holds_its_lease_waits_and_then_refuses_a_deregistered_image(proxy, workdir) -> None:
    old = {r: build_image(1, region=r).ami for r in REGIONS}
    new = {r: build_image(2, region=r).ami for r in REGIONS}
    code, _, err = Cli(workdir, "publish", "--variant", "ceph", "--channel", "stable", "--ami", ami_flag(new)).finish()
    assert code == 0, err
    gate = proxy.gate(["DeregisterImage"], count=1)  # prune holds its lease and is at its first deregister
    pruning = Cli(workdir, "prune", "--keep", "1")
    assert gate.wait_held(1), pruning.lines
    asked = proxy.gate(["AmazonSSM.GetParameter"], name="_leases/prune", count=1)  # the writer looks at prune
    publish = Cli(workdir, "publish", "--variant", "ceph", "--channel", "candidate", "--ami", ami_flag(old),
                  lease_wait=60)
    assert asked.wait_held(1), publish.lines
    asked.release()  # it finds the prune lease held: it gives its own back and waits
    gate.release()
    assert pruning.finish()[0] == 0
    code, _, err = publish.finish()
    assert code == 1, err
    assert "does not exist there (deregistered" in err and "nothing written" in err
    for region in REGIONS:
        assert not registered(region, old[region])
        names = [p["Name"] for p in boto3.client("ssm", region_name=region).get_parameters_by_path(
            Path="/amibuild/prune-e2e", Recursive=True)["Parameters"]]
        assert names == [CHANNEL.format("stable")], names


def test_a_channel_written_outside_the_leases_after_prune_decided_keeps_its_image(proxy, workdir) -> None:
    """A writer that knows no prune lease (the console, another tool, an older amibuild) points a
    channel at an image after prune has read what is in use and before it deregisters: prune's read
    of the channels right before each deregister keeps the image. Without that re-read, the image is
    deregistered while the channel names it."""
    old = {r: build_image(1, region=r).ami for r in REGIONS}
    new = {r: build_image(2, region=r).ami for r in REGIONS}
    code, _, err = Cli(workdir, "publish", "--variant", "ceph", "--channel", "stable", "--ami", ami_flag(new)).finish()
    assert code == 0, err
    # prune's last read of what is in use in us-west-2 (running instances): channels were read before it
    reading = proxy.gate(["DescribeInstances"], region="us-west-2", count=1)
    pruning = Cli(workdir, "prune", "--keep", "1")
    assert reading.wait_held(1), pruning.lines
    boto3.client("ssm", region_name="us-west-2").put_parameter(
        Name=CHANNEL.format("candidate"), Value=old["us-west-2"], Type="String", DataType="aws:ec2:image")
    reading.release()
    code, out, err = pruning.finish()
    assert registered("us-west-2", old["us-west-2"]), f"deregistered while channel candidate names it:\n{out}{err}"
    assert "a channel names it now (read again right before the change): kept" in out + err
    assert not registered("eu-west-1", old["eu-west-1"])  # no channel names it there: pruned as planned
    for region in REGIONS:
        assert registered(region, new[region])
    assert code == 0, err
