"""The executor: run `packer build` for each planned variant, in parallel, and collect the AMIs.

One Packer process per variant, each in its own session (Packer ignores a SIGINT sent to its pid
alone; signalling the whole process group makes it cancel and clean up its temporary instance, key
pair and security group). Up to ``parallel`` run at once. Every line of Packer's machine-readable
stream goes to build/<variant>/packer.log and its current step to the progress display. When a
process ends, the pure parsers in `amibuild.build.packer` read the stream and the manifest, which must
agree; then the images are looked up in every target region to check they are there and tagged.

No separate `packer validate` / `packer fmt -check` runs first: `packer build` checks the template
and its values itself before it starts any step, so a variant Packer refuses fails alone, before any
instance, and its error names the refusal. Those extra calls cost 0.4 CPU-seconds a variant, all
spent before the first build could start (`invoke validate` still makes them).

A failed variant never stops the others. Ctrl-C / SIGTERM: every running Packer gets SIGTERM and
is waited for (bounded by ``cleanup_timeout``); a second Ctrl-C stops waiting and kills them.
"""

from __future__ import annotations

import enum
import os
import signal
import subprocess
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping

from amibuild import hcl
from amibuild.aws import Aws
from amibuild.errors import AmibuildError, PackerOutputError
from amibuild.build.packer import Packer, cross_check, manifest_builds, parse_machine_readable, progress_step
from amibuild.build.plan import FINGERPRINT_TAG, BuildPlan, BuildDecision, PlanItem
from amibuild.build.progress import Progress, State

PROVENANCE_FILE = "provenance.pkrvars.hcl"
LOG_FILE = "packer.log"
MANIFEST_FILE = "manifest.json"


class BuildStatus(enum.StrEnum):
    """Where one variant's build stands; its value is what the JSON and the run record say."""

    QUEUED = "queued"
    BUILT = "built"
    SKIPPED = "skipped"  # reused: an image with its fingerprint is in every region
    FAILED = "failed"
    INTERRUPTED = "interrupted"

    @property
    def has_image(self) -> bool:
        """Built or reused: there is an image to publish or share."""
        return self in (BuildStatus.BUILT, BuildStatus.SKIPPED)


@dataclass
class BuildOutcome:
    """What happened to one variant in this run."""

    name: str
    fingerprint: str
    decision: BuildDecision
    reason: str
    status: BuildStatus = BuildStatus.QUEUED
    amis: dict[str, str] = field(default_factory=dict)
    log: str = ""
    error: str = ""
    started: str = ""
    seconds: float = 0.0
    published: dict = field(default_factory=dict)  # channel, parameter, per region: version or "unchanged"
    publish_error: str = ""

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "status": str(self.status),
            "fingerprint": self.fingerprint,
            "decision": str(self.decision),
            "reason": self.reason,
            "amis": dict(sorted(self.amis.items())),
            "log": self.log,
            "error": self.error,
            "started": self.started,
            "seconds": round(self.seconds, 3),
            "published": self.published,
            "publish_error": self.publish_error,
        }


