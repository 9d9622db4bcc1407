"""Rolling node groups to a channel's AMI: `invoke nodegroup-deploy`, `invoke rollout`, `invoke aws-auth --stack`.

Three kinds of test:

* pure: stack states, `assess` / `assess_nodegroup` decisions, change set lines, the failing
  resource among stack events, the update policy line, deploy parameters;
* against the local emulator over HTTP (the real CLI and the library): deploy, change sets,
  stack parameters after an update, the new launch template version and its image, the group's
  version, --dry-run, refusals with exit 2. These need the sandbox's model of stack updates
  (`model_stack_updates` in amibuild/sandbox/patches.py: previous parameter values as passed, the group
  following its launch template version). It still never resolves an SSM parameter again and
  replaces no instance, so the rolls driven here change the parameter's name or pin NodeImageId,
  and one test shows rollout's honest failure in the same-name case;
* recorded AWS responses (tests/data/rollout/*.json) replayed with botocore's Stubber on the
  gateway's own clients for what the emulator cannot do: the same-name re-resolution, a rolling
  update followed through its events, a rollback with its failing resource, a change set AWS
  marks FAILED for having no changes, and EKS's UpdateNodegroupVersion / DescribeUpdate.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import ANY, Stubber

from amibuild.handoff import cfn_parts as cfn
from amibuild.handoff import nodegroup
from amibuild.channels import publish
from amibuild.handoff import rollout
from amibuild.pipeline import Pipeline, load
from amibuild.aws import Aws
from amibuild.aws import handoff_results as results
from amibuild.errors import AmibuildError, Interrupted, RolloutFailed, SpecError
from amibuild.handoff.cfn_parts import StackState
from amibuild.handoff.rollout import (RolloutAction, Channel, RolloutDecision, LaunchTemplateUse, NodegroupView,
                                      StackParameter, StackView)
from amibuild.sandbox import SANDBOX_VPC_NAME, seed_images
from conftest import CliResult, run_cli, unlimited

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data" / "rollout"
REGION = "us-west-2"
PIPELINE = """\
pipeline {
  name       = "eks-workers"
  ssm_prefix = "/amibuild"
  regions    = ["us-west-2"]
}
defaults {
  # AL2 nodes: a stack deploys without the cluster's endpoint, CA and CIDR (AL2023 needs them)
  os                 = "al2"
  kubernetes_version = "1.30"
}
variant "ceph" {
  extra_packages = ["ceph-common"]
}
"""
STABLE = "/amibuild/eks-workers/1.30/ceph/stable/image_id"
RECOMMENDED = "/amibuild/eks-workers/1.30/ceph/recommended/image_id"
OLD, NEW = "ami-0aaaa1111bbbb2222", "ami-0cccc3333dddd4444"


def quiet(_: str) -> None:
    pass


# ======================================================================================== pure


@pytest.mark.parametrize(("status", "state"), [
    ("CREATE_COMPLETE", StackState.READY), ("UPDATE_COMPLETE", StackState.READY),
    ("UPDATE_ROLLBACK_COMPLETE", StackState.ROLLED_BACK),
    ("UPDATE_IN_PROGRESS", StackState.BUSY), ("UPDATE_COMPLETE_CLEANUP_IN_PROGRESS", StackState.BUSY),
    ("UPDATE_ROLLBACK_IN_PROGRESS", StackState.BUSY),
    ("ROLLBACK_COMPLETE", StackState.FAILED), ("UPDATE_ROLLBACK_FAILED", StackState.FAILED),
    ("UPDATE_FAILED", StackState.FAILED),
    ("DELETE_COMPLETE", StackState.GONE), ("REVIEW_IN_PROGRESS", StackState.GONE),
])
def test_stack_statuses_collapse_to_a_few_states(status: str, state: StackState) -> None:
    assert cfn.stack_state(status) is state


@pytest.mark.parametrize("status", ["UPDATE_DONE", "update_complete", ""])
def test_unknown_status_fails_loudly(status: str) -> None:
    with pytest.raises(AmibuildError, match="unknown CloudFormation stack status"):
        cfn.stack_state(status)
    with pytest.raises(AmibuildError, match="unknown EKS node group status"):
        cfn.nodegroup_state(status)


LAUNCH = LaunchTemplateUse("lt-0123456789abcdef0", "3", 3, OLD)


def stack_view(status: str = "UPDATE_COMPLETE", *, ssm: str | None = RECOMMENDED, image_id: str | None = "",
               launch: LaunchTemplateUse | None = LAUNCH, problem: str = "") -> StackView:
    parameters = {"ClusterName": StackParameter("prod")}
    if ssm is not None:
        parameters["NodeImageIdSSMParam"] = StackParameter(ssm, OLD)
    if image_id is not None:
        parameters["NodeImageId"] = StackParameter(image_id)
    return StackView("ng-ceph", REGION, status, parameters, group=("NodeGroup", "ng-ceph-NodeGroup-1"),
                     launch=launch, problem=problem)


def channel(ami: str | None = NEW, state: str | None = "available", parameter: str = STABLE) -> Channel:
    return Channel(parameter, REGION, ami, state)


ASSESS_CASES = [
    # id, stack, channel, action, parameter set, value, words in the reason
    ("other-channel", stack_view(), channel(), RolloutAction.UPDATE_PARAMETER, "NodeImageIdSSMParam", STABLE,
     [OLD, STABLE, NEW]),
    ("same-name-moved-value", stack_view(ssm=STABLE), channel(), RolloutAction.UPDATE_PARAMETER, "NodeImageIdSSMParam",
     STABLE, ["names", "moved to " + NEW, "resolve it again"]),
    ("already-current", stack_view(ssm=STABLE, launch=LaunchTemplateUse("lt-1", "4", 4, NEW)), channel(),
     RolloutAction.ALREADY_CURRENT, None, None, ["version 4", NEW, STABLE]),
    ("image-right-pointer-wrong", stack_view(launch=LaunchTemplateUse("lt-1", "4", 4, NEW)), channel(),
     RolloutAction.UPDATE_PARAMETER, "NodeImageIdSSMParam", STABLE, ["no node is replaced"]),
    ("pinned", stack_view(image_id=OLD), channel(), RolloutAction.UPDATE_IMAGE_ID, "NodeImageId", NEW, [OLD, NEW]),
    ("pinned-current", stack_view(image_id=NEW, launch=LaunchTemplateUse("lt-1", "2", 2, NEW)), channel(),
     RolloutAction.ALREADY_CURRENT, None, None, [NEW]),
    ("only-image-id-parameter", stack_view(ssm=None, image_id=""), channel(), RolloutAction.UPDATE_IMAGE_ID, "NodeImageId",
     NEW, []),
    ("rolled-back-is-updatable", stack_view("UPDATE_ROLLBACK_COMPLETE"), channel(), RolloutAction.UPDATE_PARAMETER,
     "NodeImageIdSSMParam", STABLE, []),
    ("busy", stack_view("UPDATE_IN_PROGRESS"), channel(), RolloutAction.BLOCKED, None, None,
     ["UPDATE_IN_PROGRESS", "wait"]),
    ("broken", stack_view("UPDATE_ROLLBACK_FAILED"), channel(), RolloutAction.BLOCKED, None, None, ["repair or delete"]),
    ("gone", stack_view("DELETE_COMPLETE"), channel(), RolloutAction.REFUSED, None, None, ["does not exist"]),
    ("no-image-parameters", stack_view(ssm=None, image_id=None), channel(), RolloutAction.REFUSED, None, None,
     ["neither", "NodeImageIdSSMParam", "NodeImageId"]),
    ("launch-configuration", stack_view(launch=None, problem="its Auto Scaling group g uses a launch configuration"),
     channel(), RolloutAction.REFUSED, None, None, ["launch configuration"]),
    ("pinned-without-channel", stack_view(image_id=OLD), None, RolloutAction.REFUSED, None, None, ["--variant"]),
    ("channel-without-value", stack_view(), channel(ami=None), RolloutAction.REFUSED, None, None,
     ["no value", "publish or promote"]),
    ("channel-image-gone", stack_view(), channel(state=None), RolloutAction.REFUSED, None, None, [NEW, "does not exist"]),
    ("channel-image-pending", stack_view(), channel(state="pending"), RolloutAction.REFUSED, None, None, ["is pending"]),
]


@pytest.mark.parametrize(("stack", "chan", "action", "parameter", "value", "words"),
                         [c[1:] for c in ASSESS_CASES], ids=[c[0] for c in ASSESS_CASES])
def test_assess_compares_the_launched_image_with_the_channel(stack, chan, action, parameter, value, words) -> None:
    decision = rollout.assess(stack, chan)
    assert (decision.action, decision.parameter, decision.value) == (action, parameter, value), decision.reason
    for word in words:
        assert word in decision.reason


def answers(name: str) -> dict[str, dict[str, Any]]:
    """Operation -> the first recorded response of tests/data/rollout/NAME.json, as read from disk."""
    out: dict[str, dict[str, Any]] = {}
    for call in json.loads((DATA / f"{name}.json").read_text())["calls"]:
        out.setdefault(call["operation"], call.get("response", {}))
    return out


def recorded_facts(**changes: Any) -> rollout.StackFacts:
    """What gather_stack reads for ng-ceph on AWS (tests/data/rollout/aws_stack_before.json), parsed
    by the gateway's own parsers."""
    got = answers("aws_stack_before")
    facts = rollout.StackFacts(
        "ng-ceph", REGION, results.parse_stack(got["describe_stacks"]["Stacks"][0]),
        resources=tuple(map(results.parse_stack_resource, got["list_stack_resources"]["StackResourceSummaries"])),
        group=results.parse_auto_scaling_group(got["describe_auto_scaling_groups"]["AutoScalingGroups"][0]),
        launch_version=results.parse_launch_template_version(
            got["describe_launch_template_versions"]["LaunchTemplateVersions"][0]))
    return replace(facts, **changes)


