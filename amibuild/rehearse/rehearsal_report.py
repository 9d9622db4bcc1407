"""What a rehearsal found, as data (`Report`) and as the lines `amibuild rehearse` prints. Pure.

`build_report` turns the raw run (exit statuses, stand-in state, the overlay's /etc changes) into
per-step verdicts (ok, stood in, FAILED, not rehearsable, skipped, not run).

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from amibuild.rehearse.overlay import RawRun
from amibuild.rehearse.steps import Step

OK, FAILED, GAP, SKIPPED, NOT_RUN = "ok", "FAILED", "not rehearsable", "skipped", "not run"
STOOD_IN = "stood in"
TAIL = 12  # stderr lines shown for the first failure


@dataclass(frozen=True)
class Finding:
    """One shellcheck finding in a script of the chain."""

    origin: str  # "amibuild" (ours: must be clean) | "user" | "upstream"
    script: str
    line: int
    code: str
    severity: str
    message: str

    def text(self) -> str:
        return f"{self.script}:{self.line}: {self.severity} {self.code}: {self.message}"


@dataclass(frozen=True)
class StepVerdict:
    step: Step
    status: str
    exit_status: int | None
    seconds: float
    reason: str = ""


@dataclass(frozen=True)
class Failure:
    step: str
    script: str  # the script's name as the template gives it (or "inline command N")
    line: int | None
    exit_status: int | None
    output_tail: tuple[str, ...]

    def where(self) -> str:
        return f"{self.script}:{self.line}" if self.line else self.script

    def ended(self) -> str:
        return f"exit {self.exit_status}" if self.exit_status is not None else "did not finish"


@dataclass
class Report:
    variant: str
    steps: list[StepVerdict]
    failure: Failure | None
    packages: list[tuple[str, str]]  # (name, version asked for or "")
    units: list[tuple[str, str]]  # (unit, enabled | disabled | masked)
    etc_written: list[str]
    etc_removed: list[str]
    calls: int
    findings: list[Finding]
    seconds: float
    kept: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def gaps(self) -> list[StepVerdict]:
        return [v for v in self.steps if v.status == GAP]

    @property
    def complete(self) -> bool:
        """Every step ran (ok, stood in, a reboot passed over) or was shell-local."""
        return not self.gaps and all(v.status in (OK, STOOD_IN, SKIPPED) for v in self.steps)

    @property
    def incomplete(self) -> str:
        """Why the rehearsal is incomplete (no failure, but a step it cannot rehearse), else ""."""
        if not self.ok or not self.gaps:
            return ""
        first = self.gaps[0]
        left = sum(1 for v in self.steps if v.status == NOT_RUN)
        return (f"rehearsal incomplete: step {first.step.number} ({first.step.name}) cannot be rehearsed "
                f"({first.reason}); {left} later step{'' if left == 1 else 's'} did not run")

    @property
    def own_findings(self) -> list[Finding]:
        return [f for f in self.findings if f.origin == "amibuild"]

    @property
    def ok(self) -> bool:
        """No step failed and amibuild's own scripts are shellcheck-clean (gaps are not failures)."""
        return self.failure is None and not self.own_findings

    def to_dict(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "ok": self.ok,
            "complete": self.complete,
            "seconds": round(self.seconds, 3),
            "steps": [{"number": v.step.number, "name": v.step.name, "kind": v.step.kind, "status": v.status,
                       "exit_status": v.exit_status, "seconds": round(v.seconds, 3), "reason": v.reason,
                       "expect_disconnect": v.step.expect_disconnect, "notes": list(v.step.notes)}
                      for v in self.steps],
            "failure": None if self.failure is None else {**asdict(self.failure), "output_tail": list(self.failure.output_tail)},
            "packages": [{"name": n, "version": v or None} for n, v in self.packages],
            "units": [{"unit": u, "state": s} for u, s in self.units],
            "etc_written": list(self.etc_written),
            "etc_removed": list(self.etc_removed),
            "stand_in_calls": self.calls,
            "shellcheck": [asdict(f) for f in self.findings],
            "kept": self.kept,
            "notes": list(self.notes),
        }


def build_report(variant: str, raw: RawRun, findings: Sequence[Finding], seconds: float,
                 script_names: dict[str, str]) -> Report:
    """``script_names``: remote path -> the name to show (the script as the template names it)."""
    verdicts: list[StepVerdict] = []
    failure: Failure | None = None
    stopped = False
    for result in raw.results:
        step = result.step
        if step.kind == "local":
            verdicts.append(StepVerdict(step, SKIPPED, None, 0.0, step.notes[-1]))
            continue
        if not stopped and not result.ran and raw.timed_out:
            # killed while running this step: it never finished, which on an instance is a failure too
            verdicts.append(StepVerdict(step, FAILED, None, 0.0, "timed out"))
            failure = Failure(step.name, script_names.get(step.remote_path, step.script or step.name), None, None,
                              ("the rehearsal timed out in this step (see --timeout)",))
            stopped = True
            continue
        if stopped or not result.ran:
            verdicts.append(StepVerdict(step, NOT_RUN, None, 0.0, "after the failure above"))
            stopped = True
            continue
        status = result.exit_status
        if status in step.valid_exit_codes:
            stood = [what for number, what in raw.stood_in if number == f"{step.number:03d}"]
            if stood:
                verdicts.append(StepVerdict(step, STOOD_IN, status, result.seconds, "; ".join(stood)))
                continue
            reason = "reboot requested and passed over (expect_disconnect)" if step.expect_disconnect else ""
            verdicts.append(StepVerdict(step, OK, status, result.seconds, reason))
            continue
        stopped = True
        gap = _gap(step, raw, result.stderr, status)
        if gap:
            verdicts.append(StepVerdict(step, GAP, status, result.seconds, gap))
            continue
        verdicts.append(StepVerdict(step, FAILED, status, result.seconds))
        failure = _failure(step, result.stdout, result.stderr, status, raw, script_names)
    return Report(
        variant=variant, steps=verdicts, failure=failure, packages=sorted(raw.packages), units=sorted(raw.units),
        etc_written=raw.etc_written, etc_removed=raw.etc_removed, calls=len(raw.calls), findings=list(findings),
        seconds=seconds, kept=str(raw.kept) if raw.kept else None, notes=list(raw.notes),
    )


