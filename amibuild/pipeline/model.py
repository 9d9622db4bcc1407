"""The pipeline's model: the names it knows (OSES, FLAVORS, DEFAULTS, the layers of `LAYERS`) and the
frozen value objects a load produces (`Pipeline`, `Variant`, `Repo`, `Proxy`) or takes (`Overrides`)."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from amibuild import secrets
from amibuild.pipeline import imagetests, support
from amibuild.notify.destination import EventTarget
from amibuild.pipeline.attestation import AttestationSettings
from amibuild.pipeline.protection import ProtectionSettings

OSES = ("al2", "al2023")
DEFAULT_FINGERPRINT_KEY = "alias/amibuild-fingerprint"
ARCHES = ("x86_64", "arm64")
BASES = ("eks-optimized", "upstream")
VOLUME_TYPES = ("gp2", "gp3", "io1", "io2", "standard")
AL2_LAST_K8S = 32  # EKS publishes no Amazon Linux 2 image after Kubernetes 1.32
# EKS-optimized image flavors per OS, with the architectures AWS publishes each for: AL2023's
# accelerated images are `nvidia` (both) and `neuron` (x86_64, Inferentia/Trainium); AL2's is `gpu`.
FLAVORS: Mapping[str, Mapping[str, tuple[str, ...]]] = MappingProxyType({
    "al2023": MappingProxyType({"standard": ("x86_64", "arm64"), "nvidia": ("x86_64", "arm64"),
                                "neuron": ("x86_64",)}),
    "al2": MappingProxyType({"standard": ("x86_64", "arm64"), "gpu": ("x86_64",)}),
})
DEFAULT_FLAVOR = "standard"

DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "base": "eks-optimized",
        "upstream": "",
        "upstream_ref": "",
        # Today's default: AL2023 (EKS publishes no AL2 image after 1.32) on the newest version the
        # release calendar in support.py lists as in standard support on the day it was read, so
        # the default moves when that table is updated and never warns by itself.
        "os": "al2023",
        "kubernetes_version": support.newest_in_standard_support(support.AS_OF),
        "arch": "x86_64",
        "flavor": DEFAULT_FLAVOR,
        "instance_type": "",  # chosen by arch and flavor when empty, see Variant.effective_instance_type
        "volume_size": 20,
        "volume_type": "gp3",
        "encrypted": False,
        "kms_key_id": "",
        "region_kms_key_ids": MappingProxyType({}),  # region -> key for that region's image (amibuild.pipeline.keys)
        "subnet_id": "",
        "security_group_id": "",
        # None: unset, the subnet's own default (an explicit false makes the amazon plugin launch without a
        # public IP in a default-VPC subnet it picks: no SSH from outside AWS)
        "associate_public_ip_address": None,
        "source_ami": "",
        "extra_packages": (),
        "repos": (),
        "proxy": None,
        "scripts": (),
        "description": "",
        "tests": (),  # test "NAME" { ... } blocks (amibuild.pipeline.imagetests)
        "test_on_build": True,  # run the checks as the build's last provisioner (stage 1)
        "deprecate_after": "",  # "180d": the deprecation time set at publish (amibuild.pipeline.protection)
    }
)

ADDITIVE = frozenset({"extra_packages", "repos"})
LAYERS = ("defaults", "pipeline file", "var-files", "flags")


@dataclass(frozen=True)
class Repo:
    """An extra yum/dnf repository baked into the image."""

    name: str
    baseurl: str
    gpgkey: str = ""  # a URL the instance fetches the key from; or as given, when `gpgkey_text` holds it
    # the armored public key itself (given inline, or read from a local file): shipped with the
    # build, so nobody on the network path can swap it
    gpgkey_text: str = ""
    insecure: bool = False  # `insecure = true`: plain http said to be acceptable

    def __repr__(self) -> str:  # a baseurl may hold user:password@
        key = "<inline key>" if "BEGIN PGP" in self.gpgkey else secrets.mask(self.gpgkey)
        return (f"Repo({self.name!r}, {secrets.mask(self.baseurl)!r}, {key!r}"
                + (", insecure=True)" if self.insecure else ")"))

    def record(self) -> str:
        """The `name|baseurl|gpgkey` line add-repos.sh reads; a shipped key travels as `key:BASE64`."""
        key = "key:" + base64.b64encode(self.gpgkey_text.encode()).decode() if self.gpgkey_text else self.gpgkey
        return f"{self.name}|{self.baseurl}|{key}"


@dataclass(frozen=True)
class Proxy:
    """An HTTP proxy baked into the image (yum/dnf, /etc/environment, systemd drop-ins)."""

    http: str = ""
    https: str = ""
    no_proxy: str = ""
    # An SSM SecureString (user:password) the nodes read at boot (amibuild.pipeline.proxy_credentials):
    # a hand-off setting (node user data), not baked into the image.
    credentials_parameter: str = ""

    def __bool__(self) -> bool:
        return bool(self.http or self.https)

    def __repr__(self) -> str:  # the URLs may hold user:password@
        return (f"Proxy(http={secrets.mask(self.http)!r}, https={secrets.mask(self.https)!r}, no_proxy={self.no_proxy!r}"
                + (f", credentials_parameter={self.credentials_parameter!r})" if self.credentials_parameter else ")"))

    def baked(self) -> dict[str, str]:
        """What the image gets (and its fingerprint sees): the credentials parameter is for the nodes' user data."""
        return {"http": self.http, "https": self.https, "no_proxy": self.no_proxy}


