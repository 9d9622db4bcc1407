"""`amibuild verify` and `fleet --verify`: the signed statements about a channel's images (or one
image) checked region by region against the emulator, on images signed the way build-ami and
test-ami sign them (`tests/statements.py`); and the IAM statements verifying needs."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import boto3
import pytest

from amibuild.attest import sign
from amibuild.attest.statement import SCAN
from amibuild.aws import Aws
from amibuild.channels import publish
from amibuild.jobs import image_inventory
from amibuild.lifecycle import iam
from amibuild.pipeline import load
from amibuild.sandbox import Sandbox
from conftest import unlimited
from tests import statements

REGIONS = ("us-west-2", "eu-west-1", "eu-central-1")
PIPELINE = """
pipeline {
  name    = "vfy"
  regions = ["us-west-2"]
  copy_to = ["eu-west-1", "eu-central-1"]
}
channel "stable" {
  requires = ["tested"]
}
variant "ceph" {
  test_on_build = false
}
"""
NAME = "/amibuild/vfy/1.35/ceph/{channel}/image_id"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    return tmp_path


def published(workdir: Path, test: str | None = "passed", channel: str = "recommended", override: str = "",
              **how) -> dict[str, str]:
    pipeline = load(workdir / "amibuild.hcl")
    amis = statements.build("vfy", "ceph", REGIONS, test, **how)
    with unlimited():  # set-up: the channel the test verifies
        publish.publish_variant(Aws(region="us-west-2"), pipeline=pipeline, variant=pipeline.variants[0], amis=amis,
                                channel=channel, allow_foreign=True, override_gate=override)
    return amis


def verify(cli, workdir: Path, *args: str):
    return cli(workdir, "verify", *args)


def test_a_good_channel_verifies_with_a_line_per_region(sandbox: Sandbox, workdir: Path, cli):
    amis = published(workdir)
    got = verify(cli, workdir, "--variant", "ceph", "--channel", "recommended")
    assert got.returncode == 0, got.stderr
    for region in REGIONS:
        line = next(line for line in got.stdout.splitlines() if line.strip().startswith(f"{region} {amis[region]}"))
        assert ": ok; provenance: built by vfy ceph" in line and "test: passed" in line
    data = json.loads(verify(cli, workdir, "--variant", "ceph", "--channel", "recommended", "--json").stdout)
    assert data["ok"] and [r["region"] for r in data["regions"]] == list(REGIONS)
    assert all(r["ok"] and r["test"].startswith("passed") for r in data["regions"])
    # the signed fingerprint is not today's render's (these images were made by hand): said, not failed
    assert all(r["today"].startswith("differs from today's render") for r in data["regions"])
    one = verify(cli, workdir, "--variant", "ceph", "--channel", "recommended", "--region", "eu-west-1", "--json")
    assert one.returncode == 0 and [r["region"] for r in json.loads(one.stdout)["regions"]] == ["eu-west-1"]
    ami = verify(cli, workdir, "--ami", amis["eu-central-1"], "--region", "eu-central-1")
    assert ami.returncode == 0 and "eu-central-1" in ami.stdout, ami.stderr


def test_a_region_pointed_at_another_image_fails_naming_it(sandbox: Sandbox, workdir: Path, cli):
    published(workdir)
    foreign = statements.images("ceph", ["eu-west-1"])["eu-west-1"]  # no statement: nobody built it here
    ssm = boto3.client("ssm", region_name="eu-west-1")
    ssm.put_parameter(Name=NAME.format(channel="recommended"), Value=foreign, Type="String", Overwrite=True,
                      DataType="aws:ec2:image")
    got = verify(cli, workdir, "--variant", "ceph", "--channel", "recommended")
    assert got.returncode == 1
    assert f"eu-west-1 {foreign}: FAILED" in got.stdout
    assert "eu-west-1" in got.stderr and "a foreign image" in got.stderr
    assert "us-west-2" not in got.stderr.split("fail:", 1)[1]  # only the region that fails is named

    # pointed at another build of this pipeline: every statement holds, but the regions disagree
    other = statements.build("vfy", "ceph", ["eu-west-1"], "passed")["eu-west-1"]
    ssm.put_parameter(Name=NAME.format(channel="recommended"), Value=other, Type="String", Overwrite=True,
                      DataType="aws:ec2:image")
    split = verify(cli, workdir, "--variant", "ceph", "--channel", "recommended", "--json")
    assert split.returncode == 1
    assert all("the regions hold different builds" in " ".join(r["failures"]) for r in json.loads(split.stdout)["regions"])


def test_an_altered_statement_fails(sandbox: Sandbox, workdir: Path, cli):
    amis = published(workdir, "failed")
    s3 = boto3.client("s3", region_name="us-west-2")
    prefix = f"amibuild/vfy/images/{amis['eu-west-1']}/test/"
    (key,) = [o["Key"] for o in s3.list_objects_v2(Bucket=statements.BUCKET, Prefix=prefix)["Contents"]]
    envelope = json.loads(s3.get_object(Bucket=statements.BUCKET, Key=key)["Body"].read())
    payload = base64.b64decode(envelope["payload"]).replace(b'"verdict":"failed"', b'"verdict":"passed"')
    assert b'"verdict":"passed"' in payload
    envelope["payload"] = base64.b64encode(payload).decode()
    s3.put_object(Bucket=statements.BUCKET, Key=key, Body=json.dumps(envelope).encode())
    got = verify(cli, workdir, "--variant", "ceph", "--channel", "recommended", "--json")
    assert got.returncode == 1
    by_region = {r["region"]: r for r in json.loads(got.stdout)["regions"]}
    altered = " ".join(by_region["eu-west-1"]["failures"])
    assert "does not verify" in altered and "altered after signing" in altered
    assert by_region["eu-west-1"]["test"] == "not tested"  # the altered "passed" counts for nothing
    assert "its signed test statement says failed" in " ".join(by_region["us-west-2"]["failures"])


def test_an_altered_scan_statement_fails_and_a_good_one_is_counted(sandbox: Sandbox, workdir: Path, cli):
    # every stored statement about the image verifies: the scan's as well as the provenance and the test
    amis = published(workdir)
    aws = Aws(region="us-west-2")
    place = statements.where("vfy")
    predicate = image_inventory.scan_predicate([], sbom_digest="0" * 64, started="", finished="")
    done = sign.Attestor(aws, place, sign.signer(aws, place)).make(amis, SCAN, predicate, "scan-run")
    assert not done.error, done.error
    good = verify(cli, workdir, "--variant", "ceph", "--channel", "recommended", "--json")
    assert good.returncode == 0, good.stdout + good.stderr
    assert all(r["statements"] == 3 for r in json.loads(good.stdout)["regions"])  # provenance, test, scan
    s3 = boto3.client("s3", region_name="us-west-2")
    prefix = f"amibuild/vfy/images/{amis['eu-west-1']}/scan/"
    (key,) = [o["Key"] for o in s3.list_objects_v2(Bucket=statements.BUCKET, Prefix=prefix)["Contents"]]
    envelope = json.loads(s3.get_object(Bucket=statements.BUCKET, Key=key)["Body"].read())
    envelope["payload"] = base64.b64encode(base64.b64decode(envelope["payload"]) + b" ").decode()
    s3.put_object(Bucket=statements.BUCKET, Key=key, Body=json.dumps(envelope).encode())
    got = verify(cli, workdir, "--variant", "ceph", "--channel", "recommended", "--json")
    assert got.returncode == 1
    by_region = {r["region"]: r for r in json.loads(got.stdout)["regions"]}
    assert any(f.startswith("scan statement scan-run does not verify") for f in by_region["eu-west-1"]["failures"])
    assert by_region["us-west-2"]["ok"]


def test_unsigned_statements_and_an_untested_gated_channel_fail(sandbox: Sandbox, workdir: Path, cli):
    published(workdir, kms_key="alias/no-such-key")
    got = verify(cli, workdir, "--variant", "ceph", "--channel", "recommended")
    assert got.returncode == 1 and "unsigned" in got.stderr, got.stderr
    published(workdir, None, channel="stable", override="a hotfix, tested by hand")
    gated = verify(cli, workdir, "--variant", "ceph", "--channel", "stable")
    assert gated.returncode == 1 and "the channel's gate requires tested" in gated.stderr, gated.stderr


@pytest.mark.parametrize("args, words", [
    ((), "give --ami AMI, or --channel CHANNEL [--variant VARIANT] [--region REGION]"),
    (("--ami", "ami-0123456789abcdef0", "--variant", "ceph", "--channel", "stable"), "give --ami AMI, or"),
    (("--ami", "ami-xyz"), "is not an AMI id"),
    (("--variant", "ceph", "--channel", "stable", "--region", "ap-south-1"), "--region ap-south-1: not a target region"),
])
def test_bad_verify_requests_exit_2_before_any_aws_call(isolated_env, workdir: Path, cli, args, words):
    got = cli(workdir, "verify", *args, env={"AWS_ENDPOINT_URL": "http://127.0.0.1:9"})
    assert got.returncode == 2 and words in got.stderr, got.stderr


@pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")
def test_a_sandbox_build_verifies_as_today_s_render(sandbox: Sandbox, tmp_path: Path, cli):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE.replace(', "eu-central-1"', ""))
    built = cli(tmp_path, "build-ami", "--json")
    assert built.returncode == 0, built.stderr
    got = verify(cli, tmp_path, "--variant", "ceph", "--channel", "recommended", "--json")
    assert got.returncode == 0, got.stdout + got.stderr
    assert {r["today"] for r in json.loads(got.stdout)["regions"]} == {"as today's render"}
    assert {r["test"] for r in json.loads(got.stdout)["regions"]} == {"not tested"}  # no boot test: said, not failed


# ------------------------------------------------------------------------------- fleet --verify


def test_fleet_verify_marks_every_running_image_without_valid_provenance(sandbox: Sandbox, workdir: Path, cli):
    good = published(workdir)
    foreign = statements.images("ceph", ["us-west-2"])  # no statement: nobody built it through the pipeline
    pipeline = load(workdir / "amibuild.hcl")
    publish.publish_variant(Aws(region="us-west-2"), pipeline=pipeline, variant=pipeline.variants[0],
                            amis={**good, **foreign}, channel="candidate", allow_foreign=True)
    ec2 = boto3.client("ec2", region_name="us-west-2")
    for ami in (good["us-west-2"], foreign["us-west-2"]):
        ec2.run_instances(ImageId=ami, MinCount=1, MaxCount=1, InstanceType="m5.large")
    plain = cli(workdir, "fleet", "--region", "us-west-2")
    assert plain.returncode == 0 and "UNVERIFIED" not in plain.stdout, plain.stderr
    got = cli(workdir, "fleet", "--region", "us-west-2", "--verify")
    assert got.returncode == 1
    marked = [line for line in got.stdout.splitlines() if "UNVERIFIED" in line]
    assert len(marked) == 1 and "a foreign image" in marked[0]
    assert foreign["us-west-2"] in got.stderr and good["us-west-2"] not in got.stderr
    rows = {r["image_id"]: r for r in json.loads(cli(workdir, "fleet", "--region", "us-west-2", "--verify",
                                                    "--json").stdout)["consumers"]}
    assert rows[good["us-west-2"]]["provenance"] == "valid"
    assert "foreign image" in rows[foreign["us-west-2"]]["provenance"]
    markdown = cli(workdir, "fleet", "--region", "us-west-2", "--verify", "--markdown").stdout
    assert "| provenance |" in markdown and "**UNVERIFIED**" in markdown and "| valid |" in markdown


# ------------------------------------------------------------------------------- IAM


def test_iam_policy_gives_verifying_the_key_and_the_pipelines_prefix_only(workdir: Path):
    pipeline = load(workdir / "amibuild.hcl")
    document = iam.policy("verify", pipeline, account="123456789012")
    by_sid = {s["Sid"]: s for s in document["Statement"]}
    assert set(by_sid["AttestationVerify"]["Action"]) == {"kms:DescribeKey", "kms:GetPublicKey"}
    assert by_sid["AttestationVerify"]["Condition"] == {"ForAnyValue:StringEquals": {"kms:ResourceAliases": ["alias/amibuild"]}}
    assert by_sid["AttestationRead"]["Resource"] == ["arn:aws:s3:::amibuild-attestations-123456789012/amibuild/vfy/*"]
    assert by_sid["AttestationList"]["Condition"] == {"StringLike": {"s3:prefix": ["amibuild/vfy/*"]}}
    assert not iam.actions(document) & {"kms:Sign", "s3:PutObject"}  # verifying writes and signs nothing
    # publish verifies only when a gate requires tested (this pipeline's stable does)
    assert {"kms:GetPublicKey", "s3:GetObject", "s3:ListBucket"} <= iam.actions(iam.policy("publish", pipeline))
    ungated = load_text(workdir, PIPELINE.replace('  requires = ["tested"]\n', ""))
    assert not iam.actions(iam.policy("publish", ungated)) & {"kms:GetPublicKey", "s3:GetObject"}
    # signing (build, test) and verifying are both in `all`, each under its own statement
    every = iam.policy("all", pipeline, stacks=["s"], node_role_arn="arn:aws:iam::123456789012:role/n")
    assert {"AttestationSign", "AttestationVerify", "AttestationStore", "AttestationRead"} <= {s["Sid"] for s in every["Statement"]}


def load_text(workdir: Path, text: str):
    path = workdir / "other.hcl"
    path.write_text(text)
    return load(path)
