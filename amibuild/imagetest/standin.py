"""The sandbox's stand-in of an image: a variant's real provisioning chain, rehearsed, then a script.

The emulator has no instance to run anything on. What stands in for the image is the variant's
chain as a real build runs it (the sandbox build's ``instance/`` files, `STANDIN_DIR`, written by
`amibuild.sandbox.transform`),
rehearsed in a throwaway copy of this machine with the rehearsal's overlay and stand-ins
(`amibuild.rehearse.overlay`), followed by the script to test: in stage 1 the chain already ends
with the checks step; for SSM Run Command the command's script is added as a last step, run as
root. A command the copy cannot answer (127 or a stand-in gap) is "not testable here", never a
pass (`amibuild.pipeline.imagetests.verdict`).

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
from typing import Any, Iterable

from amibuild.errors import RehearsalUnavailable
from amibuild.imagetest.store import STANDIN_DIR as STANDIN_DIR, STORE_ENV as STORE_ENV, store as store  # re-exported
from amibuild.pipeline import imagetests
from amibuild.render import CHECKS_SCRIPT, HYGIENE_SCRIPT, RECORD_FILE
from amibuild.rehearse.steps import Step, parse_steps
from amibuild.rehearse import overlay

STAGE1_RECORD = "checks.json"
# the image's stand-in in a sandbox build's folder: the real build's HCL files, whose chain it rehearses
COMMAND_PATH = "/tmp/amibuild-ssm-command.sh"
# Between the build's chain and an SSM command the stand-in boots: what a first boot does that the
# checks look at (systemd writes a machine-id of the instance's own where the clean-up emptied it).
FIRST_BOOT_PATH = "/tmp/amibuild-first-boot.sh"
FIRST_BOOT = """#!/usr/bin/env bash
if [ ! -s /etc/machine-id ]; then tr -d '-' </proc/sys/kernel/random/uuid >/etc/machine-id; fi
"""


@dataclass
class StandinRun:
    """What running a script on an image's stand-in gave."""

    chain_ok: bool  # every step of the chain before the script succeeded (or was not rehearsable)
    output: str  # the script's stdout and stderr
    exit_status: int | None
    failed_step: str = ""
    notes: list[str] = field(default_factory=list)
    untestable: str = ""  # the chain stopped at a step the stand-ins cannot answer: no stand-in of the image
    hygiene: str = ""  # stage 1: the output of the checks of the clean-up, the chain's last step


def chain_steps(root: Path) -> list[Step]:
    """The real chain of the variant rendered into ``root`` (its ``instance/`` files)."""
    files = {p.name: p.read_text(encoding="utf-8") for p in sorted((root / STANDIN_DIR).glob("*.hcl"))}
    if not files:
        raise RehearsalUnavailable(f"{root / STANDIN_DIR}: no stand-in of the image here (render it for the sandbox)")
    # run by Packer's local step: the sensitive variables are in this process's PKR_VAR_* environment
    return parse_steps(files, str(root), packer_env=os.environ)


def settings(root: Path) -> dict[str, Any]:
    return json.loads((root / RECORD_FILE).read_text(encoding="utf-8"))


def run(root: Path, script: str | None = None, *, refuse: Iterable[str] = (), timeout: float = 600.0) -> StandinRun:
    """Rehearse the chain in ``root``; then run ``script`` as root (None: the chain's own last step, the checks)."""
    overlay.check_privileges()
    record = settings(root)
    inputs = record["inputs"]
    steps = chain_steps(root)
    holder = None
    if script is not None:
        holder = Path(tempfile.mkdtemp(prefix="amibuild-ssm-"))
        (holder / "command.sh").write_text(script, encoding="utf-8")
        (holder / "first-boot.sh").write_text(FIRST_BOOT, encoding="utf-8")
        steps.append(Step(number=len(steps) + 1, provisioner=-1, kind="shell", name="first boot (stand-in)",
                          script=str(holder / "first-boot.sh"), command=f"sudo -S bash '{FIRST_BOOT_PATH}'",
                          remote_path=FIRST_BOOT_PATH))
        steps.append(Step(number=len(steps) + 1, provisioner=-1, kind="shell", name="SSM command (AWS-RunShellScript)",
                          script=str(holder / "command.sh"), command=f"sudo -S bash '{COMMAND_PATH}'",
                          remote_path=COMMAND_PATH))
    try:
        raw = overlay.run_steps(steps, arch=inputs["arch"], os_name=inputs["os"], refuse=refuse, timeout=timeout)
    finally:
        if holder is not None:
            shutil.rmtree(holder, ignore_errors=True)
    target = raw.results[-1] if script is not None else next(
        (r for r in raw.results if r.step.script.endswith(CHECKS_SCRIPT)), None)
    notes = [f"stopped after {timeout:.0f}s"] if raw.timed_out else []
    gaps = {step for step, _ in raw.gaps}
    for result in raw.results:
        if result is target:
            break
        if result.ran and result.exit_status not in result.step.valid_exit_codes:
            if f"{result.step.number:03d}" in gaps or result.exit_status == imagetests.STANDIN_GAP:
                # the copy stops here as Packer would: what follows, the checks included, never ran
                return StandinRun(False, "", None, notes=notes, untestable=(
                    f"step {result.step.number} ({result.step.name}) cannot be rehearsed, so the image has no "
                    "stand-in here"))
            tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or [""]
            return StandinRun(False, "", None, f"step {result.step.number} ({result.step.name}), exit "
                              f"{result.exit_status}: {tail[0]}", notes)
    if target is None or not target.ran:
        return StandinRun(False, "", None, "the checks step did not run", notes)
    hygiene = ""
    if script is None:  # stage 1: the clean-up after the checks, then its own checks, last
        for result in raw.results[raw.results.index(target) + 1:]:
            if result.step.script.endswith(HYGIENE_SCRIPT):
                hygiene = result.stdout + result.stderr
                break
            if result.ran and result.exit_status not in result.step.valid_exit_codes:
                tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or [""]
                return StandinRun(False, "", None, f"step {result.step.number} ({result.step.name}), exit "
                                  f"{result.exit_status}: {tail[0]}", notes)
    return StandinRun(True, target.stdout + target.stderr, target.exit_status, notes=notes, hygiene=hygiene)


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
    names = _check_names(root)
    if os.environ.get("AMIBUILD_RUN_CHECKS", "true") == "false":
        keep(root, record["fingerprint"])
        return 0, [f"amibuild: stage 1 checks turned off for variant {record['variant']} (test_on_build = false)"], {
            "stage": "build", "result": "off", "checks": []}
    try:
        done = run(root, refuse=refuse)
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
    results = imagetests.parse_results(done.output, names, stage="build", standin=True)
    hygiene_names = _check_names(root, HYGIENE_SCRIPT)
    if hygiene_names:  # the checks of the clean-up: the chain's last step, after the stage-1 checks
        results += imagetests.parse_results(done.hygiene, hygiene_names, stage=imagetests.HYGIENE, standin=True)
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


def _check_names(root: Path, script: str = CHECKS_SCRIPT) -> list[str]:
    import re

    if not (root / script).is_file():
        return []
    text = (root / script).read_text(encoding="utf-8")
    return re.findall(r"^run_check ([a-z0-9_-]+) ", text, flags=re.M)


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
