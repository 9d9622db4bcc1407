"""Where statements live in S3 (pure key names), and putting, listing and getting them.

Layout, in the attestation bucket (default ``amibuild-attestations-<account>``, in the pipeline's
first region), under a prefix only the pipeline's role writes::

    amibuild/<pipeline>/images/<ami-id>/<kind>/<run-id>.dsse.json

One object per image a statement names (the same envelope under each region's AMI id), so
every statement about an image, from any region's id, is one ListObjectsV2 of
``amibuild/<pipeline>/images/<ami-id>/``. ``kind`` is ``provenance``, ``test`` or ``scan``; the
image's SBOM is ``.../<ami-id>/sbom/<run-id>.cdx.json`` (not a statement: the provenance signs its digest).
"""

from __future__ import annotations

import re
from typing import Any

ROOT = "amibuild"
SUFFIX = ".dsse.json"
_KEY = re.compile(r"[^/]+/[^/]+/images/(ami-[0-9a-f]+)/([a-z-]+)/([^/]+)\.dsse\.json")


def default_bucket(account: str) -> str:
    return f"amibuild-attestations-{account}"


def pipeline_prefix(pipeline: str) -> str:
    """What the pipeline's role alone may write (`iam-policy`)."""
    return f"{ROOT}/{pipeline}/"


def image_prefix(pipeline: str, image_id: str) -> str:
    return f"{pipeline_prefix(pipeline)}images/{image_id}/"


def statement_key(pipeline: str, image_id: str, kind: str, run_id: str) -> str:
    return f"{image_prefix(pipeline, image_id)}{kind}/{run_id}{SUFFIX}"


SBOM_SUFFIX = ".cdx.json"


def sbom_key(pipeline: str, image_id: str, run_id: str) -> str:
    """The image's CycloneDX SBOM, beside its statements (its digest is in the signed provenance)."""
    return f"{image_prefix(pipeline, image_id)}sbom/{run_id}{SBOM_SUFFIX}"


def sbom_keys(aws: Any, bucket: str, region: str, pipeline: str, image_id: str) -> list[str]:
    """The SBOM keys stored for ``image_id``, oldest run first."""
    prefix = image_prefix(pipeline, image_id) + "sbom/"
    return sorted(k for k in aws.list_keys(bucket, prefix, region) if k.endswith(SBOM_SUFFIX))


def parse_key(key: str) -> tuple[str, str, str] | None:
    """(image id, kind, run id) of a statement's key, None for any other key."""
    found = _KEY.fullmatch(key)
    return found.groups() if found else None


def fetch(aws: Any, bucket: str, region: str, pipeline: str, image_id: str, kind: str = "") -> list[tuple[str, bytes]]:
    """(key, envelope bytes) of every statement about ``image_id`` (of one ``kind``, or all), oldest run first."""
    prefix = image_prefix(pipeline, image_id) + (f"{kind}/" if kind else "")
    keys = [k for k in aws.list_keys(bucket, prefix, region) if parse_key(k)]
    return [(k, aws.get_object(bucket, k, region)) for k in keys]
