"""build-ami end to end: the real CLI, the real packer binary, the sandbox emulator over HTTP.

A packer wrapper on the configured path (`INVOKE_AMIBUILD_PACKER`) logs each invocation, so the
tests can tell which variants Packer actually built.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from amibuild.tags import PREFIX as TAG_PREFIX
from conftest import CliResult, run_cli

ROOT = Path(__file__).resolve().parent.parent
REGIONS = ("us-west-2", "eu-west-1")
PROVENANCE_KEYS = {
    "fingerprint", "variant", "pipeline", "os", "kubernetes-version", "arch", "flavor", "base", "source-ami",
    "source-ami-name", "extra-packages", "version", "run-id", "created",
}

PIPELINE = """\
pipeline {
  name    = "e2e"
  regions = ["us-west-2"]
  copy_to = ["eu-west-1"]
}

variant "ceph" {
  extra_packages = ["ceph-common"]
}

variant "arm" {
  arch = "arm64"
}
"""

pytestmark = pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")


@pytest.fixture
def workdir(tmp_path: Path, sandbox, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    wrapper = tmp_path / "packer-wrapper"
    wrapper.write_text(f'#!/bin/sh\necho "$1 $(basename "$PWD")" >> "{tmp_path}/packer-calls"\n'
                       f'exec {shutil.which("packer")} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("INVOKE_AMIBUILD_PACKER", str(wrapper))
    return tmp_path


def builds(workdir: Path) -> list[str]:
    """Variant folders that `packer build` ran in, in order."""
    calls = workdir / "packer-calls"
    lines = calls.read_text().splitlines() if calls.exists() else []
    return sorted(line.split()[1] for line in lines if line.startswith("build "))


def build_ami(workdir: Path, *args: str) -> CliResult:
    return run_cli(workdir, "build-ami", *args)


def our_parameters(region: str) -> list[str]:
    """Every parameter under amibuild's prefix (by path: the seeded /aws/ ones fill describe's first page)."""
    pages = boto3.client("ssm", region_name=region).get_paginator("get_parameters_by_path").paginate(
        Path="/amibuild", Recursive=True)
    return sorted(p["Name"] for page in pages for p in page["Parameters"])


def summary(result: CliResult | subprocess.CompletedProcess[str]) -> dict[str, dict]:
    return {v["name"]: v for v in json.loads(result.stdout)["variants"]}


def test_two_variants_in_two_regions_are_built_tagged_and_recorded(workdir: Path) -> None:
    result = build_ami(workdir, "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    variants = summary(result)
    assert set(variants) == {"ceph", "arm"}
    assert builds(workdir) == ["arm", "ceph"]
    for name, variant in variants.items():
        assert variant["status"] == "built"
        assert set(variant["amis"]) == set(REGIONS)
        assert Path(workdir / variant["log"]).is_file()
        for region, ami in variant["amis"].items():
            ec2 = boto3.client("ec2", region_name=region)
            image = ec2.describe_images(ImageIds=[ami])["Images"][0]
            tags = {t["Key"]: t["Value"] for t in image.get("Tags", [])}
            assert {k[len(TAG_PREFIX):] for k in tags if k.startswith(TAG_PREFIX)} >= PROVENANCE_KEYS
            assert tags[f"{TAG_PREFIX}fingerprint"] == variant["fingerprint"]
            assert tags[f"{TAG_PREFIX}variant"] == name
            assert tags[f"{TAG_PREFIX}run-id"] == document["run_id"]
            assert tags[f"{TAG_PREFIX}source-ami"].startswith("ami-")  # filled in by Packer
            assert tags[f"{TAG_PREFIX}arch"] == ("arm64" if name == "arm" else "x86_64")
            snapshot = image["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"]
            snap = ec2.describe_snapshots(SnapshotIds=[snapshot])["Snapshots"][0]
            snap_tags = {t["Key"]: t["Value"] for t in snap.get("Tags", [])}
            assert snap_tags.get(f"{TAG_PREFIX}fingerprint") == variant["fingerprint"]
    record = json.loads((workdir / document["record"]).read_text())
    assert record["run_id"] == document["run_id"]
    assert {v["name"]: v["amis"] for v in record["variants"]} == {n: v["amis"] for n, v in variants.items()}
    assert all(v["inputs"]["name"] == v["name"] for v in record["variants"])
    runs = run_cli(workdir, "runs")
    assert document["run_id"] in runs.stdout and "2 built" in runs.stdout


def test_unchanged_variants_are_skipped_and_only_a_changed_one_rebuilds(workdir: Path) -> None:
    first = build_ami(workdir, "--json")
    assert first.returncode == 0, first.stderr
    second = build_ami(workdir, "--json")
    assert second.returncode == 0, second.stderr
    assert builds(workdir) == ["arm", "ceph"], "the second run started packer build"
    assert {n: v["status"] for n, v in summary(second).items()} == {"ceph": "skipped", "arm": "skipped"}
    assert {n: v["amis"] for n, v in summary(second).items()} == {n: v["amis"] for n, v in summary(first).items()}

    (workdir / "amibuild.hcl").write_text(PIPELINE.replace('["ceph-common"]', '["ceph-common", "htop"]'))
    third = build_ami(workdir, "--json")
    assert third.returncode == 0, third.stderr
    assert {n: v["status"] for n, v in summary(third).items()} == {"ceph": "built", "arm": "skipped"}
    assert builds(workdir) == ["arm", "ceph", "ceph"]

    forced = build_ami(workdir, "--json", "--force")
    assert {n: v["status"] for n, v in summary(forced).items()} == {"ceph": "built", "arm": "built"}
    assert builds(workdir) == ["arm", "arm", "ceph", "ceph", "ceph"]


def test_dry_run_prints_the_plan_and_builds_nothing(workdir: Path) -> None:
    result = build_ami(workdir, "--dry-run", "--json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["dry_run"] is True
    assert {v["name"]: v["decision"] for v in plan["variants"]} == {"ceph": "build", "arm": "build"}
    assert builds(workdir) == []
    assert not (workdir / "build").exists()


def test_a_failing_variant_does_not_stop_the_other_and_rerun_rebuilds_only_it(workdir: Path) -> None:
    (workdir / "amibuild.hcl").write_text(PIPELINE.replace('arch = "arm64"', 'source_ami = "ami-0000000000000dead"'))
    result = build_ami(workdir, "--json")
    assert result.returncode == 1, result.stderr
    variants = summary(result)
    assert variants["ceph"]["status"] == "built"
    assert variants["arm"]["status"] == "failed"
    assert "ami-0000000000000dead" in variants["arm"]["error"] or "source" in variants["arm"]["error"].lower()
    assert "arm" in result.stderr.splitlines()[-1] and "packer.log" in result.stderr.splitlines()[-1]

    again = build_ami(workdir, "--json")
    assert again.returncode == 1
    assert {n: v["status"] for n, v in summary(again).items()} == {"ceph": "skipped", "arm": "failed"}
    assert builds(workdir) == ["arm", "arm", "ceph"]


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["sigint", "sigterm"])
def test_interrupt_cancels_packer_cleans_up_and_exits_128_plus_the_signal(workdir: Path, sandbox, signum, code) -> None:
    from faultproxy import FaultProxy

    with FaultProxy(sandbox.endpoint) as proxy:
        # each Packer's first wait for its launched instance is held: both builds are at their launch
        launched = proxy.gate(["DescribeInstances"], count=2)
        env = {**os.environ, "AWS_ENDPOINT_URL": proxy.endpoint}
        proc = subprocess.Popen([sys.executable, "-m", "invoke", "-r", str(ROOT), "build-ami", "--json"],
                                cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if not launched.wait_held(2, timeout=90):
            proc.kill()
            pytest.fail("packer never reached the instance launch")
        proc.send_signal(signum)
        launched.release()
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert f"interrupted by {signal.Signals(signum).name}: nothing was published" in err
    assert json.loads(next((workdir / "build" / "runs").glob("*.json")).read_text())["signal"] == signal.Signals(signum).name
    assert {v["status"] for v in json.loads(out)["variants"]} <= {"interrupted", "built"}
    assert "interrupted" in {v["status"] for v in json.loads(out)["variants"]}
    for region in REGIONS:
        ec2 = boto3.client("ec2", region_name=region)
        states = [i["State"]["Name"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
        assert all(s in ("terminated", "shutting-down") for s in states), states
        assert not [k for k in ec2.describe_key_pairs()["KeyPairs"] if k["KeyName"].startswith("packer")]
        assert not [g for g in ec2.describe_security_groups()["SecurityGroups"] if g["GroupName"].startswith("packer")]
        assert our_parameters(region) == []


@pytest.mark.parametrize("module, step, flags", [
    ("amibuild.bake.sboms", "store_sboms", ()),  # while the built images' SBOMs are stored
    ("amibuild.jobs.image_inventory", "scan_document", ("--scan",)),  # while they are scanned
], ids=["storing", "scanning"])
def test_a_signal_after_the_build_is_recorded_with_the_images_built(workdir: Path, monkeypatch, module, step,
                                                                    flags) -> None:
    import importlib

    where = importlib.import_module(module)
    work = getattr(where, step)

    def signalled(*args, **kwargs):  # Ctrl-C in that step
        os.kill(os.getpid(), signal.SIGINT)
        return work(*args, **kwargs)

    monkeypatch.setattr(where, step, signalled)
    result = build_ami(workdir, "--json", "--variant", "ceph", *flags)
    assert result.returncode == 130, result.stderr
    (record,) = (workdir / "build" / "runs").glob("*.json")
    data = json.loads(record.read_text())
    assert (data["state"], data["interrupted"], data["signal"]) == ("finished", True, "SIGINT")
    (ceph,) = data["variants"]
    assert ceph["status"] == "built" and set(ceph["amis"]) == set(REGIONS) and not ceph.get("published")
    assert our_parameters("us-west-2") == []


def test_emulator_down_gives_a_clear_error_within_seconds(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    started = time.monotonic()
    result = build_ami(workdir)
    assert time.monotonic() - started < 15
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("amibuild: error: ")
    assert "cannot reach" in result.stderr
    assert builds(workdir) == []


def test_no_credentials_is_a_usage_error_before_any_aws_call(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    result = build_ami(workdir)
    assert result.returncode == 2
    assert "no AWS credentials" in result.stderr
    assert not (workdir / "build").exists()


def test_a_new_eks_optimized_release_rebuilds_only_the_variants_it_affects(workdir: Path, sandbox) -> None:
    first = build_ami(workdir, "--json")
    assert first.returncode == 0, first.stderr
    sandbox.release("1.35", os="al2023", arch="arm64")  # AWS publishes a newer arm64 image
    second = build_ami(workdir, "--json")
    assert second.returncode == 0, second.stderr
    assert {n: v["status"] for n, v in summary(second).items()} == {"ceph": "skipped", "arm": "built"}
    assert summary(second)["arm"]["fingerprint"] != summary(first)["arm"]["fingerprint"]


def test_a_build_past_its_timeout_fails_and_cleans_up(workdir: Path, sandbox) -> None:
    from faultproxy import FaultProxy

    with FaultProxy(sandbox.endpoint) as proxy:
        # Packer's first wait for its instance is held past the timeout; what it does after is not
        launched = proxy.gate(["DescribeInstances"], count=1)
        env = {**os.environ, "AWS_ENDPOINT_URL": proxy.endpoint}
        result = run_cli(workdir, "build-ami", "--json", "--variant", "ceph", "--timeout", "2", env=env)
        assert launched.held == 1
        launched.release()
    assert result.returncode == 1, result.stderr
    ceph = summary(result)["ceph"]
    assert ceph["status"] == "failed"
    assert "timed out after 2s" in ceph["error"]
    ec2 = boto3.client("ec2", region_name="us-west-2")
    states = [i["State"]["Name"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    assert all(s in ("terminated", "shutting-down") for s in states), states


def test_a_variant_packer_refuses_fails_alone_before_any_instance(workdir: Path) -> None:
    (workdir / "amibuild.hcl").write_text(PIPELINE.replace('arch = "arm64"', 'arch = "arm64"\n  volume_type = "io1"'))
    result = build_ami(workdir, "--json")
    assert result.returncode == 1, result.stderr
    variants = summary(result)
    assert variants["ceph"]["status"] == "built"
    assert variants["arm"]["status"] == "failed"
    # the refusal is of a value the pipeline file set: the error names it (exit stays 1: ceph was built)
    assert 'variant "arm": volume_type: Packer refuses the value of volume_type' in variants["arm"]["error"]
    # `packer build` itself refuses the template before its first step: no instance for arm
    ec2 = boto3.client("ec2", region_name="us-west-2")
    names = [t["Value"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]
             for t in i.get("Tags", []) if t["Key"] == "Name"]
    assert names and all("ceph" in n for n in names), names


def test_a_build_where_packer_refuses_only_values_the_user_gave_is_bad_input(workdir: Path) -> None:
    """Nothing built, every failure a refusal of the user's value: exit 2 and one line naming it."""
    result = build_ami(workdir, "--variant", "arm", "--var", "volume_type=io1")
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("amibuild: error: --var volume_type: Packer refuses the value of volume_type")
    # `packer build` refused the template before its first step: no instance was launched
    assert boto3.client("ec2", region_name="us-west-2").describe_instances()["Reservations"] == []


