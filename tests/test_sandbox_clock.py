"""The emulator's clock (`amibuild.sandbox.clock`): a test moves it, and both the time AWS answers
with (the Date header) and SSM's parameter timestamps follow; the gateway reads that time
(`Aws.dated_history`), also through the fault proxy, which forwards the upstream's Date."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import boto3
import pytest

from amibuild.aws import Aws, answered_at
from amibuild.sandbox import Sandbox, SandboxError
from amibuild.sandbox.clock import Clock
from tests.faultproxy import FaultProxy

NAME = "/clock-test/image_id"


def put(value: str = "ami-0123456789abcdef0", region: str = "us-west-2") -> None:
    boto3.client("ssm", region_name=region).put_parameter(Name=NAME, Value=value, Type="String", Overwrite=True)


def test_moving_the_clock_moves_the_date_header_and_the_parameter_timestamps(sandbox: Sandbox):
    start = sandbox.clock()
    assert abs((start - datetime.now(timezone.utc)).total_seconds()) < 5  # it starts at the real time
    put()
    moved = sandbox.advance_clock(4 * 86400)
    assert moved - start >= timedelta(days=4)
    put("ami-0fedcba9876543210")
    history = Aws(region="us-west-2").dated_history(NAME, "us-west-2")
    first, second = history.versions
    assert second.last_modified - first.last_modified >= timedelta(days=4)
    assert history.answered_at is not None and history.answered_at - start >= timedelta(days=4, seconds=-1)  # whole seconds
    assert abs((history.answered_at - moved).total_seconds()) < 5


def test_the_clock_is_set_forward_never_back_and_a_reset_puts_it_back(sandbox: Sandbox):
    target = datetime(2031, 1, 1, tzinfo=timezone.utc)
    assert sandbox.advance_clock(to=target) - target < timedelta(seconds=5)
    with pytest.raises(SandboxError, match="never runs back"):
        sandbox.advance_clock(to=datetime(2030, 1, 1, tzinfo=timezone.utc))
    with pytest.raises(SandboxError, match="never runs back"):
        sandbox.advance_clock(-60)
    sandbox.reset()
    assert abs((sandbox.clock() - datetime.now(timezone.utc)).total_seconds()) < 5


def test_a_missing_parameter_still_says_the_time_aws_answered_with(sandbox: Sandbox):
    moved = sandbox.advance_clock(3600)
    history = Aws(region="us-west-2").dated_history("/clock-test/absent", "us-west-2")
    assert history.versions == ()
    assert history.answered_at is not None and abs((history.answered_at - moved).total_seconds()) < 5


def test_the_fault_proxy_forwards_the_emulators_date(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch):
    moved = sandbox.advance_clock(10 * 86400)
    with FaultProxy(sandbox.endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        history = Aws(region="us-west-2").dated_history(NAME, "us-west-2")
    assert history.answered_at is not None and abs((history.answered_at - moved).total_seconds()) < 5


def test_the_date_header_is_parsed_as_utc_and_its_absence_is_none():
    response = {"ResponseMetadata": {"HTTPHeaders": {"date": "Fri, 04 Dec 2026 12:00:00 GMT"}}}
    assert answered_at(response) == datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
    assert answered_at({"ResponseMetadata": {"HTTPHeaders": {}}}) is None
    assert answered_at({"ResponseMetadata": {"HTTPHeaders": {"date": "soon"}}}) is None
    assert answered_at(None) is None


@pytest.mark.parametrize("body", [{"advance": "1h"}, {"advance": True}, {"set": "friday"}, {"advance": 1, "set": "x"},
                                  {"rewind": 5}])
def test_a_bad_clock_request_is_refused(body):
    with pytest.raises(SandboxError):
        Clock().control(body)
