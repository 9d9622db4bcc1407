"""Prune's lifecycle ladder against the emulator: deregistration protection turned off before the
deregister (a cooldown waits for a later prune), `--disable-after` (every channel image, every
image in use and every shared image skipped, each saying why), disabled images listed through
IncludeDisabled, the Recycle Bin's rules deciding whether snapshots go, and one DescribeImages
page walk per region.
"""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest

from amibuild.aws import Image
from amibuild.bake.leftovers import Leftover
from amibuild.lifecycle import cleanup
from amibuild.lifecycle.consumers import Uses
from conftest import run_cli
from faultproxy import FaultProxy
from test_prune import CHANNEL, PIPELINE, REGION, bin_rules, build_image, own_images_and_snapshots


@pytest.fixture
def workdir(tmp_path: Path, sandbox) -> Path:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    return tmp_path


def point(channel: str, *amis: str) -> None:
    ssm = boto3.client("ssm", region_name=REGION)
    for ami in amis:
        ssm.put_parameter(Name=CHANNEL.format(channel), Value=ami, Type="String", DataType="aws:ec2:image",
                          Overwrite=True)


def protection(ami: str) -> str:
    raw = boto3.client("ec2", region_name=REGION).describe_images(ImageIds=[ami], IncludeDisabled=True)["Images"]
    return raw[0]["DeregistrationProtection"] if raw else "gone"


