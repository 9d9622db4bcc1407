"""A matrix of 16 variants built at once: is the run as long as its longest build, and no longer?

Against the local emulator, with the real packer behind a wrapper that sleeps `DELAY` seconds before
every `packer build` (standing in for the minutes a real build waits on EC2) and logs each packer
call. First `invoke build-ami --json --no-publish --parallel 16` builds all 16; the per-variant `seconds` of its
JSON give the longest single build, the limit a parallel run cannot beat. Then the same builds one
after another, `--force --parallel 1`, as the upstream Makefile runs them. Both are whole
`python -m invoke ... build-ami` subprocesses, timed from start to exit.

Targets (issue): wall <= 1.10 x the longest single build; and before the first `packer build`
starts, at most 1.5 s of amibuild's own time for the 16 variants (a regression guard, issue 30). The wrapper's log splits each run
into the part before the first `packer build` starts (start-up, pipeline file, source AMIs, render,
the fingerprint lookup, writing the folders) and the build phase, which tells where a miss comes
from. amibuild's own time is that first part minus the start-up of the same command doing nothing
(`build-ami --help`: Python, invoke, the task modules; 5 runs, median), on an emulator already warmed
by one untimed `--dry-run` (a fresh emulator builds its EC2 and SSM backends on the first calls: its
time, not amibuild's, and real AWS has no such cold start). One run of each build (a run is seconds
of real packer work), so no spread there.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from collections import Counter
from pathlib import Path

from benchmarks.common import Report, Row, Target, interleave, subprocess_command

NAME = "build_matrix"
DESCRIPTION = "16 variants with a fixed build delay: wall vs the longest build, and vs one-by-one"

VARIANTS = 16
DELAY = 2.0  # seconds every `packer build` sleeps first: the stand-in for EC2 wait time
TARGET = Target(1.10)
OWN_TIME_TARGET = Target(1.5)  # seconds (issue 30's regression guard) of amibuild's own time before the first `packer build`


def run() -> Report:
    from amibuild.sandbox import Sandbox
    from benchmarks import _buildkit as kit

    kit.packer_binary()
    kit.byte_compile()
    cpus = os.cpu_count() or 0
    sandbox = Sandbox().start()
    try:
        with tempfile.TemporaryDirectory(prefix="amibuild-bench-matrix-") as tmp:
            work = Path(tmp)
            (work / "amibuild.hcl").write_text(kit.pipeline_text(VARIANTS, name="matrix"), encoding="utf-8")
            wrapper, log = kit.write_wrapper(work, build_delay=DELAY)
            env = kit.child_env(sandbox.env(), wrapper=wrapper)
            version = kit.packer_version(env)
            # untimed: the emulator's first calls build its backends (see the module docstring)
            kit.build_ami(work, env, "--no-publish", "--dry-run")
            warm = len(kit.packer_calls(log))
            startup = interleave({"help": subprocess_command(kit.build_ami_argv("--help"), cwd=work, env=env)},
                                 runs=5)["help"]

            # --no-publish: this measures the build matrix; publishing is paced to SSM's few writes
            # a second per account (16 variants take ~5 s here) and has a benchmark of its own
            parallel = kit.build_ami(work, env, "--no-publish", "--parallel", str(VARIANTS))
            kit.expect(parallel, "built", VARIANTS, "--parallel 16")
            calls_parallel = kit.packer_calls(log)[warm:]
            sequential = kit.build_ami(work, env, "--no-publish", "--force", "--parallel", "1", timeout=600)
            kit.expect(sequential, "built", VARIANTS, "--force --parallel 1")
            calls_sequential = kit.packer_calls(log)[warm + len(calls_parallel):]
    finally:
        sandbox.stop()

    singles = [v["seconds"] for v in parallel.variants]
    limit = max(singles)
    singles_seq = [v["seconds"] for v in sequential.variants]
    pre_par, phase_par, spread_par = _phases(parallel, calls_parallel)
    pre_seq = _phases(sequential, calls_sequential)[0]

    rows = [
        Row(f"wall, --parallel {VARIANTS} (whole command)", s(parallel.seconds), "s"),
        Row("longest single build in it (the limit)", s(limit), "s",
            detail=f"median build {statistics.median(singles):.2f} s"),
        Row("wall / limit", parallel.seconds / limit, "x", target=TARGET,
            detail=f"{cpus} CPUs for {VARIANTS} concurrent packer builds"),
        Row("  before the first packer build starts", s(pre_par), "s",
            detail=f"start-up, render, checks: {_tally(calls_parallel, skip='build') or 'no packer call'}"),
        Row("    of it, start-up (`build-ami --help`, median)", s(startup.median), "s",
            detail=f"quartiles {startup.quartiles[0]:.2f}-{startup.quartiles[1]:.2f} s, n={len(startup.samples)}"),
        Row(f"    amibuild's own time before the first build ({VARIANTS} variants)", s(pre_par - startup.median), "s",
            target=OWN_TIME_TARGET),
        Row("  build phase (first build start -> exit)", s(phase_par), "s"),
        Row("  build phase / limit", phase_par / limit, "x"),
        Row("sequential, --force --parallel 1 (whole command)", s(sequential.seconds), "s"),
        Row("  single builds one by one: sum / longest", s(sum(singles_seq)), "s",
            detail=f"longest {max(singles_seq):.2f} s, median {statistics.median(singles_seq):.2f} s"),
        Row("  before the first packer build starts", s(pre_seq), "s"),
        Row("sequential / parallel wall", sequential.seconds / parallel.seconds, "x",
            detail=f"ideal about {VARIANTS} with {VARIANTS} free cores; {cpus} CPUs here"),
    ]
    notes = [
        (f"this machine has {cpus} CPU(s): the {VARIANTS} packer processes (and the builder plugin "
         f"processes each starts) share them, so each build's own seconds under --parallel {VARIANTS} include "
         f"CPU contention; the {DELAY:g} s sleep per build is the part that parallelises perfectly"),
        (f"--parallel {VARIANTS}: {VARIANTS} `packer build` calls started within {spread_par:.2f} s of each "
         f"other; packer calls per run: {_tally(calls_parallel)}"),
        f"--force --parallel 1: packer calls: {_tally(calls_sequential)}",
        ("one run of each (each is seconds of real packer work): no spread; the sandbox endpoint is "
         "127.0.0.1, builds use communicator \"none\""),
    ]
    setup = (f"{VARIANTS} variants (al2/al2023, x86_64/arm64, k8s 1.28-1.33), 1 region, real packer "
             f"({version}) via a wrapper sleeping {DELAY:g} s before each `packer build`; emulator on 127.0.0.1")
    return Report(rows, notes, setup=setup)


def s(seconds: float) -> float:
    """Seconds as printed: two decimals (no target is checked against a rounded figure)."""
    return round(seconds, 2)


def _phases(result, calls) -> tuple[float, float, float]:
    """(seconds before the first `packer build`, seconds from it to exit, spread of build starts)."""
    starts = sorted(c.at for c in calls if c.subcommand == "build")
    if not starts:
        return result.seconds, 0.0, 0.0
    before = starts[0] - result.started
    return before, result.seconds - before, starts[-1] - starts[0]


def _tally(calls, skip: str = "") -> str:
    counts = Counter(c.subcommand for c in calls if c.subcommand != skip)
    return ", ".join(f"{n} {sub}" for sub, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
