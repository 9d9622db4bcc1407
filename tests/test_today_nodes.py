"""Today's nodes: AL2023 node groups end to end, proxy user data that matches the cluster, and
stacks amibuild did not create (AWS's own amazon-eks-nodegroup.yaml), against the sandbox over HTTP
with the real CLI (and the real packer for the AL2023 build).

The sandbox seeds an EKS cluster (`amibuild.sandbox.SANDBOX_CLUSTER`: public and private endpoint
access, authentication mode API_AND_CONFIG_MAP) whose DescribeCluster answer the user data must match.
"""

from __future__ import annotations

import base64
import shutil
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from amibuild.pipeline import load
from amibuild.channels import publish
from amibuild.handoff.userdata import decode as userdata_decode
from amibuild.sandbox import SANDBOX_CLUSTER, Sandbox, seed_images
from conftest import run_cli, shared_dir

ROOT = Path(__file__).resolve().parent.parent
REGION = "us-west-2"
PROXY = "http://proxy.corp.example:3128"


def network(sandbox: Sandbox) -> list[str]:
    cluster = sandbox.cluster(REGION)
    return ["--vpc-id", cluster["vpc"], "--subnet", ",".join(cluster["subnets"]),
            "--control-plane-sg", cluster["control_plane_sg"]]


def outputs_of(stack: str) -> dict[str, str]:
    raw = boto3.client("cloudformation", region_name=REGION).describe_stacks(StackName=stack)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in raw.get("Outputs", [])}


def parameters_of(stack: str) -> dict[str, str]:
    raw = boto3.client("cloudformation", region_name=REGION).describe_stacks(StackName=stack)["Stacks"][0]
    return {p["ParameterKey"]: p["ParameterValue"] for p in raw["Parameters"]}


def launch_data(stack: str, template_output: str = "NodeLaunchTemplate") -> dict[str, Any]:
    """The LaunchTemplateData of the version the stack's Auto Scaling group uses."""
    asg = boto3.client("autoscaling", region_name=REGION).describe_auto_scaling_groups(
        AutoScalingGroupNames=[outputs_of(stack)["NodeAutoScalingGroup"]])["AutoScalingGroups"][0]
    spec_ = asg["LaunchTemplate"]
    version = boto3.client("ec2", region_name=REGION).describe_launch_template_versions(
        LaunchTemplateId=spec_["LaunchTemplateId"], Versions=[str(spec_["Version"])])["LaunchTemplateVersions"][0]
    return version["LaunchTemplateData"]


def user_data_parts(stack: str) -> list[userdata_decode.Part]:
    return userdata_decode.decode(launch_data(stack)["UserData"].encode(), stack)


def fake_build(variant: str) -> str:
    """An AMI as a build leaves it (an image of an instance with amibuild's tags)."""
    ec2 = boto3.client("ec2", region_name=REGION)
    instance = ec2.run_instances(ImageId=seed_images()[0].image_id, MinCount=1, MaxCount=1, InstanceType="m5.large")
    ami = ec2.create_image(InstanceId=instance["Instances"][0]["InstanceId"],
                           Name=f"amibuild-{variant}-{uuid.uuid4().hex[:8]}")["ImageId"]
    ec2.create_tags(Resources=[ami], Tags=[{"Key": "amibuild:variant", "Value": variant},
                                           {"Key": "amibuild:fingerprint", "Value": uuid.uuid4().hex}])
    return ami


AL2023_PIPELINE = """\
pipeline {
  name    = "today"
  regions = ["us-west-2"]
}

variant "workers" {
  os                 = "al2023"
  kubernetes_version = "1.33"
  extra_packages     = ["ceph-common"]
}
"""


