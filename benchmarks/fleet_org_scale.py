"""`amibuild fleet` over an organisation's account: 10,000 instances, 500 stacks, 200 launch
templates in 3 regions, through AWS's rate limits.

Setup (untimed): a local emulator (its own `Sandbox`) and tests/faultproxy.py's `FaultProxy` in
front of it. Per region (us-west-2, us-east-1, eu-west-1) three tagged images, `recommended`
holding all three in turn and `stable` the first two; then `amibuild.sandbox.fleet_seed.seed_fleet`,
a thread per region, through the emulator's own API as a user's tools would: a third of the
stacks (following the two channels; groups of capacity 0, so every instance is one seeded here),
of the spare launch templates, two managed node groups; and a third of the instances, in a /16
subnet of their own, in RunInstances calls of `AMIBUILD_BENCH_RUN_BATCH` (default 1,000), a third
of them tagged as Karpenter's.

Timed, once (minutes): `amibuild fleet --json` as a subprocess (interpreter start included)
through the proxy in token-bucket mode at AWS's default rates (`rate_limit()`). Beside it its
lower bound (`_ratebound.py`: the larger of calls ÷ AWS's rate per region and bucket, and the same
requests replayed straight to the emulator); the calls per kind; the throttled answers (each one
retried: the command exits 0 only if none failed); and the command's peak RSS (``ru_maxrss`` of
the child).

Targets (issue 29): wall ≤ 1.3 × its lower bound, peak RSS ≤ 500 MB, 0 failures.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository root belongs on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._ratebound import bound_rows  # noqa: E402
from benchmarks.common import BenchmarkError, Report, Row, Target  # noqa: E402

NAME = "fleet_org_scale"
DESCRIPTION = "amibuild fleet over 10,000 instances, 500 stacks, 200 launch templates in 3 regions, rate-limited"
DEFAULT = False  # minutes of the whole machine: only when named

REGIONS = ("us-west-2", "us-east-1", "eu-west-1")
PIPELINE = """
pipeline {
  name       = "bench-fleet"
  ssm_prefix = "/amibuild"
  regions    = ["us-west-2"]
  copy_to    = ["us-east-1", "eu-west-1"]
}
variant "ceph" {
  kubernetes_version = "1.33"
}
"""
PARAMETER = "/amibuild/bench-fleet/1.33/ceph/{}/image_id"
RSS_LIMIT_MB = 500


def _share(total: int, index: int) -> int:
    """Region `index`'s part of `total`, the remainder to the first regions."""
    return total // len(REGIONS) + (1 if index < total % len(REGIONS) else 0)