def recorded_channel() -> Channel:
    got = answers("aws_stack_before")
    parameter = got["get_parameter"]["Parameter"]
    return Channel(parameter["Name"], REGION, parameter["Value"], got["describe_images"]["Images"][0]["State"])


def test_the_recorded_stack_rolls_by_resending_the_same_parameter_and_keeping_every_other() -> None:
    stack = rollout.stack_view(recorded_facts())
    assert (stack.group, str(stack.launch), stack.launch.image) == (
        ("NodeGroup", "ng-ceph-NodeGroup-1Q2W3E4R5T6Y"), "launch template lt-0123456789abcdef0 version 3",
        "ami-0aaaa1111bbbb2222")
    assert rollout.channel_to_read(stack, None) == "/amibuild/eks-workers/1.30/ceph/stable/image_id"
    decision = rollout.assess(stack, recorded_channel())

    assert decision.action is RolloutAction.UPDATE_PARAMETER, decision.reason
    assert "resolve it again" in decision.reason
    sent = {p["ParameterKey"]: p for p in decision.send}
    assert list(sent) == [p["ParameterKey"] for p in answers("aws_stack_before")["describe_stacks"]["Stacks"][0]["Parameters"]]
    assert sent["NodeImageIdSSMParam"] == {"ParameterKey": "NodeImageIdSSMParam",
                                           "ParameterValue": "/amibuild/eks-workers/1.30/ceph/stable/image_id"}
    assert all(p == {"ParameterKey": key, "UsePreviousValue": True} for key, p in sent.items()
               if key != "NodeImageIdSSMParam")


def test_the_recorded_stack_is_already_current_once_its_group_launches_the_channel_image() -> None:
    facts = recorded_facts()
    version = replace(facts.launch_version, image_id="ami-0cccc3333dddd4444")
    decision = rollout.assess(rollout.stack_view(replace(facts, launch_version=version)), recorded_channel())
    assert (decision.action, decision.send) == (RolloutAction.ALREADY_CURRENT, ())


def test_the_recorded_stack_pinned_to_an_image_id_sends_that_parameter_only() -> None:
    facts = recorded_facts()
    parameters = {**facts.stack.parameters, "NodeImageId": StackParameter("ami-0aaaa1111bbbb2222")}
    stack = rollout.stack_view(replace(facts, stack=replace(facts.stack, parameters=parameters)))
    assert stack.pinned and rollout.channel_to_read(stack, None) is None
    assert rollout.assess(stack, None).action is RolloutAction.REFUSED  # no channel named: nothing to roll to
    decision = rollout.assess(stack, recorded_channel())
    changed = [p for p in decision.send if "ParameterValue" in p]
    assert (decision.action, changed) == (RolloutAction.UPDATE_IMAGE_ID, [
        {"ParameterKey": "NodeImageId", "ParameterValue": "ami-0cccc3333dddd4444"}])


def test_stack_view_names_what_stops_a_rollout_from_the_answers_read_so_far() -> None:
    facts = recorded_facts()
    busy = rollout.stack_view(replace(facts, stack=replace(facts.stack, status="UPDATE_IN_PROGRESS")))
    assert rollout.assess(busy, recorded_channel()).action is RolloutAction.BLOCKED
    two = rollout.stack_view(replace(facts, resources=facts.resources * 2))
    assert "2 Auto Scaling groups" in two.problem
    gone = rollout.stack_view(replace(facts, group=None))
    assert "does not exist" in gone.problem and gone.launch is None
    configured = replace(facts.group, launch_template=None)
    assert "launch configuration" in rollout.stack_view(replace(facts, group=configured)).problem
    missing = rollout.stack_view(replace(facts, launch_version=None))
    assert missing.problem == "launch template lt-0123456789abcdef0 version 3 does not exist"
    assert rollout.assess(missing, recorded_channel()).action is RolloutAction.REFUSED


def test_nothing_to_update_is_current_only_when_the_group_launches_the_channel_image() -> None:
    stack, chan = rollout.stack_view(recorded_facts()), recorded_channel()
    decision = rollout.assess(stack, chan)
    with pytest.raises(RolloutFailed, match="still launches from launch template lt-0123456789abcdef0 version 3"):
        rollout.nothing_to_update(stack, chan, decision)
    moved = replace(stack, launch=replace(stack.launch, image=chan.ami))
    assert rollout.nothing_to_update(moved, chan, decision).action is RolloutAction.ALREADY_CURRENT


def recorded_answers(name: str, operation: str) -> list[dict[str, Any]]:
    return [c["response"] for c in json.loads((DATA / f"{name}.json").read_text())["calls"]
            if c["operation"] == operation]