@dataclass(frozen=True)
class Variant:
    """One image to build: every setting resolved, every value checked."""

    name: str
    base: str
    upstream: str
    upstream_ref: str
    os: str
    kubernetes_version: str
    arch: str
    instance_type: str
    volume_size: int
    volume_type: str
    encrypted: bool
    kms_key_id: str
    subnet_id: str
    security_group_id: str
    associate_public_ip_address: bool | None
    source_ami: str
    extra_packages: tuple[str, ...]
    repos: tuple[Repo, ...]
    proxy: Proxy
    scripts: tuple[Path, ...]
    description: str
    # further Packer variables, by name; checked against the template when rendering
    packer_vars: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    # where each setting came from ("--var volume_size", "amibuild.hcl: variant \"ceph\"..."),
    # so later checks (unknown Packer variable) can name the file or flag
    origins: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), compare=False, repr=False)
    # which EKS-optimized parent: standard, or an accelerated one (`FLAVORS`)
    flavor: str = DEFAULT_FLAVOR
    # its `test "NAME" { ... }` blocks, merged across `extends` (imagetests.check_set turns them into checks)
    tests: tuple[imagetests.TestBlock, ...] = ()
    test_on_build: bool = True
    # region -> the KMS key of that region's image (amibuild.pipeline.keys); empty: kms_key_id alone
    region_kms_key_ids: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # deprecate_after: how long after publish (or after a channel last took it) the image deprecates
    deprecate_after: timedelta | None = None

    @property
    def effective_instance_type(self) -> str:
        if self.instance_type:
            return self.instance_type
        # An accelerated image boots (and its drivers load) only on its kind of hardware.
        if self.flavor in ("nvidia", "gpu"):
            return "g5g.xlarge" if self.arch == "arm64" else "g5.xlarge"
        if self.flavor == "neuron":
            return "inf2.xlarge"
        return "m6g.large" if self.arch == "arm64" else "m5.large"

    def settings(self) -> dict[str, Any]:
        """The variant's values as a plain dict (for render.json and the fingerprint), every URL's
        credentials masked (`amibuild.secrets`): they reach Packer only through its environment."""
        return secrets.mask({
            "name": self.name,
            "base": self.base,
            "upstream": self.upstream,
            "upstream_ref": self.upstream_ref,
            "os": self.os,
            "kubernetes_version": self.kubernetes_version,
            "arch": self.arch,
            # only when not standard: a standard variant keeps the fingerprint it had before flavors
            **({"flavor": self.flavor} if self.flavor != DEFAULT_FLAVOR else {}),
            "instance_type": self.effective_instance_type,
            "volume_size": self.volume_size,
            "volume_type": self.volume_type,
            "encrypted": self.encrypted,
            "kms_key_id": self.kms_key_id,
            # only when set: a variant without it keeps the fingerprint it had before
            **({"region_kms_key_ids": dict(self.region_kms_key_ids)} if self.region_kms_key_ids else {}),
            "subnet_id": self.subnet_id,
            "security_group_id": self.security_group_id,
            "associate_public_ip_address": self.associate_public_ip_address,
            "source_ami": self.source_ami,
            "extra_packages": list(self.extra_packages),
            "repos": [vars(r) for r in self.repos],
            "proxy": self.proxy.baked(),
            "scripts": [str(s) for s in self.scripts],
            "description": self.description,
            "packer_vars": dict(sorted(self.packer_vars.items())),
        })


