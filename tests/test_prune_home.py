"""Prune and channel writers exclude each other whatever region sets their pipeline files list:
through the CLI, against the emulator.

Two checkouts of one pipeline: A builds in us-west-2 and copies to eu-west-1, B lists other regions
(eu-west-1 and us-east-1, or us-east-1 and us-west-2). An image prune B may deregister in region R
is at risk only from a writer that writes R, so the two must meet in any region both touch: prune
holds its lease in every region it prunes, a writer holds its channel lease in every region of its
channel and looks for a prune lease in each. Each race is made deterministic with a gate of
tests/faultproxy.py; the end state of every region is read back with boto3.
"""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

import test_channel_races
from amibuild.lease import is_lease
from test_channel_races import PUT, Cli
from test_prune import build_image
from test_prune_race import CHANNEL, PIPELINE, ami_flag, registered

A_REGIONS = ("us-west-2", "eu-west-1")
EVERY = ("us-west-2", "eu-west-1", "us-east-1")
proxy = test_channel_races.proxy  # the fault proxy in front of the emulator

# B's regions: (build region, copy region) and the one region it shares with A
OTHERS = {
    "b-eu-west-1-us-east-1": ("eu-west-1", "us-east-1", "eu-west-1"),
    # B's first region in name order (us-east-1) is in neither A's regions nor the channel's home
    "b-us-east-1-us-west-2": ("us-east-1", "us-west-2", "us-west-2"),
}


def folders(root: Path, build: str, copy: str) -> tuple[Path, Path]:
    a, b = root / "a", root / "b"
    a.mkdir()
    b.mkdir()
    (a / "amibuild.hcl").write_text(PIPELINE)
    (b / "amibuild.hcl").write_text(PIPELINE.replace('regions    = ["us-west-2"]', f'regions    = ["{build}"]')
                                    .replace('copy_to    = ["eu-west-1"]', f'copy_to    = ["{copy}"]'))
    return a, b


def images(n: int) -> dict[str, str]:
    return {r: build_image(n, region=r).ami for r in EVERY}


def channels_name_registered_images() -> dict[str, dict[str, str]]:
    """Every channel parameter in every region, {region: {name: ami}}; asserts each AMI is registered."""
    found: dict[str, dict[str, str]] = {}
    for region in EVERY:
        ssm = boto3.client("ssm", region_name=region)
        values = {p["Name"]: p["Value"] for p in ssm.get_parameters_by_path(
            Path="/amibuild/prune-e2e", Recursive=True)["Parameters"]}
        assert not [n for n in values if is_lease(n)], f"leases left in {region}: {values}"
        for name, ami in values.items():
            assert registered(region, ami), f"{name} in {region} names {ami}, which is deregistered"
        found[region] = values
    return found


@pytest.mark.parametrize("other", list(OTHERS), ids=list(OTHERS))
def test_prune_of_other_regions_waits_for_a_writer_half_way_in_a_region_both_touch(proxy, tmp_path, other):
    build, copy, shared = OTHERS[other]
    a, b = folders(tmp_path, build, copy)
    old, new = images(1), images(2)
    for channel in ("stable", "candidate"):  # written before: their lease lives at their home only
        code, _, err = Cli(a, "publish", "--variant", "ceph", "--channel", channel, "--ami",
                           ami_flag({r: new[r] for r in A_REGIONS})).finish()
        assert code == 0, err
    # A's publish of the older build to candidate holds its leases; its write of the shared region is in flight
    gate = proxy.gate([PUT], region=shared, name="/candidate/image_id")
    publish = Cli(a, "publish", "--variant", "ceph", "--channel", "candidate", "--ami",
                  ami_flag({r: old[r] for r in A_REGIONS}), held=True)
    assert gate.wait_held(1), publish.lines
    pruning = Cli(b, "prune", "--keep", "1", lease_wait=60)
    try:
        pruning.wait_line("prune: waiting for channel writers to finish", timeout=30)
    finally:
        gate.release()
    code, _, err = publish.finish()
    assert code == 0, err
    code, out, err = pruning.finish()
    assert code == 0, err
    assert "channel candidate of ceph current in " + shared in out
    held = channels_name_registered_images()
    assert held[shared][CHANNEL.format("candidate")] == old[shared]
    assert registered(shared, old[shared]) and registered(shared, new[shared])
    # in B's own region, which A never writes, the older build is pruned as planned
    only_b = ({build, copy} - {shared}).pop()
    assert not registered(only_b, old[only_b]) and registered(only_b, new[only_b])


