"""Which Kubernetes binaries an upstream build installs: ``kubernetes_version`` (1.N.P) and
``kubernetes_build_date``.

Upstream's scripts download kubelet and friends from ``s3://<binary_bucket_name>/<1.N.P>/<date>/
bin/linux/<arch>/``; its ``make k8s=1.N`` finds the newest pair by listing that bucket
(``hack/latest-binaries.sh``: the "VERSION/DATE" prefixes, version-sorted, the first one). `resolve`
does the same through the AWS gateway, or takes both values when the user pinned them, and says
both ways in one line when it can do neither. `newest` is the pure part.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from amibuild.errors import NotFound, SpecError

DEFAULT_BUCKET = "amazon-eks"
DEFAULT_BUCKET_REGION = "us-west-2"
_PATCH = re.compile(r"^1\.([0-9]+)\.([0-9]+)\Z")
_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")


@dataclass(frozen=True)
class Binaries:
    """The Kubernetes release an upstream build installs, and where that answer came from."""

    version: str  # 1.N.P
    build_date: str  # YYYY-MM-DD
    how: str  # "pinned" | "listed"
    note: str


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def newest(prefixes: Iterable[str], minor: str) -> str | None:
    """The newest ``1.N.P`` among bucket prefixes of the minor ``1.N`` (others ignored), or None.

    A plain string sort would put 1.30.9 above 1.30.10: versions compare as numbers, as
    ``sort -V`` does in upstream's script.
    """
    versions = [p for p in prefixes if _PATCH.match(p) and p.rsplit(".", 1)[0] == minor]
    return max(versions, key=_version_key, default=None)


def bucket_of(variables: Mapping[str, Any], user: Mapping[str, Any]) -> tuple[str, str]:
    """(bucket, region) as the build will see them: the user's vars over upstream's defaults."""
    def pick(name: str, default: str) -> str:
        value = user.get(name, variables.get(name))
        return str(value) if isinstance(value, str) and value and "{{" not in value else default

    return pick("binary_bucket_name", DEFAULT_BUCKET), pick("binary_bucket_region", DEFAULT_BUCKET_REGION)


def resolve(variant: Any, variables: Mapping[str, Any], aws: Any) -> Binaries:
    """The variant's Kubernetes binaries: pinned (1.N.P and a build date given), else listed.

    ``aws`` None means no AWS access: only a full pin works then.
    """
    k8s = variant.kubernetes_version
    user = dict(variant.packer_vars)
    date = user.get("kubernetes_build_date")
    date = str(date) if date not in (None, "") else ""
    where_date = variant.origins.get("kubernetes_build_date", "--var kubernetes_build_date")
    where_k8s = variant.origins.get("kubernetes_version", "--k8s")
    if date and not _DATE.match(date):
        raise SpecError(f"{where_date}: kubernetes_build_date {date!r} must look like YYYY-MM-DD, e.g. 2024-09-11")
    patch = _PATCH.match(k8s)
    if patch and date:
        return Binaries(k8s, date, "pinned", f"Kubernetes binaries pinned: {k8s}/{date}")
    minor = ".".join(k8s.split(".")[:2])
    bucket, region = bucket_of(variables, user)
    if aws is None:
        example = k8s if patch else f"{minor}.P"
        raise SpecError(
            f"variant {variant.name}: the upstream base needs the Kubernetes patch version and build date "
            f"of its binaries (s3://{bucket}/<1.N.P>/<date>/): configure AWS credentials so amibuild lists "
            f"the bucket as upstream's `make k8s={minor}` does, or pin both: "
            f"--k8s {example} --var kubernetes_build_date=YYYY-MM-DD"
        )
    try:
        versions = [k8s] if patch else sorted(
            (v for v in aws.list_eks_binaries(bucket, region, f"{minor}.") if newest([v], minor)),
            key=_version_key, reverse=True,
        )
        if not versions:
            raise SpecError(f"{where_k8s}: s3://{bucket} ({region}) holds no Kubernetes {minor}.P binaries: "
                            "pick another version, or set binary_bucket_name / binary_bucket_region")
        version, build_date = versions[0], None
        for candidate in versions if date else versions[:1]:
            dates = aws.list_eks_binaries(bucket, region, f"{candidate}/")
            if not date:
                build_date = max((d for d in dates if _DATE.match(d)), default=None)
            elif date in dates:  # a pinned date: the newest release built that day
                version, build_date = candidate, date
                break
    except NotFound as exc:
        raise SpecError(f"variant {variant.name}: cannot list s3://{bucket} in {region} ({exc}); "
                        "check binary_bucket_name / binary_bucket_region") from exc
    if build_date is None and date:
        raise SpecError(f"{where_date}: s3://{bucket} ({region}) holds no Kubernetes {k8s} build of {date}: "
                        "check the date, or leave kubernetes_build_date out to take the newest")
    if build_date is None:
        raise SpecError(f"{where_k8s}: s3://{bucket} ({region}) holds no build of Kubernetes {version}: "
                        "pick another version")
    what = (f"newest {minor} release built on {date}" if date
            else f"newest build of {version}" if patch else f"newest {minor} release")
    return Binaries(version, build_date, "listed", f"Kubernetes binaries: {what} in s3://{bucket} is {version}/{build_date}")
