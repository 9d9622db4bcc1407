"""The jobs' decisions as tables on recorded facts, and the jobs through the `amibuild` Program.

Pure: what a finished packer process means, build-lease steps and reuse, rollback targets, what a
build run's result means as an exit code, run-record shapes. Through the CLI, in process, against
the emulator: `--dry-run` on publish / promote / rollback writes nothing (read back with boto3);
`runs` lists unreadable records as such and does not read FIFOs or symlinks.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from types import SimpleNamespace

import boto3
import pytest

from amibuild.aws import Image, Parameter
from amibuild.bake import record
from amibuild.bake.decide import (ImageFact, LeaseStep, PackerEnd, PackerFacts, lease_step, packer_end, ready_images,
                                  reuse_after_lease, should_look_for_reuse)
from amibuild.bake.executor import BuildOutcome, BuildStatus
from amibuild.bake.build_plan import BuildDecision, BuildPlan, plan_build
from amibuild.channels.from_build import VariantPublished
from amibuild.channels.plan import Provenance, description
from amibuild.channels.publish import rollback_versions
from amibuild.errors import (BuildFailed, ExitCode, Interrupted, PackerInputRefused, PublishRefused, RecordNotWritten,
                             SpecError)
from amibuild.jobs.build_ami import BuildRun, verdict
from amibuild.sandbox import Sandbox, seed_images

# ------------------------------------------------------------------------------- packer's end


@pytest.mark.parametrize("facts, end", [
    (PackerFacts(0), PackerEnd.CLEAN),
    (PackerFacts(0, artifacts=True), PackerEnd.CLEAN),
    # exit 0 but the stream carried an error: not clean
    (PackerFacts(0, errors=("Build 'x' errored",), failed_step="StepRunSourceInstance"), PackerEnd.FAILED),
    (PackerFacts(1, errors=("Error launching source instance",), failed_step="StepRunSourceInstance"), PackerEnd.FAILED),
    # no step started and no artifact: Packer refused the template or its values
    (PackerFacts(1, errors=("Unsupported argument; An argument named \"instnce_type\"",)), PackerEnd.REFUSED),
    (PackerFacts(1, errors=("an error",), artifacts=True), PackerEnd.FAILED),
    (PackerFacts(1), PackerEnd.FAILED),  # non-zero with nothing else to go by
    (PackerFacts(1, errors=("x",), timed_out=True), PackerEnd.TIMED_OUT),
    (PackerFacts(143, timed_out=True, stalled="connection refused"), PackerEnd.ENDPOINT_LOST),
    # amibuild stopped it itself (its log refused by a full disk): a clean exit after that is not clean
    (PackerFacts(0, artifacts=True, stopped="no space left on the device"), PackerEnd.STOPPED),
    (PackerFacts(143, timed_out=True, stopped="no space"), PackerEnd.STOPPED),
    (PackerFacts(143, stalled="gone", stopped="no space"), PackerEnd.ENDPOINT_LOST),
    (PackerFacts(0, interrupted=True, timed_out=True, stalled="gone"), PackerEnd.INTERRUPTED),
    (PackerFacts(0, interrupted=True), PackerEnd.INTERRUPTED),  # a clean end after the signal still stops the run
])
def test_packer_end_reads_what_the_process_and_amibuild_did(facts: PackerFacts, end: PackerEnd) -> None:
    assert packer_end(facts) is end
    assert end.needs_cleanup == (end is not PackerEnd.CLEAN)


# ------------------------------------------------------------------------------- the build lease


@pytest.mark.parametrize("interrupted, held_by, wait, step", [
    (False, None, True, LeaseStep.TAKEN),
    (False, None, False, LeaseStep.TAKEN),
    (False, "run-b", True, LeaseStep.WAIT),
    (False, "run-b", False, LeaseStep.BUSY),
    (True, None, True, LeaseStep.INTERRUPTED),
    (True, "run-b", False, LeaseStep.INTERRUPTED),
])
def test_lease_step(interrupted: bool, held_by, wait: bool, step: LeaseStep) -> None:
    assert lease_step(interrupted=interrupted, held_by=held_by, wait=wait) is step


@pytest.mark.parametrize("waited_for, force, look", [
    (None, False, True), (None, True, False), ("run-b", False, True), ("run-b", True, True)])
def test_reuse_is_looked_for_after_a_wait_or_without_force(waited_for, force: bool, look: bool) -> None:
    assert should_look_for_reuse(waited_for_run=waited_for, force=force) is look


def test_reuse_after_lease_names_who_built_it() -> None:
    amis = {"us-west-2": "ami-0123456789abcdef0"}
    assert reuse_after_lease(waited_for_run=None, found=None) is None
    assert reuse_after_lease(waited_for_run="run-b", found={}) is None
    waited = reuse_after_lease(waited_for_run="run-b", found=amis)
    assert waited.amis == amis and waited.reason == "built by run run-b while this run waited for it"
    assert reuse_after_lease(waited_for_run=None, found=amis).reason == "built by another run since this run planned"


def test_ready_images_takes_the_newest_available_and_needs_every_region() -> None:
    found = {
        "us-west-2": [ImageFact("ami-00000001", "available", "2026-01-01T00:00:00Z"),
                      ImageFact("ami-00000002", "available", "2026-02-01T00:00:00Z"),
                      ImageFact("ami-00000003", "pending", "2026-03-01T00:00:00Z")],
        "eu-west-1": [ImageFact("ami-00000004", "available", "2026-02-01T00:00:00Z")],
    }
    assert ready_images(["us-west-2", "eu-west-1"], found) == {"us-west-2": "ami-00000002", "eu-west-1": "ami-00000004"}
    assert ready_images(["us-west-2", "eu-west-1", "ap-south-1"], found) is None
    assert ready_images(["us-west-2"], {"us-west-2": [ImageFact("ami-00000003", "pending", "x")]}) is None


def image(ami: str, region: str, run: str, created: str, fingerprint: str = "fp1") -> Image:
    return Image(ami, region, f"x-{run}", "available", {"amibuild:run-id": run, "amibuild:fingerprint": fingerprint},
                 created)


# run r1 is in both regions; run r2 (newer, same fingerprint: --force) only reached us-west-2
TWO_RUNS = {"us-west-2": [image("ami-00000011", "us-west-2", "r1", "2026-01-01T00:00:00Z"),
                          image("ami-00000012", "us-west-2", "r2", "2026-02-01T00:00:00Z")],
            "eu-west-1": [image("ami-00000021", "eu-west-1", "r1", "2026-01-01T01:00:00Z")]}


def test_ready_images_are_one_runs_in_every_region_never_a_mix_of_runs() -> None:
    assert ready_images(["us-west-2", "eu-west-1"], TWO_RUNS) == {"us-west-2": "ami-00000011", "eu-west-1": "ami-00000021"}
    mixed = {"us-west-2": TWO_RUNS["us-west-2"][1:], "eu-west-1": TWO_RUNS["eu-west-1"]}  # r2 here, r1 there
    assert ready_images(["us-west-2", "eu-west-1"], mixed) is None


def test_a_plan_builds_again_when_no_one_run_has_the_fingerprint_in_every_region() -> None:
    pipeline = SimpleNamespace(target_regions=("us-west-2", "eu-west-1"))
    rendered = [(SimpleNamespace(variant=SimpleNamespace(name="ceph"), fingerprint="fp1"), Path("build/ceph"))]
    whole = plan_build(pipeline, rendered, TWO_RUNS, run_id="r3").items[0]
    assert whole.decision is BuildDecision.SKIP and whole.existing == {"us-west-2": "ami-00000011", "eu-west-1": "ami-00000021"}
    mixed = plan_build(pipeline, rendered, {"us-west-2": TWO_RUNS["us-west-2"][1:], "eu-west-1": TWO_RUNS["eu-west-1"]},
                       run_id="r3").items[0]
    assert mixed.decision is BuildDecision.BUILD and mixed.existing == {}
    assert mixed.reason.startswith("images with this fingerprint are in every region, but no one run's are")


# ------------------------------------------------------------------------------- rollback's target

NAME = "/amibuild/eks-workers/1.35/ceph/stable/image_id"


def version(region: str, number: int, ami: str, run: str | None) -> Parameter:
    text = description("ceph", "stable", Provenance(run, f"fp-{run}" if run else None)) if run else "by hand"
    return Parameter(NAME, region, ami, number, "aws:ec2:image", description=text)


HISTORIES = {
    "us-west-2": [version("us-west-2", 1, "ami-0000000a", "r1"), version("us-west-2", 2, "ami-0000000b", "r2"),
                  version("us-west-2", 3, "ami-0000000c", "r3")],
    # the copy region got the same builds as other version numbers (a write failed there once)
    "eu-west-1": [version("eu-west-1", 1, "ami-0000001a", "r1"), version("eu-west-1", 2, "ami-0000001x", None),
                  version("eu-west-1", 3, "ami-0000001b", "r2"), version("eu-west-1", 4, "ami-0000001c", "r3")],
}


@pytest.mark.parametrize("to_version, want", [
    (None, {"us-west-2": "ami-0000000b", "eu-west-1": "ami-0000001b"}),  # newest with another AMI: same build r2
    (1, {"us-west-2": "ami-0000000a", "eu-west-1": "ami-0000001a"}),
    (3, {"us-west-2": "ami-0000000c", "eu-west-1": "ami-0000001c"}),
])
def test_rollback_versions_follow_the_build_not_the_number(to_version, want) -> None:
    chosen = rollback_versions(NAME, ["us-west-2", "eu-west-1"], HISTORIES, to_version)
    assert {r: p.value for r, p in chosen.items()} == want


@pytest.mark.parametrize("histories, to_version, error, words", [
    ({"us-west-2": HISTORIES["us-west-2"], "eu-west-1": []}, None, PublishRefused, "does not exist in eu-west-1"),
    (HISTORIES, 9, SpecError, "--to-version 9"),
    ({"us-west-2": [version("us-west-2", 1, "ami-0000000a", "r1"), version("us-west-2", 2, "ami-0000000a", "r1")],
      "eu-west-1": HISTORIES["eu-west-1"]}, None, PublishRefused, "nothing earlier to go back to"),
    ({"us-west-2": HISTORIES["us-west-2"], "eu-west-1": [version("eu-west-1", 1, "ami-0000001z", "other")]},
     2, PublishRefused, "eu-west-1 has no version from the same build"),
])
def test_rollback_versions_refuse_what_cannot_be_rolled_back(histories, to_version, error, words) -> None:
    with pytest.raises(error, match=words):
        rollback_versions(NAME, ["us-west-2", "eu-west-1"], histories, to_version)


def test_rollback_skips_a_write_that_was_put_back_it_never_held_the_channel() -> None:
    # r2's transaction failed in another region: its write here (version 3) was put back to r1's image (version 4)
    put_back = version("us-west-2", 4, "ami-0000000a", "r1")
    put_back = Parameter(NAME, "us-west-2", put_back.value, 4, put_back.data_type,
                         description=put_back.description + "; put back by amibuild after a failed write elsewhere")
    west = [version("us-west-2", 1, "ami-0000000z", "r0"), version("us-west-2", 2, "ami-0000000a", "r1"),
            version("us-west-2", 3, "ami-0000000b", "r2"), put_back]
    eu = [version("eu-west-1", 1, "ami-0000001z", "r0"), version("eu-west-1", 2, "ami-0000001a", "r1")]
    chosen = rollback_versions(NAME, ["us-west-2", "eu-west-1"], {"us-west-2": west, "eu-west-1": eu}, None)
    assert {r: p.value for r, p in chosen.items()} == {"us-west-2": "ami-0000000z", "eu-west-1": "ami-0000001z"}
    # asked for by number, it is still taken: the user named it
    asked = rollback_versions(NAME, ["us-west-2"], {"us-west-2": west}, 3)
    assert asked["us-west-2"].value == "ami-0000000b"


def test_rollback_to_a_version_not_written_by_amibuild_takes_the_same_number() -> None:
    hand = {"us-west-2": [version("us-west-2", 1, "ami-0000000a", None), version("us-west-2", 2, "ami-0000000b", "r2")],
            "eu-west-1": [version("eu-west-1", 1, "ami-0000001a", None), version("eu-west-1", 2, "ami-0000001b", "r2")]}
    chosen = rollback_versions(NAME, ["us-west-2", "eu-west-1"], hand, None)
    assert {r: p.version for r, p in chosen.items()} == {"us-west-2": 1, "eu-west-1": 1}


# ------------------------------------------------------------------------------- a run's verdict


class _Pipeline:
    name = "eks-workers"


PLAN = BuildPlan("20261201T120000Z-abc123", "2026-12-01T12:00:00Z", _Pipeline(), ("us-west-2",), (), False)
AMI = {"us-west-2": "ami-0123456789abcdef0"}


def outcome(name: str, status: BuildStatus, **kw) -> BuildOutcome:
    return BuildOutcome(name, "f" * 64, BuildDecision.BUILD, "new", status, **kw)


def published(name: str, error: str = "", stuck: tuple[str, ...] = ()) -> VariantPublished:
    return VariantPublished(name, "recommended", f"/p/{name}", {} if error else {"us-west-2": 1}, error, stuck)


@pytest.mark.parametrize("run, error, code, words", [
    (BuildRun(PLAN, (outcome("a", BuildStatus.BUILT, amis=AMI),), None, {"a": published("a")}), None, ExitCode.OK, ()),
    (BuildRun(PLAN, (outcome("a", BuildStatus.SKIPPED, amis=AMI),), None), None, ExitCode.OK, ()),
    (BuildRun(PLAN, (outcome("a", BuildStatus.BUILT, amis=AMI), outcome("b", BuildStatus.FAILED, error="boom",
                                                                           log="/l/b/packer.log")), None),
     BuildFailed, ExitCode.FAILED, ("1 variant(s) failed", "b (log: /l/b/packer.log)")),
    (BuildRun(PLAN, (outcome("a", BuildStatus.BUILT, amis=AMI),), None, {"a": published("a", "AccessDenied")}),
     BuildFailed, ExitCode.FAILED, ("a (not published: AccessDenied)",)),
    # every failure is Packer refusing a value the user gave, and nothing was built: bad input
    (BuildRun(PLAN, (outcome("a", BuildStatus.FAILED, error="--var instance_type: refused", input_refused=True),),
              None), PackerInputRefused, ExitCode.USAGE, ("--var instance_type: refused",)),
    (BuildRun(PLAN, (outcome("a", BuildStatus.FAILED, error="refused", input_refused=True),
                     outcome("b", BuildStatus.BUILT, amis=AMI)), None), BuildFailed, ExitCode.FAILED, ("a (refused)",)),
    (BuildRun(PLAN, (outcome("a", BuildStatus.INTERRUPTED),), None, interrupted=True), Interrupted,
     ExitCode.INTERRUPTED, ("interrupted: nothing was published",)),
    (BuildRun(PLAN, (outcome("a", BuildStatus.BUILT, amis=AMI), outcome("b", BuildStatus.BUILT, amis=AMI)), None,
              {"a": published("a"), "b": published("b", "failed", stuck=("eu-west-1",))}, interrupted=True,
              signal="SIGTERM", exit_code=ExitCode.TERMINATED),
     Interrupted, ExitCode.TERMINATED, ("interrupted by SIGTERM: published before the interrupt: a (every region)",
                                        "not published: b", "left partly written (see the run record): b")),
    (BuildRun(PLAN, (outcome("a", BuildStatus.BUILT, amis=AMI),), None, {"a": published("a")},
              record_error="build/runs/x.json: cannot write the run record (no space left on the device)"),
     RecordNotWritten, ExitCode.FAILED, ("no space left on the device", "AMIs made: a us-west-2=ami-0123456789abcdef0")),
])
def test_verdict_of_a_build_run(run: BuildRun, error, code: ExitCode, words) -> None:
    got = verdict(run)
    if error is None:
        assert got is None
        run.raise_for_status()
        return
    assert type(got) is error and got.exit_code == code
    for phrase in words:
        assert phrase in str(got)
    with pytest.raises(error):
        run.raise_for_status()


def test_exit_codes_are_128_plus_the_signal() -> None:
    assert [ExitCode.for_signal(s) for s in (1, 2, 15, 9)] == [129, 130, 143, ExitCode.INTERRUPTED]


# ------------------------------------------------------------------------------- run records


@pytest.mark.parametrize("data, problem", [
    ({"run_id": "x", "variants": []}, ""),
    ({"run_id": "x"}, ""),
    ([1, 2, 3], "a JSON list, not an object"),
    ({"run_id": "x", "variants": "oops"}, "variants is not a list of objects"),
    ({"run_id": "x", "variants": [1]}, "variants is not a list of objects"),
    ({"run_id": 7}, "run_id is not a string"),
    ("text", "a JSON str"),
])
def test_check_record(data, problem: str) -> None:
    got = record.check_record(data)
    assert (problem in got) if problem else got == ""
    assert bool(got) == bool(problem)


def test_write_atomic_replaces_whole_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "r.json"
    record.write_record(path, {"run_id": "r", "state": "running"})
    record.write_record(path, {"run_id": "r", "state": "finished"})
    assert json.loads(path.read_text())["state"] == "finished"
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@pytest.fixture
def small_tmpfs(tmp_path: Path):
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root to mount a small tmpfs")
    where = tmp_path / "small"
    where.mkdir()
    if not _mount("-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)):
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_disk_is_one_clear_error_and_the_old_record_stays_whole(small_tmpfs: Path) -> None:
    path = small_tmpfs / "runs" / "r.json"
    record.write_record(path, {"run_id": "r", "state": "running"})
    with pytest.raises(RecordNotWritten, match="no space left on the device") as caught:
        record.write_record(path, {"run_id": "r", "state": "finished", "pad": "x" * 200_000})
    assert caught.value.exit_code == ExitCode.FAILED and str(path) in str(caught.value)
    assert json.loads(path.read_text())["state"] == "running"
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]


def test_a_read_only_folder_is_one_clear_error(small_tmpfs: Path) -> None:
    (small_tmpfs / "runs").mkdir()
    assert _mount("-o", "remount,ro", str(small_tmpfs))
    with pytest.raises(RecordNotWritten, match="read-only file system"):
        record.write_record(small_tmpfs / "runs" / "r.json", {"run_id": "r"})


# ------------------------------------------------------------------------------- through the Program


def amibuild(capsys, *argv: str) -> tuple[int, str, str]:
    """Run `amibuild ARGV` in this process: (exit code, stdout, stderr)."""
    from amibuild.cli.main import program

    capsys.readouterr()
    try:
        program().run(["amibuild", *argv])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_runs_lists_unreadable_records_and_reads_no_fifo_or_symlink(tmp_path: Path, capsys) -> None:
    runs = tmp_path / "build" / "runs"
    runs.mkdir(parents=True)
    (runs / "20261201T100000Z-aaaaaa.json").write_text(json.dumps({"run_id": "20261201T100000Z-aaaaaa", "variants": [
        {"name": "ceph", "status": "built"}]}))
    (runs / "20261201T110000Z-bbbbbb.json").write_text("[1,2,3]")
    (runs / "20261201T120000Z-cccccc.json").write_text('{"run_id": "x", "variants": "oops"}')
    (runs / "20261201T130000Z-dddddd.json").write_text("{not json")
    os.mkfifo(runs / "20261201T140000Z-eeeeee.json")  # no writer: an ordinary open would hang
    (runs / "20261201T150000Z-ffffff.json").symlink_to("/dev/zero")  # would stream for ever
    code, out, err = amibuild(capsys, "runs", "--build-dir", str(tmp_path / "build"))
    assert code == 0, err
    lines = dict(line.split("  ", 1) for line in out.splitlines())
    assert lines["20261201T100000Z-aaaaaa"].endswith("1 built")
    assert "UNREADABLE: not a run record (a JSON list" in lines["20261201T110000Z-bbbbbb"]
    assert "UNREADABLE: not a run record (variants is not a list" in lines["20261201T120000Z-cccccc"]
    assert "UNREADABLE: not JSON" in lines["20261201T130000Z-dddddd"]
    assert "UNREADABLE: cannot read it" in lines["20261201T140000Z-eeeeee"]
    assert "UNREADABLE: cannot read it" in lines["20261201T150000Z-ffffff"]
    code, out, _ = amibuild(capsys, "runs", "--json", "--build-dir", str(tmp_path / "build"))
    listed = {entry["run_id"]: entry for entry in json.loads(out)}
    assert code == 0 and "unreadable" in listed["20261201T110000Z-bbbbbb"]
    assert listed["20261201T100000Z-aaaaaa"]["variants"][0]["status"] == "built"


def test_packer_logs_skip_fifos_and_symlinks(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "20261201T100000Z-aaaaaa"
    (run / "a").mkdir(parents=True)
    (run / "b").mkdir()
    (run / "c").mkdir()
    (run / "a" / "packer.log").write_text("line one\nline two\n")
    os.mkfifo(run / "b" / "packer.log")
    (run / "c" / "packer.log").symlink_to("/dev/zero")
    assert record.packer_logs(tmp_path, "20261201T100000Z-aaaaaa") == ["line one", "line two"]


PIPELINE = """
pipeline {
  name       = "eks-workers"
  ssm_prefix = "/amibuild"
  regions    = ["us-west-2"]
  copy_to    = ["eu-west-1"]
}
variant "ceph" {
  extra_packages = ["ceph-common"]
}
"""
REGIONS = ("us-west-2", "eu-west-1")
PARAM = "/amibuild/eks-workers/1.35/ceph/{channel}/image_id"


def image(fingerprint: str) -> dict[str, str]:
    """An amibuild-tagged image per region, as a build leaves it."""
    amis = {}
    source = seed_images()[0].image_id
    for region in REGIONS:
        ec2 = boto3.client("ec2", region_name=region)
        instance = ec2.run_instances(ImageId=source, MinCount=1, MaxCount=1, InstanceType="m5.large")
        ami = ec2.create_image(InstanceId=instance["Instances"][0]["InstanceId"],
                               Name=f"amibuild-ceph-{uuid.uuid4().hex[:8]}")["ImageId"]
        ec2.create_tags(Resources=[ami], Tags=[{"Key": "amibuild:variant", "Value": "ceph"},
                                               {"Key": "amibuild:fingerprint", "Value": fingerprint},
                                               {"Key": "amibuild:run-id", "Value": f"run-{fingerprint}"}])
        amis[region] = ami
    return amis


def everything(region: str) -> dict[str, list]:
    """Every parameter under the prefix (leases included) with its history, in one region."""
    ssm = boto3.client("ssm", region_name=region)
    names = [p["Name"] for p in ssm.get_parameters_by_path(Path="/amibuild", Recursive=True)["Parameters"]]
    return {n: [(h["Version"], h["Value"]) for h in ssm.get_parameter_history(Name=n)["Parameters"]] for n in names}


@pytest.fixture
def channel_repo(sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    (tmp_path / ".git").mkdir()  # the pipeline search stops here
    monkeypatch.chdir(tmp_path)
    return tmp_path


def ami_flag(amis: dict[str, str]) -> str:
    return ",".join(f"{r}={a}" for r, a in sorted(amis.items()))


def test_publish_dry_run_prints_the_plan_region_by_region_and_writes_nothing(channel_repo: Path, capsys) -> None:
    amis = image("f1")
    before = {r: everything(r) for r in REGIONS}
    code, out, err = amibuild(capsys, "publish", "--variant", "ceph", "--ami", ami_flag(amis), "--dry-run")
    assert code == 0, err
    assert out.splitlines()[0].startswith("publish (dry run: nothing written): ceph recommended")
    for region in REGIONS:
        assert f"  {region}: (new) -> {amis[region]}  would write version 1" in out
    assert {r: everything(r) for r in REGIONS} == before == {r: {} for r in REGIONS}
    # the same command without --dry-run carries out that plan
    code, out, err = amibuild(capsys, "publish", "--variant", "ceph", "--ami", ami_flag(amis))
    assert code == 0, err
    for region in REGIONS:
        assert f"  {region}: (new) -> {amis[region]}  version 1" in out
        assert everything(region)[PARAM.format(channel="recommended")] == [(1, amis[region])]


def test_a_refused_dry_run_says_why_and_exits_as_the_write_would(channel_repo: Path, capsys) -> None:
    amis = image("f1")
    code, out, err = amibuild(capsys, "publish", "--variant", "ceph", "--ami", f"us-west-2={amis['us-west-2']}",
                              "--dry-run", "--json")
    assert code == ExitCode.FAILED
    plan = json.loads(out)
    assert plan["dry_run"] is True and {r["action"] for r in plan["regions"]} == {"write", "refused"}
    assert err.startswith("amibuild: error: publish ceph to recommended") and "nothing written" in err
    assert all(everything(r) == {} for r in REGIONS)


def test_promote_and_rollback_dry_runs_write_nothing(channel_repo: Path, capsys) -> None:
    first, second = image("f1"), image("f2")
    for amis in (first, second):
        assert amibuild(capsys, "publish", "--variant", "ceph", "--ami", ami_flag(amis))[0] == 0
    before = {r: everything(r) for r in REGIONS}
    code, out, err = amibuild(capsys, "promote", "--variant", "ceph", "--from", "recommended", "--to", "stable",
                              "--dry-run")
    assert code == 0, err
    assert out.splitlines()[0].startswith("promote recommended -> stable (dry run: nothing written)")
    assert f"  us-west-2: (new) -> {second['us-west-2']}  would write version 1" in out
    code, out, err = amibuild(capsys, "rollback", "--variant", "ceph", "--channel", "recommended", "--dry-run",
                              "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["operation"] == "roll back to version 1"
    assert {r["region"]: (r["action"], r["ami"], r["previous_ami"]) for r in plan["regions"]} == {
        region: ("write", first[region], second[region]) for region in REGIONS}
    assert {r: everything(r) for r in REGIONS} == before
    # the rollback itself then writes exactly that plan
    code, out, err = amibuild(capsys, "rollback", "--variant", "ceph", "--channel", "recommended")
    assert code == 0, err
    for region in REGIONS:
        assert everything(region)[PARAM.format(channel="recommended")][-1] == (3, first[region])


def test_bad_input_is_refused_before_a_dry_run_reads_anything(channel_repo: Path, capsys) -> None:
    code, _, err = amibuild(capsys, "publish", "--variant", "ceph", "--ami", "us-west-2=ami-nope", "--dry-run")
    assert code == ExitCode.USAGE and err.startswith("amibuild: error: --ami") and err.count("\n") == 1


def test_errno_names() -> None:
    assert record.why_not_written(OSError(errno.ENOSPC, "x")) == "no space left on the device"
    assert record.why_not_written(OSError(errno.EROFS, "x")) == "read-only file system"


# ------------------------------------------------------------------------------- the extra's hint


def test_the_extra_hint_names_the_install_the_user_has(tmp_path: Path) -> None:
    from amibuild.sandbox.moto_check import install_hint, moto_requirement

    pipx = tmp_path / "pipx" / "venvs" / "amibuild"
    pipx.mkdir(parents=True)
    (pipx / "pipx_metadata.json").write_text("{}")
    assert install_hint(pipx, "moto[server]>=5.2.5,<5.3") == (
        "pipx inject amibuild 'moto[server]>=5.2.5,<5.3' (or: pipx install --force 'amibuild[sandbox]')")
    assert install_hint(tmp_path / "pipx" / "venvs" / "other").startswith("pipx inject amibuild 'moto[server]")
    assert install_hint(tmp_path / "venv") == "pip install 'amibuild[sandbox]'"
    assert moto_requirement().startswith("moto[server]")


# ------------------------------------------------------------------------------- nodegroup-deploy --dry-run

NODES_PIPELINE = """
pipeline {
  name       = "eks-workers"
  ssm_prefix = "/amibuild"
  regions    = ["us-west-2"]
}
defaults {
  os                 = "al2"
  kubernetes_version = "1.30"
}
variant "ceph" {
  extra_packages = ["ceph-common"]
}
"""


def stacks() -> list[tuple[str, str, dict]]:
    cfn = boto3.client("cloudformation", region_name="us-west-2")
    out = []
    for stack in cfn.describe_stacks()["Stacks"]:
        params = {p["ParameterKey"]: p.get("ParameterValue") for p in stack.get("Parameters", [])}
        out.append((stack["StackName"], stack["StackStatus"], params))
    return sorted(out)


def test_nodegroup_deploy_dry_run_sends_neither_create_nor_update(sandbox: Sandbox, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from amibuild.sandbox import SANDBOX_VPC_NAME

    (tmp_path / "amibuild.hcl").write_text(NODES_PIPELINE)
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    ec2 = boto3.client("ec2", region_name="us-west-2")
    vpc = ec2.describe_vpcs(Filters=[{"Name": "tag:Name", "Values": [SANDBOX_VPC_NAME]}])["Vpcs"][0]["VpcId"]
    subnets = sorted(s["SubnetId"] for s in ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"])
    plane = ec2.create_security_group(GroupName="eks-cluster-prod", Description="control plane", VpcId=vpc)["GroupId"]
    source = seed_images()[0].image_id
    instance = ec2.run_instances(ImageId=source, MinCount=1, MaxCount=1, InstanceType="m5.large")
    ami = ec2.create_image(InstanceId=instance["Instances"][0]["InstanceId"], Name="amibuild-ceph-1")["ImageId"]
    ec2.create_tags(Resources=[ami], Tags=[{"Key": "amibuild:variant", "Value": "ceph"},
                                           {"Key": "amibuild:fingerprint", "Value": "f1"}])
    assert amibuild(capsys, "publish", "--variant", "ceph", "--ami", f"us-west-2={ami}")[0] == 0
    flags = ["nodegroup-deploy", "--stack", "ng-dry", "--cluster", "prod", "--vpc-id", vpc, "--subnet",
             ",".join(subnets), "--control-plane-sg", plane, "--variant", "ceph"]

    code, out, err = amibuild(capsys, *flags, "--dry-run")
    assert code == 0, err
    assert out.splitlines()[0] == "stack ng-dry (us-west-2): would create (dry run: nothing sent)"
    assert "  would set NodeImageIdSSMParam: (new) -> '/amibuild/eks-workers/1.30/ceph/recommended/image_id'" in out
    assert f"  would set VpcId: (new) -> '{vpc}'" in out
    assert stacks() == []

    assert amibuild(capsys, *flags)[0] == 0  # the deploy itself
    before = stacks()
    code, out, err = amibuild(capsys, "nodegroup-deploy", "--stack", "ng-dry", "--parameter",
                              "NodeInstanceType=m6i.large", "--dry-run", "--json")
    assert code == 0, err
    planned = json.loads(out)
    assert planned["action"] == "would update" and planned["changed"] == ["NodeInstanceType: 't3.medium' -> 'm6i.large'"]
    assert "VpcId" in planned["kept"]
    assert stacks() == before
    cfn = boto3.client("cloudformation", region_name="us-west-2")
    assert cfn.list_change_sets(StackName="ng-dry")["Summaries"] == []


def test_nodegroup_deploy_is_one_frozen_settings_value_made_from_the_flags_before_any_aws_call(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The nodegroup-deploy job turns its request into `handoff.job.DeploySettings`; the stage's `job.deploy`
    takes only that. Bad flags are refused while it is made: nothing listens at the endpoint, so an AWS
    call would fail."""
    import dataclasses

    from amibuild.errors import SpecError
    from amibuild.handoff import handoff_jobs as job
    from amibuild.jobs import env, node_commands
    from amibuild.jobs.requests_nodes import DeployRequest

    (tmp_path / "amibuild.hcl").write_text(NODES_PIPELINE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    opts = env.options(env.Env(), env.Scope("amibuild.hcl", ("ceph",)))

    def settings(**flags):
        given = dict(stack="ng", region=None, variant="ceph", channel="stable", cluster="prod", vpc_id=None,
                     subnet=("subnet-a,subnet-b",), parameter=("NodeInstanceType=m6i.large",), proxy="",
                     no_proxy=(), service_cidr="")
        return node_commands.deploy_settings(DeployRequest(**{**given, **flags}), opts)

    made = settings(node_label=("team=ml",), timeout="30m", dry_run=True)
    assert isinstance(made, job.DeploySettings)
    assert dict(made.given) == {"ClusterName": "prod", "Subnets": "subnet-a,subnet-b", "NodeInstanceType": "m6i.large"}
    assert made.channel_parameter == "/amibuild/eks-workers/1.30/ceph/stable/image_id"
    assert (made.stack, made.variant_os, made.os, made.timeout, made.dry_run) == ("ng", "al2", "", 1800, True)
    assert made.asked.labels == ("team=ml",) and made.asked.proxy is None  # not given: the stack's is kept
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.stack = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        made.given["NodeInstanceType"] = "t3.small"  # type: ignore[index]

    for flags, words in [
        ({"stack": None}, "--stack NAME is required"),
        ({"os": "windows"}, "--os 'windows': choose one of al2, al2023"),
        ({"parameter": ("HttpProxy=http://p:3128",)}, "--parameter HttpProxy: set it with --proxy"),
        ({"parameter": ("ClusterName=other",)}, "ClusterName is set twice"),
        ({"parameter": ("BootstrapArguments=--use-max-pods false",), "os": "al2023"}, "al2023 nodes (nodeadm)"),
        ({"timeout": "soon"}, "--timeout"),
    ]:
        with pytest.raises(SpecError, match=words.replace("(", r"\(").replace(")", r"\)")):
            settings(**flags)
    # --channel without --variant: the pipeline's one variant (test_first_hour: a file of two names them);
    # neither: the stack's own parameter is kept
    alone = settings(variant=None)
    assert (alone.channel_parameter, alone.variant_os) == ("/amibuild/eks-workers/1.30/ceph/stable/image_id", "al2")
    neither = settings(variant=None, channel=None)
    assert (neither.channel_parameter, neither.variant_os) == (None, "")


# ------------------------------------------------------------------------------- a record that cannot be written

ONE_VARIANT = """
pipeline {
  name       = "eks-workers"
  ssm_prefix = "/amibuild"
  regions    = ["us-west-2"]
}
variant "ceph" {
  extra_packages = ["ceph-common"]
}
"""


@pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")
def test_a_record_that_cannot_be_written_at_the_end_names_the_amis_made(sandbox: Sandbox, small_disk: Path,
                                                                       tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The build folder turns read-only while the channel is written (the publish is held at its
    first PutParameter, the remount done, the write let go): the run finishes, its final record
    cannot be written, and the error line and --json name the AMI made."""
    from faultproxy import FaultProxy

    (tmp_path / "amibuild.hcl").write_text(ONE_VARIANT)
    (tmp_path / ".git").mkdir()
    with FaultProxy(sandbox.endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        # the held write must wait for the release, not time out (10 s) on a loaded machine and retry
        monkeypatch.setenv("AMIBUILD_READ_TIMEOUT", "300")
        monkeypatch.setenv("AMIBUILD_CHANNEL_DEADLINE", "600")
        gate = proxy.gate(["AmazonSSM.PutParameter"], region="us-west-2", name="1.35/ceph/recommended/image_id")
        proc = subprocess.Popen([os.sys.executable, "-m", "amibuild", "build-ami", "--json", "--build-dir",
                                 str(small_disk)], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            assert gate.wait_held(1, timeout=240), "the publish never started"
            started = list((small_disk / "runs").glob("*.json"))
            assert len(started) == 1 and json.loads(started[0].read_text())["state"] == "running"
            assert _mount("-o", "remount,ro", str(small_disk))
        finally:
            gate.release()
        out, err = proc.communicate(timeout=240)
    assert proc.returncode == ExitCode.FAILED, err
    summary = json.loads(out)
    (variant,) = summary["variants"]
    ami = variant["amis"]["us-west-2"]
    assert variant["status"] == "built" and variant["published"]["regions"] == {"us-west-2": 1}
    assert summary["record"] is None and "read-only file system" in summary["record_error"]
    last = err.strip().splitlines()[-1]
    assert last.startswith("amibuild: error: ") and "cannot write the run record (read-only file system)" in last
    assert f"AMIs made: ceph us-west-2={ami}" in last
    assert json.loads(started[0].read_text())["state"] == "running"  # the old record whole, not half written
    ec2 = boto3.client("ec2", region_name="us-west-2", endpoint_url=sandbox.endpoint)
    assert ec2.describe_images(ImageIds=[ami])["Images"]  # made, published, and named: not lost


@pytest.fixture
def small_disk(tmp_path: Path):
    """A tmpfs of its own (8 MiB): enough for one run's files; remounted read-only by the test."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root to mount a tmpfs")
    where = tmp_path / "disk"
    where.mkdir()
    if not _mount("-t", "tmpfs", "-o", "size=8m", "tmpfs", str(where)):
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")
def test_a_read_only_build_folder_stops_build_ami_before_any_aws_write(sandbox: Sandbox, small_disk: Path,
                                                                       tmp_path: Path, monkeypatch, capsys) -> None:
    (tmp_path / "amibuild.hcl").write_text(ONE_VARIANT)
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    assert _mount("-o", "remount,ro", str(small_disk))
    code, out, err = amibuild(capsys, "build-ami", "--build-dir", str(small_disk))
    assert code == ExitCode.FAILED and out == ""
    last = err.strip().splitlines()[-1]
    assert last.startswith("amibuild: error: ") and "cannot write the rendered files (read-only file system)" in last
    assert "Traceback" not in err
    assert everything("us-west-2") == {}  # no lease, no channel
    ec2 = boto3.client("ec2", region_name="us-west-2")
    assert ec2.describe_images(Owners=["self"])["Images"] == []
