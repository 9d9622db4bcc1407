"""The clean-up and its hygiene checks: each step's own seconds, run as root in the rehearsal copy.

The two steps every build now ends with (issue 27): amibuild's clean-up of the build instance's
traces (render/provision/cleanup.sh) and the checks of it (the hygiene checks, the build's last
step). Measured as each step's own time in a rehearsal of an eks-optimized variant with ceph-common
(the copy of this machine, as root, the stand-ins answering for yum, systemctl and service), 5 runs
after a warm-up, medians; the slowest hygiene check from the sandbox stand-in's stage 1, where each
check is its own step with its own time. Neither step makes an AWS call: the figures are the whole
of what they add. Elsewhere than root it measures nothing.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from amibuild import render
from amibuild.sandbox import image_standin as standin
from amibuild.pipeline import Overrides, imagetests, load
from amibuild.rehearse import rehearse
from amibuild.render import SourceAmi, Target as RenderTarget
from amibuild.sandbox.transform import SandboxTarget, sandboxed
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


def run() -> Report:
    if os.geteuid() != 0:
        return Report(rows=[], notes=["not measured: the rehearsal copy needs root (run this as root)"])
    cleanup: list[float] = []
    hygiene: list[float] = []
    checks: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="amibuild-bench-cleanup-") as tmp:
        Path(tmp, "amibuild.hcl").write_text(PIPELINE, encoding="utf-8")
        pipeline = load(Path(tmp, "amibuild.hcl"), Overrides())
        build = render.render_build(pipeline, pipeline.variants[0], uses_plugins=True, target=RenderTarget(),
                                    sources={r: SourceAmi("lookup") for r in pipeline.regions})
        rendered = render.finish(build)
        # the sandbox build of the same variant: its stand-in runs each hygiene check as its own step
        store = Path(tmp, "store")
        sandbox = render.finish(sandboxed(build, where=SandboxTarget("http://127.0.0.1:9", sys.executable, str(store))))
        root = render.write(sandbox, Path(tmp, "sandbox"), sandbox.record(pipeline, "1.6.6"))
        prior = os.environ.get(standin.STORE_ENV)
        os.environ[standin.STORE_ENV] = str(store)  # stage 1 keeps the image's stand-in there
        try:
            _rounds(rendered, root, cleanup, hygiene, checks)
        finally:
            if prior is None:
                os.environ.pop(standin.STORE_ENV, None)
            else:
                os.environ[standin.STORE_ENV] = prior
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
        setup=f"{RUNS} rehearsals after 1 warm-up, medians; each step's own time as the rehearsal's runner records it; "
              "the checks' own times from as many stand-in stage-1 runs",
        notes=["AWS calls added: none (both steps run on the build instance, inside the Packer build)",
               "on an instance the clean-up also stops and starts auditd and rotates the journal, which the copy "
               "cannot: count a few seconds more there"],
    )


def _rounds(rendered: render.Rendered, root: Path, cleanup: list[float], hygiene: list[float],
            checks: dict[str, list[float]]) -> None:
    for index in range(RUNS + 1):
        report = rehearse(rendered)
        steps = {v.step.name: v for v in report.steps}
        if not report.ok or "cleanup.sh" not in steps or "amibuild-hygiene.sh" not in steps:
            raise BenchmarkError(f"the rehearsal did not pass: {[(v.step.name, v.status) for v in report.steps]}")
        status, lines, record = standin.stage1(root)
        if status != 0:
            raise BenchmarkError("the stand-in's stage 1 did not pass: " + "; ".join(lines[-3:]))
        if index:  # the first run warms up
            cleanup.append(steps["cleanup.sh"].seconds)
            hygiene.append(steps["amibuild-hygiene.sh"].seconds)
            for check in record["checks"]:
                if check["stage"] == imagetests.HYGIENE:
                    checks.setdefault(check["name"], []).append(float(check["seconds"]))
