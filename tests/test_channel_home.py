"""A channel's lease home is the channel's, and a channel is written in every region or none:
through the CLI, against the emulator.

Pipeline folders that list the channel's regions in another order, or that add a region which
sorts first, must meet the writer of the first folder at one lease: its home is recorded on the
channel (the `amibuild:lease-home` tag) when the channel is first written. Races are made
deterministic with a held PutParameter (tests/faultproxy.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest

import test_channel_races
from amibuild import tags
from amibuild.channels.home import lease_home
from amibuild.lease import is_lease
from conftest import run_cli
from test_channel_races import E2E_PIPELINE, Cli, held_write, needs_packer
from test_publish import NAME, PIPELINE, build, current

workdir, proxy = test_channel_races.workdir, test_channel_races.proxy

ADDED = "ap-northeast-1"  # a region added later: it sorts before both of the channel's first regions
ALL = ("us-west-2", "eu-west-1", ADDED)


def folder(root: Path, name: str, regions: str, copy_to: str) -> Path:
    """Another checkout of the same pipeline whose file lists its regions otherwise."""
    path = root / name
    path.mkdir()
    (path / "amibuild.hcl").write_text(PIPELINE.replace('regions    = ["us-west-2"]', f"regions    = {regions}")
                                       .replace('copy_to    = ["eu-west-1"]', f"copy_to    = {copy_to}"))
    return path


def ami_flag(amis: dict[str, str]) -> str:
    return ",".join(f"{r}={a}" for r, a in amis.items())


def home_tags(channel: str, regions=ALL) -> dict[str, str | None]:
    found = {}
    for region in regions:
        ssm = boto3.client("ssm", region_name=region)
        try:
            raw = ssm.list_tags_for_resource(ResourceType="Parameter", ResourceId=NAME.format(channel=channel))
        except ssm.exceptions.InvalidResourceId:
            found[region] = None
            continue
        found[region] = {t["Key"]: t["Value"] for t in raw["TagList"]}.get(tags.LEASE_HOME)
    return found


def leases_anywhere() -> list[str]:
    names = []
    for region in ALL:
        ssm = boto3.client("ssm", region_name=region)
        names += [p["Name"] for p in ssm.get_parameters_by_path(Path="/amibuild", Recursive=True)["Parameters"]
                  if is_lease(p["Name"])]
    return names


# ------------------------------------------------------------------------------- the home (pure)


def test_the_home_is_the_recorded_one_then_the_first_recorded_region_then_the_pipelines_first() -> None:
    recorded = {"us-west-2": {tags.LEASE_HOME: "eu-west-1", tags.CHANNEL_REGIONS: "eu-west-1 us-west-2"}}
    assert lease_home(recorded, ["ap-northeast-1", "us-west-2"]) == "eu-west-1"
    # no home recorded: the regions it is written in do not choose one, the pipeline's regions do
    assert lease_home({"us-west-2": {tags.CHANNEL_REGIONS: "us-west-2 eu-west-1"}}, ["ap-northeast-1"]) == "ap-northeast-1"
    # nobody wrote it yet: the first of the pipeline's regions in name order, whatever order they are listed in
    assert lease_home({}, ["us-west-2", "eu-west-1"]) == lease_home({}, ["eu-west-1", "us-west-2"]) == "eu-west-1"
    # two first writes that raced with different region sets: every later writer still picks one
    raced = {"us-west-2": {tags.LEASE_HOME: "eu-west-1"}, ADDED: {tags.LEASE_HOME: ADDED}}
    assert lease_home(raced, ["us-west-2"]) == ADDED


# ------------------------------------------------------------------------------- one lease for every folder


def test_folders_listing_the_regions_otherwise_or_adding_one_wait_for_the_same_lease(proxy, workdir: Path) -> None:
    first = build("fp1")
    code, _, err = Cli(workdir, "publish", "--variant", "ceph", "--channel", "stable", "--ami",
                       ami_flag(first)).finish()
    assert code == 0, err
    assert home_tags("stable") == {"us-west-2": "eu-west-1", "eu-west-1": "eu-west-1", ADDED: None}

    reordered = folder(workdir, "reordered", '["eu-west-1"]', '["us-west-2"]')
    grown = folder(workdir, "grown", '["eu-west-1"]', f'["us-west-2", "{ADDED}"]')
    second, third = build("fp2"), build("fp3", regions=ALL)

    gate = held_write(proxy, "stable")  # the first folder's writer holds the lease, half way
    writing = Cli(workdir, "publish", "--variant", "ceph", "--channel", "stable", "--ami", ami_flag(second),
                  held=True)
    assert gate.wait_held(1), writing.lines
    try:
        for other, amis in ((reordered, second), (grown, third)):
            code, _, err = Cli(other, "publish", "--variant", "ceph", "--channel", "stable", "--ami",
                               ami_flag(amis), lease_wait=0.5).finish()
            assert code == 1, f"{other.name}: {err}"
            assert "the channel is being written by" in err and "publish to stable" in err, err
            assert "nothing was written" in err
    finally:
        gate.release()
    code, _, err = writing.finish()
    assert code == 0, err
    assert {r: current("stable", r) for r in ("us-west-2", "eu-west-1")} == second

    # the grown folder writes every region once the lease is free, and the new region records the same home
    code, _, err = Cli(grown, "publish", "--variant", "ceph", "--channel", "stable", "--ami", ami_flag(third)).finish()
    assert code == 0, err
    assert {r: current("stable", r) for r in ALL} == third
    assert home_tags("stable") == {r: "eu-west-1" for r in ALL}
    assert leases_anywhere() == []


def test_two_first_writes_of_a_channel_from_folders_with_other_regions_exclude_each_other(proxy, workdir) -> None:
    """Nothing is recorded yet, and the two folders' first regions differ (eu-west-1; the added
    ap-northeast-1): a first write also holds the lease in every region it knows, so they meet."""
    grown = folder(workdir, "grown", '["eu-west-1"]', f'["us-west-2", "{ADDED}"]')
    first, other = build("fp1"), build("fp3", regions=ALL)
    gate = proxy.gate(["DescribeImages"], count=1)  # the first writer holds its lease, has written nothing
    writing = Cli(workdir, "publish", "--variant", "ceph", "--channel", "blue", "--new-channel", "--ami",
                  ami_flag(first))
    assert gate.wait_held(1), writing.lines
    try:
        code, _, err = Cli(grown, "publish", "--variant", "ceph", "--channel", "blue", "--new-channel", "--ami",
                           ami_flag(other), lease_wait=0.5).finish()
        assert code == 1, err
        assert "the channel is being written by" in err and "nothing was written" in err, err
    finally:
        gate.release()
    code, _, err = writing.finish()
    assert code == 0, err
    assert home_tags("blue") == {"us-west-2": "eu-west-1", "eu-west-1": "eu-west-1", ADDED: None}
    code, _, err = Cli(grown, "publish", "--variant", "ceph", "--channel", "blue", "--ami", ami_flag(other)).finish()
    assert code == 0, err
    assert home_tags("blue") == {r: "eu-west-1" for r in ALL}
    assert leases_anywhere() == []


def test_a_lease_held_in_a_region_the_write_touches_is_honoured(proxy, workdir: Path) -> None:
    """A writer holds the channel's lease in every region it writes: a live lease in the grown folder's
    added region keeps this writer out."""
    first = build("fp1")
    assert Cli(workdir, "publish", "--variant", "ceph", "--channel", "stable", "--ami", ami_flag(first)).finish()[0] == 0
    grown = folder(workdir, "grown", '["us-west-2"]', f'["eu-west-1", "{ADDED}"]')
    live = json.dumps({"owner": "ci@old-runner pid 77", "run_id": "run-old", "operation": "publish to stable (ceph)",
                       "token": "t1", "expires": "2099-01-01T00:00:00+00:00"})
    ssm = boto3.client("ssm", region_name=ADDED)
    ssm.put_parameter(Name="/amibuild/eks-workers/_leases/channel/ceph/stable", Value=live, Type="String")
    code, _, err = Cli(grown, "publish", "--variant", "ceph", "--channel", "stable", "--ami",
                       ami_flag(build("fp3", regions=ALL)), lease_wait=0.5).finish()
    assert code == 1, err
    assert "being written by ci@old-runner pid 77" in err and "nothing was written" in err
    assert {r: current("stable", r) for r in ("us-west-2", "eu-west-1")} == first
    # and its own lease at the channel's home was given back
    assert leases_anywhere() == ["/amibuild/eks-workers/_leases/channel/ceph/stable"]


# ------------------------------------------------------------------------------- a narrowed write


@needs_packer
def test_build_ami_narrowed_by_region_to_a_brand_new_channel_is_refused_before_any_aws_work(sandbox, tmp_path):
    (tmp_path / "amibuild.hcl").write_text(E2E_PIPELINE)
    result = run_cli(tmp_path, "build-ami", "--region", "eu-west-1", "--channel", "blue")
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("amibuild: error: --region eu-west-1: channel blue lives in every region of the "
                           "pipeline (us-west-2, eu-west-1)"), line
    assert "leaving us-west-2 on another build" in line and "--no-publish" in line
    for region in ("us-west-2", "eu-west-1"):
        assert boto3.client("ec2", region_name=region).describe_images(Owners=["self"])["Images"] == []
        assert boto3.client("ssm", region_name=region).get_parameters_by_path(
            Path="/amibuild", Recursive=True)["Parameters"] == []
    # building only is still possible: the dry run of it plans the build and nothing else
    result = run_cli(tmp_path, "build-ami", "--region", "eu-west-1", "--no-publish", "--dry-run")
    assert result.returncode == 0, result.stderr


def test_a_publish_with_the_pipeline_narrowed_to_a_brand_new_channel_is_refused(sandbox, tmp_path) -> None:
    """The channel has no record of its regions yet: the pipeline file's regions are its regions."""
    from amibuild.channels import publish
    from amibuild.errors import PublishRefused
    from amibuild.pipeline import Overrides, load
    from test_publish import gateway

    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    narrowed = load(tmp_path / "amibuild.hcl", Overrides(regions=("eu-west-1",)))
    assert narrowed.target_regions == ("eu-west-1",) and narrowed.narrowed_out == ("us-west-2",)
    ceph = next(v for v in narrowed.variants if v.name == "ceph")
    with pytest.raises(PublishRefused, match="channel blue is also written in us-west-2, which this write does not "
                                             "cover"):
        publish.publish_variant(gateway(), pipeline=narrowed, variant=ceph, channel="blue",
                                amis=build("fp1", regions=("eu-west-1",)))
    assert boto3.client("ssm", region_name="eu-west-1").get_parameters_by_path(
        Path="/amibuild", Recursive=True)["Parameters"] == []
