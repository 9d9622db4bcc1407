"""build-ami runs that must not collide or leave things behind (issue 10, the build half).

The real CLI and packer against the emulator, with tests/faultproxy.py in front of it holding a
chosen call (a gate) so each race or fault happens at a known point, never after a sleep.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

import test_build_e2e
from test_build_e2e import REGIONS, ROOT, builds, summary

from amibuild import tags
from amibuild.bake.packer import temp_prefix

workdir = test_build_e2e.workdir  # the same fixture: a pipeline folder and a packer wrapper that logs its calls

pytestmark = pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")


def start(workdir: Path, env: dict, *args: str, stderr: Path) -> subprocess.Popen:
    with stderr.open("w") as handle:  # the child keeps its own descriptor; read the file while it runs
        return subprocess.Popen([sys.executable, "-m", "invoke", "-r", str(ROOT), "build-ami", "--json", *args],
                                cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=handle, text=True)


def until(condition, what: str, proc: subprocess.Popen | None = None, limit: float = 90) -> None:
    """Poll a condition the system under test will reach (not a guess at how long it takes)."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline or (proc is not None and proc.poll() is not None):
            pytest.fail(f"never happened: {what}")
        time.sleep(0.05)


def leases() -> dict[str, dict]:
    ssm = boto3.client("ssm", region_name="us-west-2")
    found = ssm.get_parameters_by_path(Path="/amibuild/e2e/_leases", Recursive=True)["Parameters"]
    return {p["Name"]: json.loads(p["Value"]) for p in found}


def images_with_fingerprint(region: str, fingerprint: str) -> list[str]:
    ec2 = boto3.client("ec2", region_name=region)
    found = ec2.describe_images(Owners=["self"], Filters=[{"Name": f"tag:{tags.FINGERPRINT}", "Values": [fingerprint]}])
    return [i["ImageId"] for i in found["Images"]]


def test_two_concurrent_builds_of_one_variant_make_one_image_per_region(workdir: Path, sandbox) -> None:
    from faultproxy import FaultProxy

    with FaultProxy(sandbox.endpoint) as proxy:
        proxy.pause(["RunInstances"])  # the first run's Packer waits at its launch while the others start
        env = {**os.environ, "AWS_ENDPOINT_URL": proxy.endpoint}
        first = start(workdir, env, "--variant", "ceph", "--no-publish", stderr=workdir / "first.err")
        until(lambda: proxy.paused() == 1, "the first run's packer launching", first)
        (holder,) = leases().values()

        impatient = subprocess.run([sys.executable, "-m", "invoke", "-r", str(ROOT), "build-ami", "--json",
                                    "--variant", "ceph", "--no-publish", "--no-wait"],
                                   cwd=workdir, env=env, capture_output=True, text=True, timeout=90)
        assert impatient.returncode == 1, impatient.stderr
        error = summary(impatient)["ceph"]["error"]
        assert f"run {holder['run_id']}" in error and "--no-wait" in error

        second = start(workdir, env, "--variant", "ceph", "--no-publish", stderr=workdir / "second.err")
        until(lambda: f"waiting for run {holder['run_id']}" in (workdir / "second.err").read_text(),
              "the second run waiting for the first", second)
        proxy.resume()
        out1, _ = first.communicate(timeout=120)
        out2, _ = second.communicate(timeout=120)
    assert first.returncode == 0, (workdir / "first.err").read_text()
    assert second.returncode == 0, (workdir / "second.err").read_text()
    built, reused = summary(subprocess.CompletedProcess([], 0, out1)), summary(subprocess.CompletedProcess([], 0, out2))
    assert built["ceph"]["status"] == "built"
    assert reused["ceph"]["status"] == "skipped"
    assert reused["ceph"]["amis"] == built["ceph"]["amis"]
    assert holder["run_id"] in reused["ceph"]["lease"]
    assert builds(workdir) == ["ceph"], "packer build ran more than once"
    for region in REGIONS:
        assert images_with_fingerprint(region, built["ceph"]["fingerprint"]) == [built["ceph"]["amis"][region]]
    assert leases() == {}, "a lease was not released"
    # each run wrote into its own folder: the first run's log is whole, the others wrote none
    first_run = json.loads(out1)["run_id"]
    assert "Builds finished" in (workdir / "build" / "runs" / first_run / "ceph" / "packer.log").read_text()
    assert not (workdir / "build" / "runs" / json.loads(out2)["run_id"] / "ceph" / "packer.log").exists()


