"""`prune --dry-run` over many images (default 10,000) through AWS's rate limits: wall beside its lower bound.

Setup (untimed): a local emulator (its own `Sandbox`) and tests/faultproxy.py's `FaultProxy` in
token-bucket mode at AWS's default rates; `AMIBUILD_BENCH_IMAGES` images (default 10,000) of one
pipeline's 10 variants, spread over `REGIONS`, tagged as amibuild tags what it builds, made
straight on the emulator.

Timed, once (it takes minutes at 10,000): what `prune --dry-run` asks AWS (`prune.gather`, a fresh
gateway: every image of the pipeline, their snapshots' tags, and every place an image can be in
use: channels, stacks, launch templates, instances, node groups) and its plan (`plan_prune`).
Beside it the lower bound (benchmarks/_ratebound.py), the failures and the throttled answers.

Target (issue 29): <= 1.3 x the lower bound.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository root belongs on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._ratebound import bound_rows  # noqa: E402
from benchmarks.common import Report, Row  # noqa: E402

NAME = "prune_scale"
DESCRIPTION = "prune --dry-run over N images (default 10,000) through AWS's default rate limits"

REGIONS = ("us-west-2", "us-east-1", "eu-west-1")
VARIANTS = 10
PIPELINE = """
pipeline {{
  name       = "scale"
  ssm_prefix = "/amibuild"
  regions    = ["{first}"]
  copy_to    = [{copies}]
}}
{variants}
"""


def run() -> Report:
    import boto3

    from amibuild.aws import Aws
    from amibuild.errors import AmibuildError
    from amibuild.lifecycle import prune
    from amibuild.pipeline import load
    from amibuild.sandbox import Sandbox, seed_images

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from faultproxy import FaultProxy

    count = int(os.environ.get("AMIBUILD_BENCH_IMAGES", "10000"))
    names = [f"v{i:02d}" for i in range(VARIANTS)]
    saved = dict(os.environ)
    notes: list[str] = []
    with Sandbox() as sandbox, FaultProxy(sandbox.endpoint) as proxy, \
            tempfile.TemporaryDirectory(prefix="amibuild-bench-") as scratch:
        try:
            os.environ.update(sandbox.env())
            path = Path(scratch, "amibuild.hcl")
            path.write_text(PIPELINE.format(first=REGIONS[0], copies=", ".join(f'"{r}"' for r in REGIONS[1:]),
                                            variants="\n".join(f'variant "{n}" {{}}' for n in names)))
            pipeline = load(path)
            setup = time.monotonic()
            _images(boto3, sandbox.endpoint, names, count, seed_images()[0].image_id)
            notes.append(f"setup: {count} images in {time.monotonic() - setup:.0f} s (untimed)")

            os.environ["AWS_ENDPOINT_URL"] = proxy.endpoint
            proxy.rate_limit()
            proxy.record()
            mark = len(proxy.log)
            aws = Aws(region=REGIONS[0])
            failures: list[str] = []
            start = time.monotonic()
            try:
                facts = prune.gather(aws, pipeline, REGIONS)
                plan = prune.plan_prune(facts.images, facts.in_use, 3, None, datetime.now(timezone.utc),
                                        snapshot_tags=facts.snapshot_tags, pipeline=pipeline.name,
                                        deprecated=facts.deprecated)
            except AmibuildError as exc:
                failures.append(str(exc))
                facts, plan = None, None
            wall = time.monotonic() - start
            rows = bound_rows("prune --dry-run", wall, proxy, mark, len(aws.throttled), failures, count,
                              sandbox.endpoint, start, "image")
            if facts is not None:
                notes.append(f"gathered {len(facts.images)} images; the plan (keep 3) changes {len(plan.to_change)}")
            notes += [f"failed: {f}" for f in failures[:3]]
        finally:
            os.environ.clear()
            os.environ.update(saved)
    notes.append(f"{count} images (AMIBUILD_BENCH_IMAGES) of {VARIANTS} variants over {', '.join(REGIONS)}")
    return Report(rows + [Row("images", count, unit="")], notes, setup="one timed run; the bound measured in the same run")


def _images(boto3, endpoint: str, names, count: int, source: str) -> None:
    """`count` tagged images, round-robin over variants and regions, a thread per region."""
    def region_images(index: int) -> None:
        region = REGIONS[index]
        ec2 = boto3.client("ec2", region_name=region, endpoint_url=endpoint)
        instance = ec2.run_instances(ImageId=source, MinCount=1, MaxCount=1, InstanceType="m5.large")
        for n in range(index, count, len(REGIONS)):
            name = names[n % len(names)]
            ec2.create_image(
                InstanceId=instance["Instances"][0]["InstanceId"], Name=f"{name}-{n}",
                TagSpecifications=[{"ResourceType": "image", "Tags": [
                    {"Key": "amibuild:variant", "Value": name}, {"Key": "amibuild:fingerprint", "Value": f"fp{n}"},
                    {"Key": "amibuild:pipeline", "Value": "scale"}, {"Key": "amibuild:run-id", "Value": f"run-{n}"}]}])

    with ThreadPoolExecutor(max_workers=len(REGIONS)) as pool:
        list(pool.map(region_images, range(len(REGIONS))))


if __name__ == "__main__":
    from benchmarks.common import format_report

    start = time.perf_counter()
    report = run()
    print(format_report(NAME, DESCRIPTION, report, time.perf_counter() - start))
