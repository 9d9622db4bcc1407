"""CI summaries: Markdown appended to $GITHUB_STEP_SUMMARY (and --markdown), and `::error` annotations.

build-ami runs the real packer against the emulator, in process; promote, rollout, fleet and
channels run on images made the quick way (tests/test_fleet.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from amibuild.cli import run as cli_run
from amibuild.jobs.shown import Shown
from amibuild.sandbox.fleet_seed import FleetSeed
from amibuild.views import summary
from conftest import run_cli
import test_fleet
from test_fleet import PARAM, REGION, amibuild, make_image, promote, publish

PIPELINE = """\
pipeline {
  name    = "fleet-e2e"
  regions = ["us-west-2"]
  copy_to = ["eu-west-1"]
}

variant "ceph" {
  kubernetes_version = "1.33"
  extra_packages     = ["ceph-common"]
}

variant "ceph-arm" {
  kubernetes_version = "1.33"
  arch               = "arm64"
}
"""


@pytest.fixture
def step_summary(tmp_path: Path, sandbox, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "step-summary.md"
    path.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(path))
    return path


def rows_of(markdown: str, title: str) -> list[list[str]]:
    """The body rows of the table after the last heading `title`."""
    lines = markdown.rsplit(title, 1)[1].splitlines()
    table = [line for line in lines[lines.index(next(line for line in lines if line.startswith("|"))):]]
    table = table[:next((n for n, line in enumerate(table) if not line.startswith("|")), len(table))]
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in table[2:]]


@pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")
def test_build_ami_appends_a_table_with_one_row_per_variant(step_summary: Path) -> None:
    def build_ami(*args: str) -> tuple[int, str, str]:
        done = run_cli(step_summary.parent, "build-ami", *args, binary="amibuild")
        return done.returncode, done.stdout, done.stderr

    code, out, err = build_ami()
    assert code == 0, err
    text = step_summary.read_text()
    assert text.startswith("earlier step\n")  # appended, not overwritten
    rows = rows_of(text, "### amibuild build-ami ")
    assert [(r[0], r[1]) for r in rows] == [("ceph", "built"), ("ceph-arm", "built")]
    for row in rows:
        assert "us-west-2: `ami-" in row[2] and "eu-west-1: `ami-" in row[2]
        assert row[3].startswith("`") and row[5].startswith("recommended us-west-2 v1")
    assert "### amibuild build-ami" not in out  # the summary goes to the file; stdout keeps its lines

    code, out, err = build_ami("--markdown")  # unchanged: both reused
    assert code == 0, err
    assert [(r[0], r[1]) for r in rows_of(out, "### amibuild build-ami ")] == [("ceph", "skipped"),
                                                                               ("ceph-arm", "skipped")]
    assert step_summary.read_text().count("### amibuild build-ami") == 2


def test_an_error_on_a_line_of_the_pipeline_file_is_annotated(tmp_path: Path, monkeypatch, capsys) -> None:
    (tmp_path / "amibuild.hcl").write_text('pipeline {\n  name = "x"\n  regions = ["us-west-2"\n}\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    code, out, err = amibuild(capsys, "render")
    assert code == 2
    annotation, error = err.strip().splitlines()[-2:]
    assert annotation.startswith("::error file=amibuild.hcl,line=4::amibuild.hcl:4: HCL syntax error")
    assert error.startswith("amibuild: error: amibuild.hcl:4: HCL syntax error")
    # outside GitHub Actions the error stays one line
    monkeypatch.delenv("GITHUB_ACTIONS")
    code, out, err = amibuild(capsys, "render")
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_annotation_paths_are_relative_to_the_workspace_and_values_escaped() -> None:
    line = summary.annotation("/work/repo/ci/amibuild.hcl:12: bad value 100%\nsecond line", workspace="/work/repo")
    assert line == "::error file=ci/amibuild.hcl,line=12::/work/repo/ci/amibuild.hcl:12: bad value 100%25%0Asecond line"
    assert summary.annotation("variant \"a\": arch: 'sparc' is not supported") is None
    assert summary.cell("a|b\nc") == "a\\|b c"
    assert summary.cell("packer: <nil>; token=<redacted>") == "packer: &lt;nil>; token=&lt;redacted>"
    assert summary.cell("us-west-2: `ami-1`<br>us-east-1: `ami-2` in `<x>`") == \
        "us-west-2: `ami-1`<br>us-east-1: `ami-2` in `<x>`"  # our line breaks, and code spans, as they are


def test_a_step_summary_file_that_cannot_be_written_is_a_warning_not_a_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """It was an OSError traceback, exit 1, after the command's work (a publish, a build) was done."""
    path = tmp_path / "gone" / "summary.md"  # e.g. `docker run -e GITHUB_STEP_SUMMARY` without the mount
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(path))
    cli_run.show(Shown([], lines=lambda _: ["done"], summary=lambda _: "### done"), False, markdown=True)
    out, err = capsys.readouterr()
    assert out == "### done\n"
    assert err == f"warning: job summary not written: GITHUB_STEP_SUMMARY={path}: No such file or directory\n"


