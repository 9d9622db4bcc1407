"""Run amibuild's benchmarks and print a table for each: figures, ratios, targets, PASS/MISS.

    python benchmarks/run.py              # every benchmark
    python benchmarks/run.py cli_startup  # just the named ones
    python benchmarks/run.py --list       # what there is

It reports, it does not gate: a MISS still exits 0. It exits 1 only when a benchmark could not
run at all. A benchmark is any module in this folder with `NAME`, `DESCRIPTION` and
`run() -> common.Report`; dropping one in is all it takes to add it (they run in file-name order).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import platform
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# run as a script, Python puts benchmarks/ first on sys.path; the repository root belongs there
# instead, so `benchmarks.*` and `amibuild` import the same way as under `python -m benchmarks.run`
if sys.path and Path(sys.path[0] or ".").resolve() == HERE:
    sys.path[0] = str(ROOT)
elif str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import format_report  # noqa: E402

NOT_BENCHMARKS = {"common", "run"}


def discover() -> dict[str, ModuleType]:
    """Every benchmark module in this folder, by NAME, in file-name order."""
    found: dict[str, ModuleType] = {}
    for info in sorted(pkgutil.iter_modules([str(HERE)]), key=lambda i: i.name):
        if info.name.startswith("_") or info.name in NOT_BENCHMARKS:
            continue
        module = importlib.import_module(f"benchmarks.{info.name}")
        if hasattr(module, "NAME") and callable(getattr(module, "run", None)):
            found[module.NAME] = module
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)

    benchmarks = discover()
    if args.list:
        width = max(map(len, benchmarks), default=0)
        for name, module in benchmarks.items():
            print(f"{name.ljust(width)}  {module.DESCRIPTION}")
        return 0
    unknown = [n for n in args.names if n not in benchmarks]
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)}; known: {', '.join(benchmarks)}")
    # a benchmark with DEFAULT = False (the whole suite: minutes of the whole machine) runs only when named
    selected = args.names or [name for name, module in benchmarks.items() if getattr(module, "DEFAULT", True)]

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    print(f"amibuild benchmarks: python {platform.python_version()} ({sys.executable}), "
          f"{os.cpu_count()} CPUs, load average {load}")
    failed, verdicts = [], []
    for name in selected:
        module = benchmarks[name]
        print()
        start = time.perf_counter()
        try:
            report = module.run()
        except Exception:  # one broken benchmark should not hide the others' figures
            print(f"== {name}: ERROR, no figures\n")
            traceback.print_exc(file=sys.stdout)
            failed.append(name)
            continue
        print(format_report(name, module.DESCRIPTION, report, time.perf_counter() - start), flush=True)
        verdicts += [r.target.verdict(r.value) for r in report.rows if r.target and not r.target.soft]

    print()
    print(f"targets: {verdicts.count('PASS')} PASS, {verdicts.count('MISS')} MISS (reported, not enforced)")
    if failed:
        print(f"could not run: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
