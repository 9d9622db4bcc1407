"""Variant → Packer HCL2 files, resolved values and a fingerprint of everything that went in.

`render_variant` is pure: it takes a validated `Variant`, what is known about Packer, the `Target`
its caller chose (render never reads the environment) and the source AMI decision, and returns a
`Rendered` value holding every file's text: always the real build. It is `render_build` (a `Build`:
target, provisioners, shipped files) then `finish` (files and fingerprint); a transform such as the
sandbox's (`amibuild.sandbox.transform`) rewrites the `Build` in between.
`write` puts a `Rendered` on disk (into a fresh folder, swapped in whole, so a failure never leaves
a half-written variant). Nothing here calls AWS or runs Packer.
"""

from __future__ import annotations

import enum
import hashlib
from importlib import resources
import json
import shutil
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from amibuild import __version__
from amibuild import hcl, secrets, tags
from amibuild.errors import PackageDataMissing, SpecError, TemplateError
from amibuild.pipeline import Pipeline, Variant, imagetests, suggest

# Package data: found through importlib.resources, so an installed wheel carries and finds them.
TEMPLATES = Path(str(resources.files("amibuild.render") / "templates"))
PROVISION_SCRIPTS = Path(str(resources.files("amibuild.render") / "provision"))

HCL_FILE = "amibuild.pkr.hcl"
VARS_FILE = "amibuild.auto.pkrvars.hcl"
RECORD_FILE = "render.json"
EKS_OWNER = "602401143452"  # the account that publishes the EKS-optimized AMIs

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
    # what Packer's environment needs for this build besides (a transform's: the sandbox's stand-in)
    packer_env: Mapping[str, str] = field(default_factory=dict, compare=False)
    # the real build's render, when this one is a transform of it (the sandbox's): what a rehearsal runs
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


# ------------------------------------------------------------------------------- source AMI


def eks_parameter(variant: Variant) -> str:
    """The public SSM parameter AWS publishes the recommended EKS-optimized image id under."""
    base = f"/aws/service/eks/optimized-ami/{variant.kubernetes_version}"
    if variant.os == "al2023":
        return f"{base}/amazon-linux-2023/{variant.arch}/{variant.flavor}/recommended/image_id"
    if variant.flavor == "gpu":
        return f"{base}/amazon-linux-2-gpu/recommended/image_id"
    path = "amazon-linux-2-arm64" if variant.arch == "arm64" else "amazon-linux-2"
    return f"{base}/{path}/recommended/image_id"


def eks_name_filter(variant: Variant) -> str:
    """An image-name filter that matches the same EKS-optimized images, for a build-time lookup."""
    k8s = variant.kubernetes_version
    if variant.os == "al2023":
        return f"amazon-eks-node-al2023-{variant.arch}-{variant.flavor}-{k8s}-v*"
    if variant.flavor == "gpu":
        return f"amazon-eks-gpu-node-{k8s}-v*"
    return f"amazon-eks-arm64-node-{k8s}-v*" if variant.arch == "arm64" else f"amazon-eks-node-{k8s}-v*"


# ------------------------------------------------------------------------------- variables


