"""Rehearse: run a rendered variant's provisioning chain here, in seconds, before any instance exists.

    steps.py              rendered HCL -> the steps Packer would run on the instance (pure)
    check_steps.py        the image's checks step as the rehearsal runs it (what the copy cannot answer said)
    expr.py               the HCL2 expressions those steps use, evaluated as Packer would (pure)
    overlay.py            runs the steps in a throwaway copy of this machine (overlay over /, no network)
    rehearsal_report.py   per-step verdicts, first failure, what the chain would install/enable/write (pure)
    standins/             enter.sh, runner.sh and the stand-ins for yum, rpm, systemctl, curl, aws, sudo, ...

`rehearse` takes a variant rendered for a REAL build (a transformed render gives its `real` one)
and returns a `Report`. Bad input (a provisioner that cannot be evaluated, a
script that does not exist) is refused before anything runs; so is a machine where the copy
cannot be made (not root).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from amibuild.errors import RehearsalError
from amibuild.render import PROVISION_SCRIPTS, Rendered, write_files
from amibuild.rehearse import check_steps as checks
from amibuild.rehearse.rehearsal_report import Finding, Report, build_report
from amibuild.rehearse.steps import Step, StepError, parse_steps
from amibuild.rehearse import overlay

__all__ = ["rehearse", "prepare", "run", "plan", "shellcheck", "Report", "Step", "StepError"]


def plan(rendered: Rendered, root: str) -> list[Step]:
    """The steps of a rendered variant, with ``path.root`` at ``root``; every script checked to exist."""
    steps = parse_steps(rendered.files, root, packer_env=rendered.secret_env)
    for step in steps:
        if step.kind == "shell" and step.script and not Path(step.script).is_file():
            raise StepError(f"step {step.number} ({step.name}): script {step.script} does not exist; "
                            "fix the path in the pipeline file or the upstream checkout")
        for upload in step.uploads:
            if upload.how != "download" and not Path(upload.source).exists():
                raise StepError(f"step {step.number} ({step.name}): {upload.source} does not exist; "
                                "Packer would refuse to upload it")
    return steps


@dataclass
class Prepared:
    """A variant ready to rehearse: its files written to a temp folder (``path.root``), its steps."""

    rendered: Rendered
    root: Path
    steps: list[Step]

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def prepare(rendered: Rendered) -> Prepared:
    """Write the variant's files and work out its steps; bad input raises StepError, leaving nothing."""
    root = Path(tempfile.mkdtemp(prefix="amibuild-rehearse-root-"))
    try:
        write_files(rendered, root)  # path.root: the rendered files, as `amibuild render` writes them
        return Prepared(rendered, root, plan(rendered, str(root)))
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def run(prepared: Prepared, *, keep: bool = False, refuse: Iterable[str] = (), timeout: float = 600.0) -> Report:
    """Rehearse a prepared variant in a throwaway copy of this machine; its temp folder is removed."""

    started = time.monotonic()
    try:
        steps, root, variant = prepared.steps, str(prepared.root), prepared.rendered.variant
        findings = shellcheck(steps, root)  # the shipped checks script among them
        overlay.check_privileges()
        raw = overlay.run_steps(checks.swap(steps, variant, root), arch=variant.arch, os_name=variant.os, refuse=refuse, keep=keep,
                                timeout=timeout)
    finally:
        prepared.close()
    names = {s.remote_path: _display(s.script, root) for s in steps if s.kind == "shell" and s.script}
    if raw.timed_out:
        raw.notes.append(f"stopped after {timeout:.0f}s")
    if shutil.which("shellcheck") is None:
        raw.notes.append("shellcheck is not installed: the chain's scripts were not checked")
    return build_report(variant.name, raw, findings, time.monotonic() - started, names)


def rehearse(rendered: Rendered, *, keep: bool = False, refuse: Iterable[str] = (), timeout: float = 600.0) -> Report:
    """Run the variant's chain in a throwaway copy of this machine and report what it did."""
    return run(prepare(rendered), keep=keep, refuse=refuse, timeout=timeout)


def _display(script: str, root: str) -> str:
    """A script's name for the report: relative to the rendered folder when it is one of ours."""
    try:
        return str(Path(script).relative_to(root))
    except ValueError:
        return script


_OURS = frozenset(p.name for p in PROVISION_SCRIPTS.glob("*.sh"))
_SHELLCHECK_LINE = re.compile(r"^(?P<file>.+?):(?P<line>[0-9]+):[0-9]+: (?P<severity>[A-Za-z]+): "
                              r"(?P<message>.*?)(?: \[(?P<code>SC[0-9]+)\])?\Z")


def origin(script: str, root: str) -> str:
    shown = _display(script, root)
    if shown.startswith("scripts/user-"):
        return "user"
    if shown.startswith("scripts/") and Path(shown).name in _OURS:
        return "amibuild"
    return "upstream"


def shellcheck(steps: Iterable[Step], root: str) -> list[Finding]:
    """shellcheck over every shell script of the chain (none when shellcheck is missing)."""
    if shutil.which("shellcheck") is None:
        return []
    scripts = list(dict.fromkeys(s.script for s in steps if s.kind == "shell" and s.script))
    if not scripts:
        return []
    try:
        done = subprocess.run(["shellcheck", "--format=gcc", "--external-sources", *scripts],
                              capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RehearsalError(f"shellcheck could not run: {exc}") from exc
    matches = (_SHELLCHECK_LINE.match(line) for line in done.stdout.splitlines())
    return [Finding(origin(m.group("file"), root), _display(m.group("file"), root), int(m.group("line")),
                    m.group("code") or "", m.group("severity"), m.group("message")) for m in matches if m]
