"""AWS failures become one-line amibuild errors at the gateway, quickly.

AWS's error responses are replayed with botocore's Stubber on the gateway's own client (the
emulator cannot expire a token or deny an action); the unreachable endpoint is real.
"""

from __future__ import annotations

import socket
import time

import pytest
from botocore.stub import Stubber

from amibuild import errors
from amibuild.aws import Aws

CASES = [
    ("ExpiredTokenException", "The security token included in the request is expired", errors.ExpiredToken, 2,
     "expired"),
    ("AccessDeniedException", "User: arn:aws:iam::123456789012:user/ci is not authorized to perform: "
     "ssm:GetParameter", errors.AccessDenied, 1, "ssm:GetParameter"),
    ("ParameterNotFound", "Parameter /x not found.", errors.NotFound, 1, "not found"),
    ("InternalServerError", "boom", errors.AwsError, 1, "InternalServerError"),
]


@pytest.mark.parametrize("code,message,exc_type,exit_code,words", CASES, ids=[c[0] for c in CASES])
def test_aws_error_codes_map_to_amibuild_errors(monkeypatch, code, message, exc_type, exit_code, words) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    aws = Aws(region="us-west-2")
    with Stubber(aws.client("ssm", "us-west-2")) as stub:
        stub.add_client_error("get_parameter", service_error_code=code, service_message=message, http_status_code=400)
        with pytest.raises(exc_type) as caught:
            aws.get_parameter("/x", "us-west-2")
    assert type(caught.value) is exc_type
    assert caught.value.exit_code == exit_code
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)
    assert "in us-west-2" in str(caught.value)


def test_missing_credentials_is_a_usage_error(monkeypatch) -> None:
    aws = Aws(region="us-west-2")
    assert aws.has_credentials() is False
    with pytest.raises(errors.NoCredentials) as caught:
        aws.get_parameter("/x", "us-west-2")
    assert caught.value.exit_code == 2
    assert "AWS_PROFILE" in str(caught.value)


def test_unreachable_endpoint_fails_within_seconds(monkeypatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    started = time.monotonic()
    with pytest.raises(errors.EndpointUnreachable) as caught:
        Aws(region="us-west-2").describe_images("us-west-2", owners=["self"])
    assert time.monotonic() - started < 10
    assert f"127.0.0.1:{port}" in str(caught.value)
