"""What the sandbox seeds (pure data, shared by the parent and the emulator process) and the
child-side `Seeder` that writes it into moto's backends."""

from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, Iterable

from amibuild.sandbox import SandboxError
from amibuild.sandbox.images import moto_ami
from amibuild.sandbox.eks_cluster import create_cluster
from amibuild.sandbox import kms_hmac as kms_mac

SEED_REGIONS: tuple[str, ...] = (
    "us-west-2",
    "us-east-1",
    "eu-west-1",
    "eu-central-1",
    "ap-southeast-2",
)
DEFAULT_REGION = "us-west-2"
ACCOUNT_ID = "123456789012"  # moto's default account: what the dummy credentials map to
EKS_AMI_OWNER = "602401143452"
OS_FAMILIES = ("al2", "al2023")
ARCHITECTURES = ("x86_64", "arm64")
# AWS published AL2 images up to Kubernetes 1.32 (1.22 is the default of AWS's own node group
# template), and AL2023 ones from 1.28 on.
KUBERNETES_VERSIONS = {
    "al2": tuple(f"1.{minor}" for minor in range(22, 33)),
    "al2023": tuple(f"1.{minor}" for minor in range(28, 36)),
}
# Accelerated parents per OS, with the architectures AWS publishes each for (standard: both).
FLAVOR_SEEDS = {
    "al2023": {"nvidia": ("x86_64", "arm64"), "neuron": ("x86_64",)},
    "al2": {"gpu": ("x86_64",)},
}
SEED_RELEASES = ("20231201", "20240101")  # the last one is "recommended"
RELEASE_STEP = timedelta(days=14)  # how much newer `release()` makes the next image by default
SANDBOX_VPC_NAME = "amibuild-sandbox"
SANDBOX_VPC_CIDR = "10.42.0.0/16"
SANDBOX_SUBNETS = (("a", "10.42.0.0/24"), ("b", "10.42.1.0/24"))
TRIPWIRE_PROXY = "http://127.0.0.1:9"  # discard port: a stray non-loopback call fails at once
LOOPBACK = "127.0.0.1"
API_PREFIX = "/amibuild-sandbox"
PORT_LINE = re.compile(rb"^AMIBUILD_SANDBOX_PORT=(\d+)$", re.MULTILINE)
PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "ALL_PROXY")
_K8S_VERSION = re.compile(r"^[0-9]+\.[0-9]+\Z")
_RELEASE_DATE = re.compile(r"^[0-9]{8}\Z")


# --------------------------------------------------------------------------------------------
# What gets seeded: pure data, shared by both processes.


@dataclass(frozen=True)
class EksImage:
    """One EKS-optimized base image as AWS publishes it."""

    k8s: str
    os: str  # "al2" | "al2023"
    arch: str  # "x86_64" | "arm64"
    release: str  # YYYYMMDD, as in the name's -vYYYYMMDD suffix
    flavor: str = "standard"  # or an accelerated one of `FLAVOR_SEEDS`

    @property
    def name(self) -> str:
        if self.os == "al2":
            if self.flavor == "gpu":
                return f"amazon-eks-gpu-node-{self.k8s}-v{self.release}"
            kind = "node" if self.arch == "x86_64" else "arm64-node"
            return f"amazon-eks-{kind}-{self.k8s}-v{self.release}"
        return f"amazon-eks-node-al2023-{self.arch}-{self.flavor}-{self.k8s}-v{self.release}"

    @property
    def image_id(self) -> str:
        # Deterministic and shaped like a real id, so logs and fixtures stay stable across runs.
        return "ami-" + hashlib.sha256(self.name.encode()).hexdigest()[:17]

    @property
    def creation_date(self) -> str:
        r = self.release
        return f"{r[:4]}-{r[4:6]}-{r[6:]}T00:00:00.000Z"

    @property
    def parameter_prefix(self) -> str:
        return recommended_prefix(self.k8s, self.os, self.arch, self.flavor)

    def to_moto(self) -> dict[str, Any]:
        """The entry for a ``MOTO_AMIS_PATH`` file (keyword arguments of moto's ``Ami``)."""
        base = "Amazon Linux 2" if self.os == "al2" else "Amazon Linux 2023"
        return moto_ami(self.image_id, self.name, owner=EKS_AMI_OWNER, arch=self.arch, creation_date=self.creation_date,
                        description=f"EKS Kubernetes Worker AMI with {base} image (k8s: {self.k8s})")


def check_kind(os_family: str, arch: str) -> None:
    if os_family not in OS_FAMILIES:
        raise SandboxError(f"unknown os {os_family!r}: use one of {', '.join(OS_FAMILIES)}")
    if arch not in ARCHITECTURES:
        raise SandboxError(f"unknown arch {arch!r}: use one of {', '.join(ARCHITECTURES)}")


def recommended_prefix(k8s: str, os: str, arch: str, flavor: str = "standard") -> str:  # noqa: A002
    """``/aws/service/eks/optimized-ami/<k8s>/<os path>/recommended`` for one image kind."""
    check_kind(os, arch)
    if flavor != "standard" and arch not in FLAVOR_SEEDS[os].get(flavor, ()):
        raise SandboxError(f"no {os} {flavor} image for {arch}: flavors are "
                           f"{', '.join(['standard', *FLAVOR_SEEDS[os]])}")
    if os == "al2":
        path = "amazon-linux-2-gpu" if flavor == "gpu" else (
            "amazon-linux-2" if arch == "x86_64" else "amazon-linux-2-arm64")
    else:
        path = f"amazon-linux-2023/{arch}/{flavor}"
    return f"/aws/service/eks/optimized-ami/{k8s}/{path}/recommended"


