"""Pruning old images: the pure plan, the executor on recorded EC2 answers, the CLI on the emulator.

Images are made the quick way a build leaves them (an instance from a seeded EKS image,
`create_image`, amibuild's tags on the image and its snapshot, ``amibuild:created`` in increasing
order), so eight "builds" take a fraction of a second. The emulator does not implement image
deprecation: `--deprecate-only` runs on recorded answers (tests/data/prune/) through botocore's
Stubber. A refused deregistration comes from the recording proxy (tests/recorder.py).
"""

from __future__ import annotations

import json
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from amibuild import values
from amibuild.lifecycle import prune
from amibuild.pipeline import load
from amibuild.aws import Aws, Image
from amibuild.errors import SpecError
from amibuild.jobs import setup_commands
from amibuild.jobs.env import Env
from amibuild.jobs.requests_setup import PruneRequest
from amibuild.sandbox import seed_images
from conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data" / "prune"
REGION = "us-west-2"
NOW = datetime(2024, 3, 1, 12, 0, 30, tzinfo=timezone.utc)
PIPELINE = """
pipeline {
  name       = "prune-e2e"
  ssm_prefix = "/amibuild"
  regions    = ["us-west-2"]
}
variant "ceph" {
  extra_packages = ["ceph-common"]
}
"""
CHANNEL = "/amibuild/prune-e2e/1.30/ceph/{}/image_id"


# ------------------------------------------------------------------------------- pure plan


def image(n: int, *, variant: str = "ceph", region: str = REGION, state: str = "available",
          created: str | None = None, creation_date: str = "", snapshots: tuple[str, ...] | None = None) -> Image:
    tags = {"amibuild:fingerprint": f"fp{n}", "amibuild:variant": variant, "amibuild:pipeline": "p"}
    if created is not False:
        tags["amibuild:created"] = created or f"2024-01-{n:02d}T12:00:00Z"
    return Image(f"ami-{n:017x}", region, f"amibuild-{variant}-{n}", state, tags, creation_date,
                 snapshots if snapshots is not None else (f"snap-{n:017x}",))


def own_snapshots(*images: Image) -> dict[str, dict[str, str]]:
    return {s: {k: v for k, v in i.tags.items() if k in ("amibuild:fingerprint", "amibuild:pipeline")}
            for i in images for s in i.snapshot_ids}


def fates(plan: prune.PrunePlan) -> dict[str, str]:
    return {i.image_id: i.fate.value for i in plan.images}


def test_keeps_the_newest_n_per_variant_and_region_and_deletes_the_rest() -> None:
    images = [image(n) for n in range(1, 6)] + [image(n, variant="arm") for n in range(6, 8)] + \
             [image(n, region="eu-west-1") for n in range(8, 11)]
    plan = prune.plan_prune(images, {}, 2, None, NOW, snapshot_tags=own_snapshots(*images))
    assert [i.image_id for i in plan.to_change] == [image(8).image_id, image(3).image_id, image(2).image_id,
                                                    image(1).image_id]
    assert {i.image_id for i in plan.kept} == {image(n).image_id for n in (9, 10, 6, 7, 4, 5)}
    assert all(i.reasons == ("newest 2",) for i in plan.kept)
    deleted = plan.to_change[-1]
    assert deleted.fate is prune.Fate.DELETE and deleted.snapshots == (f"snap-{1:017x}",)


def test_an_image_in_use_is_kept_with_every_reason_listed() -> None:
    images = [image(n) for n in range(1, 5)]
    in_use = {image(1).image_id: ("channel stable of ceph current in us-west-2",
                                  "instance i-0abc stopped"),
              image(2).image_id: ("launch template lt-1 (nodes) v2 used by Auto Scaling group nodes in us-west-2",)}
    plan = prune.plan_prune(images, in_use, 1, None, NOW, snapshot_tags=own_snapshots(*images))
    reasons = {i.image_id: i.reasons for i in plan.images}
    assert reasons[image(1).image_id] == in_use[image(1).image_id]
    assert reasons[image(2).image_id] == in_use[image(2).image_id]
    assert reasons[image(4).image_id] == ("newest 1",)
    assert fates(plan)[image(3).image_id] == "delete"


def test_images_younger_than_older_than_are_kept() -> None:
    images = [image(1, created="2024-01-01T00:00:00Z"), image(2, created="2024-02-20T00:00:00Z"),
              image(3, created="2024-02-29T00:00:00Z")]
    plan = prune.plan_prune(images, {}, 1, values.age("30d", "--older-than"), NOW, snapshot_tags=own_snapshots(*images))
    assert fates(plan) == {image(1).image_id: "delete", image(2).image_id: "keep", image(3).image_id: "keep"}
    assert {i.image_id: i.reasons for i in plan.images}[image(2).image_id] == ("younger than 30d",)