def template_variables(variant: Variant, pipeline: Pipeline) -> list[PackerVariable]:
    """The Packer variables of our eks-worker template, with this variant's resolved values."""
    v = variant
    image_tags = {tags.PIPELINE: pipeline.name, **pipeline.tags}
    return [
        PackerVariable("kubernetes_version", "string", v.kubernetes_version),
        PackerVariable("arch", "string", v.arch),
        PackerVariable("instance_type", "string", v.effective_instance_type),
        PackerVariable("volume_size", "number", v.volume_size),
        PackerVariable("volume_type", "string", v.volume_type),
        PackerVariable("encrypted", "bool", v.encrypted),
        PackerVariable("kms_key_id", "string", v.kms_key_id),
        PackerVariable("subnet_id", "string", v.subnet_id),
        PackerVariable("security_group_id", "string", v.security_group_id),
        PackerVariable("associate_public_ip_address", "bool", v.associate_public_ip_address),
        PackerVariable("iam_instance_profile", "string", ""),
        PackerVariable("ssh_username", "string", "ec2-user"),
        PackerVariable("ssh_interface", "string", ""),
        PackerVariable("source_amis", "map(string)", {}),  # build region -> source AMI, when known
        PackerVariable("source_ami_filter_name", "string", eks_name_filter(v)),
        PackerVariable("source_ami_owners", "list(string)", [EKS_OWNER]),
        PackerVariable("ami_name_prefix", "string", f"{pipeline.name}-{v.name}-{v.kubernetes_version}-{v.arch}"),
        PackerVariable(
            "ami_description",
            "string",
            v.description or f"EKS {v.kubernetes_version} {v.os} {v.arch} worker, variant {v.name}, built by amibuild",
        ),
        PackerVariable("ami_regions", "list(string)", list(pipeline.target_regions)),
        PackerVariable("ami_users", "list(string)", list(pipeline.ami_users)),
        PackerVariable("tags", "map(string)", image_tags),
        PackerVariable("run_tags", "map(string)", {}),
        # set per build run (not rendered: a run id must not change the fingerprint)
        PackerVariable("provenance_tags", "map(string)", {}),
        PackerVariable("amibuild_run_id", "string", ""),
        PackerVariable("extra_packages", "list(string)", list(v.extra_packages)),
        PackerVariable("extra_repos", "list(string)", [f"{r.name}|{r.baseurl}|{r.gpgkey}" for r in v.repos]),
        PackerVariable("http_proxy", "string", v.proxy.http),
        PackerVariable("https_proxy", "string", v.proxy.https),
        PackerVariable("no_proxy", "string", effective_no_proxy(v.proxy.no_proxy) if v.proxy else v.proxy.no_proxy),
    ]


# Always bypassed by a baked-in proxy: loopback, the instance metadata service and the ECS/EKS
# Pod Identity agent address, and the VPC-internal DNS names.
NO_PROXY_ALWAYS = ("localhost", "127.0.0.1", "169.254.169.254", "169.254.170.2", ".internal")


def effective_no_proxy(user: str) -> str:
    entries = [e.strip() for e in user.split(",") if e.strip()]
    return ",".join(dict.fromkeys([*entries, *NO_PROXY_ALWAYS]))


def apply_packer_vars(
    variables: Sequence[PackerVariable], variant: Variant, *, sources: Mapping[str, SourceAmi]
) -> dict[str, Any]:
    """The final value of every template variable: template default ← variant's extra vars.

    An unknown name is refused here, naming the flag or file it came from.
    """
    values = {var.name: var.default for var in variables}
    values.update(user_values(variant, {var.name: var.type for var in variables}))
    if all(s.known for s in sources.values()):
        values["source_amis"] = {region: s.image_id for region, s in sorted(sources.items())}
    return values


def user_values(variant: Variant, types: Mapping[str, str]) -> dict[str, Any]:
    """The variant's further Packer variables, typed; an unknown name is refused, naming its origin."""
    out = {}
    for name, raw in variant.packer_vars.items():
        where = variant.origins.get(name, f"--var {name}")
        if name not in types:
            raise SpecError(f"{where}: unknown Packer variable `{name}`{suggest(name, types)}; "
                            f"the template's variables are listed in build/{variant.name}/{HCL_FILE}")
        # `name = null` in a var-file sets the variable to null, as Packer reads it
        out[name] = None if raw is None else _coerce(raw, types[name], where)
    return out


def _coerce(raw: Any, type_: str, where: str) -> Any:
    if type_ == "number":
        if isinstance(raw, bool):
            raise SpecError(f"{where}: expected a number, got {raw!r}")
        try:
            return int(str(raw)) if str(raw).lstrip("-").isdigit() else float(str(raw))
        except ValueError:
            raise SpecError(f"{where}: expected a number, got {raw!r}") from None
    if type_ == "bool":
        text = str(raw).lower()
        if isinstance(raw, bool) or text in ("true", "false"):
            return raw if isinstance(raw, bool) else text == "true"
        raise SpecError(f"{where}: expected true or false, got {raw!r}")
    if type_.startswith("list"):
        if isinstance(raw, list):
            return [str(x) for x in raw]
        return [x for x in (s.strip() for s in str(raw).split(",")) if x]
    if type_.startswith("map"):
        if not isinstance(raw, dict):
            raise SpecError(f"{where}: expected a map, e.g. {{ key = \"value\" }} in a var-file")
        return {str(k): str(v) for k, v in raw.items()}
    if isinstance(raw, (list, dict)):
        raise SpecError(f"{where}: expected a string, got a {type(raw).__name__}")
    return str(raw).lower() if isinstance(raw, bool) else str(raw)


