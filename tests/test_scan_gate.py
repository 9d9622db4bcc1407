"""The vulnerability gate against the emulator: `amibuild scan` sends a build's signed SBOM to the
emulator's Inspector ScanSbom, keeps the findings as a signed scan statement, and a channel with
``requires = ["scanned"]`` refuses an image with htop (the sandbox's list: high) unless an ignore
with a reason and a future ``until`` covers it; a past ``until`` refuses again. Bad scan blocks
exit 2 naming the field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import boto3
import pytest

from amibuild.attest import store
from conftest import run_cli

PIPELINE = """\
pipeline {
  name    = "scn"
  regions = ["us-west-2"]
}

channel "stable" {
  from     = "candidate"
  requires = ["scanned"]
  scan {
    max_severity = "high"
%s
  }
}

variant "ceph" {
  extra_packages = ["ceph-common", "htop"]
}
"""
IGNORE = '    ignore = [{ id = "AMIBUILD-SANDBOX-0001", reason = "htop is not run on nodes", until = "%s" }]'

pytestmark = pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")


def _write(tmp_path: Path, ignore: str = "") -> None:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE % ignore)


def test_a_scanned_gate_refuses_htop_and_passes_it_with_an_ignore_that_has_a_reason_and_a_future_until(tmp_path, sandbox):
    _write(tmp_path)
    built = run_cli(tmp_path, "build-ami", "--json", "--channel", "candidate")
    assert built.returncode == 0, built.stderr
    ami = json.loads(built.stdout)["variants"][0]["amis"]["us-west-2"]

    unscanned = run_cli(tmp_path, "promote", "--variant", "ceph", "--from", "candidate", "--to", "stable")
    assert unscanned.returncode == 1 and "no signed scan statement" in unscanned.stderr, unscanned.stderr

    scanned = run_cli(tmp_path, "scan", "--variant", "ceph", "--channel", "candidate", "--json")
    assert scanned.returncode == 0, scanned.stderr  # candidate has no scan policy: the findings are reported
    out = json.loads(scanned.stdout)
    assert [(f["id"], f["severity"]) for f in out["findings"]] == [("AMIBUILD-SANDBOX-0001", "high")]
    assert out["findings"][0]["package"] == "pkg:rpm/amazon/htop@1.0.0-1.amzn2?arch=x86_64&distro=amazon-2023"
    assert out["statement"]["signed"] and out["statement"]["keys"][0].startswith(store.image_prefix("scn", ami) + "scan/")

    refused = run_cli(tmp_path, "promote", "--variant", "ceph", "--from", "candidate", "--to", "stable")
    assert refused.returncode == 1, refused.stderr
    assert "requires scanned (below high)" in refused.stderr
    assert f"us-west-2: {ami}: AMIBUILD-SANDBOX-0001 (high 7.8) in pkg:rpm/amazon/htop@1.0.0-1.amzn2" in refused.stderr
    assert "fixed in 3.9.0-1" in refused.stderr

    _write(tmp_path, IGNORE % "2020-01-01")  # an ignore past its until refuses again, saying so
    expired = run_cli(tmp_path, "promote", "--variant", "ceph", "--from", "candidate", "--to", "stable")
    assert expired.returncode == 1 and "ignored until 2020-01-01, which has passed" in expired.stderr, expired.stderr

    on_demand = run_cli(tmp_path, "scan", "--variant", "ceph", "--channel", "stable")
    assert on_demand.returncode == 2 and "channel stable of ceph holds no image" in on_demand.stderr

    _write(tmp_path, IGNORE % "2099-03-01")
    passed = run_cli(tmp_path, "promote", "--variant", "ceph", "--from", "candidate", "--to", "stable")
    assert passed.returncode == 0, passed.stderr
    again = run_cli(tmp_path, "scan", "--variant", "ceph", "--channel", "stable")
    assert again.returncode == 0, again.stderr
    assert "scan policy (refuses high and above): passes" in again.stdout
    assert "ignored: AMIBUILD-SANDBOX-0001 until 2099-03-01 (htop is not run on nodes)" in again.stdout


def test_build_ami_scan_scans_after_the_build(tmp_path, sandbox):
    _write(tmp_path)
    built = run_cli(tmp_path, "build-ami", "--json", "--no-publish", "--scan")
    assert built.returncode == 0, built.stderr
    (variant,) = json.loads(built.stdout)["variants"]
    assert [f["id"] for f in variant["scan"]["findings"]] == ["AMIBUILD-SANDBOX-0001"]
    assert variant["scan"]["statement"]["signed"]
    assert "ceph: scan: 1 finding(s)" in built.stderr


@pytest.mark.parametrize("block, says", [
    ('    max_severity = "severe"', "scan.max_severity 'severe': one of info, low, medium, high, critical"),
    ('    ignore = [{ id = "CVE-2024-1234", until = "2027-03-01" }]', "scan.ignore[0].reason: say in one line why"),
    ('    ignore = [{ id = "CVE-2024-1234", reason = "r", until = "next year" }]',
     "scan.ignore[0].until 'next year': the date the exception ends, YYYY-MM-DD"),
    ('    ignore = [{ id = "CVE-2024-1234", reason = "r", until = "2027-02-30" }]', "scan.ignore[0].until '2027-02-30': not a date"),
])
def test_a_bad_scan_block_exits_2_naming_the_field(tmp_path, block, says, sandbox):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE.replace('    max_severity = "high"\n', "") % block)
    result = run_cli(tmp_path, "scan", "--variant", "ceph", "--channel", "candidate")
    assert result.returncode == 2 and says in result.stderr, result.stderr


def test_the_scan_policy_allows_scan_sbom_and_reading_and_writing_the_pipelines_statements(tmp_path):
    from amibuild.lifecycle import iam
    from amibuild.pipeline import load

    (tmp_path / "amibuild.hcl").write_text(PIPELINE % "")
    pipeline = load(tmp_path / "amibuild.hcl")
    scan = iam.policy("scan", pipeline, account="123456789012")
    assert {"inspector-scan:ScanSbom", "s3:GetObject", "s3:ListBucket", "s3:PutObject", "kms:Sign",
            "kms:GetPublicKey", "ssm:GetParameterHistory"} <= iam.actions(scan)
    (store_,) = [s for s in scan["Statement"] if s["Sid"] == "AttestationStore"]
    assert store_["Resource"] == ["arn:aws:s3:::amibuild-attestations-123456789012/amibuild/scn/*"]
    # a gate that requires scanned reads the statements on publish and promote
    assert "s3:GetObject" in iam.actions(iam.policy("publish", pipeline, account="123456789012"))


def _signed_sbom_build(pipeline: str, amis: dict, sbom_document: str) -> None:
    """A build's signed provenance of ``amis`` whose package list is ``sbom_document``, stored beside it."""
    import hashlib

    from amibuild import __version__
    from amibuild.attest import predicates, sign
    from amibuild.attest.statement import PROVENANCE
    from amibuild.aws import Aws
    from tests import statements

    aws = Aws(region="us-west-2")
    place = statements.where(pipeline)
    digest = hashlib.sha256(sbom_document.encode()).hexdigest()
    run = f"run-{digest[:6]}"
    for ami in amis.values():
        aws.put_object(place.bucket, store.sbom_key(pipeline, ami, run), sbom_document.encode(), place.region)
    predicate = predicates.provenance(
        amibuild_version=__version__, pipeline=pipeline, pipeline_file="amibuild.hcl", pipeline_digest=None,
        git_commit=None, variant="ceph", fingerprint=digest, inputs={"os": "al2023"}, source_amis={},
        account=statements.ACCOUNT, packer_version="1.6.6", run_id=run, regions=sorted(amis), started="", finished="",
        package_list_digest=digest)
    made = sign.Attestor(aws, place, sign.signer(aws, place)).make(amis, PROVENANCE, predicate, run)
    assert made.signed and not made.error, made


