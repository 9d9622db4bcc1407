"""`amibuild fleet`: who runs which image, how far behind its channel, and the --check-behind gate.

The pure classification runs on facts built by hand; the command runs in process against the
emulator, on images made the quick way a build leaves them (an instance of a seeded EKS image,
`create_image`, amibuild's tags), published and promoted with amibuild's own commands, and a
fleet seeded in the sandbox (`amibuild.sandbox.fleet_seed`): stacks following a channel, a managed
node group, instances, two of them tagged as Karpenter's.
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import datetime, timezone
from pathlib import Path

import boto3
import pytest

from amibuild.lifecycle import fleet
from amibuild.lifecycle.consumers import ChannelFact, LaunchFacts, Uses
from amibuild.aws import Image
from amibuild.aws.consumer_reads import StackImage
from amibuild.errors import FleetBehind, SpecError
from amibuild.sandbox import seed_images
from amibuild.sandbox.fleet_seed import FleetSeed, karpenter_tags
from conftest import run_cli, unlimited

REGION = "us-west-2"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
PIPELINE = """
pipeline {
  name       = "fleet-e2e"
  ssm_prefix = "/amibuild"
  regions    = ["us-west-2"]
}
variant "ceph" {
  kubernetes_version = "1.33"
}
variant "ceph-arm" {
  kubernetes_version = "1.33"
  arch               = "arm64"
}
"""
PARAM = "/amibuild/fleet-e2e/1.33/{variant}/{channel}/image_id"


# ------------------------------------------------------------------------------- pure


def _image(n: int, variant: str = "ceph") -> Image:
    return Image(f"ami-{n:017x}", REGION, f"x-{n}", "available",
                 {"amibuild:variant": variant, "amibuild:kubernetes-version": "1.33", "amibuild:pipeline": "p"}, "")


def _facts(launches: LaunchFacts, images: list[Image]) -> fleet.FleetFacts:
    stable = ChannelFact(REGION, PARAM.format(variant="ceph", channel="stable"), "channel stable of ceph",
                         ((1, _image(1).image_id), (2, _image(2).image_id), (3, _image(2).image_id),
                          (4, _image(3).image_id)),
                         ("2026-01-01T00:00:00+00:00", "2026-02-01T00:00:00+00:00", "2026-02-02T00:00:00+00:00",
                          "2026-02-20T00:00:00+00:00"), "ceph", "stable", "1.33")
    return fleet.FleetFacts("p", {i.image_id: i for i in images}, Uses((stable,), (launches,)))


def test_behind_counts_moves_to_another_ami_and_days_since_the_first_move() -> None:
    stack = StackImage("ng-old", REGION, "UPDATE_COMPLETE", PARAM.format(variant="ceph", channel="stable"),
                       _image(1).image_id)
    facts = _facts(LaunchFacts(REGION, stacks=(stack,),
                               instances=(("i-1", "running", _image(2).image_id), ("i-2", "running", "ami-gone"),
                                          ("i-3", "running", _image(9).image_id), ("i-4", "running", "ami-else")),
                               instance_tags={"i-1": karpenter_tags("default", "ceph")}),
                   [_image(n) for n in (1, 2, 3, 9)])
    # ami-gone and ami-else are neither this pipeline's images nor in a channel: someone else's instances
    view = fleet.classify(facts, NOW)
    rows = {(r.kind, r.name): r for r in view.consumers}
    old = rows[("stack", "ng-old")]
    # versions 2 (another AMI) and 4 (another again) moved the channel; 3 repeats 2: no move
    assert (old.standing, old.version, old.behind_versions, old.behind_days) == (fleet.Standing.BEHIND, 1, 2, 28.5)
    assert old.command == (f"amibuild rollout --stack ng-old --variant ceph --channel stable --region {REGION}")
    karpenter = rows[("instances", "karpenter nodepool default / ec2nodeclass ceph")]
    assert (karpenter.version, karpenter.behind_versions, karpenter.instances) == (3, 1, ("i-1",))
    assert "Karpenter replaces these nodes on drift" in karpenter.hint
    orphan = rows[("instances", "not launched by a group")]
    assert orphan.standing is fleet.Standing.ORPHANED and orphan.why == "its image is in no channel"
    assert {r.image_id for r in view.consumers} == {_image(1).image_id, _image(2).image_id, _image(9).image_id}


def test_instances_of_a_stacks_group_stand_in_the_stacks_channel_not_another_holding_their_image() -> None:
    """recommended holds the image at its head; the stack follows stable, one move behind. Its group's
    instances are behind stable, as their stack is, and `fleet --channel stable` lists them."""
    stable_param = PARAM.format(variant="ceph", channel="stable")
    recommended = ChannelFact(REGION, PARAM.format(variant="ceph", channel="recommended"),
                              "channel recommended of ceph", ((1, _image(2).image_id),),
                              ("2026-02-25T00:00:00+00:00",), "ceph", "recommended", "1.33")
    stack = StackImage("nodes", REGION, "UPDATE_COMPLETE", stable_param, _image(2).image_id)
    launches = LaunchFacts(REGION, stacks=(stack,), instances=(("i-1", "running", _image(2).image_id),),
                           instance_tags={"i-1": {"aws:autoscaling:groupName": "nodes-NodeGroup-1"}},
                           group_stacks={"nodes-NodeGroup-1": "nodes"})
    facts = _facts(launches, [_image(n) for n in (1, 2, 3)])
    facts = fleet.FleetFacts("p", facts.images, Uses((*facts.uses.channels, recommended), (launches,)))
    rows = {(r.kind, r.name): r for r in fleet.classify(facts, NOW).consumers}
    group = rows[("instances", "Auto Scaling group nodes-NodeGroup-1")]
    assert (group.channel, group.standing, group.version, group.behind_versions) == (
        "stable", fleet.Standing.BEHIND, 3, 1)
    assert (rows[("stack", "nodes")].channel, rows[("stack", "nodes")].behind_versions) == ("stable", 1)
    listed = fleet.classify(facts, NOW, channel="stable").consumers
    assert ("instances", "Auto Scaling group nodes-NodeGroup-1") in {(r.kind, r.name) for r in listed}


def test_check_behind_names_every_consumer_over_the_limit_in_versions_or_days() -> None:
    stack = StackImage("ng", REGION, "CREATE_COMPLETE", PARAM.format(variant="ceph", channel="stable"),
                       _image(2).image_id)
    view = fleet.classify(_facts(LaunchFacts(REGION, stacks=(stack,)), [_image(n) for n in (1, 2, 3)]), NOW)
    (row,) = view.consumers
    assert (row.behind_versions, row.behind_days) == (1, 9.5)
    view.check(fleet.Limit.parse("1"))
    view.check(fleet.Limit.parse("10d"))
    with pytest.raises(FleetBehind, match=r"1 consumer\(s\) more than 0 version\(s\) behind: stack ng in us-west-2 "
                                          r"1 version\(s\), 9.5 day\(s\) behind ceph stable"):
        view.check(fleet.Limit.parse("0"))
    with pytest.raises(FleetBehind, match="more than 9 day"):
        view.check(fleet.Limit.parse("9d"))


@pytest.mark.parametrize("text", ["", "x", "-1", "2w", "1.5", "٣"])
def test_check_behind_refuses_anything_but_n_or_nd(text: str) -> None:
    with pytest.raises(SpecError, match="--check-behind"):
        fleet.Limit.parse(text)


# ------------------------------------------------------------------------------- against the emulator


def make_image(variant: str, n: int, region: str = REGION) -> str:
    """An image as a build leaves it (tags included)."""
    ec2 = boto3.client("ec2", region_name=region)
    instance = ec2.run_instances(ImageId=seed_images()[0].image_id, MinCount=1, MaxCount=1,
                                 InstanceType="m5.large")["Instances"][0]["InstanceId"]
    ami = ec2.create_image(InstanceId=instance, Name=f"amibuild-{variant}-{uuid.uuid4().hex[:8]}")["ImageId"]
    ec2.terminate_instances(InstanceIds=[instance])
    tags = {"amibuild:fingerprint": f"fp-{variant}-{n}", "amibuild:variant": variant, "amibuild:pipeline": "fleet-e2e",
            "amibuild:kubernetes-version": "1.33", "amibuild:created": f"2026-01-{n:02d}T12:00:00Z"}
    ec2.create_tags(Resources=[ami], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
    return ami


def amibuild(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `amibuild ARGS` in the current folder (conftest.run_cli)."""
    done = run_cli(os.getcwd(), *args, binary="amibuild")
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def workdir(tmp_path: Path, sandbox, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def fleet_json(capsys, *args: str) -> dict:
    code, out, err = amibuild(capsys, "fleet", "--json", *args)
    assert code == 0, err
    return json.loads(out)


def publish(capsys, variant: str, ami: str, channel: str = "recommended") -> None:
    with unlimited():  # set-up: the channels the fleet is read against
        code, _, err = amibuild(capsys, "publish", "--variant", variant, "--ami", f"{REGION}={ami}", "--channel", channel)
    assert code == 0, err


def promote(capsys, variant: str = "ceph") -> None:
    with unlimited():
        code, _, err = amibuild(capsys, "promote", "--variant", variant, "--from", "recommended", "--to", "stable")
    assert code == 0, err


def test_fleet_lists_every_seeded_consumer_with_image_channel_version_and_behind(workdir, sandbox, capsys) -> None:
    gone, old, new, arm = make_image("ceph", 1), make_image("ceph", 2), make_image("ceph", 3), make_image("ceph-arm", 4)
    ec2 = boto3.client("ec2", region_name=REGION)
    publish(capsys, "ceph", gone)  # recommended v1
    ec2.run_instances(ImageId=gone, MinCount=1, MaxCount=1, InstanceType="m5.large")
    publish(capsys, "ceph", old)  # recommended v2
    promote(capsys)  # stable v1
    publish(capsys, "ceph-arm", arm)
    sandbox.seed_fleet(FleetSeed(
        stacks=(("ng-stable", PARAM.format(variant="ceph", channel="stable")),),
        nodegroups=(("mng", old),), launch_templates=(("spare", old),),
        instances=((old, 2, karpenter_tags("default", "ceph-stable")), (arm, 1, {}))))
    publish(capsys, "ceph", new)  # recommended v3
    promote(capsys)  # stable v2
    sandbox.seed_fleet(FleetSeed(stacks=(("ng-recommended", PARAM.format(variant="ceph", channel="recommended")),)))
    # a person deleting the channel history's image must turn its protection off first, as on AWS
    ec2.disable_image_deregistration_protection(ImageId=gone)
    ec2.deregister_image(ImageId=gone)

    view = fleet_json(capsys)
    channels = {(c["variant"], c["channel"]): (c["ami"], c["version"]) for c in view["channels"]}
    assert channels == {("ceph", "recommended"): (new, 3), ("ceph", "stable"): (new, 2),
                        ("ceph-arm", "recommended"): (arm, 1)}
    rows = {(r["kind"], r["name"], r["image_id"]): r for r in view["consumers"]}
    groups = {r["name"].split()[3].rsplit("-", 2)[0]: r["name"] for r in view["consumers"]
              if r["name"].startswith("Auto Scaling group ")}
    assert set(groups) == {"ng-stable", "ng-recommended"}  # moto names a stack's group STACK-NodeGroup-XXXX
    got = {k: (r["variant"], r["channel"], r["version"], r["behind_versions"], r["standing"])
           for k, r in rows.items() if r["kind"] != "launch-template"}
    assert got == {
        ("stack", "ng-stable", old): ("ceph", "stable", 1, 1, "behind"),
        ("stack", "ng-recommended", new): ("ceph", "recommended", 3, 0, "current"),
        # the channel it is least behind: stable moved off `old` after recommended did
        ("nodegroup", "amibuild-sandbox/mng", old): ("ceph", "stable", 1, 1, "behind"),
        ("instances", "karpenter nodepool default / ec2nodeclass ceph-stable", old): ("ceph", "stable", 1, 1, "behind"),
        ("instances", groups["ng-stable"], old): ("ceph", "stable", 1, 1, "behind"),
        ("auto-scaling-group", groups["ng-stable"].split()[3], old): ("ceph", "stable", 1, 1, "behind"),
        ("auto-scaling-group", groups["ng-recommended"].split()[3], new): ("ceph", "recommended", 3, 0, "current"),
        ("instances", groups["ng-recommended"], new): ("ceph", "recommended", 3, 0, "current"),
        ("instances", "not launched by a group", arm): ("ceph-arm", "recommended", 1, 0, "current"),
        # deregistered since: recommended held it at version 1 and moved twice
        ("instances", "not launched by a group", gone): ("ceph", "recommended", 1, 2, "orphaned"),
    }
    assert rows[("instances", "not launched by a group", gone)]["why"] == "its image is gone (deregistered)"
    assert rows[("stack", "ng-stable", old)]["command"] == (
        f"amibuild rollout --stack ng-stable --variant ceph --channel stable --region {REGION}")
    assert rows[("nodegroup", "amibuild-sandbox/mng", old)]["command"] == (
        f"amibuild rollout --nodegroup amibuild-sandbox/mng --variant ceph --channel stable --region {REGION}")
    assert rows[("nodegroup", "amibuild-sandbox/mng", old)]["hint"] == ""  # its command says it all
    assert rows[("instances", groups["ng-stable"], old)]["hint"].startswith("replaced when their group rolls")
    karpenter = rows[("instances", "karpenter nodepool default / ec2nodeclass ceph-stable", old)]
    assert len(karpenter["instances"]) == 2 and "drift" in karpenter["hint"]
    assert "amibuild karpenter --variant ceph --channel stable" in karpenter["hint"]
    # only the template nothing launches from, at its default version: the others show through their groups
    templates = [(r["name"].split()[1], r["image_id"], r["behind_versions"], r["detail"])
                 for r in view["consumers"] if r["kind"] == "launch-template"]
    assert templates == [("(spare)", old, 1, "default version 1")]

    only = fleet_json(capsys, "--variant", "ceph-arm")
    assert [(r["kind"], r["image_id"]) for r in only["consumers"]] == [("instances", arm)]
    assert {c["variant"] for c in only["channels"]} == {"ceph-arm"}

    # each stack's Auto Scaling group names its stack (CloudFormation's aws:cloudformation:stack-name
    # tag) and is rolled by rolling that stack
    asg = {stack: rows[("auto-scaling-group", groups[stack].split()[3], image)]
           for stack, image in (("ng-stable", old), ("ng-recommended", new))}
    assert {stack: row["stack"] for stack, row in asg.items()} == {"ng-stable": "ng-stable",
                                                                  "ng-recommended": "ng-recommended"}
    assert asg["ng-stable"]["command"] == (
        f"amibuild rollout --stack ng-stable --variant ceph --channel stable --region {REGION}")
    assert asg["ng-stable"]["hint"].startswith("made by stack ng-stable")
    assert (asg["ng-recommended"]["command"], asg["ng-recommended"]["hint"]) == ("", "")  # current
    assert all(r["stack"] == "" for r in view["consumers"] if r["kind"] != "auto-scaling-group")

    code, out, err = amibuild(capsys, "fleet")
    assert code == 0, err
    assert f"us-west-2 stack ng-stable: {old} (ceph stable v1) 1 behind" in out
    assert f"    roll it: amibuild rollout --stack ng-stable --variant ceph --channel stable --region {REGION}" in out
    assert (f"us-west-2 auto-scaling-group {groups['ng-stable'].split()[3]} (stack ng-stable): {old} "
            "(ceph stable v1) 1 behind") in out
    assert "ORPHANED: its image is gone (deregistered)" in out


def test_the_emulator_tags_a_stacks_auto_scaling_group_and_its_instances_with_the_stack(workdir, sandbox,
                                                                                         capsys) -> None:
    """As CloudFormation does (moto alone does not): what `fleet` links a group to its stack by."""
    image = make_image("ceph", 1)
    publish(capsys, "ceph", image)
    sandbox.seed_fleet(FleetSeed(stacks=(("ng-tagged", PARAM.format(variant="ceph", channel="recommended")),)))
    stack_id = boto3.client("cloudformation", region_name=REGION).describe_stacks(
        StackName="ng-tagged")["Stacks"][0]["StackId"]
    (group,) = boto3.client("autoscaling", region_name=REGION).describe_auto_scaling_groups()["AutoScalingGroups"]
    tagged = {t["Key"]: (t["Value"], t["PropagateAtLaunch"]) for t in group["Tags"]}
    assert tagged["aws:cloudformation:stack-name"] == ("ng-tagged", True)
    assert tagged["aws:cloudformation:stack-id"] == (stack_id, True)
    assert tagged["aws:cloudformation:logical-id"] == ("NodeGroup", True)
    (instance,) = group["Instances"]
    reservations = boto3.client("ec2", region_name=REGION).describe_instances(
        InstanceIds=[instance["InstanceId"]])["Reservations"]
    on_instance = {t["Key"]: t["Value"] for t in reservations[0]["Instances"][0]["Tags"]}
    assert on_instance["aws:cloudformation:stack-name"] == "ng-tagged"
    assert on_instance["aws:cloudformation:logical-id"] == "NodeGroup"

    (row,) = [r for r in fleet_json(capsys)["consumers"] if r["kind"] == "auto-scaling-group"]
    assert (row["name"], row["stack"], row["standing"]) == (group["AutoScalingGroupName"], "ng-tagged", "current")


def test_check_behind_exits_1_after_a_promote_and_0_after_the_rollout(workdir, sandbox, capsys) -> None:
    old, new = make_image("ceph", 1), make_image("ceph", 2)
    publish(capsys, "ceph", old)
    promote(capsys)
    stable = PARAM.format(variant="ceph", channel="stable")
    sandbox.seed_fleet(FleetSeed(stacks=(("ng-a", stable), ("ng-b", stable)), stack_capacity=0))
    code, _, err = amibuild(capsys, "fleet", "--check-behind", "0", "--kind-of-typo")
    assert code == 2 and "--kind-of-typo" in err
    assert amibuild(capsys, "fleet", "--check-behind", "0")[0] == 0

    publish(capsys, "ceph", new)
    promote(capsys)
    stacks = {r["name"]: (r["behind_versions"], r["standing"]) for r in fleet_json(capsys)["consumers"]
              if r["kind"] == "stack"}
    assert stacks == {"ng-a": (1, "behind"), "ng-b": (1, "behind")}
    code, out, err = amibuild(capsys, "fleet", "--check-behind", "0")
    assert code == 1
    last = err.strip().splitlines()[-1]
    # each stack and its group
    assert last.startswith("amibuild: error: fleet: 4 consumer(s) more than 0 version(s) behind: ")
    assert "stack ng-a in us-west-2 1 version(s)" in last and "stack ng-b in us-west-2 1 version(s)" in last
    assert amibuild(capsys, "fleet", "--check-behind", "1")[0] == 0
    assert amibuild(capsys, "fleet", "--check-behind", "1d")[0] == 0

    for name in ("ng-a", "ng-b"):
        code, _, err = amibuild(capsys, "rollout", "--stack", name, "--variant", "ceph", "--channel", "stable",
                                "--region", REGION)
        assert code == 0, err
    stacks = {r["name"]: (r["image_id"], r["behind_versions"]) for r in fleet_json(capsys)["consumers"]
              if r["kind"] == "stack"}
    assert stacks == {"ng-a": (new, 0), "ng-b": (new, 0)}
    code, out, err = amibuild(capsys, "fleet", "--check-behind", "0")
    assert code == 0, err


def test_bad_fleet_flags_are_refused_with_exit_2_before_any_aws_call(tmp_path: Path, monkeypatch, capsys) -> None:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens: any call would fail slowly
    for args, words in ((["--check-behind", "soon"], "--check-behind 'soon'"),
                        (["--variant", "cehp"], "did you mean 'ceph'"),
                        (["--channel", "st/able"], "channel 'st/able'")):
        code, out, err = amibuild(capsys, "fleet", *args)
        assert code == 2, (args, err)
        assert words in err and out == ""


def test_the_demo_seed_gives_two_stacks_a_managed_node_group_and_instances_of_three_images(
        workdir, sandbox, capsys) -> None:
    from amibuild.sandbox.fleet_seed import demo_seed

    old, new, arm = make_image("ceph", 1), make_image("ceph", 2), make_image("ceph-arm", 3)
    publish(capsys, "ceph", old)
    promote(capsys)
    publish(capsys, "ceph-arm", arm)
    sandbox.seed_fleet(FleetSeed(stacks=(("ng-demo", PARAM.format(variant="ceph", channel="stable")),)))
    publish(capsys, "ceph", new)
    promote(capsys)
    seeded = demo_seed(sandbox.endpoint, REGION, stable=PARAM.format(variant="ceph", channel="stable"),
                       recommended=PARAM.format(variant="ceph", channel="recommended"),
                       other=PARAM.format(variant="ceph-arm", channel="recommended"))
    assert seeded.images == {"stable first": old, "other": arm}
    consumers = fleet_json(capsys)["consumers"]
    assert sorted((r["name"], r["image_id"], r["behind_versions"]) for r in consumers if r["kind"] == "stack") == [
        ("ng-demo", old, 1), ("ng-demo-recommended", new, 0)]
    assert [(r["name"], r["image_id"]) for r in consumers if r["kind"] == "nodegroup"] == [
        ("amibuild-sandbox/mng-demo", old)]
    instances = [r for r in consumers if r["kind"] == "instances"]
    assert {r["image_id"] for r in instances} == {old, new, arm}
    (karpenter,) = [r for r in instances if r["name"].startswith("karpenter")]
    assert (karpenter["image_id"], len(karpenter["instances"]), karpenter["standing"]) == (old, 2, "behind")


def test_a_disabled_image_is_not_reported_gone_and_its_consumers_stand_in_its_channel(workdir, sandbox, capsys) -> None:
    # DescribeImages hides a disabled image unless IncludeDisabled: it still exists and its instances still run
    old, new = make_image("ceph", 1), make_image("ceph", 2)
    ec2 = boto3.client("ec2", region_name=REGION)
    publish(capsys, "ceph", old)
    ec2.run_instances(ImageId=old, MinCount=1, MaxCount=1, InstanceType="m5.large")
    publish(capsys, "ceph", new)
    ec2.disable_image(ImageId=old)
    assert ec2.describe_images(ImageIds=[old], IncludeDisabled=True)["Images"][0]["State"] == "disabled"

    rows = {(r["kind"], r["image_id"]): r for r in fleet_json(capsys)["consumers"]}
    row = rows[("instances", old)]
    assert (row["variant"], row["channel"], row["version"], row["behind_versions"], row["standing"]) == \
        ("ceph", "recommended", 1, 1, "behind"), row
    assert "deregistered" not in row["why"]


def test_a_mixed_instances_group_is_one_row_per_image_however_many_overrides_name_a_template(workdir, sandbox,
                                                                                             capsys) -> None:
    # AWS's pattern for Graviton beside x86: each arm64 instance type's override names the arm64 template
    x86, arm = make_image("ceph", 1), make_image("ceph-arm", 2)
    publish(capsys, "ceph", x86)
    publish(capsys, "ceph-arm", arm)
    ec2 = boto3.client("ec2", region_name=REGION)
    ids = {ami: ec2.create_launch_template(LaunchTemplateName=f"lt-{n}", LaunchTemplateData={"ImageId": ami})[
        "LaunchTemplate"]["LaunchTemplateId"] for n, ami in enumerate((x86, arm))}
    arm_spec = {"LaunchTemplateId": ids[arm], "Version": "$Default"}
    boto3.client("autoscaling", region_name=REGION).create_auto_scaling_group(
        AutoScalingGroupName="mixed", MinSize=0, MaxSize=2, DesiredCapacity=0, AvailabilityZones=[f"{REGION}a"],
        MixedInstancesPolicy={"LaunchTemplate": {
            "LaunchTemplateSpecification": {"LaunchTemplateId": ids[x86], "Version": "$Default"},
            "Overrides": [{"InstanceType": "m5.large"}, {"InstanceType": "m6g.large", "LaunchTemplateSpecification": arm_spec},
                          {"InstanceType": "c6g.large", "LaunchTemplateSpecification": arm_spec}]}})

    rows = [(r["kind"], r["name"], r["image_id"]) for r in fleet_json(capsys)["consumers"]]
    assert sorted(rows) == sorted([("auto-scaling-group", "mixed", x86), ("auto-scaling-group", "mixed", arm)])


def test_an_image_older_than_a_trimmed_channel_history_is_not_said_never_held() -> None:
    """SSM keeps a parameter's last 100 versions: a stack still on an image the channel may have held
    before them is orphaned (how far behind is unknown), but not "never held"."""
    kept = tuple((n, _image(2 + n % 2).image_id) for n in range(6, 106))
    stable = ChannelFact(REGION, PARAM.format(variant="ceph", channel="stable"), "channel stable of ceph", kept,
                         ("2026-02-01T00:00:00+00:00",) * 100, "ceph", "stable", "1.33")
    stack = StackImage("ng", REGION, "UPDATE_COMPLETE", stable.name, _image(1).image_id)
    launches = LaunchFacts(REGION, stacks=(stack,), instances=(("i-1", "running", _image(1).image_id),))
    facts = fleet.FleetFacts("p", {i.image_id: i for i in map(_image, (1, 2, 3))}, Uses((stable,), (launches,)))
    rows = {r.kind: r for r in fleet.classify(facts, NOW).consumers}
    assert {kind: (r.standing, r.why) for kind, r in rows.items()} == {
        "stack": (fleet.Standing.ORPHANED, "runs an image not in its channel's kept history (versions 6-105: "
                                           "SSM keeps a parameter's last 100)"),
        "instances": (fleet.Standing.ORPHANED, "its image is in no channel's kept history (SSM keeps a parameter's "
                                               "last 100 versions)")}


def test_a_stack_whose_create_rolled_back_runs_nothing_and_is_not_shown_behind() -> None:
    # ROLLBACK_COMPLETE: the create failed and CloudFormation deleted what it made; it can only be deleted
    stable = PARAM.format(variant="ceph", channel="stable")
    stacks = (StackImage("ng-failed", REGION, "ROLLBACK_COMPLETE", stable, _image(1).image_id),
              StackImage("ng", REGION, "UPDATE_ROLLBACK_COMPLETE", stable, _image(1).image_id))
    view = fleet.classify(_facts(LaunchFacts(REGION, stacks=stacks), [_image(n) for n in (1, 2, 3)]), NOW)
    assert [(r.kind, r.name, r.standing) for r in view.consumers] == [("stack", "ng", fleet.Standing.BEHIND)]
