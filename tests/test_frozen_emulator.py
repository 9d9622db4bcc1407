"""The emulator frozen mid-build (SIGSTOP: its port still accepts connections, nothing answers).

Unlike a dead endpoint (connection refused at once), a frozen one lets every request hang until
the client gives up, so only bounded timeouts get a build out. The emulator here is a process of
this test's own (not the session's shared one), frozen at a held point: Packer's StopInstances,
held by tests/faultproxy.py, when the instance, key pair, security group and build lease exist.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import boto3
import pytest

from amibuild.bake.packer import temp_prefix
from amibuild.sandbox import Sandbox
from faultproxy import FaultProxy
from test_build_e2e import PIPELINE, ROOT

pytestmark = pytest.mark.skipif(shutil.which("packer") is None, reason="needs the packer binary")


@pytest.fixture
def own_emulator(isolated_env, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    """An emulator process for this test alone: freezing it stops no other test."""
    server = Sandbox().start()
    try:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        yield server
    finally:
        if server.pid is not None:
            try:
                os.kill(server.pid, signal.SIGCONT)  # a frozen process does not stop on SIGTERM
            except ProcessLookupError:
                pass
        server.stop()


def start(workdir: Path, env: dict[str, str], stderr: Path) -> subprocess.Popen:
    with stderr.open("w") as handle:
        return subprocess.Popen([sys.executable, "-m", "invoke", "-r", str(ROOT), "build-ami", "--json",
                                 "--variant", "ceph", "--no-publish"],
                                cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=handle, text=True)


def until(condition, what: str, proc: subprocess.Popen, limit: float = 90) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline or proc.poll() is not None:
            pytest.fail(f"never happened: {what}")
        time.sleep(0.05)


def test_a_frozen_emulator_ends_the_build_within_30s_naming_every_leftover(own_emulator: Sandbox,
                                                                          tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    with FaultProxy(own_emulator.endpoint) as proxy:
        proxy.pause(["StopInstances"])  # Packer's instance, key pair and group exist by then
        env = {**os.environ, "AWS_ENDPOINT_URL": proxy.endpoint, "INVOKE_AMIBUILD_STALL_AFTER": "2"}
        proc = start(tmp_path, env, tmp_path / "run.err")
        until(lambda: proxy.paused() == 1, "packer stopping its instance", proc)
        assert own_emulator.pid is not None
        os.kill(own_emulator.pid, signal.SIGSTOP)
        frozen = time.monotonic()
        try:
            proxy.resume()  # the held call goes on to a process that accepts and never answers
            try:
                out, _ = proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
            took = time.monotonic() - frozen
        finally:
            os.kill(own_emulator.pid, signal.SIGCONT)
        err = (tmp_path / "run.err").read_text()
        assert took < 30, f"took {took:.0f}s to end against a frozen emulator:\n{err}"
        assert proc.returncode == 1, err
        (ceph,) = json.loads(out)["variants"]
        run_id = json.loads(out)["run_id"]
        assert ceph["status"] == "failed" and ceph["error"].startswith("endpoint lost: "), ceph["error"]
        listed = {x["id"]: x for x in ceph["left_behind"]}
        last = err.strip().splitlines()[-1]

        # thawed: everything the run left in AWS is named, with the command that removes it
        west = boto3.client("ec2", region_name="us-west-2", endpoint_url=own_emulator.endpoint)
        running = {i["InstanceId"] for r in west.describe_instances(Filters=[
            {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}])["Reservations"]
            for i in r["Instances"]}
        keys = {k["KeyName"] for k in west.describe_key_pairs()["KeyPairs"]}
        groups = {g["GroupName"] for g in west.describe_security_groups()["SecurityGroups"]
                  if g["GroupName"].startswith("packer_")}
        assert running and groups and keys, (running, groups, keys)
        for left in (*running, *groups, *keys):
            assert left in listed, f"{left} is left in AWS and not named: {sorted(listed)}"
            assert listed[left]["command"] in last, f"{left}'s command is not on the last line: {last}"
        ssm = boto3.client("ssm", region_name="us-west-2", endpoint_url=own_emulator.endpoint)
        leases = [p["Name"] for p in ssm.get_parameters_by_path(Path="/amibuild/e2e/_leases",
                                                                Recursive=True)["Parameters"]]
        assert leases and all(name in listed for name in leases), (leases, sorted(listed))
        # Packer's temp folder (its packer-log* files) is gone
        assert not list(Path(tempfile.gettempdir()).glob(f"{temp_prefix(run_id)}*"))

        # the next build: the dead run's lease is taken over because its process is gone, not "expired"
        again = subprocess.run([sys.executable, "-m", "invoke", "-r", str(ROOT), "build-ami", "--json",
                                "--variant", "ceph", "--no-publish"],
                               cwd=tmp_path, env=env,  # the same endpoint: the same fingerprint, the same lease
                               capture_output=True, text=True, timeout=180)
    assert again.returncode == 0, again.stderr
    (next_ceph,) = json.loads(again.stdout)["variants"]
    said = again.stderr + json.dumps(next_ceph)
    assert "expired" not in said, said
    assert run_id in (next_ceph.get("lease") or ""), next_ceph
    assert "gone" in next_ceph["lease"], next_ceph
