"""The image's checks steps as a rehearsal runs them: each check on its own, what the copy cannot answer said.

The script shipped to the instance (`amibuild.pipeline.imagetests.checks_script`) knows nothing of
rehearsals: there, exit 127 is a failure like any other. The copy of this machine is no EKS image,
so the rehearsal runs its own version of each checks step (stage 1's, and the clean-up's, last):
every check (`check_command`) in turn, exit 0 a pass, 127 (not on this machine) or 97 (a stand-in
that cannot answer) "not answerable here", anything else a failure, which fails the step as it
would fail the build.
"""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path
from typing import Any, Sequence

from amibuild.pipeline import imagetests
from amibuild.render import CHECKS_SCRIPT, HYGIENE_SCRIPT
from amibuild.rehearse.steps import Step

STANDIN_GAP = 97  # standins/standin.sh's "cannot answer"
NOT_FOUND = 127
SCRIPT = ".amibuild-rehearse-checks.sh"  # beside the rendered files in the rehearsal's path.root
# each checks step of the chain (by its script): the stage of its checks and the rehearsal's version
STEPS = {CHECKS_SCRIPT: ("build", SCRIPT), HYGIENE_SCRIPT: (imagetests.HYGIENE, ".amibuild-rehearse-hygiene.sh")}


def script(checks: Sequence[imagetests.Check]) -> str:
    """The rehearsal's checks step: each check's own command run with sh, its exit status read."""
    lines = ["#!/usr/bin/env bash", "# amibuild rehearse: the image's checks, one by one, in the copy", "set -u +e",
             "failed=0", 'work=$(mktemp -d /tmp/amibuild-checks.XXXXXX) || exit 1',  # the shipped script's own folder name
             "trap 'rm -rf \"$work\"' EXIT"]
    for index, check in enumerate(checks, start=1):
        command = imagetests.check_command(check)
        delimiter = f"AMIBUILD_REHEARSE_CHECK_{index}"
        while delimiter in command:
            delimiter += "_"
        name = shlex.quote(check.name)
        lines += [f"cat >\"$work/{index}\" <<'{delimiter}'", command, delimiter,
                  f"sh \"$work/{index}\" 2>&1; status=$?",
                  "case $status in",
                  f"    0) printf 'check %s: passed\\n' {name} ;;",
                  f"    {NOT_FOUND}|{STANDIN_GAP}) printf 'check %s: not answerable here (exit %s)\\n' {name} \"$status\" ;;",
                  f"    *) printf 'check %s: failed (exit %s)\\n' {name} \"$status\"; failed=1 ;;",
                  "esac"]
    lines += ['exit "$failed"', ""]
    return "\n".join(lines)


def swap(steps: Sequence[Step], variant: Any, root: str) -> list[Step]:
    """``steps`` with each checks step's script replaced by the rehearsal's version (written into ``root``)."""
    out = []
    for step in steps:
        ours = next((v for k, v in STEPS.items() if step.kind == "shell" and step.script.endswith(k)), None)
        if ours is not None:
            stage, name = ours
            path = Path(root) / name
            path.write_text(script(imagetests.check_set(variant, stage=stage).checks), encoding="utf-8")
            path.chmod(0o755)
            step = dataclasses.replace(step, script=str(path))
        out.append(step)
    return out