def test_the_gateway_parses_recorded_stack_change_set_and_update_answers() -> None:
    stack = results.parse_stack(answers("aws_stack_before")["describe_stacks"]["Stacks"][0])
    assert (stack.name, stack.status, stack.capabilities) == ("ng-ceph", "UPDATE_COMPLETE", ("CAPABILITY_IAM",))
    assert stack.parameters["NodeImageIdSSMParam"] == StackParameter(
        "/amibuild/eks-workers/1.30/ceph/stable/image_id", "ami-0aaaa1111bbbb2222")
    assert stack.outputs["NodeInstanceRole"] == "arn:aws:iam::111122223333:role/ng-ceph-NodeInstanceRole-8H9J0K"

    complete = [results.parse_change_set(raw) for raw in recorded_answers("aws_update_rolls", "describe_change_set")
                if raw["Status"] == "CREATE_COMPLETE"][0]
    assert cfn.change_lines(complete) == (
        "Modify NodeLaunchTemplate (AWS::EC2::LaunchTemplate): LaunchTemplateData",
        "Modify NodeGroup (AWS::AutoScaling::AutoScalingGroup), maybe replaced: LaunchTemplate")
    assert cfn.change_lines(results.ChangeSet("empty", "CREATE_COMPLETE", "")) == (
        "CloudFormation lists no resource change",)

    failed = results.parse_nodegroup_update(recorded_answers("eks_update_failed", "describe_update")[-1]["update"])
    assert (failed.status, failed.errors) == ("Failed", (
        "PodEvictionFailure: Reached max retries while trying to evict pods from nodes in node group ng-managed "
        "(ip-10-42-0-17.us-west-2.compute.internal)",))


def test_assess_nodegroup_decides_on_the_launch_template_image() -> None:
    def group(status="ACTIVE", launch=LAUNCH, ami_type="CUSTOM"):
        return NodegroupView("prod", "ng-managed", REGION, status, launch, ami_type)

    assert rollout.assess_nodegroup(group(), channel()) == RolloutDecision(
        RolloutAction.UPDATE_IMAGE_ID, f"launch template lt-0123456789abcdef0 version 3 has {OLD}; a new version gets {NEW}",
        "ImageId", NEW)
    assert rollout.assess_nodegroup(group(launch=LaunchTemplateUse("lt-1", "2", 2, NEW)), channel()).action \
        is RolloutAction.ALREADY_CURRENT
    assert rollout.assess_nodegroup(group("UPDATING"), channel()).action is RolloutAction.BLOCKED
    no_template = rollout.assess_nodegroup(group(launch=None, ami_type="AL2_x86_64"), channel())
    assert no_template.action is RolloutAction.REFUSED and "AL2_x86_64" in no_template.reason
    no_image = rollout.assess_nodegroup(group(launch=LaunchTemplateUse("lt-1", "1", 1, None)), channel())
    assert no_image.action is RolloutAction.REFUSED and "sets no ImageId" in no_image.reason
    assert rollout.assess_nodegroup(group(), channel(ami=None)).action is RolloutAction.REFUSED


def test_a_node_group_whose_launch_template_version_is_gone_is_refused_as_gone_not_as_without_image() -> None:
    gone = NodegroupView("prod", "ng-managed", REGION, "ACTIVE", LaunchTemplateUse("lt-1", "5", None, None), "CUSTOM")
    decision = rollout.assess_nodegroup(gone, channel())
    assert decision.action is RolloutAction.REFUSED
    assert "launch template lt-1 version 5 does not exist" in decision.reason, decision.reason
    assert "sets no ImageId" not in decision.reason


def test_root_cause_is_the_first_failure_that_is_not_a_cancellation() -> None:
    events = [results.parse_stack_event(raw) for raw in [
        {"LogicalResourceId": "NodeSecurityGroup", "ResourceType": "AWS::EC2::SecurityGroup",
         "ResourceStatus": "UPDATE_FAILED", "ResourceStatusReason": "Resource update cancelled"},
        {"LogicalResourceId": "NodeGroup", "ResourceType": "AWS::AutoScaling::AutoScalingGroup",
         "ResourceStatus": "UPDATE_FAILED", "ResourceStatusReason": "Received 0 SUCCESS signal(s) out of 1."},
        {"LogicalResourceId": "ng-ceph", "ResourceType": "AWS::CloudFormation::Stack",
         "ResourceStatus": "UPDATE_ROLLBACK_IN_PROGRESS"},
    ]]
    assert cfn.root_cause(events) == (
        "NodeGroup (AWS::AutoScaling::AutoScalingGroup) UPDATE_FAILED: Received 0 SUCCESS signal(s) out of 1.")
    assert cfn.root_cause(events[:1]).startswith("NodeSecurityGroup")  # nothing better to name
    assert cfn.root_cause([]) == ""


def test_update_policy_line_resolves_the_template_against_the_stack_parameters() -> None:
    template = nodegroup.load_template()
    params = {"RollingUpdateMaxBatchSize": "2", "RollingUpdateMinInstancesInService": "",
              "NodeAutoScalingGroupDesiredCapacity": "5", "RollingUpdatePauseTime": "PT10M"}
    assert cfn.update_policy_line(template, "NodeGroup", params) == (
        "NodeGroup: rolling update (MaxBatchSize 2, MinInstancesInService 5, PauseTime PT10M, "
        "WaitOnResourceSignals true)")
    params["RollingUpdateMinInstancesInService"] = "4"
    assert "MinInstancesInService 4" in cfn.update_policy_line(template, "NodeGroup", params)
    del template["Resources"]["NodeGroup"]["UpdatePolicy"]
    assert "running nodes are not replaced" in cfn.update_policy_line(template, "NodeGroup", params)


def test_deploy_parameters_create_with_every_required_one_update_with_previous_values() -> None:
    given = nodegroup.parse_parameters(["NodeInstanceType=m6i.large", "KeyName="])
    assert given == {"NodeInstanceType": "m6i.large", "KeyName": ""}
    with pytest.raises(SpecError, match="--cluster, --control-plane-sg, --vpc-id, --subnet"):
        nodegroup.stack_parameters({"NodeGroupName": "ceph", **given}, None)
    assert nodegroup.stack_parameters(given, ["Subnets", "KeyName", "Gone"]) == [
        {"ParameterKey": "KeyName", "ParameterValue": ""},
        {"ParameterKey": "NodeInstanceType", "ParameterValue": "m6i.large"},
        {"ParameterKey": "Subnets", "UsePreviousValue": True},
    ]
    for bad in ("NodeInstanceType", "InstanceType=m5.large"):
        with pytest.raises(SpecError, match="KEY=VALUE"):
            nodegroup.parse_parameters([bad])


# ============================================================================ the emulator


_GATEWAYS: dict[str, Aws] = {}


@dataclass
class World:
    """The sandbox with a pipeline file, its VPC, a control plane security group, and helpers."""

    workdir: Path
    vpc: str
    subnets: list[str]
    plane: str
    pipeline: Pipeline

    @property
    def aws(self) -> Aws:
        endpoint = os.environ["AWS_ENDPOINT_URL"]
        if endpoint not in _GATEWAYS:  # a cold boto3 session costs more than most tests here
            _GATEWAYS[endpoint] = Aws(region=REGION)
        return _GATEWAYS[endpoint]

    def build(self) -> str:
        """An AMI as a build leaves it (an image of an instance, amibuild's tags)."""
        ec2 = boto3.client("ec2", region_name=REGION)
        instance = ec2.run_instances(ImageId=seed_images()[0].image_id, MinCount=1, MaxCount=1, InstanceType="m5.large")
        ami = ec2.create_image(InstanceId=instance["Instances"][0]["InstanceId"],
                               Name=f"amibuild-ceph-{uuid.uuid4().hex[:8]}")["ImageId"]
        ec2.create_tags(Resources=[ami], Tags=[{"Key": "amibuild:variant", "Value": "ceph"},
                                               {"Key": "amibuild:fingerprint", "Value": uuid.uuid4().hex}])
        return ami

    def publish(self, ami: str, channel: str = "recommended") -> None:
        """Set-up: a channel the test starts from (its writes take none of the rate limiter's tokens)."""
        with unlimited():
            publish.publish_variant(self.aws, pipeline=self.pipeline, variant=self.pipeline.variants[0],
                                    amis={REGION: ami}, channel=channel)

    def promote(self) -> None:
        publish.promote(self.aws, pipeline=self.pipeline, variant=self.pipeline.variants[0],
                        source="recommended", target="stable")

    def deploy_flags(self, stack: str, *, channel: str | None = "recommended") -> list[str]:
        flags = ["nodegroup-deploy", "--stack", stack, "--cluster", "prod", "--vpc-id", self.vpc,
                 "--subnet", ",".join(self.subnets), "--control-plane-sg", self.plane]
        return flags + (["--variant", "ceph", "--channel", channel] if channel else [])

    def deploy(self, stack: str, *, channel: str | None = "recommended", **parameters: str) -> None:
        """Create a stack through the library, as the task does."""
        given = {"ClusterName": "prod", "VpcId": self.vpc, "Subnets": ",".join(self.subnets),
                 "ClusterControlPlaneSecurityGroup": self.plane, **parameters}
        nodegroup.deploy(self.aws, stack, REGION, given=given, template_body=nodegroup.template_json(),
                         channel_parameter=f"/amibuild/eks-workers/1.30/ceph/{channel}/image_id" if channel else None,
                         say=quiet, poll=0)
        ssm = parameters_of(stack)["NodeImageIdSSMParam"]
        assert ssm.startswith("/"), (
            f"DescribeStacks shows NodeImageIdSSMParam as {ssm!r}, not the parameter name: this sandbox lacks "
            "the CloudFormation update model (model_stack_updates in amibuild/sandbox/patches.py)")

    def invoke(self, *args: str) -> CliResult:
        return run_cli(self.workdir, *args)


