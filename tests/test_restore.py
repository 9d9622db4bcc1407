"""`amibuild restore`: a deregistered image comes back from the Recycle Bin with its snapshots and
tags, and `channels --repair` then converges a split channel on it. Bad input exits 2 before AWS."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest

from amibuild.lifecycle.restore import RestoreFailed, RestoreResult
from conftest import run_cli
from faultproxy import FaultProxy
from test_channel_repair import ami_flag, split_by_hand
from test_publish import PIPELINE, REGIONS, build, current


@pytest.fixture
def workdir(tmp_path: Path, sandbox) -> Path:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    return tmp_path


def region_rules(region: str) -> None:
    rbin = boto3.client("rbin", region_name=region)
    for kind in ("EC2_IMAGE", "EBS_SNAPSHOT"):
        rbin.create_rule(ResourceType=kind, RetentionPeriod={"RetentionPeriodValue": 7, "RetentionPeriodUnit": "DAYS"})


def test_restore_brings_back_a_deregistered_image_and_its_snapshot_and_repair_uses_it(workdir) -> None:
    old, new = build("fp1"), build("fp2")
    assert run_cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(old)).returncode == 0
    split_by_hand("us-west-2", new["us-west-2"])  # the newest write: fp2 in us-west-2 only
    region_rules("eu-west-1")
    ec2 = boto3.client("ec2", region_name="eu-west-1")
    lost = new["eu-west-1"]
    snapshot = ec2.describe_images(ImageIds=[lost])["Images"][0]["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"]
    ec2.deregister_image(ImageId=lost)  # a janitor's deregister, and its snapshot after it
    ec2.delete_snapshot(SnapshotId=snapshot)
    assert ec2.describe_images(Owners=["self"], Filters=[{"Name": "image-id", "Values": [lost]}])["Images"] == []

    result = run_cli(workdir, "restore", "--ami", lost, "--region", "eu-west-1", "--json")
    assert result.returncode == 0, result.stderr
    restored = json.loads(result.stdout)
    assert restored["image_restored"] is True and restored["snapshots_restored"] == [snapshot]
    assert restored["tags"]["amibuild:fingerprint"] == "fp2"
    image = ec2.describe_images(ImageIds=[lost])["Images"][0]
    assert image["State"] == "available" and {t["Key"]: t["Value"] for t in image["Tags"]}["amibuild:run-id"] == "run-fp2"
    assert ec2.describe_snapshots(SnapshotIds=[snapshot])["Snapshots"][0]["SnapshotId"] == snapshot

    repaired = run_cli(workdir, "channels", "--repair")
    assert repaired.returncode == 0, repaired.stderr
    assert "repaired to build fp2 (run run-fp2) because us-west-2 holds it from the newest write" in repaired.stdout
    assert {r: current("recommended", r) for r in REGIONS} == new

    again = run_cli(workdir, "restore", "--ami", lost, "--region", "eu-west-1")
    assert again.returncode == 0 and f"{lost} in eu-west-1 is registered already" in again.stdout


def test_restore_of_an_image_the_bin_does_not_hold_exits_1_naming_it(workdir) -> None:
    result = run_cli(workdir, "restore", "--ami", "ami-0123456789abcdef0", "--region", "us-west-2")
    assert result.returncode == 1
    assert "ami-0123456789abcdef0 is neither registered in us-west-2 nor in its Recycle Bin" in result.stderr


@pytest.mark.parametrize("args, words", [
    (["--ami", "ami-12345", "--region", "us-west-2"], "--ami: 'ami-12345' is not an AMI id"),
    (["--ami", "ami-0123456789ABCDEF0", "--region", "us-west-2"], "--ami:"),
    (["--ami", "ami-0123456789abcdef0", "--region", "us-wset-2"], "--region: 'us-wset-2' is not an AWS region"),
    (["--region", "us-west-2"], "--ami: name the deregistered image to bring back"),
    ([], "restore: give --ami AMI and --region REGION"),
    (["--ami", "ami-0123456789abcdef0"], "--region: name the region"),
])
def test_bad_restore_input_exits_2_before_any_aws_call(tmp_path: Path, args, words) -> None:
    with FaultProxy("http://127.0.0.1:9") as proxy:  # would record any request, and it goes nowhere
        result = run_cli(tmp_path, "restore", *args, env={"AWS_ENDPOINT_URL": proxy.endpoint,
                                                           "AWS_ACCESS_KEY_ID": "testing",
                                                           "AWS_SECRET_ACCESS_KEY": "testing"})
        assert proxy.log == []
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().startswith("amibuild: error: ") and words in result.stderr


def test_a_registered_image_whose_snapshot_is_gone_is_not_said_to_be_back() -> None:
    registered = RestoreResult("ami-0123456789abcdef0", "us-west-2", image_restored=False, missing=("snap-1",))
    with pytest.raises(RestoreFailed) as failed:
        registered.raise_for_status()
    assert "is back" not in str(failed.value) and "is registered" in str(failed.value)
    assert "snap-1" in str(failed.value) and "cannot launch" in str(failed.value)
    restored = RestoreResult("ami-0123456789abcdef0", "us-west-2", image_restored=True, missing=("snap-1",))
    with pytest.raises(RestoreFailed, match="ami-0123456789abcdef0 is back, but its snapshot"):
        restored.raise_for_status()


def test_a_snapshot_restore_refused_after_the_image_came_back_says_the_image_is_back(workdir, sandbox) -> None:
    region_rules("eu-west-1")
    lost = build("fp1")["eu-west-1"]
    ec2 = boto3.client("ec2", region_name="eu-west-1")
    snapshot = ec2.describe_images(ImageIds=[lost])["Images"][0]["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"]
    ec2.deregister_image(ImageId=lost)
    ec2.delete_snapshot(SnapshotId=snapshot)

    with FaultProxy(sandbox.endpoint) as proxy:
        proxy.fail("eu-west-1", ["RestoreSnapshotFromRecycleBin"], code="UnauthorizedOperation",
                   message="injected: explicit deny")
        result = run_cli(workdir, "restore", "--ami", lost, "--region", "eu-west-1",
                         env={"AWS_ENDPOINT_URL": proxy.endpoint})

    assert result.returncode == 1, result.stderr
    line = result.stderr.strip()
    assert "\n" not in line and f"{lost} is back" in line and snapshot in line and "restore again" in line
    assert ec2.describe_images(ImageIds=[lost])["Images"][0]["State"] == "available"
