"""What a failed channel transaction's error records: the regions its put-back left holding this
writer's image (`stuck_regions`), whatever kind of failure it was. build-ami lists them as "left
partly written" (`from_build.publish_build`), so a lost lease must carry them as a write conflict does.
The put-back and the final read of every region are stood in for: this checks the error's data, and
tests/test_channel_stopped.py runs the same failure through the CLI against the emulator."""

from __future__ import annotations

import pytest

from amibuild.channels import write
from amibuild.channels.plan import PublishAction, PublishPlan, RegionPlan
from amibuild.errors import AmibuildError, LeaseLost, PublishConflict, PublishFailed

PLAN = PublishPlan("publish", "/amibuild/p/1.31/ceph/recommended/image_id", "ceph", "recommended", (
    RegionPlan("eu-west-1", "ami-0000000000000000e", PublishAction.WRITE, "", "ami-0000000000000000a"),
    RegionPlan("us-west-2", "ami-0000000000000000f", PublishAction.WRITE, "", "ami-0000000000000000b"),
))


@pytest.fixture
def put_back_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args, **_kwargs) -> str:
        raise AmibuildError("another writer holds the channel now")

    monkeypatch.setattr(write, "_put_back", refuse)
    monkeypatch.setattr(write, "converged", lambda aws, plan: "the channel is SPLIT across regions")


@pytest.mark.parametrize("failure, kind", [
    (LeaseLost("the lease ran out before the write"), LeaseLost),
    (PublishConflict("another writer moved it"), PublishConflict),
    (PublishFailed("ParameterLimitExceeded"), PublishFailed),
], ids=["lease-lost", "conflict", "failed"])
def test_every_failure_names_the_regions_left_holding_its_write(put_back_fails, failure, kind) -> None:
    error = write._unwind(None, PLAN, {"us-west-2": 4}, [write._RegionFailed("eu-west-1", failure, 7)], None)
    assert type(error) is kind
    assert error.stuck_regions == ("eu-west-1", "us-west-2")
    assert "eu-west-1: could NOT be put back" in str(error) and "us-west-2: could NOT be put back" in str(error)


class _LostLease:
    """A channel lease that ran out and was taken by another writer: every check refuses."""

    name = "/amibuild/p/_leases/channel/ceph/recommended"

    def check(self, margin: float, what: str) -> None:
        raise LeaseLost(f"the lease {self.name} ran out before {what}")


def _lost_turn() -> write.Turn:
    return write.Turn(lambda: False, (_LostLease(),), regain=lambda: [])  # taken again: no, another writer holds it


def _put(region: str, *values: tuple[str, str]) -> None:
    import boto3

    ssm = boto3.client("ssm", region_name=region)
    for value, text in values:
        ssm.put_parameter(Name=PLAN.parameter, Value=value, Type="String", DataType="text", Description=text,
                          Overwrite=True)


def test_a_put_back_refused_for_a_lost_lease_names_the_region_left_holding_the_write(sandbox) -> None:
    from amibuild.aws import Aws

    # eu-west-1 holds this writer's version 2; us-west-2 failed before its put
    _put("eu-west-1", ("ami-0000000000000000a", "before"), ("ami-0000000000000000e", "ours"))
    _put("us-west-2", ("ami-0000000000000000b", "before"))
    plan = PublishPlan(PLAN.operation, PLAN.parameter, "ceph", "recommended", (
        RegionPlan("eu-west-1", "ami-0000000000000000e", PublishAction.WRITE, "", "ami-0000000000000000a", 1, "ours"),
        RegionPlan("us-west-2", "ami-0000000000000000f", PublishAction.WRITE, "", "ami-0000000000000000b", 1, "x"),
    ))
    error = write._unwind(Aws(region="us-west-2"), plan, {"eu-west-1": 2},
                          [write._RegionFailed("us-west-2", PublishFailed("ParameterLimitExceeded"), None)], _lost_turn())
    assert "eu-west-1: could NOT be put back" in str(error)
    assert error.stuck_regions == ("eu-west-1",)


def test_a_conflict_whose_put_back_is_refused_for_a_lost_lease_names_the_region_left_holding_the_write(sandbox) -> None:
    from amibuild.aws import Aws

    # read version 1, another writer wrote version 2, ours landed as version 3
    _put("eu-west-1", ("ami-0000000000000000a", "before"), ("ami-0000000000000000c", "theirs"),
         ("ami-0000000000000000e", "ours"))
    _put("us-west-2", ("ami-0000000000000000b", "before"))
    plan = PublishPlan(PLAN.operation, PLAN.parameter, "ceph", "recommended", (
        RegionPlan("eu-west-1", "ami-0000000000000000e", PublishAction.WRITE, "", "ami-0000000000000000a", 1, "ours"),
        RegionPlan("us-west-2", "ami-0000000000000000b", PublishAction.UNCHANGED, "", "ami-0000000000000000b", 1),
    ))
    aws, turn = Aws(region="us-west-2"), _lost_turn()
    conflict = write._conflict(aws, plan, plan.regions[0], 3, turn)
    assert "eu-west-1: could NOT be put back" in str(conflict)
    error = write._unwind(aws, plan, {}, [write._RegionFailed("eu-west-1", conflict, None)], turn)
    assert type(error) is PublishConflict
    assert error.stuck_regions == ("eu-west-1",)