def test_build_publishes_to_recommended_and_an_unchanged_rerun_writes_no_version(workdir: Path) -> None:
    first = build_ami(workdir, "--json")
    assert first.returncode == 0, first.stderr
    for name, variant in summary(first).items():
        parameter = variant["published"]["parameter"]
        assert parameter == f"/amibuild/e2e/1.35/{name}/recommended/image_id"
        for region, ami in variant["amis"].items():
            ssm = boto3.client("ssm", region_name=region)
            got = ssm.get_parameter(Name=parameter)["Parameter"]
            assert got["Value"] == ami
            assert got["DataType"] == "aws:ec2:image"
            assert got["Version"] == 1
    again = build_ami(workdir, "--json")
    assert again.returncode == 0, again.stderr
    for variant in summary(again).values():
        assert set(variant["published"]["regions"].values()) == {"unchanged"}
        for region in REGIONS:
            history = boto3.client("ssm", region_name=region).get_parameter_history(
                Name=variant["published"]["parameter"])["Parameters"]
            assert len(history) == 1


def test_no_publish_builds_but_writes_no_parameter(workdir: Path) -> None:
    result = build_ami(workdir, "--json", "--no-publish")
    assert result.returncode == 0, result.stderr
    assert all(v["status"] == "built" and v["published"] == {} for v in summary(result).values())
    for region in REGIONS:
        assert our_parameters(region) == []