def test_the_created_tag_orders_images_before_the_creation_date() -> None:
    # CreationDate says 1 is newest; amibuild:created (when the build started) says 2 is
    older_by_tag = image(1, created="2024-01-01T00:00:00Z", creation_date="2024-02-01T00:00:00.000Z")
    newer_by_tag = image(2, created="2024-01-05T00:00:00Z", creation_date="2024-01-06T00:00:00.000Z")
    untagged = image(3, created=False, creation_date="2024-01-03T00:00:00.000Z")  # type: ignore[arg-type]
    plan = prune.plan_prune([older_by_tag, newer_by_tag, untagged], {}, 1, None, NOW)
    assert fates(plan) == {newer_by_tag.image_id: "keep", untagged.image_id: "delete", older_by_tag.image_id: "delete"}
    assert [i.image_id for i in plan.images] == [newer_by_tag.image_id, untagged.image_id, older_by_tag.image_id]


def test_a_pending_image_is_left_alone_and_a_failed_one_takes_no_newest_slot() -> None:
    images = [image(1), image(2), image(3, state="failed"), image(4, state="pending"), image(5, state="weird")]
    plan = prune.plan_prune(images, {}, 1, None, NOW, snapshot_tags=own_snapshots(*images))
    reasons = {i.image_id: i.reasons for i in plan.images}
    assert fates(plan) == {image(1).image_id: "delete", image(2).image_id: "keep", image(3).image_id: "delete",
                           image(4).image_id: "keep", image(5).image_id: "keep"}
    assert reasons[image(2).image_id] == ("newest 1",)
    assert reasons[image(4).image_id] == ("state pending",)
    assert "not understood" in reasons[image(5).image_id][0]


def test_only_snapshots_carrying_the_images_amibuild_tags_and_backing_no_kept_image_are_deleted() -> None:
    shared = "snap-0000000000000shared"
    old = image(1, snapshots=("snap-000000000000000a1", "snap-0000000000foreign", shared))
    new = image(2, snapshots=("snap-000000000000000b2", shared))
    tags = own_snapshots(old, new)
    tags["snap-0000000000foreign"] = {"team": "platform"}
    plan = prune.plan_prune([old, new], {}, 1, None, NOW, snapshot_tags=tags)
    doomed = plan.to_change[0]
    assert doomed.snapshots == ("snap-000000000000000a1",)
    assert doomed.kept_snapshots == {
        "snap-0000000000foreign": "does not carry the image's amibuild:fingerprint tag: not made by amibuild",
        shared: "backs an image that is kept",
    }


def test_deprecate_only_plans_a_deprecation_and_no_snapshot_deletion() -> None:
    images = [image(1), image(2)]
    plan = prune.plan_prune(images, {}, 1, None, NOW, snapshot_tags=own_snapshots(*images), deprecate_only=True)
    assert [(i.image_id, i.fate.value, i.snapshots) for i in plan.to_change] == [(image(1).image_id, "deprecate", ())]


@pytest.mark.parametrize("text,expected", [("30d", timedelta(days=30)), ("12h", timedelta(hours=12)),
                                           ("2w", timedelta(weeks=2)), (" 7d ", timedelta(days=7)),
                                           ("90m", timedelta(minutes=90)), ("", None), (None, None)])
def test_older_than_reads_minutes_hours_days_and_weeks(text, expected: timedelta | None) -> None:
    assert values.age(text, "--older-than") == expected


@pytest.mark.parametrize("text", ["30", "5x", "0d", "-3d", "30 days", "abc"])
def test_older_than_refuses_anything_else(text: str) -> None:
    with pytest.raises(SpecError, match="--older-than"):
        values.age(text, "--older-than")


def test_keep_below_one_is_refused_before_anything_is_read() -> None:
    with pytest.raises(SpecError, match="at least 1"):
        setup_commands.prune(PruneRequest(keep="0"), Env())
    with pytest.raises(SpecError, match="--keep 5"):
        setup_commands.prune(PruneRequest(keep=None), Env())


def test_the_deprecation_time_is_a_whole_minute_in_the_future() -> None:
    at = prune.deprecation_time(NOW)
    assert at > NOW + timedelta(seconds=59) and at.second == 0 and at.microsecond == 0


# ------------------------------------------------------------------------------- recorded EC2 answers


@pytest.fixture
def offline_aws(monkeypatch: pytest.MonkeyPatch) -> Aws:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    return Aws(region=REGION)