def test_promote_rollout_fleet_and_channels_summaries(step_summary: Path, sandbox, capsys) -> None:
    (step_summary.parent / "amibuild.hcl").write_text(test_fleet.PIPELINE)  # one region: quick images suffice
    old, new = make_image("ceph", 1), make_image("ceph", 2)
    publish(capsys, "ceph", old)
    promote(capsys)
    sandbox.seed_fleet(FleetSeed(stacks=(("ng", PARAM.format(variant="ceph", channel="stable")),), stack_capacity=0))
    publish(capsys, "ceph", new)
    promote(capsys)
    text = step_summary.read_text()
    assert text.count("### amibuild promote recommended -> stable: ceph stable") == 2
    assert rows_of(text, "### amibuild promote recommended -> stable: ceph stable")[0] == [
        REGION, "write", f"`{new}`", f"`{old}`", "1 → 2"]

    code, out, err = amibuild(capsys, "fleet", "--markdown")
    assert code == 0, err
    consumers = rows_of(out, "**Consumers**")
    stack = next(r for r in consumers if r[0] == "stack")
    assert stack[1:4] == ["ng", REGION, f"`{old}`"] and stack[6] == "1 behind (0.0 d)"
    assert stack[7] == f"`amibuild rollout --stack ng --variant ceph --channel stable --region {REGION}`"

    code, out, err = amibuild(capsys, "rollout", "--stack", "ng", "--variant", "ceph", "--channel", "stable",
                              "--region", REGION)
    assert code == 0, err
    row = rows_of(step_summary.read_text(), "### amibuild rollout: stack ng")[0]
    assert row[4:6] == [f"`{new}`", f"`{old}`"] and row[7] == "verified"
    assert step_summary.read_text().count("### amibuild fleet: fleet-e2e") == 1  # fleet appended too

    code, out, err = amibuild(capsys, "channels", "--markdown")
    assert code == 0, err
    assert [r[:5] for r in rows_of(out, "### amibuild channels")] == [
        ["ceph", "recommended", REGION, f"`{new}`", "2"], ["ceph", "stable", REGION, f"`{new}`", "2"],
        ["ceph-arm", "recommended", REGION, "missing", "-"]]


def test_promote_due_summary_has_a_row_per_gated_channel_with_when_it_is_due() -> None:
    from datetime import datetime, timezone

    from amibuild.channels.due import DueAction, DueItem

    due_at = datetime(2026, 12, 4, 22, 16, tzinfo=timezone.utc)
    text = summary.due_markdown([
        DueItem("ceph", "stable", "recommended", DueAction.WAIT, "ami-0123456789abcdef0", "soak 3d", due_at),
        DueItem("ceph-arm", "stable", "recommended", DueAction.PROMOTED, "ami-0fedcba9876543210", "gate met"),
    ])
    lines = text.splitlines()
    assert lines[0] == "### amibuild promote --due"
    assert f"| ceph | stable | recommended | {DueAction.WAIT} | `ami-0123456789abcdef0` | 2026-12-04 22:16 UTC | soak 3d |" in lines
    assert f"| ceph-arm | stable | recommended | {DueAction.PROMOTED} | `ami-0fedcba9876543210` | - | gate met |" in lines
    assert "no gated channel" in summary.due_markdown([])
    # a dry run's summary says so: its "promote" rows were not written
    assert summary.due_markdown([], dry_run=True).splitlines()[0] == "### amibuild promote --due (dry run: nothing written)"


