"""Fixtures for the whole suite: an isolated environment for every test, the local emulator, and
the command line in process.

Every test runs without AWS settings or credentials from the machine, with instance metadata
disabled and a tripwire proxy (anything not on loopback fails at once). Tests that need AWS ask
for `sandbox`: one emulator per session (per xdist worker), its env() applied, reset before each
test — which puts the seed back only in the regions the previous test wrote to.

Tests run the CLI with `run_cli` (or the `cli` fixture): in this process, as invoke tests its own
Program, with captured streams and the exit code; a subprocess only for what only a process
shows (signals, closed pipes, the installed wheel, racing processes, process-wide logging).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import signal
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping

import pytest

# The package is not installed in the test venv: import it from this checkout.
_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from amibuild.aws import rates  # noqa: E402
from amibuild.sandbox import Sandbox, safety_env  # noqa: E402

def shared_dir(part: str) -> Path | None:
    """The shared material that holds ``part`` (``upstream``, ``nodeadm``, ``karpenter``):
    $AMIBUILD_SHARED, else beside the repository (or a worktree's parent); None when absent."""
    for candidate in (os.environ.get("AMIBUILD_SHARED"), _REPO.parent / "shared", _REPO.parent.parent / "shared"):
        if candidate and (Path(candidate) / part).is_dir():
            return Path(candidate)
    return None


_NODEADM_HOME = shared_dir("nodeadm")
NODEADM = _NODEADM_HOME / "nodeadm" / "nodeadm" if _NODEADM_HOME else None  # the real nodeadm binary
needs_nodeadm = pytest.mark.skipif(NODEADM is None or not NODEADM.is_file(),
                                   reason="../shared/nodeadm/nodeadm (the real nodeadm) is not here")
# a rehearsal (and an image's stand-in, which is one) runs in an overlay copy of this machine
needs_rehearsal = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                     reason="a rehearsal needs root and util-linux's unshare")


_PROXY_VARS = {"HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "ALL_PROXY"}
# Set on a developer's machine or a CI runner, and changing what a command prints or writes: a
# test that wants one sets it.
_MACHINE_ONLY = {"AMIBUILD_DEBUG", "GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"}


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No AWS variables, config files, proxies or CI settings from the machine; the safety env instead."""
    for name in list(os.environ):
        if name.startswith("AWS_") or name.upper() in _PROXY_VARS or name in _MACHINE_ONLY:
            monkeypatch.delenv(name)
    missing = tmp_path / "no-aws-config"
    monkeypatch.setenv("AWS_CONFIG_FILE", str(missing / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(missing / "credentials"))
    for name, value in safety_env().items():
        monkeypatch.setenv(name, value)


@pytest.fixture(scope="session")
def sandbox_server() -> Iterator[Sandbox]:
    """One emulator for the whole session; use `sandbox` in tests."""
    with Sandbox() as server:
        yield server


@pytest.fixture
def sandbox(
    sandbox_server: Sandbox, isolated_env: None, monkeypatch: pytest.MonkeyPatch
) -> Sandbox:
    """The session's emulator, reset to its seed, with its env() applied to os.environ; the
    gateway's rate limiter starts full, as in a fresh process (its buckets are per process)."""
    sandbox_server.reset()
    rates.LIMITER.reset()
    for name, value in sandbox_server.env().items():
        monkeypatch.setenv(name, value)
    return sandbox_server


_STARTED: list = []  # what `ends_with_the_test` was given, ended when the running test ends


def ends_with_the_test(process):  # noqa: ANN001, ANN201 - any object with end()
    """Have ``process`` (with an ``end()`` that kills and reaps it, e.g. test_channel_races' `Cli`)
    ended when the running test ends, however it ends; returns it."""
    _STARTED.append(process)
    return process


@pytest.fixture(autouse=True)
def _no_process_outlives_its_test() -> Iterator[None]:
    """A test that fails while its process runs ends it here: left to the garbage collector, it would
    fail whichever later test the collector ran in, with a ResourceWarning."""
    yield
    while _STARTED:
        _STARTED.pop().end()


@contextlib.contextmanager
def unlimited() -> Iterator[None]:
    """Writes that set a test up, made without the gateway's rate limiter: they take none of its tokens
    (SSM's 3 puts a second per region kept a set-up of a few publishes waiting ~2 s for them), so what
    the test itself runs meets the buckets as the set-up found them."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rates.LIMITER, "_rates", lambda *_, **__: None)
        yield


# ------------------------------------------------------------------------------- the CLI in process


@dataclass(frozen=True)
class CliResult:
    """What a run of the command line gave: the argv, its exit code and what it printed
    (named like `subprocess.CompletedProcess`, so a test reads the same either way)."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str



# Signals whose handlers a task may set for its duration (the build executor, channel writes).
_WATCHED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE)