@pytest.fixture
def world(sandbox, tmp_path: Path) -> World:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    ec2 = boto3.client("ec2", region_name=REGION)
    vpc = ec2.describe_vpcs(Filters=[{"Name": "tag:Name", "Values": [SANDBOX_VPC_NAME]}])["Vpcs"][0]["VpcId"]
    subnets = sorted(s["SubnetId"] for s in ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"])
    plane = ec2.create_security_group(GroupName="eks-cluster-prod", Description="control plane", VpcId=vpc)["GroupId"]
    return World(tmp_path, vpc, subnets, plane, load(tmp_path / "amibuild.hcl"))


def described(stack: str) -> dict[str, Any]:
    return boto3.client("cloudformation", region_name=REGION).describe_stacks(StackName=stack)["Stacks"][0]


def parameters_of(stack: str) -> dict[str, str]:
    return {p["ParameterKey"]: p["ParameterValue"] for p in described(stack)["Parameters"]}


def outputs_of(stack: str) -> dict[str, str]:
    return {o["OutputKey"]: o["OutputValue"] for o in described(stack).get("Outputs", [])}


def launch_images(stack: str) -> list[tuple[int, str]]:
    """(version, ImageId) of every version of the stack's launch template."""
    versions = boto3.client("ec2", region_name=REGION).describe_launch_template_versions(
        LaunchTemplateId=outputs_of(stack)["NodeLaunchTemplate"])["LaunchTemplateVersions"]
    return sorted((v["VersionNumber"], v["LaunchTemplateData"]["ImageId"]) for v in versions)


def group_version(stack: str) -> str:
    group = boto3.client("autoscaling", region_name=REGION).describe_auto_scaling_groups(
        AutoScalingGroupNames=[outputs_of(stack)["NodeAutoScalingGroup"]])["AutoScalingGroups"][0]
    return group["LaunchTemplate"]["Version"]


def change_sets(stack: str) -> list[str]:
    summaries = boto3.client("cloudformation", region_name=REGION).list_change_sets(StackName=stack)["Summaries"]
    return [s["ChangeSetName"] for s in summaries]


def last_line(result: CliResult) -> str:
    return result.stderr.strip().splitlines()[-1]


def test_deploy_then_rollout_to_a_promoted_channel_then_already_current(world: World) -> None:
    first = world.build()
    world.publish(first)
    deployed = world.invoke(*world.deploy_flags("ng-ceph"))
    assert deployed.returncode == 0, deployed.stderr
    assert "stack ng-ceph (us-west-2): created (CREATE_COMPLETE)" in deployed.stdout
    assert "amibuild aws-auth --stack ng-ceph" in deployed.stdout
    assert parameters_of("ng-ceph")["NodeImageIdSSMParam"] == RECOMMENDED
    assert launch_images("ng-ceph") == [(1, first)]

    second = world.build()
    world.publish(second)
    world.promote()
    rolled = world.invoke("rollout", "--stack", "ng-ceph", "--variant", "ceph", "--channel", "stable")

    assert rolled.returncode == 0, rolled.stderr
    assert f"NodeImageIdSSMParam := {STABLE} ({second})" in rolled.stderr
    assert "NodeGroup: rolling update (MaxBatchSize 1, MinInstancesInService 3, PauseTime PT15M" in rolled.stderr
    assert "UPDATE_COMPLETE" in rolled.stderr  # the stack's events, followed
    assert f"rolled out to {second} from {STABLE}" in rolled.stdout
    launch_template = outputs_of("ng-ceph")["NodeLaunchTemplate"]
    assert f"launch template {launch_template} version 2 (UPDATE_COMPLETE)" in rolled.stdout
    # The emulator replaces no instance: rollout says so instead of claiming they were.
    assert "3 of 3 instances still run an older launch template version" in rolled.stdout
    parameters = parameters_of("ng-ceph")
    assert parameters["NodeImageIdSSMParam"] == STABLE
    assert (parameters["ClusterName"], parameters["Subnets"]) == ("prod", ",".join(world.subnets))  # kept
    assert launch_images("ng-ceph") == [(1, first), (2, second)]
    assert group_version("ng-ceph") == "2"

    sets_before = change_sets("ng-ceph")
    again = world.invoke("rollout", "--stack", "ng-ceph", "--variant", "ceph", "--channel", "stable")
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"stack ng-ceph (us-west-2): already current: launch template {launch_template} "
                                   f"version 2 has {second}, the AMI of {STABLE}")
    assert change_sets("ng-ceph") == sets_before
    assert launch_images("ng-ceph") == [(1, first), (2, second)]
    # Without --variant the stack's own parameter is the channel.
    assert "already current" in world.invoke("rollout", "--stack", "ng-ceph").stdout


def test_dry_run_prints_the_change_and_leaves_the_stack_untouched(world: World) -> None:
    first, second = world.build(), world.build()
    world.publish(first)
    world.deploy("ng-ceph")
    world.publish(second)
    world.promote()
    before = parameters_of("ng-ceph")

    result = world.invoke("rollout", "--stack", "ng-ceph", "--variant", "ceph", "--channel", "stable", "--dry-run",
                          "--json")

    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert (document["action"], document["dry_run"], document["started"]) == ("update parameter", True, False)
    assert document["changes"][0] == f"NodeImageIdSSMParam := {STABLE}"
    assert (document["previous_image"], document["ami"]) == (first, second)
    assert "change set amibuild-rollout-" in result.stderr
    assert parameters_of("ng-ceph") == before
    assert launch_images("ng-ceph") == [(1, first)]
    assert change_sets("ng-ceph") == []  # deleted again
    assert described("ng-ceph")["StackStatus"] == "CREATE_COMPLETE"


def test_same_parameter_with_a_moved_value_rolls_because_the_update_resolves_it_again(world: World) -> None:
    # The stack already names the channel; only the parameter's value moved. AWS resolves SSM
    # parameters again on every update, and so does the sandbox (amibuild/sandbox.py).
    first, second = world.build(), world.build()
    world.publish(first)
    world.promote()
    world.deploy("ng-ceph", channel="stable")
    world.publish(second)
    world.promote()

    result = world.invoke("rollout", "--stack", "ng-ceph")

    assert result.returncode == 0, result.stderr
    assert f"NodeImageIdSSMParam names {STABLE} already, whose value moved to {second}" in result.stderr
    assert "Modify NodeLaunchTemplate (AWS::EC2::LaunchTemplate)" in result.stderr
    assert f"rolled out to {second} from {STABLE}" in result.stdout
    assert launch_images("ng-ceph") == [(1, first), (2, second)]
    assert group_version("ng-ceph") == "2"


