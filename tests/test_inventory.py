"""What is inside an image: the inventory parsed, the CycloneDX SBOM checked against its schema,
two images compared, and the SBOM scanned by the emulator's Inspector (ScanSbom over real HTTP),
whose verdict the `scanned` gate's policy judges.
"""

from __future__ import annotations

import json
from datetime import date, datetime, timezone

import boto3
import pytest
from botocore.exceptions import ClientError
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from amibuild.aws import Aws
from amibuild.errors import SpecError
from amibuild.inventory import diff as image_diff
from amibuild.inventory import scan
from amibuild.inventory.packages import Package, compare_evr, parse_inventory, rpmvercmp
from amibuild.inventory.sbom import cyclonedx, packages_of, purl

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
BASE = ("bash\t(none)\t5.2.15\t1.amzn2023.0.2\tx86_64\t@amazonlinux\tGPLv3+\n"
        "kernel\t(none)\t6.1.112\t122.189.amzn2023\tx86_64\t@amazonlinux\tGPLv2\n"
        "kubelet\t(none)\t1.31.2\t1.amzn2023\tx86_64\t@amazonlinux\tASL 2.0\n"
        "containerd\t(none)\t1.7.23\t1.amzn2023.0.1\tx86_64\t@amazonlinux\tASL 2.0\n"
        "ceph-common\t2\t18.2.1\t1.amzn2023.0.1\tx86_64\t@ceph\tLGPL-2.1 and GPL-2.0\n")
HTOP = "htop\t(none)\t3.2.1\t1.amzn2023.0.2\tx86_64\t@amazonlinux\tGPLv2+\n"


def test_the_inventory_reads_every_field_and_refuses_a_line_it_does_not_print() -> None:
    packages = parse_inventory(BASE)

    ceph = next(p for p in packages if p.name == "ceph-common")
    assert (ceph.epoch, ceph.version, ceph.release, ceph.arch, ceph.repo, ceph.license) == (
        2, "18.2.1", "1.amzn2023.0.1", "x86_64", "ceph", "LGPL-2.1 and GPL-2.0")
    assert ceph.evr == "2:18.2.1-1.amzn2023.0.1"
    with pytest.raises(Exception, match="line 1: 3 fields"):
        parse_inventory("a\tb\tc\n")


def test_the_signing_keys_rpm_lists_are_no_packages_of_the_image() -> None:
    keys = ("gpg-pubkey\t(none)\td832c631\t5515a5b9\t(none)\t\tpubkey\n"
            "gpg-pubkey\t(none)\tf3a6a3c1\t6123ab00\t(none)\t\tpubkey\n")
    with_keys = parse_inventory(BASE + keys)
    assert with_keys == parse_inventory(BASE)
    assert "none" not in cyclonedx(with_keys, os_name="al2023")  # no purl with arch=(none)
    one_more_key = image_diff.diff(image_diff.Side("a", "ami-1", parse_inventory(BASE + keys.splitlines(True)[0])),
                                   image_diff.Side("b", "ami-2", with_keys))
    assert one_more_key.packages == ()


@pytest.mark.parametrize(("a", "b", "want"), [
    ("1.0", "1.0", 0), ("1.0", "2.0", -1), ("2.0.1", "2.0", 1), ("1.0a", "1.0", 1), ("1.0~rc1", "1.0", -1),
    ("1.0^git1", "1.0", 1), ("1.0^git1", "1.0.1", -1), ("5.5p1", "5.5p10", -1), ("10", "9", 1), ("1.a", "1.1", -1),
    ("2.0", "2_0", 0), ("001", "1", 0),
])
def test_versions_order_as_rpm_orders_them(a: str, b: str, want: int) -> None:
    assert rpmvercmp(a, b) == want
    assert rpmvercmp(b, a) == -want


def test_the_epoch_wins_over_the_version() -> None:
    assert compare_evr("1:1.0-1", "9.9-9") == 1
    assert compare_evr("3.2.1-1.amzn2023", "3.2.1-10.amzn2023") == -1


def test_the_sbom_is_valid_cyclonedx_and_lists_ceph_common_with_its_version_and_purl() -> None:
    packages = parse_inventory(BASE)

    document = cyclonedx(packages, os_name="al2023", image="ami-0123456789abcdef0", created=NOW)

    assert JsonStrictValidator(SchemaVersion.V1_5).validate_str(document) is None
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(
        cyclonedx(packages, os_name="al2023", spec_version="1.6")) is None
    data = json.loads(document)
    assert data["specVersion"] == "1.5"
    ceph = next(c for c in data["components"] if c["name"] == "ceph-common")
    assert ceph["version"] == "18.2.1-1.amzn2023.0.1"
    assert ceph["purl"] == "pkg:rpm/amazon/ceph-common@18.2.1-1.amzn2023.0.1?arch=x86_64&distro=amazon-2023&epoch=2"
    assert {"name": "amibuild:rpm:repository", "value": "ceph"} in ceph["properties"]
    assert packages_of(document) == packages  # a stored SBOM reads back as the packages it lists