def run() -> Report:
    import boto3

    from amibuild.sandbox import Sandbox, seed_images
    from amibuild.sandbox.fleet_seed import FleetSeed, karpenter_tags, seed_fleet

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from faultproxy import FaultProxy

    instances = int(os.environ.get("AMIBUILD_BENCH_INSTANCES", "10000"))
    stacks = int(os.environ.get("AMIBUILD_BENCH_STACKS", "500"))
    templates = int(os.environ.get("AMIBUILD_BENCH_TEMPLATES", "200"))
    batch = int(os.environ.get("AMIBUILD_BENCH_RUN_BATCH", "1000"))
    saved = dict(os.environ)
    notes: list[str] = []
    with Sandbox() as sandbox, FaultProxy(sandbox.endpoint) as proxy, \
            tempfile.TemporaryDirectory(prefix="amibuild-bench-") as scratch:
        try:
            os.environ.update(sandbox.env())
            path = Path(scratch, "amibuild.hcl")
            path.write_text(PIPELINE)
            source = seed_images()[0].image_id

            def seed_region(index: int) -> float:
                region = REGIONS[index]
                started = time.monotonic()
                old, mid, new = _images(boto3, region, source)
                ssm = boto3.client("ssm", region_name=region)
                for channel, values in (("recommended", (old, mid, new)), ("stable", (old, mid))):
                    for ami in values:
                        ssm.put_parameter(Name=PARAMETER.format(channel), Value=ami, Type="String",
                                          DataType="aws:ec2:image", Overwrite=True)
                count = _share(instances, index)
                seed_fleet(sandbox.endpoint, region, FleetSeed(
                    stacks=tuple((f"ng-{region}-{i}", PARAMETER.format("stable" if i % 2 else "recommended"))
                                 for i in range(_share(stacks, index))),
                    launch_templates=tuple((f"spare-{i}", (old, mid, new)[i % 3])
                                           for i in range(_share(templates, index))),
                    nodegroups=(("mng-0", old), ("mng-1", mid)), stack_capacity=0))
                _instances(boto3, region, ((old, count // 3, karpenter_tags("default", "ceph-stable")),
                                           (mid, count // 3, {}), (new, count - 2 * (count // 3), {})), batch)
                return time.monotonic() - started

            setup = time.monotonic()
            with ThreadPoolExecutor(max_workers=len(REGIONS)) as pool:
                took = list(pool.map(seed_region, range(len(REGIONS))))
            notes.append(f"setup: {instances} instances, {stacks} stacks, {templates} spare launch templates, "
                         f"{2 * len(REGIONS)} node groups in {time.monotonic() - setup:.0f} s (untimed; per region "
                         + ", ".join(f"{t:.0f} s" for t in took) + f"; RunInstances of {batch})")

            os.environ["AWS_ENDPOINT_URL"] = proxy.endpoint
            proxy.rate_limit()
            proxy.record()
            mark = len(proxy.log)
            start = time.monotonic()
            done = subprocess.run([sys.executable, "-m", "amibuild", "fleet", "--json", "--pipeline", str(path)],
                                  capture_output=True, text=True, timeout=1800, cwd=scratch)
            wall = time.monotonic() - start
            peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            failures = [] if done.returncode == 0 else [f"exit {done.returncode}: {done.stderr.strip()[-500:]}"]
            seen_instances = 0
            if not failures:
                view = json.loads(done.stdout)
                seen_instances = len({str(i) for i in _instances_in(view)})  # instance ids
                if seen_instances < instances:
                    failures.append(f"fleet showed {seen_instances} of the {instances} instances")
            seen = proxy.log[mark:]
            throttled = sum(1 for s in seen if s.outcome == "throttled")
            calls = Counter(f"{s.service}:{s.op.rsplit('.', 1)[-1]}" for s in seen if s.outcome == "forwarded")
            rows = bound_rows("fleet", wall, proxy, mark, throttled, failures, max(stacks, 1), sandbox.endpoint,
                              start, "stack")
        finally:
            os.environ.clear()
            os.environ.update(saved)
    if not calls:
        raise BenchmarkError("the proxy saw no request")
    rows.append(Row("fleet: peak RSS", peak_mb, unit="MB", target=Target(RSS_LIMIT_MB),
                    detail="ru_maxrss of the `amibuild fleet` process"))
    notes.append("calls by kind: " + ", ".join(f"{op} {n}" for op, n in calls.most_common()))
    notes.append(f"instances in the view: {seen_instances}")
    notes += [f"failed: {f}" for f in failures[:3]]
    notes.append("throttled answers retried: counted at the proxy (the command is a subprocess); "
                 "a throttled call that was not retried would fail the command")
    return Report(rows, notes, setup="one timed run; the lower bound measured in the same run")


def _instances_in(view: object) -> list[object]:
    """Every instance entry of `fleet --json`: the lists under an "instances" key, anywhere."""
    found: list[object] = []
    if isinstance(view, dict):
        for key, value in view.items():
            if key == "instances" and isinstance(value, list):
                found += value
            else:
                found += _instances_in(value)
    elif isinstance(view, list):
        for value in view:
            found += _instances_in(value)
    return found


def _instances(boto3, region: str, groups, batch: int) -> None:
    """The instances, in a /16 subnet of their own (the sandbox cluster's subnets hold a few hundred
    addresses; a full subnet is an error, as on AWS), `batch` per RunInstances call."""
    ec2 = boto3.client("ec2", region_name=region)
    vpc = ec2.create_vpc(CidrBlock="10.128.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.128.0.0/16")["Subnet"]["SubnetId"]
    for image, count, tags in groups:
        spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}] if tags else []
        for start in range(0, count, batch):
            n = min(batch, count - start)
            ec2.run_instances(ImageId=image, MinCount=n, MaxCount=n, InstanceType="m6i.large", SubnetId=subnet,
                              **({"TagSpecifications": spec} if spec else {}))


def _images(boto3, region: str, source: str) -> list[str]:
    """Three tagged images of the pipeline, oldest first, made straight on the emulator (untimed)."""
    ec2 = boto3.client("ec2", region_name=region)
    instance = ec2.run_instances(ImageId=source, MinCount=1, MaxCount=1, InstanceType="m5.large")
    instance_id = instance["Instances"][0]["InstanceId"]
    amis = []
    for n in range(3):
        ami = ec2.create_image(InstanceId=instance_id, Name=f"bench-fleet-{region}-{n}")["ImageId"]
        tags = {"amibuild:variant": "ceph", "amibuild:fingerprint": f"fp{n}", "amibuild:pipeline": "bench-fleet",
                "amibuild:kubernetes-version": "1.33", "amibuild:created": f"2026-01-0{n + 1}T00:00:00Z"}
        ec2.create_tags(Resources=[ami], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
        amis.append(ami)
    ec2.terminate_instances(InstanceIds=[instance_id])
    return amis


if __name__ == "__main__":
    from benchmarks.common import format_report

    start = time.perf_counter()
    report = run()
    print(format_report(NAME, DESCRIPTION, report, time.perf_counter() - start))