def test_deprecate_only_sets_a_deprecation_time_deletes_nothing_and_carries_on_past_a_refusal(offline_aws) -> None:
    recorded = json.loads((DATA / "enable-image-deprecation.json").read_text())
    images = [image(n) for n in range(1, 5)]
    plan = prune.plan_prune(images, {}, 2, None, NOW, snapshot_tags=own_snapshots(*images), deprecate_only=True)
    at = prune.deprecation_time(NOW)
    with Stubber(offline_aws.client("ec2", REGION)) as stub:
        # newest first: image 2 is refused, image 1 still gets its deprecation time; no other call is allowed
        denied = recorded["denied"]["error"]
        stub.add_client_error("enable_image_deprecation", service_error_code=denied["code"],
                              service_message=denied["message"], http_status_code=denied["http_status"],
                              expected_params={"ImageId": image(2).image_id, "DeprecateAt": at})
        stub.add_response("enable_image_deprecation", recorded["ok"]["response"],
                          expected_params={"ImageId": image(1).image_id, "DeprecateAt": at})
        result = prune.execute_prune(offline_aws, plan, now=NOW)
        stub.assert_no_pending_responses()
    assert [(o.image_id, o.status.value) for o in result.outcomes] == [(image(2).image_id, "failed"),
                                                                      (image(1).image_id, "deprecated")]
    assert "access denied (UnauthorizedOperation)" in result.failed[0].errors[0]
    assert result.deprecate_at == at
    with pytest.raises(prune.PruneFailed) as caught:
        result.raise_for_status()
    assert caught.value.exit_code == 1 and image(2).image_id in str(caught.value)
    lines = list(prune.report_lines(result))
    assert any(line.startswith(f"  deprecated {REGION} {image(1).image_id}") for line in lines)
    assert any(line.startswith(f"  NOT deprecated {REGION} {image(2).image_id}") for line in lines)
    assert lines[-1].startswith("summary: 1 deprecated (deprecation at 2024-03-01 12:02 UTC), 1 failed, 2 kept")


def test_deprecate_only_leaves_an_image_deprecated_already_as_it_is(offline_aws) -> None:
    recorded = json.loads((DATA / "describe-images-deprecated.json").read_text())
    filters = {"tag-key": ["amibuild:fingerprint"], "tag:amibuild:pipeline": ["p"]}
    with Stubber(offline_aws.client("ec2", REGION)) as stub:
        stub.add_response("describe_images", recorded["response"], expected_params={
            "Owners": ["self"], "Filters": [{"Name": k, "Values": v} for k, v in filters.items()], "MaxResults": 1000})
        found = offline_aws.own_images(REGION, filters)
    deprecated = {i.image_id: when for i, text in found if (when := values.parse_iso_time(text))}
    assert deprecated == {"ami-0000000000000000a": datetime(2024, 2, 1, 12, tzinfo=timezone.utc)}
    images = [i for i, _ in found]
    plan = prune.plan_prune(images, {}, 1, None, NOW, snapshot_tags=own_snapshots(*images), deprecate_only=True,
                            deprecated=deprecated)
    assert {i.image_id: (i.fate.value, i.reasons) for i in plan.images} == {
        "ami-0000000000000000c": ("keep", ("newest 1",)),
        "ami-0000000000000000b": ("deprecate", ()),
        "ami-0000000000000000a": ("keep", ("deprecated already (since 2024-02-01 12:00 UTC)",)),
    }
    # deleting is another matter: a deprecated image goes like any other
    plan = prune.plan_prune(images, {}, 1, None, NOW, snapshot_tags=own_snapshots(*images), deprecated=deprecated)
    assert [i.image_id for i in plan.to_change] == ["ami-0000000000000000b", "ami-0000000000000000a"]


def test_in_use_decides_from_recorded_facts_every_channel_whatever_its_template() -> None:
    recorded = json.loads((DATA / "uses-two-templates.json").read_text())
    uses = prune.Uses.from_dict(recorded)
    assert prune.Uses.from_dict(uses.to_dict()) == uses  # what gather records reads back the same
    assert prune.in_use(uses, keep_versions=2) == {
        "ami-0000000000000000d": ("channel stable of ceph current in us-west-2",),
        "ami-0000000000000000c": ("channel stable of ceph version 4 in us-west-2 (rollback window)",),
        # version 3 repeats version 2's image: the window counts images, not versions
        "ami-0000000000000000b": ("channel stable of ceph version 3 in us-west-2 (rollback window)",),
        "ami-000000000000000f1": ("channel parameter /amibuild/ceph/stable current in eu-west-1",),
        "ami-000000000000000e1": ("channel parameter /amibuild/ceph/stable version 1 in eu-west-1 (rollback window)",),
        "ami-00000000000000011": ("launch template lt-0aaaaaaaaaaaaaaaa (nodes) v1 default version in us-west-2",),
        "ami-00000000000000012": ("launch template lt-0aaaaaaaaaaaaaaaa (nodes) v2 used by Auto Scaling group "
                                  "workers in us-west-2",),
        "ami-00000000000000013": ("launch template lt-0aaaaaaaaaaaaaaaa (nodes) v3 latest version in us-west-2",),
        "ami-00000000000000014": ("launch configuration legacy in us-west-2",),
        "ami-00000000000000015": ("instance i-0123456789abcdef0 stopped",),
    }
    # --keep-versions 0: only the current values of the channels
    assert [r for r in prune.in_use(uses, keep_versions=0).values() if "rollback window" in r[0]] == []


