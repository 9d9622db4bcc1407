"""Publishing 200 variants to 17 regions, then `channels --check` over them, through AWS's rate limits.

Setup (untimed, benchmarks/_scalekit.py): a local emulator (its own `Sandbox`) and
tests/faultproxy.py's `FaultProxy` in front of it in token-bucket mode at AWS's default rates (`rate_limit()`: amibuild/aws/rates.py's
table, per access key, region and API). A pipeline of `AMIBUILD_BENCH_VARIANTS` variants (default
200) building in us-west-2 and copying to 16 more regions; per variant and region one tagged image,
made straight on the emulator.

Timed, once each (a run takes minutes; it is not repeated), in a spawned child process (its
imports untimed) so that the proxy does not share amibuild's interpreter lock:
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
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository root belongs on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _scalekit  # noqa: E402
from benchmarks.common import Report, Row  # noqa: E402

NAME = "channels_scale"
DESCRIPTION = "publish N variants x 17 regions, then channels --check, through AWS's default rate limits"

SEVENTEEN = ("us-west-2", "us-east-1", "us-east-2", "us-west-1", "ca-central-1", "sa-east-1", "eu-west-1",
             "eu-west-2", "eu-west-3", "eu-central-1", "eu-north-1", "ap-south-1", "ap-northeast-1",
             "ap-northeast-2", "ap-northeast-3", "ap-southeast-1", "ap-southeast-2")


def variants_wanted() -> int:
    return int(os.environ.get("AMIBUILD_BENCH_VARIANTS", "200"))


def run() -> Report:
    from amibuild.channels.from_build import PUBLISH_PARALLEL

    count = variants_wanted()
    parallel = int(os.environ.get("AMIBUILD_BENCH_PARALLEL", PUBLISH_PARALLEL))
    names = [f"v{i:03d}" for i in range(count)]
    rows: list[Row] = []
    notes: list[str] = []
    tags = {"amibuild:fingerprint": "fp1", "amibuild:run-id": "run-1"}
    with _scalekit.rate_limited(SEVENTEEN, names) as scale:
        setup_start = time.monotonic()
        made = _scalekit.make_images(scale, lambda _, region: [
            (name, f"{name}-{region}", {"amibuild:variant": name, **tags}) for name in names])
        amis = {name: {region: made[region][name] for region in SEVENTEEN} for name in names}
        notes.append(f"setup: {count * len(SEVENTEEN)} images in {time.monotonic() - setup_start:.0f} s (untimed)")
        scale.proxy.rate_limit()
        cells = count * len(SEVENTEEN)
        for label, work, args in (("publish", _publish, (str(scale.path), amis, parallel)),
                                  ("check", _check, (str(scale.path),))):
            more_rows, more_notes = _scalekit.timed(label, scale, work, args, cells, "variant x region")
            rows += more_rows
            notes += more_notes
    notes += [
        f"{count} variants x {len(SEVENTEEN)} regions (AMIBUILD_BENCH_VARIANTS); publish {parallel} variants "
        f"at a time (AMIBUILD_BENCH_PARALLEL; build-ami: {PUBLISH_PARALLEL}), each over all regions at once",
        "rate bound = max over (region, bucket) of (calls - burst) / rate at AWS's documented defaults; the gateway "
        "keeps 90% of each rate and a token less than each burst (amibuild/aws/rates.py)",
        "emulator bound = the same forwarded requests replayed straight to the emulator, 32 at a time; the emulator is "
        "one process serving every region",
    ]
    return Report(rows, notes, setup="one timed run of each, in a child process; the lower bound measured in the same run")


def _publish(path: str, amis: dict[str, dict[str, str]], parallel: int) -> tuple[float, float, list[str], int, list[str]]:
    """In the child: every variant published to `recommended` everywhere, `parallel` at a time."""
    from amibuild.aws import Aws
    from amibuild.channels import publish
    from amibuild.errors import AmibuildError
    from amibuild.pipeline import load

    pipeline = load(Path(path))
    by_name = {v.name: v for v in pipeline.variants}
    aws = Aws(region=SEVENTEEN[0])
    started = _scalekit.warm(aws, ("ssm", "ec2"), SEVENTEEN)
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
        list(pool.map(publish_one, list(by_name)))
    return start, time.monotonic() - start, failures, len(aws.throttled), [started]


def _check(path: str) -> tuple[float, float, list[str], int, list[str]]:
    """In the child: `channels --check`'s work over the pipeline (a fresh gateway)."""
    from amibuild.aws import Aws
    from amibuild.channels import repair
    from amibuild.pipeline import load

    pipeline = load(Path(path))
    aws = Aws(region=SEVENTEEN[0])
    started = _scalekit.warm(aws, ("ssm", "ec2"), SEVENTEEN)
    start = time.monotonic()
    splits = repair.check(aws, pipeline=pipeline)
    wall = time.monotonic() - start
    return start, wall, [f"check found a split: {s.describe()}" for s in splits], len(aws.throttled), [started]


if __name__ == "__main__":
    from benchmarks.common import format_report

    start = time.perf_counter()
    report = run()
    print(format_report(NAME, DESCRIPTION, report, time.perf_counter() - start))
