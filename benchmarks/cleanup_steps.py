"""The clean-up and its hygiene checks: each step's own seconds, run as root in the rehearsal copy.

The two steps every build now ends with (issue 27): amibuild's clean-up of the build instance's
traces (render/provision/cleanup.sh) and the checks of it (the hygiene checks, the build's last
step). Measured as each step's own time in a rehearsal of an eks-optimized variant with ceph-common
(the copy of this machine, as root, the stand-ins answering for yum, systemctl and service), 5 runs
after a warm-up, medians; the slowest hygiene check from the checks' own timings. Neither step makes
an AWS call: the figures are the whole of what they add. Elsewhere than root it measures nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from amibuild import render
from amibuild.pipeline import Overrides, load
from amibuild.rehearse import rehearse
from amibuild.render import SourceAmi, Target as RenderTarget
from benchmarks.common import BenchmarkError, Report, Row, Target, Timing, ms

NAME = "cleanup_steps"
DESCRIPTION = "the clean-up and the hygiene checks: each step's own seconds, as root, in the rehearsal copy"

RUNS = 5
TARGET_S = 2.0  # soft: a second or two of a build that takes 15-40 minutes

PIPELINE = """\
pipeline {
  name    = "bench"
  regions = ["us-west-2"]
}

variant "ceph" {
  os                 = "al2"
  kubernetes_version = "1.30"
  extra_packages     = ["ceph-common"]
}
"""
_CHECK = re.compile(r"amibuild-check: (?P<name>[a-z0-9_-]+) exit=[0-9]+ seconds=(?P<s>[0-9.]+)")


def run() -> Report:
    if os.geteuid() != 0:
        return Report(rows=[], notes=["not measured: the rehearsal copy needs root (run this as root)"])
    cleanup: list[float] = []
    hygiene: list[float] = []
    checks: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="amibuild-bench-cleanup-") as tmp:
        Path(tmp, "amibuild.hcl").write_text(PIPELINE, encoding="utf-8")
        pipeline = load(Path(tmp, "amibuild.hcl"), Overrides())
        rendered = render.render_variant(pipeline, pipeline.variants[0], uses_plugins=True, target=RenderTarget(),
                                         sources={r: SourceAmi("lookup") for r in pipeline.regions})
        for index in range(RUNS + 1):
            report = rehearse(rendered, keep=True)
            try:
                steps = {v.step.name: v for v in report.steps}
                if not report.ok or "cleanup.sh" not in steps or "amibuild-hygiene.sh" not in steps:
                    raise BenchmarkError(f"the rehearsal did not pass: {[(v.step.name, v.status) for v in report.steps]}")
                out = Path(report.kept, "io/steps", f"{steps['amibuild-hygiene.sh'].step.number:03d}", "stdout")
                if index:  # the first run warms up
                    cleanup.append(steps["cleanup.sh"].seconds)
                    hygiene.append(steps["amibuild-hygiene.sh"].seconds)
                    for m in _CHECK.finditer(out.read_text(encoding="utf-8")):
                        checks.setdefault(m.group("name"), []).append(float(m.group("s")))
            finally:
                shutil.rmtree(report.kept, ignore_errors=True)
    first, second = Timing(tuple(cleanup)), Timing(tuple(hygiene))
    slowest = max(checks, key=lambda n: Timing(tuple(checks[n])).median)
    slow = Timing(tuple(checks[slowest]))
    return Report(
        rows=[
            Row("clean-up step (cleanup.sh)", ms(first.median), "ms", Target(ms(TARGET_S), soft=True), first.spread()),
            Row(f"hygiene checks step ({len(checks)} checks)", ms(second.median), "ms", Target(ms(TARGET_S), soft=True),
                second.spread()),
            Row(f"  slowest check: {slowest}", ms(slow.median), "ms", None, slow.spread()),
        ],
        setup=f"{RUNS} rehearsals after 1 warm-up, medians; each step's own time as the rehearsal's runner records it",
        notes=["AWS calls added: none (both steps run on the build instance, inside the Packer build)",
               "on an instance the clean-up also stops and starts auditd and rotates the journal, which the copy "
               "cannot: count a few seconds more there"],
    )