def recommended_parameter(k8s: str, os: str, arch: str, flavor: str = "standard") -> str:  # noqa: A002
    """The public SSM parameter holding the recommended image id for one image kind."""
    return recommended_prefix(k8s, os, arch, flavor) + "/image_id"


def seed_images() -> list[EksImage]:
    """Every base image the sandbox starts with (same ids in every region)."""
    return [
        EksImage(k8s, os_family, arch, release, flavor)
        for os_family in OS_FAMILIES
        for k8s in KUBERNETES_VERSIONS[os_family]
        for flavor, arches in (("standard", ARCHITECTURES), *FLAVOR_SEEDS[os_family].items())
        for arch in arches
        for release in SEED_RELEASES
    ]



# Child side: runs in the emulator process only.


class Seeder:
    """Seeds the in-process moto backends, and publishes newer images on request."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.released: list[EksImage] = []

    def seed(self, regions: Iterable[str] = SEED_REGIONS, *, full: bool = True) -> None:
        """Seed `regions`: after a full reset (``full``) every region, the releases forgotten and the
        buckets made again; after a partial reset only the regions it dropped (all five of them, it
        may be: S3 is not a region's, so its buckets are still there)."""
        from moto.ec2.models import ec2_backends
        from moto.ssm.models import ssm_backends
        from amibuild.sandbox import kms_signing as kms, upstream  # deferred: only the emulator process seeds

        regions = tuple(regions)
        if full:
            self.released = []
        newest: dict[tuple[str, str, str, str], EksImage] = {}
        for image in seed_images():
            key = (image.k8s, image.os, image.arch, image.flavor)
            if key not in newest or image.release > newest[key].release:
                newest[key] = image
        for region in regions:
            ssm = ssm_backends[ACCOUNT_ID][region]
            for image in newest.values():
                _point_parameters(ssm, image)
            _create_vpc(ec2_backends[ACCOUNT_ID][region], region)
            create_cluster(ec2_backends[ACCOUNT_ID][region], region, account=ACCOUNT_ID, vpc_cidr=SANDBOX_VPC_CIDR)
            kms_mac.seed(ACCOUNT_ID, region)  # the fingerprint key, so sandbox builds MAC their credentials
        upstream.seed(regions, ACCOUNT_ID, {k for versions in KUBERNETES_VERSIONS.values() for k in versions},
                      bucket=full)
        kms.seed(regions, ACCOUNT_ID, bucket=full)  # the statements' key and bucket

    def release(self, k8s: str, os_family: str, arch: str, release: str | None) -> EksImage:
        from moto.core.parse import default_timestamp_parser
        from moto.ec2.models import ec2_backends
        from moto.ec2.models.amis import Ami
        from moto.ssm.models import ssm_backends

        check_kind(os_family, arch)
        if not _K8S_VERSION.match(k8s):
            raise SandboxError(f"kubernetes version {k8s!r} is not like 1.30")
        known = [i.release for i in seed_images() + self.released
                 if (i.k8s, i.os, i.arch) == (k8s, os_family, arch)] or list(SEED_RELEASES)
        newest = max(known)
        if release is None:
            day = date(int(newest[:4]), int(newest[4:6]), int(newest[6:])) + RELEASE_STEP
            release = day.strftime("%Y%m%d")
        elif not _RELEASE_DATE.match(release) or release <= newest:
            raise SandboxError(f"release {release!r} must be YYYYMMDD and newer than {newest}")
        image = EksImage(k8s, os_family, arch, release)
        for region in SEED_REGIONS:
            ec2 = ec2_backends[ACCOUNT_ID][region]
            fields = image.to_moto()
            fields["creation_date"] = default_timestamp_parser(fields["creation_date"])
            ami = Ami(ec2, owner_alias="amazon", **fields)
            ec2.amis[ami.id] = ami
            _point_parameters(ssm_backends[ACCOUNT_ID][region], image)
        self.released.append(image)
        return image


def _point_parameters(ssm: Any, image: EksImage) -> None:
    """Add a version of the image's public parameters (``image_id``, ``image_name``)."""
    from moto.core.utils import utcnow
    from moto.ssm.models import Parameter

    for leaf, value in (("image_id", image.image_id), ("image_name", image.name)):
        name = f"{image.parameter_prefix}/{leaf}"
        # put_parameter refuses /aws/ names (as AWS does), so write into the backend's store.
        versions = ssm._parameters[name]
        versions.append(
            Parameter(
                account_id=ACCOUNT_ID,
                name=name,
                value=value,
                parameter_type="String",
                description=None,
                allowed_pattern=None,
                keyid=None,
                last_modified_date=utcnow(),
                version=versions[-1].version + 1 if versions else 1,
                data_type="text",
                tier="Standard",
            )
        )


def _create_vpc(ec2: Any, region: str) -> None:
    name_tag = [{"Key": "Name", "Value": SANDBOX_VPC_NAME}]
    vpc = ec2.create_vpc(cidr_block=SANDBOX_VPC_CIDR, tags=name_tag)
    for zone, cidr in SANDBOX_SUBNETS:
        subnet = ec2.create_subnet(vpc_id=vpc.id, cidr_block=cidr, availability_zone=region + zone)
        ec2.create_tags([subnet.id], {"Name": f"{SANDBOX_VPC_NAME}-{zone}"})

