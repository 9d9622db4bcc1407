"""Protection follows the channels: every image a channel holds has EC2 deregistration protection in
every region, turned on before the channel points at it; `deprecate_after` sets its deprecation time
at publish and promote moves it; against the emulator over real HTTP."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

import boto3
import pytest
from botocore.exceptions import ClientError

from amibuild.aws import Image
from amibuild.channels import safeguard
from amibuild.channels.safeguard import GuardAction
from amibuild.pipeline.protection import ProtectionSettings
from amibuild.sandbox import Sandbox, seed_images
from amibuild.values import parse_iso_time
from faultproxy import FaultProxy

REGIONS = ("us-west-2", "eu-west-1")
PUT = "AmazonSSM.PutParameter"


def pipeline_text(*, variant_extra: str = "", pipeline_extra: str = "") -> str:
    return f"""
pipeline {{
  name       = "eks-workers"
  ssm_prefix = "/amibuild"
  regions    = ["us-west-2"]
  copy_to    = ["eu-west-1"]
  {pipeline_extra}
}}
variant "ceph" {{
  kubernetes_version = "1.31"
  {variant_extra}
}}
"""


def build(fingerprint: str) -> dict[str, str]:
    """An image per region as a build leaves it (amibuild's tags on); {region: ami}."""
    amis = {}
    source = seed_images()[0].image_id
    for region in REGIONS:
        ec2 = boto3.client("ec2", region_name=region)
        instance = ec2.run_instances(ImageId=source, MinCount=1, MaxCount=1, InstanceType="m5.large")
        ami = ec2.create_image(InstanceId=instance["Instances"][0]["InstanceId"],
                               Name=f"amibuild-ceph-{uuid.uuid4().hex[:8]}")["ImageId"]
        ec2.create_tags(Resources=[ami], Tags=[{"Key": "amibuild:variant", "Value": "ceph"},
                                               {"Key": "amibuild:fingerprint", "Value": fingerprint},
                                               {"Key": "amibuild:run-id", "Value": f"run-{fingerprint}"}])
        amis[region] = ami
    return amis


def described(region: str, ami: str) -> dict:
    return boto3.client("ec2", region_name=region).describe_images(ImageIds=[ami])["Images"][0]


def ami_flag(amis: dict[str, str]) -> str:
    return ",".join(f"{r}={a}" for r, a in amis.items())


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "amibuild.hcl").write_text(pipeline_text())
    return tmp_path


@pytest.fixture
def proxy(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    with FaultProxy(sandbox.endpoint, seed=3) as faults:
        monkeypatch.setenv("AWS_ENDPOINT_URL", faults.endpoint)
        yield faults


# ------------------------------------------------------------------------------- decide (pure)


def _image(protection: str = "disabled", deprecation: str = "") -> Image:
    return Image("ami-0123456789abcdef0", "us-west-2", "n", "available", {}, "", (), protection, deprecation)


NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
KEY = ("us-west-2", "ami-0123456789abcdef0")


@pytest.mark.parametrize("state, cooldown, wanted", [
    ("disabled", False, [GuardAction.PROTECT]),
    ("disabled-until 2026-01-01T10:00:00.000Z", False, [GuardAction.PROTECT]),
    ("enabled", False, []),
    ("enabled", True, [GuardAction.PROTECT]),  # the pipeline asks for the cooldown now
    ("enabled-with-cooldown", True, []),
])
def test_decide_protects_what_is_not_protected_as_asked(state, cooldown, wanted):
    steps = safeguard.decide({KEY: _image(state)}, {KEY: ["recommended"]}, protection=ProtectionSettings(cooldown),
                             deprecate_after=None, now=NOW)
    assert [s.action for s in steps] == wanted
    assert all(s.cooldown is cooldown and "held by channel recommended" in s.reason for s in steps)


@pytest.mark.parametrize("deprecation, after, wanted", [
    ("", timedelta(days=180), [GuardAction.DEPRECATE]),  # a new image: set
    ("2026-02-01T00:00:00.000Z", timedelta(days=180), [GuardAction.DEPRECATE]),  # too soon: moved
    ("2026-06-29T12:00:00.000Z", timedelta(days=180), []),  # within a day of now + 180 d: left
    ("2030-01-01T00:00:00.000Z", timedelta(days=180), []),  # later already: left
    ("2026-02-01T00:00:00.000Z", None, [GuardAction.UNDEPRECATE]),  # no deprecate_after: cleared
    ("", None, []),
])
def test_decide_keeps_a_held_image_from_its_deprecation_time(deprecation, after, wanted):
    steps = safeguard.decide({KEY: _image("enabled", deprecation)}, {KEY: ["stable"]}, protection=ProtectionSettings(),
                             deprecate_after=after, now=NOW)
    assert [s.action for s in steps] == wanted
    if wanted == [GuardAction.DEPRECATE]:
        assert steps[0].at == NOW + after


def test_the_deprecation_time_is_whole_minutes_so_the_longest_deprecate_after_stays_within_ec2s_limit():
    # EC2 keeps a deprecation time to the nearest minute and takes at most 10 years: now + 3650 d with
    # 30 s or more rounded up past it
    late = NOW.replace(hour=9, minute=41, second=45, microsecond=500)
    (step,) = safeguard.decide({KEY: _image("enabled", "")}, {KEY: ["stable"]}, protection=ProtectionSettings(),
                               deprecate_after=timedelta(days=3650), now=late)
    assert step.at == late.replace(second=0, microsecond=0) + timedelta(days=3650)


# ------------------------------------------------------------------------------- against the emulator


def test_a_published_image_cannot_be_deregistered(sandbox, workdir, cli):
    amis = build("fp1")
    done = cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(amis))
    assert done.returncode == 0, done.stderr
    assert "safeguard us-west-2: protect" in done.stdout
    for region, ami in amis.items():
        assert described(region, ami)["DeregistrationProtection"] == "enabled"
        with pytest.raises(ClientError) as refused:
            boto3.client("ec2", region_name=region).deregister_image(ImageId=ami)
        assert refused.value.response["Error"]["Code"] == "OperationNotPermitted"
        assert described(region, ami)["State"] == "available"


