"""The sandbox's stand-in of an image: a variant's real provisioning chain, rehearsed, then a script.

The emulator has no instance to run anything on. What stands in for the image is the variant's
chain as a real build runs it (the sandbox build's ``instance/`` files, `STANDIN_DIR`, written by
`amibuild.sandbox.transform`),
rehearsed in a throwaway copy of this machine with the rehearsal's overlay and stand-ins
(`amibuild.rehearse.overlay`), without its own checks step, followed by the scripts to test, each
its own step run as root: in stage 1 each check (`amibuild.pipeline.imagetests.check_command`),
for SSM Run Command the command's script. Each script's exit status is read from its step, never
from what it prints. What the copy cannot answer (exit 127: not on this copy of this machine; a
stand-in gap) is this sandbox's to say: "not testable here", never a pass.

Run as ``python -m amibuild.imagetest.standin ROOT`` it is the sandbox build's checks step
(a ``shell-local`` provisioner): it prints each check's result, writes ``checks.json`` into ROOT
and exits 1 when a check or the chain failed, which fails the Packer build.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from amibuild.errors import RehearsalUnavailable
from amibuild.imagetest.store import CHECKS_LIST, STANDIN_GAP
from amibuild.imagetest.store import STANDIN_DIR as STANDIN_DIR, STORE_ENV as STORE_ENV, store as store  # re-exported
from amibuild.pipeline import imagetests
from amibuild.printable import printable
from amibuild.render import CHECKS_SCRIPT, INVENTORY_FILE, INVENTORY_REMOTE, INVENTORY_SCRIPT, RECORD_FILE
from amibuild.rehearse.steps import Step, parse_steps
from amibuild.rehearse import overlay

STAGE1_RECORD = "checks.json"
# the image's stand-in in a sandbox build's folder: the real build's HCL files, whose chain it rehearses
COMMAND_PATH = "/tmp/amibuild-ssm-command-{}.sh"
NOT_FOUND = 127  # "command not found": on the stand-in, not on this copy of this machine
EVERY_STATUS = tuple(range(256))  # a script's step never stops the copy: each one after it runs too


@dataclass
class ScriptRun:
    """One script's step on the stand-in: its exit status (None: it never ran) and its output."""

    exit_status: int | None
    output: str = ""  # stdout and stderr
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    gap: bool = False  # a stand-in could not answer a call it made

    @property
    def cannot_answer(self) -> str:
        """Why the stand-in cannot say whether this script passes ("" when it can)."""
        if self.gap:
            return "a stand-in could not answer one of its calls"
        if self.exit_status == NOT_FOUND:
            last = self.output.strip().splitlines()[-1:] or ["no output"]
            return f"exit 127, what it looks for is not on this copy of this machine ({printable(last[0][:200])})"
        return ""


@dataclass
class StandinRun:
    """What running scripts on an image's stand-in gave."""

    chain_ok: bool  # every step of the chain before the scripts succeeded (or was not rehearsable)
    output: str  # the last script's stdout and stderr
    exit_status: int | None  # the last script's
    failed_step: str = ""
    notes: list[str] = field(default_factory=list)
    untestable: str = ""  # the chain stopped at a step the stand-ins cannot answer: no stand-in of the image
    scripts: list[ScriptRun] = field(default_factory=list)  # one per script, in order


def chain_steps(root: Path) -> list[Step]:
    """The real chain of the variant rendered into ``root`` (its ``instance/`` files), without its own
    checks step: the stand-in runs each check on its own, after the chain."""
    files = {p.name: p.read_text(encoding="utf-8") for p in sorted((root / STANDIN_DIR).glob("*.hcl"))}
    if not files:
        raise RehearsalUnavailable(f"{root / STANDIN_DIR}: no stand-in of the image here (render it for the sandbox)")
    # run by Packer's local step: the sensitive variables are in this process's PKR_VAR_* environment
    steps = parse_steps(files, str(root), packer_env=os.environ)
    return [s for s in steps if not s.script.endswith((CHECKS_SCRIPT, INVENTORY_SCRIPT))
            and not any(u.source == INVENTORY_REMOTE for u in s.uploads)]


