"""The channel lease on its own, against the emulator: take, refuse, release, take over.

Two writers taking over one expired lease at once are played in order (each step is one AWS
call), so the interleaving the test means is the one that runs.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import boto3
import pytest

from amibuild.aws import Aws
from amibuild.channels import lease as lease_mod
from amibuild.channels.lease import Guard, Holder
from amibuild.errors import ChannelBusy, Interrupted

REGION = "us-west-2"
NAME = "/amibuild/eks-workers/amibuild-lease/ceph/stable"


def holder(owner: str, *, expires_in: float) -> Holder:
    return Holder(owner, f"run-{owner}", "publish", f"token-{owner}",
                  datetime.now(timezone.utc) + timedelta(seconds=expires_in))


def lease_value() -> dict | None:
    ssm = boto3.client("ssm", region_name=REGION)
    found = ssm.get_parameters(Names=[NAME])["Parameters"]
    return json.loads(found[0]["Value"]) if found else None


def test_a_lease_is_taken_refused_to_a_second_writer_and_given_back(sandbox) -> None:
    aws = Aws(region=REGION)
    first = lease_mod.acquire(aws, NAME, REGION, operation="publish", guard=Guard(owner="a@host pid 1", wait=0))
    assert lease_value()["owner"] == "a@host pid 1"
    with pytest.raises(ChannelBusy, match=r"being written by a@host pid 1 \(publish, lease until .*nothing was written"):
        lease_mod.acquire(aws, NAME, REGION, operation="promote", guard=Guard(owner="b@host pid 2", wait=0))
    with pytest.raises(Interrupted, match="interrupted while waiting for a@host pid 1"):
        lease_mod.acquire(aws, NAME, REGION, operation="promote",
                          guard=Guard(owner="b@host pid 2", wait=5, cancelled=lambda: True))
    assert first.release() == ""
    assert lease_value() is None
    again = lease_mod.acquire(aws, NAME, REGION, operation="promote", guard=Guard(owner="b@host pid 2", wait=0))
    assert lease_value()["owner"] == "b@host pid 2" and again.took_over is None


def test_of_two_writers_taking_over_one_expired_lease_only_the_first_holds_it(sandbox) -> None:
    aws = Aws(region=REGION)
    ssm = boto3.client("ssm", region_name=REGION)
    ssm.put_parameter(Name=NAME, Value=holder("dead", expires_in=-60).to_value(), Type="String")
    stale = 1  # both writers read version 1, expired, before either overwrites it
    winner = lease_mod._take_over(aws, NAME, REGION, holder("x", expires_in=300), stale,
                                  holder("dead", expires_in=-60), 300, "d")
    loser = lease_mod._take_over(aws, NAME, REGION, holder("y", expires_in=300), stale,
                                 holder("dead", expires_in=-60), 300, "d")
    assert winner is not None and loser is None
    assert "took over the expired lease of dead (publish, run run-dead" in winner.note
    # the loser's overwrite (version 3) was replaced by the winner's value again (version 4)
    assert lease_value()["owner"] == "x"
    assert [p["Version"] for p in ssm.get_parameter_history(Name=NAME)["Parameters"]] == [1, 2, 3, 4]
    with pytest.raises(ChannelBusy, match="being written by x"):
        lease_mod.acquire(aws, NAME, REGION, operation="publish", guard=Guard(owner="y", wait=0))


def test_a_lease_that_is_not_amibuilds_json_counts_as_stale_and_is_taken_over(sandbox) -> None:
    boto3.client("ssm", region_name=REGION).put_parameter(Name=NAME, Value="garbage", Type="String")
    taken = lease_mod.acquire(Aws(region=REGION), NAME, REGION, operation="publish", guard=Guard(owner="z", wait=0))
    assert "took over the expired lease of an unreadable value" in taken.note
    assert taken.release() == ""
    assert lease_value() is None


def test_holder_round_trips_through_the_parameter_value() -> None:
    one = holder("a", expires_in=10)
    assert Holder.from_value(one.to_value()) == one
    assert Holder.from_value('{"owner": "a"}') is None
    assert Holder.from_value("not json") is None
