"""What every benchmark shares: interleaved timing, the result rows, and the table printer.

Machines running these are shared and noisy, so a benchmark never compares a figure with one taken
at another time: the commands it compares run in the same rounds, interleaved (each round runs
every command once, in an order rotated from round to round), and the figures are medians. A
target is a ratio or a bound checked against those medians; the verdict is reported, never raised.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence


class BenchmarkError(RuntimeError):
    """The benchmark itself could not run (a command failed): no figure is better than a wrong one."""


# ------------------------------------------------------------------------------------- timing


@dataclass(frozen=True)
class Timing:
    """Wall-clock samples of one command, in seconds."""

    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def quartiles(self) -> tuple[float, float]:
        """25th and 75th percentiles: how wide the noise was in this run."""
        if len(self.samples) < 2:
            return self.samples[0], self.samples[0]
        q = statistics.quantiles(self.samples, n=4, method="inclusive")
        return q[0], q[2]

    def spread(self, scale: float = 1000.0, unit: str = "ms") -> str:
        low, high = self.quartiles
        return f"IQR {low * scale:.1f}-{high * scale:.1f} {unit}, n={len(self.samples)}"


def clock(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def interleave(
    commands: Mapping[str, Callable[[], object]], runs: int, warmup: int = 1
) -> dict[str, Timing]:
    """Time every command ``runs`` times, interleaved; ``warmup`` untimed rounds first.

    Round ``i`` starts at command ``i mod n``, so each command takes each position equally often
    and a slow patch of the machine is spread across all of them rather than landing on one.
    """
    names = list(commands)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(warmup):
        for name in names:
            commands[name]()
    for round_ in range(runs):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(clock(commands[name]))
    return {name: Timing(tuple(values)) for name, values in samples.items()}


def subprocess_command(
    argv: Sequence[str], *, cwd: str | os.PathLike | None = None, env: Mapping[str, str] | None = None
) -> Callable[[], None]:
    """A callable that runs ``argv`` to completion (output discarded) and fails loudly if it fails."""

    def run() -> None:
        proc = subprocess.run(
            list(argv), cwd=cwd, env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
            raise BenchmarkError(f"`{' '.join(argv)}` exited {proc.returncode}:\n{tail}")

    return run


# ------------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Target:
    """An upper bound for a figure. A soft target is information: it never reads as a miss."""

    limit: float
    soft: bool = False

    def verdict(self, value: float) -> str:
        if self.soft:
            return "under (info)" if value <= self.limit else "over (info)"
        return "PASS" if value <= self.limit else "MISS"


@dataclass(frozen=True)
class Row:
    """One figure: ``value`` in ``unit`` ("ms", "x" for a ratio, "" for a count)."""

    label: str
    value: float
    unit: str = "ms"
    target: Target | None = None
    detail: str = ""  # e.g. the spread of the samples behind a median


@dataclass
class Report:
    """What a benchmark's ``run()`` returns: its rows, and notes printed under the table."""

    rows: list[Row]
    notes: list[str] = field(default_factory=list)
    setup: str = ""  # one line on how it measured (runs, interleaving)

    @property
    def misses(self) -> list[Row]:
        return [r for r in self.rows if r.target and r.target.verdict(r.value) == "MISS"]


def ms(seconds: float) -> float:
    return seconds * 1000.0


# ------------------------------------------------------------------------------------- printing


def _figure(value: float, unit: str) -> str:
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "ms":
        return f"{value:.1f} ms"
    return f"{value:g} {unit}".rstrip()


def _target(row: Row) -> str:
    if row.target is None:
        return ""
    text = f"<= {_figure(row.target.limit, row.unit)}"
    return f"{text} (soft)" if row.target.soft else text


def format_report(name: str, description: str, report: Report, elapsed: float) -> str:
    header = ("measure", "figure", "target", "verdict", "spread")
    cells = [
        (r.label, _figure(r.value, r.unit), _target(r), r.target.verdict(r.value) if r.target else "", r.detail)
        for r in report.rows
    ]
    widths = [max(len(row[i]) for row in [header, *cells]) for i in range(len(header))]
    right = {1}  # figures right-aligned so the decimal points line up

    def line(row: Sequence[str]) -> str:
        parts = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        return ("  " + "  ".join(parts)).rstrip()

    out = [f"== {name}: {description}"]
    if report.setup:
        out.append(f"   {report.setup}")
    out += ["", line(header), line(["-" * w for w in widths]), *(line(c) for c in cells)]
    if report.notes:
        out.append("")
        out += [f"  {note}" for note in report.notes]
    out.append(f"  ({elapsed:.1f} s)")
    return "\n".join(out)