def inventory_script(root: Path) -> str | None:
    """The inventory step's script shipped in ``root``: the stand-in runs it after the checks, its
    stdout the package list (None when the build has none)."""
    path = root / INVENTORY_SCRIPT
    return path.read_text(encoding="utf-8") if path.exists() else None


def settings(root: Path) -> dict[str, Any]:
    return json.loads((root / RECORD_FILE).read_text(encoding="utf-8"))


def run(root: Path, scripts: Sequence[str] = (), *, refuse: Iterable[str] = (), timeout: float = 600.0) -> StandinRun:
    """Rehearse the chain in ``root``; then run each of ``scripts`` as root, each its own step."""
    overlay.check_privileges()
    record = settings(root)
    inputs = record["inputs"]
    steps = chain_steps(root)
    chain = len(steps)
    holder = Path(tempfile.mkdtemp(prefix="amibuild-ssm-"))
    for index, script in enumerate(scripts, start=1):
        path = holder / f"command-{index}.sh"
        path.write_text(script, encoding="utf-8")
        remote = COMMAND_PATH.format(index)
        steps.append(Step(number=max((s.number for s in steps), default=0) + 1, provisioner=-1, kind="shell", name=f"script {index}",
                          script=str(path), command=f"sudo -S bash '{remote}'", remote_path=remote,
                          valid_exit_codes=EVERY_STATUS))
    try:
        raw = overlay.run_steps(steps, arch=inputs["arch"], os_name=inputs["os"], refuse=refuse, timeout=timeout)
    finally:
        shutil.rmtree(holder, ignore_errors=True)
    notes = [f"stopped after {timeout:.0f}s"] if raw.timed_out else []
    gaps = {step for step, _ in raw.gaps}
    for result in raw.results[:chain]:
        if result.ran and result.exit_status not in result.step.valid_exit_codes:
            if f"{result.step.number:03d}" in gaps or result.exit_status == STANDIN_GAP:
                # the copy stops here as Packer would: what follows, the checks included, never ran
                return StandinRun(False, "", None, notes=notes, untestable=(
                    f"step {result.step.number} ({result.step.name}) cannot be rehearsed, so the image has no "
                    "stand-in here"))
            tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or [""]
            return StandinRun(False, "", None, f"step {result.step.number} ({result.step.name}), exit "
                              f"{result.exit_status}: {printable(tail[0])}", notes)
    runs = [ScriptRun(r.exit_status if r.ran else None, r.stdout + r.stderr, r.stdout, r.stderr, r.seconds,
                      gap=f"{r.step.number:03d}" in gaps or r.exit_status == STANDIN_GAP)
            for r in raw.results[chain:]]
    last = runs[-1] if runs else ScriptRun(None)
    return StandinRun(True, last.output, last.exit_status, notes=notes, scripts=runs)


def keep(root: Path, fingerprint: str) -> Path:
    """Keep the stand-in of the image built from ``root``, for the boot test (content-addressed)."""
    final = store() / fingerprint
    if final.exists():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{fingerprint[:12]}-", dir=final.parent))
    for name in (RECORD_FILE, STANDIN_DIR, "scripts"):
        source = root / name
        if source.is_dir():
            shutil.copytree(source, staging / name)
        elif source.exists():
            shutil.copy2(source, staging / name)
    try:
        staging.rename(final)
    except OSError:  # another build of the same fingerprint kept it first
        shutil.rmtree(staging, ignore_errors=True)
    return final


