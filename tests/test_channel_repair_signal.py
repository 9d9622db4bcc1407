"""`channels --repair` says what became of every split channel, in the order it handled them, even
after a signal (issue 29). A subprocess held at tests/faultproxy.py's gate while it is signalled.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import test_channel_races
from test_channel_races import Cli, held_write
from test_channel_repair import ami_flag, split_by_hand
from test_publish import REGIONS, build, current

workdir, proxy = test_channel_races.workdir, test_channel_races.proxy


def two_splits(workdir: Path) -> dict[str, tuple[dict[str, str], dict[str, str]]]:
    """recommended and stable: each published on one build, then us-west-2 moved to a newer one."""
    made = {}
    for channel, (first, second) in (("recommended", ("fp1", "fp2")), ("stable", ("fp3", "fp4"))):
        old, new = build(first), build(second)
        code, _, err = Cli(workdir, "publish", "--variant", "ceph", "--channel", channel, "--ami", ami_flag(old)).finish()
        assert code == 0, err
        split_by_hand("us-west-2", new["us-west-2"], channel)
        made[channel] = (old, new)
    return made


def test_sigterm_during_repair_reports_the_channel_it_repaired_and_the_one_it_did_not_start(proxy, workdir) -> None:
    made = two_splits(workdir)
    gate = held_write(proxy, "recommended")  # the first channel's eu-west-1 write, in flight
    repair = Cli(workdir, "channels", "--repair", "--json", held=True)
    assert gate.wait_held(1), repair.lines
    repair.signal(signal.SIGTERM)
    repair.wait_line("SIGTERM: finishing the channel write in progress")
    gate.release()
    code, out, err = repair.finish()
    assert code == 143, err
    # the one in flight finished in every region; the other was not started
    assert {r: current("recommended", r) for r in REGIONS} == made["recommended"][1]
    assert current("stable", "eu-west-1") == made["stable"][0]["eu-west-1"]
    handled = json.loads(out)["channels"]
    assert [(c["channel"], c["repaired"], c["started"]) for c in handled] == [
        ("recommended", True, True), ("stable", False, False)]
    assert handled[0]["result"]["regions"][1]["ami"] == made["recommended"][1]["eu-west-1"]
    last = err.strip().splitlines()[-1]
    assert last == "amibuild: interrupted by SIGTERM: repaired: recommended; NOT repaired: stable of ceph", last


def test_sigterm_during_repair_prints_a_line_for_every_channel_in_order(proxy, workdir) -> None:
    made = two_splits(workdir)
    gate = held_write(proxy, "recommended")
    repair = Cli(workdir, "channels", "--repair", held=True)
    assert gate.wait_held(1), repair.lines
    repair.signal(signal.SIGTERM)
    repair.wait_line("SIGTERM: finishing the channel write in progress")
    gate.release()
    code, out, err = repair.finish()
    assert code == 143, err
    lines = out.strip().splitlines()
    assert lines[0].startswith("channel recommended of ceph: repaired to build fp2 (run run-fp2)"), out
    moved = f"  eu-west-1: {made['recommended'][0]['eu-west-1']} -> {made['recommended'][1]['eu-west-1']} (version"
    assert any(line.startswith(moved) for line in lines), out
    assert lines[-1].startswith("channel stable of ceph: NOT repaired (not started: a signal came first): "
                                "channel stable of ceph (1.35) is split across regions"), out


def test_a_channel_repair_refuses_does_not_stop_the_next_and_each_gets_its_line(sandbox, workdir) -> None:
    from conftest import run_cli

    # recommended: each region on a build that exists only there, so no build can be chosen
    first = build("fp1")
    assert run_cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(first)).returncode == 0
    split_by_hand("us-west-2", build("fp3", regions=("us-west-2",))["us-west-2"])
    split_by_hand("eu-west-1", build("fp5", regions=("eu-west-1",))["eu-west-1"])
    # stable: repairable, to fp4
    old, new = build("fp2"), build("fp4")
    assert run_cli(workdir, "publish", "--variant", "ceph", "--channel", "stable", "--ami", ami_flag(old)).returncode == 0
    split_by_hand("us-west-2", new["us-west-2"], "stable")

    result = run_cli(workdir, "channels", "--repair")
    assert result.returncode == 1, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("channel recommended of ceph: NOT repaired: channel recommended of ceph (1.35) is split"), lines
    assert "none was chosen" in lines[0]
    assert lines[1].startswith("channel stable of ceph: repaired to build fp4 (run run-fp4)"), lines
    assert {r: current("stable", r) for r in REGIONS} == new
    assert result.stderr.strip().splitlines()[-1] == (
        "amibuild: error: 1 of 2 split channel(s) NOT repaired (repaired: stable; NOT repaired: recommended of ceph); "
        "each line above says why")
