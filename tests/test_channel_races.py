"""Channels never diverge: racing writers and signals, through the real CLI, against the emulator.

Every race and every signal is made deterministic with a gate in tests/faultproxy.py: one
region's PutParameter of the channel is held until the test releases it, so the test knows a
transaction is half way (one region written, the other in flight) when the second writer starts
or the signal is sent. Nothing sleeps and hopes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

import boto3
import pytest

from amibuild.pipeline import load
from amibuild.lease import is_lease
from conftest import ends_with_the_test, unlimited
from faultproxy import FaultProxy, Gate
from test_publish import NAME, PIPELINE, REGIONS, build, current, do_publish, values, written

ROOT = Path(__file__).resolve().parent.parent
PUT = "AmazonSSM.PutParameter"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    return tmp_path


@pytest.fixture
def proxy(sandbox, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    with FaultProxy(sandbox.endpoint) as faults:
        monkeypatch.setenv("AWS_ENDPOINT_URL", faults.endpoint)
        yield faults
        faults.clear()  # a test that failed half way must not leave a request held


class Cli:
    """One `invoke TASK ...` process; its stderr is read as it comes, so a test can wait for a line."""

    def __init__(self, workdir: Path, *args: str, lease_wait: float = 30, ignore_sigint: bool = False,
                 deadline: float | None = None, held: bool = False) -> None:
        env = {**os.environ, "INVOKE_AMIBUILD_LEASE_WAIT": str(lease_wait)}
        # None: the real default (30 s of waiting on AWS, `aws.deadline`).
        if deadline is not None:
            env["INVOKE_AMIBUILD_CHANNEL_DEADLINE"] = str(deadline)
        # held: a writer whose write a gate holds while the test acts (starts another process, sends a
        # signal). A hold is waiting on AWS, so on a loaded machine (a process taking 10 s to start, a
        # test stalled) its request's read timeout (10 s) would end the hold and its retry would pass,
        # or its deadline (30 s) would end it, not the test's release: both generous.
        if held:
            env["INVOKE_AMIBUILD_CHANNEL_DEADLINE"] = str(deadline or 600)
            env["INVOKE_AMIBUILD_READ_TIMEOUT"] = "300"

        def background() -> None:  # what a shell's `cmd &` does to a job: SIGINT ignored
            signal.signal(signal.SIGINT, signal.SIG_IGN)

        self.proc = subprocess.Popen([sys.executable, "-m", "invoke", "-r", str(ROOT), *args], cwd=workdir,
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     preexec_fn=background if ignore_sigint else None)
        self.lines: list[str] = []
        self._seen = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        ends_with_the_test(self)  # conftest: a test that fails half way leaves no process behind

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._seen:
                self.lines.append(line.rstrip("\n"))
                self._seen.notify_all()

    def wait_line(self, text: str, timeout: float = 60) -> None:
        with self._seen:
            found = self._seen.wait_for(lambda: any(text in line for line in self.lines), timeout)
        assert found, f"{text!r} never appeared on stderr: {self.lines}"

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def finish(self, timeout: float = 120) -> tuple[int, str, str]:
        assert self.proc.stdout is not None and self.proc.stderr is not None
        with self.proc.stdout:
            out = self.proc.stdout.read()
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        self.proc.stderr.close()
        return code, out, "\n".join(self.lines)

    def end(self) -> None:
        """Kill the process if it still runs and close its pipes (a test that failed half way)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self._reader.join(timeout=10)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


def held_write(proxy: FaultProxy, channel: str, region: str = "eu-west-1") -> Gate:
    """Hold the next PutParameter of `channel`'s own parameter in `region` (not its lease's)."""
    return proxy.gate([PUT], region=region, name=f"/{channel}/image_id")


def history_everywhere(channel: str) -> dict[str, list[str]]:
    return {region: values(channel, region) for region in REGIONS}


def leases_left() -> list[str]:
    return [name for region in REGIONS for name in written(region) if is_lease(name)]


@pytest.fixture
def channels(proxy, workdir: Path) -> dict[str, dict[str, str]]:
    """stable, recommended and candidate each published with their own build."""
    pipeline = load(workdir / "amibuild.hcl")
    ceph = next(v for v in pipeline.variants if v.name == "ceph")
    made = {}
    with unlimited():  # set-up: the tests' own writers still wait for tokens
        for channel, fingerprint in (("stable", "fp0"), ("recommended", "fp1"), ("candidate", "fp2")):
            made[channel] = build(fingerprint)
            do_publish(pipeline, ceph, made[channel], channel=channel)
    return made


# ------------------------------------------------------------------------------- racing writers


