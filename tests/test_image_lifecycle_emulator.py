"""The emulator's image lifecycle answers as EC2 and Recycle Bin do (boto3 over real HTTP): a
protected image cannot be deregistered, a cooldown keeps it so for 24 hours after the disable,
deprecation times are rounded and bounded, disabled images are hidden unless asked for and lose
their launch permissions, and a Recycle Bin rule keeps a deregistered image and its snapshot,
which restore with their ids and tags.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import boto3
import pytest
from botocore.exceptions import ClientError

from amibuild.aws import Aws
from faultproxy import FaultProxy
from test_build_guard import until

REGION = "us-east-1"


def image(ec2, name: str = "img", tags: dict[str, str] | None = None) -> tuple[str, str]:
    ami = ec2.register_image(Name=name)["ImageId"]
    if tags:
        ec2.create_tags(Resources=[ami], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
    snapshot = ec2.describe_images(ImageIds=[ami])["Images"][0]["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"]
    return ami, snapshot


def code(call) -> str:
    with pytest.raises(ClientError) as caught:
        call()
    return caught.value.response["Error"]["Code"]


def test_a_protected_image_is_not_deregistered_until_protection_is_off(sandbox) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    ami, _ = image(ec2)

    ec2.enable_image_deregistration_protection(ImageId=ami)

    assert ec2.describe_images(ImageIds=[ami])["Images"][0]["DeregistrationProtection"] == "enabled"
    assert code(lambda: ec2.deregister_image(ImageId=ami)) == "OperationNotPermitted"
    ec2.disable_image_deregistration_protection(ImageId=ami)
    assert ec2.describe_images(ImageIds=[ami])["Images"][0]["DeregistrationProtection"] == "disabled"
    ec2.deregister_image(ImageId=ami)
    assert ec2.describe_images(Owners=["self"], Filters=[{"Name": "image-id", "Values": [ami]}])["Images"] == []


def test_a_cooldown_keeps_the_protection_for_24_hours_after_the_disable(sandbox) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    ami, _ = image(ec2)
    ec2.enable_image_deregistration_protection(ImageId=ami, WithCooldown=True)
    assert ec2.describe_images(ImageIds=[ami])["Images"][0]["DeregistrationProtection"] == "enabled-with-cooldown"

    ec2.disable_image_deregistration_protection(ImageId=ami)

    shown = ec2.describe_images(ImageIds=[ami])["Images"][0]["DeregistrationProtection"]
    assert shown.startswith("disabled-until ")
    until = datetime.fromisoformat(shown.split(" ", 1)[1].replace("Z", "+00:00"))
    assert timedelta(hours=23, minutes=59) < until - datetime.now(timezone.utc) <= timedelta(hours=24)
    assert code(lambda: ec2.deregister_image(ImageId=ami)) == "OperationNotPermitted"


def test_deprecation_is_rounded_to_the_minute_and_refused_in_the_past(sandbox) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    ami, _ = image(ec2)
    at = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(days=180, seconds=40)

    ec2.enable_image_deprecation(ImageId=ami, DeprecateAt=at)

    shown = ec2.describe_images(ImageIds=[ami])["Images"][0]["DeprecationTime"]
    assert shown.endswith(":00.000Z")
    assert abs(datetime.fromisoformat(shown.replace("Z", "+00:00")) - at) <= timedelta(seconds=30)
    assert Aws(region=REGION).find_image(REGION, ami).deprecation_time == shown
    assert code(lambda: ec2.enable_image_deprecation(
        ImageId=ami, DeprecateAt=datetime.now(timezone.utc) - timedelta(days=1))) == "InvalidParameterValue"
    ec2.disable_image_deprecation(ImageId=ami)
    assert "DeprecationTime" not in ec2.describe_images(ImageIds=[ami])["Images"][0]


def test_a_public_image_deprecates_at_most_two_years_after_its_creation(sandbox) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    ami, _ = image(ec2)
    far = datetime.now(timezone.utc) + timedelta(days=3 * 365)
    ec2.enable_image_deprecation(ImageId=ami, DeprecateAt=far)  # private: up to 10 years ahead
    ec2.modify_image_attribute(ImageId=ami, LaunchPermission={"Add": [{"Group": "all"}]})

    assert code(lambda: ec2.enable_image_deprecation(ImageId=ami, DeprecateAt=far)) == "InvalidParameterValue"
    ec2.enable_image_deprecation(ImageId=ami, DeprecateAt=datetime.now(timezone.utc) + timedelta(days=365))


def test_a_disabled_image_is_hidden_unless_asked_for_and_is_made_private(sandbox) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    ami, _ = image(ec2)
    ec2.modify_image_attribute(ImageId=ami, LaunchPermission={"Add": [{"UserId": "210987654321"}]})

    ec2.disable_image(ImageId=ami)

    assert ec2.describe_images(Owners=["self"], Filters=[{"Name": "image-id", "Values": [ami]}])["Images"] == []
    shown = ec2.describe_images(ImageIds=[ami], IncludeDisabled=True)["Images"]
    assert [i["State"] for i in shown] == ["disabled"]
    assert [i.image_id for i in Aws(region=REGION).describe_images(REGION, image_ids=[ami], include_disabled=True)] == [ami]
    ec2.enable_image(ImageId=ami)
    assert ec2.describe_image_attribute(ImageId=ami, Attribute="launchPermission")["LaunchPermissions"] == []


def test_a_recycle_bin_rule_keeps_a_deregistered_image_and_its_snapshot_which_restore_with_their_tags(sandbox) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    rbin = boto3.client("rbin", region_name=REGION)
    kept = {"amibuild:pipeline": "ceph"}
    for kind in ("EC2_IMAGE", "EBS_SNAPSHOT"):
        rbin.create_rule(ResourceType=kind, RetentionPeriod={"RetentionPeriodValue": 7, "RetentionPeriodUnit": "DAYS"},
                         ResourceTags=[{"ResourceTagKey": "amibuild:pipeline", "ResourceTagValue": "ceph"}])
    ami, snapshot = image(ec2, tags=kept)
    ec2.create_tags(Resources=[snapshot], Tags=[{"Key": "amibuild:pipeline", "Value": "ceph"}])
    other, _ = image(ec2, "other")

    ec2.deregister_image(ImageId=ami)
    ec2.delete_snapshot(SnapshotId=snapshot)
    ec2.deregister_image(ImageId=other)

    aws = Aws(region=REGION)
    assert [b.resource_id for b in aws.images_in_recycle_bin(REGION)] == [ami]  # `other` has no covering rule
    assert [b.resource_id for b in aws.snapshots_in_recycle_bin(REGION)] == [snapshot]
    binned = aws.images_in_recycle_bin(REGION)[0]
    assert binned.exits - binned.entered == timedelta(days=7)
    assert [(r.resource_type, r.days, r.tags) for r in aws.retention_rules(REGION, "EC2_IMAGE")] == [
        ("EC2_IMAGE", 7, (("amibuild:pipeline", "ceph"),))]

    aws.restore_snapshot(REGION, snapshot)
    aws.restore_image(REGION, ami)

    restored = aws.find_image(REGION, ami)
    assert restored is not None and restored.tags == kept and restored.snapshot_ids == (snapshot,)
    assert ec2.describe_snapshots(SnapshotIds=[snapshot])["Snapshots"][0]["SnapshotId"] == snapshot
    assert aws.images_in_recycle_bin(REGION) == []
    assert code(lambda: ec2.restore_image_from_recycle_bin(ImageId=other)) == "InvalidAMIID.NotFound"


def test_recycle_bin_refuses_bad_rules_and_unknown_ones_as_aws_does(sandbox) -> None:
    rbin = boto3.client("rbin", region_name=REGION)

    assert code(lambda: rbin.create_rule(ResourceType="EC2_IMAGE", RetentionPeriod={
        "RetentionPeriodValue": 400, "RetentionPeriodUnit": "DAYS"})) == "ValidationException"
    assert code(lambda: rbin.get_rule(Identifier="rule-0123456789")) == "ResourceNotFoundException"
    made = rbin.create_rule(ResourceType="EBS_SNAPSHOT",
                            RetentionPeriod={"RetentionPeriodValue": 1, "RetentionPeriodUnit": "DAYS"})
    assert [r["Identifier"] for r in rbin.list_rules(ResourceType="EBS_SNAPSHOT")["Rules"]] == [made["Identifier"]]
    assert rbin.list_rules(ResourceType="EC2_IMAGE")["Rules"] == []
    rbin.delete_rule(Identifier=made["Identifier"])
    assert rbin.list_rules(ResourceType="EBS_SNAPSHOT")["Rules"] == []


def test_a_rule_deleted_between_the_listing_and_its_read_is_no_longer_a_rule(sandbox, monkeypatch) -> None:
    """ListRules names a rule, it is deleted, then GetRule answers ResourceNotFoundException: the
    rule has gone, so it keeps nothing, and prune's gather goes on without it."""
    direct = boto3.client("rbin", region_name=REGION, endpoint_url=sandbox.endpoint)
    period = {"RetentionPeriodValue": 7, "RetentionPeriodUnit": "DAYS"}
    gone, kept = (direct.create_rule(ResourceType="EC2_IMAGE", RetentionPeriod=period)["Identifier"] for _ in "ab")
    with FaultProxy(sandbox.endpoint) as proxy, ThreadPoolExecutor(1) as pool:
        proxy.pause([""], after_forward=True)  # rbin is REST: no operation name on the wire
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        listing = pool.submit(Aws(region=REGION).retention_rules, REGION, "EC2_IMAGE")
        until(lambda: proxy.paused() == 1, "ListRules answered, its answer held")
        direct.delete_rule(Identifier=gone)
        proxy.resume()
        assert [r.identifier for r in listing.result(timeout=30)] == [kept]