def test_rollout_of_a_stack_that_pins_an_image_sets_node_image_id(world: World) -> None:
    first, second = world.build(), world.build()
    world.publish(first)
    world.deploy("pinned", NodeImageId=first)
    world.publish(second)
    world.promote()
    said: list[str] = []

    result = rollout.rollout_stack(world.aws, "pinned", REGION, channel_parameter=STABLE, say=said.append, poll=0)

    assert (result.action, result.verified, result.previous_image, result.ami) == (
        RolloutAction.UPDATE_IMAGE_ID, True, first, second)
    assert parameters_of("pinned")["NodeImageId"] == second
    assert parameters_of("pinned")["NodeImageIdSSMParam"] == RECOMMENDED  # kept with UsePreviousValue
    assert launch_images("pinned") == [(1, first), (2, second)]
    assert group_version("pinned") == "2"
    assert any("UPDATE_COMPLETE" in line for line in said)
    calls = [op for service, op, _ in world.aws.calls if service == "cloudformation"]
    assert calls.count("CreateChangeSet") == 1 and calls.count("ExecuteChangeSet") == 1


def test_deploy_with_a_channel_on_a_stack_that_pins_an_image_clears_the_pin(world: World) -> None:
    # NodeImageId overrides NodeImageIdSSMParam: kept, the stack would say "updated" and its nodes stay pinned
    first, second = world.build(), world.build()
    world.publish(first)
    world.deploy("pinned", NodeImageId=first)
    world.publish(second)
    given = {"ClusterName": "prod", "VpcId": world.vpc, "Subnets": ",".join(world.subnets),
             "ClusterControlPlaneSecurityGroup": world.plane}
    result = nodegroup.deploy(world.aws, "pinned", REGION, given=given, template_body=nodegroup.template_json(),
                              channel_parameter=RECOMMENDED, say=quiet, poll=0)
    assert result.action is nodegroup.DeployAction.UPDATED
    assert f"NodeImageId: {first!r} -> ''" in result.changed
    assert parameters_of("pinned")["NodeImageId"] == ""
    assert launch_images("pinned")[-1] == (2, second)  # the channel's image, as the template resolves it


def test_rollout_refuses_what_it_cannot_roll_with_exit_2(world: World) -> None:
    world.publish(world.build())
    world.deploy("ng-ceph")
    cfn = boto3.client("cloudformation", region_name=REGION)
    cfn.create_stack(StackName="not-nodes", TemplateBody=json.dumps({
        "Parameters": {"AmiParameter": {"Type": "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>",
                                        "Default": RECOMMENDED}},
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
    }))
    cases = [
        (["--stack", "nope"], "stack nope does not exist in us-west-2"),
        (["--stack", "not-nodes", "--variant", "ceph"],
         "stack not-nodes in us-west-2 has neither a NodeImageIdSSMParam nor a NodeImageId parameter"),
        (["--stack", "ng-ceph", "--variant", "ceph", "--channel", "candidate"],
         ("channel parameter /amibuild/eks-workers/1.30/ceph/candidate/image_id has no value in us-west-2: publish or "
          "promote to it first")),
        # neither declared nor there: a typo, refused before the stack is read (issue 26)
        (["--stack", "ng-ceph", "--variant", "ceph", "--channel", "beta"], "--channel beta: no such channel"),
        (["--stack", "ng-ceph", "--nodegroup", "prod/x"], "give --stack NAME or --nodegroup CLUSTER/NAME"),
        # the file's one variant is taken with --channel alone (test_first_hour: a file of two names them)
        (["--stack", "ng-ceph", "--channel", "candidate"],
         "channel parameter /amibuild/eks-workers/1.30/ceph/candidate/image_id has no value in us-west-2"),
        (["--nodegroup", "prod", "--variant", "ceph"], "write CLUSTER/NAME"),
        (["--stack", "ng-ceph", "--timeout", "soon"], "--timeout 'soon': seconds, or a number and s, m, h, d or w"),
    ]
    for args, message in cases:
        result = world.invoke("rollout", *args)
        assert result.returncode == 2, (args, result.stderr)
        assert message in last_line(result), result.stderr
        assert "Traceback" not in result.stderr
    assert parameters_of("ng-ceph")["NodeImageIdSSMParam"] == RECOMMENDED
    assert change_sets("ng-ceph") == []


def test_aws_auth_reads_the_node_role_from_the_stack(world: World) -> None:
    world.publish(world.build())
    world.deploy("ng-ceph")
    role = outputs_of("ng-ceph")["NodeInstanceRole"]

    result = world.invoke("aws-auth", "--stack", "ng-ceph")

    assert result.returncode == 0, result.stderr
    assert f"- rolearn: {role}\n" in result.stdout
    assert "system:node:{{EC2PrivateDNSName}}" in result.stdout
    for args, words in [([], "give --role-arn ARN or --stack NAME"),
                        (["--stack", "ng-ceph", "--role-arn", role], "give --role-arn ARN or --stack NAME"),
                        (["--stack", "nope"], "stack nope does not exist")]:
        refused = world.invoke("aws-auth", *args)
        assert refused.returncode == 2 and words in refused.stderr, refused.stderr