def test_an_image_that_left_its_channels_has_its_protection_turned_off_and_is_deregistered(workdir) -> None:
    bin_rules(REGION)
    old, new = build_image(1), build_image(2)
    ec2 = boto3.client("ec2", region_name=REGION)
    for b in (old, new):  # as publish leaves a channel's images
        ec2.enable_image_deregistration_protection(ImageId=b.ami)
    point("stable", old.ami, new.ami)  # `old` left the channel; with --keep-versions 0 nothing holds it

    dry = run_cli(workdir, "prune", "--keep", "1", "--keep-versions", "0", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"delete  {old.ami}  2024-01-01 12:00  + {old.snapshot}  [deregistration protection enabled]" in dry.stdout
    assert "      - turn deregistration protection off: no channel holds it any more" in dry.stdout
    assert f"keep    {new.ami}  2024-01-02 12:00  newest 1; channel stable of ceph current in us-west-2  " \
           "[deregistration protection enabled]" in dry.stdout
    assert protection(old.ami) == "enabled"

    done = run_cli(workdir, "prune", "--keep", "1", "--keep-versions", "0", "--json")
    assert done.returncode == 0, done.stderr
    outcomes = json.loads(done.stdout)["outcomes"]
    assert [(o["image_id"], o["status"], o["unprotected"]) for o in outcomes] == [(old.ami, "deleted", True)]
    images, snapshots = own_images_and_snapshots()
    assert old.ami not in images and old.snapshot not in snapshots
    assert protection(new.ami) == "enabled"  # the channel's image is untouched


def test_a_protection_cooldown_is_turned_off_and_a_later_prune_finishes_the_image(workdir, sandbox) -> None:
    bin_rules(REGION)
    old, new = build_image(1), build_image(2)
    boto3.client("ec2", region_name=REGION).enable_image_deregistration_protection(ImageId=old.ami, WithCooldown=True)

    first = run_cli(workdir, "prune", "--keep", "1")
    assert first.returncode == 0, first.stderr
    assert f"  waiting {REGION} {old.ami}: protection off with a cooldown: it can be deregistered after 20" \
           in first.stdout and "a later prune finishes it" in first.stdout
    assert protection(old.ami).startswith("disabled-until ")
    again = run_cli(workdir, "prune", "--keep", "1", "--dry-run")
    assert f"keep    {old.ami}  2024-01-01 12:00  deregistration protection cooldown until 20" in again.stdout

    sandbox.advance_clock(24 * 3600 + 60)
    last = run_cli(workdir, "prune", "--keep", "1", "--json")
    assert last.returncode == 0, last.stderr
    assert [(o["image_id"], o["status"]) for o in json.loads(last.stdout)["outcomes"]] == [(old.ami, "deleted")]
    assert protection(old.ami) == "gone" and protection(new.ami) == "disabled"


def test_disable_after_keeps_every_image_in_use_and_every_shared_one_and_says_why(workdir) -> None:
    built = [build_image(n) for n in range(1, 8)]
    point("stable", built[0].ami, built[1].ami)  # current: 1; rollback window: 0
    ec2 = boto3.client("ec2", region_name=REGION)
    ec2.create_launch_template(LaunchTemplateName="nodes", LaunchTemplateData={"ImageId": built[2].ami})
    ec2.modify_image_attribute(ImageId=built[3].ami, LaunchPermission={"Add": [{"UserId": "210987654321"}]})

    result = run_cli(workdir, "prune", "--keep", "10", "--disable-after", "30d", "--json")
    assert result.returncode == 0, result.stderr
    plan = {i["image_id"]: i for i in json.loads(result.stdout)["images"]}
    fates = {n: plan[b.ami]["fate"] for n, b in enumerate(built)}
    assert fates == {0: "keep", 1: "keep", 2: "keep", 3: "keep", 4: "disable", 5: "disable", 6: "disable"}
    assert "channel stable of ceph version 1 in us-west-2 (rollback window)" in plan[built[0].ami]["reasons"]
    assert "not disabled: in use" in plan[built[1].ami]["reasons"]
    assert "not disabled: in use" in plan[built[2].ami]["reasons"]
    assert ("not disabled: shared with 210987654321 (DisableImage would remove its launch permissions)"
            in plan[built[3].ami]["reasons"])
    assert plan[built[4].ami]["steps"][0].startswith("disable: nothing uses it, it is older than 30d")
    states = {i["ImageId"]: i["State"] for i in ec2.describe_images(Owners=["self"], IncludeDisabled=True)["Images"]}
    assert [states[b.ami] for b in built] == ["available"] * 4 + ["disabled"] * 3
    visible = {i["ImageId"] for i in ec2.describe_images(Owners=["self"])["Images"]}
    assert not {b.ami for b in built[4:]} & visible  # hidden without IncludeDisabled, as AWS does
    text = run_cli(workdir, "prune", "--keep", "10", "--disable-after", "30d", "--dry-run")
    assert f"keep    {built[4].ami}  2024-01-05 12:00  newest 10; disabled already" in text.stdout


def test_disabled_images_are_found_through_include_disabled_and_deregistered_beyond_keep(workdir) -> None:
    bin_rules(REGION)
    built = [build_image(n) for n in range(1, 5)]
    ec2 = boto3.client("ec2", region_name=REGION)
    for b in built[:3]:
        ec2.disable_image(ImageId=b.ami)

    result = run_cli(workdir, "prune", "--keep", "2", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert {i["image_id"]: i["state"] for i in summary["images"]}[built[0].ami] == "disabled"
    assert sorted(o["image_id"] for o in summary["outcomes"] if o["status"] == "deleted") == \
        sorted([built[0].ami, built[1].ami])  # the newest 2 count disabled images too
    left = {i["ImageId"] for i in ec2.describe_images(Owners=["self"], IncludeDisabled=True)["Images"]}
    assert {built[2].ami, built[3].ami} <= left and not {built[0].ami, built[1].ami} & left


@pytest.mark.parametrize("kinds, recoverable", [((), False), (("EC2_IMAGE",), False),
                                                 (("EC2_IMAGE", "EBS_SNAPSHOT"), True)],
                         ids=["no-rule", "image-rule-only", "both"])
def test_snapshots_go_only_when_the_recycle_bin_keeps_image_and_snapshots(workdir, kinds, recoverable) -> None:
    bin_rules(REGION, kinds=kinds, days=9)
    old, _ = build_image(1), build_image(2)

    dry = run_cli(workdir, "prune", "--keep", "1", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    if recoverable:
        assert "  recycle bin us-west-2: a deregistered image is recoverable for 9d (rules " in dry.stdout
        assert f"`amibuild restore --ami AMI --region {REGION}`" in dry.stdout and "warning:" not in dry.stdout
    else:
        assert "  recycle bin us-west-2: a deregistered image is NOT recoverable: no " in dry.stdout
        assert f"; leaves {old.snapshot} (no " in dry.stdout
    assert ("warning: no Recycle Bin rule covers this pipeline's images in us-west-2" in dry.stdout) is (not kinds)

    done = run_cli(workdir, "prune", "--keep", "1", "--json")
    assert done.returncode == 0, done.stderr
    images, snapshots = own_images_and_snapshots()
    assert old.ami not in images
    assert (old.snapshot in snapshots) is (not recoverable)
    binned = boto3.client("ec2", region_name=REGION).list_images_in_recycle_bin()["Images"]
    assert [i["ImageId"] for i in binned] == ([old.ami] if kinds else [])


def test_prune_dry_run_walks_describe_images_once_per_region_not_once_per_image(sandbox, tmp_path: Path) -> None:
    regions = ("us-west-2", "us-east-1", "eu-west-1")
    (tmp_path / "amibuild.hcl").write_text(PIPELINE.replace('regions    = ["us-west-2"]',
                                                            'regions    = ["us-west-2"]\n  copy_to = ["us-east-1", "eu-west-1"]'))
    for region in regions:
        bin_rules(region)
        for n in range(1, 9):
            build_image(n, region=region)
        boto3.client("ec2", region_name=region).enable_image_deregistration_protection(
            ImageId=boto3.client("ec2", region_name=region).describe_images(Owners=["self"])["Images"][0]["ImageId"])
    with FaultProxy(sandbox.endpoint) as proxy:
        result = run_cli(tmp_path, "prune", "--keep", "2", "--dry-run", "--json", env={"AWS_ENDPOINT_URL": proxy.endpoint})
        assert result.returncode == 0, result.stderr
        seen = [(s.op, s.region) for s in proxy.log]
    plan = json.loads(result.stdout)
    assert len(plan["images"]) == 24 and sum(i["protection"] == "enabled" for i in plan["images"]) == 3
    assert [b["recoverable"] for b in plan["recycle_bin"]] == [8, 8, 8]
    assert {r: seen.count(("DescribeImages", r)) for r in regions} == dict.fromkeys(regions, 1)


# ------------------------------------------------------------------------------- clean-run (pure)


def _image(protection: str) -> Image:
    return Image("ami-0123456789abcdef0", REGION, "partial", "available", {}, "", ("snap-0123456789abcdef0",),
                 protection=protection)


@pytest.mark.parametrize("state, remove, unprotect, why", [
    ("disabled", True, False, ""),
    ("enabled", True, True, ""),
    ("enabled-with-cooldown", False, True, "cooldown: turned off now"),
    ("disabled-until 2026-12-04T18:00:00.000Z", False, False, "cooldown until 2026-12-04T18:00:00.000Z"),
])
def test_clean_run_turns_a_partial_images_protection_off_before_removing_it(state, remove, unprotect, why) -> None:
    image = _image(state)
    found = (Leftover("image", REGION, image.image_id), Leftover("snapshot", REGION, image.snapshot_ids[0]))
    facts = cleanup.RunFacts("20261203T170000Z-abc123", found, {image.image_id: image}, Uses())
    verdicts = {v.item.kind: v for v in cleanup.decide(facts)}
    assert (verdicts["image"].remove, verdicts["image"].unprotect) == (remove, unprotect)
    assert why in verdicts["image"].why
    assert verdicts["snapshot"].remove is remove  # a kept image keeps its snapshot