def test_protection_is_on_in_every_region_before_the_channel_points_at_the_image(sandbox, proxy, workdir, cli):
    amis = build("fp1")
    gate = proxy.gate([PUT], name="/recommended/image_id", count=None)  # every put of the channel itself
    seen: dict[str, str] = {}

    def observe() -> None:  # while the first put is held: what EC2 says of each image
        try:
            if gate.wait_held(1, timeout=60):
                for region, ami in amis.items():
                    seen[region] = boto3.client("ec2", region_name=region, endpoint_url=sandbox.endpoint
                                                ).describe_images(ImageIds=[ami])["Images"][0]["DeregistrationProtection"]
        finally:
            gate.release()

    watcher = threading.Thread(target=observe)
    watcher.start()
    done = cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(amis))  # the CLI runs in the main thread
    watcher.join(60)
    assert done.returncode == 0, done.stderr
    assert seen == {region: "enabled" for region in REGIONS}


def test_cooldown_comes_from_the_pipeline(sandbox, tmp_path, cli):
    (tmp_path / "amibuild.hcl").write_text(pipeline_text(pipeline_extra="protection { cooldown = true }"))
    amis = build("fp1")
    assert cli(tmp_path, "publish", "--variant", "ceph", "--ami", ami_flag(amis)).returncode == 0
    assert {described(r, a)["DeregistrationProtection"] for r, a in amis.items()} == {"enabled-with-cooldown"}


def test_a_dry_run_lists_the_protection_it_would_turn_on_and_writes_nothing(sandbox, workdir, cli):
    amis = build("fp1")
    done = cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(amis), "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert sorted((g["region"], g["image_id"], g["action"]) for g in plan["guards"]) == sorted(
        (r, a, "protect") for r, a in amis.items())
    assert all("held by channel recommended" in g["reason"] for g in plan["guards"])
    assert {described(r, a)["DeregistrationProtection"] for r, a in amis.items()} == {"disabled"}


def test_promote_and_rollback_protect_the_images_they_point_at(sandbox, workdir, cli):
    first, second = build("fp1"), build("fp2")
    assert cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(first)).returncode == 0
    for region, ami in first.items():  # as an image published before amibuild protected them
        boto3.client("ec2", region_name=region).disable_image_deregistration_protection(ImageId=ami)
    assert cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(second)).returncode == 0
    done = cli(workdir, "rollback", "--variant", "ceph")
    assert done.returncode == 0, done.stderr
    assert {described(r, a)["DeregistrationProtection"] for r, a in first.items()} == {"enabled"}
    for region, ami in second.items():  # it left the channel: protection stays until prune turns it off
        assert described(region, ami)["DeregistrationProtection"] == "enabled"


def test_channels_lists_each_images_protection(sandbox, workdir, cli):
    amis = build("fp1")
    assert cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(amis)).returncode == 0
    listed = cli(workdir, "channels")
    assert listed.returncode == 0, listed.stderr
    assert "PROTECTION" in listed.stdout and "enabled" in listed.stdout
    rows = json.loads(cli(workdir, "channels", "--json").stdout)
    rows = rows if isinstance(rows, list) else rows.get("channels", rows)
    assert {r["region"]: r["protection"] for r in rows if r["ami"]} == {r: "enabled" for r in REGIONS}


