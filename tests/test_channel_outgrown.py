"""A channel grown through another pipeline folder is refused by build-ami before it builds:
through the CLI, against the emulator.

A checkout whose file lists one more region publishes the channel there too, and its parameters
record the three regions (`amibuild:channel-regions`). A build-ami run of the two-region file could
build but never publish to it (a channel is written in every region or none): it stops before any
packer build, naming the channel, where it lives and what to do, with nothing launched, built or
written. The facts are read in a few calls per region, not one per channel.
"""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

import test_channel_races
from amibuild import tags
from amibuild.channels.outgrown import find_outgrown, fitting, outgrown, refusal
from conftest import run_cli
from test_channel_home import ADDED, ALL, ami_flag, folder
from test_channel_races import E2E_PIPELINE, needs_packer
from test_publish import NAME, PIPELINE, build

proxy = test_channel_races.proxy  # the fault proxy in front of the emulator
STABLE = NAME.format(channel="stable")


# ------------------------------------------------------------------------------- the decision (pure)


def test_the_regions_that_fit_are_every_set_of_the_runs_regions_holding_the_region_read() -> None:
    assert fitting(["us-west-2", "eu-west-1"], "us-west-2") == ["us-west-2", "eu-west-1 us-west-2"]
    assert sorted(fitting(["us-west-2", "eu-west-1", ADDED], "eu-west-1")) == sorted([
        "eu-west-1", f"{ADDED} eu-west-1", "eu-west-1 us-west-2", f"{ADDED} eu-west-1 us-west-2"])
    assert fitting(["us-west-2"], "us-west-2") == ["us-west-2"]


def test_a_parameter_recording_regions_that_do_not_fit_has_grown_and_names_them() -> None:
    other = "/amibuild/eks-workers/1.35/plain/stable/image_id"
    recording = {"us-west-2": [STABLE, other, "/not/ours"], "eu-west-1": [STABLE]}
    fit = {"us-west-2": [other, "/not/ours"], "eu-west-1": []}
    recorded = {STABLE: {tags.CHANNEL_REGIONS: f"{ADDED} eu-west-1 us-west-2"}}
    assert outgrown([STABLE, other], recording, fit, recorded) == {STABLE: (ADDED, "eu-west-1", "us-west-2")}
    # a narrower channel (it records only regions of this run) fits; one that records nothing is not read
    assert outgrown([other], recording, fit, {}) == {}
    assert outgrown([STABLE], {"us-west-2": []}, {}, {}) == {}
    error = refusal("stable", {STABLE: (ADDED, "eu-west-1", "us-west-2")}, ["us-west-2", "eu-west-1"])
    assert error is not None and f"({ADDED} not in this pipeline)" in str(error)
    assert refusal("stable", {}, ["us-west-2"]) is None


# ------------------------------------------------------------------------------- through the CLI


def world() -> dict[str, object]:
    """What a refused run must leave as it was: images, instances, every parameter's version."""
    seen: dict[str, object] = {}
    for region in ALL:
        ec2, ssm = boto3.client("ec2", region_name=region), boto3.client("ssm", region_name=region)
        seen[f"images {region}"] = sorted(i["ImageId"] for i in ec2.describe_images(Owners=["self"])["Images"])
        seen[f"instances {region}"] = sorted(
            (i["InstanceId"], i["State"]["Name"]) for r in ec2.describe_instances()["Reservations"]
            for i in r["Instances"])
        seen[f"parameters {region}"] = sorted(
            (p["Name"], p["Version"]) for p in ssm.get_parameters_by_path(Path="/amibuild", Recursive=True)["Parameters"])
    return seen


