"""Publishing one variant to 1 region and to 10 regions: wall times and their ratio.

Setup (untimed): a local emulator (its own `Sandbox`) and tests/faultproxy.py's `FaultProxy` in
front of it, adding a fixed delay to every request to stand in for the network (`DELAY`). Two
pipelines: one builds in us-west-2 only, the other also copies to 9 more regions; each has its own
variant, so their parameters never overlap. Two sets of tagged images per pipeline are made
straight on the emulator, and every timed run publishes the other set, so each run writes.

Timed: `publish.publish_variant(...)`, three ways: with a fresh `Aws` per run (as `invoke publish`
starts: the figures include making the boto3 clients; this row carries the target), with one `Aws`
reused (clients made: the publishing alone), and reused with the proxy's delay at 0 (what is left is
the emulator's and the client's CPU time: the floor under the other rows on this machine). Runs
alternate 1 / 10 regions, rotated each round, after one warm-up round; before each run the script
sleeps `publish.WRITE_INTERVAL` (untimed) so that the per-region write pacing never carries a wait
from one run into the next. Medians.

Target (a regression guard, issue 30): 10 regions / 1 region <= 2 for a fresh `Aws`, the channel lease included:
the reads, writes and checks fan out across regions; so do the channel leases beside the home (one
in every region written, where a prune of other regions meets the writer), taken and given back at
once after the home's.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Callable

if __name__ == "__main__":  # run as a script: the repository root belongs on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import Report, Row, Target, Timing, clock, ms  # noqa: E402

NAME = "publish_regions"
DESCRIPTION = "publish one variant to 1 and to 10 regions through a proxy adding latency: walls, ratio"

DELAY = 0.1  # seconds added to every AWS request by the proxy
RUNS = 5
TEN = ("us-west-2", "us-east-1", "us-east-2", "eu-west-1", "eu-central-1", "eu-north-1",
       "ap-southeast-2", "ap-northeast-1", "sa-east-1", "ca-central-1")
PIPELINE = """
pipeline {{
  name       = "bench"
  ssm_prefix = "/amibuild"
  regions    = ["{first}"]
  copy_to    = [{copies}]
}}
variant "{variant}" {{}}
"""


def run() -> Report:
    import boto3

    from amibuild.channels import publish
    from amibuild.pipeline import load
    from amibuild.aws import Aws
    from amibuild.sandbox import Sandbox, seed_images

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from faultproxy import FaultProxy

    saved = dict(os.environ)
    with Sandbox() as sandbox, FaultProxy(sandbox.endpoint, delay=DELAY) as proxy, \
            tempfile.TemporaryDirectory(prefix="amibuild-bench-") as scratch:
        try:
            os.environ.update(sandbox.env())
            pipelines = {}
            for label, regions in (("1 region", TEN[:1]), ("10 regions", TEN)):
                variant = f"bench{len(regions)}"
                path = Path(scratch, f"{variant}.hcl")
                path.write_text(PIPELINE.format(first=regions[0], variant=variant,
                                                copies=", ".join(f'"{r}"' for r in regions[1:])))
                pipeline = load(path)
                images = [_images(boto3, sandbox.endpoint, regions, variant, f"fp{i}", seed_images()[0].image_id)
                          for i in range(2)]
                pipelines[label] = (pipeline, pipeline.variants[0], images)

            os.environ["AWS_ENDPOINT_URL"] = proxy.endpoint
            turn = Counter()
            calls: dict[str, int] = {}
            warm = {label: Aws(region=TEN[0]) for label in pipelines}

            def command(label: str, fresh: bool) -> Callable[[], None]:
                pipeline, variant, images = pipelines[label]

                def publish_once() -> None:
                    amis = images[turn[label] % 2]
                    turn[label] += 1
                    mark = len(proxy.log)
                    aws = Aws(region=TEN[0]) if fresh else warm[label]
                    result = publish.publish_variant(aws, pipeline=pipeline, variant=variant, amis=amis)
                    if not all(r.action is publish.PublishAction.WRITE for r in result.regions):
                        raise RuntimeError(f"{label}: a region was not written: {result.to_dict()}")
                    calls[label] = len(proxy.log) - mark

                return publish_once

            timings: dict[tuple[str, str], Timing] = {}
            for mode, delay in (("fresh", DELAY), ("warm", DELAY), ("no delay", 0.0)):
                proxy.delay = delay
                commands = {label: command(label, fresh=mode == "fresh") for label in pipelines}
                timings.update({(mode, label): t for label, t in _alternate(commands, publish.WRITE_INTERVAL).items()})
        finally:
            os.environ.clear()
            os.environ.update(saved)

    rows = []
    for mode, what in (("fresh", "fresh Aws per run, as `invoke publish`"), ("warm", "Aws reused: clients made"),
                       ("no delay", "Aws reused, proxy delay 0: emulator + client CPU only")):
        one, ten = timings[(mode, "1 region")], timings[(mode, "10 regions")]
        rows += [
            Row(f"{mode}: 1 region", ms(one.median), detail=one.spread()),
            Row(f"{mode}: 10 regions", ms(ten.median), detail=ten.spread()),
            Row(f"{mode}: 10 / 1", ten.median / one.median, unit="x",
                target=Target(2.0, soft=mode != "fresh"), detail=what),
        ]
    notes = [
        f"every request delayed {ms(DELAY):.0f} ms by the proxy (except the no-delay rows); AWS requests per "
        f"publish: {calls['1 region']} (1 region), {calls['10 regions']} (10 regions)",
        "round trips in sequence, for 1 region as for 10: take the lease (home region, then every region at once), read, put, read back, "
        "tag, check every region, give the lease back",
        "the emulator is one process serving every region, so its CPU time per request adds up across "
        "regions in a way AWS's does not: the no-delay rows show that floor",
    ]
    setup = (f"{RUNS} runs per row, 1 and 10 regions alternating (rotated), 1 warm-up round; medians; "
             f"a different image set each run, so every run writes")
    return Report(rows, notes, setup=setup)


def _alternate(commands: dict[str, Callable[[], None]], pause: float) -> dict[str, Timing]:
    """Like `common.interleave`, with an untimed `pause` before each run (the per-region write pacing)."""
    samples: dict[str, list[float]] = {label: [] for label in commands}
    names = list(commands)
    for round_ in range(RUNS + 1):
        shift = round_ % len(names)
        for label in names[shift:] + names[:shift]:
            time.sleep(pause)
            seconds = clock(commands[label])
            if round_:  # round 0 warms up
                samples[label].append(seconds)
    return {label: Timing(tuple(values)) for label, values in samples.items()}


def _images(boto3, endpoint: str, regions, variant: str, fingerprint: str, source: str) -> dict[str, str]:
    """One tagged image per region, made straight on the emulator (untimed)."""
    amis = {}
    for region in regions:
        ec2 = boto3.client("ec2", region_name=region, endpoint_url=endpoint)
        instance = ec2.run_instances(ImageId=source, MinCount=1, MaxCount=1, InstanceType="m5.large")
        ami = ec2.create_image(InstanceId=instance["Instances"][0]["InstanceId"],
                               Name=f"{variant}-{fingerprint}-{region}")["ImageId"]
        ec2.create_tags(Resources=[ami], Tags=[{"Key": "amibuild:variant", "Value": variant},
                                               {"Key": "amibuild:fingerprint", "Value": fingerprint}])
        amis[region] = ami
    return amis


if __name__ == "__main__":
    from benchmarks.common import format_report

    start = time.perf_counter()
    report = run()
    print(format_report(NAME, DESCRIPTION, report, time.perf_counter() - start))