# ------------------------------------------------------------------------------- deprecate_after


def deprecation(region: str, ami: str) -> datetime | None:
    return parse_iso_time(described(region, ami).get("DeprecationTime", ""))


def test_deprecate_after_sets_the_deprecation_time_at_publish_in_every_region(sandbox, tmp_path, cli):
    (tmp_path / "amibuild.hcl").write_text(pipeline_text(variant_extra='deprecate_after = "180d"'))
    amis = build("fp1")
    done = cli(tmp_path, "publish", "--variant", "ceph", "--ami", ami_flag(amis))
    assert done.returncode == 0, done.stderr
    wanted = datetime.now(timezone.utc) + timedelta(days=180)
    for region, ami in amis.items():
        got = deprecation(region, ami)
        assert got is not None and abs(got - wanted) < timedelta(minutes=1), (region, got)


def test_promote_moves_the_deprecation_time_of_every_image_a_channel_holds(sandbox, tmp_path, cli):
    (tmp_path / "amibuild.hcl").write_text(pipeline_text(variant_extra='deprecate_after = "180d"'))
    amis = build("fp1")
    assert cli(tmp_path, "publish", "--variant", "ceph", "--ami", ami_flag(amis)).returncode == 0
    soon = datetime.now(timezone.utc) + timedelta(days=2)
    for region, ami in amis.items():  # as if published long ago: its time comes soon
        boto3.client("ec2", region_name=region).enable_image_deprecation(ImageId=ami, DeprecateAt=soon)
    done = cli(tmp_path, "promote", "--variant", "ceph", "--from", "recommended", "--to", "stable")
    assert done.returncode == 0, done.stderr
    wanted = datetime.now(timezone.utc) + timedelta(days=180)
    for region, ami in amis.items():
        got = deprecation(region, ami)
        assert got is not None and abs(got - wanted) < timedelta(minutes=1), (region, got)


def test_without_deprecate_after_a_channel_image_loses_its_deprecation_time(sandbox, workdir, cli):
    amis = build("fp1")
    assert cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(amis)).returncode == 0
    for region, ami in amis.items():  # deprecated by hand (or by a deprecate_after since removed)
        boto3.client("ec2", region_name=region).enable_image_deprecation(
            ImageId=ami, DeprecateAt=datetime.now(timezone.utc) + timedelta(days=3))
    done = cli(workdir, "promote", "--variant", "ceph", "--from", "recommended", "--to", "stable")
    assert done.returncode == 0, done.stderr
    assert "undeprecate" in done.stdout
    assert all(deprecation(r, a) is None for r, a in amis.items())


@pytest.mark.parametrize("value", ['"6 months"', '"0d"', '"4000d"', "180", '"180x"'])
def test_a_bad_deprecate_after_exits_2_naming_the_field(sandbox, tmp_path, cli, value):
    (tmp_path / "amibuild.hcl").write_text(pipeline_text(variant_extra=f"deprecate_after = {value}"))
    done = cli(tmp_path, "publish", "--variant", "ceph", "--ami", "us-west-2=ami-0123456789abcdef0")
    assert done.returncode == 2
    assert "amibuild.hcl" in done.stderr and "deprecate_after" in done.stderr


@pytest.mark.parametrize("block", ["protection { cooldown = \"yes\" }", "protection { cooldwn = true }"])
def test_a_bad_protection_block_exits_2_naming_the_field(sandbox, tmp_path, cli, block):
    (tmp_path / "amibuild.hcl").write_text(pipeline_text(pipeline_extra=block))
    done = cli(tmp_path, "channels")
    assert done.returncode == 2
    assert "pipeline.protection" in done.stderr


@pytest.mark.parametrize("answer, word", [
    ("enabled-without-cooldown", "enabled"), ("enabled", "enabled"), ("enabled-with-cooldown", "enabled-with-cooldown"),
    ("disabled-until 2026-12-08T10:00:00.000Z", "disabled-until 2026-12-08T10:00:00.000Z"), (None, "disabled"),
])
def test_describe_images_protection_is_read_in_amibuilds_words_however_aws_spells_it(answer, word) -> None:
    # AWS's own example of EnableImageDeregistrationProtection answers "enabled-without-cooldown": an image
    # so protected must read as protected (prune turns it off first; publish does not turn it on again)
    from amibuild.aws.ec2 import _image

    raw = {"ImageId": "ami-0123456789abcdef0", **({"DeregistrationProtection": answer} if answer else {})}
    assert _image(raw, "us-west-2").protection == word
