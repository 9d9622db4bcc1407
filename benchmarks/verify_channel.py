"""`amibuild verify` of one channel in 3 regions, end to end, and the AWS calls verifying adds per region.

Setup (untimed): a local emulator (its own `Sandbox`); one image per region (us-west-2, eu-west-1,
eu-central-1) made straight on it, a signed provenance and a signed test statement about them made
as build-ami and test-ami make them (`amibuild.attest`, the sandbox's `alias/amibuild` and bucket),
published to the variant's `recommended` channel; a pipeline file naming the three regions.

Timed: `amibuild verify --variant ceph --channel recommended --json` as a subprocess (interpreter
start, imports, the reads, a render of today's file to compare the fingerprint, the checks), 5 runs
after a warm-up, median, against the target, beside `amibuild channels --json` (another read-only
command, as a reference for the machine's speed at the moment: the load of a shared machine moves both);
and in process (`jobs.verify_job.verify_report` on a warm
gateway), with its parts: the channel's reads (`channels.verify.channel_targets`), the statements
read and verified (`channels.evidence.Reader.read`), and today's render.

Counted: the gateway's own call log (`Aws.calls`) of one in-process verify, by operation, and per
region: the calls a channel verify makes in each region, and those made once (the account, the
key, its public key) in the attestation region.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from collections import Counter
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository root belongs on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import Report, Row, Target, interleave, ms  # noqa: E402

NAME = "verify_channel"
DESCRIPTION = "`amibuild verify` of one channel in 3 regions (target 2 s); the AWS calls verifying adds per region"

RUNS = 5
REGIONS = ("us-west-2", "eu-west-1", "eu-central-1")
PIPELINE = """
pipeline {
  name    = "bench-verify"
  regions = ["us-west-2"]
  copy_to = ["eu-west-1", "eu-central-1"]
}
variant "ceph" {
  extra_packages = ["ceph-common"]
}
"""


def _setup(workdir: Path) -> dict[str, str]:
    """Images in every region, their signed statements, the channel pointing at them."""
    import boto3

    from amibuild import __version__
    from amibuild.attest import predicates, sign
    from amibuild.attest.statement import PROVENANCE, TEST
    from amibuild.aws import Aws
    from amibuild.channels import publish
    from amibuild.pipeline import load
    from amibuild.sandbox import seed_images

    (workdir / "amibuild.hcl").write_text(PIPELINE)
    pipeline = load(workdir / "amibuild.hcl")
    fingerprint = uuid.uuid4().hex
    amis = {}
    for region in REGIONS:
        ec2 = boto3.client("ec2", region_name=region)
        instance = ec2.run_instances(ImageId=seed_images()[0].image_id, MinCount=1, MaxCount=1)["Instances"][0]
        ami = ec2.create_image(InstanceId=instance["InstanceId"], Name=f"bench-verify-{region}")["ImageId"]
        ec2.create_tags(Resources=[ami], Tags=[{"Key": "amibuild:variant", "Value": "ceph"},
                                               {"Key": "amibuild:fingerprint", "Value": fingerprint}])
        amis[region] = ami
    aws = Aws(region="us-west-2")
    attestor = sign.attestor(aws, pipeline)
    provenance = predicates.provenance(
        amibuild_version=__version__, pipeline=pipeline.name, pipeline_file="amibuild.hcl", pipeline_digest=None,
        git_commit=None, variant="ceph", fingerprint=fingerprint, inputs=pipeline.variants[0].settings(),
        source_amis={}, account=attestor.where.account, packer_version="1.6.6", run_id="bench-run",
        regions=list(REGIONS), started="", finished="")
    test = predicates.test({"result": "passed", "run_id": "bench-test", "checks": [
        {"name": f"check-{i}", "stage": "boot", "result": "passed", "exit_status": 0, "seconds": 0.1}
        for i in range(12)]}, finished="2026-12-03T00:00:00Z")
    for predicate_type, predicate, run in ((PROVENANCE, provenance, "bench-run"), (TEST, test, "bench-test")):
        stored = attestor.make(amis, predicate_type, predicate, run)
        if not stored.signed or stored.error:
            raise RuntimeError(f"not signed: {stored.error or stored.unsigned_reason}")
    publish.publish_variant(aws, pipeline=pipeline, variant=pipeline.variants[0], amis=amis)
    return amis


def _per_region(calls) -> list[str]:
    regions = sorted({region for _, _, region in calls})
    out = []
    for region in regions:
        counts = Counter(f"{s}:{op}" for s, op, r in calls if r == region)
        out.append(f"{region}: " + ", ".join(f"{name} x{n}" for name, n in sorted(counts.items())))
    return out


def run() -> Report:
    from amibuild.aws import Aws
    from amibuild.channels import evidence, channel_verify as verify
    from amibuild.cli.target import platform
    from amibuild.jobs import verify_job
    from amibuild.pipeline import Overrides, load
    from amibuild.pipeline.options import Options
    from amibuild.sandbox import Sandbox

    saved = dict(os.environ)
    rows: list[Row] = []
    notes: list[str] = []
    with Sandbox() as sandbox, tempfile.TemporaryDirectory(prefix="bench-verify-") as scratch:
        workdir = Path(scratch)
        try:
            os.environ.update(sandbox.env())
            _setup(workdir)
            repo = Path(__file__).resolve().parent.parent
            command = [sys.executable, "-m", "invoke", "-r", str(repo), "verify", "--variant", "ceph",
                       "--channel", "recommended", "--json"]

            def end_to_end(args: list[str] = command) -> None:
                done = subprocess.run(args, cwd=workdir, capture_output=True, text=True, timeout=120)
                if done.returncode != 0:
                    raise RuntimeError(f"{args[5]} exited {done.returncode}: {done.stderr[-500:]}")

            reference = [*command[:5], "channels", "--json"]

            options = Options(pipeline_file=str(workdir / "amibuild.hcl"), overrides=Overrides(variants=("ceph",)),
                              build_dir=str(workdir / "build"))
            aws = Aws(region="us-west-2")
            pipeline = load(workdir / "amibuild.hcl")

            def in_process() -> None:
                report, _ = verify_job.verify_report(options, ami=None, variant="ceph", channel="recommended",
                                                     region=None, platform=platform, aws=aws)
                if not report.ok:
                    raise RuntimeError(f"not ok: {report.to_dict()}")

            def reads() -> None:
                verify.channel_targets(aws, pipeline, pipeline.variants[0], "recommended", REGIONS)

            targets = verify.channel_targets(aws, pipeline, pipeline.variants[0], "recommended", REGIONS)

            def statements() -> None:
                evidence.Reader(aws, pipeline).read({t.region: t.image for t in targets})

            def render() -> None:
                verify_job.today_renders(options, pipeline, aws, ["ceph"], platform=platform)

            mark = len(aws.calls)
            in_process()
            counted = aws.calls[mark:]
            timings = interleave({"verify, end to end (subprocess)": end_to_end,
                                  "reference: `channels --json` (subprocess)": lambda: end_to_end(reference),
                                  "verify, in process": in_process,
                                  "  the channel's reads": reads, "  statements read and verified": statements,
                                  "  today's render": render}, runs=RUNS)
            for label, timing in timings.items():
                target = (Target(2000) if label.startswith("verify, end to end") else
                          None if label.startswith("reference") else Target(2000, soft=True))
                rows.append(Row(label, ms(timing.median), target=target, detail=timing.spread()))
            total = Counter(f"{s}:{op}" for s, op, _ in counted)
            rows.append(Row("AWS calls of one verify (3 regions)", len(counted), unit="",
                            detail=", ".join(f"{name} x{n}" for name, n in sorted(total.items()))))
            notes += ["per region: " + line for line in _per_region(counted)]
            notes.append("made once, in the attestation region (us-west-2): sts:GetCallerIdentity, kms:DescribeKey, "
                         "kms:GetPublicKey; per region: ssm:GetParameter and ec2:DescribeImages (the channel), "
                         "s3:ListObjectsV2 and one s3:GetObject per statement about that region's image (sent to "
                         "the bucket's region); the rest is today's render (its source AMI lookups)")
            notes.append("a gated promote (`requires = [\"tested\"]`) adds the same statement reads: the key and its "
                         "public key once, a listing and the GetObjects per region")
        finally:
            os.environ.clear()
            os.environ.update(saved)
    return Report(rows, notes, setup=f"{RUNS} runs after a warm-up, interleaved, medians; local emulator, 3 regions")


if __name__ == "__main__":
    from benchmarks.common import format_report

    print(format_report(NAME, DESCRIPTION, run(), 0.0))
