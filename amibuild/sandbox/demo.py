"""The sandbox demo: the whole pipeline against the local emulator, one real command at a time.

It starts the emulator, then runs the same `invoke` commands a user would, in a scratch folder,
with the emulator's environment (dummy credentials, endpoint override, tripwire proxy), printing
each command before its output. What it prints is what those commands printed; nothing is faked.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Sequence, TextIO

from amibuild.errors import AmibuildError

ROOT = Path(__file__).resolve().parent.parent.parent  # the repository (for now: the demo runs its tasks.py)


# The demo's own pipeline file: AL2023 on a Kubernetes version in EKS standard support.
DEMO_PIPELINE = """\
pipeline {
  name    = "demo"
  regions = ["us-west-2"]
}

variant "ceph" {
  os                 = "al2023"
  kubernetes_version = "1.35"
  extra_packages     = ["ceph-common"]
}
"""


def steps(example: Path, network: dict) -> list[tuple[str, list[str]]]:
    build = ["build-ami"]
    channel = ["--variant", "ceph"]
    return [
        ("Render and validate two variants of the example pipeline file (works without AWS access too)",
         ["validate", "--pipeline", str(example), "--variant", "ceph", "--variant", "ceph-arm"]),
        ("Build an AMI with ceph-common on the EKS-optimized AL2023 image and publish it to the `recommended` "
         "channel: render, validate, packer build, SSM", build),
        ("Run it again: nothing changed, so nothing is built and no parameter version is written", build),
        ("Promote it to `stable`", ["promote", *channel, "--from", "recommended", "--to", "stable"]),
        ("Deploy a self-managed AL2023 node group stack in the sandbox's EKS cluster, following `stable` "
         "(the NodeConfig comes from DescribeCluster)",
         ["nodegroup-deploy", "--stack", "ng-demo", "--cluster", network["cluster"], *channel,
          "--channel", "stable", "--vpc-id", network["vpc"], "--subnet", ",".join(network["subnets"]),
          "--control-plane-sg", network["control_plane_sg"]]),
        ("A new image: add htop, build and publish to `recommended`", [*build, "--extra-pkg", "htop"]),
        ("Promote the new image to `stable`", ["promote", *channel, "--from", "recommended", "--to", "stable"]),
        ("Roll the node group to `stable` (a dry run first)",
         ["rollout", "--stack", "ng-demo", *channel, "--channel", "stable", "--dry-run"]),
        ("Roll the node group to `stable`: change set, update, events, verification",
         ["rollout", "--stack", "ng-demo", *channel, "--channel", "stable"]),
        ("Roll again: already current, nothing changes",
         ["rollout", "--stack", "ng-demo", *channel, "--channel", "stable"]),
        ("The channels: every variant x channel x region", ["channels"]),
        ("The history of the stable channel", ["history", *channel, "--channel", "stable"]),
        ("The aws-auth entry that lets these nodes join (and the access entry way)", ["aws-auth", "--stack", "ng-demo"]),
        ("The run records", ["runs"]),
    ]


def run_demo(out: TextIO = sys.stdout, *, keep: bool = False,
             runner: Callable[[Sequence[str], dict, Path], int] | None = None) -> None:
    from amibuild.sandbox import Sandbox

    runner = runner or _invoke
    workdir = Path(tempfile.mkdtemp(prefix="amibuild-demo-"))
    (workdir / "amibuild.hcl").write_text(DEMO_PIPELINE)
    with Sandbox() as sandbox:
        env = {**os.environ, **sandbox.env(), "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
        env.pop("AWS_PROFILE", None)
        print(f"# amibuild sandbox demo: emulator at {sandbox.endpoint}, working in {workdir}", file=out, flush=True)
        network = sandbox.cluster()
        for number, (title, args) in enumerate(steps(ROOT / "amibuild.hcl", network), start=1):
            print(f"\n## {number}. {title}\n$ invoke {shlex.join(args)}", file=out, flush=True)
            code = runner(args, env, workdir)
            if code != 0:
                raise AmibuildError(f"demo step {number} (`invoke {shlex.join(args)}`) exited {code}; see above")
    print(f"\n# demo finished; files are in {workdir}", file=out, flush=True)


def _invoke(args: Sequence[str], env: dict, cwd: Path) -> int:
    return subprocess.run([sys.executable, "-m", "invoke", "-r", str(ROOT), *args], env=env, cwd=cwd).returncode
