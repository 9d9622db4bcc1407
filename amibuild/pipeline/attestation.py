"""The pipeline's ``attestation { kms_key = "alias/amibuild", bucket = "...", region = "..." }`` block:
the KMS key that signs amibuild's statements about its images, the S3 bucket they are kept in, and
the region of both. Every field has a default, so a pipeline needs no block when they exist."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from amibuild.errors import SpecError
from amibuild.suggest import check_fields, one_block, suggest

DEFAULT_KEY = "alias/amibuild"
KEYS = ("kms_key", "bucket", "region")

_ALIAS = re.compile(r"alias/[A-Za-z0-9/_-]{1,250}")
_KEY_ID = re.compile(r"(mrk-[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")
_KEY_ARN = re.compile(r"arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:(key/" + _KEY_ID.pattern + r"|alias/[A-Za-z0-9/_-]{1,250})")
BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")  # an S3 bucket name (fullmatch)
_IP = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")


@dataclass(frozen=True)
class AttestationSettings:
    """Where statements are signed and kept; empty bucket / region mean the defaults
    (``amibuild-attestations-<account id>``, the pipeline's first region); an empty key, none (unsigned)."""

    kms_key: str = DEFAULT_KEY
    bucket: str = ""
    region: str = ""


def attestation_settings(value: Any, where: str, known_regions: frozenset[str]) -> AttestationSettings:
    """The block's values, each checked; SpecError naming the field and what to write."""
    body = one_block(value, where, f'attestation {{ kms_key = "{DEFAULT_KEY}", bucket = "...", region = "..." }}')
    check_fields(body, KEYS, where, f"the block has {', '.join(KEYS)}")
    for key in KEYS:
        if key in body and not isinstance(body[key], str):
            raise SpecError(f"{where}.{key}: a string in quotes")
    kms_key = body.get("kms_key", DEFAULT_KEY)
    if kms_key and not (_ALIAS.fullmatch(kms_key) or _KEY_ID.fullmatch(kms_key) or _KEY_ARN.fullmatch(kms_key)):
        raise SpecError(f"{where}.kms_key {kms_key!r}: a KMS key alias (alias/amibuild), key id or key ARN; "
                        '"" for none (statements unsigned)')
    if kms_key.startswith("alias/aws/") or ":alias/aws/" in kms_key:  # as an alias or as its ARN
        raise SpecError(f"{where}.kms_key {kms_key!r}: an AWS managed key cannot sign; name an asymmetric "
                        "ECC_NIST_P256 SIGN_VERIFY key of your own")
    bucket = body.get("bucket", "")
    if bucket and (not BUCKET.fullmatch(bucket) or ".." in bucket or _IP.fullmatch(bucket)):
        raise SpecError(f"{where}.bucket {bucket!r}: an S3 bucket name (3-63 lowercase letters, digits, '.' and '-', "
                        "starting and ending with a letter or digit); leave it out for amibuild-attestations-<account id>")
    region = body.get("region", "")
    if region and region not in known_regions:
        raise SpecError(f"{where}.region: unknown region {region!r}{suggest(region, sorted(known_regions))}")
    return AttestationSettings(kms_key, bucket, region)