# ------------------------------------------------------------------------------- provisioners


@dataclass(frozen=True)
class Step:
    """One of our provisioning steps: a script shipped into build/<variant>/scripts/."""

    script: str  # file name under amibuild/render/provision/
    env: tuple[tuple[str, str], ...]  # NAME -> HCL expression
    needed: bool


def provisioning_steps(variant: Variant, values: Mapping[str, Any]) -> list[Step]:
    return [
        Step("configure-proxy.sh", (
            ("AMIBUILD_HTTP_PROXY", "var.http_proxy"),
            ("AMIBUILD_HTTPS_PROXY", "var.https_proxy"),
            ("AMIBUILD_NO_PROXY", "var.no_proxy"),
        ), bool(values["http_proxy"] or values["https_proxy"])),
        Step("add-repos.sh", (("AMIBUILD_REPOS", 'join("\\n", var.extra_repos)'),), bool(values["extra_repos"])),
        Step("install-packages.sh", (("AMIBUILD_EXTRA_PACKAGES", 'join(" ", var.extra_packages)'),),
             bool(values["extra_packages"])),
    ]


EXECUTE = "sudo -S env {{ .Vars }} bash -eu '{{ .Path }}'"


class ProvisionerKind(enum.StrEnum):
    STEP = "step"  # one of amibuild's scripts (proxy, repositories, packages)
    SCRIPT = "script"  # a script the pipeline names
    CHECKS = "checks"  # stage 1: the variant's checks on the build instance
    CLEANUP = "cleanup"  # the package caches, last


@dataclass(frozen=True)
class Provisioner:
    """One of amibuild's provisioners in a build: what it is, its name (the script's file name) and
    environment (NAME -> HCL expression), and the block a real build runs. A transform (the
    sandbox's) reads the first three to put something else in its place."""

    kind: ProvisionerKind
    name: str
    env: tuple[tuple[str, str], ...]
    block: hcl.Block


def provisioner_blocks(variant: Variant, values: Mapping[str, Any]) -> tuple[list[hcl.Block], dict[str, str]]:
    """Our provisioner blocks (in order) and the files they need shipped beside the template."""
    early, late, shipped = provisioner_groups(variant, values)
    return [p.block for p in (*early, *late)], shipped


EARLY_STEPS = frozenset({"configure-proxy.sh"})  # must run before anything reaches the network


def provisioner_groups(variant: Variant, values: Mapping[str, Any]) -> tuple[list[Provisioner], list[Provisioner], dict[str, str]]:
    """Our provisioners split in two: the steps that go before anything reaches the network (the
    proxy), and the rest (repositories, packages, user scripts, the checks, our cache cleanup);
    and the files they ship."""
    early: list[Provisioner] = []
    late: list[Provisioner] = []
    shipped: dict[str, str] = {}
    for step in provisioning_steps(variant, values):
        if not step.needed:
            continue
        shipped[f"scripts/{step.script}"] = _read_packaged(PROVISION_SCRIPTS / step.script)
        block = hcl.Block("provisioner", ("shell",))
        block.attr("script", hcl.template([hcl.Expr("path.root"), f"/scripts/{step.script}"]))
        block.attr("execute_command", EXECUTE)
        block.attr("environment_vars", [hcl.template([f"{name}=", hcl.Expr(expr)]) for name, expr in step.env])
        group = early if step.script in EARLY_STEPS else late
        group.append(Provisioner(ProvisionerKind.STEP, step.script, step.env, block))
    for index, script in enumerate(variant.scripts, start=1):
        name = f"scripts/user-{index:02d}-{script.name}"
        shipped[name] = _read(script)
        block = hcl.Block("provisioner", ("shell",))
        block.attr("script", hcl.template([hcl.Expr("path.root"), f"/{name}"]))
        block.attr("execute_command", EXECUTE)
        late.append(Provisioner(ProvisionerKind.SCRIPT, Path(name).name, (), block))
    checks = checks_step(variant)
    if checks is not None:  # the last step before clean-up, where upstream runs validate.sh
        block, script = checks
        shipped[CHECKS_SCRIPT] = script
        late.append(Provisioner(ProvisionerKind.CHECKS, Path(CHECKS_SCRIPT).name, (), block))
    if early or late:
        cleanup = hcl.Block("provisioner", ("shell",))
        cleanup.attr("inline", [
            "sudo yum clean all 2>/dev/null || sudo dnf clean all",
            "sudo rm -rf /var/cache/yum /var/cache/dnf /tmp/amibuild-*",
        ])
        late.append(Provisioner(ProvisionerKind.CLEANUP, "cache cleanup", (), cleanup))
    return early, late, shipped


