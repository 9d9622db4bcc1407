"""`invoke doctor`: one line per check, ok or what to do; exit 1 when a check fails."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from amibuild.cli.run import DOCTOR_HINTS
from amibuild.jobs import doctor_job
from amibuild.pipeline.options import Options
from conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "amibuild.hcl"
EMULATOR = doctor_job.Hints(**DOCTOR_HINTS)  # the hints the cli gives doctor: run `amibuild sandbox`

needs_packer = pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")


def report(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """Check name -> its whole line, from doctor's stdout."""
    out = {}
    for line in result.stdout.splitlines():
        status, name = line.split(None, 2)[:2]
        assert status in ("ok", "WARN", "FAIL"), line
        out[name.rstrip(":")] = line
    return out


def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def fake_packer(tmp_path: Path, version: str) -> str:
    path = tmp_path / f"packer-{version}"
    path.write_text(f'#!/bin/sh\necho "Packer v{version}"\n')
    path.chmod(0o755)
    return str(path)


# ------------------------------------------------------------------------------------ packer


def test_packer_missing_names_the_install_command() -> None:
    check = doctor_job.check_packer("/nonexistent/bin/packer")
    assert not check.ok
    assert "not found" in check.message and "apt-get install -y packer" in check.message


@pytest.mark.parametrize("version,ok,words", [
    ("1.5.4", False, ["1.5.4", "older than 1.6.0", "apt-get install -y packer"]),
    ("1.6.6", True, ["1.6.6", "no IMDSv2 settings on the build instance; 1.7+ recommended"]),
    ("1.11.2", True, ["1.11.2", "IMDSv2 settings on the build instance"]),
])
def test_packer_version_decides_ok_and_says_what_it_lacks(tmp_path: Path, version: str, ok: bool, words) -> None:
    check = doctor_job.check_packer(fake_packer(tmp_path, version))
    assert check.ok is ok, check
    for word in words:
        assert word in check.message, check.message
    if version == "1.11.2":
        assert "recommended" not in check.message


def test_doctor_on_a_machine_without_packer(tmp_path: Path) -> None:
    """PATH holds only python: the CLI still starts, and the packer line says how to install it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    result = run_cli(tmp_path, "doctor", "--pipeline", str(EXAMPLE), env={"PATH": str(bin_dir)})
    assert result.returncode == 1, result.stderr
    lines = report(result)
    assert lines["packer"].startswith("FAIL packer: not found")
    assert "apt-get install -y packer" in lines["packer"]
    assert lines["pipeline"].startswith("ok"), "the other checks still ran"
    assert result.stderr.strip().splitlines() == ["amibuild: error: doctor: 2 check(s) failed: packer, credentials"]


# ------------------------------------------------------------------------------------ AWS side


def test_endpoint_check_reports_a_closed_port_in_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    started = time.monotonic()
    check = doctor_job.check_endpoints(hints=EMULATOR)
    assert time.monotonic() - started < doctor_job.CONNECT_TIMEOUT + 1
    assert not check.ok
    assert f"AWS_ENDPOINT_URL={url}" in check.message and "unreachable" in check.message
    assert "amibuild sandbox" in check.message


def test_endpoint_check_refuses_a_url_without_scheme(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", "127.0.0.1:5000")
    check = doctor_job.check_endpoints(hints=EMULATOR)
    assert not check.ok and "AWS_ENDPOINT_URL_EC2" in check.message and "http://" in check.message


def test_doctor_with_the_emulator_down_exits_1_within_seconds(tmp_path: Path) -> None:
    env = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{closed_port()}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-west-2",
    }
    started = time.monotonic()
    result = run_cli(tmp_path, "doctor", "--pipeline", str(EXAMPLE), env=env)
    elapsed = time.monotonic() - started
    assert result.returncode == 1, result.stderr
    lines = report(result)
    assert lines["endpoint"].startswith("FAIL endpoint: AWS_ENDPOINT_URL=http://127.0.0.1:")
    assert "unreachable" in lines["endpoint"] and "connection refused" in lines["endpoint"]
    assert lines["credentials"].startswith("ok")
    assert "identity" not in lines, "no AWS call once the endpoint is known to be dead"
    assert elapsed < 10, f"took {elapsed:.1f}s"


@pytest.mark.parametrize("json_output", [False, True], ids=["text", "json"])
def test_doctor_masks_a_password_in_an_endpoint_url(tmp_path: Path, json_output: bool) -> None:
    env = {"AWS_ENDPOINT_URL": f"http://user:s3cretpw@127.0.0.1:{closed_port()}", "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-west-2"}
    result = run_cli(tmp_path, "doctor", "--pipeline", str(EXAMPLE), *(["--json"] if json_output else []), env=env)
    assert result.returncode == 1, result.stderr
    assert "s3cretpw" not in result.stdout + result.stderr
    assert "http://user:***@127.0.0.1:" in result.stdout


def test_no_credentials_says_what_to_set() -> None:
    aws, check = doctor_job.check_credentials(None, hints=EMULATOR)
    assert aws is not None and not check.ok
    assert "AWS_PROFILE" in check.message and "amibuild sandbox" in check.message


def test_a_missing_profile_is_a_failed_check_not_a_crash() -> None:
    aws, check = doctor_job.check_credentials("nope", hints=EMULATOR)
    assert aws is None and not check.ok
    assert "nope" in check.message


@pytest.mark.parametrize("config, profile, says", [
    ("[profile p]\nrole_arn = arn:aws:iam::123456789012:role/x\nsource_profile = gone\n", "p",
     'The source_profile "gone" referenced in the profile "p" does not exist; fix profile p in ~/.aws/config'),
    ("[default]\ncredential_process = /nonexistent/amibuild-creds\n", None,
     "[Errno 2] No such file or directory: '/nonexistent/amibuild-creds'; fix profile default in"),
    ("[default\nregion = us-west-2\n", None, "Unable to parse config file: {config}; fix that file"),
])
def test_a_broken_profile_or_config_file_says_what_is_wrong(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            config: str, profile: str | None, says: str) -> None:
    """A broken profile said "none found; set AWS_PROFILE ...", a file botocore cannot parse "or create
    it with `aws configure`": neither what to fix."""
    path = tmp_path / "config"
    path.write_text(config)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(path))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    _, check = doctor_job.check_credentials(profile, hints=EMULATOR)
    assert not check.ok and check.message.startswith(says.format(config=path)), check.message