def run_cli(cwd: Path | str, *args: str, env: Mapping[str, str | None] | None = None,
            binary: str = "invoke", stdin: str = "") -> CliResult:
    """Run the command line in this process, as a user types it, and return what it did.

    ``binary="invoke"`` is ``invoke -r REPO ARGS`` (this repository's tasks.py, loaded by a fresh
    invoke Program, as ``python -m invoke`` does); ``binary="amibuild"`` is the ``amibuild`` command
    (`amibuild.cli.main.main`). Each call gets a fresh Program and configuration, `cwd` as its
    current folder, and the test's environment with `env` laid over it (a None value removes the
    variable). stdout, stderr and stdin are captured
    strings. Afterwards everything is put back as it was: the folder, the environment, sys.path,
    the root logger's handlers and level (invoke's ``--debug`` calls logging.basicConfig),
    sys.dont_write_bytecode (invoke sets it from ``--write-pyc``), and
    amibuild's pending notes. A task that leaves a signal handler, an environment variable or a
    thread behind fails the test: that would leak into the next command in a real process too.

    A subprocess is still the tool for what only a process shows: signals, closed pipes, the
    installed wheel, two amibuild processes racing, or a command held by a fault proxy while the
    test goes on.
    """
    import invoke

    from amibuild.cli import run as cli_run

    argv = ["amibuild", *args] if binary == "amibuild" else ["invoke", "-r", str(_REPO), *args]
    if binary not in ("amibuild", "invoke"):
        raise ValueError(f"binary {binary!r}: 'amibuild' or 'invoke'")
    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    saved_path, saved_tasks = list(sys.path), sys.modules.get("tasks")
    saved_bytecode = sys.dont_write_bytecode  # invoke's Program sets it from --write-pyc
    saved_signals = {s: signal.getsignal(s) for s in _WATCHED_SIGNALS}
    threads_before = set(threading.enumerate())
    cli_run._PENDING.clear()
    code: int
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)
        for name, value in (env or {}).items():
            if value is None:
                mp.delenv(name, raising=False)
            else:
                mp.setenv(name, value)
        environ_before = dict(os.environ)
        mp.setattr(sys, "stdout", out)
        mp.setattr(sys, "stderr", err)
        mp.setattr(sys, "stdin", io.StringIO(stdin))
        mp.setattr(sys, "argv", list(argv))
        try:
            if binary == "amibuild":
                from amibuild.cli.main import main

                main(argv)
            else:
                import invoke.main

                # a fresh instance where `python -m invoke` finds its own (`invoke.main.program`),
                # so tasks.py adopts it exactly as it adopts the real command's
                program = invoke.Program(name="Invoke", binary="inv[oke]", binary_names=["invoke", "inv"],
                                         version=invoke.__version__)
                mp.setattr(invoke.main, "program", program)
                program.run(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if isinstance(exc.code, str):
                print(exc.code, file=err)
        except Exception:  # what the interpreter would do with it: a traceback, exit 1
            traceback.print_exc(file=err)
            code = 1
        environ_after = dict(os.environ)
    leaked_signals = {signal.Signals(s).name for s, h in saved_signals.items() if signal.getsignal(s) is not h}
    for signum, handler in saved_signals.items():
        signal.signal(signum, handler)
    for handler in root.handlers[:]:
        if handler not in saved_handlers:
            root.removeHandler(handler)
    root.setLevel(saved_level)
    sys.path[:] = saved_path
    sys.dont_write_bytecode = saved_bytecode
    if saved_tasks is None:
        sys.modules.pop("tasks", None)
    else:
        sys.modules["tasks"] = saved_tasks
    cli_run._PENDING.clear()
    changed_env = sorted(k for k in environ_before.keys() | environ_after.keys()
                         if environ_before.get(k) != environ_after.get(k))
    started = [t for t in threading.enumerate() if t not in threads_before and not t.daemon]
    for thread in started:  # a worker pool shut down without waiting ends on its own, soon
        thread.join(timeout=5)
    left_threads = [t.name for t in started if t.is_alive()]
    result = CliResult(tuple(argv), code, out.getvalue(), err.getvalue())
    assert not leaked_signals, f"{' '.join(args)} left signal handlers behind: {leaked_signals}\n{result.stderr}"
    assert not changed_env, f"{' '.join(args)} changed the environment: {changed_env}"
    assert not left_threads, f"{' '.join(args)} left threads running: {left_threads}"
    return result


@pytest.fixture
def cli() -> Callable[..., CliResult]:
    """`run_cli` for a test: ``cli(workdir, "render", "--json")``."""
    return run_cli


# `-n auto` (pyproject's addopts): two workers more than the CPUs. Each worker waits on its emulator and
# on the subprocesses it starts for part of its time; with 3 workers 2 CPUs were busy 1.7 of 2 on average.
# Measured on a quiet 2-CPU machine, one day, 2029 tests: 604-612 s with 3 workers, 501 s with 4
# (user+sys 968 s: both CPUs busy), 524 s with 5. Earlier, 492 s with 3 against 596-604 s with 2.
def pytest_xdist_auto_num_workers(config) -> int:  # noqa: ANN001 - pytest's Config
    return (os.cpu_count() or 1) + 2


# The slowest test files of a run, summed over their tests' set-up, call and tear-down (on xdist the
# controller receives every report): the suite's time target is kept by knowing where it goes.
_FILE_SECONDS: dict[str, float] = {}
SLOWEST_FILES = 10


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::", 1)[0]
    _FILE_SECONDS[path] = _FILE_SECONDS.get(path, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter) -> None:  # noqa: ANN001 - pytest's TerminalReporter
    if not _FILE_SECONDS:
        return
    cache = getattr(terminalreporter.config, "cache", None)  # None with -p no:cacheprovider
    if cache is not None and not hasattr(terminalreporter.config, "workerinput"):  # the controller, or no xdist
        cache.set(_SECONDS_CACHE, {**cache.get(_SECONDS_CACHE, {}), **{k: round(v, 1) for k, v in _FILE_SECONDS.items()}})
    slowest = sorted(_FILE_SECONDS.items(), key=lambda item: item[1], reverse=True)[:SLOWEST_FILES]
    terminalreporter.write_sep("=", f"slowest {len(slowest)} test files (seconds, summed over their tests)")
    for path, seconds in slowest:
        terminalreporter.write_line(f"{seconds:8.1f}  {path}")


# Which file a worker takes next. Each worker takes whole files (`--dist loadfile`), and xdist hands them
# out longest first by their number of tests; but the slowest files hold few, slow tests (test_install's 3
# take ~50 s), so they came last, and two workers sat idle while a third ran them. Handed out by their
# seconds instead, longest first, the run ends on short files. The seconds are the last run's (pytest's
# cache, written above), else `FILE_SECONDS`; a file in neither counts `UNKNOWN_TEST_SECONDS` a test.
# The tests of a file keep their order.
_SECONDS_CACHE = "amibuild/file-seconds"
UNKNOWN_TEST_SECONDS = 0.25
FILE_SECONDS = {  # a whole-suite run with 4 workers on a 2-CPU machine, 2026-12-07 (files of 5 s or more)
    "tests/test_channel_races.py": 151.1, "tests/test_rehearse.py": 142.9, "tests/test_build_e2e.py": 128.8,
    "tests/test_install.py": 108.2, "tests/test_walkthrough.py": 71.3, "tests/test_prune_home.py": 58.4,
    "tests/test_first_hour.py": 55.4, "tests/test_upstream_real.py": 54.3, "tests/test_channel_deadline.py": 53.3,
    "tests/test_boot_test.py": 52.7, "tests/test_build_guard.py": 47.4, "tests/test_channel_names.py": 45.1,
    "tests/test_channel_converge.py": 44.9, "tests/test_publish.py": 44.8, "tests/test_boot_rest.py": 44.7,
    "tests/test_gates.py": 44.4, "tests/test_boot_cluster.py": 43.6, "tests/test_iam_policy.py": 42.7,
    "tests/test_check_verdicts.py": 41.9, "tests/test_frozen_emulator.py": 39.9,
    "tests/test_channel_stopped.py": 36.5, "tests/test_debug_redaction.py": 36.3, "tests/test_program.py": 34.9,
    "tests/test_events.py": 34.0, "tests/test_rates.py": 31.7, "tests/test_inventory_e2e.py": 30.3,
    "tests/test_channel_home.py": 29.8, "tests/test_bad_input.py": 27.0, "tests/test_today_nodes.py": 25.8,
    "tests/test_prune_race.py": 25.7, "tests/test_check_deadline.py": 24.5, "tests/test_fleet.py": 23.8,
    "tests/test_verify.py": 23.5, "tests/test_fanout_rates.py": 23.0, "tests/test_rollout.py": 23.0,
    "tests/test_url_credentials.py": 21.1, "tests/test_inventory.py": 20.0, "tests/test_render_cases.py": 20.0,
    "tests/test_scan_gate.py": 19.7, "tests/test_ci_summary.py": 19.3, "tests/test_channel_repair_signal.py": 18.5,
    "tests/test_sandbox_reset.py": 18.1, "tests/test_protection.py": 18.0, "tests/test_consumer_accounts.py": 17.7,
    "tests/test_attest_build.py": 17.0, "tests/test_prune_ladder.py": 17.0, "tests/test_prune.py": 16.7,
    "tests/test_leftovers_named.py": 16.5, "tests/test_jobs.py": 16.3, "tests/test_sandbox.py": 14.7,
    "tests/test_sandbox_transform.py": 14.4, "tests/test_hygiene.py": 13.0, "tests/test_cli_in_process.py": 12.5,
    "tests/test_nodegroup_template.py": 12.5, "tests/test_karpenter.py": 12.2, "tests/test_channel_repair.py": 11.4,
    "tests/test_injection.py": 11.3, "tests/test_cli.py": 9.7, "tests/test_node_settings.py": 9.6,
    "tests/test_proxy_credentials.py": 9.0, "tests/test_docs.py": 8.7, "tests/test_cleanup.py": 8.6,
    "tests/test_keys.py": 7.5, "tests/test_fingerprint_secret.py": 7.4, "tests/test_layers.py": 6.5,
    "tests/test_leftovers.py": 6.2, "tests/test_channel_outgrown.py": 6.1, "tests/test_attest.py": 5.4,
    "tests/test_flavor.py": 5.3,
}


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False  # xdist's reorder by number of tests: the order below instead


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cache = getattr(config, "cache", None)
    seconds = {**FILE_SECONDS, **(cache.get(_SECONDS_CACHE, {}) if cache is not None else {})}
    tests: dict[str, int] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        tests[path] = tests.get(path, 0) + 1

    def order(item: pytest.Item) -> float:
        path = item.nodeid.split("::", 1)[0]
        return -seconds.get(path, UNKNOWN_TEST_SECONDS * tests[path])

    items.sort(key=order)  # stable: a file's tests stay in their order