@pytest.mark.parametrize("other", list(OTHERS), ids=list(OTHERS))
def test_a_writer_of_other_regions_waits_while_prune_holds_its_lease_in_a_region_both_touch(proxy, tmp_path, other):
    build, copy, shared = OTHERS[other]
    a, b = folders(tmp_path, build, copy)
    old, new = images(1), images(2)
    code, _, err = Cli(a, "publish", "--variant", "ceph", "--channel", "stable", "--ami",
                       ami_flag({r: new[r] for r in A_REGIONS})).finish()
    assert code == 0, err
    stop = proxy.gate(["DeregisterImage"], region=shared, count=1)  # prune holds its leases, at a deregister
    pruning = Cli(b, "prune", "--keep", "1")
    assert stop.wait_held(1), pruning.lines
    # the writer's first give-back of its channel lease: it found the prune lease (or, were it blind
    # to prune, it would be the release after its write)
    back_off = proxy.gate(["AmazonSSM.DeleteParameter"], name="_leases/channel/ceph/candidate", count=1)
    publish = Cli(a, "publish", "--variant", "ceph", "--channel", "candidate", "--ami",
                  ami_flag({r: old[r] for r in A_REGIONS}), lease_wait=60)
    try:
        assert back_off.wait_held(1), publish.lines
        assert proxy.count(PUT, name="/candidate/image_id") == 0, "the writer wrote while prune held its lease"
        assert proxy.count("AmazonSSM.GetParameter", region=shared, name="_leases/prune") >= 1
    finally:
        back_off.release()  # it waits for prune now
        stop.release()
    code, out, err = pruning.finish()
    assert code == 0, err
    code, _, err = publish.finish()
    assert code == 1, err
    assert f"{shared}: {old[shared]} does not exist there (deregistered" in err and "nothing written" in err, err
    held = channels_name_registered_images()
    assert all(CHANNEL.format("candidate") not in values for values in held.values()), held
    assert {r: held[r][CHANNEL.format("stable")] for r in A_REGIONS} == {r: new[r] for r in A_REGIONS}


def test_two_prunes_of_other_regions_exclude_each_other_in_the_region_both_touch(proxy, tmp_path) -> None:
    a, b = folders(tmp_path, "eu-west-1", "us-east-1")
    for n in (1, 2):
        images(n)
    stop = proxy.gate(["DeregisterImage"], count=1)  # A's prune holds its leases, at its first deregister
    first = Cli(a, "prune", "--keep", "1")
    assert stop.wait_held(1), first.lines
    try:
        code, _, err = Cli(b, "prune", "--keep", "1", lease_wait=0.5).finish()
    finally:
        stop.release()
    assert code == 1, err
    assert "prune: another prune holds the lease in eu-west-1" in err and "nothing was deleted" in err, err
    assert proxy.count("DeregisterImage") == 1  # only A's, held
    assert first.finish()[0] == 0
    code, _, err = Cli(b, "prune", "--keep", "1").finish()  # once A is done, B prunes what is left of its regions
    assert code == 0, err
    for region in EVERY:
        kept = boto3.client("ec2", region_name=region).describe_images(Owners=["self"])["Images"]
        assert len(kept) == 1, (region, kept)
    channels_name_registered_images()
