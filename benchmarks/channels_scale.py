"""Publishing 200 variants to 17 regions, then `channels --check` over them, through AWS's rate limits.

Setup (untimed): a local emulator (its own `Sandbox`) and tests/faultproxy.py's `FaultProxy` in
front of it in token-bucket mode at AWS's default rates (`rate_limit()`: amibuild/aws/rates.py's
table, per access key, region and API). A pipeline of `AMIBUILD_BENCH_VARIANTS` variants (default
200) building in us-west-2 and copying to 16 more regions; per variant and region one tagged image,
made straight on the emulator.

Timed, once each (a run takes minutes; it is not repeated):
- publish: every variant published to `recommended` in all 17 regions, `PUBLISH_PARALLEL`
  variants at a time, as build-ami's publish step does (amibuild/channels/from_build.py), through
  one fresh gateway;
- check: `channels --check`'s work (`repair.check`, a fresh gateway): every channel of every region
  read, every image described.

Each is set beside its lower bound, the larger of
- the rate bound: for every (region, bucket) the calls the run needed (forwarded, not throttled)
  less the bucket's burst, over its refill rate (AWS's documented default, not the limiter's 90%);
  the largest of these, since regions and buckets run side by side;
- the emulator bound: the same forwarded requests sent again straight to the emulator (no proxy,
  no bucket), 32 at a time, in their order (`faultproxy.replay`).
Printed: both bounds, the calls per variant and region by API (what the operation needs), the
failures, and the throttled answers (every one retried by the gateway, `Aws.throttled`).

Targets (issue 29): publish and check each <= 1.3 x its lower bound; publish with 0 failures.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository root belongs on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._ratebound import bound_rows  # noqa: E402
from benchmarks.common import Report, Row  # noqa: E402

NAME = "channels_scale"
DESCRIPTION = "publish N variants x 17 regions, then channels --check, through AWS's default rate limits"

SEVENTEEN = ("us-west-2", "us-east-1", "us-east-2", "us-west-1", "ca-central-1", "sa-east-1", "eu-west-1",
             "eu-west-2", "eu-west-3", "eu-central-1", "eu-north-1", "ap-south-1", "ap-northeast-1",
             "ap-northeast-2", "ap-northeast-3", "ap-southeast-1", "ap-southeast-2")
PIPELINE = """
pipeline {{
  name       = "scale"
  ssm_prefix = "/amibuild"
  regions    = ["{first}"]
  copy_to    = [{copies}]
}}
{variants}
"""


def variants_wanted() -> int:
    return int(os.environ.get("AMIBUILD_BENCH_VARIANTS", "200"))


def run() -> Report:
    import boto3

    from amibuild.aws import Aws
    from amibuild.channels import publish, repair
    from amibuild.channels.from_build import PUBLISH_PARALLEL
    from amibuild.errors import AmibuildError
    from amibuild.pipeline import load
    from amibuild.sandbox import Sandbox, seed_images

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from faultproxy import FaultProxy

    count = variants_wanted()
    parallel = int(os.environ.get("AMIBUILD_BENCH_PARALLEL", PUBLISH_PARALLEL))
    names = [f"v{i:03d}" for i in range(count)]
    saved = dict(os.environ)
    rows: list[Row] = []
    notes: list[str] = []
    with Sandbox() as sandbox, FaultProxy(sandbox.endpoint) as proxy, \
            tempfile.TemporaryDirectory(prefix="amibuild-bench-") as scratch:
        try:
            os.environ.update(sandbox.env())
            path = Path(scratch, "amibuild.hcl")
            path.write_text(PIPELINE.format(first=SEVENTEEN[0], copies=", ".join(f'"{r}"' for r in SEVENTEEN[1:]),
                                            variants="\n".join(f'variant "{n}" {{}}' for n in names)))
            pipeline = load(path)
            setup_start = time.monotonic()
            amis = _images(boto3, sandbox.endpoint, names, seed_images()[0].image_id)
            notes.append(f"setup: {count * len(SEVENTEEN)} images in {time.monotonic() - setup_start:.0f} s (untimed)")

            os.environ["AWS_ENDPOINT_URL"] = proxy.endpoint
            proxy.rate_limit()
            by_name = {v.name: v for v in pipeline.variants}

            # ---- publish
            proxy.record()
            mark = len(proxy.log)
            aws = Aws(region=SEVENTEEN[0])
            failures: list[str] = []

            def publish_one(name: str) -> None:
                try:
                    result = publish.publish_variant(aws, pipeline=pipeline, variant=by_name[name], amis=amis[name])
                except AmibuildError as exc:
                    failures.append(f"{name}: {exc}")
                    return
                if {r.region for r in result.regions if r.action is publish.PublishAction.WRITE} != set(SEVENTEEN):
                    failures.append(f"{name}: not written everywhere: {result.to_dict()}")

            start = time.monotonic()
            with ThreadPoolExecutor(max_workers=parallel) as pool:
                list(pool.map(publish_one, names))
            wall = time.monotonic() - start
            rows += bound_rows("publish", wall, proxy, mark, len(aws.throttled), failures, count * len(SEVENTEEN),
                               sandbox.endpoint, start, "variant x region")
            notes += [f"publish: {f}" for f in failures[:3]]

            # ---- channels --check
            proxy.record()
            mark = len(proxy.log)
            aws = Aws(region=SEVENTEEN[0])
            start = time.monotonic()
            splits = repair.check(aws, pipeline=pipeline)
            wall = time.monotonic() - start
            problems = [s.describe() for s in splits]
            rows += bound_rows("check", wall, proxy, mark, len(aws.throttled), problems, count * len(SEVENTEEN),
                               sandbox.endpoint, start, "variant x region")
            notes += [f"check found a split: {p}" for p in problems[:3]]
        finally:
            os.environ.clear()
            os.environ.update(saved)
    notes += [
        f"{count} variants x {len(SEVENTEEN)} regions (AMIBUILD_BENCH_VARIANTS); publish {parallel} variants "
        f"at a time (AMIBUILD_BENCH_PARALLEL; build-ami: {PUBLISH_PARALLEL}), each over all regions at once",
        "rate bound = max over (region, bucket) of (calls - burst) / rate at AWS's documented defaults; the gateway "
        "keeps 90% of each rate and a token less than each burst (amibuild/aws/rates.py)",
        "emulator bound = the same forwarded requests replayed straight to the emulator, 32 at a time; the emulator is "
        "one process serving every region",
    ]
    return Report(rows, notes, setup="one timed run of each; the lower bound is measured in the same run")


def _images(boto3, endpoint: str, names, source: str) -> dict[str, dict[str, str]]:
    """One tagged image per variant and region, straight on the emulator, a thread per region."""
    def region_images(region: str) -> dict[str, str]:
        ec2 = boto3.client("ec2", region_name=region, endpoint_url=endpoint)
        instance = ec2.run_instances(ImageId=source, MinCount=1, MaxCount=1, InstanceType="m5.large")
        made = {}
        for name in names:
            made[name] = ec2.create_image(
                InstanceId=instance["Instances"][0]["InstanceId"], Name=f"{name}-{region}",
                TagSpecifications=[{"ResourceType": "image", "Tags": [
                    {"Key": "amibuild:variant", "Value": name}, {"Key": "amibuild:fingerprint", "Value": "fp1"},
                    {"Key": "amibuild:run-id", "Value": "run-1"}]}])["ImageId"]
        return made

    with ThreadPoolExecutor(max_workers=len(SEVENTEEN)) as pool:
        by_region = dict(zip(SEVENTEEN, pool.map(region_images, SEVENTEEN), strict=True))
    return {name: {region: by_region[region][name] for region in SEVENTEEN} for name in names}


if __name__ == "__main__":
    from benchmarks.common import format_report

    start = time.perf_counter()
    report = run()
    print(format_report(NAME, DESCRIPTION, report, time.perf_counter() - start))
