"""The vulnerability gate against the emulator: `amibuild scan` sends a build's signed SBOM to the
emulator's Inspector ScanSbom, keeps the findings as a signed scan statement, and a channel with
``requires = ["scanned"]`` refuses an image with htop (the sandbox's list: high) unless an ignore
with a reason and a future ``until`` covers it; a past ``until`` refuses again. Bad scan blocks
exit 2 naming the field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

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