@pytest.mark.skipif(shutil.which("packer") is None, reason="the AL2023 build runs the real packer")
def test_al2023_variant_builds_deploys_and_rolls_out_with_nodeconfig_and_cfn_signal(sandbox, tmp_path) -> None:
    (tmp_path / "amibuild.hcl").write_text(AL2023_PIPELINE)
    built = run_cli(tmp_path, "build-ami")
    assert built.returncode == 0, built.stderr
    promoted = run_cli(tmp_path, "promote", "--variant", "workers", "--from", "recommended", "--to", "stable")
    assert promoted.returncode == 0, promoted.stderr
    channel = "/amibuild/today/1.33/workers/stable/image_id"
    first = boto3.client("ssm", region_name=REGION).get_parameter(Name=channel)["Parameter"]["Value"]

    deployed = run_cli(tmp_path, "nodegroup-deploy", "--stack", "ng-today", "--cluster", SANDBOX_CLUSTER,
                      *network(sandbox), "--variant", "workers", "--channel", "stable")

    assert deployed.returncode == 0, deployed.stderr
    assert "stack ng-today (us-west-2): created (CREATE_COMPLETE)" in deployed.stdout
    # API_AND_CONFIG_MAP: the access entry is the way offered first.
    assert f"next: amibuild aws-auth --stack ng-today --access-entry --cluster {SANDBOX_CLUSTER}" in deployed.stdout
    assert launch_data("ng-today")["ImageId"] == first
    parts = user_data_parts("ng-today")
    assert [p.content_type for p in parts] == ["application/node.eks.aws", "text/x-shellscript"]
    cluster = boto3.client("eks", region_name=REGION).describe_cluster(name=SANDBOX_CLUSTER)["cluster"]
    node_config = yaml.safe_load(parts[0].body)
    assert node_config["kind"] == "NodeConfig"
    assert node_config["spec"]["cluster"] == {
        "name": SANDBOX_CLUSTER,
        "apiServerEndpoint": cluster["endpoint"].rstrip("/"),
        "certificateAuthority": cluster["certificateAuthority"]["data"],
        "cidr": cluster["kubernetesNetworkConfig"]["serviceIpv4Cidr"],
    }
    assert "--stack ng-today" not in parts[1].body  # quoted values, not flags glued together
    assert "stack=ng-today\nresource=NodeGroup\nregion=us-west-2\n" in parts[1].body
    assert "systemctl --no-block start amibuild-cfn-signal.service" in parts[1].body

    # AWS publishes a newer AL2023 image: the next build makes a new AMI, promoted, then rolled out.
    sandbox.release("1.33", "al2023", "x86_64")
    rebuilt = run_cli(tmp_path, "build-ami")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert run_cli(tmp_path, "promote", "--variant", "workers", "--from", "recommended", "--to", "stable").returncode == 0
    second = boto3.client("ssm", region_name=REGION).get_parameter(Name=channel)["Parameter"]["Value"]
    assert second != first

    rolled = run_cli(tmp_path, "rollout", "--stack", "ng-today", "--variant", "workers", "--channel", "stable")

    assert rolled.returncode == 0, rolled.stderr
    assert launch_data("ng-today")["ImageId"] == second
    # The roll kept the AL2023 user data.
    assert [p.content_type for p in user_data_parts("ng-today")] == ["application/node.eks.aws", "text/x-shellscript"]


CEPH_PIPELINE = """\
pipeline {
  name    = "eks-workers"
  regions = ["us-west-2"]
}

variant "ceph" {
  os                 = "al2"
  kubernetes_version = "1.30"
  extra_packages     = ["ceph-common"]
}
"""


def ceph_channel(tmp_path: Path, channel: str = "recommended") -> tuple[str, str]:
    """A ceph AMI published to a channel; (AMI, parameter name)."""
    (tmp_path / "amibuild.hcl").write_text(CEPH_PIPELINE)
    pipeline = load(tmp_path / "amibuild.hcl")
    ami = fake_build("ceph")
    publish.publish_variant(_aws(), pipeline=pipeline, variant=pipeline.variants[0], amis={REGION: ami},
                            channel=channel)
    return ami, publish.parameter_name(pipeline, pipeline.variants[0], channel)


def _aws():
    from amibuild.aws import Aws

    return Aws(region=REGION)


