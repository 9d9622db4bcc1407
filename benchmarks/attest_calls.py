"""The AWS calls that signing and verifying a statement add, per region, and each step's own seconds.

Setup (untimed): a local emulator (its own `Sandbox`) and, straight on it, one image per region
for a statement about 1, 3 and 10 regions (the pipeline's key and bucket are the sandbox's seeded
`alias/amibuild` and `amibuild-attestations-123456789012`, in us-west-2).

Counted: the gateway's own call log (`Aws.calls`: service, operation, region) of each step, once:
the set-up a run does once (`attest.sign.attestor`: GetCallerIdentity, DescribeKey), one statement
(`Attestor.make`: a DescribeImages per region, one KMS Sign, a PutObject per region's AMI id), and
one verification (`attest.check.verify_image`: a listing, a GetObject per statement, DescribeKey,
GetPublicKey). Timed: each step, 5 runs after a warm-up, medians, with a warm `Aws` (its clients
made). The figures are information: no step has a target of its own here (the issue's `verify`
of a channel in 3 regions, ≤ 2 s, is the verify command's, which this step is a part of).
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository root belongs on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import Report, Row, Target, interleave, ms  # noqa: E402

NAME = "attest_calls"
DESCRIPTION = "the AWS calls signing and verifying a statement add, per region; each step's seconds"

RUNS = 5
REGIONS = ("us-west-2", "us-east-1", "eu-west-1", "eu-central-1", "ap-southeast-2",
           "us-east-2", "eu-north-1", "ap-northeast-1", "sa-east-1", "ca-central-1")


class _Pipeline:
    """What `attest.sign.where` reads of a pipeline."""

    def __init__(self, regions):
        from amibuild.pipeline.attestation import AttestationSettings

        self.name, self.build_region, self.attestation = "bench", regions[0], AttestationSettings()


def _image(boto3, region: str, source: str) -> str:
    ec2 = boto3.client("ec2", region_name=region)
    instance = ec2.run_instances(ImageId=source, MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    return ec2.create_image(InstanceId=instance, Name=f"bench-attest-{region}")["ImageId"]


def _by_region(calls) -> str:
    counts = Counter(f"{service}:{operation}" for service, operation, _ in calls)
    regions = Counter(region for _, _, region in calls)
    return (", ".join(f"{name} x{n}" for name, n in sorted(counts.items())) + " | per region: "
            + ", ".join(f"{r} {n}" for r, n in sorted(regions.items())))


def _one_size(aws, amis, size: int) -> list[Row]:
    """The rows of a statement about the first ``size`` regions."""
    from amibuild.attest import check, predicates, sign
    from amibuild.attest.statement import TEST

    regions = REGIONS[:size]
    pipeline = _Pipeline(regions)
    chosen = {r: amis[r] for r in regions}
    predicate = predicates.test({"result": "passed", "run_id": "bench", "checks": [
        {"name": f"check-{i}", "stage": "boot", "result": "passed", "exit_status": 0, "seconds": 0.1}
        for i in range(20)]}, finished="2026-12-03T00:00:00Z")
    mark = len(aws.calls)
    attestor = sign.attestor(aws, pipeline)
    setup_calls = aws.calls[mark:]
    mark = len(aws.calls)
    stored = attestor.make(chosen, TEST, predicate, f"count-{size}")
    make_calls = aws.calls[mark:]
    if not stored.signed or stored.error:
        raise RuntimeError(f"{size} regions: not signed: {stored.error or stored.unsigned_reason}")
    facts = sign.image_facts(aws, chosen)
    mark = len(aws.calls)
    verified = check.verify_image(aws, attestor.where, facts, TEST)
    verify_calls = aws.calls[mark:]
    if not all(v.ok for v in verified):
        raise RuntimeError(f"{size} regions: {[v.reason() for v in verified]}")
    turn = Counter()

    def make_once() -> None:
        turn["make"] += 1
        attestor.make(chosen, TEST, predicate, f"timed-{size}-{turn['make']}")

    timings = interleave({
        "set-up (attestor)": lambda: sign.attestor(aws, pipeline),
        "sign + store (make)": make_once,
        "verify (verify_image)": lambda: check.verify_image(aws, attestor.where, facts, TEST),
    }, runs=RUNS)
    rows = [Row(f"{size} region(s): {label}: AWS calls", len(calls), unit="", detail=_by_region(calls))
            for label, calls in (("set-up", setup_calls), ("sign + store", make_calls), ("verify", verify_calls))]
    rows += [Row(f"{size} region(s): {label}", ms(timing.median), target=Target(2000, soft=True), detail=timing.spread())
             for label, timing in timings.items()]
    return rows


def run() -> Report:
    import boto3

    from amibuild.aws import Aws
    from amibuild.sandbox import Sandbox, seed_images

    saved = dict(os.environ)
    rows: list[Row] = []
    with Sandbox() as sandbox:
        try:
            os.environ.update(sandbox.env())
            source = seed_images()[0].image_id
            amis = {r: _image(boto3, r, source) for r in REGIONS}
            aws = Aws(region=REGIONS[0])
            for size in (1, 3, 10):
                rows += _one_size(aws, amis, size)
        finally:
            os.environ.clear()
            os.environ.update(saved)
    notes = ["verify reads every statement of the kind stored under the first region's AMI id, one GetObject each, "
             "in turn: the counted row read one; the timed rows also read those the smaller sizes and the timed "
             "makes stored about the same us-west-2 image (up to 21)",
             "sign + store: the PutObjects go to the bucket's region (us-west-2), one per region's AMI id; the "
             "DescribeImages, one per region, read each image's snapshots for its record"]
    return Report(rows, notes, setup=f"{RUNS} runs after a warm-up, interleaved, medians; warm Aws; local emulator")

if __name__ == "__main__":
    from benchmarks.common import format_report

    print(format_report(NAME, DESCRIPTION, run(), 0.0))