@pytest.mark.parametrize("second", [
    ("promote", "--variant", "ceph", "--from", "candidate", "--to", "stable"),
    ("rollback", "--variant", "ceph", "--channel", "stable"),
], ids=["promote-vs-promote", "promote-vs-rollback"])
def test_a_second_writer_while_one_region_is_in_flight_writes_nothing_and_says_who_holds_it(
        proxy, workdir, channels, second):
    gate = held_write(proxy, "stable")
    first = Cli(workdir, "promote", "--variant", "ceph", "--from", "recommended", "--to", "stable", held=True)
    assert gate.wait_held(1), "the first promote never reached its eu-west-1 write"
    # us-west-2 may already hold the new image; eu-west-1's write is in flight
    other = Cli(workdir, *second, lease_wait=0.5)
    other_code, _, other_err = other.finish()
    gate.release()
    first_code, first_out, first_err = first.finish()

    assert (first_code, other_code) == (0, 1), (first_err, other_err)
    assert "is being written by" in other_err and "promote recommended -> stable" in other_err
    assert "nothing was written" in other_err
    won = channels["recommended"]
    assert {r: current("stable", r) for r in REGIONS} == won
    # no lost version, no stray one: the old image, then the winner's, in every region
    assert history_everywhere("stable") == {r: [channels["stable"][r], won[r]] for r in REGIONS}
    assert leases_left() == []


def test_writers_that_wait_for_the_lease_take_turns_and_both_versions_are_in_history(proxy, workdir, channels):
    gate = held_write(proxy, "stable")
    first = Cli(workdir, "promote", "--variant", "ceph", "--from", "recommended", "--to", "stable", held=True)
    assert gate.wait_held(1)
    asked = proxy.gate([PUT], name="_leases/channel/ceph/stable")  # the second's try at the lease
    second = Cli(workdir, "promote", "--variant", "ceph", "--from", "candidate", "--to", "stable", lease_wait=60)
    assert asked.wait_held(1)
    asked.release()  # refused (the first holds it): the second now waits for the lease
    gate.release()
    codes = (first.finish()[0], second.finish()[0])
    assert codes == (0, 0)
    old, red, blue = channels["stable"], channels["recommended"], channels["candidate"]
    assert {r: current("stable", r) for r in REGIONS} == blue
    assert history_everywhere("stable") == {r: [old[r], red[r], blue[r]] for r in REGIONS}


def test_a_lease_left_by_a_dead_writer_is_taken_over_once_expired_naming_it(proxy, workdir, channels):
    stale = json.dumps({"owner": "ci@runner-7 pid 4242", "run_id": "run-dead", "operation": "publish",
                        "token": "t0", "expires": "2020-01-01T00:00:00+00:00"})
    boto3.client("ssm", region_name="us-west-2").put_parameter(
        Name="/amibuild/eks-workers/_leases/channel/ceph/stable", Value=stale, Type="String")
    code, out, err = Cli(workdir, "promote", "--variant", "ceph", "--from", "recommended", "--to", "stable").finish()
    assert code == 0, err
    assert "took over the expired lease of ci@runner-7 pid 4242 (publish, run run-dead" in out
    assert {r: current("stable", r) for r in REGIONS} == channels["recommended"]
    assert leases_left() == []


# ------------------------------------------------------------------------------- signals: publish


@pytest.mark.parametrize("signals, code, background", [
    ((signal.SIGINT,), 130, True),
    ((signal.SIGINT, signal.SIGINT), 130, False),
    ((signal.SIGTERM,), 143, False),
    ((signal.SIGHUP,), 129, False),
], ids=["sigint-background", "double-sigint", "sigterm", "sighup"])
def test_a_signal_during_a_publish_lets_it_finish_in_every_region_and_says_so(proxy, workdir, channels, signals,
                                                                             code, background):
    new = build("fp9")
    gate = held_write(proxy, "recommended")
    cli = Cli(workdir, "publish", "--variant", "ceph", "--ami", ",".join(f"{r}={a}" for r, a in new.items()),
              ignore_sigint=background, held=True)
    assert gate.wait_held(1)
    for n, signum in enumerate(signals):
        cli.signal(signum)
        cli.wait_line(f"{signal.Signals(signum).name}{' again' if n else ''}: ")
    gate.release()
    got, out, err = cli.finish()
    assert got == code, err
    assert {r: current("recommended", r) for r in REGIONS} == new  # every region moved
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"amibuild: interrupted by {signal.Signals(signals[0]).name} after the channel write "
                           "finished: channel recommended of ceph moved in every region")
    assert leases_left() == []


def test_a_signal_before_the_first_write_writes_nothing_and_says_so(proxy, workdir, channels):
    new = build("fp9")
    gate = proxy.gate([PUT], region="eu-west-1", name="_leases/channel/ceph/recommended")  # taking the lease (home: first region)
    cli = Cli(workdir, "publish", "--variant", "ceph", "--ami", ",".join(f"{r}={a}" for r, a in new.items()),
              held=True)
    assert gate.wait_held(1)
    cli.signal(signal.SIGTERM)
    cli.wait_line("SIGTERM: ")
    gate.release()
    got, _, err = cli.finish()
    assert got == 143, err
    assert "interrupted by SIGTERM" in err and "nothing was written" in err.strip().splitlines()[-1]
    assert history_everywhere("recommended") == {r: [channels["recommended"][r]] for r in REGIONS}
    assert leases_left() == []


