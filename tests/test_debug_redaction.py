"""Credentials never reach the terminal: `invoke --debug` (botocore's debug log: request headers,
canonical requests) and AMIBUILD_DEBUG=1, for every task that calls AWS."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from amibuild import redact

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "SENTINELsessionTOKEN0123456789abcdefDONOTPRINT"
SECRET = "SENTINELsecretKEY0123456789abcdefDONOTPRINT"

PIPELINE = """\
pipeline {
  name    = "dbg"
  regions = ["us-west-2"]
}

variant "v" {
}
"""

# every task that calls AWS, with arguments that reach AWS (success or a refusal from AWS)
TASKS = [
    ("render", ["render"]),
    ("validate", ["validate"]),
    ("build-ami", ["build-ami", "--dry-run"]),
    ("publish", ["publish", "--variant", "v", "--ami", "us-west-2=ami-0123456789abcdef0"]),
    ("promote", ["promote", "--variant", "v", "--from", "recommended", "--to", "stable"]),
    ("rollback", ["rollback", "--variant", "v", "--channel", "stable"]),
    ("history", ["history", "--variant", "v"]),
    ("channels", ["channels"]),
    ("rollout", ["rollout", "--stack", "missing"]),
    ("nodegroup-deploy", ["nodegroup-deploy", "--stack", "missing"]),
    ("aws-auth", ["aws-auth", "--stack", "missing"]),
    ("prune", ["prune", "--keep", "1", "--dry-run"]),
    ("doctor", ["doctor"]),
    ("verify", ["verify", "--variant", "v", "--channel", "recommended"]),
]


@pytest.fixture
def workdir(tmp_path: Path, sandbox, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    return tmp_path


def run(workdir: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # A real process, not conftest.run_cli: what is checked is the logging a whole process gets
    # under --debug (invoke's logging.basicConfig on an unconfigured root logger, botocore's
    # loggers), which pytest's own handlers on the root logger would change in process.
    return subprocess.run([sys.executable, "-m", "invoke", "-r", str(ROOT), *args], cwd=workdir,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("args", [t[1] for t in TASKS], ids=[t[0] for t in TASKS])
def test_debug_output_never_holds_the_session_token_or_secret_key(workdir: Path, args: list[str]) -> None:
    result = run(workdir, "--debug", *args)
    output = result.stdout + result.stderr
    # the control: botocore really logged signed requests (headers included) under --debug
    assert "x-amz-security-token" in output.lower(), output[-2000:]
    assert TOKEN not in output and SECRET not in output
    assert TOKEN[:20] not in output and SECRET[:20] not in output


@pytest.mark.parametrize("args", [TASKS[7][1], TASKS[4][1]], ids=["channels", "promote"])
def test_amibuild_debug_output_never_holds_them_either(workdir: Path, args: list[str]) -> None:
    result = run(workdir, *args, env={"AMIBUILD_DEBUG": "1", "INVOKE_DEBUG": "1"})
    output = result.stdout + result.stderr
    assert "x-amz-security-token" in output.lower(), output[-2000:]
    assert TOKEN not in output and SECRET not in output


@pytest.mark.parametrize("line", [
    "Sending http request: <AWSPreparedRequest stream_output=False, method=POST, url=https://ssm/, "
    "headers={'X-Amz-Target': b'AmazonSSM.GetParameter', 'X-Amz-Security-Token': b'FromAProfile12345', "
    "'Authorization': b'AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/20250101/us-west-2/ssm/aws4_request, "
    "SignedHeaders=host, Signature=abcdef0123456789'}>",
    "CanonicalRequest:\nPOST\n/\n\nhost:ssm\nx-amz-security-token:FromAProfile12345\n",
    "https://bucket.s3.amazonaws.com/k?X-Amz-Credential=AKIAEXAMPLE%2F20250101&X-Amz-Security-Token=FromAProfile12345"
    "&X-Amz-Signature=abcdef0123456789",
    "{'aws_secret_access_key': 'FromAProfile12345', \"SessionToken\": \"FromAProfile12345\"}",
    # STS's answer to AssumeRole (a profile with role_arn), as botocore logs its body
    "Response body:\nb'<AssumeRoleResponse><AssumeRoleResult><Credentials><AccessKeyId>ASIAEXAMPLE</AccessKeyId>"
    "<SecretAccessKey>FromAProfile12345</SecretAccessKey><SessionToken>FromAProfile12345</SessionToken>"
    "<Expiration>2026-01-01T00:00:00Z</Expiration></Credentials></AssumeRoleResult></AssumeRoleResponse>'",
])
def test_headers_query_strings_and_fields_are_redacted_by_name(line: str) -> None:
    """Values amibuild was never told about (a token from a profile) are caught by their names."""
    text = redact.redact(line)
    assert "FromAProfile12345" not in text and "AKIAEXAMPLE" not in text
    assert "abcdef0123456789" not in text
    assert redact.REDACTED in text


def test_the_filter_rewrites_a_record_with_arguments(caplog: pytest.LogCaptureFixture) -> None:
    redact.add_secret("KnownSecretValue987")
    record = logging.LogRecord("botocore.endpoint", logging.DEBUG, __file__, 1, "token %s and %s", (
        "KnownSecretValue987", {"X-Amz-Security-Token": "Other-Value-123"}), None)
    assert redact.Redact().filter(record) is True
    assert "KnownSecretValue987" not in record.getMessage()
    assert "Other-Value-123" not in record.getMessage()


def test_debug_output_never_holds_the_credentials_an_assumed_role_got(workdir: Path, tmp_path: Path) -> None:
    """A profile with role_arn: botocore logs STS's AssumeRole answer, the role's secret key and
    session token in XML, before amibuild has seen them."""
    (tmp_path / "config").write_text("[profile base]\nregion = us-west-2\n\n[profile builder]\n"
                                     "role_arn = arn:aws:iam::123456789012:role/builder\nsource_profile = base\n")
    (tmp_path / "credentials").write_text("[base]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"
                                          f"aws_secret_access_key = {SECRET}\n")
    result = run(workdir, "--debug", "channels", env={"AWS_PROFILE": "builder", "AWS_CONFIG_FILE": str(tmp_path / "config"),
                                                      "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials")})
    output = result.stdout + result.stderr
    assert "<AssumeRoleResponse" in output, output[-2000:]  # the control: the role was assumed, its answer logged
    assert result.returncode == 0, output[-2000:]
    for field in ("SecretAccessKey", "SessionToken"):
        assert f"<{field}>{redact.REDACTED}</{field}>" in output
        assert not re.search(f"<{field}>(?!{re.escape(redact.REDACTED)}<)", output), field
