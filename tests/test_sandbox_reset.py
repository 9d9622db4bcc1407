"""The emulator's reset redoes only the regions clients wrote to, and leaves them as a full reset would.

`touched.scope` is a pure function over a request: tested as a table. Against the session's
emulator: what a reset after reads, after writes to one region, after a write to a
partition-wide service (IAM) and after a release puts back, compared with the seed itself.
"""

from __future__ import annotations

import io
from typing import Any

import boto3
import pytest

from amibuild.sandbox import EKS_AMI_OWNER, SANDBOX_VPC_NAME, SEED_REGIONS
from amibuild.sandbox.eks_cluster import SANDBOX_CLUSTER
from amibuild.sandbox.touched import EVERYTHING, Touched, scope
from amibuild.sandbox.upstream import AMAZON_LINUX_OWNER


def signed(region: str, service: str) -> str:
    return (f"AWS4-HMAC-SHA256 Credential=testing/20261201/{region}/{service}/aws4_request, "
            "SignedHeaders=host;x-amz-date, Signature=0123abcd")


def environ(method: str = "POST", *, auth: str = "", target: str = "", body: bytes = b"", query: str = "",
            form: bool = False) -> dict[str, Any]:
    env = {"REQUEST_METHOD": method, "PATH_INFO": "/", "QUERY_STRING": query, "wsgi.input": io.BytesIO(body),
           "CONTENT_LENGTH": str(len(body)) if body else ""}
    if auth:
        env["HTTP_AUTHORIZATION"] = auth
    if target:
        env["HTTP_X_AMZ_TARGET"] = target
    if form:
        env["CONTENT_TYPE"] = "application/x-www-form-urlencoded; charset=utf-8"
    return env


@pytest.mark.parametrize("request_environ, want", [
    (environ(auth=signed("eu-west-1", "ssm"), target="AmazonSSM.PutParameter"), "eu-west-1"),
    (environ(auth=signed("eu-west-1", "ssm"), target="AmazonSSM.GetParametersByPath"), None),
    (environ(auth=signed("us-east-1", "ssm"), target="AmazonSSM.DeleteParameter"), "us-east-1"),
    (environ(auth=signed("us-west-2", "ec2"), body=b"Action=DescribeImages&Version=2016-11-15", form=True), None),
    (environ(auth=signed("us-west-2", "ec2"), body=b"Action=RunInstances&Version=2016-11-15", form=True),
     "us-west-2"),
    (environ(auth=signed("eu-west-1", "ec2"), body=b"Action=CopyImage&SourceRegion=us-west-2", form=True),
     "eu-west-1"),
    (environ("GET", auth=signed("us-west-2", "ec2"), query="Action=DescribeVpcs"), None),
    (environ(auth=signed("us-west-2", "cloudformation"), body=b"Action=CreateStack&StackName=s", form=True),
     "us-west-2"),
    (environ("GET", auth=signed("us-west-2", "eks")), None),
    (environ("POST", auth=signed("us-west-2", "eks")), "us-west-2"),
    (environ("DELETE", auth=signed("ap-southeast-2", "eks")), "ap-southeast-2"),
    (environ(auth=signed("us-east-1", "iam"), body=b"Action=CreateRole&RoleName=r", form=True), EVERYTHING),
    (environ("PUT", auth=signed("us-west-2", "s3")), EVERYTHING),
    (environ("PUT", query="X-Amz-Credential=testing%2F20261201%2Fus-west-2%2Fs3%2Faws4_request"), EVERYTHING),
    (environ(body=b"Action=RunInstances", form=True), EVERYTHING),  # not signed: no region to go by
    (environ("GET"), None),
], ids=["ssm-put", "ssm-get", "ssm-delete", "ec2-describe", "ec2-run", "ec2-copy-into", "ec2-get-describe",
        "cfn-create", "eks-get", "eks-post", "eks-delete", "iam", "s3", "s3-presigned", "unsigned-write",
        "unsigned-get"])
def test_scope_of_a_request(request_environ: dict[str, Any], want: str | None) -> None:
    assert scope(request_environ) == want


def test_scope_puts_a_form_body_back_for_the_application() -> None:
    body = b"Action=CreateTags&ResourceId.1=i-1&Tag.1.Key=k"
    env = environ(auth=signed("us-west-2", "ec2"), body=body, form=True)
    assert scope(env) == "us-west-2"
    assert env["wsgi.input"].read(int(env["CONTENT_LENGTH"])) == body


def test_touched_collects_until_taken() -> None:
    touched = Touched()
    touched.note(environ(auth=signed("eu-west-1", "ssm"), target="AmazonSSM.PutParameter"))
    touched.note(environ(auth=signed("us-west-2", "ssm"), target="AmazonSSM.GetParameter"))
    touched.add("us-east-1")
    assert touched.take() == {"eu-west-1", "us-east-1"}
    assert touched.take() == set()


# ------------------------------------------------------------------------------- against the emulator