CHECKS_SCRIPT = "scripts/amibuild-checks.sh"


def checks_step(variant: Variant) -> tuple[hcl.Block, str] | None:
    """Stage 1: the provisioner that runs the variant's checks on the build instance, and its script."""
    if not variant.test_on_build:
        return None
    block = hcl.Block("provisioner", ("shell",))
    block.attr("script", hcl.template([hcl.Expr("path.root"), f"/{CHECKS_SCRIPT}"]))
    block.attr("execute_command", EXECUTE)
    return block, checks_script(variant)


def checks_script(variant: Variant) -> str:
    return imagetests.checks_script(imagetests.check_set(variant).checks)


# ------------------------------------------------------------------------------- rendering


@dataclass(frozen=True)
class Build:
    """One variant's build before it becomes files: its target, our provisioners in order and what
    they ship. `render_build` makes it for a real build; `finish` writes it out (files, values,
    fingerprint). A transform (the sandbox's, `amibuild.sandbox.transform`) is a pure function
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


def render_variant(
    pipeline: Pipeline,
    variant: Variant,
    *,
    uses_plugins: bool,
    target: Target,
    sources: Mapping[str, SourceAmi],
    upstream: Any = None,
    upstream_binaries: Any = None,
) -> Rendered:
    """All files of one variant's real build for ``target``, their values and fingerprint. Pure."""
    return finish(render_build(pipeline, variant, uses_plugins=uses_plugins, target=target, sources=sources,
                               upstream=upstream, upstream_binaries=upstream_binaries))


def render_build(
    pipeline: Pipeline,
    variant: Variant,
    *,
    uses_plugins: bool,
    target: Target,
    sources: Mapping[str, SourceAmi],
    upstream: Any = None,
    upstream_binaries: Any = None,
) -> Build:
    """One variant's real build for ``target``, not yet written out. Pure."""
    notes: list[str] = []
    overrides: dict[str, Any] = {}
    if variant.base == "upstream":
        values, variables, overrides, early, late, shipped, extra_notes = render_upstream(
            upstream, pipeline, variant, uses_plugins=uses_plugins, sources=sources, binaries=upstream_binaries)
        notes += extra_notes
    else:
        variables = template_variables(variant, pipeline)
        values = apply_packer_vars(variables, variant, sources=sources)
        variables = hide_secrets(variables, secret_variables(variant, values))
        early, late, shipped = provisioner_groups(variant, values)
    if not uses_plugins:
        notes.append("Packer < 1.7: no required_plugins block and no metadata_options (IMDSv2 on the "
                     "build instance); upgrade Packer to get them")
    return Build(pipeline, variant, uses_plugins, target, MappingProxyType(dict(sources)), MappingProxyType(values),
                 tuple(early), tuple(late), MappingProxyType(shipped), tuple(notes), tuple(variables),
                 upstream=upstream if variant.base == "upstream" else None, source_overrides=MappingProxyType(overrides))


