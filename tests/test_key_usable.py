"""`accounts.key_usable` through the emulator: AWS's answer to the DryRun CreateGrant is the verdict on
the key; no answer at all (the endpoint gone mid-call) is an amibuild error, as for DescribeKey,
never a raw botocore exception and never a verdict."""

from __future__ import annotations

import threading

import boto3
import pytest
from faultproxy import FaultProxy

from amibuild.aws import Aws
from amibuild.aws.accounts import account_root, key_usable
from amibuild.errors import EndpointUnreachable

REGION = "us-west-2"
GRANTEE = "arn:aws:iam::123456789012:root"


def _key() -> str:
    return boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["KeyId"]


def test_a_key_the_account_may_use_is_usable(sandbox) -> None:
    assert key_usable(Aws(region=REGION), _key(), REGION, GRANTEE) == ""


def test_no_answer_to_the_dry_run_grant_is_an_amibuild_error(sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    key = _key()
    got: dict[str, BaseException | str] = {}

    def ask() -> None:
        try:
            got["answer"] = key_usable(Aws(region=REGION, max_attempts=1), key, REGION, GRANTEE)
        except BaseException as exc:  # handed to the test's thread
            got["error"] = exc

    with FaultProxy(sandbox.endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        proxy.pause(["TrentService.CreateGrant"])  # DescribeKey passes; the grant's request is held ...
        asking = threading.Thread(target=ask)
        asking.start()
        for _ in range(600):
            if proxy.paused() or not asking.is_alive():
                break
            asking.join(0.1)
        assert proxy.paused() == 1, got
        proxy.die()  # ... and its connection closed unanswered, the endpoint gone
        asking.join(60)
    assert "answer" not in got, got
    assert isinstance(got["error"], EndpointUnreachable), repr(got["error"])
    assert "kms:CreateGrant" in str(got["error"]) and "(DryRun)" in str(got["error"])


@pytest.mark.parametrize(("caller", "root"), [
    ("arn:aws:sts::123456789012:assumed-role/platform/ci", "arn:aws:iam::123456789012:root"),
    ("arn:aws-cn:iam::210987654321:user/ops", "arn:aws-cn:iam::210987654321:root"),
    ("arn:aws-us-gov:sts::111122223333:assumed-role/r/s", "arn:aws-us-gov:iam::111122223333:root"),
])
def test_the_grantee_is_the_callers_account_root_in_the_callers_partition(caller: str, root: str) -> None:
    # doctor --consumer asks CreateGrant (DryRun) for this principal: in aws-cn, arn:aws:... names no one
    assert account_root(caller) == root
