"""`prune --dry-run` over many images (default 10,000) through AWS's rate limits: wall beside its lower bound.

Setup (untimed, benchmarks/_scalekit.py): a local emulator (its own `Sandbox`) and
tests/faultproxy.py's `FaultProxy` in token-bucket mode at AWS's default rates; `AMIBUILD_BENCH_IMAGES` images (default 10,000) of one
pipeline's 10 variants, spread over `REGIONS`, tagged as amibuild tags what it builds, made
straight on the emulator.

Timed, once (it takes minutes at 10,000), in a spawned child process (imports untimed): what
`prune --dry-run` asks AWS (`prune.gather`, a fresh gateway: every image of the pipeline, their
snapshots' tags, and every place an image can be in use: channels, stacks, launch templates,
instances, node groups) and its plan (`plan_prune`).
Beside it the lower bound (benchmarks/_ratebound.py), the failures and the throttled answers.

Target (issue 29): <= 1.3 x the lower bound.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository root belongs on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _scalekit  # noqa: E402
from benchmarks.common import Report, Row  # noqa: E402

NAME = "prune_scale"
DESCRIPTION = "prune --dry-run over N images (default 10,000) through AWS's default rate limits"

REGIONS = ("us-west-2", "us-east-1", "eu-west-1")
VARIANTS = 10


def run() -> Report:
    count = int(os.environ.get("AMIBUILD_BENCH_IMAGES", "10000"))
    names = [f"v{i:02d}" for i in range(VARIANTS)]
    notes: list[str] = []

    def wanted(index: int, _: str):
        for n in range(index, count, len(REGIONS)):
            name = names[n % len(names)]
            yield str(n), f"{name}-{n}", {"amibuild:variant": name, "amibuild:fingerprint": f"fp{n}",
                                          "amibuild:pipeline": "scale", "amibuild:run-id": f"run-{n}"}

    with _scalekit.rate_limited(REGIONS, names) as scale:
        setup = time.monotonic()
        _scalekit.make_images(scale, wanted)
        notes.append(f"setup: {count} images in {time.monotonic() - setup:.0f} s (untimed)")
        scale.proxy.rate_limit()
        rows, more = _scalekit.timed("prune --dry-run", scale, _prune, (str(scale.path),), count, "image")
        notes += more
    notes.append(f"{count} images (AMIBUILD_BENCH_IMAGES) of {VARIANTS} variants over {', '.join(REGIONS)}")
    return Report(rows + [Row("images", count, unit="")], notes,
                  setup="one timed run, in a child process; the bound measured in the same run")


def _prune(path: str) -> tuple[float, float, list[str], int, list[str]]:
    """In the child: `prune --dry-run`'s reads (`prune.gather`, a fresh gateway) and its plan."""
    from amibuild.aws import Aws
    from amibuild.errors import AmibuildError
    from amibuild.lifecycle import prune
    from amibuild.pipeline import load

    pipeline = load(Path(path))
    aws = Aws(region=REGIONS[0])
    failures, notes = [], [_scalekit.warm(aws, ("ec2", "ssm", "cloudformation", "autoscaling", "eks"), REGIONS)]
    start = time.monotonic()
    try:
        facts = prune.gather(aws, pipeline, REGIONS)
        plan = prune.plan_prune(facts.images, facts.in_use, 3, None, datetime.now(timezone.utc),
                                snapshot_tags=facts.snapshot_tags, pipeline=pipeline.name, deprecated=facts.deprecated)
        notes.append(f"gathered {len(facts.images)} images; the plan (keep 3) changes {len(plan.to_change)}")
    except AmibuildError as exc:
        failures.append(str(exc))
    return start, time.monotonic() - start, failures, len(aws.throttled), notes


if __name__ == "__main__":
    from benchmarks.common import format_report

    start = time.perf_counter()
    report = run()
    print(format_report(NAME, DESCRIPTION, report, time.perf_counter() - start))
