"""How much amibuild's `tasks.py` adds to invoke's own start-up.

`invoke --list`, `invoke render --help` and `invoke build-ami --help` on this project, each against
the same command on a bare collection (a temporary folder whose tasks.py holds one trivial task;
both `--help` commands are compared with its `hello --help`). All five run as
`python -m invoke -r <dir> ...` subprocesses with this interpreter, interleaved, and the ratio of
medians is the figure: invoke's own start-up cancels out, what remains is what our import adds.
Target: at most 1.2x. When it misses, the note on heavy modules says what got imported.

And the installed command: `amibuild --list` (run as `python -m amibuild --list`) against a bare
invoke `Program` over a one-task collection (`python bare_program.py --list`), the same ratio.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import BenchmarkError, Report, Row, Target, interleave, ms, subprocess_command

NAME = "cli_startup"
DESCRIPTION = "invoke --list / render --help / build-ami --help of tasks.py, as a ratio to a bare invoke collection"

ROOT = Path(__file__).resolve().parent.parent
RUNS = 15
TARGET = Target(1.2)
# Modules that cost tens of milliseconds to import; none belongs on the `invoke --list` path.
HEAVY = ("boto3", "botocore", "s3transfer", "jinja2", "hcl2", "lark", "rich", "moto")

BARE_PROGRAM = '''\
from invoke import Collection, Program, task


@task
def hello(c):
    """Say hello."""
    print("hello")


Program(namespace=Collection(hello), version="0", name="bare", binary="bare").run()
'''

BARE_TASKS = '''\
from invoke import task


@task
def hello(c):
    """Say hello."""
    print("hello")
'''


def run() -> Report:
    with tempfile.TemporaryDirectory(prefix="amibuild-bench-bare-") as tmp:
        bare = Path(tmp)
        (bare / "tasks.py").write_text(BARE_TASKS, encoding="utf-8")
        (bare / "bare_program.py").write_text(BARE_PROGRAM, encoding="utf-8")

        def invoke(root: Path, *args: str) -> list[str]:
            return [sys.executable, "-m", "invoke", "-r", str(root), *args]

        # same neutral working directory for all five, so only the collection differs
        commands = {
            "bare --list": invoke(bare, "--list"),
            "amibuild --list": invoke(ROOT, "--list"),
            "bare hello --help": invoke(bare, "hello", "--help"),
            "amibuild render --help": invoke(ROOT, "render", "--help"),
            "amibuild build-ami --help": invoke(ROOT, "build-ami", "--help"),
            "bare program --list": [sys.executable, str(bare / "bare_program.py"), "--list"],
            "amibuild program --list": [sys.executable, "-m", "amibuild", "--list"],
        }
        # `python -m amibuild` finds this checkout even when the interpreter has no amibuild installed
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        # byte-compiled, as pip leaves an install: with PYTHONDONTWRITEBYTECODE set (or stale .pyc
        # files after an edit, which invoke's own runs never rewrite: it sets
        # sys.dont_write_bytecode) every run would time compiling amibuild's modules instead
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "amibuild")], check=True,
                       stdout=subprocess.DEVNULL)
        timings = interleave({k: subprocess_command(v, cwd=bare, env=env) for k, v in commands.items()}, runs=RUNS)
        imports_list = imported_modules(commands["amibuild --list"], cwd=bare)
        imports_help = imported_modules(commands["amibuild render --help"], cwd=bare)
        imports_build_help = imported_modules(commands["amibuild build-ami --help"], cwd=bare)
        imports_program = imported_modules(commands["amibuild program --list"], cwd=bare, env=env)

    rows = []
    for what, bare_key, ours_key, bare_label, ours_label in (
        ("invoke --list", "bare --list", "amibuild --list", "bare collection", "amibuild tasks.py"),
        ("invoke render --help", "bare hello --help", "amibuild render --help", "bare collection", "amibuild tasks.py"),
        ("invoke build-ami --help", "bare hello --help", "amibuild build-ami --help", "bare collection",
         "amibuild tasks.py"),
        ("amibuild --list", "bare program --list", "amibuild program --list", "bare invoke Program",
         "amibuild program"),
    ):
        b, o = timings[bare_key], timings[ours_key]
        rows += [
            Row(f"{what}: {bare_label}", ms(b.median), detail=b.spread()),
            Row(f"{what}: {ours_label}", ms(o.median), detail=o.spread()),
            Row(f"{what}: ratio", o.median / b.median, unit="x", target=TARGET),
        ]
    notes = [
        _heavy_note("invoke --list", imports_list),
        _heavy_note("invoke render --help", imports_help),
        _heavy_note("invoke build-ami --help", imports_build_help),
        _heavy_note("amibuild --list", imports_program),
        "amibuild modules imported by `invoke --list`: "
        + (", ".join(f"{m} ({t:.1f} ms)" for m, t in _ours(imports_list)) or "none"),
    ]
    return Report(rows, notes, setup=f"{RUNS} runs of each command, interleaved, 1 warm-up round; medians; "
                                     f"`{Path(sys.executable).name} -m invoke -r DIR ...` subprocesses")


_IMPORTTIME = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)\s*$")


def imported_modules(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> dict[str, float]:
    """Every module the command imports, with its cumulative import time in ms (`-X importtime`)."""
    proc = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise BenchmarkError(f"`{' '.join(argv)}` exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    modules: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        match = _IMPORTTIME.match(line)
        if match:
            modules[match.group(4)] = max(modules.get(match.group(4), 0.0), int(match.group(2)) / 1000.0)
    return modules


def _heavy_note(what: str, modules: dict[str, float]) -> str:
    found = [(name, modules.get(name, 0.0)) for name in HEAVY if any(m == name or m.startswith(name + ".") for m in modules)]
    if not found:
        return f"heavy modules imported by `{what}`: none (checked: {', '.join(HEAVY)})"
    return f"heavy modules imported by `{what}`: " + ", ".join(f"{n} ({t:.0f} ms cumulative)" for n, t in found)


def _ours(modules: dict[str, float]) -> list[tuple[str, float]]:
    return [(m, t) for m, t in modules.items() if m == "amibuild" or m.startswith("amibuild.")]