def finish(build: Build) -> Rendered:
    """A build written out: every file's text, the values (credentials masked) and the fingerprint. Pure."""
    variant, target = build.variant, build.target
    if build.upstream is not None:
        templates = _upstream_files(build)
    else:
        delay, attempts = target.polling or AWS_POLLING
        text = render_template(
            "eks-worker.pkr.hcl.j2",
            amibuild_version=__version__,
            variant=variant.name,
            run_id_tag=tags.RUN_ID,
            variant_tag=tags.VARIANT,
            os_label="Amazon Linux 2023" if variant.os == "al2023" else "Amazon Linux 2",
            uses_plugins=build.uses_plugins,
            variables=[hcl.dumps([_variable_block(v)]).rstrip("\n") for v in build.variables],
            build_regions=list(build.pipeline.regions),
            sources=[f"source.amazon-ebs.{r}" for r in build.pipeline.regions],
            endpoint=target.endpoint,
            communicator=target.communicator,
            skip_region_validation=bool(target.endpoint),
            pinned_source=all(s.known for s in build.sources.values()),
            polling_delay=delay,
            polling_attempts=attempts,
            provisioners=[_indent(hcl.dumps([p.block]).rstrip("\n"), "  ") for p in (*build.early, *build.late)],
            manifest=_indent(hcl.dumps([manifest_block(variant.name)]).rstrip("\n"), "  "),
        )
        templates = {HCL_FILE: text}
    notes = [*build.notes, *(s.note for s in build.sources.values() if s.note)]
    hidden = secret_variables(variant, build.values)
    secret_env = {f"PKR_VAR_{name}": _env_value(build.values[name]) for name in hidden}
    values = secrets.mask(dict(build.values))  # from here on, what is written and fingerprinted
    header = f"Resolved values for variant \"{variant.name}\", written by amibuild {__version__}."
    if hidden:
        header += (f" {', '.join(hidden)}: credentials inside; amibuild passes them to Packer as "
                   f"{', '.join('PKR_VAR_' + n for n in hidden)} (sensitive variables), never in a file.")
    var_text = hcl.dumps([hcl.Attr(k, v) for k, v in sorted(values.items())
                          if k not in _BUILD_TIME_VARS and k not in hidden], header=header)
    files = {**templates, VARS_FILE: var_text, **build.shipped, **build.extra_files}
    executable = frozenset(name for name in build.shipped if name.endswith(".sh"))
    return Rendered(
        variant=variant,
        files=MappingProxyType(files),
        values=MappingProxyType(values),
        sources=MappingProxyType(dict(build.sources)),
        fingerprint=fingerprint(files, values),
        notes=tuple(secrets.mask(n) for n in notes),
        executable=executable,
        secret_env=MappingProxyType(secret_env),
        packer_env=MappingProxyType(dict(build.packer_env)),
        real=build.real,
    )


# The only variables that may hold credentials (a proxy or repository URL with user:password@):
# amibuild's own, which it marks sensitive and hands over in the environment. Anywhere else a
# password would reach a file, so it is refused.
SECRET_VARS = ("http_proxy", "https_proxy", "extra_repos")


def secret_variables(variant: Variant, values: Mapping[str, Any]) -> tuple[str, ...]:
    """The variables whose value holds a URL with credentials; SpecError for any but `SECRET_VARS`."""
    found = tuple(sorted(name for name, value in values.items() if secrets.has_credentials(value)))
    for name in found:
        if name not in SECRET_VARS:
            where = variant.origins.get(name, f"variant {variant.name}: {name}")
            raise SpecError(f"{where}: {name} holds a URL with credentials ({secrets.mask(values[name])}); "
                            f"amibuild keeps credentials out of files and passes them to Packer only in "
                            f"{', '.join(SECRET_VARS)}: move them there or drop them")
    return found


def hide_secrets(variables: Sequence[PackerVariable], hidden: Sequence[str]) -> list[PackerVariable]:
    """The variables with those holding credentials marked sensitive and left at an empty default:
    their value comes from PKR_VAR_<name> (`Rendered.secret_env`), so the template holds none."""
    return [PackerVariable(v.name, v.type, [] if v.type.startswith("list") else "", sensitive=True)
            if v.name in hidden else v for v in variables]


def _env_value(value: Any) -> str:
    """A value as Packer reads PKR_VAR_<name>: a string as is, a list as an HCL (JSON) list."""
    return json.dumps(list(value)) if isinstance(value, (list, tuple)) else str(value)


