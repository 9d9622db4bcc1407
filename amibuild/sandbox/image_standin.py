"""The sandbox's stand-in of an image: a variant's real provisioning chain, rehearsed, then a script.

The chain is rehearsed in a throwaway copy of this machine; each check becomes a step of its own,
its exit status read from the step. Run as ``python -m amibuild.sandbox.image_standin ROOT`` it is the
sandbox build's checks step: it prints each check's result, writes ``checks.json`` and exits 1 when
a check or the chain failed. SSM commands run on the chain's result, kept by the first one
(`run_command`).

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Iterator, Mapping, Sequence

from amibuild.errors import RehearsalUnavailable
from amibuild.sandbox.standin_store import CHECKS_LIST, STANDIN_GAP
from amibuild.sandbox.standin_store import STANDIN_DIR as STANDIN_DIR, STORE_ENV as STORE_ENV, store as store  # re-exported
from amibuild.pipeline import imagetests
from amibuild.printable import printable
from amibuild.render import CHECKS_SCRIPT, HYGIENE_SCRIPT, INVENTORY_FILE, INVENTORY_REMOTE, INVENTORY_SCRIPT, RECORD_FILE
from amibuild.rehearse.steps import Step, parse_steps
from amibuild.rehearse import overlay

STAGE1_RECORD = "checks.json"
# the image's stand-in in a sandbox build's folder: the real build's HCL files, whose chain it rehearses
COMMAND_PATH = "/tmp/amibuild-ssm-command-{}.sh"
NOT_FOUND = 127  # "command not found": on the stand-in, not on this copy of this machine
EVERY_STATUS = tuple(range(256))  # a script's step never stops the copy: each one after it runs too
# the chain's checks steps, by script, and the stage of the checks that run in each one's place
INVENTORY = "inventory"  # the package list's step: run in its place like a checks step, its stdout kept
CHECK_STEPS: Mapping[str, str] = MappingProxyType({CHECKS_SCRIPT: "build", INVENTORY_SCRIPT: INVENTORY,
                                                   HYGIENE_SCRIPT: imagetests.HYGIENE})
# Between the build's chain and an SSM command the stand-in boots: what a first boot does that the
# checks look at (systemd writes a machine-id of the instance's own where the clean-up emptied it).
FIRST_BOOT_PATH = "/tmp/amibuild-first-boot.sh"
FIRST_BOOT = """#!/usr/bin/env bash
if [ ! -s /etc/machine-id ]; then tr -d '-' </proc/sys/kernel/random/uuid >/etc/machine-id; fi
"""
# in a kept stand-in: the result of the image's chain, the base of every command's copy (`run_command`)
BOOTED = "booted"
_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


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

    chain_ok: bool  # every step of the chain besides the scripts succeeded (or was not rehearsable)
    output: str  # the last script's stdout and stderr
    exit_status: int | None  # the last script's
    failed_step: str = ""
    notes: list[str] = field(default_factory=list)
    untestable: str = ""  # the chain stopped at a step the stand-ins cannot answer: no stand-in of the image
    scripts: list[ScriptRun] = field(default_factory=list)  # one per script, in order (in the chain's, then after it)


def chain_steps(root: Path) -> list[Step]:
    """The real chain of the variant rendered into ``root`` (its ``instance/`` files), its checks
    steps included (`checks_step`)."""
    files = {p.name: p.read_text(encoding="utf-8") for p in sorted((root / STANDIN_DIR).glob("*.hcl"))}
    if not files:
        raise RehearsalUnavailable(f"{root / STANDIN_DIR}: no stand-in of the image here (render it for the sandbox)")
    # run by Packer's local step: the sensitive variables are in this process's PKR_VAR_* environment
    steps = parse_steps(files, str(root), packer_env=os.environ)
    # the inventory's download has no copy to fetch from: the stand-in writes the list itself (stage1)
    return [s for s in steps if not any(u.source == INVENTORY_REMOTE for u in s.uploads)]


def checks_step(step: Step) -> str:
    """The stage of the checks ``step`` runs ("build", "hygiene"; "inventory" for the package
    list), "" for any other step."""
    return next((stage for script, stage in CHECK_STEPS.items() if step.kind == "shell" and step.script.endswith(script)),
                "")


def _script_step(holder: Path, name: str, script: str, remote: str) -> Step:
    path = holder / Path(remote).name
    path.write_text(script, encoding="utf-8")
    return Step(number=0, provisioner=-1, kind="shell", name=name, script=str(path), command=f"sudo -S bash '{remote}'",
                remote_path=remote, valid_exit_codes=EVERY_STATUS)


def inventory_script(root: Path) -> str | None:
    """The inventory step's script shipped in ``root``: the stand-in runs it in the step's place,
    its stdout the package list (None when the build has none)."""
    path = root / INVENTORY_SCRIPT
    return path.read_text(encoding="utf-8") if path.exists() else None


def settings(root: Path) -> dict[str, Any]:
    return json.loads((root / RECORD_FILE).read_text(encoding="utf-8"))


def run(root: Path, scripts: Sequence[str] = (), *, in_place: Mapping[str, Sequence[str]] = MappingProxyType({}),
        refuse: Iterable[str] = (), timeout: float = 600.0) -> StandinRun:
    """Rehearse the chain in ``root``, each checks step replaced by ``in_place[its stage]`` (scripts
    run as root, each its own step; none: the step goes); then, when ``scripts`` are given, a first
    boot and each of ``scripts`` as root, each its own step."""
    overlay.check_privileges()
    inputs = settings(root)["inputs"]
    with _scripts_folder() as holder:
        steps, ours = _chain(root, holder, in_place)
        more, after = _booted_steps(holder, scripts, at=len(steps))
        steps, ours = _numbered(steps + more), ours + after
        raw = overlay.run_steps(steps, arch=inputs["arch"], os_name=inputs["os"], refuse=refuse, timeout=timeout)
    return _outcome(raw, ours, timeout)


def run_command(root: Path, script: str, *, timeout: float = 600.0) -> StandinRun:
    """``script`` run as root on the image's stand-in after a first boot, as SSM Run Command runs it
    on an instance: on the result of the image's chain (its checks steps gone), which the first
    command makes and keeps in ``root`` (`BOOTED`) for the ones after it, as AWS keeps an image."""
    overlay.check_privileges()
    inputs = settings(root)["inputs"]
    base, failed = _booted(root, inputs, timeout)
    if failed is not None:
        return failed
    with _scripts_folder() as holder:
        steps, ours = _booted_steps(holder, [script], at=0)
        raw = overlay.run_steps(_numbered(steps), arch=inputs["arch"], os_name=inputs["os"], timeout=timeout, base=base)
    return _outcome(raw, ours, timeout)


def _booted(root: Path, inputs: Mapping[str, Any], timeout: float) -> tuple[Path | None, StandinRun | None]:
    """The kept result of the image's chain, made on first use: (its folder, None), or (None, what
    running the chain gave) when the chain did not end well, in which case nothing is kept."""
    kept = root / BOOTED
    with _lock(root):
        if kept.is_dir():
            return kept, None
        steps, _ = _chain(root, None, {})  # its checks steps gone: no script to upload, no folder for them
        raw = overlay.run_steps(_numbered(steps), arch=inputs["arch"], os_name=inputs["os"], timeout=timeout,
                                keep=True, temp_dir=str(root))
        assert raw.kept is not None
        done = _outcome(raw, [], timeout)
        if not done.chain_ok or raw.timed_out or not all(r.ran for r in raw.results):
            shutil.rmtree(raw.kept, ignore_errors=True)
            if done.chain_ok:  # stopped before its end: the command never ran
                done.scripts = [ScriptRun(None)]
            return None, done
        overlay.keep_as_base(raw.kept, kept)
    return kept, None


@contextlib.contextmanager
def _scripts_folder() -> Iterator[Path]:
    """A temp folder for the scripts a run uploads (`_script_step`), removed after the run."""
    with tempfile.TemporaryDirectory(prefix="amibuild-ssm-", ignore_cleanup_errors=True) as folder:
        yield Path(folder)


def _lock(root: Path) -> threading.Lock:
    """One lock per stand-in: the emulator answers commands in threads, and one chain run is enough."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(str(root), threading.Lock())


