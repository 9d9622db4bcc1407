"""conftest.run_cli, the suite's one way to run the command line in process: it answers as a real
process does, and one call leaves nothing behind for the next."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from amibuild.jobs.signals import Signals
from conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
PIPELINE = 'pipeline {\n  name    = "t"\n  regions = ["us-west-2"]\n}\n\nvariant "ceph" {\n  extra_packages = ["htop"]\n}\n'


def in_a_process(cwd: Path, binary: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "amibuild", *args] if binary == "amibuild" else \
        [sys.executable, "-m", "invoke", "-r", str(ROOT), *args]
    env = {k: v for k, v in os.environ.items() if k != "AMIBUILD_DEBUG"}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("binary, args", [
    ("amibuild", ["--list"]),
    ("invoke", ["--list"]),
    ("amibuild", ["build-ami", "--extra-pkgs", "x"]),
    ("invoke", ["build-amis"]),
    ("amibuild", ["runs", "--limit", "abc"]),
    ("amibuild", ["render", "--json"]),
    ("invoke", ["render", "--variant", "nope"]),
    ("amibuild", ["--version"]),
], ids=["amibuild-list", "invoke-list", "unknown-flag", "unknown-task", "bad-number", "render", "unknown-variant",
        "version"])
def test_in_process_answers_as_a_process_does(tmp_path: Path, binary: str, args: list[str]) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for folder in ("a", "b"):
        (tmp_path / folder / "amibuild.hcl").write_text(PIPELINE)
    process = in_a_process(tmp_path / "a", binary, *args)
    inside = run_cli(tmp_path / "b", *args, binary=binary)
    assert (inside.returncode, inside.stdout, inside.stderr) == (
        process.returncode, process.stdout.replace(str(tmp_path / "a"), str(tmp_path / "b")),
        process.stderr.replace(str(tmp_path / "a"), str(tmp_path / "b")))
    assert sorted(p.name for p in (tmp_path / "b").rglob("*")) == sorted(p.name for p in (tmp_path / "a").rglob("*"))


def test_each_call_has_its_own_configuration(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    assert run_cli(tmp_path, "render", env={"AMIBUILD_BUILD_DIR": "from-env"}, binary="amibuild").returncode == 0
    assert (tmp_path / "from-env" / "ceph").is_dir()
    assert "AMIBUILD_BUILD_DIR" not in os.environ
    assert run_cli(tmp_path, "render", binary="amibuild").returncode == 0
    assert (tmp_path / "build" / "ceph").is_dir()  # the variable of the first call is gone
    (tmp_path / "amibuild.yaml").write_text("amibuild:\n  build_dir: from-file\n")
    assert run_cli(tmp_path, "render", binary="amibuild").returncode == 0
    assert (tmp_path / "from-file" / "ceph").is_dir()  # read afresh: a new Program, a new config


def test_a_call_leaves_cwd_env_logging_and_signals_as_it_found_them(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    here, environ = os.getcwd(), dict(os.environ)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    handlers_of = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    bytecode = sys.dont_write_bytecode

    debug = run_cli(tmp_path, "--debug", "render", binary="amibuild")
    assert debug.returncode == 0, debug.stderr
    # invoke's --debug turns on logging for the process: it is undone after the call
    assert (os.getcwd(), dict(os.environ)) == (here, environ)
    assert (root.handlers, root.level) == (handlers, level)
    assert {s: signal.getsignal(s) for s in handlers_of} == handlers_of
    assert sys.dont_write_bytecode == bytecode
    quiet = run_cli(tmp_path, "render", binary="amibuild")
    assert "DEBUG" not in quiet.stderr, quiet.stderr


def test_a_task_that_leaves_a_signal_handler_behind_fails_the_test(tmp_path: Path, monkeypatch) -> None:
    """publish holds SIGINT/SIGTERM/SIGHUP while it writes channels; one that did not give them back
    would change how the next command in the same process reacts to Ctrl-C."""
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    monkeypatch.setattr(Signals, "__exit__", lambda self, *exc_info: None)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(AssertionError, match="left signal handlers behind: .*SIGTERM"):
        run_cli(tmp_path, "publish", "--ami", "us-west-2=ami-0123456789abcdef0")
    assert signal.getsignal(signal.SIGTERM) is before  # put back all the same


def test_a_second_program_in_one_process_still_shows_every_flags_help(tmp_path: Path) -> None:
    """invoke consumes a Task's help when it builds a parser: each amibuild Program gets its own
    copy of the collection, as invoke's loader gives each `invoke` run of tasks.py."""
    first = run_cli(tmp_path, "aws-auth", "--help", binary="amibuild")
    run_cli(tmp_path, "--list", binary="amibuild")
    again = run_cli(tmp_path, "aws-auth", "--help", binary="amibuild")
    through_invoke = run_cli(tmp_path, "aws-auth", "--help")
    assert "Create the EKS access entry" in first.stdout
    assert again.stdout == first.stdout
    assert through_invoke.stdout.split("Options:")[1] == first.stdout.split("Options:")[1]