_NOT_FOUND = re.compile(r"^(?:.*?: )?(?:line [0-9]+: )?([^\s:]+): (?:command )?not found\Z", re.ASCII)


def _gap(step: Step, raw: RawRun, stderr: str, status: int | None) -> str:
    here = [call for number, call in raw.gaps if number == f"{step.number:03d}"]
    if here:
        return "stand-in cannot answer: " + "; ".join(dict.fromkeys(here))
    if status == 127:
        for line in reversed(stderr.splitlines()):
            m = _NOT_FOUND.match(line.strip())
            if m:
                return (f"`{m.group(1)}` is not on this machine and no stand-in plays it "
                        "(if it is a typo, it is an error of the chain)")
    return ""


def _failure(step: Step, stdout: str, stderr: str, status: int | None, raw: RawRun,
             names: dict[str, str]) -> Failure:
    remote = step.remote_path
    shown = names.get(remote, step.script or step.name)
    line: int | None = None
    # bash names the line itself for unbound variables, syntax errors and missing commands
    for text in reversed(stderr.splitlines()):
        m = re.match(rf"^{re.escape(remote)}: line ([0-9]+): ", text) if remote else None
        if m:
            line = int(m.group(1))
            break
    if line is None:
        # the ERR hook's record (see standins/errhook.sh): the last command that failed with the
        # status the script ended with is where `set -e` stopped it (an `exit N` leaves no record)
        hooked = [e for e in raw.errors if e[0] == remote and e[1] > 0 and e[2] == status]
        if hooked:
            line = hooked[-1][1]
    if step.inline and line:
        index = line - 2  # line 1 is the shebang Packer writes first
        shown, line = f"inline command {index + 1} ({step.inline[index] if 0 <= index < len(step.inline) else '?'})", None
    tail = tuple(stderr.splitlines()[-TAIL:])
    if len(tail) < 3:  # many scripts say why on stdout: show its end too
        tail = tuple(stdout.splitlines()[-(TAIL - len(tail)):]) + tail
    return Failure(step.name, shown, line, status, tail)


def lines(report: Report) -> list[str]:
    """The human report: a line per step, the first failure, then what the chain would leave."""
    out = [f"rehearsal of {report.variant}:"]
    width = max((len(v.step.name) for v in report.steps), default=10)
    for v in report.steps:
        status = v.status if v.exit_status in (None, 0) or v.status != FAILED else f"FAILED (exit {v.exit_status})"
        if v.status == GAP:
            status = f"not rehearsable (exit {v.exit_status})"
        timing = f"{v.seconds:6.2f}s" if v.status in (OK, FAILED, GAP, STOOD_IN) else "       "
        extra = f"  {v.reason}" if v.reason else ""
        out.append(f"  {v.step.number:>2}. {v.step.name:<{width}}  {timing}  {status}{extra}")
    if report.failure:
        f = report.failure
        out.append(f"first failure: {f.step} at {f.where()} ({f.ended()})")
        out += [f"  | {line}" for line in f.output_tail]
    out += [f"not rehearsable: step {v.step.number} ({v.step.name}): {v.reason}; later steps were not run"
            for v in report.gaps]
    out += [f"stood in: step {v.step.number} ({v.step.name}): {v.reason}" for v in report.steps if v.status == STOOD_IN]
    packages = [f"{n} {v}" if v else n for n, v in report.packages]
    out.append(f"would install: {', '.join(packages) if packages else 'nothing'}")
    enabled = [u for u, s in report.units if s == "enabled"]
    others = [f"{u} ({s})" for u, s in report.units if s != "enabled"]
    out.append(f"would enable: {', '.join(enabled) if enabled else 'nothing'}"
               + (f"; also {', '.join(others)}" if others else ""))
    out.append(f"would write under /etc: {', '.join(report.etc_written) if report.etc_written else 'nothing'}")
    if report.etc_removed:
        out.append(f"would remove under /etc: {', '.join(report.etc_removed)}")
    # upstream's scripts are not ours to fix: one line per script, after the others (every finding is in --json)
    upstream: dict[str, list[str]] = {}
    for finding in report.findings:
        if finding.origin == "upstream":
            upstream.setdefault(finding.script, []).append(finding.code or finding.severity)
        else:
            label = "error" if finding.origin == "amibuild" else "warning"
            out.append(f"shellcheck {label} ({finding.origin}): {finding.text()}")
    for script, codes in upstream.items():
        counts = ", ".join(f"{code} x{codes.count(code)}" for code in dict.fromkeys(codes))
        out.append(f"shellcheck warning (upstream): {script}: {len(codes)} finding(s): {counts}")
    out += [f"note: {n}" for n in report.notes]
    if report.kept:
        out.append(f"kept: {report.kept}/upper holds every file the chain wrote (remove it when done)")
    verdict = ("passed" if report.ok and not report.gaps else "incomplete" if report.ok else "FAILED")
    out.append(f"rehearsal {verdict} in {report.seconds:.1f}s ({report.calls} stand-in calls)")
    return out