def _chain(root: Path, holder: Path | None, in_place: Mapping[str, Sequence[str]]) -> tuple[list[Step], list[int]]:
    """The chain's steps, each checks step replaced by ``in_place[its stage]`` (its scripts written to
    ``holder``, which only a run with such scripts needs), and the positions of those scripts' steps."""
    steps: list[Step] = []
    ours: list[int] = []
    for step in chain_steps(root):
        stage = checks_step(step)
        if not stage:
            steps.append(step)
            continue
        for index, script in enumerate(in_place.get(stage, ()), start=1):
            ours.append(len(steps))
            # uploaded where Packer uploads a step's script (/tmp/script_*.sh), as the step it replaces was
            remote = f"/tmp/script_{stage}-check-{index}.sh"
            assert holder is not None, "scripts in place of a checks step need a folder to be written to"
            steps.append(_script_step(holder, f"{stage} check {index}", script, remote))
    return steps, ours


def _booted_steps(holder: Path, scripts: Sequence[str], *, at: int) -> tuple[list[Step], list[int]]:
    """A first boot and ``scripts`` after it (none: no step), and the scripts' positions from ``at``."""
    if not scripts:
        return [], []
    steps = [dataclasses.replace(_script_step(holder, "first boot (stand-in)", FIRST_BOOT, FIRST_BOOT_PATH),
                                 valid_exit_codes=(0,))]
    steps += [_script_step(holder, f"script {index}", script, COMMAND_PATH.format(index))
              for index, script in enumerate(scripts, start=1)]
    return steps, list(range(at + 1, at + len(steps)))


