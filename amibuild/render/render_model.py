"""The values a render passes around: where it builds (`Target`), how it finds its source AMI
(`SourceAmi`), the Packer variables, amibuild's provisioners, the `Build` before it becomes files and
the `Rendered` files themselves, with the names of the files `write` puts on disk."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from amibuild import __version__
from amibuild import hcl
from amibuild.pipeline import Pipeline, Variant

HCL_FILE = "amibuild.pkr.hcl"
VARS_FILE = "amibuild.auto.pkrvars.hcl"
RECORD_FILE = "render.json"

# Packer's amazon-ebs waits (seconds between polls, attempts): a large AMI copy takes a while on AWS.
AWS_POLLING = (30, 120)
COMMUNICATORS = ("ssh", "none")


@dataclass(frozen=True)
class Target:
    """Where and how Packer reaches AWS and the build instance, chosen by the caller: render never
    reads the environment. ``endpoint`` renders custom_endpoint_ec2 (Packer ignores
    AWS_ENDPOINT_URL*) and skips region validation; ``polling`` (seconds between polls, attempts)
    None keeps the template's own (`AWS_POLLING` for amibuild's)."""

    endpoint: str | None = None
    communicator: str = "ssh"
    polling: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.communicator not in COMMUNICATORS:
            raise ValueError(f"communicator {self.communicator!r}: one of {', '.join(COMMUNICATORS)}")


class SourceHow(enum.StrEnum):
    """How the build finds its source AMI; the value is what render.json says."""

    PINNED = "pinned"  # given: source_ami
    RESOLVED = "resolved"  # read from AWS's public SSM parameter now
    LOOKUP = "lookup"  # found by a name filter at build time


@dataclass(frozen=True)
class SourceAmi:
    """How the build finds its source AMI."""

    how: SourceHow
    image_id: str = ""
    parameter: str = ""  # the public SSM parameter it was (or would be) read from
    note: str = ""

    @property
    def known(self) -> bool:
        return bool(self.image_id)


@dataclass(frozen=True)
class PackerVariable:
    name: str
    type: str
    default: Any
    sensitive: bool = False  # Packer masks its value in its output (`sensitive = true`, Packer >= 1.6)


@dataclass(frozen=True)
class Rendered:
    """Everything `write` puts in build/<variant>/ — the fingerprint covers all of it."""

    variant: Variant
    files: Mapping[str, str]  # relative path -> text (HCL, var file, shipped scripts)
    values: Mapping[str, Any]  # resolved Packer variable values
    sources: Mapping[str, SourceAmi]  # per build region
    fingerprint: str
    notes: tuple[str, ...] = ()
    executable: frozenset[str] = field(default_factory=frozenset)
    # PKR_VAR_<name> -> value for the variables that hold credentials: the only place their real
    # value is kept. `values` and every file hold them masked (`secrets.mask`).
    secret_env: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    # what Packer's environment needs for this build besides (a transform's)
    packer_env: Mapping[str, str] = field(default_factory=dict, compare=False)
    # the real build's render, when this one is a transform of it: what a rehearsal runs
    real: "Rendered | None" = field(default=None, repr=False, compare=False)

    def record(self, pipeline: Pipeline, packer_version: str) -> dict[str, Any]:
        return {
            "amibuild_version": __version__,
            "variant": self.variant.name,
            "fingerprint": self.fingerprint,
            "packer_version": packer_version,
            "pipeline": {
                "file": str(pipeline.source) if pipeline.source else None,
                "name": pipeline.name,
                "regions": list(pipeline.regions),
                "copy_to": list(pipeline.copy_to),
            },
            "inputs": self.variant.settings(),
            "source_ami": {
                region: {"how": str(s.how), "image_id": s.image_id, "parameter": s.parameter}
                for region, s in self.sources.items()
            },
            "values": dict(self.values),
            "files": sorted(self.files),
            "notes": list(self.notes),
        }


class ProvisionerKind(enum.StrEnum):
    STEP = "step"  # one of amibuild's scripts (proxy, repositories, packages)
    SCRIPT = "script"  # a script the pipeline names
    CHECKS = "checks"  # stage 1: the variant's checks on the build instance
    INVENTORY = "inventory"  # stage 1: the installed packages, brought back beside the template
    CLEANUP = "cleanup"  # the package caches, then the clean-up of the build instance's traces
    HYGIENE = "hygiene"  # the checks of the clean-up: the build instance's last step


@dataclass(frozen=True)
class Provisioner:
    """One of amibuild's provisioners in a build: what it is, its name (the script's file name) and
    environment (NAME -> HCL expression), and the block a real build runs. A transform reads
    the first three to put something else in its place."""

    kind: ProvisionerKind
    name: str
    env: tuple[tuple[str, str], ...]
    block: hcl.Block


@dataclass(frozen=True)
class Build:
    """One variant's build before it becomes files: its target, our provisioners in order and what
    they ship. `render_build` makes it for a real build; `finish` writes it out (files, values,
    fingerprint). A transform (a platform's, `amibuild.jobs.platform`) is a pure function
    from a Build to another, applied between the two."""

    pipeline: Pipeline
    variant: Variant
    uses_plugins: bool
    target: Target
    sources: Mapping[str, SourceAmi]
    values: Mapping[str, Any]  # resolved, credentials not yet masked
    early: tuple[Provisioner, ...]
    late: tuple[Provisioner, ...]
    shipped: Mapping[str, str]
    notes: tuple[str, ...] = ()
    variables: tuple[PackerVariable, ...] = ()  # amibuild's own, credentials hidden
    # upstream base: the converted template, and what it overrides whatever the target
    upstream: Any = None
    source_overrides: Mapping[str, Any] = field(default_factory=dict)
    remote_steps: bool = True  # the upstream template's provisioners that need a connection to the instance
    extra_files: Mapping[str, str] = field(default_factory=dict)  # relative path -> text, beside the rest
    packer_env: Mapping[str, str] = field(default_factory=dict)  # what Packer's environment needs besides
    real: "Rendered | None" = None  # what a transform started from: the real build's render


Transform = Callable[[Build], Build]  # a pure rewrite of a real build (a platform's), applied before `finish`