_BUILD_TIME_VARS = frozenset({"provenance_tags", "amibuild_run_id"})


# The upstream template's variables that take our settings: name -> (our field, value). Fields
# marked None always apply; the others only when the pipeline or a flag set them, so upstream's
# own defaults (e.g. its volume type) stand otherwise.
UPSTREAM_VARS: dict[str, tuple[str | None, Any]] = {
    "kubernetes_version": (None, lambda v, p: v.kubernetes_version),
    "arch": (None, lambda v, p: v.arch),
    "instance_type": (None, lambda v, p: v.effective_instance_type),
    "aws_region": (None, lambda v, p: p.build_region),
    "ami_name": (None, lambda v, p: f"{p.name}-{v.name}-{v.kubernetes_version}-{v.arch}-{{{{timestamp}}}}"),
    "ami_regions": (None, lambda v, p: ",".join(r for r in p.target_regions if r != p.build_region)),
    "ami_users": (None, lambda v, p: ",".join(p.ami_users)),
    "encrypted": ("encrypted", lambda v, p: str(v.encrypted).lower()),
    "kms_key_id": ("kms_key_id", lambda v, p: v.kms_key_id),
    "subnet_id": ("subnet_id", lambda v, p: v.subnet_id),
    "security_group_id": ("security_group_id", lambda v, p: v.security_group_id),
    "associate_public_ip_address": ("associate_public_ip_address",
                                    lambda v, p: str(v.associate_public_ip_address).lower()),
    "volume_type": ("volume_type", lambda v, p: v.volume_type),
    "volume_size": ("volume_size", lambda v, p: str(v.volume_size)),
    "launch_block_device_mappings_volume_size": ("volume_size", lambda v, p: str(v.volume_size)),
}
# amibuild's own variables, declared beside the converted upstream template
OWN_VARS = ("tags", "provenance_tags", "amibuild_run_id", "extra_packages", "extra_repos",
            "http_proxy", "https_proxy", "no_proxy")
OWN_VARS_FILE = "amibuild-variables.pkr.hcl"