def test_diff_names_htop_added_and_the_key_versions() -> None:
    ceph = image_diff.Side("stable", "ami-1", parse_inventory(BASE), {"extra_packages": ["ceph-common"]})
    with_htop = image_diff.Side("recommended", "ami-2", parse_inventory(BASE + HTOP),
                                {"extra_packages": ["ceph-common", "htop"]})

    result = image_diff.diff(ceph, with_htop)

    assert [(c.name, c.kind, c.new) for c in result.packages] == [("htop", "added", "3.2.1-1.amzn2023.0.2")]
    assert result.key_versions["kubelet"] == ("1.31.2-1.amzn2023", "1.31.2-1.amzn2023")
    assert result.key_versions["nodeadm"] == ("", "")
    assert result.settings == {"extra_packages": (["ceph-common"], ["ceph-common", "htop"])}
    assert result.fixed is None  # neither side scanned
    assert "1 added, 0 removed, 0 changed" in result.summary()
    assert "    + htop.x86_64 3.2.1-1.amzn2023.0.2" in image_diff.lines(result)
    assert "| htop.x86_64 | added | - | 3.2.1-1.amzn2023.0.2 |" in image_diff.markdown(result)
    assert image_diff.lines(result)[0] == "stable (ami-1) -> recommended (ami-2)"
    by_id = image_diff.diff(image_diff.Side("ami-1", "ami-1", ceph.packages), with_htop)
    assert image_diff.lines(by_id)[0] == "ami-1 -> recommended (ami-2)"  # an AMI named by its id: said once


def test_an_upgrade_and_a_removal_are_named_with_both_versions() -> None:
    old = parse_inventory(BASE)
    new = tuple(Package(p.name, p.epoch, "1.31.4" if p.name == "kubelet" else p.version, p.release, p.arch)
                for p in old if p.name != "bash")

    result = image_diff.diff(image_diff.Side("a", "ami-1", old), image_diff.Side("b", "ami-2", new))

    kinds = {c.name: (c.kind, c.old, c.new) for c in result.packages}
    assert kinds["bash"] == ("removed", "5.2.15-1.amzn2023.0.2", "")
    assert kinds["kubelet"] == ("upgraded", "1.31.2-1.amzn2023", "1.31.4-1.amzn2023")


# ------------------------------------------------------------------------------- the scan


def scan_all(document: str) -> list[scan.Finding]:
    aws = Aws(region="us-east-1")
    found: list[scan.Finding] = []
    for part in scan.batches(document):
        found += scan.findings(aws.scan_sbom(part, "us-east-1"))
    return found


def test_the_emulators_inspector_finds_htop_by_purl_and_version_range(sandbox) -> None:
    found = scan_all(cyclonedx(parse_inventory(BASE + HTOP), os_name="al2023", created=NOW))

    assert [(f.id, f.severity, f.fixed_in) for f in found] == [("AMIBUILD-SANDBOX-0001", "high", "3.9.0-1")]
    assert found[0].package.startswith("pkg:rpm/amazon/htop@3.2.1-1.amzn2023.0.2")
    # ceph-common 2:18.2.1 is past the listed range (2:16 <= EVR < 2:16.2.15-1): not a match on the name alone
    assert not [f for f in found if "ceph-common" in f.package]


def test_a_fixed_version_is_not_reported(sandbox) -> None:
    fixed = HTOP.replace("3.2.1\t1.amzn2023.0.2", "3.9.0\t1.amzn2023")
    assert scan_all(cyclonedx(parse_inventory(BASE + fixed), os_name="al2023", created=NOW)) == []


def test_scansbom_refuses_another_spec_version_and_too_many_components_as_inspector_does(sandbox) -> None:
    client = boto3.client("inspector-scan", region_name="us-east-1")
    old = json.loads(cyclonedx(parse_inventory(BASE), os_name="al2023"))
    old["specVersion"] = "1.4"
    many = json.loads(cyclonedx(parse_inventory(BASE), os_name="al2023"))
    many["components"] = many["components"] * 401

    for document in (old, many):
        with pytest.raises(ClientError) as caught:
            client.scan_sbom(sbom=document, outputFormat="CYCLONE_DX_1_5")
        assert caught.value.response["Error"]["Code"] == "ValidationException"
        assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_an_sbom_over_the_component_limit_goes_in_batches_under_it() -> None:
    packages = tuple(Package(f"pkg{i:04d}", 0, "1.0", "1", "x86_64") for i in range(4500))

    parts = scan.batches(cyclonedx(packages, os_name="al2023"))

    assert [len(p["components"]) for p in parts] == [2000, 2000, 500]
    assert all(p["specVersion"] == "1.5" for p in parts)