@dataclass(frozen=True)
class Pipeline:
    """Pipeline-wide settings and the variants selected for this run."""

    name: str
    ssm_prefix: str
    regions: tuple[str, ...]
    copy_to: tuple[str, ...]
    ami_users: tuple[str, ...]
    tags: Mapping[str, str]
    variants: tuple[Variant, ...]
    source: Path | None  # the pipeline file read, None when flags alone were used
    # SSM channel parameters: name template (None: naming.DEFAULT_NAME_TEMPLATE) and the channel
    # build-ami publishes to
    parameter_template: str | None = None
    default_channel: str = "recommended"
    # channel "NAME" { from, requires, soak } blocks, and the pipeline's test { ... } block
    gates: Mapping[str, imagetests.Gate] = field(default_factory=lambda: MappingProxyType({}))
    boot_test: imagetests.BootTestSettings = imagetests.BootTestSettings()
    # the pipeline file's own `regions` when --region replaced them for this run (else empty)
    file_regions: tuple[str, ...] = ()
    # attestation { kms_key, bucket, region }: where statements about its images are signed and kept
    attestation: AttestationSettings = AttestationSettings()
    # events { bus | sns_topic }: where amibuild's events go (amibuild.notify; empty: none are sent)
    events: EventTarget = EventTarget()
    # protection { cooldown }: deregistration protection of the images its channels hold
    protection: ProtectionSettings = ProtectionSettings()
    # the KMS HMAC key whose MAC stands for URL credentials in the fingerprint ("": none, they stay out)
    fingerprint_key: str = DEFAULT_FINGERPRINT_KEY

    @property
    def build_region(self) -> str:
        return self.regions[0]

    @property
    def target_regions(self) -> tuple[str, ...]:
        """Every region an image of this pipeline ends up in: build regions, then copies."""
        return tuple(dict.fromkeys((*self.regions, *self.copy_to)))

    @property
    def channel_regions(self) -> tuple[str, ...]:
        """Every region the pipeline's channels live in, as its file says (`regions` and `copy_to`),
        whatever --region narrows this run's builds to: a brand-new channel is written in all of them."""
        return tuple(dict.fromkeys((*(self.file_regions or self.regions), *self.copy_to)))

    @property
    def narrowed_out(self) -> tuple[str, ...]:
        """The channel regions this run does not reach (--region named fewer than the file)."""
        return tuple(r for r in self.channel_regions if r not in self.target_regions)


@dataclass(frozen=True)
class Overrides:
    """What the command line says; empty values mean "not given"."""

    variants: tuple[str, ...] = ()
    all_variants: bool = False
    base: str = ""
    upstream: str = ""
    upstream_ref: str = ""
    os: str = ""
    kubernetes_version: str = ""
    arch: str = ""
    flavor: str = ""
    regions: tuple[str, ...] = ()
    extra_packages: tuple[str, ...] = ()
    extra_repos: tuple[str, ...] = ()  # NAME=URL
    variables: tuple[str, ...] = ()  # KEY=VALUE
    var_files: tuple[str, ...] = ()
