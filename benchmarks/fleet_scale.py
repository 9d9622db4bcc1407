"""`amibuild fleet` over a sandbox account of 200 instances, 20 stacks, 10 launch templates and 5
managed node groups in 2 regions: wall time, and AWS calls that grow with pages, not instances.

Setup (untimed): a local emulator (its own `Sandbox`); a pipeline building in us-west-2 and copying
to us-east-1; in each region three tagged images, `recommended` holding all three in turn and
`stable` the first two (so consumers are current, one and two behind); then `amibuild.sandbox.fleet_seed`
seeds per region 10 stacks following the two channels, 5 launch templates nothing launches from,
managed node groups (3 in one region, 2 in the other) and 100 instances of the three images, half
of them tagged as Karpenter's.

Timed: `amibuild fleet --json` as a subprocess (what a user waits for, interpreter start included)
and the same in process (`jobs.fleet_jobs.fleet_view` with a fresh gateway), interleaved, after one
warm-up round; medians. Counted: the AWS requests of one in-process run, by operation, from the
gateway's own counter (`Aws.calls`); then 200 more instances are added and the count is taken
again: it must not move (DescribeInstances is filtered by the images' ids, in pages of 1,000).

Target (issue 21): ≤ 3 s for the command, and the same number of calls at 400 instances as at 200.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository root belongs on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import BenchmarkError, Report, Row, Target, Timing, clock, ms  # noqa: E402

NAME = "fleet_scale"
DESCRIPTION = "amibuild fleet over 200 instances, 20 stacks, 10 templates, 5 node groups in 2 regions"

RUNS = 5
REGIONS = ("us-west-2", "us-east-1")
PIPELINE = """
pipeline {
  name       = "bench-fleet"
  ssm_prefix = "/amibuild"
  regions    = ["us-west-2"]
  copy_to    = ["us-east-1"]
}
variant "ceph" {
  kubernetes_version = "1.33"
}
"""
PARAMETER = "/amibuild/bench-fleet/1.33/ceph/{}/image_id"


def run() -> Report:
    import boto3

    from amibuild.aws import Aws
    from amibuild.pipeline.options import Options
    from amibuild.jobs.fleet_jobs import fleet_view
    from amibuild.pipeline import Overrides
    from amibuild.sandbox import Sandbox, seed_images
    from amibuild.sandbox.fleet_seed import FleetSeed, karpenter_tags, seed_fleet

    saved = dict(os.environ)
    with Sandbox() as sandbox, tempfile.TemporaryDirectory(prefix="amibuild-bench-") as scratch:
        try:
            os.environ.update(sandbox.env())
            path = Path(scratch, "amibuild.hcl")
            path.write_text(PIPELINE)
            images: dict[str, list[str]] = {}
            for n, region in enumerate(REGIONS):
                images[region] = _images(boto3, region, seed_images()[0].image_id)
                ssm = boto3.client("ssm", region_name=region)
                for channel, values in (("recommended", images[region]), ("stable", images[region][:2])):
                    for ami in values:
                        ssm.put_parameter(Name=PARAMETER.format(channel), Value=ami, Type="String",
                                          DataType="aws:ec2:image", Overwrite=True)
                old, mid, new = images[region]
                seed_fleet(sandbox.endpoint, region, FleetSeed(
                    stacks=tuple((f"ng-{region}-{i}", PARAMETER.format("stable" if i % 2 else "recommended"))
                                 for i in range(10)),
                    launch_templates=tuple((f"spare-{i}", (old, mid, new)[i % 3]) for i in range(5)),
                    nodegroups=tuple((f"mng-{i}", (old, mid)[i % 2]) for i in range(3 - n)),
                    instances=((old, 50, karpenter_tags("default", "ceph-stable")), (mid, 30, {}), (new, 20, {})),
                    stack_capacity=0))
            options = Options(pipeline_file=str(path), overrides=Overrides(), build_dir=str(Path(scratch, "build")),
                              packer="packer", profile=None, cache_dir=None)

            def in_process() -> None:
                view = fleet_view(options, aws=Aws(region=REGIONS[0]))
                if sum(len(r.instances) for r in view.consumers) < 200:
                    raise BenchmarkError("fleet did not find the 200 seeded instances")

            def command() -> None:
                done = subprocess.run([sys.executable, "-m", "amibuild", "fleet", "--json", "--pipeline", str(path)],
                                      capture_output=True, text=True, timeout=120, cwd=scratch)
                if done.returncode != 0:
                    raise BenchmarkError(f"amibuild fleet exited {done.returncode}: {done.stderr[-500:]}")
                json.loads(done.stdout)

            samples: dict[str, list[float]] = {"command": [], "in process": []}
            runners = {"command": command, "in process": in_process}
            for round_ in range(RUNS + 1):
                order = list(runners) if round_ % 2 else list(reversed(runners))
                for label in order:
                    seconds = clock(runners[label])
                    if round_:
                        samples[label].append(seconds)

            before = _calls(fleet_view, options, Aws, REGIONS[0])
            for region in REGIONS:
                seed_fleet(sandbox.endpoint, region, FleetSeed(instances=((images[region][0], 100, {}),)))
            after = _calls(fleet_view, options, Aws, REGIONS[0])
        finally:
            os.environ.clear()
            os.environ.update(saved)

    command_t, inproc_t = Timing(tuple(samples["command"])), Timing(tuple(samples["in process"]))
    total_before, total_after = sum(before.values()), sum(after.values())
    rows = [
        Row("amibuild fleet --json (subprocess)", ms(command_t.median), target=Target(3000.0),
            detail=command_t.spread()),
        Row("fleet_view in process", ms(inproc_t.median), detail=inproc_t.spread()),
        Row("AWS calls at 200 instances", total_before, unit=""),
        Row("AWS calls at 400 instances", total_after, unit=""),
        Row("calls 400 / 200 instances", total_after / total_before, unit="x", target=Target(1.0),
            detail="DescribeInstances filtered by image id, pages of 1,000"),
    ]
    notes = ["calls per run at 200 instances, by operation: "
             + ", ".join(f"{op} {n}" for op, n in sorted(before.items())),
             f"DescribeInstances: {before.get('ec2:DescribeInstances', 0)} at 200 instances, "
             f"{after.get('ec2:DescribeInstances', 0)} at 400 (one page per region)",
             "calls that do grow: one DescribeLaunchTemplateVersions per launch template, one DescribeNodegroup "
             "per managed node group, one GetParameterHistory per channel and region"]
    setup = f"{RUNS} runs each, subprocess and in-process alternating, 1 warm-up round; medians"
    return Report(rows, notes, setup=setup)


def _calls(fleet_view, options, Aws, region: str) -> Counter:
    aws = Aws(region=region)
    fleet_view(options, aws=aws)
    return Counter(f"{service}:{operation}" for service, operation, _ in aws.calls)


def _images(boto3, region: str, source: str) -> list[str]:
    """Three tagged images of the pipeline, oldest first, made straight on the emulator (untimed)."""
    ec2 = boto3.client("ec2", region_name=region)
    amis = []
    for n in range(3):
        instance = ec2.run_instances(ImageId=source, MinCount=1, MaxCount=1, InstanceType="m5.large")
        instance_id = instance["Instances"][0]["InstanceId"]
        ami = ec2.create_image(InstanceId=instance_id, Name=f"bench-fleet-{region}-{n}")["ImageId"]
        ec2.terminate_instances(InstanceIds=[instance_id])
        tags = {"amibuild:variant": "ceph", "amibuild:fingerprint": f"fp{n}", "amibuild:pipeline": "bench-fleet",
                "amibuild:kubernetes-version": "1.33", "amibuild:created": f"2026-01-0{n + 1}T00:00:00Z"}
        ec2.create_tags(Resources=[ami], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
        amis.append(ami)
    return amis


if __name__ == "__main__":
    from benchmarks.common import format_report

    start = time.perf_counter()
    report = run()
    print(format_report(NAME, DESCRIPTION, report, time.perf_counter() - start))
