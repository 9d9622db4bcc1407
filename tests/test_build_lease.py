"""The generic SSM lease, against the emulator: one holder, release only if ours, take-over after expiry."""

from __future__ import annotations

import json

import pytest

from amibuild.aws import Aws
from amibuild.errors import EndpointUnreachable
from amibuild.lease import Lease, build_lease_name, parse_holder

NAME = "/amibuild/e2e/_leases/build/ceph/0123456789abcdef"
REGION = "us-west-2"


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def aws(sandbox) -> Aws:
    return Aws(region=REGION)


def lease(aws: Aws, run_id: str, clock: Clock, ttl: float = 60.0) -> Lease:
    return Lease(aws, NAME, REGION, run_id=run_id, owner=f"tester {run_id}", ttl=ttl, clock=clock)


def test_a_second_run_sees_the_holder_until_the_first_releases(aws: Aws) -> None:
    clock = Clock()
    first, second = lease(aws, "run-a", clock), lease(aws, "run-b", clock)
    assert first.try_acquire() is None and first.held
    holder = second.try_acquire()
    assert holder is not None and not second.held
    assert (holder.run_id, holder.owner) == ("run-a", "tester run-a")
    assert "run run-a (tester run-a, lease until" in str(holder)
    assert first.release() is True
    assert aws.find_parameter(NAME, REGION) is None
    assert second.try_acquire() is None
    assert json.loads(aws.find_parameter(NAME, REGION).value)["run_id"] == "run-b"


def test_an_expired_lease_is_taken_over_naming_the_stale_holder(aws: Aws) -> None:
    clock = Clock()
    stale, fresh = lease(aws, "run-dead", clock, ttl=30), lease(aws, "run-new", clock)
    assert stale.try_acquire() is None
    clock.now += 29
    assert fresh.try_acquire() is not None, "taken over before its expiry"
    clock.now += 2
    assert fresh.try_acquire() is None
    assert fresh.took_over is not None and fresh.took_over.run_id == "run-dead"
    # the stale holder coming back must not delete the new holder's lease
    assert stale.release() is False
    assert json.loads(aws.find_parameter(NAME, REGION).value)["run_id"] == "run-new"


def test_renew_pushes_the_expiry_and_fails_once_taken_over(aws: Aws) -> None:
    clock = Clock()
    mine = lease(aws, "run-a", clock, ttl=30)
    assert mine.try_acquire() is None
    clock.now += 20
    assert mine.renew() is True
    assert parse_holder(aws.find_parameter(NAME, REGION).value).expires == pytest.approx(clock.now + 30)
    clock.now += 25  # would have expired without the renewal
    assert lease(aws, "run-b", clock).try_acquire() is not None
    clock.now += 10
    other = lease(aws, "run-b", clock)
    assert other.try_acquire() is None
    assert mine.renew() is False and not mine.held


class SlowPuts:
    """The gateway, whose lease puts take ``seconds`` (throttled and retried) on the test's clock."""

    def __init__(self, aws: Aws, clock: Clock, seconds: float) -> None:
        self.aws, self.clock, self.seconds = aws, clock, seconds

    def __getattr__(self, name: str):
        return getattr(self.aws, name)

    def put_parameter_if_absent(self, *args, **kwargs):
        self.clock.now += self.seconds
        return self.aws.put_parameter_if_absent(*args, **kwargs)

    def overwrite_parameter(self, *args, **kwargs):
        self.clock.now += self.seconds
        return self.aws.overwrite_parameter(*args, **kwargs)


def test_a_holder_counts_its_lease_from_when_it_wrote_the_expiry_not_from_when_the_put_answered(aws: Aws) -> None:
    clock = Clock()
    mine = Lease(SlowPuts(aws, clock, 100), NAME, REGION, run_id="run-a", owner="tester run-a", ttl=300,
                 clock=clock, monotonic=clock)
    assert mine.try_acquire() is None
    others_see = parse_holder(aws.find_parameter(NAME, REGION).value).expires - clock.now  # 200 s left for others
    assert mine.remaining() == pytest.approx(others_see)
    assert mine.renew() is True  # the new expiry too is set 100 s before the put answers
    assert mine.remaining() == pytest.approx(parse_holder(aws.find_parameter(NAME, REGION).value).expires - clock.now)


def test_a_value_that_is_not_a_lease_counts_as_expired() -> None:
    holder = parse_holder("not json")
    assert holder.expired(0.0) and holder.run_id == "unknown"