def our_snapshots(region: str) -> set[str]:
    ec2 = boto3.client("ec2", region_name=region)
    return {s["SnapshotId"] for s in ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]}


def test_interrupt_during_a_held_copy_leaves_no_untagged_copy(workdir: Path, sandbox) -> None:
    from faultproxy import FaultProxy

    snapshots_before = {r: our_snapshots(r) for r in REGIONS}
    with FaultProxy(sandbox.endpoint) as proxy:
        # CopyImage reaches the emulator (the copy exists, untagged) and its answer is held
        proxy.pause(["CopyImage"], after_forward=True)
        env = {**os.environ, "AWS_ENDPOINT_URL": proxy.endpoint}
        proc = start(workdir, env, "--variant", "ceph", stderr=workdir / "run.err")
        until(lambda: proxy.paused() == 1, "packer copying the image", proc)
        europe = boto3.client("ec2", region_name="eu-west-1")
        assert europe.describe_images(Owners=["self"])["Images"], "the held copy does not exist yet"
        proc.send_signal(signal.SIGINT)
        proxy.resume()
        out, _ = proc.communicate(timeout=180)
    err = (workdir / "run.err").read_text()
    assert proc.returncode == 130, err
    ceph = summary(subprocess.CompletedProcess([], 0, out))["ceph"]
    assert ceph["status"] == "interrupted"
    left = {(x["region"], x["id"]) for x in ceph["left_behind"]}
    for region in REGIONS:
        ec2 = boto3.client("ec2", region_name=region)
        remaining = {(region, i["ImageId"]) for i in ec2.describe_images(Owners=["self"])["Images"]}
        assert remaining <= left, f"images of the interrupted run survive unlisted in {region}: {remaining - left}"
        new_snapshots = {(region, s) for s in our_snapshots(region) - snapshots_before[region]}
        assert new_snapshots <= left, f"snapshots survive unlisted in {region}: {new_snapshots - left}"
        states = [i["State"]["Name"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
        assert all(s in ("terminated", "shutting-down") for s in states), states
    assert any(x.startswith("image ") and "eu-west-1" in x for x in ceph["leftovers_removed"]), ceph
    assert "removed" in ceph["error"]


def test_endpoint_loss_stops_the_build_within_30s_and_lists_what_is_left(workdir: Path, sandbox) -> None:
    from faultproxy import FaultProxy

    with FaultProxy(sandbox.endpoint) as proxy:
        proxy.pause(["StopInstances"])  # Packer's instance, key pair and group exist by then
        env = {**os.environ, "AWS_ENDPOINT_URL": proxy.endpoint, "INVOKE_AMIBUILD_STALL_AFTER": "2"}
        proc = start(workdir, env, "--variant", "ceph", stderr=workdir / "run.err")
        until(lambda: proxy.paused() == 1, "packer stopping its instance", proc)
        died = time.monotonic()
        proxy.die()
        out, _ = proc.communicate(timeout=120)
        stopped_after = time.monotonic() - died
    err = (workdir / "run.err").read_text()
    assert stopped_after < 30, f"took {stopped_after:.0f}s to notice the endpoint was gone: {err}"
    assert proc.returncode == 1, err
    ceph = summary(subprocess.CompletedProcess([], 0, out))["ceph"]
    assert ceph["status"] == "failed"
    assert ceph["error"].startswith("endpoint lost: "), ceph["error"]
    assert "cannot reach" in ceph["error"]
    # the emulator itself is alive: what amibuild listed is really there, and the commands name it
    west = boto3.client("ec2", region_name="us-west-2")
    running = {i["InstanceId"] for r in west.describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}])["Reservations"] for i in r["Instances"]}
    listed = {x["id"]: x["command"] for x in ceph["left_behind"]}
    assert running and running <= set(listed)
    for instance in running:
        assert listed[instance] == f"aws ec2 terminate-instances --instance-ids {instance} --region us-west-2"
        assert listed[instance] in err.strip().splitlines()[-1]
    # Packer's temporary security group, named as Packer named it, and the build lease are listed too
    groups = {g["GroupName"] for g in west.describe_security_groups()["SecurityGroups"]
              if g["GroupName"].startswith("packer_")}
    assert groups and groups <= set(listed), (groups, listed)
    for group in groups:
        assert listed[group] == f"aws ec2 delete-security-group --group-name {group} --region us-west-2"
    (lease_left,) = [x for x in ceph["left_behind"] if x["kind"] == "lease"]
    assert lease_left["command"].startswith(f"aws ssm delete-parameter --name {lease_left['id']} ")
    # Packer's own temp folder (its packer-log* among them) is gone with it
    import tempfile

    assert not list(Path(tempfile.gettempdir()).glob(f"{temp_prefix(json.loads(out)['run_id'])}*"))
    # the dead run's lease was left to expire; the next run sees its process is gone and takes it over
    assert "left to expire" in ceph["lease"], ceph
    (name, held), = leases().items()
    assert held["run_id"] == json.loads(out)["run_id"]
    from amibuild.aws import Aws
    from amibuild.lease import Lease

    successor = Lease(Aws(region="us-west-2"), name, "us-west-2", run_id="next")
    assert successor.try_acquire() is None
    assert successor.took_over is not None and successor.took_over.run_id == held["run_id"]
    # taken over because its process is gone, not because it expired (it had not): said as such
    assert successor.took_over_why == "gone" and not successor.took_over.expired(time.time())


