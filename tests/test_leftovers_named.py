"""A build that fails on amibuild's side after its instance started (issue 29): nothing it made
goes unnamed. Every resource is removed or named as LEFT BEHIND, in the report and in --json.

A full disk: the build folder lives on a small tmpfs; the fault proxy holds Packer's StopInstances
(its instance, key pair and security group exist by then) while the test fills the tmpfs. An
error of amibuild's own: a progress display that raises at a chosen Packer step.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from pathlib import Path

import boto3
import pytest

import test_build_e2e
from amibuild.views.report import build_lines
from test_build_guard import start, until

workdir = test_build_e2e.workdir  # a pipeline folder and a packer wrapper that logs its calls

pytestmark = [
    pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run"),
]


@pytest.fixture
def small_disk(tmp_path: Path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> None:
    """Write to the disk until it refuses: ENOSPC for everyone after this."""
    chunk = b"\0" * 65536
    with (disk / "filler").open("wb", buffering=0) as out:
        while True:
            try:
                out.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
    with (disk / "filler").open("ab", buffering=0) as out:  # the last partial page
        for _ in range(64):
            try:
                out.write(b"\0" * 1024)
            except OSError:
                break


def live_instances(region: str) -> set[str]:
    """Instances not terminated (a stopped one still holds its volume, key pair and group)."""
    ec2 = boto3.client("ec2", region_name=region)
    found = ec2.describe_instances(Filters=[{"Name": "instance-state-name",
                                             "Values": ["pending", "running", "stopping", "stopped"]}])
    return {i["InstanceId"] for r in found["Reservations"] for i in r["Instances"]}


def assert_all_named(variant: dict, launched: set[str], last_line: str) -> None:
    """Every resource of the build still in AWS is listed with its command; the instance is named."""
    west = boto3.client("ec2", region_name="us-west-2")
    listed = {x["id"]: x["command"] for x in variant["left_behind"]}
    for instance in live_instances("us-west-2"):
        assert instance in listed, (instance, variant)
        assert listed[instance] in last_line
    for key in west.describe_key_pairs()["KeyPairs"]:
        if key["KeyName"].startswith(("amibuild-", "packer")):
            assert key["KeyName"] in listed, (key, variant)
    for group in west.describe_security_groups()["SecurityGroups"]:
        if group["GroupName"].startswith("packer_"):
            assert {group["GroupId"], group["GroupName"]} & set(listed), (group, variant)
    for region in test_build_e2e.REGIONS:
        for image in boto3.client("ec2", region_name=region).describe_images(Owners=["self"])["Images"]:
            assert image["ImageId"] in listed, (region, image["ImageId"], variant)
    # the instance Packer launched is named: removed (by Packer, once stopped, or by amibuild) or LEFT BEHIND
    removed = " ".join(variant["leftovers_removed"])
    for instance in launched:
        assert instance in removed or instance in listed, (instance, variant)


def test_a_full_disk_mid_build_removes_or_names_the_instance_key_pair_and_group(workdir: Path, sandbox,
                                                                                small_disk: Path) -> None:
    from faultproxy import FaultProxy

    with FaultProxy(sandbox.endpoint) as proxy:
        proxy.pause(["StopInstances"])  # Packer's instance, key pair and group exist by then
        env = {**os.environ, "AWS_ENDPOINT_URL": proxy.endpoint}
        proc = start(workdir, env, "--variant", "ceph", "--build-dir", str(small_disk / "build"),
                     stderr=workdir / "run.err")
        until(lambda: proxy.paused() >= 1, "packer stopping its instance", proc)
        launched = live_instances("us-west-2")
        assert launched, "packer's instance is running"
        fill(small_disk)
        proxy.resume()
        out, _ = proc.communicate(timeout=180)
    err = (workdir / "run.err").read_text()
    assert proc.returncode == 1, err
    data = json.loads(out)
    (ceph,) = data["variants"]
    assert ceph["name"] == "ceph" and ceph["status"] == "failed", ceph
    assert "no space left" in ceph["error"].lower(), ceph["error"]
    assert_all_named(ceph, launched, err.strip().splitlines()[-1])
    assert "no space left on the device" in err.strip().splitlines()[-1]


class BrokenDisplay:
    """A progress display that raises once at a chosen Packer step: an error of amibuild's own."""

    def __init__(self, at: str) -> None:
        self.at, self.raised = at, False
        self.launched: set[str] = set()

    def update(self, name: str, state, detail: str = "") -> None:
        if self.at in detail and not self.raised:
            self.raised = True
            self.launched = live_instances("us-west-2")
            raise RuntimeError("the display broke")

    def close(self) -> None:
        pass