def missing_shares(amis: dict[str, str], account: str) -> set[tuple[str, str]]:
    """(region, image or snapshot id) lacking a permission for `account`, read straight from EC2."""
    missing = set()
    for region, ami in amis.items():
        ec2 = boto3.client("ec2", region_name=region)
        launch = ec2.describe_image_attribute(ImageId=ami, Attribute="launchPermission")["LaunchPermissions"]
        if {"UserId": account} not in launch:
            missing.add((region, ami))
        image = ec2.describe_images(ImageIds=[ami])["Images"][0]
        for mapping in image["BlockDeviceMappings"]:
            snapshot = mapping["Ebs"]["SnapshotId"]
            users = ec2.describe_snapshot_attribute(SnapshotId=snapshot, Attribute="createVolumePermission")
            if {"UserId": account} not in users["CreateVolumePermissions"]:
                missing.add((region, snapshot))
    return missing


def test_build_with_ami_users_reports_exactly_the_missing_permissions(workdir: Path) -> None:
    """Packer 1.6.6 against the emulator leaves the copied snapshot unshared; the check must say
    exactly what EC2 says is missing, and notice a launch permission taken away."""
    account = "111122223333"
    (workdir / "amibuild.hcl").write_text(PIPELINE.replace('copy_to = ["eu-west-1"]',
                                                           f'copy_to = ["eu-west-1"]\n  ami_users = ["{account}"]'))
    result = build_ami(workdir, "--json", "--variant", "ceph")
    assert result.returncode == 0, result.stderr
    amis = summary(result)["ceph"]["amis"]
    launch = boto3.client("ec2", region_name="us-west-2").describe_image_attribute(
        ImageId=amis["us-west-2"], Attribute="launchPermission")["LaunchPermissions"]
    assert {"UserId": account} in launch  # Packer shared the image itself

    def reported(document: dict) -> set[tuple[str, str]]:
        """(region, image or snapshot id) from the summary's sharing lines."""
        out = set()
        for line in document["sharing"]:
            match = re.match(r"^ceph: ([a-z0-9-]+): (ami-\w+) (?:snapshot (snap-\w+) volume|launch) permission "
                             rf"missing for {account}$", line)
            assert match, line
            out.add((match.group(1), match.group(3) or match.group(2)))
        return out

    assert reported(json.loads(result.stdout)) == missing_shares(amis, account)

    boto3.client("ec2", region_name="eu-west-1").modify_image_attribute(
        ImageId=amis["eu-west-1"], LaunchPermission={"Remove": [{"UserId": account}]})
    again = json.loads(build_ami(workdir, "--json", "--variant", "ceph").stdout)
    assert ("eu-west-1", amis["eu-west-1"]) in reported(again)
    assert reported(again) == missing_shares(amis, account)


