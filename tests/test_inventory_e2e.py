"""The inventory end to end against the emulator: a sandbox build-ami brings stage 1's package list
back, stores its CycloneDX 1.5 SBOM beside the image's statements with its digest in the signed
provenance; `sbom` prints it, `diff` compares two builds, an altered SBOM is not read."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import boto3
import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from amibuild.attest import store
from conftest import run_cli

BUCKET = "amibuild-attestations-123456789012"
PIPELINE = """\
pipeline {
  name    = "inv"
  regions = ["us-west-2"]
}

variant "ceph" {
  extra_packages = ["ceph-common"]
}
"""

pytestmark = pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")


def _build(tmp_path: Path, *extra: str) -> dict:
    result = run_cli(tmp_path, "build-ami", "--json", "--no-publish", *extra)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    (variant,) = out["variants"]
    assert variant["sbom"]["error"] is None, variant["sbom"]
    return {**variant, "run_id": out["run_id"], "stderr": result.stderr}


def test_a_build_stores_a_signed_cyclonedx_sbom_listing_its_packages_with_versions_and_purls(tmp_path: Path, sandbox):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    built = _build(tmp_path)
    ami = built["amis"]["us-west-2"]
    key = store.sbom_key("inv", ami, built["run_id"])
    assert built["sbom"]["keys"] == [key] and "SBOM of 1 package (sha256" in built["stderr"]
    body = boto3.client("s3", region_name="us-west-2").get_object(Bucket=BUCKET, Key=key)["Body"].read()
    assert built["sbom"]["digest"] == hashlib.sha256(body).hexdigest()
    assert JsonStrictValidator(SchemaVersion.V1_5).validate_str(body.decode()) is None  # None: valid

    shown = run_cli(tmp_path, "sbom", "--variant", "ceph", "--ami", ami)
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    assert document["specVersion"] == "1.5"
    (ceph,) = [c for c in document["components"] if c["name"] == "ceph-common"]
    assert ceph["version"] == "1.0.0-1.amzn2"
    assert ceph["purl"] == "pkg:rpm/amazon/ceph-common@1.0.0-1.amzn2?arch=x86_64&distro=amazon-2023"

    table = run_cli(tmp_path, "sbom", "--variant", "ceph", "--ami", ami, "--format", "table")
    assert table.returncode == 0 and "ceph-common  1.0.0-1.amzn2  x86_64" in table.stdout
    spdx = run_cli(tmp_path, "sbom", "--variant", "ceph", "--ami", ami, "--format", "spdx")
    assert json.loads(spdx.stdout)["packages"][0]["externalRefs"][0]["referenceLocator"] == ceph["purl"]

    # the provenance signs the SBOM's digest: one altered in S3 is refused, naming why
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.put_object(Bucket=BUCKET, Key=key, Body=body.replace(b"ceph-common", b"ceph-c0mmon"))
    altered = run_cli(tmp_path, "sbom", "--variant", "ceph", "--ami", ami)
    assert altered.returncode == 1 and "has the digest its signed provenance records" in altered.stderr
    assert "altered or removed" in altered.stderr


def test_diff_between_a_ceph_build_and_a_ceph_and_htop_build_names_htop_added(tmp_path: Path, sandbox):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    first = _build(tmp_path)
    second = _build(tmp_path, "--extra-pkg", "htop")
    result = run_cli(tmp_path, "diff", "--variant", "ceph", "--from", first["run_id"], "--to", second["run_id"])
    assert result.returncode == 0, result.stderr
    assert "    + htop.x86_64 1.0.0-1.amzn2" in result.stdout
    assert "packages: 1 added, 0 removed, 0 upgraded, 0 downgraded" in result.stdout
    assert "setting extra_packages: ['ceph-common'] -> ['ceph-common', 'htop']" in result.stdout
    as_json = json.loads(run_cli(tmp_path, "diff", "--variant", "ceph", "--from", first["amis"]["us-west-2"],
                                 "--to", second["amis"]["us-west-2"], "--json").stdout)
    assert as_json["packages"] == [{"name": "htop", "arch": "x86_64", "change": "added", "from": None,
                                    "to": "1.0.0-1.amzn2"}]
    md = run_cli(tmp_path, "diff", "--variant", "ceph", "--from", first["run_id"], "--to", second["run_id"], "--markdown")
    assert "| htop.x86_64 | added | - | 1.0.0-1.amzn2 |" in md.stdout
    assert "vulnerabilities: not compared (scan both images" in result.stdout

    # once both are scanned, the diff names the vulnerability htop brings
    for built in (first, second):
        assert run_cli(tmp_path, "scan", "--variant", "ceph", "--ami", built["amis"]["us-west-2"]).returncode == 0
    scanned = run_cli(tmp_path, "diff", "--variant", "ceph", "--from", first["run_id"], "--to", second["run_id"])
    assert "vulnerabilities: 0 fixed, 1 introduced (AMIBUILD-SANDBOX-0001)" in scanned.stdout, scanned.stdout


@pytest.mark.parametrize("args, says", [
    (("sbom", "--variant", "ceph"), "sbom: give --channel CHANNEL or --ami AMI"),
    (("sbom", "--variant", "ceph", "--ami", "ami-1"), "--ami 'ami-1' is not an AMI id"),
    (("sbom", "--variant", "ceph", "--channel", "stable", "--format", "xml"), "--format 'xml': one of cyclonedx"),
    # the file's only variant is taken without --variant (test_first_hour: a file of two names them)
    (("sbom", "--channel", "stable"), "--channel stable: channel stable of ceph holds no image in us-west-2"),
    (("diff", "--variant", "ceph", "--to", "stable"), "diff: --from names an image"),
])
def test_sbom_and_diff_refuse_bad_flags_with_exit_2(tmp_path: Path, args, says, sandbox):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    result = run_cli(tmp_path, *args)
    assert result.returncode == 2 and says in result.stderr, result.stderr


@pytest.mark.parametrize("text, says", [("[]\n", "a JSON list, not an object"),
                                         ('{"variants": {"ceph": 1}}', "variants is not a list of objects")])
def test_a_run_id_whose_record_is_no_run_record_is_refused_naming_it(tmp_path: Path, text, says) -> None:
    """It was a traceback (AttributeError); no AWS call comes before the record is read."""
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    record = tmp_path / "build" / "runs" / "20261201T000000Z-abcdef.json"
    record.parent.mkdir(parents=True)
    record.write_text(text)
    result = run_cli(tmp_path, "diff", "--from", record.stem, "--to", "ami-12345678", binary="amibuild")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"amibuild: error: --from {record.stem}: build/runs/{record.name}: not a run record ({says})"


def test_sbom_of_a_typo_channel_is_refused_with_did_you_mean(tmp_path: Path, sandbox):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    result = run_cli(tmp_path, "sbom", "--variant", "ceph", "--channel", "stabel")
    assert result.returncode == 2 and "--channel stabel: no such channel" in result.stderr and "stable" in result.stderr


def test_promote_prints_one_line_summarising_the_diff_it_makes(tmp_path: Path, sandbox):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    first = _build(tmp_path)
    second = _build(tmp_path, "--extra-pkg", "htop")
    for channel, built in (("candidate", first), ("recommended", second)):
        published = run_cli(tmp_path, "publish", "--variant", "ceph", "--channel", channel, "--ami",
                            f"us-west-2={built['amis']['us-west-2']}")
        assert published.returncode == 0, published.stderr
    result = run_cli(tmp_path, "promote", "--variant", "ceph", "--from", "recommended", "--to", "candidate")
    assert result.returncode == 0, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("diff: ")]
    assert line == (f"diff: {first['amis']['us-west-2']} -> {second['amis']['us-west-2']}: packages 1 added, "
                    "0 removed, 0 changed; 1 setting(s) differ")
