"""The sandbox demo: the whole pipeline against the local emulator, one real command at a time.

It starts the emulator, copies the example pipeline file amibuild ships into a scratch folder,
and there runs the same `amibuild` commands a user would (as `python -m amibuild`, so it works
from an installed package as well as from a checkout), with the emulator's environment (dummy
credentials, endpoint override, tripwire proxy), printing each command before its output. What
it prints is what those commands printed; nothing is faked.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Sequence, TextIO

from amibuild.pipeline.shipped import EXAMPLE, pipeline_text
from amibuild.errors import AmibuildError

VARIANT = "ceph"  # the example's variant the channel steps follow
SEED_FLEET: list[str] = []  # the step that seeds a fleet in the sandbox (`amibuild.sandbox.fleet_seed.demo_seed`)



def steps(network: dict) -> list[tuple[str, list[str]]]:
    build = ["build-ami", "--extra-pkg", "ceph-common"]
    follow = ["--variant", VARIANT]
    return [
        ("Render and validate every variant of the example pipeline file (works without AWS access too)",
         ["validate"]),
        ("Build the example's AMIs (AL2023 x86_64 and arm64, and one AL2, all with ceph-common) on the "
         "EKS-optimized images, "
         "copy them to eu-west-1 and publish each to its `recommended` channel: render, validate, packer build, SSM",
         build),
        ("Run it again: nothing changed, so nothing is built and no parameter version is written", build),
        ("Promote the `ceph` image to `stable`", ["promote", *follow, "--from", "recommended", "--to", "stable"]),
        ("Verify what `stable` holds: each region's image, its provenance signed with the sandbox's KMS key "
         "(`alias/amibuild`), from this pipeline and today's render", ["verify", *follow, "--channel", "stable"]),
        ("Deploy a self-managed AL2023 node group stack in the sandbox's EKS cluster, following `stable` "
         "(the NodeConfig comes from DescribeCluster)",
         ["nodegroup-deploy", "--stack", "ng-demo", "--cluster", network["cluster"], *follow, "--channel", "stable",
          "--vpc-id", network["vpc"], "--subnet", ",".join(network["subnets"]),
          "--control-plane-sg", network["control_plane_sg"]]),
        ("A new image: add htop to `ceph`, build and publish to `recommended`",
         [*build, *follow, "--extra-pkg", "htop"]),
        ("Promote the new image to `stable`", ["promote", *follow, "--from", "recommended", "--to", "stable"]),
        ("A fleet around it (seeded in the sandbox, not an amibuild command): a second stack on `recommended`, "
         "a managed node group and two Karpenter nodes on the first `stable` image, a `ceph-arm` instance",
         SEED_FLEET),
        ("The fleet: every channel, every consumer, how far behind, and what rolls it", ["fleet"]),
        ("Roll the node group to `stable` (a dry run first)",
         ["rollout", "--stack", "ng-demo", *follow, "--channel", "stable", "--dry-run"]),
        ("Roll the node group to `stable`: change set, update, events, verification",
         ["rollout", "--stack", "ng-demo", *follow, "--channel", "stable"]),
        ("Roll again: already current, nothing changes",
         ["rollout", "--stack", "ng-demo", *follow, "--channel", "stable"]),
        ("The fleet again: the stack is current; the managed node group and the Karpenter nodes are still "
         "behind (Karpenter replaces its nodes on drift once their EC2NodeClass follows the channel: "
         "`amibuild karpenter`)", ["fleet"]),
        ("Roll the managed node group to `stable` too: a new launch template version, UpdateNodegroupVersion, "
         "verified", ["rollout", "--nodegroup", f"{network['cluster']}/mng-demo", *follow, "--channel", "stable"]),
        ("The channels: every variant x channel x region", ["channels"]),
        ("The history of the stable channel", ["history", *follow, "--channel", "stable"]),
        ("The aws-auth entry that lets these nodes join", ["aws-auth", "--stack", "ng-demo"]),
        ("Or, the current way, the cluster's EKS access entry for their role",
         ["aws-auth", "--stack", "ng-demo", "--access-entry", "--cluster", network["cluster"]]),
        ("The run records", ["runs"]),
    ]


def run_demo(out: TextIO = sys.stdout, *,
             runner: Callable[[Sequence[str], dict, Path], int] | None = None) -> None:
    # deferred: the emulator's module only when the demo runs (`amibuild --list` stays light)
    from amibuild.sandbox import Sandbox
    from amibuild.sandbox.moto_check import require_moto

    require_moto()  # before anything is made: without the extra the demo is bad input, not a failure
    runner = runner or _amibuild
    workdir = Path(tempfile.mkdtemp(prefix="amibuild-demo-"))
    (workdir / "amibuild.hcl").write_text(pipeline_text(EXAMPLE), encoding="utf-8")
    with Sandbox() as sandbox:
        env = {**os.environ, **sandbox.env(), "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
        env.pop("AWS_PROFILE", None)
        # `python -m amibuild` must find this very package, installed or run from a checkout
        package_root = str(Path(__file__).resolve().parent.parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        print(f"# amibuild sandbox demo: emulator at {sandbox.endpoint}, working in {workdir} "
              "(amibuild.hcl there is the example amibuild ships)", file=out, flush=True)
        network = sandbox.cluster()
        for number, (title, args) in enumerate(steps(network), start=1):
            if args is SEED_FLEET:
                print(f"\n## {number}. {title}", file=out, flush=True)
                _seed_fleet(sandbox, workdir, out)
                continue
            print(f"\n## {number}. {title}\n$ amibuild {shlex.join(args)}", file=out, flush=True)
            code = runner(args, env, workdir)
            if code != 0:
                raise AmibuildError(f"demo step {number} (`amibuild {shlex.join(args)}`) exited {code}; see above")
    print(f"\n# demo finished; files are in {workdir}", file=out, flush=True)


def _seed_fleet(sandbox, workdir: Path, out: TextIO) -> None:
    # deferred: the pipeline model and the fleet seeder only when the demo reaches this step
    from amibuild.pipeline import load
    from amibuild.pipeline.naming import parameter_name
    from amibuild.sandbox.fleet_seed import demo_seed

    pipeline = load(workdir / "amibuild.hcl")
    variants = {v.name: v for v in pipeline.variants}
    ceph, other = variants[VARIANT], variants["ceph-arm"]
    seeded = demo_seed(sandbox.endpoint, pipeline.build_region,
                       stable=parameter_name(pipeline, ceph, "stable"),
                       recommended=parameter_name(pipeline, ceph, "recommended"),
                       other=parameter_name(pipeline, other, "recommended"))
    print(f"seeded stacks {', '.join(seeded.stacks)}, managed node group {', '.join(seeded.nodegroups)}, "
          f"instances {', '.join(seeded.instances)}", file=out, flush=True)


def _amibuild(args: Sequence[str], env: dict, cwd: Path) -> int:
    return subprocess.run([sys.executable, "-m", "amibuild", *args], env=env, cwd=cwd).returncode
