"""The IAM policy of each task allows exactly what the task calls: checked by running it.

Each task runs as users run it (the command line, in process; Packer a real subprocess) against the local
emulator through the recording proxy (tests/recorder.py), which names every request as the IAM
action it needs. Then, per task:

    called  ⊆ policy                              nothing the task does is denied
    policy  = called ∪ iam.NOT_OBSERVED[task]     nothing is allowed that the task never calls,
                                                  except the documented actions real AWS needs
                                                  and the emulator cannot show

and every SSM parameter (and CloudFormation stack) a request names is inside a Resource of a
statement that allows the request's action. cfn-lint checks that every action name exists.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Iterator

import boto3
import pytest
from recorder import Recorder

from amibuild.lifecycle import iam
from amibuild.pipeline import Pipeline, load
from amibuild.errors import SpecError
from amibuild.sandbox import ACCOUNT_ID, seed_images
from conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
REGIONS = ("us-west-2", "eu-west-1")
KMS_KEY = "arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
KMS_KEY_EU = "arn:aws:kms:eu-west-1:123456789012:key/5678abcd-12ab-34cd-56ef-1234567890ab"
NODE_ROLE = "arn:aws:iam::123456789012:role/eks-nodes"
CHANNELS_PIPELINE = """
pipeline {
  name       = "iam"
  ssm_prefix = "/amibuild"
  regions    = ["us-west-2"]
  copy_to    = ["eu-west-1"]
}
variant "ceph" {}
"""


def task_names(cwd: Path) -> set[str]:
    listing = json.loads(run_cli(cwd, "--list", "--list-format", "json").stdout)
    return {t["name"] for t in listing["tasks"]}


@pytest.fixture
def recorder(sandbox) -> Iterator[Recorder]:
    with Recorder(sandbox.endpoint) as proxy:
        yield proxy


def through(recorder: Recorder) -> dict[str, str]:
    """The environment for a subprocess whose every AWS request (Packer's too) goes through `recorder`."""
    return {**os.environ, "AWS_ENDPOINT_URL": recorder.endpoint}


def assert_policy_matches_calls(task: str, document: dict[str, Any], recorder: Recorder) -> None:
    allowed = iam.actions(document)
    called = recorder.actions() - iam.ALWAYS_ALLOWED
    assert not {a for a in called if a.startswith("?") or a.endswith(":")}, f"unnamed requests: {sorted(called)}"
    assert called <= allowed, f"{task}: called but not in the policy: {sorted(called - allowed)}"
    documented = set(iam.NOT_OBSERVED[task])
    assert not called & documented, f"{task}: documented as not observable, but called: {sorted(called & documented)}"
    assert allowed - called == documented, (
        f"{task}: in the policy but never called: {sorted(allowed - called - documented)}; "
        f"documented but not in the policy: {sorted(documented - allowed)}")
    for call in recorder.calls:
        for name in call.names:
            if call.service == "ssm":
                owner = "" if name.startswith("/aws/") else ACCOUNT_ID
                arn = f"arn:aws:ssm:{call.region}:{owner}:parameter{name}"
            elif call.service == "cloudformation":
                arn = f"arn:aws:cloudformation:{call.region}:{ACCOUNT_ID}:stack/{name}/0"
            else:
                continue
            resources = [r for s in document["Statement"] if call.action in s["Action"]
                         for r in ([s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"])]
            assert any(fnmatchcase(arn, r) for r in resources), f"{call.action} on {arn}: outside {resources}"


def build_image(region: str, *, pipeline: str, variant: str, n: int = 1) -> str:
    """An image (and snapshot) tagged as a build leaves them."""
    ec2 = boto3.client("ec2", region_name=region)
    instance = ec2.run_instances(ImageId=seed_images()[0].image_id, MinCount=1, MaxCount=1,
                                 InstanceType="m5.large")["Instances"][0]["InstanceId"]
    ami = ec2.create_image(InstanceId=instance, Name=f"amibuild-{variant}-{uuid.uuid4().hex[:8]}")["ImageId"]
    ec2.terminate_instances(InstanceIds=[instance])
    snapshot = ec2.describe_images(ImageIds=[ami])["Images"][0]["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"]
    tags = {"amibuild:fingerprint": f"fp-{n}", "amibuild:variant": variant, "amibuild:pipeline": pipeline,
            "amibuild:run-id": f"run-{n}", "amibuild:created": f"2024-01-{n:02d}T12:00:00Z"}
    ec2.create_tags(Resources=[ami, snapshot], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
    return ami


# ------------------------------------------------------------------------------- per task, observed


@pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")
def test_build_policy_allows_exactly_what_build_ami_and_packer_call(tmp_path: Path, recorder: Recorder) -> None:
    ec2 = boto3.client("ec2", region_name="us-west-2")
    subnet = ec2.describe_subnets(Filters=[{"Name": "cidr-block", "Values": ["10.42.0.0/24"]}])["Subnets"][0]
    # every branch of the build policy: copies, sharing, encryption with a KMS key, a named subnet,
    # a variant that lets Packer make its own security group, and credentials in a proxy URL (the
    # fingerprint's MAC of them by the fingerprint key)
    (tmp_path / "amibuild.hcl").write_text(f"""
pipeline {{
  name      = "iam"
  regions   = ["us-west-2"]
  copy_to   = ["eu-west-1"]
  ami_users = ["111122223333"]
  allow_shared_credentials = true
}}
variant "plain" {{
  proxy {{
    http = "http://user:S3cretPass@proxy.local:3128"
  }}
}}
variant "tuned" {{
  encrypted  = true
  kms_key_id = "{KMS_KEY}"
  region_kms_key_ids = {{ "eu-west-1" = "{KMS_KEY_EU}" }}
  subnet_id  = "{subnet['SubnetId']}"
}}
""")
    # one channel write fails in the second region: the first region's write is taken back out
    # (DeleteParameter), as any publish failure would
    recorder.fail("eu-west-1", times=1)
    result = run_cli(tmp_path, "build-ami", "--json", env=through(recorder))
    variants = {v["name"]: v for v in json.loads(result.stdout)["variants"]}
    assert {v["status"] for v in variants.values()} == {"built"}, result.stderr
    assert sum(1 for v in variants.values() if v.get("publish_error")) == 1, result.stderr
    assert result.returncode == 1
    assert "ec2:CreateKeyPair" in recorder.actions() and "ec2:CopyImage" in recorder.actions()
    assert "kms:GenerateMac" in recorder.actions()
    document = iam.policy("build", load(tmp_path / "amibuild.hcl"), account=ACCOUNT_ID)
    assert_policy_matches_calls("build", document, recorder)


def test_publish_policy_allows_exactly_what_publish_promote_rollback_history_and_channels_call(
        tmp_path: Path, recorder: Recorder) -> None:
    (tmp_path / "amibuild.hcl").write_text(CHANNELS_PIPELINE)
    amis = [{r: build_image(r, pipeline="iam", variant="ceph", n=n) for r in REGIONS} for n in (1, 2, 3)]
    env = through(recorder)

    def ami_flag(images: dict[str, str]) -> str:
        return ",".join(f"{r}={a}" for r, a in images.items())

    for args in (["publish", "--variant", "ceph", "--ami", ami_flag(amis[0])],
                 ["publish", "--variant", "ceph", "--ami", ami_flag(amis[1])],
                 ["promote", "--variant", "ceph", "--from", "recommended", "--to", "stable"],
                 ["rollback", "--variant", "ceph", "--channel", "recommended"],
                 ["history", "--variant", "ceph"],
                 ["channels"]):
        result = run_cli(tmp_path, *args, env=env)
        assert result.returncode == 0, f"{args}: {result.stderr}"
    # a write refused in the second region: the new parameter in the first is deleted again
    recorder.fail("eu-west-1", times=1, name="/image_id")
    failed = run_cli(tmp_path, "publish", "--variant", "ceph", "--channel", "candidate", "--ami", ami_flag(amis[2]),
                    env=env)
    assert failed.returncode == 1 and "deleted again" in failed.stderr, failed.stderr
    document = iam.policy("publish", load(tmp_path / "amibuild.hcl"), account=ACCOUNT_ID)
    assert_policy_matches_calls("publish", document, recorder)


def test_prune_policy_allows_exactly_what_prune_calls(tmp_path: Path, recorder: Recorder) -> None:
    (tmp_path / "amibuild.hcl").write_text(CHANNELS_PIPELINE)
    amis = [build_image("us-west-2", pipeline="iam", variant="ceph", n=n) for n in (1, 2, 3, 4, 5)]
    rbin = boto3.client("rbin", region_name="us-west-2")  # so prune deletes the snapshots, as the policy allows
    for kind in ("EC2_IMAGE", "EBS_SNAPSHOT"):
        rbin.create_rule(ResourceType=kind, RetentionPeriod={"RetentionPeriodValue": 1, "RetentionPeriodUnit": "DAYS"})
    # the doomed image left its channel protected: prune turns the protection off first
    boto3.client("ec2", region_name="us-west-2").enable_image_deregistration_protection(ImageId=amis[3])
    ssm = boto3.client("ssm", region_name="us-west-2")
    for ami in (amis[0], amis[1]):
        ssm.put_parameter(Name="/amibuild/iam/1.35/ceph/stable/image_id", Value=ami, Type="String",
                          DataType="aws:ec2:image", Overwrite=True)
    ec2 = boto3.client("ec2", region_name="us-west-2")
    template = ec2.create_launch_template(LaunchTemplateName="nodes", LaunchTemplateData={"ImageId": amis[2]})
    boto3.client("autoscaling", region_name="us-west-2").create_auto_scaling_group(
        AutoScalingGroupName="nodes", MinSize=0, MaxSize=1, DesiredCapacity=0,
        VPCZoneIdentifier=ec2.describe_subnets()["Subnets"][0]["SubnetId"],
        LaunchTemplate={"LaunchTemplateId": template["LaunchTemplate"]["LaunchTemplateId"], "Version": "1"})

    result = run_cli(tmp_path, "prune", "--keep", "1", "--json", env=through(recorder))
    assert result.returncode == 0, result.stderr
    # only the 4th: newest, channel, rollback window, template
    assert [o["status"] for o in json.loads(result.stdout)["outcomes"]] == ["deleted"]
    document = iam.policy("prune", load(tmp_path / "amibuild.hcl"), account=ACCOUNT_ID)
    assert_policy_matches_calls("prune", document, recorder)


def test_fleet_policy_allows_exactly_what_fleet_calls_and_describes_only(tmp_path: Path, recorder: Recorder,
                                                                        sandbox) -> None:
    from amibuild.sandbox.fleet_seed import FleetSeed, karpenter_tags

    (tmp_path / "amibuild.hcl").write_text(CHANNELS_PIPELINE)
    amis = [build_image("us-west-2", pipeline="iam", variant="ceph", n=n) for n in (1, 2)]
    ssm = boto3.client("ssm", region_name="us-west-2")
    for ami in amis:
        ssm.put_parameter(Name="/amibuild/iam/1.35/ceph/stable/image_id", Value=ami, Type="String",
                          DataType="aws:ec2:image", Overwrite=True)
    sandbox.seed_fleet(FleetSeed(stacks=(("nodes", "/amibuild/iam/1.35/ceph/stable/image_id"),),
                                 nodegroups=(("managed", amis[0]),),
                                 instances=((amis[0], 1, karpenter_tags("default", "ceph")),)))
    autoscaling = boto3.client("autoscaling", region_name="us-west-2")
    autoscaling.create_launch_configuration(LaunchConfigurationName="legacy", ImageId=amis[0], InstanceType="m5.large")

    result = run_cli(tmp_path, "fleet", "--json", env=through(recorder))
    assert result.returncode == 0, result.stderr
    kinds = {r["kind"] for r in json.loads(result.stdout)["consumers"]}
    assert kinds == {"stack", "nodegroup", "auto-scaling-group", "launch-configuration", "instances"}
    document = iam.policy("fleet", load(tmp_path / "amibuild.hcl"), account=ACCOUNT_ID)
    assert_policy_matches_calls("fleet", document, recorder)
    verbs = {a.split(":", 1)[1] for a in iam.actions(document)}
    assert all(v.startswith(("Describe", "List", "Get")) for v in verbs), sorted(verbs)


NODEGROUP_STACK = {
    # the parts of a node group stack rollout reads and changes: an image parameter that follows a
    # channel, a launch template, an Auto Scaling group launching from its latest version
    "AWSTemplateFormatVersion": "2010-09-09",
    "Parameters": {
        "NodeImageIdSSMParam": {"Type": "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>",
                                "Default": "/amibuild/iam/1.35/ceph/recommended/image_id"},
        "NodeInstanceType": {"Type": "String"},
        "Subnet": {"Type": "String"},
    },
    "Resources": {
        "NodeLaunchTemplate": {"Type": "AWS::EC2::LaunchTemplate", "Properties": {"LaunchTemplateData": {
            "ImageId": {"Ref": "NodeImageIdSSMParam"}, "InstanceType": {"Ref": "NodeInstanceType"}}}},
        "NodeGroup": {"Type": "AWS::AutoScaling::AutoScalingGroup", "Properties": {
            "MinSize": "0", "MaxSize": "1", "DesiredCapacity": "0", "VPCZoneIdentifier": [{"Ref": "Subnet"}],
            "LaunchTemplate": {"LaunchTemplateId": {"Ref": "NodeLaunchTemplate"},
                               "Version": {"Fn::GetAtt": ["NodeLaunchTemplate", "LatestVersionNumber"]}}}},
    },
}


def test_rollout_policy_allows_exactly_what_rollout_calls(tmp_path: Path, recorder: Recorder) -> None:
    # a missing task is a failure of this test, not a reason to skip it
    assert "rollout" in task_names(tmp_path), "amibuild has no rollout task: its policy cannot be checked"
    (tmp_path / "amibuild.hcl").write_text(CHANNELS_PIPELINE)
    region = "us-west-2"
    recommended, stable = (build_image(region, pipeline="iam", variant="ceph", n=n) for n in (1, 2))
    ssm = boto3.client("ssm", region_name=region)
    for channel, ami in (("recommended", recommended), ("stable", stable)):
        ssm.put_parameter(Name=f"/amibuild/iam/1.35/ceph/{channel}/image_id", Value=ami, Type="String",
                          DataType="aws:ec2:image")
    ec2 = boto3.client("ec2", region_name=region)
    subnet = ec2.describe_subnets(Filters=[{"Name": "cidr-block", "Values": ["10.42.0.0/24"]}])["Subnets"][0]["SubnetId"]
    boto3.client("cloudformation", region_name=region).create_stack(
        StackName="nodes", TemplateBody=json.dumps(NODEGROUP_STACK),
        Parameters=[{"ParameterKey": "NodeInstanceType", "ParameterValue": "m5.large"},
                    {"ParameterKey": "Subnet", "ParameterValue": subnet}])
    # a managed node group whose launch template names the recommended image
    eks = boto3.client("eks", region_name=region)
    eks.create_cluster(name="prod", roleArn="arn:aws:iam::123456789012:role/eks", resourcesVpcConfig={
        "subnetIds": [subnet]}, accessConfig={"authenticationMode": "API"})
    template = ec2.create_launch_template(LaunchTemplateName="managed", LaunchTemplateData={
        "ImageId": recommended})["LaunchTemplate"]["LaunchTemplateId"]
    eks.create_nodegroup(clusterName="prod", nodegroupName="managed", subnets=[subnet], nodeRole=NODE_ROLE,
                         launchTemplate={"id": template, "version": "1"})

    env = through(recorder)
    to_stable = ("--variant", "ceph", "--channel", "stable")
    dry = run_cli(tmp_path, "rollout", "--stack", "nodes", *to_stable, "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    # the emulator's CloudFormation may leave the group on its first launch template version: the
    # stack's run goes as far as the emulator allows (exit 0 or 1, not a refusal of the set-up, exit 2);
    # the managed node group's runs to the end (amibuild/sandbox/eks_api.py)
    for target in (("--stack", "nodes"), ("--nodegroup", "prod/managed")):
        result = run_cli(tmp_path, "rollout", *target, *to_stable, env=env)
        assert result.returncode in (0, 1) and "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 0, result.stderr
    # the nodes' access entry, as nodegroup-deploy's note suggests for an API-mode cluster
    for _ in range(2):  # the second run finds the entry and reads its type
        entry = run_cli(tmp_path, "aws-auth", "--role-arn", NODE_ROLE, "--access-entry", "--cluster", "prod", env=env)
        assert entry.returncode == 0, entry.stderr
    assert {"cloudformation:ExecuteChangeSet", "eks:UpdateNodegroupVersion", "eks:DescribeUpdate",
            "eks:CreateAccessEntry"} <= recorder.actions()
    document = iam.policy("rollout", load(tmp_path / "amibuild.hcl"), stacks=["nodes"],
                          node_role_arn=NODE_ROLE, account=ACCOUNT_ID)
    assert_policy_matches_calls("rollout", document, recorder)


# ------------------------------------------------------------------------------- the documents


@pytest.fixture
def pipeline(tmp_path: Path) -> Pipeline:
    path = tmp_path / "amibuild.hcl"
    path.write_text(CHANNELS_PIPELINE)
    return load(path)


def test_a_plain_pipeline_gets_no_copy_sharing_encryption_or_subnet_permissions(tmp_path: Path) -> None:
    path = tmp_path / "amibuild.hcl"
    path.write_text('pipeline {\n  name = "lean"\n  regions = ["us-west-2"]\n}\nvariant "a" {\n'
                    '  security_group_id = "sg-0123456789abcdef0"\n}\n')
    allowed = iam.actions(iam.policy("build", load(path)))
    for action in ("ec2:CopyImage", "ec2:ModifySnapshotAttribute", "ec2:DescribeImageAttribute",
                   "ec2:DeregisterImage", "ec2:DeleteSnapshot", "ec2:DescribeSubnets", "ec2:CreateSecurityGroup",
                   "kms:CreateGrant"):
        assert action not in allowed
    assert {"ec2:RunInstances", "ec2:CreateImage", "ec2:CreateKeyPair", "ssm:PutParameter"} <= allowed


def test_kms_is_allowed_on_the_named_key_and_an_alias_becomes_a_condition(tmp_path: Path) -> None:
    path = tmp_path / "amibuild.hcl"
    path.write_text(f'pipeline {{\n  name = "k"\n}}\nvariant "a" {{\n  encrypted = true\n  kms_key_id = "{KMS_KEY}"\n}}\n'
                    'variant "b" {\n  encrypted = true\n  kms_key_id = "alias/ebs-images"\n}\n')
    by_sid = {s["Sid"]: s for s in iam.policy("build", load(path))["Statement"]}
    assert by_sid["KmsForEncryptedImages"]["Resource"] == [KMS_KEY]
    alias = by_sid["KmsForEncryptedImagesByAlias"]
    assert alias["Resource"] == ["arn:aws:kms:*:*:key/*"]
    assert alias["Condition"]["ForAnyValue:StringEquals"] == {"kms:ResourceAliases": ["alias/ebs-images"]}
    assert all(s["Condition"]["StringLike"] == {"kms:ViaService": "ec2.*.amazonaws.com"} for s in (alias,
               by_sid["KmsForEncryptedImages"]))
    # in China EC2's name is ec2.REGION.amazonaws.com.cn: a condition on amazonaws.com would match no call
    china = {s["Sid"]: s for s in iam.policy("build", load(path), partition="aws-cn")["Statement"]}
    assert all(china[sid]["Condition"]["StringLike"] == {"kms:ViaService": "ec2.*.amazonaws.com.cn"}
               for sid in ("KmsForEncryptedImages", "KmsForEncryptedImagesByAlias"))


def test_ssm_is_scoped_to_the_pipelines_channels_and_the_public_eks_parameters(pipeline) -> None:
    document = iam.policy("all", pipeline, stacks=["nodes-a"], node_role_arn=NODE_ROLE, account=ACCOUNT_ID)
    ssm = [s for s in document["Statement"] if any(a.startswith("ssm:") for a in s["Action"])]
    # prune finds the channels by their amibuild:pipeline tag, whatever template named them:
    # DescribeParameters (metadata only) cannot be scoped, the history read is scoped by that tag
    by_tag = {s["Sid"]: s for s in ssm if s["Sid"] in ("ChannelsFind", "ChannelsReadByTag", "ChannelsReadNowByTag")}
    assert (by_tag["ChannelsFind"]["Action"], by_tag["ChannelsFind"]["Resource"]) == (["ssm:DescribeParameters"], "*")
    assert by_tag["ChannelsReadByTag"]["Action"] == ["ssm:GetParameterHistory"]
    # GetParameter: prune reads each tagged channel's current value again right before a deregister
    assert by_tag["ChannelsReadNowByTag"]["Action"] == ["ssm:GetParameter"]
    for sid in ("ChannelsReadByTag", "ChannelsReadNowByTag"):
        assert by_tag[sid]["Condition"] == {"StringEquals": {"ssm:resourceTag/amibuild:pipeline": "iam"}}
    # the boot test's Run Command is on a document and on its own tagged instances, not on parameters
    run_command = {s["Sid"]: s for s in ssm if s["Sid"].startswith("BootTest")}
    assert set(run_command) == {"BootTestSsmRead", "BootTestRunShellScript", "BootTestRunOnTestInstances"}
    assert run_command["BootTestRunOnTestInstances"]["Condition"] == {"Null": {"ssm:resourceTag/amibuild:run-id": "false"}}
    assert {r for s in ssm if s["Sid"] not in by_tag and s["Sid"] not in run_command for r in s["Resource"]} == {
        "arn:aws:ssm:*:123456789012:parameter/amibuild/iam",
        "arn:aws:ssm:*:123456789012:parameter/amibuild/iam/*",
        "arn:aws:ssm:*:123456789012:parameter/amibuild/iam/_leases",
        "arn:aws:ssm:*:123456789012:parameter/amibuild/iam/_leases/*",
        "arn:aws:ssm:*::parameter/aws/service/eks/optimized-ami/*",
    }
    public = next(s for s in ssm if s["Sid"] == "EksPublicParameters")
    assert public["Action"] == ["ssm:GetParameters"]


def test_rollout_names_its_stacks_and_passes_only_the_node_role(pipeline) -> None:
    document = iam.policy("rollout", pipeline, stacks=["nodes-a", "nodes-b"], node_role_arn=NODE_ROLE,
                          partition="aws-cn")
    by_sid = {s["Sid"]: s for s in document["Statement"]}
    assert by_sid["NodegroupStacks"]["Resource"] == ["arn:aws-cn:cloudformation:*:*:stack/nodes-a/*",
                                                     "arn:aws-cn:cloudformation:*:*:stack/nodes-b/*"]
    assert by_sid["PassNodeRole"]["Action"] == ["iam:PassRole"]
    assert by_sid["PassNodeRole"]["Resource"] == [NODE_ROLE]
    assert [s["Sid"] for s in document["Statement"] if "iam:PassRole" in s["Action"]] == ["PassNodeRole"]
    assert not [s for s in document["Statement"] if any(a.startswith("iam:") and a != "iam:PassRole"
                                                         for a in s["Action"])]


def test_prune_may_delete_only_what_carries_the_pipelines_tag(pipeline) -> None:
    deleting = [s for s in iam.policy("prune", pipeline)["Statement"]
                if {"ec2:DeregisterImage", "ec2:DeleteSnapshot"} & set(s["Action"])]
    assert len(deleting) == 1
    assert deleting[0]["Condition"] == {"StringEquals": {"aws:ResourceTag/amibuild:pipeline": "iam"}}


def test_all_is_the_union_of_every_task_with_one_statement_per_sid(pipeline) -> None:
    kwargs = {"stacks": ["nodes"], "node_role_arn": NODE_ROLE}
    everything = iam.policy("all", pipeline, **kwargs)
    sids = [s["Sid"] for s in everything["Statement"]]
    assert len(sids) == len(set(sids))
    assert iam.actions(everything) == set().union(*(iam.actions(iam.policy(t, pipeline, **kwargs)) for t in iam.TASKS))


@pytest.mark.parametrize("task,kwargs,words", [
    ("deploy", {}, "--task 'deploy'"),
    ("rollout", {}, "--stack NAME"),
    ("all", {"stacks": ["nodes"]}, "--node-role-arn"),
    ("rollout", {"stacks": ["bad_name"], "node_role_arn": NODE_ROLE}, "--stack 'bad_name'"),
    ("prune", {"account": "12345"}, "--account"),
])
def test_bad_policy_requests_are_refused(pipeline, task: str, kwargs: dict, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        iam.policy(task, pipeline, **kwargs)
    assert words in str(caught.value)


def test_every_action_exists_according_to_cfn_lint(pipeline) -> None:
    from cfnlint.api import lint

    kms = pipeline.source.parent / "kms.hcl"
    kms.write_text(f'pipeline {{\n  name = "iam"\n}}\nvariant "k" {{\n  encrypted = true\n  kms_key_id = "{KMS_KEY}"\n}}\n')
    for document in (iam.policy("all", pipeline, stacks=["nodes"], node_role_arn=NODE_ROLE, account=ACCOUNT_ID),
                     iam.policy("build", load(kms))):
        template = {"AWSTemplateFormatVersion": "2010-09-09", "Resources": {"Policy": {
            "Type": "AWS::IAM::ManagedPolicy", "Properties": {"PolicyDocument": document}}}}
        assert [str(m) for m in lint(json.dumps(template))] == []


def test_iam_policy_task_prints_the_document(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text(CHANNELS_PIPELINE)
    result = run_cli(tmp_path, "iam-policy", "--task", "prune", "--account", ACCOUNT_ID)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == iam.policy("prune", load(tmp_path / "amibuild.hcl"), account=ACCOUNT_ID)
    rollout = run_cli(tmp_path, "iam-policy", "--stack", "nodes", "--node-role-arn", NODE_ROLE)
    assert rollout.returncode == 0, rollout.stderr
    assert "iam:PassRole" in iam.actions(json.loads(rollout.stdout))
    # issue 30 reversed this test's premise (bare iam-policy was refused): it is now the whole policy
    bare = run_cli(tmp_path, "iam-policy")
    assert bare.returncode == 0, bare.stderr
    assert json.loads(bare.stdout) == iam.policy("all", load(tmp_path / "amibuild.hcl"))
    refused = run_cli(tmp_path, "iam-policy", "--task", "rollout")
    assert refused.returncode == 2
    assert refused.stderr.strip().startswith("amibuild: error: iam-policy --task rollout needs --stack NAME")


STANDIN_NEEDS = ("packer and root are needed: the image's stand-in is an overlay of / in a private mount "
                 "namespace with a build user, which an unprivileged user namespace cannot give (no overlay "
                 "of / there, one uid mapped)")


@pytest.mark.skipif(shutil.which("packer") is None or os.geteuid() != 0,
                    reason=STANDIN_NEEDS)
def test_test_policy_allows_exactly_what_test_ami_calls(tmp_path: Path, sandbox, recorder: Recorder) -> None:
    boto3.client("iam", region_name="us-east-1").create_instance_profile(InstanceProfileName="amibuild-test")
    (tmp_path / "amibuild.hcl").write_text(CHANNELS_PIPELINE.replace(
        '  copy_to    = ["eu-west-1"]\n', '  copy_to    = ["eu-west-1"]\n  test {\n    instance_profile = "amibuild-test"\n  }\n'))
    built = run_cli(tmp_path, "build-ami", "--no-publish", "--json")  # not through the recorder: not this task's
    assert built.returncode == 0, built.stderr
    ami = json.loads(built.stdout)["variants"][0]["amis"]["us-west-2"]
    recorder.forget()
    tested = run_cli(tmp_path, "test-ami", "--variant", "ceph", "--ami", ami, env=through(recorder))
    assert tested.returncode == 0, tested.stderr
    # and what a channel holds (--channel reads it): the same policy
    amis = json.loads(built.stdout)["variants"][0]["amis"]
    published = run_cli(tmp_path, "publish", "--variant", "ceph", "--ami", ",".join(f"{r}={a}" for r, a in amis.items()))
    assert published.returncode == 0, published.stderr
    by_channel = run_cli(tmp_path, "test-ami", "--variant", "ceph", "--channel", "recommended", env=through(recorder))
    assert by_channel.returncode == 0, by_channel.stderr
    document = iam.policy("test", load(tmp_path / "amibuild.hcl"), account=ACCOUNT_ID)
    assert_policy_matches_calls("test", document, recorder)
    statements = {s["Sid"]: s for s in document["Statement"]}
    assert statements["BootTestRunShellScript"]["Resource"] == ["arn:aws:ssm:*::document/AWS-RunShellScript"]
    assert statements["BootTestTerminate"]["Condition"] == {"Null": {"aws:ResourceTag/amibuild:run-id": "false"}}
    assert statements["BootTestPassRole"]["Resource"] == [f"arn:aws:iam::{ACCOUNT_ID}:role/amibuild-test"]
    # the role is assumed to be named like the profile, and the command says so; test { role } names another
    shown = run_cli(tmp_path, "iam-policy", "--task", "test")
    assert shown.returncode == 0 and "assumed to be the one in instance profile amibuild-test" in shown.stderr
    (tmp_path / "amibuild.hcl").write_text((tmp_path / "amibuild.hcl").read_text().replace(
        '    instance_profile = "amibuild-test"\n', '    instance_profile = "amibuild-test"\n    role = "boot-test-node"\n'))
    named = {s["Sid"]: s for s in iam.policy("test", load(tmp_path / "amibuild.hcl"), account=ACCOUNT_ID)["Statement"]}
    assert named["BootTestPassRole"]["Resource"] == [f"arn:aws:iam::{ACCOUNT_ID}:role/boot-test-node"]
    assert "assumed" not in run_cli(tmp_path, "iam-policy", "--task", "test").stderr


def test_the_output_bucket_note_names_the_partition_asked_for(tmp_path: Path) -> None:
    """The note on the test instance's role names the bucket's ARN in --partition, as the policy does."""
    (tmp_path / "amibuild.hcl").write_text(CHANNELS_PIPELINE.replace(
        'regions    = ["us-west-2"]', 'regions    = ["us-west-2"]\n  test {\n    output_bucket = "check-output"\n  }'))
    china = run_cli(tmp_path, "iam-policy", "--task", "test", "--partition", "aws-cn", binary="amibuild")
    assert china.returncode == 0, china.stderr
    bucket = "arn:aws-cn:s3:::check-output/amibuild/boot-test/*"
    assert f"s3:PutObject on {bucket}" in china.stderr and "arn:aws:s3" not in china.stderr
    assert any(bucket in s["Resource"] for s in json.loads(china.stdout)["Statement"])
    default = run_cli(tmp_path, "iam-policy", "--task", "test", binary="amibuild")
    assert "s3:PutObject on arn:aws:s3:::check-output/amibuild/boot-test/*" in default.stderr