def test_publish_and_rollback_summaries_have_a_row_per_region_with_the_ami_before_and_after(
        step_summary: Path, capsys) -> None:
    regions = ("us-west-2", "eu-west-1")  # the fixture's pipeline: built in us-west-2, copied to eu-west-1
    first = {region: make_image("ceph", 1, region) for region in regions}
    second = {region: make_image("ceph", 2, region) for region in regions}

    def publish_amis(amis: dict[str, str], *flags: str) -> tuple[int, str, str]:
        return amibuild(capsys, "publish", "--variant", "ceph",
                        *(f for region, ami in amis.items() for f in ("--ami", f"{region}={ami}")), *flags)

    code, out, err = publish_amis(first)
    assert code == 0, err
    assert "### amibuild" not in out  # the summary goes to the file; stdout keeps its lines
    code, out, err = publish_amis(second, "--markdown")
    assert code == 0, err
    title = "### amibuild publish: ceph recommended"
    assert rows_of(out, title) == [[r, "write", f"`{second[r]}`", f"`{first[r]}`", "1 → 2"] for r in regions]
    text = step_summary.read_text()
    assert text.count(title) == 2  # --markdown prints it and still appends it
    earlier = title + text.split(title)[1]  # the first publish's table
    assert rows_of(earlier, title) == [[r, "write", f"`{first[r]}`", "-", "0 → 1"] for r in regions]

    code, out, err = amibuild(capsys, "rollback", "--variant", "ceph", "--markdown")
    assert code == 0, err
    rolled = rows_of(out, "### amibuild roll back to version 1: ceph recommended")
    assert rolled == [[r, "write", f"`{first[r]}`", f"`{second[r]}`", "2 → 3"] for r in regions]
    assert step_summary.read_text().count("### amibuild roll back to version 1: ceph recommended") == 1


def test_rehearse_summary_rows_say_each_verdict_and_why() -> None:
    """The table as rehearse's own verdict line says it (the CLI runs are in tests/test_rehearse.py)."""
    from amibuild.rehearse.rehearsal_report import Failure, Finding, Report

    def report(variant: str, **fields) -> Report:
        return Report(**{"variant": variant, "steps": [], "failure": None, "packages": [], "units": [],
                         "etc_written": [], "etc_removed": [], "calls": 0, "findings": [], "seconds": 2.4, **fields})

    lint = Finding("amibuild", "scripts/proxy.sh", 7, "SC2086", "warning", "Double quote to prevent globbing")
    text = summary.rehearse_markdown([
        report("ok", notes=["stood in for curl"]),
        report("broken", failure=Failure("3 (install-packages.sh)", "scripts/install-packages.sh", None, None, ())),
        report("linted", findings=[lint]),
        report("users", findings=[Finding("user", "user-01-x.sh", 1, "SC2034", "warning", "unused")]),
    ])
    assert rows_of(text, "### amibuild rehearse") == [
        ["ok", "passed", "0", "2s", "stood in for curl"],
        ["broken", "failed", "0", "2s", "step 3 (install-packages.sh): scripts/install-packages.sh did not finish"],
        ["linted", "failed", "0", "2s", "shellcheck: scripts/proxy.sh:7: warning SC2086: Double quote to prevent globbing"],
        ["users", "passed", "0", "2s", "-"],  # a user's script's findings are warnings, not failures
    ]


def test_channels_summary_says_when_each_was_written_in_utc_whatever_the_zone_botocore_gave() -> None:
    """botocore dates LastModifiedDate in the machine's zone; the summary, like `channels --history`, says UTC."""
    from datetime import datetime, timedelta, timezone
    from types import SimpleNamespace

    written = datetime(2026, 12, 4, 23, 16, tzinfo=timezone(timedelta(hours=-5)))  # 2026-12-05 04:16 UTC
    entry = SimpleNamespace(variant="ceph", channel="stable", region="us-west-2", ami="ami-0123456789abcdef0",
                            version=3, modified=written)
    assert rows_of(summary.channels_markdown([entry]), "### amibuild channels") == [
        ["ceph", "stable", "us-west-2", "`ami-0123456789abcdef0`", "3", "2026-12-05 04:16"]]
