"""The local emulator: what it seeds, reset, release, a real packer build against it, lifecycle."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import boto3
import botocore.exceptions
import pytest

from amibuild.sandbox import (
    EKS_AMI_OWNER,
    KUBERNETES_VERSIONS,
    SANDBOX_VPC_NAME,
    SEED_REGIONS,
    Sandbox,
    SandboxError,
    recommended_parameter,
    safety_env,
    seed_images,
)

KINDS = [  # (os, arch, name pattern)
    ("al2", "x86_64", r"amazon-eks-node-1\.30-v\d{8}"),
    ("al2", "arm64", r"amazon-eks-arm64-node-1\.30-v\d{8}"),
    ("al2023", "x86_64", r"amazon-eks-node-al2023-x86_64-standard-1\.30-v\d{8}"),
    ("al2023", "arm64", r"amazon-eks-node-al2023-arm64-standard-1\.30-v\d{8}"),
]


def recommended_image_id(region: str, os_family: str, arch: str, k8s: str = "1.30") -> str:
    ssm = boto3.client("ssm", region_name=region)
    return ssm.get_parameter(Name=recommended_parameter(k8s, os_family, arch))["Parameter"]["Value"]


def describe_image(region: str, image_id: str) -> dict:
    ec2 = boto3.client("ec2", region_name=region)
    (image,) = ec2.describe_images(ImageIds=[image_id])["Images"]
    return image


@pytest.mark.parametrize("region", ["us-west-2", "ap-southeast-2"])
@pytest.mark.parametrize(("os_family", "arch", "name_pattern"), KINDS)
def test_recommended_parameter_resolves_to_newest_eks_image(
    sandbox, region, os_family, arch, name_pattern
):
    image_id = recommended_image_id(region, os_family, arch)
    image = describe_image(region, image_id)

    assert re.fullmatch(r"ami-[0-9a-f]{17}", image_id)
    assert re.fullmatch(name_pattern, image["Name"])
    assert image["Architecture"] == arch
    assert image["OwnerId"] == EKS_AMI_OWNER
    assert (image["RootDeviceType"], image["State"], image["Public"]) == ("ebs", "available", True)
    siblings = boto3.client("ec2", region_name=region).describe_images(
        Owners=[EKS_AMI_OWNER], Filters=[{"Name": "name", "Values": [image["Name"][:-9] + "*"]}]
    )["Images"]
    assert len(siblings) > 1
    assert image["CreationDate"] == max(s["CreationDate"] for s in siblings)
    image_name = recommended_parameter("1.30", os_family, arch).replace("/image_id", "/image_name")
    ssm = boto3.client("ssm", region_name=region)
    assert ssm.get_parameter(Name=image_name)["Parameter"]["Value"] == image["Name"]


def test_every_seeded_kubernetes_version_has_a_recommended_image(sandbox):
    ssm = boto3.client("ssm")
    names = [
        recommended_parameter(k8s, os_family, arch)
        for os_family, versions in KUBERNETES_VERSIONS.items()
        for k8s in versions
        for arch in ("x86_64", "arm64")
    ]
    assert {"1.28", "1.32"} <= set(KUBERNETES_VERSIONS["al2"])
    assert {"1.28", "1.33"} <= set(KUBERNETES_VERSIONS["al2023"])
    values = set()
    for start in range(0, len(names), 10):
        found = ssm.get_parameters(Names=names[start : start + 10])
        assert found["InvalidParameters"] == []
        values |= {p["Value"] for p in found["Parameters"]}
    images = boto3.client("ec2").describe_images(ImageIds=sorted(values))["Images"]
    assert len(images) == len(names)


def test_seeded_images_have_the_same_ids_in_every_seed_region(sandbox):
    image_id = recommended_image_id("us-west-2", "al2", "x86_64")
    for region in SEED_REGIONS:
        assert recommended_image_id(region, "al2", "x86_64") == image_id
        assert describe_image(region, image_id)["Name"] == "amazon-eks-node-1.30-v20240101"


def test_sandbox_vpc_with_two_subnets_exists_beside_the_default_vpc(sandbox):
    ec2 = boto3.client("ec2", region_name="eu-central-1")
    vpcs = ec2.describe_vpcs(Filters=[{"Name": "tag:Name", "Values": [SANDBOX_VPC_NAME]}])["Vpcs"]
    assert len(vpcs) == 1
    in_vpc = [{"Name": "vpc-id", "Values": [vpcs[0]["VpcId"]]}]
    subnets = ec2.describe_subnets(Filters=in_vpc)["Subnets"]
    assert sorted(s["AvailabilityZone"] for s in subnets) == ["eu-central-1a", "eu-central-1b"]
    assert ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"]


def test_reset_removes_what_a_test_created_and_keeps_the_seed(sandbox):
    ssm, ec2 = boto3.client("ssm"), boto3.client("ec2")
    seeded = recommended_image_id("us-west-2", "al2", "x86_64")
    mine = "/amibuild/test/ami"
    ssm.put_parameter(Name=mine, Value=seeded, Type="String", DataType="aws:ec2:image")
    copy = ec2.copy_image(SourceImageId=seeded, SourceRegion="us-west-2", Name="mine")["ImageId"]

    sandbox.reset()

    assert ssm.get_parameters(Names=[mine])["InvalidParameters"] == [mine]
    assert ec2.describe_images(Filters=[{"Name": "image-id", "Values": [copy]}])["Images"] == []
    assert recommended_image_id("us-west-2", "al2", "x86_64") == seeded
    assert describe_image("us-west-2", seeded)["State"] == "available"
    vpcs = ec2.describe_vpcs(Filters=[{"Name": "tag:Name", "Values": [SANDBOX_VPC_NAME]}])["Vpcs"]
    assert len(vpcs) == 1


def test_moto_api_reset_also_restores_the_seed(sandbox):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(f"{sandbox.endpoint}/moto-api/reset", data=b"", method="POST")
    opener.open(request).close()

    assert describe_image("us-west-2", recommended_image_id("us-west-2", "al2023", "arm64"))


def test_release_moves_the_recommended_parameter_to_a_newer_image(sandbox):
    before = describe_image("eu-west-1", recommended_image_id("eu-west-1", "al2023", "x86_64"))

    release = sandbox.release("1.30", "al2023", "x86_64")

    assert release.name == "amazon-eks-node-al2023-x86_64-standard-1.30-v20240115"
    assert re.fullmatch(r"ami-[0-9a-f]{17}", release.image_id)
    for region in ("eu-west-1", "us-west-2"):
        assert recommended_image_id(region, "al2023", "x86_64") == release.image_id
        after = describe_image(region, release.image_id)
        assert after["CreationDate"] > before["CreationDate"]
        assert (after["Architecture"], after["RootDeviceType"]) == ("x86_64", "ebs")
    ssm = boto3.client("ssm")
    history = ssm.get_parameter_history(Name=release.parameter)["Parameters"]
    assert [p["Value"] for p in history] == [before["ImageId"], release.image_id]
    untouched = recommended_image_id("us-west-2", "al2", "x86_64")
    assert untouched != release.image_id

    second = sandbox.release("1.30", "al2023", "x86_64")
    assert second.name.endswith("-v20240129")

    sandbox.reset()
    assert recommended_image_id("eu-west-1", "al2023", "x86_64") == before["ImageId"]


def test_release_refuses_unknown_kinds_and_older_dates(sandbox):
    with pytest.raises(SandboxError, match="unknown os"):
        sandbox.release("1.30", "bottlerocket", "x86_64")
    with pytest.raises(SandboxError, match="newer than 20240101"):
        sandbox.release("1.30", "al2", "x86_64", release="20231215")


@pytest.mark.skipif(shutil.which("packer") is None, reason="packer is not installed")
def test_packer_builds_from_a_seeded_image(sandbox, tmp_path):
    source_ami = recommended_image_id("us-west-2", "al2", "x86_64")
    (tmp_path / "build.pkr.hcl").write_text(
        f"""