# ------------------------------------------------------------------------------- against the emulator


@dataclass(frozen=True)
class Built:
    ami: str
    snapshot: str


def build_image(n: int, *, pipeline: str = "prune-e2e", variant: str = "ceph", tagged: bool = True,
                region: str = REGION) -> Built:
    """An image and its snapshot as a build leaves them; `n` orders the builds by amibuild:created."""
    ec2 = boto3.client("ec2", region_name=region)
    instance = ec2.run_instances(ImageId=seed_images()[0].image_id, MinCount=1, MaxCount=1,
                                 InstanceType="m5.large")["Instances"][0]["InstanceId"]
    ami = ec2.create_image(InstanceId=instance, Name=f"amibuild-{variant}-{uuid.uuid4().hex[:8]}")["ImageId"]
    ec2.terminate_instances(InstanceIds=[instance])  # an instance of the seed image: not what this test is about
    snapshot = ec2.describe_images(ImageIds=[ami])["Images"][0]["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"]
    if tagged:
        tags = {"amibuild:fingerprint": f"fp-{pipeline}-{n}", "amibuild:variant": variant,
                "amibuild:pipeline": pipeline, "amibuild:created": f"2024-01-{n:02d}T12:00:00Z"}
        ec2.create_tags(Resources=[ami, snapshot], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
    return Built(ami, snapshot)


def own_images_and_snapshots() -> tuple[set[str], set[str]]:
    ec2 = boto3.client("ec2", region_name=REGION)
    images = {i["ImageId"] for i in ec2.describe_images(Owners=["self"])["Images"]}
    snapshots = {s["SnapshotId"] for s in ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]}
    return images, snapshots


def bin_rules(region: str, *, days: int = 7, kinds: tuple[str, ...] = ("EC2_IMAGE", "EBS_SNAPSHOT"),
              pipeline: str = "prune-e2e") -> None:
    """Recycle Bin rules keeping the pipeline's images and snapshots (tag-level, by amibuild:pipeline)."""
    rbin = boto3.client("rbin", region_name=region)
    for kind in kinds:
        rbin.create_rule(ResourceType=kind, RetentionPeriod={"RetentionPeriodValue": days, "RetentionPeriodUnit": "DAYS"},
                         ResourceTags=[{"ResourceTagKey": "amibuild:pipeline", "ResourceTagValue": pipeline}])


@pytest.fixture
def workdir(tmp_path: Path, sandbox) -> Path:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    return tmp_path


@pytest.fixture
def eight_builds(workdir: Path) -> dict[str, object]:
    """8 builds of ceph; stable points at the oldest, an ASG's launch template at the third; plus an
    image and snapshot amibuild did not make and an image of another pipeline. The Recycle Bin keeps
    the pipeline's images and snapshots (else prune would keep the snapshots: tests/test_prune_ladder.py)."""
    bin_rules(REGION)
    built = [build_image(n) for n in range(1, 9)]
    foreign = build_image(20, tagged=False)
    other = build_image(21, pipeline="someone-else")
    boto3.client("ssm", region_name=REGION).put_parameter(
        Name=CHANNEL.format("stable"), Value=built[0].ami, Type="String", DataType="aws:ec2:image")
    ec2 = boto3.client("ec2", region_name=REGION)
    template = ec2.create_launch_template(LaunchTemplateName="nodes", LaunchTemplateData={
        "ImageId": seed_images()[0].image_id})["LaunchTemplate"]["LaunchTemplateId"]
    ec2.create_launch_template_version(LaunchTemplateId=template, LaunchTemplateData={"ImageId": built[2].ami})
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    boto3.client("autoscaling", region_name=REGION).create_auto_scaling_group(
        AutoScalingGroupName="nodes", MinSize=0, MaxSize=2, DesiredCapacity=0, VPCZoneIdentifier=subnet,
        LaunchTemplate={"LaunchTemplateId": template, "Version": "2"})
    return {"built": built, "foreign": foreign, "other": other, "template": template}