@dataclass
class RunState:
    """Shared between the worker threads and the signal handler."""

    interrupted: bool = False
    aborted: bool = False  # second Ctrl-C: stopped waiting for Packer to clean up
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def signal_all(self, sig: int) -> None:
        with self.lock:
            procs = list(self.processes.values())
        for proc in procs:
            _signal_group(proc, sig)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Executor:
    """Runs a `BuildPlan`'s BUILD items with Packer; SKIP items are reported as reused."""

    def __init__(
        self,
        plan: BuildPlan,
        packer: Packer,
        aws: Aws,
        *,
        provenance: Callable[[PlanItem], Mapping[str, str]],
        progress: Progress,
        check: Callable[[Packer, Path], None] | None = None,
        parallel: int,
        timeout: float | None = None,
        cleanup_timeout: float = 120.0,
    ) -> None:
        self.plan = plan
        self.packer = packer
        self.aws = aws
        self.provenance = provenance
        self.check = check  # run on each variant's folder just before its build (build-ami --rehearse)
        self.progress = progress
        self.parallel = max(1, parallel)
        self.timeout = timeout
        self.cleanup_timeout = cleanup_timeout
        self.state = RunState()

    # ------------------------------------------------------------------------------ running

    def build(self) -> list[BuildOutcome]:
        """Build every BUILD item (up to ``parallel`` at once); an outcome for every item."""
        outcomes = {i.name: BuildOutcome(i.name, i.fingerprint, i.decision, i.reason, log=str(i.directory / LOG_FILE))
                    for i in self.plan.items}
        for item in self.plan.items:
            if item.decision is BuildDecision.SKIP:
                outcome = outcomes[item.name]
                outcome.status, outcome.amis, outcome.log = BuildStatus.SKIPPED, dict(item.existing), ""
                self.progress.update(item.name, State.SKIPPED, "up to date " + _amis_text(item.existing))
        todo = self.plan.to_build
        if not todo:
            return list(outcomes.values())
        restore = self._install_signal_handlers()
        try:
            with ThreadPoolExecutor(max_workers=min(self.parallel, len(todo)), thread_name_prefix="packer") as pool:
                futures: dict[Future, PlanItem] = {pool.submit(self._build_one, i, outcomes[i.name]): i for i in todo}
                self._wait(futures)
        finally:
            restore()
        return list(outcomes.values())

    def _wait(self, futures: dict[Future, "PlanItem"]) -> None:
        pending = set(futures)
        deadline: float | None = None
        while pending:
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            if self.state.interrupted and deadline is None:
                deadline = time.monotonic() + self.cleanup_timeout
            if deadline is not None and time.monotonic() > deadline and not self.state.aborted:
                self.state.aborted = True
                self.state.signal_all(signal.SIGKILL)

    def _install_signal_handlers(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None  # only the main thread may handle signals; callers then own Ctrl-C

        def handler(signum: int, frame: object) -> None:
            if not self.state.interrupted:
                self.state.interrupted = True
                self.state.signal_all(signal.SIGTERM)
            else:
                self.state.aborted = True
                self.state.signal_all(signal.SIGKILL)

        previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}

        def restore() -> None:
            for signum, old in previous.items():
                signal.signal(signum, old)

        return restore

    def _build_one(self, item: PlanItem, outcome: BuildOutcome) -> None:
        started = time.monotonic()
        outcome.started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            if self.state.interrupted:
                outcome.status = BuildStatus.INTERRUPTED
                self.progress.update(item.name, State.INTERRUPTED, "not started")
                return
            if self.check is not None:
                self.progress.update(item.name, State.BUILDING, "checking before the build")
                self.check(self.packer, item.directory)  # a variant that fails it fails alone, before any instance
            self.progress.update(item.name, State.BUILDING, "starting packer")
            outcome.amis = self._run_packer(item, outcome)
            outcome.status = BuildStatus.BUILT
            self.progress.update(item.name, State.DONE, _amis_text(outcome.amis))
        except _Interrupted as exc:
            outcome.status, outcome.error = BuildStatus.INTERRUPTED, str(exc)
            self.progress.update(item.name, State.INTERRUPTED, str(exc))
        except AmibuildError as exc:
            outcome.status, outcome.error = BuildStatus.FAILED, str(exc)
            self.progress.update(item.name, State.FAILED, f"{exc} (log: {outcome.log})")
        except Exception as exc:  # a bug in one variant's handling must not take the others down
            outcome.status, outcome.error = BuildStatus.FAILED, f"{type(exc).__name__}: {exc}"
            self.progress.update(item.name, State.FAILED, outcome.error)
        finally:
            outcome.seconds = time.monotonic() - started

    def _run_packer(self, item: PlanItem, outcome: BuildOutcome) -> dict[str, str]:
        directory = item.directory
        provenance_file = directory / PROVENANCE_FILE
        provenance_file.write_text(hcl.dumps([
            hcl.Attr("provenance_tags", dict(self.provenance(item))),
            hcl.Attr("amibuild_run_id", self.plan.run_id),
        ], header=f"Build-time values of run {self.plan.run_id}; not part of the fingerprint."))
        self.packer.init(directory)
        argv = self.packer.build_argv(directory, var_files=[provenance_file])
        log_path = directory / LOG_FILE
        lines: list[str] = []
        timed_out = threading.Event()
        with log_path.open("w", encoding="utf-8") as log:
            log.write(f"# amibuild run {self.plan.run_id} variant {item.name} started {outcome.started}\n")
            log.write(f"# {' '.join(argv)}\n")
            log.flush()
            with self.state.lock:
                if self.state.interrupted:
                    raise _Interrupted("interrupted before packer started")
                proc = subprocess.Popen(
                    argv, cwd=directory, env=self.packer.env, stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                    start_new_session=True,
                )
                self.state.processes[item.name] = proc
            timer = None
            if self.timeout:
                timer = threading.Timer(self.timeout, self._time_out, (proc, timed_out))
                timer.daemon = True
                timer.start()
            try:
                assert proc.stdout is not None
                for line in proc.stdout:
                    log.write(line)
                    log.flush()
                    lines.append(line)
                    step = progress_step(line)
                    if step:
                        state = State.COPYING if "cop" in step.lower() else State.BUILDING
                        self.progress.update(item.name, state, step)
                code = proc.wait()
            finally:
                if timer:
                    timer.cancel()
                with self.state.lock:
                    self.state.processes.pop(item.name, None)
        result = parse_machine_readable(lines)
        if self.state.interrupted:
            raise _Interrupted("interrupted; packer cancelled and cleaned up" if not self.state.aborted
                               else "interrupted; packer killed before its cleanup finished")
        if timed_out.is_set():
            raise AmibuildError(f"timed out after {self.timeout:g}s in step {result.failed_step or 'unknown'}")
        if code != 0 or result.errors:
            error = result.first_error or f"exit code {code}"
            if result.errors and result.failed_step is None and not result.artifacts:
                # no step ever started: Packer refused the template or its values, as validate would
                raise AmibuildError(f"packer refused {directory.name} before building anything: {error}")
            raise AmibuildError(f"packer failed: {error}")
        return self._artifacts(item, result.artifacts)

    def _time_out(self, proc: subprocess.Popen, flag: threading.Event) -> None:
        flag.set()
        _signal_group(proc, signal.SIGTERM)

        def kill_later() -> None:
            try:
                proc.wait(self.cleanup_timeout)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)

        threading.Thread(target=kill_later, daemon=True).start()

    def _artifacts(self, item: PlanItem, stream: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
        """AMIs per region from stream and manifest (which must agree), checked against AWS."""
        manifest_path = item.directory / MANIFEST_FILE
        try:
            builds = manifest_builds(manifest_path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise PackerOutputError(f"{manifest_path}: packer wrote no manifest ({exc.strerror})") from exc
        ours = {b.name: b.amis for b in builds if b.custom_data.get("amibuild_run_id") == self.plan.run_id}
        amis: dict[str, str] = {}
        for name in sorted(set(stream) | set(ours)):
            amis.update(cross_check(stream, ours, name))
        missing = [r for r in self.plan.regions if r not in amis]
        if missing:
            raise PackerOutputError(f"packer made no AMI in {', '.join(missing)}")
        for region, ami in sorted(amis.items()):
            found = self.aws.describe_images(region, image_ids=[ami])
            if not found or found[0].state != "available":
                raise PackerOutputError(f"{ami} in {region} is not available after the build")
            if found[0].tags.get(FINGERPRINT_TAG) != item.fingerprint:
                raise PackerOutputError(f"{ami} in {region} lacks the fingerprint tag {FINGERPRINT_TAG}")
        return amis


class _Interrupted(Exception):
    pass


def _amis_text(amis: Mapping[str, str]) -> str:
    return ", ".join(f"{r}={a}" for r, a in sorted(amis.items()))