def test_an_error_of_amibuilds_own_mid_build_removes_or_names_what_the_build_made(workdir: Path, sandbox,
                                                                                  monkeypatch) -> None:
    from faultproxy import FaultProxy

    from amibuild.bake.outcome import BuildStatus
    from amibuild.jobs import build_ami as job
    from amibuild.jobs.env import Env
    from amibuild.jobs.requests_build import BuildRequest
    from amibuild.cli.target import platform

    request = BuildRequest(pipeline=str(workdir / "amibuild.hcl"), variant=("ceph",), build_dir=str(workdir / "build"),
                           no_publish=True)
    chosen = platform()  # the sandbox's, read before AWS_ENDPOINT_URL points at the proxy
    job_env = Env(config={"packer": os.environ["INVOKE_AMIBUILD_PACKER"]}, platform=lambda: chosen)
    # raised once the instance is launched and tagged; Packer's StopInstances is held at the proxy, so
    # the instance is still there when the display breaks, however late its line is read (amibuild
    # stops Packer then; the held request is dropped after the run)
    display = BrokenDisplay("Adding tags to source instance")
    with FaultProxy(sandbox.endpoint) as proxy, monkeypatch.context() as env:
        env.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        proxy.pause(["StopInstances"])
        try:
            run = job.run(request, job_env, progress=display)
        finally:
            proxy.resume(drop=True)
    assert display.raised and display.launched
    (ceph,) = run.outcomes
    assert ceph.status is BuildStatus.FAILED
    assert ceph.error.startswith("RuntimeError: the display broke; packer stopped"), ceph.error
    with pytest.raises(Exception) as caught:
        run.raise_for_status()
    assert_all_named(run.variant_dict(ceph), display.launched, str(caught.value))
    report = "\n".join(build_lines(run))
    for instance in display.launched:
        assert instance in report, report


def test_a_publish_step_that_fails_as_a_whole_still_reports_every_variant_in_json(workdir: Path, sandbox) -> None:
    from conftest import run_cli
    from faultproxy import FaultProxy

    with FaultProxy(sandbox.endpoint) as proxy:  # both runs through it: the endpoint is part of the render
        first = run_cli(workdir, "build-ami", "--variant", "ceph", env={"AWS_ENDPOINT_URL": proxy.endpoint})
        assert first.returncode == 0, first.stderr
        # the reused variant's channel is read before anything is published: that read is refused
        proxy.fail("eu-west-1", ["AmazonSSM.GetParameters"])
        again = run_cli(workdir, "build-ami", "--variant", "ceph", "--json", env={"AWS_ENDPOINT_URL": proxy.endpoint})
    assert again.returncode == 1, again.stderr
    assert again.stdout.strip(), again.stderr
    (ceph,) = json.loads(again.stdout)["variants"]
    assert ceph["name"] == "ceph" and ceph["status"] == "skipped" and ceph["amis"], ceph
    assert ceph["publish_error"].startswith("the publish step failed: ssm:GetParameters"), ceph
    assert "access denied" in ceph["publish_error"], ceph
    assert "ceph (not published: the publish step failed" in again.stderr.strip().splitlines()[-1]


def test_what_packer_announced_and_aws_no_longer_holds_is_named_as_removed_by_packer() -> None:
    from amibuild.bake.leftovers import Leftover, already_gone

    made = [Leftover("instance", "us-west-2", "i-1"), Leftover("key-pair", "us-west-2", "amibuild-k"),
            Leftover("image", "us-west-2", "ami-1"), Leftover("security-group", "us-west-2", "packer_x")]
    # the instance is still there; the group is found by id (so the one announced by name is not gone)
    found = [Leftover("instance", "us-west-2", "i-1"), Leftover("security-group", "us-west-2", "sg-1")]
    assert already_gone(made, found) == [Leftover("key-pair", "us-west-2", "amibuild-k"),
                                         Leftover("image", "us-west-2", "ami-1")]
    assert already_gone(made, []) == made


def test_a_run_record_that_cannot_be_written_still_names_the_failed_variant_and_what_it_left() -> None:
    from test_jobs import PLAN, outcome

    from amibuild.bake.outcome import BuildStatus
    from amibuild.errors import RecordNotWritten
    from amibuild.jobs.build_ami import BuildRun, verdict

    left = {"kind": "instance", "region": "us-west-2", "id": "i-1", "why": "AccessDenied",
            "command": "aws ec2 terminate-instances --instance-ids i-1 --region us-west-2"}
    run = BuildRun(PLAN, (outcome("a", BuildStatus.FAILED, error="no space left on the device; packer stopped",
                                  left_behind=(left,)),), None,
                   record_error="build/runs/x.json: cannot write the run record (no space left on the device)")
    got = verdict(run)
    assert isinstance(got, RecordNotWritten)
    assert str(got) == ("build/runs/x.json: cannot write the run record (no space left on the device); no AMI was made; "
                        "failed: a (no space left on the device; packer stopped); LEFT BEHIND (remove with): "
                        "aws ec2 terminate-instances --instance-ids i-1 --region us-west-2")