def render_upstream(template: Any, pipeline: Pipeline, variant: Variant, *, uses_plugins: bool,
                    sources: Mapping[str, SourceAmi], binaries: Any = None) -> tuple[Any, ...]:
    """The upstream template (eks-worker-al2 or al2023) with our provisioners: (values, our
    variables, the source settings it overrides whatever the target, early and late provisioners,
    shipped, notes); `_upstream_files` writes it out. ``binaries`` (render.upstream.binaries.Binaries)
    gives kubernetes_version (1.N.P) and kubernetes_build_date; without it the variant's own values stand."""
    from amibuild.render import upstream  # deferred: the large converter only for upstream variants

    if len(pipeline.regions) > 1:
        raise SpecError(f"variant {variant.name}: the upstream base builds in one region; "
                        "list one in pipeline.regions and the rest in copy_to")
    ours = [var for var in template_variables(variant, pipeline) if var.name in OWN_VARS]
    # only what we set goes into the var file; upstream's own defaults stay in its variable blocks
    declared = template.variables
    values: dict[str, Any] = {}
    for name, (field_name, setting) in UPSTREAM_VARS.items():
        if name in declared and (field_name is None or variant.origins.get(field_name, "defaults") != "defaults"):
            values[name] = setting(variant, pipeline)
    source = sources.get(pipeline.build_region)
    if source is not None and source.known and "source_ami_id" in declared:
        values["source_ami_id"] = source.image_id
    types = {name: "string" for name in declared} | {var.name: var.type for var in ours}
    values.update({var.name: var.default for var in ours})
    values.update(user_values(variant, types))
    if binaries is not None:  # resolved from (or equal to) what the user pinned
        values.update(kubernetes_version=binaries.version, kubernetes_build_date=binaries.build_date)
    missing = sorted(name for name in template.required if name not in values)
    if missing:
        raise SpecError(f"variant {variant.name}: the upstream template needs a value for "
                        f"{', '.join(missing)}; pass --var {missing[0]}=... (or set it in the variant's vars)")
    early, provisioners, shipped = provisioner_groups(variant, values)
    overrides: dict[str, Any] = {}
    original = {getattr(item, "key", None): item.value for item in template.source if isinstance(item, hcl.Attr)}
    for key in ("tags", "snapshot_tags"):
        base = hcl.value(original[key], "  ") if key in original else "{}"
        overrides[key] = hcl.Expr(f"merge({base}, var.tags, var.provenance_tags)")
    notes: list[str] = []
    if not uses_plugins and any(isinstance(x, hcl.Block) and x.type == "metadata_options" for x in template.source):
        overrides["metadata_options"] = None
        notes.append("Packer < 1.7 refuses metadata_options: upstream's IMDSv2 requirement on the build "
                     "instance (http_tokens = required) is left out; build with Packer >= 1.7 to keep it")
    if not uses_plugins:
        fixed = _gp3_defaults_for_packer_16(template.source)
        if fixed:
            overrides.update(fixed)
            notes.append("Packer < 1.7 refuses a gp3 volume without throughput: upstream's block device "
                         "mappings get AWS's gp3 defaults (throughput 125, iops 3000) when the type is gp3")
    copies = [r for r in pipeline.target_regions if r != pipeline.build_region]
    if "ami_regions" not in declared and copies:  # templates before 2021 had no ami_regions setting
        overrides["ami_regions"] = copies
    ours_early = [f"[amibuild] {n.split('/')[-1]}" for n in shipped if n.split("/")[-1] in EARLY_STEPS]
    ours_late = [f"[amibuild] {n.split('/')[-1]}" for n in shipped if n.split("/")[-1] not in EARLY_STEPS]
    if ours_early or ours_late:  # provisioner_groups ends the late group with it
        ours_late.append("[amibuild] cache cleanup")
    files = ", ".join(str(f.relative_to(template.root)) for f in template.var_files) or "none"
    notes[:0] = [
        f"upstream base: {template.root} ({template.layout} layout, {template.os}); variable files: {files}",
        "provisioner order on the instance: " + " -> ".join(upstream.order(template, ours_early, ours_late)),
        *([binaries.note] if binaries is not None else []),
    ]
    variables = hide_secrets(ours, secret_variables(variant, values))
    return values, variables, overrides, early, provisioners, shipped, notes


def _upstream_files(build: Build) -> dict[str, str]:
    """An upstream build's two HCL files: the converted template with our provisioners, and our variables."""
    from amibuild.render import upstream  # deferred: the large converter only for upstream variants

    pipeline, variant, target = build.pipeline, build.variant, build.target
    overrides = dict(build.source_overrides)
    if target.endpoint:
        overrides["custom_endpoint_ec2"] = target.endpoint
        overrides["skip_region_validation"] = True
    if target.communicator == "none":
        overrides.update(communicator="none", ssh_username=None, ssh_pty=None, ssh_interface=None)
    if target.polling:
        overrides["aws_polling"] = hcl.Block("aws_polling", (), [
            hcl.Attr("delay_seconds", target.polling[0]), hcl.Attr("max_attempts", target.polling[1])])
    packer_block = None
    if build.uses_plugins:
        packer_block = hcl.Block("packer")
        packer_block.attr("required_version", ">= 1.7.0")
        packer_block.block("required_plugins").attr("amazon", {"version": ">= 1.2.0", "source": "github.com/hashicorp/amazon"})
    text = upstream.hcl_document(
        build.upstream, source_name=pipeline.build_region, source_overrides=overrides,
        extra_provisioners=[p.block for p in build.late], early_provisioners=[p.block for p in build.early],
        post_processors=[manifest_block(variant.name)], drop_remote_provisioners=not build.remote_steps,
        packer_block=packer_block,
    )
    own = hcl.dumps([_variable_block(var) for var in build.variables],
                    header=f"amibuild's own variables for variant \"{variant.name}\" (upstream base).")
    return {HCL_FILE: text, OWN_VARS_FILE: own}


_DEVICE_MAPPINGS = ("launch_block_device_mappings", "ami_block_device_mappings")


