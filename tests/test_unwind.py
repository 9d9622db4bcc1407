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