# ------------------------------------------------------------------------------- build-ami's publish step

E2E_PIPELINE = PIPELINE.replace('variant "plain" {\n  arch = "arm64"\n}\n', "")
needs_packer = pytest.mark.skipif(shutil.which("packer") is None, reason="needs the packer binary")


def _build_ami(workdir: Path, *args: str, **kwargs) -> Cli:
    (workdir / "amibuild.hcl").write_text(E2E_PIPELINE)
    return Cli(workdir, "build-ami", "--json", *args, **kwargs)


@needs_packer
def test_build_ami_publishing_while_a_promote_comes_keeps_the_channel_whole(proxy, workdir):
    pipeline = load(workdir / "amibuild.hcl")
    ceph = next(v for v in pipeline.variants if v.name == "ceph")
    candidate = build("fp-c")
    do_publish(pipeline, ceph, candidate, channel="candidate")
    gate = held_write(proxy, "stable")
    building = _build_ami(workdir, "--channel", "stable", held=True)
    assert gate.wait_held(1, timeout=120), "build-ami never reached its eu-west-1 write"
    code, _, err = Cli(workdir, "promote", "--variant", "ceph", "--from", "candidate", "--to", "stable",
                       lease_wait=0.5).finish()
    assert code == 1, err
    assert "is being written by" in err and "(publish to stable (ceph), run " in err  # build-ami's publish step
    gate.release()
    built_code, out, built_err = building.finish()
    assert built_code == 0, built_err
    amis = json.loads(out)["variants"][0]["amis"]
    assert {r: current("stable", r) for r in REGIONS} == amis
    assert history_everywhere("stable") == {r: [amis[r]] for r in REGIONS}
    assert leases_left() == []


@needs_packer
def test_build_ami_publishing_waits_for_a_held_lease_as_long_as_the_config_says(proxy, workdir):
    """config amibuild.lease_wait holds for build-ami's publish step as for publish and promote (it waited
    the default 30 s whatever the config said)."""
    live = json.dumps({"owner": "ci@runner-7 pid 4242", "run_id": "run-live", "operation": "promote",
                       "token": "t0", "expires": "2999-01-01T00:00:00+00:00"})
    boto3.client("ssm", region_name="us-west-2").put_parameter(
        Name="/amibuild/eks-workers/_leases/channel/ceph/stable", Value=live, Type="String")
    code, out, err = _build_ami(workdir, "--channel", "stable", lease_wait=1).finish()
    assert code == 1, err
    (ceph,) = json.loads(out)["variants"]
    assert ceph["status"] == "built" and ceph["published"] == {}, ceph
    assert "is being written by ci@runner-7 pid 4242" in ceph["publish_error"], ceph["publish_error"]
    assert "(it waited 1 s;" in ceph["publish_error"], ceph["publish_error"]
    assert not any(NAME.format(channel="stable") in written(r) for r in REGIONS)  # nothing was written


@needs_packer
@pytest.mark.parametrize("signals, code, background", [
    ((signal.SIGINT,), 130, True),
    ((signal.SIGINT, signal.SIGINT), 130, False),
    ((signal.SIGTERM,), 143, False),
], ids=["sigint-background", "double-sigint", "sigterm"])
def test_a_signal_during_build_ami_publishing_finishes_the_channel_and_records_the_run(proxy, workdir, signals, code,
                                                                                     background):
    gate = held_write(proxy, "recommended")
    building = _build_ami(workdir, ignore_sigint=background, held=True)
    assert gate.wait_held(1, timeout=120), "build-ami never reached its eu-west-1 write"
    for n, signum in enumerate(signals):
        building.signal(signum)
        building.wait_line(f"{signal.Signals(signum).name}{' again' if n else ''}: ")
    gate.release()
    got, out, err = building.finish()
    assert got == code, err
    summary = json.loads(out)
    variant = summary["variants"][0]
    assert summary["interrupted"] is True
    record = json.loads((workdir / summary["record"]).read_text())
    assert record["interrupted"] is True and record["signal"] == signal.Signals(signals[0]).name
    assert {r: current("recommended", r) for r in REGIONS} == variant["amis"]  # every region, not one
    assert variant["published"]["regions"] == {r: 1 for r in REGIONS}
    assert err.strip().splitlines()[-1].startswith(
        f"amibuild: interrupted by {signal.Signals(signals[0]).name}: published before the interrupt: ceph "
        "(every region)")
    assert leases_left() == []
    assert NAME.format(channel="recommended") in written("eu-west-1")