def test_stack_from_the_official_template_yaml_rolls_out_and_nodegroup_deploy_refuses_it(sandbox, tmp_path) -> None:
    shared = shared_dir("upstream")
    if shared is None or not (shared / "upstream" / "amazon-eks-nodegroup.yaml").is_file():
        pytest.skip("the official node group template (shared/upstream/amazon-eks-nodegroup.yaml) is not here; "
                    "set AMIBUILD_SHARED to the folder holding upstream/")
    template = (shared / "upstream" / "amazon-eks-nodegroup.yaml").read_text()
    cluster = sandbox.cluster(REGION)
    cfn = boto3.client("cloudformation", region_name=REGION)
    # As users have it: YAML with short-form tags, the default 1.22 AL2 parameter left alone.
    cfn.create_stack(StackName="official", TemplateBody=template, Capabilities=["CAPABILITY_IAM"], Parameters=[
        {"ParameterKey": "ClusterName", "ParameterValue": SANDBOX_CLUSTER},
        {"ParameterKey": "ClusterControlPlaneSecurityGroup", "ParameterValue": cluster["control_plane_sg"]},
        {"ParameterKey": "NodeGroupName", "ParameterValue": "official"},
        {"ParameterKey": "KeyName", "ParameterValue": "ops"},
        {"ParameterKey": "VpcId", "ParameterValue": cluster["vpc"]},
        {"ParameterKey": "Subnets", "ParameterValue": ",".join(cluster["subnets"])},
        {"ParameterKey": "BootstrapArguments", "ParameterValue": "--use-max-pods false"},
    ])
    assert cfn.describe_stacks(StackName="official")["Stacks"][0]["StackStatus"] == "CREATE_COMPLETE"
    before = cfn.get_template(StackName="official")["TemplateBody"]
    ami, _ = ceph_channel(tmp_path)

    rolled = run_cli(tmp_path, "rollout", "--stack", "official", "--variant", "ceph", "--channel", "recommended")

    assert rolled.returncode == 0, rolled.stderr
    assert launch_data("official")["ImageId"] == ami
    assert parameters_of("official")["BootstrapArguments"] == "--use-max-pods false"

    refused = run_cli(tmp_path, "nodegroup-deploy", "--stack", "official", "--parameter", "NodeInstanceType=m5.large")

    assert refused.returncode == 2, refused.stderr
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith("amibuild: error: stack official in us-west-2 was not made from amibuild's node group")
    assert "amibuild rollout --stack official" in last
    assert cfn.get_template(StackName="official")["TemplateBody"] == before
    assert parameters_of("official")["NodeInstanceType"] != "m5.large"


def test_proxy_update_keeps_bootstrap_arguments_and_says_what_changed(sandbox, tmp_path) -> None:
    ceph_channel(tmp_path)
    created = run_cli(tmp_path, "nodegroup-deploy", "--stack", "ng-proxy", "--cluster", SANDBOX_CLUSTER,
                     *network(sandbox), "--variant", "ceph", "--proxy", PROXY,
                     "--parameter", "BootstrapArguments=--use-max-pods false")
    assert created.returncode == 0, created.stderr

    updated = run_cli(tmp_path, "nodegroup-deploy", "--stack", "ng-proxy", "--variant", "ceph", "--proxy", PROXY,
                     "--parameter", "NodeInstanceType=m5.large")

    assert updated.returncode == 0, updated.stderr
    assert "changed NodeInstanceType: 't3.medium' -> 'm5.large'" in updated.stdout
    assert "keeping BootstrapArguments" in updated.stderr + updated.stdout
    script = next(p.body for p in user_data_parts("ng-proxy") if p.content_type == "text/x-shellscript")
    assert "--use-max-pods false" in script
    assert parameters_of("ng-proxy")["BootstrapArguments"] == "--use-max-pods false"


