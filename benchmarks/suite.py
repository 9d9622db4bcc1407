"""The whole test suite's wall time, as CI and the lead run it: `python -m pytest` with the
project's defaults (`-n auto --dist loadfile`: one worker per CPU, each with its own emulator).

Target: ≤ 8 minutes on the 2-CPU machine, every run green. Runs in a row: `AMIBUILD_SUITE_RUNS`
(default 1), or ``python benchmarks/suite.py --runs 3``. Each run's wall time and pytest's
summary line are figures; the notes give the load average before and after each run (the
machine is shared: a figure means little without it) and the ten slowest test files of the last
run (their tests' setup + call + teardown summed, from ``--durations=0``), where time goes first.

Not in `run.py`'s default set (it takes minutes and the whole machine): name it,
``python benchmarks/run.py suite``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable from the repository root
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from benchmarks.common import BenchmarkError, Report, Row, Target, format_report  # noqa: E402

NAME = "suite"
DESCRIPTION = "the whole test suite's wall time (pytest -n auto), runs in a row"
DEFAULT = False  # minutes of the whole machine: only when named

ROOT = Path(__file__).resolve().parent.parent
LIMIT_S = 8 * 60
_SUMMARY = re.compile(r"^=* *([0-9]+ [^\n]*\b(passed|failed|error|errors)\b[^\n]*?) in [0-9.]+s", re.M)
_DURATION = re.compile(r"^([0-9.]+)s (setup|call|teardown)\s+(\S+?)::", re.M)


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"


def one_run(extra: tuple[str, ...] = ()) -> tuple[float, str, bool, dict[str, float]]:
    """(wall seconds, pytest's summary, green?, seconds per test file) of one run of the suite."""
    argv = [sys.executable, "-m", "pytest", "-q", "--durations=0", "-p", "no:cacheprovider", *extra]
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    wall = time.perf_counter() - started
    found = _SUMMARY.findall(proc.stdout)
    if not found:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise BenchmarkError(f"pytest exited {proc.returncode} without a summary line:\n{tail}")
    summary = found[-1][0]
    per_file: dict[str, float] = defaultdict(float)
    for seconds, _phase, path in _DURATION.findall(proc.stdout):
        per_file[path] += float(seconds)
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", proc.stdout, re.M)
    if failed:
        summary += f" ({', '.join(failed)})"
    return wall, summary, proc.returncode == 0, dict(per_file)


def run(runs: int | None = None) -> Report:
    runs = runs or int(os.environ.get("AMIBUILD_SUITE_RUNS", "1"))
    rows, notes = [], []
    per_file: dict[str, float] = {}
    for n in range(1, runs + 1):
        before = _load()
        wall, summary, green, per_file = one_run()
        rows.append(Row(f"run {n}: wall", wall, "s", Target(LIMIT_S), detail=summary))
        notes.append(f"run {n}: {'green' if green else 'NOT green'}; load average before {before}, after {_load()}")
    rows.append(Row("runs green", sum(1 for note in notes if ": green;" in note), f"of {runs}"))
    slowest = sorted(per_file.items(), key=lambda item: -item[1])[:10]
    notes.append("slowest files of the last run (summed test durations; the workers run in parallel): " +
                 ", ".join(f"{path} {seconds:.0f} s" for path, seconds in slowest))
    return Report(rows, notes, setup=f"python -m pytest -q (the project's -n auto --dist loadfile) x {runs}, "
                                     f"{os.cpu_count()} CPUs")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--runs", type=int, default=None, help="runs in a row (default: AMIBUILD_SUITE_RUNS or 1)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    report = run(args.runs)
    print(format_report(NAME, DESCRIPTION, report, time.perf_counter() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