def test_no_region_anywhere_says_where_builds_would_go() -> None:
    check = doctor_job.check_region(None, "", "", None)
    assert not check.ok and "us-west-2" in check.message and "AWS_REGION" in check.message


def test_a_mistyped_region_fails_the_region_check_not_the_pipeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "amibuild.hcl").write_text('variant "plain" {\n}\n')  # no regions in the file
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AWS_REGION", "us-wset-2")
    results = {c.name: c for c in doctor_job.checks(Options(packer="/nonexistent/packer"), hints=EMULATOR)}
    assert results["pipeline"].ok, results["pipeline"]
    assert not results["region"].ok
    assert "AWS_REGION=us-wset-2" in results["region"].message and "'us-west-2'" in results["region"].message


@needs_packer
def test_doctor_against_the_sandbox_is_all_ok(sandbox, tmp_path: Path) -> None:
    result = run_cli(tmp_path, "doctor", "--pipeline", str(EXAMPLE))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = report(result)
    assert list(lines) == ["packer", "pipeline", "kubernetes", "region", "credentials", "endpoint", "identity"]
    # The example's AL2 variant is on 1.32, past EKS standard support: a warning, not a failure.
    assert all(line.startswith("ok   ") for name, line in lines.items() if name != "kubernetes"), result.stdout
    assert lines["kubernetes"].startswith("WARN ") and "variant ceph-al2: Kubernetes 1.32" in lines["kubernetes"]
    assert "variant ceph:" not in lines["kubernetes"]
    assert "3 variant(s)" in lines["pipeline"]  # the example's opt-in ceph-upstream (enabled = false) is left out
    assert "builds in us-west-2" in lines["region"] and "eu-west-1" in lines["region"]
    assert "account 123456789012" in lines["identity"]

    as_json = run_cli(tmp_path, "doctor", "--pipeline", str(EXAMPLE), "--json")
    assert as_json.returncode == 0, as_json.stderr
    checks = json.loads(as_json.stdout)
    assert [c["name"] for c in checks] == list(lines) and all(c["ok"] for c in checks)


# ------------------------------------------------------------------------------------ pipeline


def test_doctor_reports_the_pipeline_files_own_message(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text('pipeline {\n  name = = "t"\n}\n')
    result = run_cli(tmp_path, "doctor")
    assert result.returncode == 1
    lines = report(result)
    assert lines["pipeline"].startswith("FAIL pipeline: amibuild.hcl:2: HCL syntax error")
    assert "Traceback" not in result.stderr


def test_doctor_json_carries_the_failures_and_still_exits_1(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "doctor", "--json")
    assert result.returncode == 1
    checks = {c["name"]: c for c in json.loads(result.stdout)}
    assert checks["credentials"]["ok"] is False
    assert checks["pipeline"]["ok"] is True and "flags alone" in checks["pipeline"]["message"]
    assert result.stderr.strip().startswith("amibuild: error: doctor:")