def _numbered(steps: Sequence[Step]) -> list[Step]:
    return [dataclasses.replace(step, number=number) for number, step in enumerate(steps, start=1)]


def _outcome(raw: overlay.RawRun, ours: Sequence[int], timeout: float) -> StandinRun:
    """What a run gave: the chain's steps (all but ``ours``) must end well, then each script's result."""
    notes = [f"stopped after {timeout:.0f}s"] if raw.timed_out else []
    gaps = {step for step, _ in raw.gaps}
    mine = set(ours)
    for at, result in enumerate(raw.results):
        if at not in mine and result.ran and result.exit_status not in result.step.valid_exit_codes:
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
            for r in (raw.results[at] for at in ours)]
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
    listed = _checks(root)
    checks = [check for stage in CHECK_STEPS.values() for check in listed.get(stage, [])]
    inventory = inventory_script(root)
    commands = {stage: [imagetests.check_command(c) for c in stage_checks] for stage, stage_checks in listed.items()}
    if inventory:
        commands[INVENTORY] = [inventory]
    try:
        done = run(root, in_place=commands, refuse=refuse)
    except RehearsalUnavailable as exc:
        lines = [f"amibuild: stage 1 checks not testable here: {exc}"]
        return 0, lines, {"stage": "build", "result": str(imagetests.Verdict.UNTESTABLE), "reason": str(exc), "checks": []}
    if done.untestable:
        lines = [f"amibuild: stage 1 checks not testable here: {done.untestable}"]
        return 0, lines, {"stage": "build", "result": str(imagetests.Verdict.UNTESTABLE), "reason": done.untestable,
                          "checks": []}
    if not done.chain_ok:
        lines = [f"amibuild: stage 1: the provisioning chain failed: {done.failed_step}"]
        return 1, lines, {"stage": "build", "result": "failed", "reason": done.failed_step, "checks": []}
    if inventory:  # its run sits between the build's checks and the hygiene checks, as its step does
        at = len(listed.get("build", []))
        if len(done.scripts) > at:
            package_list = done.scripts.pop(at)
            if package_list.exit_status == 0 and not package_list.gap:  # brought back as the real download does
                (root / INVENTORY_FILE).write_text(package_list.stdout, encoding="utf-8")
    stages = [stage for stage in CHECK_STEPS.values() for _ in listed.get(stage, [])]
    results = [_result(check, ran, stage) for check, ran, stage in zip(checks, done.scripts, stages, strict=False)]
    results += [imagetests.CheckResult(c.name, stage, imagetests.Verdict.NOT_RUN, None, 0.0)
                for c, stage in zip(checks[len(done.scripts):], stages[len(done.scripts):], strict=True)]
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


def _result(check: imagetests.Check, ran: ScriptRun, stage: str) -> imagetests.CheckResult:
    """A stage-1 check's result from its own step's exit status; what the copy cannot answer is not
    testable here (this sandbox's reading: on an instance, 127 is a failure)."""
    if ran.exit_status is None:
        return imagetests.CheckResult(check.name, stage, imagetests.Verdict.NOT_RUN, None, 0.0, ran.output)
    why = ran.cannot_answer
    if why:
        return imagetests.CheckResult(check.name, stage, imagetests.Verdict.UNTESTABLE, ran.exit_status, ran.seconds,
                                      ran.output, reason=f"not testable on the stand-in: {why}")
    return imagetests.CheckResult(check.name, stage, imagetests.verdict(ran.exit_status), ran.exit_status,
                                  ran.seconds, ran.output)


def _checks(root: Path) -> dict[str, list[imagetests.Check]]:
    """The variant's checks of the build instance by stage ("build", "hygiene"), as the sandbox build
    listed them (`CHECKS_LIST`)."""
    out: dict[str, list[imagetests.Check]] = {}
    for c in json.loads((root / CHECKS_LIST).read_text(encoding="utf-8")):
        out.setdefault(c.get("stage", "build"), []).append(imagetests.Check(c["name"], c["command"], float(c["timeout"])))
    return out


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