def seeded_state(region: str) -> dict[str, Any]:
    """What the seed puts in a region, without the ids a reseed draws afresh."""
    ec2 = boto3.client("ec2", region_name=region)
    images = sorted(i["Name"] for i in ec2.describe_images(Owners=[EKS_AMI_OWNER, AMAZON_LINUX_OWNER])["Images"])
    vpcs = ec2.describe_vpcs()["Vpcs"]
    named = [v for v in vpcs if {"Key": "Name", "Value": SANDBOX_VPC_NAME} in v.get("Tags", [])]
    subnets = sorted(s["CidrBlock"] for s in ec2.describe_subnets(
        Filters=[{"Name": "vpc-id", "Values": [v["VpcId"] for v in named]}])["Subnets"])
    groups = sorted(g["GroupName"] for g in ec2.describe_security_groups()["SecurityGroups"])
    pages = boto3.client("ssm", region_name=region).get_paginator("get_parameters_by_path").paginate(
        Path="/aws/service/eks", Recursive=True)
    parameters = sorted((p["Name"], p["Value"]) for page in pages for p in page["Parameters"])
    clusters = boto3.client("eks", region_name=region).list_clusters()["clusters"]
    return {"images": images, "vpcs": len(vpcs), "named": len(named), "subnets": subnets, "groups": groups,
            "parameters": parameters, "clusters": clusters, "our": ours(region)}


def ours(region: str) -> list[str]:
    pages = boto3.client("ssm", region_name=region).get_paginator("get_parameters_by_path").paginate(
        Path="/amibuild", Recursive=True)
    return sorted(p["Name"] for page in pages for p in page["Parameters"])


def sandbox_vpc(region: str) -> str:
    ec2 = boto3.client("ec2", region_name=region)
    (vpc,) = ec2.describe_vpcs(Filters=[{"Name": "tag:Name", "Values": [SANDBOX_VPC_NAME]}])["Vpcs"]
    return vpc["VpcId"]


def write_in(region: str) -> None:
    boto3.client("ssm", region_name=region).put_parameter(
        Name="/amibuild/t/1.35/ceph/stable/image_id", Value="ami-0123456789abcdef0", Type="String",
        DataType="text")
    ec2 = boto3.client("ec2", region_name=region)
    ec2.create_vpc(CidrBlock="10.99.0.0/16")
    ec2.create_security_group(GroupName="left-behind", Description="by a test")


def test_a_reset_after_reads_only_resets_nothing(sandbox) -> None:
    before = {region: sandbox_vpc(region) for region in SEED_REGIONS}
    for region in SEED_REGIONS:
        seeded_state(region)
    assert sandbox.reset() == []
    assert {region: sandbox_vpc(region) for region in SEED_REGIONS} == before


def test_a_reset_after_writes_in_one_region_redoes_that_region_as_seeded(sandbox) -> None:
    seed = seeded_state("eu-west-1")
    assert seed["named"] == 1 and seed["clusters"] == [SANDBOX_CLUSTER] and seed["parameters"] and seed["images"]
    untouched = sandbox_vpc("us-west-2")
    written = sandbox_vpc("eu-west-1")
    write_in("eu-west-1")
    assert seeded_state("eu-west-1") != seed  # the control: the writes are there

    assert sandbox.reset() == ["eu-west-1"]
    assert seeded_state("eu-west-1") == seed
    assert sandbox_vpc("eu-west-1") != written  # seeded again
    assert sandbox_vpc("us-west-2") == untouched  # left as it was
    assert sandbox.cluster("eu-west-1")["vpc"] == sandbox_vpc("eu-west-1")


def test_a_partial_reset_gives_the_state_a_full_reset_gives(sandbox) -> None:
    write_in("ap-southeast-2")
    boto3.client("iam").create_role(RoleName="r", AssumeRolePolicyDocument="{}")  # partition-wide
    assert sandbox.reset() == sorted(SEED_REGIONS)
    fully = seeded_state("ap-southeast-2")
    write_in("ap-southeast-2")
    assert sandbox.reset() == ["ap-southeast-2"]
    assert seeded_state("ap-southeast-2") == fully
    assert boto3.client("iam").list_roles()["Roles"] == []


def test_a_release_is_taken_back_by_the_next_reset_everywhere(sandbox) -> None:
    release = sandbox.release("1.30")
    ssm = boto3.client("ssm", region_name="eu-central-1")
    assert ssm.get_parameter(Name=release.parameter)["Parameter"]["Value"] == release.image_id
    assert sandbox.reset() == sorted(SEED_REGIONS)
    assert ssm.get_parameter(Name=release.parameter)["Parameter"]["Value"] != release.image_id
    assert sandbox.release("1.30").image_id == release.image_id  # the seeder forgot it too


def test_writes_in_every_seeded_region_are_reset_as_a_partial_reset(sandbox) -> None:
    """Every region written (but nothing partition-wide): the regions are seeded again and S3, which is
    the partition's, keeps its buckets (seeding them again failed: the emulator answered 500)."""
    seeds = {region: seeded_state(region) for region in SEED_REGIONS}
    s3 = boto3.client("s3", region_name="us-west-2")
    buckets = sorted(b["Name"] for b in s3.list_buckets()["Buckets"])
    assert buckets  # the binaries' and the statements' buckets
    for region in SEED_REGIONS:
        write_in(region)
    assert sandbox.reset() == sorted(SEED_REGIONS)
    assert {region: seeded_state(region) for region in SEED_REGIONS} == seeds
    assert sorted(b["Name"] for b in s3.list_buckets()["Buckets"]) == buckets
