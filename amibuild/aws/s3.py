"""S3 calls of the gateway: listing the EKS binaries bucket; putting, getting and listing the signed statements."""

from __future__ import annotations

import os
from typing import Any

from amibuild.aws.error_map import mapped_errors
from botocore.config import Config


class S3Calls:
    """S3 calls; mixed into `amibuild.aws.Aws` (needs `Session`'s clients)."""

    def _s3(self, region: str) -> Any:
        def config() -> Config:
            if os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"):
                # a local endpoint (the emulator on 127.0.0.1) has no per-bucket host names
                return self._config.merge(Config(s3={"addressing_style": "path"}))
            return self._config

        return self._own_client("s3:listing", region, config)

    def list_eks_binaries(self, bucket: str, region: str, prefix: str) -> list[str]:
        """The "folders" right below ``prefix`` in ``bucket`` (ListObjectsV2 with a "/" delimiter),
        without the prefix's folder part or the trailing "/": "1.30." gives ["1.30.0", "1.30.4", ...],
        "1.30.4/" gives ["2024-09-11", ...]. The EKS binaries bucket keeps ``<1.N.P>/<date>/bin/...``.
        """
        head = prefix.rsplit("/", 1)[0] + "/" if "/" in prefix else ""
        with mapped_errors(f"s3:ListObjectsV2 s3://{bucket}/{prefix}", region):
            pages = self._s3(region).get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix, Delimiter="/"
            )
            found = [p["Prefix"] for page in pages for p in page.get("CommonPrefixes", [])]
        return sorted({p[len(head):].rstrip("/") for p in found})

    def put_object(self, bucket: str, key: str, body: bytes, region: str, *, content_type: str = "application/json") -> None:
        with mapped_errors(f"s3:PutObject s3://{bucket}/{key}", region):
            self._s3(region).put_object(Bucket=bucket, Key=key, Body=body, ContentType=content_type)

    def get_object(self, bucket: str, key: str, region: str) -> bytes:
        """The object's bytes; NotFound when the bucket or the key does not exist."""
        with mapped_errors(f"s3:GetObject s3://{bucket}/{key}", region):
            return self._s3(region).get_object(Bucket=bucket, Key=key)["Body"].read()

    def list_keys(self, bucket: str, prefix: str, region: str) -> list[str]:
        """Every key under ``prefix`` (ListObjectsV2, all pages), sorted."""
        with mapped_errors(f"s3:ListObjectsV2 s3://{bucket}/{prefix}", region):
            pages = self._s3(region).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            return sorted(o["Key"] for page in pages for o in page.get("Contents", []))
