"""The channel lease on its own, against the emulator: take, refuse, release, take over.

It is the one lease amibuild has (`amibuild.lease`), with the channel's waiting and errors.

Two writers taking over one expired lease at once are played in order (each step is one AWS
call), so the interleaving the test means is the one that runs.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import boto3
import pytest

from amibuild.aws import Aws
from amibuild import lease as lease_mod
from amibuild.lease import Holder, Lease
from amibuild.lease import Guard
from amibuild.errors import ChannelBusy, Interrupted

REGION = "us-west-2"
NAME = "/amibuild/eks-workers/_leases/channel/ceph/stable"


def holder(owner: str, *, expires_in: float) -> Holder:
    return Holder(owner, f"run-{owner}", (datetime.now(timezone.utc) + timedelta(seconds=expires_in)).timestamp(),
                  "publish", f"token-{owner}")


def lease_value() -> dict | None:
    ssm = boto3.client("ssm", region_name=REGION)
    found = ssm.get_parameters(Names=[NAME])["Parameters"]
    return json.loads(found[0]["Value"]) if found else None


def test_a_lease_is_taken_refused_to_a_second_writer_and_given_back(sandbox) -> None:
    aws = Aws(region=REGION)
    first = lease_mod.acquire_channel(aws, NAME, REGION, operation="publish", guard=Guard(owner="a@host pid 1", wait=0))
    assert lease_value()["owner"] == "a@host pid 1"
    with pytest.raises(ChannelBusy, match=r"being written by a@host pid 1 \(publish, lease until .*nothing was written"):
        lease_mod.acquire_channel(aws, NAME, REGION, operation="promote", guard=Guard(owner="b@host pid 2", wait=0))
    with pytest.raises(Interrupted, match="interrupted while waiting for a@host pid 1"):
        lease_mod.acquire_channel(aws, NAME, REGION, operation="promote",
                          guard=Guard(owner="b@host pid 2", wait=5, cancelled=lambda: True))
    assert first.release() == ""
    assert lease_value() is None
    again = lease_mod.acquire_channel(aws, NAME, REGION, operation="promote", guard=Guard(owner="b@host pid 2", wait=0))
    assert lease_value()["owner"] == "b@host pid 2" and again.took_over is None


def test_of_two_writers_taking_over_one_expired_lease_only_the_first_holds_it(sandbox) -> None:
    aws = Aws(region=REGION)
    ssm = boto3.client("ssm", region_name=REGION)
    ssm.put_parameter(Name=NAME, Value=holder("dead", expires_in=-60).to_value(), Type="String")
    stale = aws.find_parameter(NAME, REGION)  # both writers read version 1, expired, before either overwrites it
    assert stale.version == 1
    winner = Lease(aws, NAME, REGION, run_id="run-x", owner="x", operation="publish", ttl=300)
    loser = Lease(aws, NAME, REGION, run_id="run-y", owner="y", operation="publish", ttl=300)
    assert winner._take_over(stale) is True
    assert loser._take_over(stale) is False
    assert winner.held and not loser.held
    note = lease_mod.ChannelLease(winner).note
    assert "took over the expired lease of dead (publish, run run-dead" in note
    # the loser's overwrite (version 3) was replaced by the winner's value again (version 4)
    assert lease_value()["owner"] == "x"
    assert [p["Version"] for p in ssm.get_parameter_history(Name=NAME)["Parameters"]] == [1, 2, 3, 4]
    with pytest.raises(ChannelBusy, match="being written by x"):
        lease_mod.acquire_channel(aws, NAME, REGION, operation="publish", guard=Guard(owner="y", wait=0))


def test_a_take_over_of_a_lease_deleted_and_taken_afresh_meanwhile_does_not_hold_it_too(sandbox) -> None:
    aws = Aws(region=REGION)
    ssm = boto3.client("ssm", region_name=REGION)
    dead = holder("dead", expires_in=-60).to_value()
    ssm.put_parameter(Name=NAME, Value=dead, Type="String")
    stale = aws.find_parameter(NAME, REGION)  # the taker reads version 1, expired
    assert aws.delete_parameter_if_value(NAME, dead, REGION)  # its holder gives it back late
    fresh = lease_mod.acquire_channel(aws, NAME, REGION, operation="publish", guard=Guard(owner="w", wait=0))
    assert fresh.took_over is None  # created afresh: version 1 again
    taker = Lease(aws, NAME, REGION, run_id="run-x", owner="x", operation="publish", ttl=300)
    assert taker._take_over(stale) is False  # its put (version 2) replaced w's live lease, not the stale one
    assert not taker.held
    assert lease_value()["owner"] == "w"
    assert fresh.release() == ""


def test_a_lease_that_is_not_amibuilds_json_counts_as_stale_and_is_taken_over(sandbox) -> None:
    boto3.client("ssm", region_name=REGION).put_parameter(Name=NAME, Value="garbage", Type="String")
    taken = lease_mod.acquire_channel(Aws(region=REGION), NAME, REGION, operation="publish", guard=Guard(owner="z", wait=0))
    assert "took over the expired lease of an unreadable value" in taken.note
    assert taken.release() == ""
    assert lease_value() is None


def test_a_lease_of_a_dead_writer_process_on_this_machine_is_taken_over_before_its_expiry(sandbox) -> None:
    import socket
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    owner = f"ci@{socket.gethostname()} pid {int(gone.stdout)}"  # that process has exited
    boto3.client("ssm", region_name=REGION).put_parameter(
        Name=NAME, Value=Holder(owner, "run-crashed", holder("x", expires_in=300).expires, "publish", "t",
                                machine=lease_mod.MACHINE).to_value(), Type="String")
    taken = lease_mod.acquire_channel(Aws(region=REGION), NAME, REGION, operation="promote", guard=Guard(owner="z", wait=0))
    assert f"took over the lease of {owner} (publish, run run-crashed" in taken.note
    assert "process on this machine is gone" in taken.note
    assert taken.release() == ""


def test_a_live_lease_of_a_container_sharing_this_hosts_name_is_not_taken_over(sandbox) -> None:
    import socket
    import subprocess
    import sys

    # a CI job in a container with the host's network (and name) but its own pids: its pid means nothing here
    pid = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout)
    live = Holder(f"ci@{socket.gethostname()} pid {pid}", "run-live", holder("x", expires_in=300).expires, "publish", "t")
    value = json.dumps({**json.loads(live.to_value()), "machine": "the same boot:4026532999"})
    boto3.client("ssm", region_name=REGION).put_parameter(Name=NAME, Value=value, Type="String")
    with pytest.raises(ChannelBusy):
        lease_mod.acquire_channel(Aws(region=REGION), NAME, REGION, operation="promote", guard=Guard(owner="z", wait=0))
    assert lease_value()["run_id"] == "run-live"


def test_a_channel_lease_taken_over_while_held_is_not_deleted_and_says_by_whom(sandbox) -> None:
    aws = Aws(region=REGION)
    mine = lease_mod.acquire_channel(aws, NAME, REGION, operation="publish", guard=Guard(owner="a", wait=0))
    boto3.client("ssm", region_name=REGION).put_parameter(
        Name=NAME, Value=holder("b", expires_in=300).to_value(), Type="String", Overwrite=True)
    assert "expired during the write and was taken over by b (publish, run run-b" in mine.release()
    assert lease_value()["owner"] == "b"


def test_holder_round_trips_through_the_parameter_value() -> None:
    one = holder("a", expires_in=10)
    back = Holder.from_value(one.to_value())
    assert back is not None and back.raw == one.to_value()
    assert (back.owner, back.run_id, back.operation, back.token) == (one.owner, one.run_id, one.operation, one.token)
    assert back.expires == pytest.approx(one.expires, abs=1e-5)
    assert Holder.from_value('{"owner": "a"}') is None
    assert Holder.from_value("not json") is None