def test_a_scan_of_a_channel_names_only_the_images_of_the_build_whose_sbom_was_scanned(tmp_path, sandbox):
    """The channel holds one build in the build region and another build in a second region: the scan
    read the first one's signed SBOM, so its statement names that build's images only, never the other
    region's image, whose packages nobody scanned (it would pass a `scanned` gate on another image's findings)."""
    from amibuild.inventory.packages import parse_inventory
    from amibuild.inventory.sbom import cyclonedx
    from tests import statements

    (tmp_path / "amibuild.hcl").write_text(PIPELINE.replace('regions = ["us-west-2"]', 'regions = ["us-west-2", "eu-west-1"]')
                                           % "")
    clean = cyclonedx(parse_inventory("bash\t(none)\t5.2.15\t1.amzn2023\tx86_64\tamazonlinux\tGPLv3+\n"), os_name="al2023")
    htop = cyclonedx(parse_inventory("htop\t(none)\t3.2.1\t1.amzn2023\tx86_64\tamazonlinux\tGPLv2+\n"), os_name="al2023")
    first = statements.images("ceph", ["us-west-2", "eu-west-1"], pipeline="scn")
    other = statements.images("ceph", ["eu-west-1"], pipeline="scn")
    _signed_sbom_build("scn", first, clean)
    _signed_sbom_build("scn", other, htop)
    for region, ami in (("us-west-2", first["us-west-2"]), ("eu-west-1", other["eu-west-1"])):
        boto3.client("ssm", region_name=region).put_parameter(
            Name="/amibuild/scn/1.35/ceph/candidate/image_id", Value=ami, Type="String", DataType="aws:ec2:image")

    scanned = run_cli(tmp_path, "scan", "--variant", "ceph", "--channel", "candidate", "--json")

    assert scanned.returncode == 0, scanned.stderr
    out = json.loads(scanned.stdout)
    assert out["findings"] == []  # the build region's image: its own SBOM, clean
    assert out["amis"] == {"us-west-2": first["us-west-2"]}
    assert not any(k.startswith(store.image_prefix("scn", other["eu-west-1"])) for k in out["statement"]["keys"])
    # and it says so: the region's image, and why it is not in the statement
    (line,) = out["left_out"]
    assert line.startswith(f"{other['eu-west-1']} in eu-west-1 left out (not in the scan statement): not named by the "
                           f"signed provenance of the scanned image {first['us-west-2']}")
    shown = run_cli(tmp_path, "scan", "--variant", "ceph", "--channel", "candidate")
    assert f"  note: {line}" in shown.stdout
