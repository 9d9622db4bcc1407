"""`amibuild channels --check` and `--repair`: a channel split across regions is named, then brought
to one build under its lease. Through the CLI against the emulator; every region read back with boto3."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import boto3
import pytest

from amibuild.channels.read import ChannelEntry
from amibuild.channels.repair import Holding, Split, choose, find_splits
from conftest import run_cli, unlimited
from test_publish import NAME, PIPELINE, REGIONS, build, current


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    return tmp_path


def ami_flag(amis: dict[str, str]) -> str:
    return ",".join(f"{r}={a}" for r, a in amis.items())


def split_by_hand(region: str, ami: str, channel: str = "recommended") -> None:
    """What a writer that takes no lease (or an old, stopped one) leaves: one region moved."""
    boto3.client("ssm", region_name=region).put_parameter(
        Name=NAME.format(channel=channel), Value=ami, Type="String", DataType="aws:ec2:image", Overwrite=True)


@pytest.fixture
def split(sandbox, workdir: Path) -> tuple[dict[str, str], dict[str, str]]:
    """recommended: eu-west-1 on build fp1, us-west-2 moved to build fp2 (the newest write)."""
    old, new = build("fp1"), build("fp2")
    with unlimited():  # set-up: the channel the test finds split
        done = run_cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(old))
    assert done.returncode == 0, done.stderr
    split_by_hand("us-west-2", new["us-west-2"])
    return old, new


def test_channels_check_exits_1_naming_the_split_channel_and_what_each_region_holds(workdir, split) -> None:
    old, new = split
    result = run_cli(workdir, "channels", "--check")
    assert result.returncode == 1, result.stderr
    assert (f"channel recommended of ceph (1.35) is split across regions: us-west-2 holds {new['us-west-2']} "
            f"(build fp2, run run-fp2); eu-west-1 holds {old['eu-west-1']} (build fp1, run run-fp1)") in result.stdout
    assert "1 channel(s) split across regions" in result.stderr
    listed = json.loads(run_cli(workdir, "channels", "--check", "--json").stdout)
    assert listed["split"][0]["regions"] == {"us-west-2": {"ami": new["us-west-2"], "build": "fp2 run-fp2"},
                                             "eu-west-1": {"ami": old["eu-west-1"], "build": "fp1 run-fp1"}}


def test_channels_repair_brings_the_channel_to_the_newest_writes_build_and_says_why(workdir, split) -> None:
    old, new = split
    result = run_cli(workdir, "channels", "--repair")
    assert result.returncode == 0, result.stderr
    assert "channel recommended of ceph: repaired to build fp2 (run run-fp2) because us-west-2 holds it from the newest write" \
        in result.stdout
    assert f"eu-west-1: {old['eu-west-1']} -> {new['eu-west-1']}" in result.stdout
    assert {r: current("recommended", r) for r in REGIONS} == new
    again = run_cli(workdir, "channels", "--check")
    assert again.returncode == 0, again.stdout
    assert "every channel is whole" in again.stdout


def test_repair_skips_a_newer_build_missing_in_a_region(sandbox, workdir) -> None:
    old, lone = build("fp1"), build("fp3", regions=("us-west-2",))
    assert run_cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(old)).returncode == 0
    split_by_hand("us-west-2", lone["us-west-2"])
    result = run_cli(workdir, "channels", "--repair")
    assert result.returncode == 0, result.stderr
    assert "repaired to build fp1 (run run-fp1) because it is the newest build with an available image in every " \
           "region (fp3 (run run-fp3) is not available everywhere)" in result.stdout
    assert {r: current("recommended", r) for r in REGIONS} == old


def test_promote_refuses_a_split_source_and_the_next_publish_makes_the_channel_whole(workdir, split) -> None:
    old, new = split
    refused = run_cli(workdir, "promote", "--variant", "ceph", "--from", "recommended", "--to", "stable")
    assert refused.returncode == 1
    assert "channel recommended is split across regions" in refused.stderr and "nothing written" in refused.stderr
    assert all(not p["Name"].endswith("/stable/image_id") for r in REGIONS
               for p in boto3.client("ssm", region_name=r).get_parameters_by_path(
                   Path="/amibuild", Recursive=True)["Parameters"])
    newest = build("fp4")
    assert run_cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(newest)).returncode == 0
    assert {r: current("recommended", r) for r in REGIONS} == newest
    assert run_cli(workdir, "channels", "--check").returncode == 0


# ------------------------------------------------------------------------------- pure


def _entry(region: str, ami: str | None, minutes: int = 0) -> ChannelEntry:
    when = datetime(2026, 12, 1, tzinfo=timezone.utc) + timedelta(minutes=minutes)
    return ChannelEntry("ceph", "1.35", "stable", region, "/p" if ami else "", ami, 1 if ami else 0, when)


@pytest.mark.parametrize("entries, builds, split", [
    ([_entry("a", "ami-1"), _entry("b", "ami-2")], {("a", "ami-1"): "fp1", ("b", "ami-2"): "fp1"}, False),
    ([_entry("a", "ami-1"), _entry("b", "ami-2")], {("a", "ami-1"): "fp1", ("b", "ami-2"): "fp2"}, True),
    ([_entry("a", "ami-1"), _entry("b", None)], {("a", "ami-1"): "fp1"}, True),
    ([_entry("a", None), _entry("b", None)], {}, False),
    ([_entry("a", "ami-1"), _entry("b", "ami-2")], {}, True),  # untagged images: each its own build
], ids=["one-build", "two-builds", "missing-region", "unpublished", "untagged"])
def test_find_splits(entries, builds, split) -> None:
    assert bool(find_splits(entries, builds)) is split


def test_choose_takes_the_newest_write_available_everywhere_else_none() -> None:
    when = datetime(2026, 12, 1, tzinfo=timezone.utc)
    s = Split("ceph", "1.35", "stable", "/p", (Holding("a", "ami-1", "fp1", when),
                                               Holding("b", "ami-2", "fp2", when + timedelta(minutes=5))))
    assert choose(s, {"fp1": {"a": "ami-1", "b": "ami-3"}, "fp2": {"a": "ami-4", "b": "ami-2"}}).build == "fp2"
    assert choose(s, {"fp1": {"a": "ami-1", "b": "ami-3"}, "fp2": {"b": "ami-2"}}).build == "fp1"
    assert choose(s, {"fp2": {"b": "ami-2"}}) is None


def test_a_region_set_by_hand_to_another_variants_image_is_named_so_and_not_as_unavailable() -> None:
    """A parameter pointed at variant old's image by hand: the check and the repair's reason say whose image
    it is; it is not "not available everywhere" (it may be: it is just not this variant's)."""
    entries = [_entry("a", "ami-1"), _entry("b", "ami-2", minutes=5)]
    (s,) = find_splits(entries, {("a", "ami-1"): "fp1 r1", ("b", "ami-2"): "fp9 r1"},
                       {("a", "ami-1"): "ceph", ("b", "ami-2"): "old"})
    assert s.describe().endswith("a holds ami-1 (build fp1, run r1); b holds ami-2 (build fp9, run r1, "
                                 "an image of variant old)")
    choice = choose(s, {"fp1 r1": {"a": "ami-1", "b": "ami-3"}})
    assert (choice.build, dict(choice.amis)) == ("fp1 r1", {"a": "ami-1", "b": "ami-3"})
    assert choice.why == ("it is the newest build with an available image in every region "
                          "(fp9 (run r1) is an image of variant old)")


def test_channels_check_appends_the_split_channel_to_the_step_summary(workdir, split, tmp_path: Path) -> None:
    old, new = split
    summary_file = tmp_path / "step-summary.md"
    result = run_cli(workdir, "channels", "--check", env={"GITHUB_STEP_SUMMARY": str(summary_file)})
    assert result.returncode == 1, result.stderr
    text = summary_file.read_text()
    assert text.startswith("### amibuild channels --check\n")
    assert f"| ceph | recommended | us-west-2 | `{new['us-west-2']}` | fp2 |" in text
    assert f"| ceph | recommended | eu-west-1 | `{old['eu-west-1']}` | fp1 |" in text
    shown = run_cli(workdir, "channels", "--check", "--markdown")
    assert shown.returncode == 1 and shown.stdout.strip() == text.strip(), shown.stdout
