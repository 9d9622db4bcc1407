"""The pipeline's statements end to end: a sandbox build-ami signs and stores each built variant's
provenance (the real CLI and packer against the emulator), and a pipeline without a usable key
warns and stores them unsigned."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import boto3
import pytest

from amibuild.attest import check, sign, store
from amibuild.attest.statement import PROVENANCE, ImageFacts
from amibuild.attest.verify import Problem
from amibuild.aws import Aws
from conftest import run_cli

BUCKET = "amibuild-attestations-123456789012"
PIPELINE = """\
pipeline {
  name    = "attb"
  regions = ["us-west-2"]
  copy_to = ["eu-west-1"]
%s
}

variant "base" {
  test_on_build = false
}
"""

pytestmark = pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")


def _facts(region: str, ami: str) -> ImageFacts:
    raw = boto3.client("ec2", region_name=region).describe_images(ImageIds=[ami])["Images"][0]
    return ImageFacts(ami, region, tuple(m["Ebs"]["SnapshotId"] for m in raw["BlockDeviceMappings"] if "Ebs" in m))


def test_a_sandbox_build_signs_and_stores_each_variant_s_provenance(tmp_path: Path, sandbox):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE % "")
    result = run_cli(tmp_path, "build-ami", "--json", "--no-publish")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    (variant,) = out["variants"]
    provenance = variant["provenance"]
    assert provenance["signed"] and provenance["bucket"] == BUCKET and provenance["region"] == "us-west-2"
    amis = variant["amis"]
    assert provenance["keys"] == [store.statement_key("attb", amis[r], "provenance", out["run_id"])
                                  for r in ("eu-west-1", "us-west-2")]
    assert "unsigned" not in result.stderr and "provenance statement signed by arn:aws:kms:us-west-2:" in result.stderr
    record = json.loads((tmp_path / out["record"]).read_text())
    assert record["variants"][0]["provenance"]["keys"] == provenance["keys"]  # the run record has it too

    aws = Aws(region="us-west-2")
    where = sign.Where("attb", "123456789012", "alias/amibuild", BUCKET, "us-west-2")
    images = [_facts("eu-west-1", amis["eu-west-1"]), _facts("us-west-2", amis["us-west-2"])]
    (verified,) = check.verify_image(aws, where, images, PROVENANCE)
    assert verified.ok, verified.reason()
    predicate = verified.predicate
    assert predicate["buildDefinition"]["internalParameters"]["fingerprint"] == variant["fingerprint"]
    assert predicate["buildDefinition"]["internalParameters"]["fingerprintInputs"]["name"] == "base"
    assert predicate["buildDefinition"]["internalParameters"]["packerVersion"]
    assert predicate["buildDefinition"]["externalParameters"]["pipeline"]["digest"]["sha256"] == \
        hashlib.sha256((tmp_path / "amibuild.hcl").read_bytes()).hexdigest()
    assert predicate["runDetails"]["metadata"]["invocationId"] == out["run_id"]
    assert predicate["runDetails"]["builder"]["version"]["amibuild"]
    sources = [d for d in predicate["buildDefinition"]["resolvedDependencies"] if d["name"] == "source-ami"]
    assert sources and sources[0]["uri"].startswith("arn:aws:ec2:us-west-2::image/ami-")


def test_a_build_without_a_usable_key_says_its_statements_are_unsigned(tmp_path: Path, sandbox):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE % '  attestation {\n    kms_key = "alias/not-there"\n  }')
    result = run_cli(tmp_path, "build-ami", "--json", "--no-publish")
    assert result.returncode == 0, result.stderr
    assert "warning: statements are unsigned: KMS key alias/not-there in us-west-2 cannot be used" in result.stderr
    (variant,) = json.loads(result.stdout)["variants"]
    assert variant["provenance"]["signed"] is False and variant["provenance"]["keys"]
    aws = Aws(region="us-west-2")
    where = sign.Where("attb", "123456789012", "alias/not-there", BUCKET, "us-west-2")
    images = [_facts("us-west-2", variant["amis"]["us-west-2"])]
    (verified,) = check.verify_image(aws, where, images, PROVENANCE)
    assert Problem.UNSIGNED in verified.problems and "unsigned" in verified.reason()


OFF = "\n".join(f'  test "{name}" {{\n    enabled = false\n    reason  = "sandbox stand-in"\n  }}'
                for name in ("kubelet", "containerd", "nodeadm", "nodeadm-config", "unpigz"))
BOOTED = f"""\
pipeline {{
  name    = "attb"
  regions = ["us-west-2"]
  copy_to = ["eu-west-1"]
}}

