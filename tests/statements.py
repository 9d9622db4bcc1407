"""Images as a pipeline's build leaves them, for the gate, verify and fleet tests: an image per region
with amibuild's tags, and the signed statements build-ami and test-ami make about it (provenance,
test), made with the pipeline's real signing path (`amibuild.attest.sign`) against the emulator's KMS
and S3. Each part can be left out or spoiled: no provenance (a foreign image), unsigned (a key that
does not exist), a hand-set ``amibuild:test`` tag.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Mapping, Sequence

import boto3

from amibuild import __version__
from amibuild.attest import predicates, sign
from amibuild.attest.statement import PROVENANCE, SCAN, TEST
from amibuild.aws import Aws
from amibuild.sandbox import seed_images

ACCOUNT = "123456789012"
BUCKET = f"amibuild-attestations-{ACCOUNT}"


def where(pipeline: str, kms_key: str = "alias/amibuild") -> sign.Where:
    return sign.Where(pipeline, ACCOUNT, kms_key, BUCKET, "us-west-2")


def images(variant: str, regions: Sequence[str], *, tag: str | None = None, fingerprint: str | None = None,
           pipeline: str = "") -> dict[str, str]:
    """{region: a new image} tagged as a build tags it (``tag``: a hand-set amibuild:test)."""
    amis = {}
    source = seed_images()[0].image_id
    fingerprint = fingerprint or uuid.uuid4().hex
    for region in regions:
        ec2 = boto3.client("ec2", region_name=region)
        instance = ec2.run_instances(ImageId=source, MinCount=1, MaxCount=1, InstanceType="m5.large")
        ami = ec2.create_image(InstanceId=instance["Instances"][0]["InstanceId"],
                               Name=f"amibuild-{variant}-{uuid.uuid4().hex[:8]}")["ImageId"]
        found = {"amibuild:variant": variant, "amibuild:fingerprint": fingerprint,
                 "amibuild:run-id": f"run-{fingerprint[:6]}"}
        if pipeline:
            found["amibuild:pipeline"] = pipeline
        if tag:
            found["amibuild:test"] = tag
        ec2.create_tags(Resources=[ami], Tags=[{"Key": k, "Value": v} for k, v in found.items()])
        amis[region] = ami
    return amis


def provenance(pipeline: str, variant: str, amis: Mapping[str, str], *, fingerprint: str,
               kms_key: str = "alias/amibuild", settings: Mapping[str, object] | None = None,
               source_amis: Mapping[str, str] | None = None) -> sign.Stored:
    """The provenance statement build-ami makes about ``amis``, signed and stored."""
    aws = Aws(region="us-west-2")
    place = where(pipeline, kms_key)
    predicate = predicates.provenance(
        amibuild_version=__version__, pipeline=pipeline, pipeline_file="amibuild.hcl", pipeline_digest="0" * 64,
        git_commit=None, variant=variant, fingerprint=fingerprint, inputs=dict(settings or {"name": variant}),
        source_amis=dict(source_amis or {}), account=ACCOUNT, packer_version="1.6.6", run_id=f"run-{fingerprint[:6]}",
        regions=sorted(amis), started="", finished="")
    done = sign.Attestor(aws, place, sign.signer(aws, place)).make(amis, PROVENANCE, predicate, f"run-{fingerprint[:6]}")
    assert not done.error, done.error
    return done


def sign_test(pipeline: str, amis: Mapping[str, str], verdict: str, *, kms_key: str = "alias/amibuild",
                   run_id: str | None = None) -> sign.Stored:
    """The test statement test-ami makes about ``amis``, with the verdict given, signed and stored."""
    aws = Aws(region="us-west-2")
    place = where(pipeline, kms_key)
    run = run_id or f"test-{uuid.uuid4().hex[:8]}"
    result = {"result": verdict, "run_id": run, "variant": "", "region": "us-west-2",
              "checks": [{"name": "kubelet", "stage": "boot", "result": verdict, "exit_status": 0 if verdict == "passed"
                          else 1, "seconds": 0.1}]}
    predicate = predicates.test(result, finished=datetime.now(timezone.utc).isoformat())
    done = sign.Attestor(aws, place, sign.signer(aws, place)).make(amis, TEST, predicate, run)
    assert not done.error, done.error
    return done


def sign_scan(pipeline: str, amis: Mapping[str, str], findings: Sequence[Mapping[str, object]], *,
              kms_key: str = "alias/amibuild") -> sign.Stored:
    """The scan statement `amibuild scan` makes about ``amis``, with the findings given (`Finding.to_dict()`)."""
    aws = Aws(region="us-west-2")
    place = where(pipeline, kms_key)
    predicate = {"scanner": {"uri": "https://inspector-scan.amazonaws.com/scan/sbom", "result": []},
                 "findings": [dict(f) for f in findings]}
    done = sign.Attestor(aws, place, sign.signer(aws, place)).make(amis, SCAN, predicate, f"scan-{uuid.uuid4().hex[:8]}")
    assert not done.error, done.error
    return done


def build(pipeline: str, variant: str, regions: Sequence[str], test: str | None = "passed", *,
          signed_provenance: bool = True, tag: str | None = None, kms_key: str = "alias/amibuild") -> dict[str, str]:
    """Images a build made (provenance signed unless told not to) and, with ``test``, the boot test's
    signed verdict; ``tag``: a hand-set amibuild:test tag on top."""
    fingerprint = uuid.uuid4().hex
    amis = images(variant, regions, tag=tag, fingerprint=fingerprint, pipeline=pipeline)
    if signed_provenance:
        provenance(pipeline, variant, amis, fingerprint=fingerprint, kms_key=kms_key)
    if test:
        sign_test(pipeline, amis, test, kms_key=kms_key)
    return amis