def test_interrupt_while_publishing_finishes_the_variants_in_flight_and_starts_no_other(workdir: Path, sandbox) -> None:
    from faultproxy import FaultProxy

    names = [f"v{i}" for i in range(6)]
    (workdir / "amibuild.hcl").write_text('pipeline {\n  name = "e2e"\n  regions = ["us-west-2"]\n}\n' + "".join(
        f'variant "{n}" {{\n  extra_packages = ["{n}"]\n}}\n' for n in names))
    with FaultProxy(sandbox.endpoint) as proxy:
        # the channel writes (not the leases) wait until the test lets them go
        gate = proxy.gate(["AmazonSSM.PutParameter"], name="/image_id", count=None)
        # a held write must wait for the release, not time out (10 s) on a loaded machine and retry
        env = {**os.environ, "AWS_ENDPOINT_URL": proxy.endpoint, "INVOKE_AMIBUILD_READ_TIMEOUT": "300",
               "INVOKE_AMIBUILD_CHANNEL_DEADLINE": "600"}
        proc = subprocess.Popen([sys.executable, "-m", "invoke", "-r", str(ROOT), "build-ami", "--json"],
                                cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # publishing has started: the first writes of 4 variants at once are held
        assert gate.wait_held(4, timeout=90), "publishing never started"
        proc.send_signal(signal.SIGINT)
        seen = []
        for line in proc.stderr:  # the handler has run: no other variant starts now
            seen.append(line)
            if "SIGINT: finishing" in line:
                break
        gate.release()
        out, rest = proc.communicate(timeout=120)
        err = "".join(seen) + rest
    assert proc.returncode == 130, err
    variants = summary(subprocess.CompletedProcess([], 0, out, err))
    published = sorted(n for n, v in variants.items() if v["published"])
    assert 1 <= len(published) < len(names), variants
    assert all(variants[n]["publish_error"] for n in names if n not in published)
    assert f"published before the interrupt: {', '.join(published)}" in err.strip().splitlines()[-1]
    written = {name.split("/")[4] for name in our_parameters("us-west-2")}
    assert sorted(written) == published
    assert json.loads(out)["interrupted"] is True


def test_the_pipeline_file_names_the_parameter_template_and_default_channel(workdir: Path) -> None:
    (workdir / "amibuild.hcl").write_text(PIPELINE.replace(
        'copy_to = ["eu-west-1"]',
        'copy_to = ["eu-west-1"]\n  parameter_template = "{prefix}/{variant}/{arch}/{channel}"\n'
        '  default_channel = "nightly"'))
    result = build_ami(workdir, "--json", "--variant", "arm")
    assert result.returncode == 0, result.stderr
    assert summary(result)["arm"]["published"]["parameter"] == "/amibuild/arm/arm64/nightly"
    assert our_parameters("eu-west-1") == ["/amibuild/arm/arm64/nightly"]
    listed = run_cli(workdir, "channels", "--json")
    rows = [r for r in json.loads(listed.stdout) if r["ami"]]
    assert {(r["variant"], r["channel"], r["region"]) for r in rows} == {
        ("arm", "nightly", "us-west-2"), ("arm", "nightly", "eu-west-1")}
