"""The executor: run `packer build` for each planned variant, in parallel, and collect the AMIs.

One Packer process per variant, each in its own session (Packer ignores a SIGINT sent to its pid
alone; signalling the whole process group makes it cancel and clean up its temporary instance, key
pair and security group). Up to ``parallel`` run at once. Every line of Packer's machine-readable
stream goes to build/<variant>/packer.log and its current step to the progress display. When a
process ends, the pure parsers in `amibuild.bake.packer` read the stream and the manifest, which must
agree; then the images are looked up in every target region to check they are there and tagged.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping

from amibuild import hcl, secrets, tags
from amibuild.aws import Aws
from amibuild.errors import AmibuildError, PackerOutputError
from amibuild.bake import leftovers as leftovers_mod
from amibuild.bake.decide import (LeaseStep, PackerEnd, PackerFacts, Reuse, lease_step, packer_end,
                                  reuse_after_lease, should_look_for_reuse)
from amibuild.lease import Lease, kept_alive
from amibuild.poll import stop_signals
from amibuild.bake.packer import (Packer, cross_check, escape_field, input_refusal, manifest_builds,
                                   parse_machine_readable, progress_step, temp_prefix)
from amibuild.bake.outcome import BuildOutcome, BuildStatus, WorkingOutcome
from amibuild.bake.build_plan import BuildPlan, BuildDecision, PlanItem
from amibuild.bake.progress import Progress, State
from amibuild.bake.record import why_not_written

PROVENANCE_FILE = "provenance.pkrvars.hcl"
LOG_FILE = "packer.log"
MANIFEST_FILE = "manifest.json"


@dataclass(frozen=True)
class BuildGuards:
    """What surrounds each Packer run (all optional): the build lease, the reuse check, leftovers.

    ``lease_for`` gives a variant's build lease; ``wait`` False (--no-wait) fails a variant whose
    lease another run holds; ``reuse`` gives another run's images of the variant when every region
    has one (`decide.ready_images`); ``leftovers_scope`` what this run's leftovers of a variant are.
    """

    lease_for: Callable[[PlanItem], Lease] | None = None
    wait: bool = True
    lease_poll: float = 2.0
    reuse: Callable[[PlanItem], Mapping[str, str] | None] | None = None
    leftovers_scope: Callable[[PlanItem], leftovers_mod.Scope] | None = None
    stall_after: float = 10.0


@dataclass
class RunState:
    """Shared between the worker threads and the signal handler."""

    interrupted: bool = False
    signum: int = 0  # the signal that interrupted the run (0: none)
    aborted: bool = False  # second Ctrl-C: stopped waiting for Packer to clean up
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def signal_all(self, sig: int) -> None:
        with self.lock:
            procs = list(self.processes.values())
        for proc in procs:
            _signal_group(proc, sig)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


class Executor:
    """Runs a `BuildPlan`'s BUILD items with Packer; SKIP items are reported as reused."""

    def __init__(self, plan: BuildPlan, packer: Packer, aws: Aws, *,
                 provenance: Callable[[PlanItem], Mapping[str, str]], progress: Progress,
                 check: Callable[[Packer, Path], None] | None = None, parallel: int, timeout: float | None = None,
                 cleanup_timeout: float = 120.0, guards: BuildGuards = BuildGuards()) -> None:
        self.plan = plan
        self.packer = packer
        self.aws = aws
        self.provenance = provenance
        self.check = check  # run on each variant's folder just before its build (build-ami --rehearse)
        self.progress = progress
        self.parallel = max(1, parallel)
        self.timeout = timeout
        self.cleanup_timeout = cleanup_timeout
        self.guards = guards
        self.state = RunState()
        self._wake = threading.Event()  # set on interrupt: lease waits stop sleeping
        self._leases: list[Lease] = []
        self._unreachable: set[str] = set()  # variants whose build found the endpoint gone

    # ------------------------------------------------------------------------------ running

    def build(self) -> tuple[BuildOutcome, ...]:
        """Build every BUILD item (up to ``parallel`` at once); an outcome for every item."""
        outcomes = {i.name: WorkingOutcome(i.name, i.fingerprint, i.decision, i.reason, log=str(i.directory / LOG_FILE))
                    for i in self.plan.items}
        for item in self.plan.items:
            if item.decision is BuildDecision.SKIP:
                outcome = outcomes[item.name]
                outcome.status, outcome.amis, outcome.log = BuildStatus.SKIPPED, dict(item.existing), ""
                self.progress.update(item.name, State.SKIPPED, "up to date " + _amis_text(item.existing))
        todo = self.plan.to_build
        if not todo:
            return tuple(o.freeze() for o in outcomes.values())
        restore = self._install_signal_handlers()
        try:
            with kept_alive(self._held_leases), \
                    ThreadPoolExecutor(max_workers=min(self.parallel, len(todo)), thread_name_prefix="packer") as pool:
                self._wait([pool.submit(self._build_one, i, outcomes[i.name]) for i in todo])
        finally:
            restore()
        return tuple(o.freeze() for o in outcomes.values())

    def _held_leases(self) -> list[Lease]:
        """The build leases taken so far (each renewed while its build runs: `kept_alive`)."""
        with self.state.lock:
            return list(self._leases)

    def _wait(self, futures: list[Future]) -> None:
        pending = set(futures)
        deadline: float | None = None
        while pending:
            _, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
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
                self.state.interrupted, self.state.signum = True, signum
                self._wake.set()
                self.state.signal_all(signal.SIGTERM)
            else:
                self.state.aborted = True
                self.state.signal_all(signal.SIGKILL)

        # a hang-up too (unless `nohup` ignores it): Packer, in its own session, would not hear it
        previous = {s: signal.signal(s, handler) for s in stop_signals()}

        def restore() -> None:
            for signum, old in previous.items():
                signal.signal(signum, old)

        return restore

    def _build_one(self, item: PlanItem, outcome: WorkingOutcome) -> None:
        started = time.monotonic()
        outcome.started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            if self.state.interrupted:
                outcome.status, outcome.log = BuildStatus.INTERRUPTED, ""  # no packer.log: Packer never ran
                self.progress.update(item.name, State.INTERRUPTED, "not started")
                return
            lease = None
            if self.guards.lease_for is not None:
                taken = self._take_lease(item, outcome)
                if isinstance(taken, Reuse):
                    outcome.status, outcome.amis, outcome.log = BuildStatus.SKIPPED, dict(taken.amis), ""
                    outcome.reason = taken.reason
                    self.progress.update(item.name, State.SKIPPED, f"{taken.reason}: {_amis_text(taken.amis)}")
                    return
                lease = taken
            try:
                if self.check is not None:
                    self.progress.update(item.name, State.BUILDING, "checking before the build")
                    self.check(self.packer, item.directory)  # a variant that fails it fails alone, before any instance
                self.progress.update(item.name, State.BUILDING, "starting packer")
                amis = self._run_packer(item, outcome)
            finally:
                if lease is not None:
                    if item.name in self._unreachable:
                        # SSM's retries would wait out the outage for half a minute; the lease expires by itself
                        outcome.lease = f"build lease {lease.name} left to expire (endpoint unreachable)"
                        outcome.left_behind.append({
                            "kind": "lease", "region": lease.region, "id": lease.name,
                            "why": f"endpoint unreachable; it expires by itself within {lease.ttl:.0f} s",
                            "command": f"aws ssm delete-parameter --name {lease.name} --region {lease.region}"})
                        with self.state.lock:
                            self._leases.remove(lease)  # nor renewed: a later run takes it over
                    else:
                        self._release(lease)
            outcome.amis = amis
            outcome.status = BuildStatus.BUILT
            self.progress.update(item.name, State.DONE, _amis_text(outcome.amis))
        except _Stop as stop:
            outcome.status, outcome.error = BuildStatus.INTERRUPTED, str(stop)
            self.progress.update(item.name, State.INTERRUPTED, outcome.error)
        except AmibuildError as exc:
            outcome.status, outcome.error = BuildStatus.FAILED, str(exc)
            outcome.input_refused = exc.exit_code == 2
            self.progress.update(item.name, State.FAILED, f"{exc} (log: {outcome.log})" if outcome.log else str(exc))
        except Exception as exc:  # a bug in one variant's handling must not take the others down
            outcome.status, outcome.error = BuildStatus.FAILED, f"{type(exc).__name__}: {exc}"
            self.progress.update(item.name, State.FAILED, outcome.error)
        finally:
            outcome.seconds = time.monotonic() - started

    # ------------------------------------------------------------------------------ the build lease

    def _take_lease(self, item: PlanItem, outcome: WorkingOutcome) -> "Lease | Reuse":
        """Hold the variant's build lease, waiting for another run's build of the same inputs.

        The lease when it is ours and the variant is to be built; a `Reuse` when, once the lease
        was ours, the image existed after all (another run built it: the lease is given back);
        `_Stop` on Ctrl-C while waiting. `AmibuildError` when held elsewhere and not waiting.
        """
        assert self.guards.lease_for is not None
        lease = self.guards.lease_for(item)
        waited_for = None
        while True:
            holder = None if self.state.interrupted else lease.try_acquire()
            step = lease_step(interrupted=self.state.interrupted, held_by=holder, wait=self.guards.wait)
            if step is LeaseStep.INTERRUPTED:
                raise _Stop(f"interrupted while waiting for {waited_for}" if waited_for else "interrupted")
            if step is LeaseStep.TAKEN:
                break
            if step is LeaseStep.BUSY:
                outcome.log = ""  # packer never ran for it
                raise AmibuildError(f"another build of {item.name} with this fingerprint is running: {holder}; "
                                    "rerun without --no-wait to wait for it and reuse its image")
            if waited_for is None or waited_for.run_id != holder.run_id:
                self.progress.update(item.name, State.QUEUED, f"waiting for {holder} building the same image")
            waited_for = holder
            self._wake.wait(self.guards.lease_poll)
        with self.state.lock:
            self._leases.append(lease)
        if lease.took_over is not None:
            why = ("expired build lease" if lease.took_over_why == "expired"
                   else "build lease (its process on this machine is gone)")
            outcome.lease = f"took over the {why} of {lease.took_over}"
            self.progress.update(item.name, State.QUEUED, outcome.lease)
        elif waited_for is not None:
            outcome.lease = f"waited for {waited_for}"
        # checked with the lease held: nobody else can be building this image now
        waited_run = waited_for.run_id if waited_for is not None else None
        if self.guards.reuse is not None and should_look_for_reuse(waited_for_run=waited_run, force=self.plan.force):
            try:
                found = self.guards.reuse(item)
            except BaseException:
                self._release(lease)
                raise
            reuse = reuse_after_lease(waited_for_run=waited_run, found=found)
            if reuse is not None:
                self._release(lease)
                return reuse
        return lease

    def _release(self, lease: Lease) -> None:
        with self.state.lock:
            if lease in self._leases:
                self._leases.remove(lease)
        with contextlib.suppress(AmibuildError):  # unreachable now; the lease expires on its own and the next run takes it over
            lease.release()

    # ------------------------------------------------------------------------------ leftovers

    def _clean_up(self, item: PlanItem, outcome: WorkingOutcome, lines: list[str], log: "_Log") -> str:
        """Find and remove this variant's leftovers of this run (`leftovers.clean_up`); a sentence
        saying what happened, also written to the log. After a second Ctrl-C (the user wants out
        now) no AWS calls: only what Packer announced is listed, as it is when the clean-up itself fails.
        """
        if self.guards.leftovers_scope is None:
            return ""
        scope = self.guards.leftovers_scope(item)
        seen = leftovers_mod.stream_resources(lines)
        try:
            self.progress.update(item.name, State.BUILDING, "looking for leftovers of this run")
            done = leftovers_mod.clean_up(self.aws, scope, seen, look=not self.state.aborted,
                                          unreachable=item.name in self._unreachable)
            if done.unreachable:
                self._unreachable.add(item.name)
            outcome.removed += done.removed or ()  # beside what was said before (Packer's temp files)
        except Exception as exc:
            done = leftovers_mod.unchecked(scope, seen, _why(exc))
        outcome.left_behind += done.left_behind or ()
        if done.text:
            log.write(f"# amibuild: {done.text}\n")
        return done.text

    def _run_packer(self, item: PlanItem, outcome: WorkingOutcome) -> dict[str, str]:
        directory = item.directory
        try:
            (directory / PROVENANCE_FILE).write_text(hcl.dumps([
                hcl.Attr("provenance_tags", dict(self.provenance(item))),
                hcl.Attr("amibuild_run_id", self.plan.run_id),
            ], header=f"Build-time values of run {self.plan.run_id}; not part of the fingerprint."))
            log = _Log(directory / LOG_FILE)
        except OSError as exc:  # before Packer started: nothing was made
            raise AmibuildError(f"{exc.filename or directory}: cannot write it ({why_not_written(exc)}); "
                                "packer was not started") from exc
        try:
            return self._run_logged(item, outcome, log)
        finally:
            log.close()

    def _run_logged(self, item: PlanItem, outcome: WorkingOutcome, log: "_Log") -> dict[str, str]:
        """One Packer process, its stream into ``log``, and what its end means.

        From the moment Packer starts, whatever goes wrong on amibuild's side (its log refused by a
        full disk, an error of its own) stops Packer, which cancels and cleans up, and the clean-up
        after it runs: every resource the build made is removed or named as left behind.
        """
        directory = item.directory
        self.packer.init(directory)
        argv = self.packer.build_argv(directory, var_files=[directory / PROVENANCE_FILE])
        lines: list[str] = []
        timed_out = threading.Event()
        stalled: list[str] = []  # why the endpoint was declared lost, once it was
        stopped: list[str] = []  # why amibuild stopped Packer itself, once it did
        last_line = [time.monotonic()]
        known = secrets.Known()
        known.add(list(item.rendered.secret_env.values()))
        # as the stream carries them: a comma in a password comes out as %!(PACKER_COMMA)
        known.secrets |= {escape_field(secret) for secret in known.secrets}
        log.write(f"# amibuild run {self.plan.run_id} variant {item.name} started {outcome.started}\n"
                  f"# {' '.join(argv)}\n")
        with self.state.lock:
            if self.state.interrupted:
                raise _Stop("interrupted before packer started")
            # Packer's own temporary files (its `packer-log*` log, its plugin sockets) go to a folder
            # named after the run, so a Packer killed outright leaves them where amibuild (and `clean-run`)
            # finds and removes them; short, for the sockets' path limit (`check_temp_room`)
            scratch = Path(tempfile.mkdtemp(prefix=temp_prefix(self.plan.run_id)))
            proc = subprocess.Popen(
                argv, cwd=directory, env={**self.packer.env, **item.rendered.packer_env, **item.rendered.secret_env,
                                          "TMPDIR": str(scratch)},
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                bufsize=1, start_new_session=True)
            self.state.processes[item.name] = proc

        def stop(why: str) -> None:
            """amibuild cannot go on with this build: Packer cancels (and cleans up), its stream is
            still read to the end (closing it would kill Packer before its clean-up)."""
            if not stopped:
                stopped.append(why)
                self._time_out(proc, threading.Event())  # SIGTERM now, SIGKILL after cleanup_timeout

        def follow(line: str) -> None:
            last_line[0] = time.monotonic()
            line = known.scrub(line)  # Packer 1.6 masks sensitive values in its log, not on its machine-readable stream
            lines.append(line)
            if stopped:
                return  # kept for the clean-up only
            if not log.write(line):
                stop(log.error)
                return
            step = progress_step(line)
            if step:
                state = State.COPYING if "cop" in step.lower() else State.BUILDING
                self.progress.update(item.name, state, step)

        timer = watchdog = None
        try:
            try:
                if self.timeout:
                    timer = threading.Timer(self.timeout, self._time_out, (proc, timed_out))
                    timer.daemon = True
                    timer.start()
                watchdog = threading.Thread(target=self._watch_endpoint, args=(item.name, proc, last_line, stalled),
                                            name=f"watchdog-{item.name}", daemon=True)
                watchdog.start()
            except Exception as exc:  # e.g. no thread to be had: the build goes no further
                stop(_why(exc))
            assert proc.stdout is not None
            for line in proc.stdout:
                try:
                    follow(line)
                except Exception as exc:  # an error of amibuild's own must not abandon a running Packer
                    stop(_why(exc))
            code = proc.wait()
        except BaseException as exc:  # the stream itself broke: Packer is stopped and waited for
            stop(_why(exc))
            code = self._wait_out(proc)
            if not isinstance(exc, Exception):
                raise
        finally:
            proc.stdout.close()  # the pipe is ours to close: a long-lived caller would leak one per build
            if timer:
                timer.cancel()
            with self.state.lock:
                self.state.processes.pop(item.name, None)
        if watchdog is not None:
            watchdog.join(timeout=10)
        _remove_temp_files(scratch, outcome)
        result = parse_machine_readable(lines)
        facts = PackerFacts(code, tuple(result.errors), result.failed_step, bool(result.artifacts),
                            interrupted=self.state.interrupted, timed_out=timed_out.is_set(),
                            stalled=stalled[0] if stalled else "", stopped=stopped[0] if stopped else "")
        end = packer_end(facts)
        cleanup = self._clean_up(item, outcome, lines, log) if end.needs_cleanup else ""
        # a signal during the cleanup makes the variant interrupted too
        end = packer_end(replace(facts, interrupted=self.state.interrupted))
        suffix = f"; {cleanup}" if cleanup else ""
        error = result.first_error or (f"killed by signal {-code}" if code < 0 else f"exit code {code}")
        if end is PackerEnd.INTERRUPTED:
            raise _Stop(("interrupted; packer cancelled" if not self.state.aborted
                          else "interrupted; packer killed before its cleanup finished") + suffix)
        if end is PackerEnd.ENDPOINT_LOST:
            raise AmibuildError(f"endpoint lost: {stalled[0]}; packer stopped{suffix}")
        if end is PackerEnd.STOPPED:
            raise AmibuildError(f"{stopped[0]}; packer stopped{suffix}")
        if end is PackerEnd.TIMED_OUT:
            raise AmibuildError(f"timed out after {self.timeout:g}s in step {result.failed_step or 'unknown'}{suffix}")
        if end is PackerEnd.REFUSED:
            # no step ever started: Packer refused the template or its values, as validate would;
            # a value the user set is bad input naming its flag or file
            refused = input_refusal("\n".join(result.errors), error, item.rendered.variant.origins)
            if refused is not None:
                raise refused
            raise AmibuildError(f"packer refused {directory.name} before building anything: {error}{suffix}")
        if end is PackerEnd.FAILED:
            raise AmibuildError(f"packer failed: {error}{suffix}")
        try:
            return self._artifacts(item, result.artifacts)
        except Exception as exc:
            # the images are not this run's result (not published, not recorded as built): removed, or named
            cleanup = self._clean_up(item, outcome, lines, log)
            raise AmibuildError(f"{_why(exc)}{'; ' + cleanup if cleanup else ''}") from exc

    def _wait_out(self, proc: subprocess.Popen, grace: float | None = None) -> int:
        """Wait for a Packer that was told to stop (SIGKILL after ``grace``, by default ``cleanup_timeout``);
        its exit code."""
        try:
            return proc.wait(self.cleanup_timeout if grace is None else grace)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            return proc.wait()

    STALL_PROBES = 2  # failed probes in a row that declare the endpoint lost
    STALL_GRACE = 3.0  # seconds Packer gets after SIGTERM once the endpoint is gone (it cannot clean up)

    def _watch_endpoint(self, name: str, proc: subprocess.Popen, last_line: list[float], stalled: list[str]) -> None:
        """Probe the EC2 endpoint when Packer's stream is quiet; stop Packer when it is gone."""
        region = self.plan.pipeline.build_region
        failures = 0
        while True:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=1.0)
                return
            quiet = time.monotonic() - last_line[0]
            if quiet < self.guards.stall_after or self.state.interrupted:
                failures = 0
                continue
            reason = self.aws.ec2_reachable(region)
            if reason is None:
                failures = 0
                last_line[0] = time.monotonic()  # alive: probe again after another quiet spell
                continue
            failures += 1
            if failures < self.STALL_PROBES:
                continue
            stalled.append(f"{reason} (packer's output silent for {quiet:.0f}s)")
            self._unreachable.add(name)
            _signal_group(proc, signal.SIGTERM)
            self._wait_out(proc, self.STALL_GRACE)
            return

    def _time_out(self, proc: subprocess.Popen, flag: threading.Event) -> None:
        flag.set()
        _signal_group(proc, signal.SIGTERM)
        threading.Thread(target=self._wait_out, args=(proc,), daemon=True).start()  # SIGKILL after cleanup_timeout

    def _artifacts(self, item: PlanItem, stream: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
        """AMIs per region from stream and manifest (which must agree), checked against AWS."""
        manifest_path = item.directory / MANIFEST_FILE
        try:
            builds = manifest_builds(manifest_path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise PackerOutputError(f"{manifest_path}: packer wrote no manifest ({exc.strerror})") from exc
        ours = {b.name: b.amis for b in builds if b.custom_data.get("amibuild_run_id") == self.plan.run_id}
        amis = {region: ami for name in sorted(set(stream) | set(ours))
                for region, ami in cross_check(stream, ours, name).items()}
        missing = [r for r in self.plan.regions if r not in amis]
        if missing:
            raise PackerOutputError(f"packer made no AMI in {', '.join(missing)}")
        for region, ami in sorted(amis.items()):
            found = self.aws.describe_images(region, image_ids=[ami])
            if not found or found[0].state != "available":
                raise PackerOutputError(f"{ami} in {region} is not available after the build")
            if found[0].tags.get(tags.FINGERPRINT) != item.fingerprint:
                raise PackerOutputError(f"{ami} in {region} lacks the fingerprint tag {tags.FINGERPRINT}")
        return amis


class _Log:
    """A variant's packer.log. A write the disk refuses (full, read-only) ends the writing and says
    why in ``error``: the caller decides what that means for the build."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.error = ""
        self._file = path.open("w", encoding="utf-8")

    def write(self, text: str) -> bool:
        if self.error:
            return False
        try:
            self._file.write(text)
            self._file.flush()
        except OSError as exc:
            self.error = f"{self.path}: cannot write the Packer log ({why_not_written(exc)})"
            return False
        return True

    def close(self) -> None:
        with contextlib.suppress(OSError):  # what a full disk refused is said in ``error`` already
            self._file.close()


def _why(exc: BaseException) -> str:
    """An error in a sentence: amibuild's own as it says itself, any other with its type."""
    return str(exc) if isinstance(exc, AmibuildError) else f"{type(exc).__name__}: {exc}"


class _Stop(Exception):
    """The variant stopped because the run was interrupted; the message says why, as its outcome does."""


def _remove_temp_files(scratch: Path, outcome: BuildOutcome) -> None:
    """Remove what Packer left in its temporary folder (``packer-log*`` after a kill); name what stays."""
    if not scratch.is_dir() or scratch.is_symlink():
        return
    for path in sorted(scratch.iterdir()):
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError as exc:
            outcome.left_behind.append({"kind": "temp-file", "region": "", "id": str(path), "why": str(exc),
                                        "command": f"rm -rf {path}"})
            continue
        if path.name.startswith("packer-log"):  # Packer removes it itself unless it was killed
            outcome.removed.append(f"temp file {path}")
    with contextlib.suppress(OSError):
        scratch.rmdir()


def _amis_text(amis: Mapping[str, str]) -> str:
    return ", ".join(f"{r}={a}" for r, a in sorted(amis.items()))
