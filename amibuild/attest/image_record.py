"""The canonical record of an image, its SHA-256, and the image's ARN: what a statement's subject names.

The record is what DescribeImages shows of an image and a statement binds: its id, its region and
its snapshot ids (sorted), as canonical JSON (sorted keys, no whitespace, UTF-8)::

    {"id":"ami-0123456789abcdef0","region":"eu-west-1","snapshots":["snap-0a","snap-0b"]}

A new snapshot, another region or another id gives another digest. Pure.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable

from amibuild.pipeline.validation import region_partitions


def canonical_json(value: Any) -> bytes:
    """``value`` as canonical JSON: sorted keys, no whitespace, UTF-8 (not ASCII-escaped)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def image_record(image_id: str, region: str, snapshot_ids: Iterable[str]) -> dict[str, Any]:
    return {"id": image_id, "region": region, "snapshots": sorted(set(snapshot_ids))}


def record_digest(image_id: str, region: str, snapshot_ids: Iterable[str]) -> str:
    """The hex SHA-256 of the image's canonical record."""
    return hashlib.sha256(canonical_json(image_record(image_id, region, snapshot_ids))).hexdigest()


def partition(region: str) -> str:
    """The AWS partition a region belongs to (aws, aws-cn, aws-us-gov, aws-eusc, ...), from botocore's data."""
    return region_partitions().get(region, "aws")


def image_arn(region: str, account: str, image_id: str) -> str:
    """``arn:<partition>:ec2:<region>:<account>:image/<ami>``."""
    return f"arn:{partition(region)}:ec2:{region}:{account}:image/{image_id}"