def test_build_lease_names_differ_by_variant_and_fingerprint_and_sit_beside_the_channels() -> None:
    a = build_lease_name("/amibuild/", "e2e", "ceph", "ab" * 32)
    assert a == "/amibuild/e2e/_leases/build/ceph/" + "ab" * 16
    assert a != build_lease_name("/amibuild", "e2e", "ceph", "cd" * 32)
    assert a != build_lease_name("/amibuild", "e2e", "arm", "ab" * 32)


def test_a_lease_of_a_dead_process_on_this_machine_is_taken_over_before_its_expiry(aws: Aws) -> None:
    import socket
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)  # that process has exited
    clock = Clock()
    crashed = Lease(aws, NAME, REGION, run_id="run-crashed", owner=f"ci@{socket.gethostname()} pid {dead_pid}",
                    ttl=900, clock=clock)
    assert crashed.try_acquire() is None
    elsewhere = Lease(aws, NAME + "x", REGION, run_id="run-remote", owner=f"ci@another-host pid {dead_pid}",
                      ttl=900, clock=clock)
    assert elsewhere.try_acquire() is None
    assert lease(aws, "run-next", clock).try_acquire() is None  # not waited out for 15 minutes
    other = Lease(aws, NAME + "x", REGION, run_id="run-next", owner="tester", clock=clock)
    assert other.try_acquire() is not None, "a holder on another machine is judged by expiry alone"


class LostAnswer(SlowPuts):
    """The gateway, whose overwrites land in SSM but whose answers are lost (an error reaches the caller)."""

    def overwrite_parameter(self, *args, **kwargs):
        super().overwrite_parameter(*args, **kwargs)
        raise EndpointUnreachable("ssm:PutParameter: the answer was lost")


def test_a_renewal_whose_answer_was_lost_still_holds_the_lease_and_releases_it(aws: Aws) -> None:
    clock = Clock()
    mine = lease(aws, "run-a", clock)
    assert mine.try_acquire() is None
    mine.store, clock.now = LostAnswer(aws, clock, 0), clock.now + 20
    with pytest.raises(EndpointUnreachable):
        mine.renew()  # the renewer thread tries again next round
    mine.store, clock.now = aws, clock.now + 20
    assert mine.renew() is True and mine.held  # the value in SSM is its own: not taken over
    assert mine.release() is True and aws.find_parameter(NAME, REGION) is None
    # the build ends right after such a renewal: its release still gives the lease back
    assert mine.try_acquire() is None
    mine.store, clock.now = LostAnswer(aws, clock, 0), clock.now + 20
    with pytest.raises(EndpointUnreachable):
        mine.renew()
    mine.store = aws
    assert mine.release() is True and aws.find_parameter(NAME, REGION) is None


class TakenOverMidRenewal(SlowPuts):
    """The gateway, where another run takes the lease over between a renewal's read and its put."""

    def __init__(self, aws: Aws, taker: Lease) -> None:
        super().__init__(aws, Clock(), 0)
        self.taker = taker

    def overwrite_parameter(self, *args, **kwargs):
        if self.taker is not None:  # it judged the lease expired on its own clock
            assert self.taker.try_acquire() is None
            self.taker = None
        return self.aws.overwrite_parameter(*args, **kwargs)


def test_a_renewal_racing_a_take_over_leaves_one_holder(aws: Aws) -> None:
    clock, theirs = Clock(), Clock(1_800_000_000.0 + 61)  # the taker's clock is a minute ahead
    mine = lease(aws, "run-a", clock)
    assert mine.try_acquire() is None
    taker = lease(aws, "run-b", theirs)
    mine.store = TakenOverMidRenewal(aws, taker)
    renewed = mine.renew()
    holder = parse_holder(aws.find_parameter(NAME, REGION).value)
    assert [renewed, taker.held].count(True) == 1, "both think they hold the lease"
    assert holder.token == (mine if renewed else taker).token


class RetriedPut(SlowPuts):
    """The gateway, whose overwrite lands twice (botocore retried a put whose first answer was lost)."""

    def overwrite_parameter(self, *args, **kwargs):
        self.aws.overwrite_parameter(*args, **kwargs)
        return self.aws.overwrite_parameter(*args, **kwargs)


def test_a_renewal_that_botocore_sent_twice_is_still_the_holders(aws: Aws) -> None:
    """Its put came twice, two versions on: the version between is its own, no take-over."""
    clock = Clock()
    mine = lease(aws, "run-a", clock)
    assert mine.try_acquire() is None
    mine.store, clock.now = RetriedPut(aws, clock, 0), clock.now + 20
    assert mine.renew() is True and mine.held
    mine.store = aws
    assert mine.release() is True and aws.find_parameter(NAME, REGION) is None