def test_dry_run_prints_the_plan_with_a_reason_for_every_keep_and_deletes_nothing(workdir: Path, eight_builds) -> None:
    built, template = eight_builds["built"], eight_builds["template"]
    before = own_images_and_snapshots()
    result = run_cli(workdir, "prune", "--keep", "2", "--dry-run", "--json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["dry_run"] is True and plan["outcomes"] is None
    by_id = {i["image_id"]: i for i in plan["images"]}
    assert set(by_id) == {b.ami for b in built}  # not the foreign image, not the other pipeline's
    assert by_id[built[7].ami]["reasons"] == ["newest 2"]
    assert by_id[built[6].ami]["reasons"] == ["newest 2"]
    assert by_id[built[0].ami]["reasons"] == ["channel stable of ceph current in us-west-2"]
    assert by_id[built[2].ami]["reasons"] == [
        f"launch template {template} (nodes) v2 latest version in us-west-2",
        f"launch template {template} (nodes) v2 used by Auto Scaling group nodes in us-west-2",
    ]
    assert {i: by_id[b.ami]["fate"] for i, b in enumerate(built, 1)} == {
        1: "keep", 2: "delete", 3: "keep", 4: "delete", 5: "delete", 6: "delete", 7: "keep", 8: "keep"}
    assert by_id[built[1].ami]["snapshots"] == [built[1].snapshot]
    assert own_images_and_snapshots() == before

    text = run_cli(workdir, "prune", "--keep", "2", "--dry-run")
    assert text.returncode == 0, text.stderr
    assert "dry run, nothing changed" in text.stdout
    assert f"keep    {built[0].ami}  2024-01-01 12:00  channel stable of ceph current in us-west-2" in text.stdout
    assert f"delete  {built[1].ami}  2024-01-02 12:00  + {built[1].snapshot}" in text.stdout
    assert own_images_and_snapshots() == before


def test_keep_2_deletes_exactly_the_others_and_their_snapshots_and_nothing_amibuild_did_not_make(
        workdir: Path, eight_builds) -> None:
    built, foreign, other = eight_builds["built"], eight_builds["foreign"], eight_builds["other"]
    result = run_cli(workdir, "prune", "--keep", "2", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    doomed = [built[n - 1] for n in (6, 5, 4, 2)]  # newest first
    assert [(o["image_id"], o["status"], o["snapshots_deleted"]) for o in summary["outcomes"]] == [
        (b.ami, "deleted", [b.snapshot]) for b in doomed]
    assert summary["failed"] == []
    images, snapshots = own_images_and_snapshots()
    kept = [built[n - 1] for n in (1, 3, 7, 8)] + [foreign, other]
    assert images == {b.ami for b in kept}
    assert {b.snapshot for b in kept} <= snapshots
    assert not {b.snapshot for b in doomed} & snapshots

    again = run_cli(workdir, "prune", "--keep", "2")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip().splitlines()[-1] == "summary: 0 deleted, 0 failed, 4 kept"


def test_a_refused_deregistration_does_not_stop_the_rest_and_exits_1(workdir: Path, eight_builds, sandbox) -> None:
    from recorder import Recorder

    built = eight_builds["built"]
    refused = built[4]
    with Recorder(sandbox.endpoint) as proxy:
        proxy.refuse("DeregisterImage", REGION, contains=refused.ami, code="UnauthorizedOperation",
                     message="You are not authorized to perform this operation.")
        env = {**os.environ, "AWS_ENDPOINT_URL": proxy.endpoint}
        result = run_cli(workdir, "prune", "--keep", "2", env=env)
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("amibuild: error: prune: 1 image(s) not (fully) pruned: ")
    assert f"us-west-2 {refused.ami}: not deregistered: " in last and "UnauthorizedOperation" in last
    assert f"  NOT deleted us-west-2 {refused.ami}: " in result.stdout
    assert "summary: 3 deleted, 1 failed, 4 kept" in result.stdout
    images, snapshots = own_images_and_snapshots()
    assert refused.ami in images and refused.snapshot in snapshots
    for gone in (built[1], built[3], built[5]):
        assert gone.ami not in images and gone.snapshot not in snapshots


def test_gather_finds_every_kind_of_use(sandbox, workdir: Path) -> None:
    """Stopped instance, default launch template version, mixed instances policy, launch configuration,
    and the rollback window of a channel's history (earlier versions holding other AMIs)."""
    built = [build_image(n) for n in range(1, 10)]
    ec2 = boto3.client("ec2", region_name=REGION)
    instance = ec2.run_instances(ImageId=built[0].ami, MinCount=1, MaxCount=1,
                                 InstanceType="m5.large")["Instances"][0]["InstanceId"]
    ec2.stop_instances(InstanceIds=[instance])
    template = ec2.create_launch_template(LaunchTemplateName="mixed", LaunchTemplateData={
        "ImageId": built[1].ami})["LaunchTemplate"]["LaunchTemplateId"]
    ec2.create_launch_template_version(LaunchTemplateId=template, LaunchTemplateData={"ImageId": built[2].ami})
    autoscaling = boto3.client("autoscaling", region_name=REGION)
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName="spot", MinSize=0, MaxSize=2, DesiredCapacity=0,
        VPCZoneIdentifier=ec2.describe_subnets()["Subnets"][0]["SubnetId"],
        MixedInstancesPolicy={"LaunchTemplate": {
            "LaunchTemplateSpecification": {"LaunchTemplateId": template, "Version": "$Latest"},
            "Overrides": [{"InstanceType": "m5.large"}]}})
    autoscaling.create_launch_configuration(LaunchConfigurationName="legacy", ImageId=built[3].ami,
                                            InstanceType="m5.large")
    ssm = boto3.client("ssm", region_name=REGION)
    for b in (built[4], built[5], built[5], built[6], built[7], built[8]):  # version 3 repeats version 2
        ssm.put_parameter(Name=CHANNEL.format("recommended"), Value=b.ami, Type="String",
                          DataType="aws:ec2:image", Overwrite=True)

    pipeline = load(workdir / "amibuild.hcl")
    facts = prune.gather(Aws(region=REGION), pipeline, [REGION], keep_versions=2)
    assert len(facts.images) == 9
    uses = facts.in_use
    assert uses[built[0].ami] == (f"instance {instance} stopped",)
    assert uses[built[1].ami] == (f"launch template {template} (mixed) v1 default version in us-west-2",)
    assert uses[built[2].ami] == (
        f"launch template {template} (mixed) v2 latest version in us-west-2",
        f"launch template {template} (mixed) v2 used by Auto Scaling group spot in us-west-2")
    assert uses[built[3].ami] == ("launch configuration legacy in us-west-2",)
    assert uses[built[8].ami] == ("channel recommended of ceph current in us-west-2",)
    assert uses[built[7].ami] == ("channel recommended of ceph version 5 in us-west-2 (rollback window)",)
    assert uses[built[6].ami] == ("channel recommended of ceph version 4 in us-west-2 (rollback window)",)
    assert built[5].ami not in uses and built[4].ami not in uses  # beyond --keep-versions 2
    assert set(facts.snapshot_tags) == {b.snapshot for b in built}

    plan = prune.plan_prune(facts.images, uses, 1, None, datetime.now(timezone.utc),
                            snapshot_tags=facts.snapshot_tags)
    assert {i.image_id for i in plan.to_change} == {built[4].ami, built[5].ami}


def test_bad_prune_flags_are_refused_with_exit_2_before_any_aws_call(tmp_path: Path) -> None:
    for args, words in ((["--older-than", "5x"], "--older-than '5x'"), ([], "--keep 5"),
                        (["--keep-versions", "x"], "--keep-versions")):
        result = run_cli(tmp_path, "prune", *(["--keep", "3"] if args else []), *args)
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip().startswith("amibuild: error: ") and words in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_prune_keeps_the_images_of_channels_written_under_two_parameter_templates(workdir: Path) -> None:
    from amibuild.channels import publish

    built = [build_image(n) for n in range(1, 7)]
    pipeline = load(workdir / "amibuild.hcl")
    ceph = pipeline.variants[0]
    aws = Aws(region=REGION)
    publish.publish_variant(aws, pipeline=pipeline, variant=ceph, amis={REGION: built[0].ami}, channel="stable")
    # the same pipeline's channel written under another template (the file said so then, or a second file does)
    legacy = "{prefix}/legacy/{variant}/{channel}"
    for b in (built[1], built[2]):
        publish.publish_variant(aws, pipeline=pipeline, variant=ceph, amis={REGION: b.ami}, channel="beta",
                                template=legacy)

    dry = run_cli(workdir, "prune", "--keep", "1", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    reasons = {i["image_id"]: i["reasons"] for i in json.loads(dry.stdout)["images"]}
    assert reasons[built[0].ami] == ["channel stable of ceph current in us-west-2"]
    assert reasons[built[2].ami] == ["channel parameter /amibuild/legacy/ceph/beta current in us-west-2"]
    assert reasons[built[1].ami] == ["channel parameter /amibuild/legacy/ceph/beta version 1 in us-west-2 "
                                     "(rollback window)"]
    listed = run_cli(workdir, "prune", "--keep", "1", "--dry-run")
    assert "channel parameter /amibuild/legacy/ceph/beta current in us-west-2" in listed.stdout

    done = run_cli(workdir, "prune", "--keep", "1", "--json")
    assert done.returncode == 0, done.stderr
    deleted = {o["image_id"] for o in json.loads(done.stdout)["outcomes"] if o["status"] == "deleted"}
    assert deleted == {built[3].ami, built[4].ami}  # built[5] is the newest
    images, _ = own_images_and_snapshots()
    assert {built[0].ami, built[1].ami, built[2].ami, built[5].ami} <= images


def test_the_check_that_deregistered_images_are_gone_asks_no_more_ids_a_call_than_a_filter_takes(
        workdir: Path, eight_builds, monkeypatch: pytest.MonkeyPatch) -> None:
    # EC2 takes IDS_PER_FILTER values in one filter: a prune of more images than that in a region must not
    # turn its deletions into failures ("could not check that it is gone") by asking for all at once
    from botocore.exceptions import ClientError
    from amibuild.aws import ec2 as ec2_calls

    monkeypatch.setattr(ec2_calls, "IDS_PER_FILTER", 2)
    aws = Aws(region=REGION)

    def as_ec2_limits(params, **_) -> None:
        if any(len(f["Values"]) > 2 for f in params.get("Filters", [])):
            raise ClientError({"Error": {"Code": "InvalidParameterValue", "Message": "too many filter values"}},
                              "DescribeImages")

    aws.client("ec2", REGION).meta.events.register("provide-client-params.ec2.DescribeImages", as_ec2_limits)
    facts = prune.gather(aws, load(workdir / "amibuild.hcl"), [REGION])
    plan = prune.plan_prune(facts.images, facts.in_use, 2, None, datetime.now(timezone.utc),
                            snapshot_tags=facts.snapshot_tags, rules=facts.rules)
    result = prune.execute_prune(aws, plan)
    built = eight_builds["built"]
    assert [(o.image_id, o.status, o.errors) for o in result.outcomes] == [
        (built[n - 1].ami, prune.Done.DELETED, ()) for n in (6, 5, 4, 2)]
    assert not {built[n - 1].ami for n in (6, 5, 4, 2)} & own_images_and_snapshots()[0]


def test_a_launch_template_deleted_between_its_listing_and_its_versions_read_launches_nothing(
        sandbox, workdir: Path, monkeypatch) -> None:
    """Karpenter deletes its launch templates at any time: one gone after DescribeLaunchTemplates named
    it (DescribeLaunchTemplateVersions: InvalidLaunchTemplateId.NotFound) no longer fails the gather."""
    from faultproxy import FaultProxy
    from test_build_guard import until

    kept, dropped = build_image(1), build_image(2)
    direct = boto3.client("ec2", region_name=REGION, endpoint_url=sandbox.endpoint)
    karpenter, stays = (direct.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={
        "ImageId": b.ami})["LaunchTemplate"]["LaunchTemplateId"] for name, b in (("karpenter", dropped), ("lt", kept)))
    with FaultProxy(sandbox.endpoint) as proxy, ThreadPoolExecutor(1) as pool:
        proxy.pause(["DescribeLaunchTemplates"], after_forward=True)
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        gathering = pool.submit(prune.gather, Aws(region=REGION), load(workdir / "amibuild.hcl"), [REGION])
        until(lambda: proxy.paused() == 1, "DescribeLaunchTemplates answered, its answer held")
        direct.delete_launch_template(LaunchTemplateId=karpenter)
        proxy.resume()
        facts = gathering.result(timeout=60)
    assert facts.in_use[kept.ami] == (f"launch template {stays} (lt) v1 default version in us-west-2",
                                      f"launch template {stays} (lt) v1 latest version in us-west-2")
    assert dropped.ami not in facts.in_use


def test_a_node_group_deleted_between_its_listing_and_its_read_launches_nothing(sandbox, monkeypatch) -> None:
    """ListNodegroups names a node group, it finishes deleting, DescribeNodegroup answers
    ResourceNotFoundException: the gather goes on without it, not stops."""
    from faultproxy import FaultProxy
    from amibuild.aws.consumer_reads import nodegroup_templates

    ec2 = boto3.client("ec2", region_name=REGION)
    eks = boto3.client("eks", region_name=REGION, endpoint_url=sandbox.endpoint)
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    eks.create_cluster(name="prod", roleArn="arn:aws:iam::123456789012:role/eks", resourcesVpcConfig={"subnetIds": [subnet]})
    template = ec2.create_launch_template(LaunchTemplateName="mng", LaunchTemplateData={
        "ImageId": build_image(1).ami})["LaunchTemplate"]["LaunchTemplateId"]
    for name in ("going", "staying"):
        eks.create_nodegroup(clusterName="prod", nodegroupName=name, subnets=[subnet], nodeRole="arn:aws:iam::123456789012:role/n",
                             launchTemplate={"id": template, "version": "1"})
    with FaultProxy(sandbox.endpoint) as proxy, ThreadPoolExecutor(1) as pool:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        clusters = eks.list_clusters()["clusters"]  # the sandbox's seeded one too
        groups = sum(len(eks.list_nodegroups(clusterName=c)["nodegroups"]) for c in clusters)
        gate = proxy.gate([""])  # EKS is REST: no operation name on the wire; ListClusters first
        reading = pool.submit(nodegroup_templates, Aws(region=REGION), REGION)
        for held, count in ((1, len(clusters)), (len(clusters), groups)):  # every ListNodegroups, every DescribeNodegroup
            assert gate.wait_held(held)
            gate, before = proxy.gate([""], count=count), gate
            before.release()
        assert gate.wait_held(groups)
        eks.delete_nodegroup(clusterName="prod", nodegroupName="going")
        proxy.clear()
        assert [(g.name, g.template_id) for g in reading.result(timeout=30)] == [("staying", template)]


def test_a_prune_lease_that_cannot_be_released_is_a_warning_after_the_report_of_what_was_deleted(
        workdir: Path, eight_builds, sandbox) -> None:
    """The images are gone once the work is done: a refused DeleteParameter of the prune lease must
    not hide which (nor fail the prune): the lease expires by itself."""
    from faultproxy import FaultProxy

    with FaultProxy(sandbox.endpoint) as proxy:
        proxy.fail(REGION, ["AmazonSSM.DeleteParameter"], name="/_leases/prune")
        result = run_cli(workdir, "prune", "--keep", "2", env={**os.environ, "AWS_ENDPOINT_URL": proxy.endpoint})
    assert result.returncode == 0, result.stderr
    assert "summary: 4 deleted, 0 failed, 4 kept" in result.stdout
    assert "/_leases/prune in us-west-2 could not be released" in result.stderr and "expires by itself" in result.stderr


def test_a_snapshot_another_image_uses_is_left_and_said_not_a_failure(workdir: Path, eight_builds, sandbox) -> None:
    """An image registered elsewhere from one of ours backs itself with our snapshot: EC2 refuses its
    deletion (InvalidSnapshot.InUse). What prune deregistered is done, the snapshot stays, and it says why."""
    from faultproxy import FaultProxy

    with FaultProxy(sandbox.endpoint) as proxy:
        proxy.fail(REGION, ["DeleteSnapshot"], code="InvalidSnapshot.InUse",
                   message="The snapshot is currently in use by ami-0123456789abcdef0")
        result = run_cli(workdir, "prune", "--keep", "2", env={**os.environ, "AWS_ENDPOINT_URL": proxy.endpoint})
        refused = proxy.count("DeleteSnapshot", "failed")
    assert result.returncode == 0, result.stdout + result.stderr
    assert refused and "summary: 4 deleted, 0 failed, 4 kept" in result.stdout
    assert result.stdout.count("left: another image uses it (EC2 refused: InvalidSnapshot.InUse)") == refused


def test_a_signal_mid_prune_finishes_the_image_under_way_and_begins_no_other(workdir: Path, eight_builds,
                                                                             sandbox) -> None:
    """A Ctrl-C between DeregisterImage and DeleteSnapshot would leave a snapshot no later prune finds
    (its image is gone): the image under way is finished, the rest are not begun, the report says so."""
    import signal
    import subprocess
    import sys

    from faultproxy import FaultProxy

    with FaultProxy(sandbox.endpoint) as proxy:
        gate = proxy.gate(["DeregisterImage"], count=1)
        proc = subprocess.Popen([sys.executable, "-m", "invoke", "-r", str(ROOT), "prune", "--keep", "2"], cwd=workdir,
                                env={**os.environ, "AWS_ENDPOINT_URL": proxy.endpoint}, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert gate.wait_held(1), "prune never reached its first DeregisterImage"
            proc.send_signal(signal.SIGINT)
            assert proc.stderr is not None
            for line in proc.stderr:  # the handler has run: what it holds off is set
                if "amibuild: SIGINT: finishing each image under way" in line:
                    break
            gate.release()
            out, err = proc.communicate(timeout=120)
        finally:
            gate.release()
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, err
    assert "summary: 1 deleted, 3 not started, 0 failed, 4 kept" in out
    assert err.strip().splitlines()[-1] == "amibuild: interrupted by SIGINT: 1 image(s) finished, 3 not started " \
                                           "(prune again for them)"
    ec2 = boto3.client("ec2", region_name=REGION)
    gone = [b for b in eight_builds["built"] if not ec2.describe_images(ImageIds=[b.ami])["Images"]]
    assert len(gone) == 1 and f"deleted us-west-2 {gone[0].ami} and {gone[0].snapshot}" in out
    assert gone[0].snapshot not in {s["SnapshotId"] for s in ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]}
    assert out.count("  not started us-west-2 ami-") == 3


def test_the_prune_lease_is_renewed_while_prune_works(workdir: Path, monkeypatch) -> None:
    """A prune longer than its lease's ttl must not let channel writers (or another prune) judge the
    lease expired while it deregisters: it is renewed every third of its ttl until the work ends."""
    from amibuild.lease import Guard, prune_lease_name
    from amibuild.lifecycle import exclusive
    from amibuild.poll import until

    monkeypatch.setattr(exclusive, "PRUNE_TTL", 1.5, raising=False)
    ssm = boto3.client("ssm", region_name=REGION)
    pipeline = load(workdir / "amibuild.hcl")
    name = prune_lease_name(pipeline.ssm_prefix, pipeline.name)

    def work() -> bool:  # a long prune: it ends once the lease has been renewed twice
        first = ssm.get_parameter(Name=name)["Parameter"]["Version"]
        return until(lambda: ssm.get_parameter(Name=name)["Parameter"]["Version"] >= first + 2,
                     timeout=30, interval=0.1).done

    assert exclusive.under_prune_lease(Aws(region=REGION), pipeline, work, guard=Guard(ttl=1.5), regions=[REGION])
    assert ssm.get_parameters_by_path(Path="/amibuild/prune-e2e/_leases", Recursive=True)["Parameters"] == []
