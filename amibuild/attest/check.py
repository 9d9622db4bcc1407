"""Verifying the statements stored about an image (the I/O around `verify.verify`): the
pipeline's key (DescribeKey) and its public key (GetPublicKey), the statements (one listing and
a GetObject each), each checked against the images as DescribeImages shows them now."""

from __future__ import annotations

from typing import Any, Sequence

from amibuild.errors import AmibuildError
from amibuild.attest import store
from amibuild.attest.sign import Where
from amibuild.attest.statement import KINDS, ImageFacts
from amibuild.attest.verify import Verification, verify


def pipeline_key(aws: Any, where: Where) -> str:
    """The ARN of the pipeline's key; "" when it has none (or it cannot be read: then nothing it signed verifies)."""
    if not where.kms_key:
        return ""
    try:
        return aws.describe_key(where.kms_key, where.region).arn
    except AmibuildError:
        return ""


def verify_image(aws: Any, where: Where, images: Sequence[ImageFacts], predicate_type: str) -> list[Verification]:
    """Every stored statement of ``predicate_type`` about ``images[0]``, each verified against all of
    ``images``; oldest run first, empty when there is none."""
    kind = KINDS[predicate_type]
    found = store.fetch(aws, where.bucket, where.region, where.pipeline, images[0].image_id, kind)
    if not found:
        return []
    key_arn, public = pipeline_key(aws, where), {}
    try:  # KMS gives no public key of a disabled key or one pending deletion: nothing it signed verifies
        public = {key_arn: aws.public_key(key_arn, where.region).der} if key_arn else {}
    except AmibuildError:
        key_arn = ""
    return [verify(body, pipeline_key=key_arn, public_keys=public, images=images, account=where.account,
                   predicate_type=predicate_type, key=key) for key, body in found]