@needs_packer
def test_build_ami_refuses_a_channel_grown_beyond_its_regions_before_it_builds(sandbox, tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text(E2E_PIPELINE)
    grown = folder(tmp_path, "grown", '["eu-west-1"]', f'["us-west-2", "{ADDED}"]')
    result = run_cli(grown, "publish", "--variant", "ceph", "--channel", "stable", "--ami",
                     ami_flag(build("fp3", regions=ALL)))
    assert result.returncode == 0, result.stderr
    before = world()

    result = run_cli(tmp_path, "build-ami", "--channel", "stable")
    assert result.returncode == 1, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("amibuild: error: channel stable grew beyond this pipeline's regions "
                           "(us-west-2, eu-west-1)"), line
    assert f"{STABLE} lives in {ADDED}, eu-west-1, us-west-2 ({ADDED} not in this pipeline)" in line, line
    assert "nothing was built or written" in line and "Add those regions to the pipeline file" in line
    assert "--no-publish" in line
    assert world() == before  # no instance launched, no image, no parameter written (no lease either)
    assert not list((tmp_path / "build").glob("runs/*")), "a run was recorded"

    # the dry run is refused as the run would be; building only, or another channel, is not
    assert run_cli(tmp_path, "build-ami", "--channel", "stable", "--dry-run").returncode == 1
    for flags in (("--no-publish",), ("--channel", "candidate")):
        result = run_cli(tmp_path, "build-ami", *flags, "--dry-run")
        assert result.returncode == 0, (flags, result.stderr)
    assert world() == before


@needs_packer
def test_a_channel_written_by_a_narrower_folder_is_not_refused_and_the_facts_take_a_few_calls_per_region(
        proxy, tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)  # two variants: ceph and plain
    narrow = folder(tmp_path, "narrow", '["us-west-2"]', "[]")
    for variant in ("ceph", "plain"):
        result = run_cli(narrow, "publish", "--variant", variant, "--channel", "stable", "--ami",
                         ami_flag(build("fp1", variant=variant, regions=("us-west-2",))))
        assert result.returncode == 0, result.stderr
    mark = len(proxy.log)
    result = run_cli(tmp_path, "build-ami", "--channel", "stable", "--dry-run")
    assert result.returncode == 0, result.stderr
    seen = proxy.log[mark:]
    for region in ("us-west-2", "eu-west-1"):
        # one listing of the channel's parameters that record regions, one of those that fit: per region
        assert sum(1 for s in seen if s.op == "AmazonSSM.DescribeParameters" and s.region == region) == 2
    assert not [s for s in seen if s.op == "AmazonSSM.ListTagsForResource"]


@pytest.mark.parametrize("regions", [2, 7, 8])
def test_every_fitting_set_is_asked_for_even_past_one_filters_fifty_values(regions: int) -> None:
    names = [f"r{n}" for n in range(regions)]
    sets = fitting(names, "r0")
    assert len(sets) == len(set(sets)) == 2 ** (regions - 1)
    assert all("r0" in s.split() and s.split() == sorted(s.split()) for s in sets)


class _Listing:
    """Parameters and their regions tags, answered as the gateway's DescribeParameters / ListTagsForResource."""

    def __init__(self, channels: dict[str, str]) -> None:
        self.channels, self.calls = channels, 0

    def parameters_tagged(self, region, chosen, prefixes=None) -> list[str]:
        wanted = chosen.get(tags.CHANNEL_REGIONS)
        self.calls += -(-len(wanted) // 50) if wanted else 1  # the gateway asks 50 values a call
        return [name for name, where in self.channels.items() if region in where.split()
                and (wanted is None or where in wanted)]

    def parameter_tags(self, name, region) -> dict[str, str]:
        self.calls += 1
        return {tags.CHANNEL_REGIONS: self.channels[name]}


def test_a_run_of_many_regions_reads_the_suspects_tags_rather_than_every_fitting_set() -> None:
    """The fitting sets double with each region: 14 regions were 8,192 sets, 164 calls a region."""
    regions = [f"r{n:02d}" for n in range(14)]
    grown, narrow = "/a/ceph/stable/image_id", "/a/plain/stable/image_id"
    listing = _Listing({grown: " ".join([*regions, "zz-extra"]), narrow: " ".join(regions[:3])})
    assert find_outgrown(listing, "p", "stable", [grown, narrow], regions) == {grown: (*regions, "zz-extra")}
    assert listing.calls <= len(regions) + 2  # one listing a region, one tag read per parameter found
