"""`invoke rehearse` end to end for the eks-optimized base with ceph-common, a repository and a proxy.

The target of issue 12: the whole chain — render, the rehearsal copy (overlay over /, private mount
and network namespaces), the four provisioning steps with their stand-ins, shellcheck, the report —
in under 10 s on this machine. Measured as the wall time of the real command (`python -m invoke
rehearse` in a subprocess, so interpreter start and imports count), 5 runs after one warm-up, with
the rehearsal's own figure (report `seconds`: copy made, steps run, copy removed) beside it.
Needs root, as `invoke rehearse` does; elsewhere it reports that and measures nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import BenchmarkError, Report, Row, Target, Timing, interleave, ms

NAME = "rehearse_ceph"
DESCRIPTION = "invoke rehearse of eks-optimized + ceph-common + a repository + a proxy, end to end"

ROOT = Path(__file__).resolve().parent.parent
RUNS = 5
TARGET_S = 10.0

PIPELINE = """\
pipeline {
  name    = "bench"
  regions = ["us-west-2"]
}

variant "ceph" {
  extra_packages = ["ceph-common"]
  repo "ceph" {
    baseurl = "https://download.ceph.com/rpm-octopus/el7/$basearch"
    gpgkey  = "https://download.ceph.com/keys/release.asc"
  }
  proxy {
    http  = "http://proxy.example.com:3128"
    https = "http://proxy.example.com:3128"
  }
}
"""


def run() -> Report:
    if os.geteuid() != 0:
        return Report(rows=[], notes=["not measured: `invoke rehearse` needs root (run this as root)"])
    inner: list[float] = []
    with tempfile.TemporaryDirectory(prefix="amibuild-bench-rehearse-") as tmp:
        Path(tmp, "amibuild.hcl").write_text(PIPELINE, encoding="utf-8")

        def rehearse() -> None:
            proc = subprocess.run([sys.executable, "-m", "invoke", "-r", str(ROOT), "rehearse", "--json"], cwd=tmp,
                                  capture_output=True, text=True, stdin=subprocess.DEVNULL)
            if proc.returncode != 0:
                raise BenchmarkError(f"invoke rehearse exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
            (report,) = json.loads(proc.stdout)
            if not report["ok"] or {"name": "ceph-common", "version": None} not in report["packages"]:
                raise BenchmarkError(f"the rehearsal did not pass: {report}")
            inner.append(report["seconds"])

        timings = interleave({"rehearse": rehearse}, runs=RUNS, warmup=1)
    wall: Timing = timings["rehearse"]
    own = Timing(tuple(inner[1:]))  # the warm-up's figure left out, as its wall time is
    return Report(
        rows=[
            Row("invoke rehearse, end to end", ms(wall.median), "ms", Target(ms(TARGET_S)), wall.spread()),
            Row("  of which the rehearsal (copy, steps, report)", ms(own.median), "ms", None, own.spread()),
        ],
        setup=f"{RUNS} runs after 1 warm-up, medians; a subprocess each (interpreter start and imports count)",
        notes=["steps: configure-proxy.sh, add-repos.sh, install-packages.sh, the yum clean-up"],
    )