def test_deploy_with_a_proxy_sends_user_data_that_signals_the_node_group(world: World) -> None:
    world.publish(world.build())

    result = world.invoke(*world.deploy_flags("proxied"), "--proxy", "http://proxy.corp.example:3128",
                          "--no-proxy", ".corp.example", "--parameter", "NodeInstanceType=m6i.large")

    assert result.returncode == 0, result.stderr
    data = boto3.client("ec2", region_name=REGION).describe_launch_template_versions(
        LaunchTemplateId=outputs_of("proxied")["NodeLaunchTemplate"])["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    user_data = base64.b64decode(data["UserData"]).decode()
    assert "Content-Type: text/cloud-boothook" in user_data and "proxy=http://proxy.corp.example:3128\n" in user_data
    assert ".corp.example" in user_data
    assert "--stack proxied \\\n    --resource NodeGroup \\\n    --region us-west-2" in user_data
    assert "${" in user_data and "${!" not in user_data  # the shell's own ${...} came back from Fn::Sub
    assert data["InstanceType"] == "m6i.large"


def test_deploy_updates_only_what_it_is_given_and_refuses_missing_flags(world: World) -> None:
    world.publish(world.build())
    world.deploy("ng-ceph")
    before = parameters_of("ng-ceph")

    updated = world.invoke("nodegroup-deploy", "--stack", "ng-ceph", "--parameter", "NodeInstanceType=m6i.large")
    assert updated.returncode == 0, updated.stderr
    assert "stack ng-ceph (us-west-2): updated (UPDATE_COMPLETE)" in updated.stdout
    assert parameters_of("ng-ceph") == {**before, "NodeInstanceType": "m6i.large"}

    unchanged = world.invoke("nodegroup-deploy", "--stack", "ng-ceph", "--parameter", "NodeInstanceType=m6i.large")
    assert unchanged.returncode == 0, unchanged.stderr
    assert "stack ng-ceph (us-west-2): unchanged" in unchanged.stdout

    for args, words in [(["--stack", "new-one", "--variant", "ceph"], "needs --cluster, --control-plane-sg, --vpc-id"),
                        ([*world.deploy_flags("new-one", channel=None)[1:]],
                         "needs --channel (with --variant when the pipeline has more than one)"),
                        ([*world.deploy_flags("new-one", channel="candidate")[1:]], "candidate/image_id has no value"),
                        ([*world.deploy_flags("new-one", channel="beta")[1:]], "--channel beta: no such channel"),
                        (["--stack", "ng-ceph", "--no-proxy", "x.example"], "goes with --proxy (the stack has no proxy)"),
                        (["--stack", "ng-ceph", "--parameter", "Subnets=subnet-1", "--subnet", "subnet-2"],
                         "Subnets is set twice")]:
        refused = world.invoke("nodegroup-deploy", *args)
        assert refused.returncode == 2, (args, refused.stderr)
        assert words in last_line(refused), refused.stderr
    with pytest.raises(ClientError, match="does not exist"):
        described("new-one")


# ================================================================== recorded AWS responses

TIMESTAMPS = {"Timestamp", "CreationTime", "LastUpdatedTime", "LastUpdatedTimestamp", "CreatedTime", "CreateTime",
              "LastModifiedDate", "createdAt"}


def recorded(name: str, **values: str) -> list[dict[str, Any]]:
    """The calls of tests/data/rollout/NAME.json: ``__ANY__`` matches anything, ``__KEY__`` takes
    values[key], ``@path`` is a file of this repository, timestamps become datetimes."""
    def revive(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: revive(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [revive(v) for v in value]
        if key in TIMESTAMPS and isinstance(value, str):
            return datetime.fromisoformat(value)
        if value == "__ANY__":
            return ANY
        if isinstance(value, str) and value.startswith("__") and value.endswith("__"):
            return values[value.strip("_").lower()]
        if isinstance(value, str) and value.startswith("@"):
            return (ROOT / value[1:]).read_text()
        return value

    return revive(json.loads((DATA / f"{name}.json").read_text())["calls"])


@contextlib.contextmanager
def replayed(aws: Aws, calls: list[dict[str, Any]]) -> Iterator[None]:
    """Answer `calls` in order, per service, on the gateway's own clients; all must be used."""
    stubs: dict[str, Stubber] = {}
    for call in calls:
        stub = stubs.setdefault(call["service"], Stubber(aws.client(call["service"], REGION)))
        if "error" in call:
            stub.add_client_error(call["operation"], service_error_code=call["error"]["code"],
                                  service_message=call["error"]["message"], http_status_code=400,
                                  expected_params=call.get("expected"))
        else:
            stub.add_response(call["operation"], call["response"], call.get("expected"))
    with contextlib.ExitStack() as stack:
        for stub in stubs.values():
            stack.enter_context(stub)
        yield
        for stub in stubs.values():
            stub.assert_no_pending_responses()


@pytest.fixture
def offline_aws(monkeypatch: pytest.MonkeyPatch) -> Aws:
    """A gateway with dummy credentials and no endpoint: only replayed answers reach it."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    return Aws(region=REGION)


def test_on_aws_the_same_parameter_is_resolved_again_and_the_roll_is_followed_and_verified(offline_aws: Aws) -> None:
    said: list[str] = []
    with replayed(offline_aws, recorded("aws_stack_before") + recorded("aws_update_rolls")):
        result = rollout.rollout_stack(offline_aws, "ng-ceph", REGION, channel_parameter=None, say=said.append, poll=0)

    assert (result.action, result.verified, result.status) == (RolloutAction.UPDATE_PARAMETER, True, "UPDATE_COMPLETE")
    assert (result.channel, result.previous_image, result.ami) == (STABLE, OLD, NEW)
    assert result.launch_template == "launch template lt-0123456789abcdef0 version 4"
    assert result.note == "3 of 3 instances launched from it"
    assert result.changes == (
        "Modify NodeLaunchTemplate (AWS::EC2::LaunchTemplate): LaunchTemplateData",
        "Modify NodeGroup (AWS::AutoScaling::AutoScalingGroup), maybe replaced: LaunchTemplate",
    )
    text = "\n".join(said)
    assert f"NodeImageIdSSMParam names {STABLE} already, whose value moved to {NEW}" in text
    assert "NodeGroup: rolling update (MaxBatchSize 1, MinInstancesInService 3, PauseTime PT15M, " \
           "WaitOnResourceSignals true)" in text
    # every event once, oldest first, none from before the update
    events = [line.split()[1] + " " + line.split()[3] for line in said if line.startswith("  09:")]
    assert events[0] == "ng-ceph UPDATE_IN_PROGRESS" and events[-1] == "ng-ceph UPDATE_COMPLETE"
    assert len(events) == len({line for line in said if line.startswith("  09:")}) == 10
    assert "Received SUCCESS signal with UniqueId" in text
    assert result.lines()[0] == (f"stack ng-ceph ({REGION}): rolled out to {NEW} from {STABLE}: launch template "
                                 "lt-0123456789abcdef0 version 4 (UPDATE_COMPLETE)")


def test_a_rolled_back_update_names_the_failing_resource_and_its_reason(offline_aws: Aws) -> None:
    said: list[str] = []
    with replayed(offline_aws, recorded("aws_stack_before") + recorded("aws_update_rolls_back")), \
            pytest.raises(RolloutFailed) as caught:
        rollout.rollout_stack(offline_aws, "ng-ceph", REGION, channel_parameter=STABLE, say=said.append, poll=0)

    assert caught.value.exit_code == 1
    assert str(caught.value) == (
        "stack ng-ceph ended UPDATE_ROLLBACK_COMPLETE: NodeGroup (AWS::AutoScaling::AutoScalingGroup) UPDATE_FAILED: "
        "Received 0 SUCCESS signal(s) out of 1.  Unable to satisfy 100% MinSuccessfulInstancesPercent requirement; "
        "CloudFormation rolled the change back")
    assert any("UPDATE_ROLLBACK_COMPLETE" in line for line in said)


def test_a_nodegroup_deploy_that_rolls_back_is_a_failed_result_and_its_raise_for_status_names_the_cause(
        offline_aws: Aws) -> None:
    """Once the change set is executed, a stack that rolls back is the deploy's result (what was sent,
    the stack's status now), not an exception lost half way: `raise_for_status` then fails the task."""
    stacks = [c for c in recorded("aws_stack_before") if c["operation"] == "describe_stacks"]
    ours = {"service": "cloudformation", "operation": "get_template",
            "response": {"TemplateBody": nodegroup.template_json()}}  # the stack carries amibuild's mark
    update = [{**c, "expected": None} if c["operation"] == "create_change_set" else c  # amibuild's template body
              for c in recorded("aws_update_rolls_back")]
    rolled_back = [c for c in update if c["operation"] == "describe_stacks"][-1]
    said: list[str] = []
    with replayed(offline_aws, [*stacks, ours, *update, rolled_back]):
        result = nodegroup.deploy(offline_aws, "ng-ceph", REGION, given={"NodeInstanceType": "m6i.xlarge"},
                                  template_body=nodegroup.template_json(), channel_parameter=None, say=said.append,
                                  poll=0)

    cause = ("stack ng-ceph ended UPDATE_ROLLBACK_COMPLETE: NodeGroup (AWS::AutoScaling::AutoScalingGroup) "
             "UPDATE_FAILED: Received 0 SUCCESS signal(s) out of 1.  Unable to satisfy 100% "
             "MinSuccessfulInstancesPercent requirement; CloudFormation rolled the change back")
    assert (result.action, result.status, result.error) == (nodegroup.DeployAction.FAILED, "UPDATE_ROLLBACK_COMPLETE",
                                                            cause)
    assert result.changed == ("NodeInstanceType: 'm6i.large' -> 'm6i.xlarge'",)
    assert result.to_dict()["action"] == "failed" and result.to_dict()["error"] == cause
    lines = result.lines()
    assert lines[0] == f"stack ng-ceph ({REGION}): failed (UPDATE_ROLLBACK_COMPLETE)"
    assert not [line for line in lines if "next:" in line], "no hand-off hint for nodes that did not roll"
    with pytest.raises(RolloutFailed) as caught:
        result.raise_for_status()
    assert caught.value.exit_code == 1 and str(caught.value) == cause


def test_a_deploy_that_ended_well_raises_nothing() -> None:
    for action in set(nodegroup.DeployAction) - {nodegroup.DeployAction.FAILED}:
        nodegroup.DeployResult("ng", REGION, action, "UPDATE_COMPLETE").raise_for_status()


def test_a_change_set_aws_fails_for_having_no_changes_is_deleted_and_reported(offline_aws: Aws) -> None:
    expected = (f"found nothing to update in stack ng-ceph, so nothing changed: the Auto Scaling group still "
                f"launches from launch template lt-0123456789abcdef0 version 3 with {OLD}, not {NEW}")
    with replayed(offline_aws, recorded("aws_stack_before") + recorded("aws_change_set_without_changes")), \
            pytest.raises(RolloutFailed, match=expected):
        rollout.rollout_stack(offline_aws, "ng-ceph", REGION, channel_parameter=STABLE, say=quiet, poll=0)


def test_no_wait_returns_once_the_change_set_executes(offline_aws: Aws) -> None:
    calls = recorded("aws_update_rolls")
    started = [c["operation"] for c in calls].index("execute_change_set") + 1
    with replayed(offline_aws, recorded("aws_stack_before") + calls[:started]):
        result = rollout.rollout_stack(offline_aws, "ng-ceph", REGION, channel_parameter=STABLE, say=quiet, poll=0,
                                       wait=False)
    assert (result.started, result.verified, result.status) == (True, False, "UPDATE_IN_PROGRESS")
    assert "run the same command again later" in result.lines()[1]


@pytest.mark.parametrize("deleted", [True, False])
def test_a_change_set_still_being_made_at_the_timeout_is_deleted_or_named_not_left_silently(
        offline_aws: Aws, monkeypatch: pytest.MonkeyPatch, deleted: bool) -> None:
    monkeypatch.setattr(cfn, "CHANGE_SET_TIMEOUT", 0.0)
    calls = recorded("aws_update_rolls")[:2]  # CreateChangeSet, then one DescribeChangeSet: CREATE_IN_PROGRESS
    assert [c["operation"] for c in calls] == ["create_change_set", "describe_change_set"]
    delete = {"service": "cloudformation", "operation": "delete_change_set",
              "expected": {"StackName": "ng-ceph", "ChangeSetName": ANY}, "response": {}}
    if not deleted:
        delete = {**delete, "error": {"code": "InvalidChangeSetStatus", "message": "change set is being created"}}
    said = ("it was deleted, the stack is unchanged" if deleted else
            "it is left behind .*: aws cloudformation delete-change-set --stack-name ng-ceph --change-set-name "
            f"amibuild-rollout-[0-9a-f-]+ --region {REGION}")
    with replayed(offline_aws, recorded("aws_stack_before") + calls + [delete]), \
            pytest.raises(RolloutFailed, match="still CREATE_IN_PROGRESS after 0 s; " + said):
        rollout.rollout_stack(offline_aws, "ng-ceph", REGION, channel_parameter=STABLE, say=quiet, poll=0,
                              dry_run=True)


def test_following_gives_up_after_the_timeout_and_says_the_update_goes_on(offline_aws: Aws) -> None:
    calls = recorded("aws_update_rolls")
    first_look = [c["operation"] for c in calls].index("execute_change_set") + 3  # one status, one page of events
    with replayed(offline_aws, recorded("aws_stack_before") + calls[:first_look]), \
            pytest.raises(RolloutFailed, match="still UPDATE_IN_PROGRESS after 0 s; CloudFormation goes on"):
        rollout.rollout_stack(offline_aws, "ng-ceph", REGION, channel_parameter=STABLE, say=quiet, poll=0, timeout=0)


# ===================================================== EKS managed node groups (both worlds)


def managed_nodegroup(world: World, *, launch_template: bool = True) -> tuple[str | None, dict[str, Any]]:
    """A cluster `prod` and a node group `ng-managed` in the emulator: (launch template id, the
    emulator's DescribeNodegroup answer)."""
    ec2, eks = boto3.client("ec2", region_name=REGION), boto3.client("eks", region_name=REGION)
    template_id = None
    if launch_template:
        template_id = ec2.create_launch_template(LaunchTemplateName="managed-nodes", LaunchTemplateData={
            "ImageId": world.build(), "InstanceType": "m6i.large",
            "MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": 2}})["LaunchTemplate"]["LaunchTemplateId"]
    eks.create_cluster(name="prod", roleArn="arn:aws:iam::123456789012:role/eks-cluster",
                       resourcesVpcConfig={"subnetIds": world.subnets})
    eks.create_nodegroup(clusterName="prod", nodegroupName="ng-managed", subnets=world.subnets,
                         nodeRole="arn:aws:iam::123456789012:role/eks-nodes",
                         **({"launchTemplate": {"id": template_id, "version": "1"}} if template_id else {}))
    return template_id, eks.describe_nodegroup(clusterName="prod", nodegroupName="ng-managed")["nodegroup"]


def nodegroup_answer(raw: dict[str, Any], version: str | None = None) -> dict[str, Any]:
    """A DescribeNodegroup call answered with the emulator's node group (at `version`)."""
    group = json.loads(json.dumps(raw, default=str))
    group["createdAt"], group["modifiedAt"] = raw["createdAt"], raw.get("modifiedAt", raw["createdAt"])
    if version:
        group["launchTemplate"]["version"] = version
    return {"service": "eks", "operation": "describe_nodegroup",
            "expected": {"clusterName": "prod", "nodegroupName": "ng-managed"}, "response": {"nodegroup": group}}


def test_managed_nodegroup_gets_a_new_launch_template_version_and_is_verified(world: World) -> None:
    template_id, raw = managed_nodegroup(world)
    first = launch_image_of(template_id, 1)
    second = world.build()
    world.publish(second)
    world.promote()
    calls = [nodegroup_answer(raw), *recorded("eks_update_successful", launch_template=template_id),
             nodegroup_answer(raw, version="2")]
    said: list[str] = []
    sent: list[dict[str, Any]] = []
    ec2 = world.aws.client("ec2", REGION)
    ec2.meta.events.register("before-parameter-build.ec2.CreateLaunchTemplateVersion",
                             lambda params, **_: sent.append(dict(params)), unique_id="rollout-test")
    try:
        with replayed(world.aws, calls):
            result = rollout.rollout_nodegroup(world.aws, "prod", "ng-managed", REGION, channel_parameter=STABLE,
                                               say=said.append, poll=0)
    finally:
        ec2.meta.events.unregister("before-parameter-build.ec2.CreateLaunchTemplateVersion", unique_id="rollout-test")

    assert (result.action, result.verified, result.status) == (RolloutAction.UPDATE_IMAGE_ID, True, "Successful")
    assert (result.previous_image, result.ami) == (first, second)
    assert result.launch_template == f"launch template {template_id} version 2"
    assert launch_image_of(template_id, 2) == second
    # Everything else is copied from the version in use: AWS does that for SourceVersion (the
    # emulator ignores it, so the request is what can be checked here).
    assert sent == [{"LaunchTemplateId": template_id, "SourceVersion": "1", "LaunchTemplateData": {"ImageId": second},
                     "VersionDescription": f"amibuild: {STABLE}"}]
    assert [line.rsplit(" ", 1)[1] for line in said if " update 0d7c" in line] == [
        "InProgress", "InProgress", "Successful"]  # as started, then each change DescribeUpdate showed


def launch_image_of(template_id: str, version: int) -> str:
    versions = boto3.client("ec2", region_name=REGION).describe_launch_template_versions(
        LaunchTemplateId=template_id, Versions=[str(version)])["LaunchTemplateVersions"]
    return versions[0]["LaunchTemplateData"]["ImageId"]


def test_managed_nodegroup_update_failure_names_the_errors(world: World) -> None:
    template_id, raw = managed_nodegroup(world)
    world.publish(world.build())
    world.promote()
    calls = [nodegroup_answer(raw), *recorded("eks_update_failed", launch_template=template_id)]
    with replayed(world.aws, calls), pytest.raises(RolloutFailed) as caught:
        rollout.rollout_nodegroup(world.aws, "prod", "ng-managed", REGION, channel_parameter=STABLE, say=quiet, poll=0)
    assert str(caught.value) == (
        "node group prod/ng-managed: update 0d7c1f4e-5a6b-3c2d-9e8f-7a6b5c4d3e2f Failed: PodEvictionFailure: Reached "
        "max retries while trying to evict pods from nodes in node group ng-managed "
        "(ip-10-42-0-17.us-west-2.compute.internal)")


def test_managed_nodegroup_dry_run_changes_nothing_and_refusals_exit_2(world: World) -> None:
    template_id, _ = managed_nodegroup(world)
    world.publish(world.build())
    world.promote()

    dry = world.invoke("rollout", "--nodegroup", "prod/ng-managed", "--variant", "ceph", "--channel", "stable",
                       "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"would: launch template {template_id}: a new version from version 1 with ImageId" in dry.stdout
    assert [v["VersionNumber"] for v in boto3.client("ec2", region_name=REGION).describe_launch_template_versions(
        LaunchTemplateId=template_id)["LaunchTemplateVersions"]] == [1]

    boto3.client("eks", region_name=REGION).create_nodegroup(
        clusterName="prod", nodegroupName="eks-ami", subnets=world.subnets,
        nodeRole="arn:aws:iam::123456789012:role/eks-nodes")
    for args, words in [(["--nodegroup", "prod/eks-ami", "--variant", "ceph"], "uses no launch template"),
                        (["--nodegroup", "prod/nope", "--variant", "ceph"], "node group prod/nope does not exist"),
                        (["--nodegroup", "prod/ng-managed"], "--nodegroup needs --variant")]:
        refused = world.invoke("rollout", *args)
        assert refused.returncode == 2, (args, refused.stderr)
        assert words in last_line(refused), refused.stderr


def test_a_group_naming_a_launch_template_version_that_is_gone_is_refused_by_name(world: World) -> None:
    """EC2 answers a version or template that does not exist with InvalidLaunchTemplateId.VersionNotFound /
    .NotFound: the gateway reads that as no such version, so rollout refuses (exit 2) naming it."""
    world.publish(world.build())
    world.deploy("ng-ceph")
    template = outputs_of("ng-ceph")["NodeLaunchTemplate"]
    assert world.aws.launch_template_version(template, "7", REGION) is None
    assert world.aws.launch_template_version("lt-0123456789abcdef0", "1", REGION) is None
    boto3.client("autoscaling", region_name=REGION).update_auto_scaling_group(
        AutoScalingGroupName=outputs_of("ng-ceph")["NodeAutoScalingGroup"],
        LaunchTemplate={"LaunchTemplateId": template, "Version": "7"})

    result = world.invoke("rollout", "--stack", "ng-ceph", "--variant", "ceph", "--channel", "recommended")

    assert result.returncode == 2, result.stderr
    assert f"stack ng-ceph in {REGION}: launch template {template} version 7 does not exist" in last_line(result)


class Interrupting:
    """The world's gateway, with Ctrl-C arriving during one chosen call (KeyboardInterrupt, as SIGINT raises)."""

    def __init__(self, aws: Aws, method: str) -> None:
        self._aws, self._method = aws, method

    def __getattr__(self, name: str) -> Any:
        if name != self._method:
            return getattr(self._aws, name)

        def interrupted(*args: Any, **kwargs: Any) -> Any:
            raise KeyboardInterrupt
        return interrupted


@pytest.mark.parametrize("method", ["describe_change_set", "stack_events_since"])
def test_ctrl_c_deletes_a_change_set_not_yet_executed_and_says_an_executed_one_goes_on(
        world: World, method: str) -> None:
    first, second = world.build(), world.build()
    world.publish(first)
    world.deploy("ng-ceph")
    world.publish(second)
    world.promote()

    with pytest.raises(Interrupted) as caught:
        rollout.rollout_stack(Interrupting(world.aws, method), "ng-ceph", REGION, channel_parameter=STABLE, say=quiet,
                              poll=0)

    assert caught.value.exit_code == 130
    if method == "describe_change_set":  # the change set was never executed
        assert change_sets("ng-ceph") == []
        assert "was not executed; it was deleted, the stack is unchanged" in str(caught.value)
        assert parameters_of("ng-ceph")["NodeImageIdSSMParam"] == RECOMMENDED
    else:
        assert "CloudFormation goes on without amibuild" in str(caught.value)


def test_ctrl_c_while_following_a_managed_nodegroup_update_says_eks_goes_on(world: World) -> None:
    managed_nodegroup(world)
    world.publish(world.build())
    world.promote()
    with pytest.raises(Interrupted, match="ng-managed's update .*; EKS goes on without amibuild") as caught:
        rollout.rollout_nodegroup(Interrupting(world.aws, "describe_nodegroup_update"), "prod", "ng-managed", REGION,
                                  channel_parameter=STABLE, say=quiet, poll=0)
    assert caught.value.exit_code == 130


@pytest.mark.parametrize("execution", ["OBSOLETE", "UNAVAILABLE"])
def test_a_change_set_another_update_made_unexecutable_is_deleted_and_not_shown_as_what_would_happen(
        offline_aws: Aws, execution: str) -> None:
    calls = recorded("aws_update_rolls")
    complete = next(i for i, c in enumerate(calls) if c["response"].get("Status") == "CREATE_COMPLETE")
    calls[complete]["response"]["ExecutionStatus"] = execution  # the stack was updated meanwhile, or is being
    delete = {"service": "cloudformation", "operation": "delete_change_set",
              "expected": {"StackName": "ng-ceph", "ChangeSetName": ANY}, "response": {}}
    with replayed(offline_aws, recorded("aws_stack_before") + calls[:complete + 1] + [delete]), \
            pytest.raises(RolloutFailed, match=f"cannot be executed \\(ExecutionStatus {execution}\\)"):
        rollout.rollout_stack(offline_aws, "ng-ceph", REGION, channel_parameter=STABLE, say=quiet, poll=0,
                              dry_run=True)


def test_deploy_dry_run_says_the_update_would_resolve_the_moved_channel_again(world: World) -> None:
    first, second = world.build(), world.build()
    world.publish(first)
    world.deploy("ng-ceph")  # the flags below, the same template
    world.publish(second)  # only the channel's value moves

    dry = world.invoke(*world.deploy_flags("ng-ceph"), "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    document = json.loads(dry.stdout)
    assert document["action"] == "would update", document
    assert f"NodeImageIdSSMParam: {RECOMMENDED} moved from {first} to {second}" in " ".join(document["changed"])
    assert launch_images("ng-ceph") == [(1, first)]
    done = world.invoke(*world.deploy_flags("ng-ceph"), "--json")  # what the dry run said
    assert (json.loads(done.stdout)["action"], launch_images("ng-ceph")) == ("updated", [(1, first), (2, second)])
