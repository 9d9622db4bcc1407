"""The inventory and scan steps: seconds of each, and the AWS calls each adds to a build.

Setup (untimed): a local emulator (its own `Sandbox`), one image made straight on it, an inventory
of 1,500 rpms (the shapes Amazon Linux uses; htop among them, which the sandbox's list marks high).

Timed, in process, median of 3: the build's SBOM step (the inventory parsed, CycloneDX 1.5 made with
cyclonedx-python-lib, stored under the image's AMI id: `bake.sboms.document_of` + PutObject), and
the scan step (`jobs.image_inventory.scan_document`: ScanSbom in batches of 2,000, the findings
signed and stored) for 1,500 and 2,500 components (one and two batches).

Counted: the gateway's own call log (`Aws.calls`) of each step. Not measured here: the inventory
script on a real build instance (rpm -qa and dnf list installed) and its
download, which run inside Packer.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository root belongs on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import Report, Row  # noqa: E402

NAME = "inventory_scan"
DESCRIPTION = "the build's SBOM step and the scan step: seconds and the AWS calls each adds"
RUNS = 3
PIPELINE = 'pipeline {\n  name = "bench-inv"\n  regions = ["us-west-2"]\n}\nvariant "ceph" {\n}\n'


def _inventory(count: int) -> str:
    lines = [f"pkg-{i:04d}\t(none)\t{1 + i % 7}.{i % 13}.{i % 5}\t2.amzn2023.0.{i % 4}\tx86_64\tamazonlinux\tMIT"
             for i in range(count - 1)]
    lines.append("htop\t(none)\t3.2.1\t1.amzn2023\tx86_64\tamazonlinux\tGPLv2")
    return "\n".join(lines) + "\n"


def _median(action) -> float:
    samples = []
    for _ in range(RUNS):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def _calls(calls) -> str:
    return ", ".join(f"{name} x{n}" for name, n in sorted(Counter(f"{s}:{op}" for s, op, _ in calls).items()))


def run() -> Report:
    from datetime import datetime, timezone

    import boto3

    from amibuild.attest import sign, store
    from amibuild.aws import Aws
    from amibuild.bake.sboms import document_of
    from amibuild.jobs.image_inventory import scan_document
    from amibuild.pipeline import load
    from amibuild.sandbox import Sandbox, seed_images

    saved = dict(os.environ)
    rows: list[Row] = []
    with Sandbox() as sandbox, tempfile.TemporaryDirectory(prefix="bench-inv-") as scratch:
        try:
            os.environ.update(sandbox.env())
            (Path(scratch) / "amibuild.hcl").write_text(PIPELINE)
            pipeline = load(Path(scratch) / "amibuild.hcl")
            ec2 = boto3.client("ec2", region_name="us-west-2")
            instance = ec2.run_instances(ImageId=seed_images()[0].image_id, MinCount=1, MaxCount=1)["Instances"][0]
            ami = ec2.create_image(InstanceId=instance["InstanceId"], Name="bench-inv")["ImageId"]
            aws = Aws(region="us-west-2")
            attestor = sign.attestor(aws, pipeline)
            documents = {}

            for count in (1500, 2500):
                text = _inventory(count)

                def sbom_step(text: str = text, count: int = count) -> None:
                    document, _ = document_of(text, os_name="al2023", image=ami, created=datetime.now(timezone.utc))
                    aws.put_object(attestor.where.bucket, store.sbom_key(pipeline.name, ami, f"bench-{count}"),
                                   document.encode(), attestor.where.region)
                    documents[count] = document

                mark = len(aws.calls)
                sbom_step()
                counted = aws.calls[mark:]
                rows.append(Row(f"SBOM step, {count} packages (parse, CycloneDX 1.5, store)",
                                round(_median(sbom_step), 2), unit="s", detail=_calls(counted)))

                def scan_step(count: int = count) -> None:
                    done = scan_document(aws, attestor, documents[count], {"us-west-2": ami}, f"bench-{count}")
                    if not done.stored.signed or [f.id for f in done.findings] != ["AMIBUILD-SANDBOX-0001"]:
                        raise RuntimeError(f"unexpected scan: {done.to_dict()}")

                mark = len(aws.calls)
                scan_step()
                counted = aws.calls[mark:]
                rows.append(Row(f"scan step, {count} packages (ScanSbom batches, signed statement)",
                                round(_median(scan_step), 2), unit="s", detail=_calls(counted)))
        finally:
            os.environ.clear()
            os.environ.update(saved)
    notes = ["a build adds one s3:PutObject per region's AMI id for its SBOM (the digest rides in the provenance "
             "it already signs); --scan adds one inspector-scan:ScanSbom per 2,000 packages, plus the scan "
             "statement: ec2:DescribeImages per region, one kms:Sign, one s3:PutObject per region's AMI id",
             "`amibuild scan --channel` adds the reads of `verify` for the image (the statements listed and read, "
             "the key and its public key) and one ssm:GetParameterHistory for AWS's time"]
    return Report(rows, notes, setup=f"median of {RUNS}, in process, local emulator")


if __name__ == "__main__":
    from benchmarks.common import format_report

    print(format_report(NAME, DESCRIPTION, run(), 0.0))