source "amazon-ebs" "sandbox" {{
  region                 = "us-west-2"
  source_ami             = "{source_ami}"
  instance_type          = "t3.micro"
  ami_name               = "amibuild-sandbox-check"
  communicator           = "none"
  skip_region_validation = true
  custom_endpoint_ec2    = "{sandbox.endpoint}"
}}

build {{
  sources = ["source.amazon-ebs.sandbox"]

  post-processor "manifest" {{
    output = "manifest.json"
  }}
}}
"""
    )
    result = subprocess.run(
        ["packer", "build", "-color=false", "build.pkr.hcl"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    region, image_id = manifest["builds"][-1]["artifact_id"].split(":")
    image = describe_image(region, image_id)
    assert image["Name"] == "amibuild-sandbox-check"


def test_stop_ends_the_child_process_and_is_idempotent():
    sandbox = Sandbox().start()
    pid = sandbox.pid

    sandbox.stop()
    sandbox.stop()

    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert not sandbox.running
    with pytest.raises(SandboxError):
        sandbox.reset()


def test_start_fails_with_the_emulator_stderr_when_the_port_is_taken():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        sandbox = Sandbox(port=taken.getsockname()[1])
        with pytest.raises(SandboxError, match="(?s)exited.*Address already in use"):
            sandbox.start()
    assert not sandbox.running


def test_env_points_at_the_sandbox_and_holds_the_safety_variables(sandbox_server):
    env = sandbox_server.env()

    assert env["AWS_ENDPOINT_URL"] == sandbox_server.endpoint
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", sandbox_server.endpoint)
    assert env["AWS_ACCESS_KEY_ID"] == env["AWS_SECRET_ACCESS_KEY"] == "testing"
    assert env["AWS_DEFAULT_REGION"] == env["AWS_REGION"] == "us-west-2"
    assert env["AWS_EC2_METADATA_DISABLED"] == "true"
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        assert env[name] == "http://127.0.0.1:9"
    assert env["NO_PROXY"] == env["no_proxy"] == "127.0.0.1,localhost"
    assert safety_env().items() <= env.items()


def test_isolated_env_leaves_no_credentials_and_sets_the_tripwire():
    assert boto3.session.Session().get_credentials() is None
    assert os.environ["HTTPS_PROXY"] == "http://127.0.0.1:9"
    assert not Path(os.environ["AWS_CONFIG_FILE"]).exists()
    assert "AWS_ENDPOINT_URL" not in os.environ


def test_module_run_prints_exports_and_stops_cleanly_on_sigterm():
    repo = Path(__file__).resolve().parent.parent
    # -X faulthandler: should it not stop, SIGABRT makes it print where each of its threads is
    proc = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-m", "amibuild.sandbox"],
        cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("# sandbox ready at"):
                break
        proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            out, err = proc.communicate(timeout=15)
            pytest.fail(f"still running 15 s after SIGTERM; where it was:\n{err[-8000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()

    assert proc.returncode == 0, err
    assert "Traceback" not in err
    exports = dict(re.findall(r"^export (\w+)=(.*)$", "".join(lines), re.M))
    assert re.fullmatch(r"'?http://127\.0\.0\.1:\d+'?", exports["AWS_ENDPOINT_URL"])
    assert exports["HTTPS_PROXY"] == "http://127.0.0.1:9"
    assert exports["NO_PROXY"] == "127.0.0.1,localhost"
    # the proxy lines are said to break pip and git in that shell, with the line that undoes them
    text = "".join(lines)
    assert "tripwire, http://127.0.0.1:9" in text and "breaks pip, git" in text
    assert "#   unset HTTPS_PROXY HTTP_PROXY https_proxy http_proxy NO_PROXY no_proxy\n" in text
    assert text.index("export NO_PROXY") < text.index("# note: HTTPS_PROXY")


def test_a_stack_update_resolves_a_moved_ssm_parameter_again(sandbox):
    """AWS resolves SSM-typed stack parameters again on every update; the sandbox does too."""
    cfn = boto3.client("cloudformation", region_name="us-west-2")
    ssm = boto3.client("ssm", region_name="us-west-2")
    images = [i.image_id for i in seed_images() if i.os == "al2" and i.arch == "x86_64"][:2]
    ssm.put_parameter(Name="/t/image", Value=images[0], Type="String", DataType="aws:ec2:image")
    template = {
        "Parameters": {"Image": {"Type": "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>", "Default": "/t/image"}},
        "Resources": {"Template": {"Type": "AWS::EC2::LaunchTemplate", "Properties": {
            "LaunchTemplateData": {"ImageId": {"Ref": "Image"}, "InstanceType": "t3.micro"}}}},
        "Outputs": {"Id": {"Value": {"Ref": "Template"}}},
    }
    body = json.dumps(template)
    cfn.create_stack(StackName="s", TemplateBody=body, Parameters=[{"ParameterKey": "Image", "ParameterValue": "/t/image"}])
    lt = cfn.describe_stacks(StackName="s")["Stacks"][0]["Outputs"][0]["OutputValue"]
    unchanged = [{"ParameterKey": "Image", "UsePreviousValue": True}]
    with pytest.raises(botocore.exceptions.ClientError, match="No updates are to be performed"):
        cfn.update_stack(StackName="s", TemplateBody=body, Parameters=unchanged)

    ssm.put_parameter(Name="/t/image", Value=images[1], Type="String", DataType="aws:ec2:image", Overwrite=True)
    cfn.update_stack(StackName="s", TemplateBody=body, Parameters=unchanged)

    ec2 = boto3.client("ec2", region_name="us-west-2")
    versions = ec2.describe_launch_template_versions(LaunchTemplateId=lt)["LaunchTemplateVersions"]
    assert sorted((v["VersionNumber"], v["LaunchTemplateData"]["ImageId"]) for v in versions) == [
        (1, images[0]), (2, images[1])]
    stack_parameter = cfn.describe_stacks(StackName="s")["Stacks"][0]["Parameters"][0]
    assert (stack_parameter["ParameterValue"], stack_parameter["ResolvedValue"]) == ("/t/image", images[1])


def test_describe_parameters_pages_by_max_results_as_aws_does(sandbox):
    """moto pages DescribeParameters by 10 whatever MaxResults says; the sandbox honours it (1-50)."""
    ssm = boto3.client("ssm", region_name="eu-central-1")
    for index in range(23):
        ssm.put_parameter(Name=f"/paging-test/p{index:02d}", Value="x", Type="String")
    scope = [{"Key": "Name", "Option": "BeginsWith", "Values": ["/paging-test/"]}]

    first = ssm.describe_parameters(ParameterFilters=scope, MaxResults=20)
    assert len(first["Parameters"]) == 20 and "NextToken" in first
    rest = ssm.describe_parameters(ParameterFilters=scope, MaxResults=20, NextToken=first["NextToken"])
    assert len(rest["Parameters"]) == 3 and "NextToken" not in rest
    names = [p["Name"] for p in first["Parameters"] + rest["Parameters"]]
    assert sorted(names) == [f"/paging-test/p{index:02d}" for index in range(23)]
    assert len(ssm.describe_parameters(ParameterFilters=scope)["Parameters"]) == 10  # AWS's default page
    pages = ssm.get_paginator("describe_parameters").paginate(ParameterFilters=scope, PaginationConfig={"PageSize": 50})
    assert [len(page["Parameters"]) for page in pages] == [23]
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        ssm.describe_parameters(ParameterFilters=scope, MaxResults=51)
    assert refused.value.response["Error"]["Code"] == "ValidationException"


def test_an_overwrite_never_changes_a_parameter_to_or_from_the_image_data_type(sandbox):
    """SSM refuses it ("You can't change a parameter to or from" aws:ec2:image); moto 5.2.5 took it."""
    ssm = boto3.client("ssm", region_name="eu-central-1")
    ssm.put_parameter(Name="/typed/text", Value="ami-0123456789abcdef0", Type="String", DataType="text")
    ssm.put_parameter(Name="/typed/image", Value="ami-0123456789abcdef0", Type="String", DataType="aws:ec2:image")
    for name, other in (("/typed/text", "aws:ec2:image"), ("/typed/image", "text")):
        with pytest.raises(botocore.exceptions.ClientError) as refused:
            ssm.put_parameter(Name=name, Value="ami-0fedcba9876543210", Type="String", DataType=other, Overwrite=True)
        assert refused.value.response["Error"]["Code"] == "ValidationException"
        assert ssm.get_parameter(Name=name)["Parameter"]["Version"] == 1
    ssm.put_parameter(Name="/typed/image", Value="ami-0fedcba9876543210", Type="String", DataType="aws:ec2:image",
                      Overwrite=True)  # the same data type: a new version, as before