def test_the_gate_refuses_a_high_finding_and_takes_an_ignore_with_a_reason_until_a_future_date() -> None:
    found = [scan.Finding("AMIBUILD-SANDBOX-0001", "high", 7.8, "pkg:rpm/amazon/htop@3.2.1-1", "3.9.0-1"),
             scan.Finding("CVE-2024-0001", "low", 2.0, "pkg:rpm/amazon/bash@5.2.15-1")]
    strict = scan.scan_policy({"max_severity": "high"}, "channel \"stable\".scan")
    lenient = scan.scan_policy({"max_severity": "high", "ignore": [
        {"id": "AMIBUILD-SANDBOX-0001", "reason": "htop is only on debug nodes", "until": "2027-03-01"}]}, "scan")

    refused = scan.judge(found, strict, NOW)
    accepted = scan.judge(found, lenient, NOW)
    expired = scan.judge(found, lenient, date(2027, 3, 2))

    assert not refused.passes and refused.reasons() == [
        "AMIBUILD-SANDBOX-0001 (high 7.8) in pkg:rpm/amazon/htop@3.2.1-1, fixed in 3.9.0-1"]
    assert refused.below == 1
    assert accepted.passes and accepted.ignored[0][1].reason == "htop is only on debug nodes"
    assert not expired.passes and "which has passed" in expired.reasons()[0]


@pytest.mark.parametrize(("block", "named"), [
    ({"max_severity": "severe"}, "max_severity"),
    ({"ignore": [{"id": "CVE-2024-1", "until": "2027-01-01"}]}, "reason"),
    ({"ignore": [{"id": "CVE-2024-1", "reason": "ok"}]}, "until"),
    ({"ignore": [{"id": "CVE-2024-1", "reason": "ok", "until": "2027-02-30"}]}, "not a date"),
    ({"ignore": [{"id": "bogus id", "reason": "ok", "until": "2027-01-01"}]}, ".id"),
    ({"max_sev": "high"}, "unknown field"),
])
def test_a_bad_scan_block_is_refused_naming_the_field(block: dict, named: str) -> None:
    with pytest.raises(SpecError, match=named):
        scan.scan_policy(block, 'channel "stable".scan')


def test_purls_follow_the_package_url_spec_for_rpm() -> None:
    package = Package("openssl-libs", 1, "3.0.8", "1.amzn2023.0.1", "aarch64")
    assert purl(package, "al2023").to_string() == (
        "pkg:rpm/amazon/openssl-libs@3.0.8-1.amzn2023.0.1?arch=aarch64&distro=amazon-2023&epoch=1")
    assert purl(package, "al2").qualifiers["distro"] == "amazon-2"


def test_an_ignores_until_is_judged_on_the_utc_day_whatever_zone_the_time_is_given_in() -> None:
    """`until` is a day on AWS's clock (UTC): 23:30 on the until day at UTC-5 is already the next day
    there, so the ignore has passed; 01:00 the next day at UTC+14 is still the until day in UTC."""
    from datetime import timedelta, timezone as tz

    found = [scan.Finding("AMIBUILD-SANDBOX-0001", "high", 7.8, "pkg:rpm/amazon/htop@3.2.1-1")]
    policy = scan.scan_policy({"ignore": [{"id": "AMIBUILD-SANDBOX-0001", "reason": "r", "until": "2027-03-01"}]}, "scan")

    west = scan.judge(found, policy, datetime(2027, 3, 1, 23, 30, tzinfo=tz(timedelta(hours=-5))))
    east = scan.judge(found, policy, datetime(2027, 3, 2, 1, 0, tzinfo=tz(timedelta(hours=14))))

    assert not west.passes and "ignored until 2027-03-01, which has passed" in west.reasons()[0]
    assert east.passes and east.ignored


def test_a_finding_rated_none_is_below_every_severity_not_unknown() -> None:
    """CycloneDX's `none` (a CVSS score of 0.0) is a rating: before, it was read as `unknown`, which
    every scan policy refuses."""
    answer = {"components": [{"bom-ref": "c1", "purl": "pkg:rpm/amazon/bash@5.2.15-1"}], "vulnerabilities": [
        {"id": "CVE-2024-0002", "ratings": [{"severity": "none", "score": 0.0}], "affects": [{"ref": "c1"}]},
        {"id": "CVE-2024-0003", "ratings": [], "affects": [{"ref": "c1"}]}]}
    found = scan.findings(answer)
    assert [(f.id, f.severity) for f in found] == [("CVE-2024-0002", "none"), ("CVE-2024-0003", "unknown")]
    verdict = scan.judge(found, scan.scan_policy({"max_severity": "info"}, "scan"), NOW)
    assert [f.id for f in verdict.refused] == ["CVE-2024-0003"] and verdict.below == 1
    odd = scan.findings({"vulnerabilities": [{"id": "CVE-2024-0004", "ratings": [{"severity": "untriaged"}]}]})
    assert [f.severity for f in odd] == ["unknown"]  # a word CycloneDX does not have is no rating
