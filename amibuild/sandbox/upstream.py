"""Sandbox seed for the upstream base: what a `--base upstream` build finds in a real account.

* Amazon Linux source images as upstream's templates filter for them (owner 137112412989):
  ``amzn2-ami-minimal-hvm-*`` (named ``...-gp2`` so the later ``amzn2-ami-minimal-hvm-*-gp2``
  filter matches too) and AL2023 minimal images for the kernels upstream's filters have named
  (``al2023-ami-minimal-2023.*-kernel-6.1*``, ``...-kernel-6.18-*``), both architectures, two
  releases each;
* the ``amazon-eks`` binaries bucket (us-west-2): for every Kubernetes version the sandbox seeds
  EKS images for, a few patch releases and build dates under ``<1.N.P>/<date>/bin/linux/<arch>/``,
  numbered so that a plain string sort would pick the wrong one (1.N.9 vs 1.N.10).

Pure data here; `seed` runs in the emulator process and writes into moto's backends.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Iterable

from amibuild.sandbox.images import moto_ami

AMAZON_LINUX_OWNER = "137112412989"
BINARY_BUCKET = "amazon-eks"
BINARY_BUCKET_REGION = "us-west-2"
# (patch, build date): the newest is the highest patch, then the latest date
BINARY_BUILDS = ((2, "2024-01-04"), (9, "2024-05-12"), (10, "2024-06-20"), (10, "2024-07-03"))
BINARIES = ("kubelet", "kubectl", "aws-iam-authenticator", "ecr-credential-provider")
AL2_RELEASES = ("2.0.20240109.0", "2.0.20240131.0")
AL2023_RELEASES = ("2023.5.20240624.0", "2023.6.20241010.0")
AL2023_KERNELS = ("6.1", "6.12", "6.18")
ARCHES = ("x86_64", "arm64")


@dataclass(frozen=True)
class SourceImage:
    """An Amazon Linux minimal image, the kind upstream's templates start from."""

    name: str
    arch: str
    creation_date: str

    @property
    def image_id(self) -> str:
        return "ami-" + hashlib.sha256(self.name.encode()).hexdigest()[:17]

    def to_moto(self) -> dict[str, Any]:
        return moto_ami(self.image_id, self.name, description=f"Amazon Linux minimal {self.name}",
                        owner=AMAZON_LINUX_OWNER, arch=self.arch, creation_date=self.creation_date)


def _date(release: str) -> str:
    stamp = release.split(".")[2]  # 2.0.YYYYMMDD.0 / 2023.N.YYYYMMDD.0
    return f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:]}T00:00:00.000Z"


def source_images() -> list[SourceImage]:
    images = [
        SourceImage(f"amzn2-ami-minimal-hvm-{release}-{arch}-gp2", arch, _date(release))
        for release in AL2_RELEASES for arch in ARCHES
    ]
    images += [
        SourceImage(f"al2023-ami-minimal-{release}-kernel-{kernel}-{arch}", arch, _date(release))
        for release in AL2023_RELEASES for kernel in AL2023_KERNELS for arch in ARCHES
    ]
    return images


def binary_keys(minors: Iterable[str]) -> list[str]:
    """Every object key of the seeded binaries bucket."""
    return [
        f"{minor}.{patch}/{built}/bin/linux/{arch}/{binary}"
        for minor in sorted(set(minors)) for patch, built in BINARY_BUILDS
        for arch in ARCHES for binary in BINARIES
    ]


def newest_binaries(minor: str) -> tuple[str, str]:
    """(1.N.P, date) that `make k8s=1.N` would pick in the seeded bucket."""
    patch, built = max(BINARY_BUILDS)
    return f"{minor}.{patch}", built


def seed(regions: Iterable[str], account_id: str, minors: Iterable[str], bucket: bool = True) -> None:
    """Emulator side: the source images in every region, the binaries bucket with its objects
    (unless ``bucket`` is false: a reset of some regions leaves the partition's S3 alone)."""
    from moto.core.parse import default_timestamp_parser
    from moto.ec2.models import ec2_backends
    from moto.ec2.models.amis import Ami
    from moto.s3.models import s3_backends

    for region in regions:
        ec2 = ec2_backends[account_id][region]
        for image in source_images():
            fields = image.to_moto()
            fields["creation_date"] = default_timestamp_parser(fields["creation_date"])
            ec2.amis[image.image_id] = Ami(ec2, owner_alias="amazon", **fields)
    if not bucket:
        return
    s3 = s3_backends[account_id]["aws"]
    s3.create_bucket(BINARY_BUCKET, BINARY_BUCKET_REGION)
    for key in binary_keys(minors):
        s3.put_object(BINARY_BUCKET, key, f"sandbox stand-in for {key}\n".encode())