def _gp3_defaults_for_packer_16(source: Sequence[Any]) -> dict[str, list[hcl.Block]]:
    """Block device mappings with throughput/iops set for gp3, which Packer 1.6 requires (it reads
    an unset throughput as 0 and refuses it); Packer >= 1.7 and AWS take these same defaults."""
    out: dict[str, list[hcl.Block]] = {}
    for key in _DEVICE_MAPPINGS:
        blocks = [x for x in source if isinstance(x, hcl.Block) and x.type == key]
        changed = False
        new_blocks = []
        for block in blocks:
            attrs = {x.key: x.value for x in block.body if isinstance(x, hcl.Attr)}
            kind = attrs.get("volume_type")
            if kind is None or (kind != "gp3" and not isinstance(kind, hcl.Expr)):
                new_blocks.append(block)
                continue
            is_gp3 = f"{hcl.value(kind, '')} == \"gp3\""
            body = list(block.body)
            for name, value in (("throughput", 125), ("iops", 3000)):
                if name not in attrs:
                    body.append(hcl.Attr(name, hcl.Expr(f"{is_gp3} ? {value} : null")))
                    changed = True
            new_blocks.append(hcl.Block(block.type, block.labels, body))
        if changed:
            out[key] = new_blocks
    return out


def manifest_block(variant_name: str) -> hcl.Block:
    """The manifest post-processor every build ends with; custom_data ties it to the run."""
    block = hcl.Block("post-processor", ("manifest",))
    block.attr("output", hcl.template([hcl.Expr("path.root"), "/manifest.json"]))
    block.attr("strip_path", True)
    block.attr("custom_data", {"variant": variant_name, "amibuild_run_id": hcl.Expr("var.amibuild_run_id")})
    return block


def fingerprint(files: Mapping[str, str], values: Mapping[str, Any]) -> str:
    """sha256 over every file (name and text) and the resolved values, source AMI included."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    digest.update(json.dumps(dict(values), sort_keys=True, default=str).encode())
    return digest.hexdigest()


@lru_cache(maxsize=1)
def _environment():
    import jinja2  # keep `invoke --list` fast

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("amibuild.render", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["q"] = hcl.quote
    env.filters["hcl"] = lambda value: hcl.value(value, "  ")
    return env


def render_template(name: str, **context: Any) -> str:
    import jinja2

    try:
        return _environment().get_template(name).render(**context)
    except jinja2.TemplateNotFound as exc:
        raise PackageDataMissing(f"{TEMPLATES / name}: amibuild's own template is missing; the installation is "
                                 "incomplete: reinstall amibuild") from exc
    except jinja2.TemplateError as exc:
        where = f"{TEMPLATES / name}"
        line = getattr(exc, "lineno", None)
        raise TemplateError(f"{where}{':' + str(line) if line else ''}: {exc}") from exc


def _variable_block(var: PackerVariable) -> hcl.Block:
    block = hcl.Block("variable", (var.name,))
    block.attr("type", hcl.Expr(var.type)).attr("default", var.default)
    if var.sensitive:
        block.attr("sensitive", True)
    return block


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())


def _read(path: Path) -> str:
    """A script the pipeline file names: the user's to fix."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the script ({exc.strerror})") from exc


def _read_packaged(path: Path) -> str:
    """One of amibuild's own scripts: missing means a broken install, not bad input."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PackageDataMissing(f"{path}: amibuild's own provisioner script is missing or unreadable "
                                 f"({exc.strerror}); the installation is incomplete: reinstall amibuild") from exc


# ------------------------------------------------------------------------------- writing


def write(rendered: Rendered, out_dir: Path, record: Mapping[str, Any]) -> Path:
    """Write one variant's files into out_dir/<variant>/, replacing what was there as a whole."""
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / rendered.variant.name
    staging = Path(tempfile.mkdtemp(prefix=f".{rendered.variant.name}-", dir=out_dir))
    try:
        for name, text in rendered.files.items():
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            if name in rendered.executable:
                path.chmod(0o755)
        (staging / RECORD_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        # keep build logs and records of earlier runs that live beside the rendered files
        if final.exists():
            for keep in ("packer.log", "manifest.json"):
                if (final / keep).exists():
                    shutil.copy2(final / keep, staging / keep)
            old = final.with_name(f".{final.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            final.rename(old)
            staging.rename(final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            staging.rename(final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final