variant "base" {{
  test "true" {{
    command = "true"
  }}
{OFF}
}}
"""


def _foreign_image(name: str) -> str:
    """An image with amibuild's variant tag that this sandbox has no stand-in of (no packer build needed)."""
    from amibuild.sandbox import seed_images

    ec2 = boto3.client("ec2", region_name="us-west-2")
    instance = ec2.run_instances(ImageId=seed_images()[0].image_id, MinCount=1, MaxCount=1, InstanceType="m5.large")
    ami = ec2.create_image(InstanceId=instance["Instances"][0]["InstanceId"], Name=name)["ImageId"]
    ec2.create_tags(Resources=[ami], Tags=[{"Key": "amibuild:variant", "Value": "base"}])
    return ami


def test_test_ami_stores_a_signed_test_statement_with_every_check(tmp_path: Path, sandbox):
    (tmp_path / "amibuild.hcl").write_text(BOOTED)
    ami = _foreign_image("attb-foreign")
    done = run_cli(tmp_path, "test-ami", "--variant", "base", "--ami", ami, "--json", binary="amibuild")
    assert done.returncode == 0, done.stderr  # no stand-in of this image: not testable here, no failure
    result = json.loads(done.stdout)
    assert "test statement signed by arn:aws:kms:us-west-2:" in done.stderr
    record = json.loads(next((tmp_path / "build" / "tests").glob("*/base.json")).read_text())
    assert record["statement"]["keys"] == [store.statement_key("attb", ami, "test", result["run_id"])]
    aws = Aws(region="us-west-2")
    where = sign.Where("attb", "123456789012", "alias/amibuild", BUCKET, "us-west-2")
    from amibuild.attest.statement import TEST

    (verified,) = check.verify_image(aws, where, [_facts("us-west-2", ami)], TEST)
    assert verified.ok, verified.reason()
    predicate = verified.predicate
    assert predicate["verdict"] == result["result"] and predicate["run"] == result["run_id"]
    assert predicate["instance"]["id"] == result["instance_id"] and predicate["startedOn"] == result["started"]
    assert [c["name"] for c in predicate["checks"]] == [c["name"] for c in result["checks"]]
    assert [c["result"] for c in predicate["checks"]] == [c["result"] for c in result["checks"]]
    assert predicate["result"] == "WARNED" and "true" in predicate["warnedTests"]


@pytest.mark.skipif(shutil.which("packer") is None or __import__("os").geteuid() != 0,
                    reason="packer and root are needed: the image's stand-in is an overlay of /")
def test_build_ami_boot_test_stores_a_test_statement_about_every_region_s_image(tmp_path: Path, sandbox):
    (tmp_path / "amibuild.hcl").write_text(BOOTED)
    done = run_cli(tmp_path, "build-ami", "--boot-test", "--no-publish", "--json", binary="amibuild")
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)
    (variant,) = run["variants"]
    statement = variant["boot_test"]["statement"]
    assert statement["signed"] and len(statement["keys"]) == 2
    assert variant["provenance"]["signed"]
    aws = Aws(region="us-west-2")
    where = sign.Where("attb", "123456789012", "alias/amibuild", BUCKET, "us-west-2")
    from amibuild.attest.statement import TEST

    images = [_facts(r, a) for r, a in sorted(variant["amis"].items())]
    (verified,) = check.verify_image(aws, where, images[::-1], TEST)  # found from any region's AMI id
    assert verified.ok, verified.reason()
    assert verified.predicate["verdict"] == "passed" and verified.predicate["result"] == "PASSED"
    assert "true" in verified.predicate["passedTests"]
    assert [v.ok for v in check.verify_image(aws, where, images, PROVENANCE)] == [True]


def test_a_boot_test_that_launched_nothing_makes_no_test_statement(tmp_path: Path, sandbox):
    (tmp_path / "amibuild.hcl").write_text(BOOTED)
    ami = _foreign_image("attb-nothing")
    done = run_cli(tmp_path, "test-ami", "--variant", "base", "--ami", ami, "--subnet", "subnet-0123456789abcdef0",
                   "--json", binary="amibuild")
    result = json.loads(done.stdout)
    assert result["instance_id"] is None, done.stderr  # RunInstances refused: nothing is known of the image
    record = json.loads(next((tmp_path / "build" / "tests").glob("*/base.json")).read_text())
    assert "statement" not in record and "test statement" not in done.stderr
    assert boto3.client("s3", region_name="us-west-2").list_objects_v2(Bucket=BUCKET).get("KeyCount") == 0