def stage1(root: Path, *, refuse: Iterable[str] = ()) -> tuple[int, list[str], dict[str, Any]]:
    """The sandbox build's checks step: (exit status, lines to print, record)."""
    record = settings(root)
    if os.environ.get("AMIBUILD_RUN_CHECKS", "true") == "false":
        keep(root, record["fingerprint"])
        return 0, [f"amibuild: stage 1 checks turned off for variant {record['variant']} (test_on_build = false)"], {
            "stage": "build", "result": "off", "checks": []}
    checks = _checks(root)
    inventory = inventory_script(root)
    try:
        done = run(root, [imagetests.check_command(c) for c in checks] + ([inventory] if inventory else []),
                   refuse=refuse)
    except RehearsalUnavailable as exc:
        lines = [f"amibuild: stage 1 checks not testable here: {exc}"]
        return 0, lines, {"stage": "build", "result": str(imagetests.Verdict.UNTESTABLE), "reason": str(exc), "checks": []}
    if done.untestable:
        lines = [f"amibuild: stage 1 checks not testable here: {done.untestable}"]
        return 0, lines, {"stage": "build", "result": str(imagetests.Verdict.UNTESTABLE), "reason": done.untestable,
                          "checks": []}
    if not done.chain_ok:
        lines = [f"amibuild: stage 1: the provisioning chain failed before the checks: {done.failed_step}"]
        return 1, lines, {"stage": "build", "result": "failed", "reason": done.failed_step, "checks": []}
    if inventory and len(done.scripts) > len(checks):
        listed = done.scripts[len(checks)]
        if listed.exit_status == 0 and not listed.gap:  # brought back as the real build's download does
            (root / INVENTORY_FILE).write_text(listed.stdout, encoding="utf-8")
        done.scripts = done.scripts[:len(checks)]
    results = [_result(check, ran) for check, ran in zip(checks, done.scripts, strict=False)]
    results += [imagetests.CheckResult(c.name, "build", imagetests.Verdict.NOT_RUN, None, 0.0)
                for c in checks[len(done.scripts):]]
    verdict = imagetests.overall(results)
    lines = [f"amibuild: check {r.name}: {r.verdict} ({r.seconds:.2f}s)"
             + (f"\n{_indent(r.tail)}" if r.verdict in (imagetests.Verdict.FAILED, imagetests.Verdict.NOT_RUN) else "")
             for r in results]
    lines += [f"amibuild: note: {n}" for n in done.notes]
    lines.append(f"amibuild: stage 1 checks {verdict} for variant {record['variant']}")
    # "not testable here" is no failure of the image: the build goes on (the boot test says untested)
    ok = verdict in (imagetests.Verdict.PASSED, imagetests.Verdict.UNTESTABLE)
    if ok:
        keep(root, record["fingerprint"])
    return (0 if ok else 1), lines, {
        "stage": "build", "result": str(verdict), "checks": [r.to_dict() for r in results], "notes": done.notes}


def _result(check: imagetests.Check, ran: ScriptRun) -> imagetests.CheckResult:
    """A stage-1 check's result from its own step's exit status; what the copy cannot answer is not
    testable here (this sandbox's reading: on an instance, 127 is a failure)."""
    if ran.exit_status is None:
        return imagetests.CheckResult(check.name, "build", imagetests.Verdict.NOT_RUN, None, 0.0, ran.output)
    why = ran.cannot_answer
    if why:
        return imagetests.CheckResult(check.name, "build", imagetests.Verdict.UNTESTABLE, ran.exit_status, ran.seconds,
                                      ran.output, reason=f"not testable on the stand-in: {why}")
    return imagetests.CheckResult(check.name, "build", imagetests.verdict(ran.exit_status), ran.exit_status,
                                  ran.seconds, ran.output)


def _checks(root: Path) -> list[imagetests.Check]:
    """The variant's stage-1 checks, as the sandbox build listed them (`CHECKS_LIST`)."""
    raw = json.loads((root / CHECKS_LIST).read_text(encoding="utf-8"))
    return [imagetests.Check(c["name"], c["command"], float(c["timeout"])) for c in raw]


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else ".").resolve()
    refuse = [n.strip() for n in os.environ.get("AMIBUILD_REHEARSE_REFUSE", "").split(",") if n.strip()]
    status, lines, record = stage1(root, refuse=refuse)
    (root / STAGE1_RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print("\n".join(lines), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