def test_a_dry_run_of_a_deploy_that_changes_nothing_says_unchanged_and_one_that_changes_the_template_says_so(
        sandbox, tmp_path) -> None:
    ceph_channel(tmp_path)
    args = ("nodegroup-deploy", "--stack", "ng-same", "--cluster", SANDBOX_CLUSTER, *network(sandbox), "--variant", "ceph")
    assert run_cli(tmp_path, *args).returncode == 0

    planned = run_cli(tmp_path, *args, "--dry-run")
    done = run_cli(tmp_path, *args)

    assert planned.returncode == 0 and done.returncode == 0, planned.stderr + done.stderr
    assert "stack ng-same (us-west-2): unchanged (CREATE_COMPLETE; dry run: nothing sent)" in planned.stdout
    assert "stack ng-same (us-west-2): unchanged (" in done.stdout
    moved = run_cli(tmp_path, *args, "--os", "al2023", "--dry-run")
    assert "would update" in moved.stdout and "would set the template:" in moved.stdout, moved.stdout
    assert "stack ng-same (us-west-2): updated (" in run_cli(tmp_path, *args, "--os", "al2023").stdout


def _no_proxy_of(stack: str) -> str:
    hook = next(p.body for p in user_data_parts(stack) if p.content_type == "text/cloud-boothook")
    return next(line for line in hook.splitlines() if line.startswith("no_proxy_rest="))


def test_no_proxy_holds_the_cluster_endpoint_only_when_describe_cluster_says_private(sandbox, tmp_path) -> None:
    ceph_channel(tmp_path)
    cluster = sandbox.cluster(REGION)
    boto3.client("eks", region_name=REGION).create_cluster(
        name="public-only", roleArn="arn:aws:iam::123456789012:role/eks", resourcesVpcConfig={
            "subnetIds": cluster["subnets"], "securityGroupIds": [cluster["control_plane_sg"]],
            "endpointPublicAccess": True, "endpointPrivateAccess": False})

    for stack, name in (("ng-private", SANDBOX_CLUSTER), ("ng-public", "public-only")):
        result = run_cli(tmp_path, "nodegroup-deploy", "--stack", stack, "--cluster", name, *network(sandbox),
                        "--variant", "ceph", "--proxy", PROXY, "--no-wait")
        assert result.returncode == 0, result.stderr

    assert "us-west-2.eks.amazonaws.com," in _no_proxy_of("ng-private")
    assert "us-west-2.eks.amazonaws.com," not in _no_proxy_of("ng-public")
    assert "eks.us-west-2.amazonaws.com" in _no_proxy_of("ng-public")  # the EKS API, not the cluster


def test_al2023_deploy_without_a_readable_cluster_asks_for_the_flags_and_creates_nothing(sandbox, tmp_path) -> None:
    ceph_channel(tmp_path)

    refused = run_cli(tmp_path, "nodegroup-deploy", "--stack", "ng-x", "--cluster", "nowhere", *network(sandbox),
                     "--os", "al2023", "--parameter", f"NodeImageId={seed_images()[0].image_id}")

    assert refused.returncode == 2
    assert "give --api-server-endpoint, --certificate-authority and --service-cidr" in refused.stderr
    assert not boto3.client("cloudformation", region_name=REGION).list_stacks()["StackSummaries"]


def test_sandbox_cluster_names_the_seeded_cluster_and_its_network(sandbox) -> None:
    from amibuild.sandbox import sandbox_cluster

    cluster = sandbox_cluster(sandbox.endpoint, REGION)
    described = boto3.client("eks", region_name=REGION).describe_cluster(name=SANDBOX_CLUSTER)["cluster"]
    assert cluster["vpc"] == described["resourcesVpcConfig"]["vpcId"]
    assert len(cluster["subnets"]) == 2
    ec2 = boto3.client("ec2", region_name=REGION)
    assert ec2.describe_security_groups(GroupIds=[cluster["control_plane_sg"]])["SecurityGroups"][0]["VpcId"] == \
        cluster["vpc"]
    assert described["resourcesVpcConfig"]["endpointPrivateAccess"] is True
    assert described["accessConfig"]["authenticationMode"] == "API_AND_CONFIG_MAP"
    assert base64.b64decode(described["certificateAuthority"]["data"]).startswith(b"-----BEGIN CERTIFICATE-----")
