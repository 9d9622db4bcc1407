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


def _dead_endpoint(monkeypatch) -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    return f"127.0.0.1:{port}"


@pytest.mark.parametrize("call", ["describe_images", "channel_read"])
def test_connection_errors_are_tried_a_bounded_number_of_times(monkeypatch, call) -> None:
    """Counted, not timed: every client (the SSM channel client with its 10 attempts for throttling
    included) gives up on a dead endpoint after CONNECT_ATTEMPTS tries."""
    from amibuild import aws as aws_mod

    where = _dead_endpoint(monkeypatch)
    aws = Aws(region="us-west-2")
    client = aws.client("ec2", "us-west-2") if call == "describe_images" else aws._ssm_channels("us-west-2")
    sent: list[str] = []
    client.meta.events.register("before-send", lambda request, **_: sent.append(request.url))
    with pytest.raises(errors.EndpointUnreachable) as caught:
        if call == "describe_images":
            aws.describe_images("us-west-2", owners=["self"])
        else:
            aws.find_parameter("/amibuild/x/recommended/image_id", "us-west-2")
    assert where in str(caught.value)
    assert len(sent) == aws_mod.CONNECT_ATTEMPTS
    assert aws_mod.CONNECT_ATTEMPTS < aws.ssm_write_attempts  # throttling still gets its longer budget


def test_the_dead_endpoint_hook_leaves_other_errors_to_the_retry_handler() -> None:
    from botocore.exceptions import EndpointConnectionError, ReadTimeoutError

    from amibuild.aws import CONNECT_ATTEMPTS, give_up_on_dead_endpoint

    dead = EndpointConnectionError(endpoint_url="http://127.0.0.1:1")
    assert give_up_on_dead_endpoint(attempts=CONNECT_ATTEMPTS - 1, caught_exception=dead) is None
    with pytest.raises(EndpointConnectionError):
        give_up_on_dead_endpoint(attempts=CONNECT_ATTEMPTS, caught_exception=dead)
    slow = ReadTimeoutError(endpoint_url="http://127.0.0.1:1")
    assert give_up_on_dead_endpoint(attempts=5, caught_exception=slow) is None
    assert give_up_on_dead_endpoint(attempts=5, caught_exception=None) is None  # a throttled answer


_SSO_CONFIG = """\
[profile legacy]
sso_start_url = https://example.awsapps.com/start
sso_region = us-east-1
sso_account_id = 123456789012
sso_role_name = Admin

[profile session]
sso_session = corp
sso_account_id = 123456789012
sso_role_name = Admin

[sso-session corp]
sso_start_url = https://corp.awsapps.com/start
sso_region = us-east-1
"""


def _sso_profiles(monkeypatch, tmp_path, cached: tuple[str, ...]) -> None:
    """The two SSO profile forms, with an expired token in the SSO cache for each of ``cached``
    (the legacy start URL, or the session's name)."""
    import hashlib
    import json

    home = tmp_path / "home"
    cache = home / ".aws" / "sso" / "cache"
    cache.mkdir(parents=True)
    (home / ".aws" / "config").write_text(_SSO_CONFIG)
    for key in cached:
        (cache / f"{hashlib.sha1(key.encode()).hexdigest()}.json").write_text(json.dumps(
            {"startUrl": "https://example.awsapps.com/start", "region": "us-east-1", "accessToken": "x",
             "expiresAt": "2020-01-01T00:00:00Z"}))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(home / ".aws" / "config"))
    # botocore reads ~/.aws/sso/cache once, when it is imported
    from botocore import credentials, tokens

    monkeypatch.setattr(credentials.SSOProvider, "_SSO_TOKEN_CACHE_DIR", str(cache))
    monkeypatch.setattr(tokens.SSOTokenProvider, "_SSO_TOKEN_CACHE_DIR", str(cache))


@pytest.mark.parametrize("profile", ["legacy", "session"])
def test_an_expired_sso_login_is_an_expired_token(monkeypatch, tmp_path, profile) -> None:
    """botocore says so before any call, in its own exceptions (UnauthorizedSSOTokenError for a
    legacy profile, TokenRetrievalError for an sso-session one): the same line and exit 2 as AWS's
    ExpiredToken, not an AWS failure (exit 1)."""
    _sso_profiles(monkeypatch, tmp_path, ("https://example.awsapps.com/start", "corp"))
    with pytest.raises(errors.ExpiredToken) as caught:
        Aws(profile=profile, region="us-west-2").get_parameter("/x", "us-west-2")
    assert caught.value.exit_code == 2
    assert "expired" in str(caught.value) and "aws sso login" in str(caught.value)
    assert "in us-west-2" in str(caught.value) and "\n" not in str(caught.value)


def test_an_sso_profile_never_logged_in_has_no_credentials(monkeypatch, tmp_path) -> None:
    _sso_profiles(monkeypatch, tmp_path, ())
    with pytest.raises(errors.NoCredentials) as caught:
        Aws(profile="session", region="us-west-2").get_parameter("/x", "us-west-2")
    assert caught.value.exit_code == 2
    assert "aws sso login" in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("profile,words", [
    ("broken", 'The source_profile "missing" referenced in the profile "broken" does not exist'),
    ("partial", "Partial credentials found in config-file, missing: aws_secret_access_key"),
])
def test_a_profile_written_wrong_is_bad_input_naming_it(monkeypatch, tmp_path, profile, words) -> None:
    """As a profile that does not exist (exit 2): a role profile whose source_profile does not exist, a
    key id without its secret key. They were an AWS failure, exit 1."""
    (tmp_path / "config").write_text(
        "[profile broken]\nrole_arn = arn:aws:iam::123456789012:role/builder\nsource_profile = missing\n\n"
        "[profile partial]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    with pytest.raises(errors.UsageError) as caught:
        Aws(profile=profile, region="us-west-2").get_parameter("/x", "us-west-2")
    assert caught.value.exit_code == 2
    assert words in str(caught.value) and "~/.aws/config" in str(caught.value)
    assert "\n" not in str(caught.value)