def children(pid: int) -> list[int]:
    """Direct child processes of `pid`, from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def test_packer_killed_while_its_instance_runs_leaves_nothing_behind(workdir: Path, sandbox) -> None:
    from faultproxy import FaultProxy

    with FaultProxy(sandbox.endpoint) as proxy:
        proxy.pause(["StopInstances"])  # the instance runs, its key pair and group exist
        env = {**os.environ, "AWS_ENDPOINT_URL": proxy.endpoint}
        proc = start(workdir, env, "--variant", "ceph", "--no-publish", stderr=workdir / "run.err")
        until(lambda: proxy.paused() == 1, "packer stopping its instance", proc)
        (packer,) = children(proc.pid)  # Packer leads its own process group
        os.killpg(packer, signal.SIGKILL)  # no chance to clean up after itself
        proxy.resume(drop=True)
        out, _ = proc.communicate(timeout=120)
    err = (workdir / "run.err").read_text()
    assert proc.returncode == 1, err
    ceph = summary(subprocess.CompletedProcess([], 0, out))["ceph"]
    assert ceph["status"] == "failed" and ceph["left_behind"] == [], ceph
    assert ceph["error"].startswith("packer failed: killed by signal 9; "), ceph  # not "exit code -9"
    removed = " ".join(ceph["leftovers_removed"])
    assert "instance i-" in removed and "key-pair amibuild-" in removed and "security-group sg-" in removed, removed
    west = boto3.client("ec2", region_name="us-west-2")
    states = [i["State"]["Name"] for r in west.describe_instances()["Reservations"] for i in r["Instances"]]
    assert states and all(s in ("terminated", "shutting-down") for s in states), states
    assert not [k for k in west.describe_key_pairs()["KeyPairs"] if k["KeyName"].startswith("amibuild-")]
    assert not [g for g in west.describe_security_groups()["SecurityGroups"] if g["GroupName"].startswith("packer")]
    assert leases() == {}


def test_a_variant_an_interrupt_kept_from_starting_names_no_packer_log() -> None:
    """Packer never ran for it: a log path would send the user to a file that does not exist."""
    from types import SimpleNamespace

    from amibuild.bake.executor import Executor
    from amibuild.bake.outcome import BuildStatus, WorkingOutcome

    said = []
    executor = Executor(None, None, None, provenance=None, parallel=1,
                        progress=SimpleNamespace(update=lambda *line: said.append(line)))
    executor.state.interrupted = True
    outcome = WorkingOutcome("ceph", "fp", None, "", log="/w/build/runs/r/ceph/packer.log")
    executor._build_one(SimpleNamespace(name="ceph"), outcome)
    assert (outcome.status, outcome.log) == (BuildStatus.INTERRUPTED, "")
    assert said[-1][2] == "not started"
