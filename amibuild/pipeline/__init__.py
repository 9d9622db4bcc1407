"""The pipeline file plus command-line flags → frozen, validated `Pipeline` and `Variant` objects.

Precedence, lowest first — this table is the one place it is decided (`LAYERS`):

    1. built-in defaults          (`DEFAULTS` below)
    2. the pipeline file           `defaults { ... }` block, then the variants a variant `extends`
                                   (oldest first), then its own `variant "NAME" { ... }` block
    3. var-files                   `--var-file FILE.pkrvars.hcl`, in the order given
    4. flags                       `--k8s`, `--os`, `--arch`, `--base`, ..., then `--var KEY=VALUE`

Lists named in `ADDITIVE` (extra packages, extra repos) are unions across layers, so
`--extra-pkg htop` adds to a variant's packages instead of replacing them; everything else is
replaced by the higher layer. Settings and Packer variables share one namespace: a variant field such
as `instance_type` *is* the Packer variable of that name, so `--var instance_type=m6i.large`,
`instance_type = "..."` in a var-file and the pipeline file all mean the same thing.

Nothing here touches AWS or the file system beyond reading the files it is given.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Sequence

from amibuild import hcl
from amibuild.errors import SpecError, VarFileError
from amibuild.pipeline import checks, imagetests, support

PIPELINE_FILE = "amibuild.hcl"

OSES = ("al2", "al2023")
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
        "subnet_id": "",
        "security_group_id": "",
        "associate_public_ip_address": False,
        "source_ami": "",
        "extra_packages": (),
        "repos": (),
        "proxy": None,
        "scripts": (),
        "description": "",
        "tests": (),  # test "NAME" { ... } blocks (amibuild.pipeline.imagetests)
        "test_on_build": True,  # run the checks as the build's last provisioner (stage 1)
    }
)

# Fields that are amibuild settings and not Packer variables of the same name.
NON_PACKER_FIELDS = frozenset(
    {"base", "upstream", "upstream_ref", "os", "flavor", "extra_packages", "repos", "proxy", "scripts", "tests",
     "test_on_build"}
)
ADDITIVE = frozenset({"extra_packages", "repos"})
LAYERS = ("defaults", "pipeline file", "var-files", "flags")

_RPM_NAME = re.compile(r"^[A-Za-z0-9_+][A-Za-z0-9._+~^-]*$")
_K8S = re.compile(r"^1\.(\d+)$")
# the upstream base also takes a patch release (its binaries live under 1.N.P/<build date>/)
_K8S_PATCH = re.compile(r"^1\.(\d+)\.\d+$")
_VARIANT_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


# ------------------------------------------------------------------------------- value objects


@dataclass(frozen=True)
class Repo:
    """An extra yum/dnf repository baked into the image."""

    name: str
    baseurl: str
    gpgkey: str = ""


@dataclass(frozen=True)
class Proxy:
    """An HTTP proxy baked into the image (yum/dnf, /etc/environment, systemd drop-ins)."""

    http: str = ""
    https: str = ""
    no_proxy: str = ""

    def __bool__(self) -> bool:
        return bool(self.http or self.https)


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
    associate_public_ip_address: bool
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
        """The variant's values as a plain dict (for render.json and the fingerprint)."""
        return {
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
            "subnet_id": self.subnet_id,
            "security_group_id": self.security_group_id,
            "associate_public_ip_address": self.associate_public_ip_address,
            "source_ami": self.source_ami,
            "extra_packages": list(self.extra_packages),
            "repos": [vars(r) for r in self.repos],
            "proxy": vars(self.proxy),
            "scripts": [str(s) for s in self.scripts],
            "description": self.description,
            "packer_vars": dict(sorted(self.packer_vars.items())),
        }


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
    # SSM channel parameters: name template (None: publish.DEFAULT_NAME_TEMPLATE) and the channel
    # build-ami publishes to
    parameter_template: str | None = None
    default_channel: str = "recommended"
    # channel "NAME" { from, requires, soak } blocks, and the pipeline's test { ... } block
    gates: Mapping[str, imagetests.Gate] = field(default_factory=lambda: MappingProxyType({}))
    boot_test: imagetests.BootTestSettings = imagetests.BootTestSettings()

    @property
    def build_region(self) -> str:
        return self.regions[0]

    @property
    def target_regions(self) -> tuple[str, ...]:
        """Every region an image of this pipeline ends up in: build regions, then copies."""
        seen: dict[str, None] = {}
        for region in (*self.regions, *self.copy_to):
            seen.setdefault(region, None)
        return tuple(seen)


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


# ------------------------------------------------------------------------------- loading


def load(
    pipeline_file: str | Path | None,
    overrides: Overrides = Overrides(),
    *,
    default_region: str = "us-west-2",
    required: bool = False,
) -> Pipeline:
    """Read the pipeline file (if any), apply var-files and flags, and validate everything.

    ``pipeline_file=None`` means the default name in the current directory, used when present.
    ``required`` makes a missing file an error (an explicit ``--pipeline``).
    """
    path = Path(pipeline_file) if pipeline_file else Path(PIPELINE_FILE)
    doc: dict[str, Any] = {}
    source: Path | None = None
    if path.is_file():
        source = path
        doc = _parse_file(path)
    elif required or pipeline_file:
        raise SpecError(f"{path}: pipeline file not found; pass --pipeline with an existing file")

    where = str(source) if source else "flags"
    settings = _one_block(doc, "pipeline", where)
    _check_keys(settings, _PIPELINE_KEYS, f"{where}: pipeline")
    regions = tuple(overrides.regions) or tuple(_str_list(settings, "regions", where)) or (default_region,)
    pipeline_kwargs = dict(
        name=_str(settings.get("name", "amibuild"), f"{where}: pipeline.name"),
        ssm_prefix=_str(settings.get("ssm_prefix", "/amibuild"), f"{where}: pipeline.ssm_prefix"),
        regions=regions,
        copy_to=tuple(_str_list(settings, "copy_to", where)),
        ami_users=tuple(_str_list(settings, "ami_users", where)),
        tags=MappingProxyType(_str_map(settings.get("tags", {}), f"{where}: pipeline.tags")),
        parameter_template=_str(settings["parameter_template"], f"{where}: pipeline.parameter_template")
        if "parameter_template" in settings else None,
        default_channel=_str(settings.get("default_channel", "recommended"), f"{where}: pipeline.default_channel"),
        gates=imagetests.gate_map(imagetests.gates(doc.get("channel", []), where)),
        boot_test=imagetests.boot_test_settings(settings["test"], f"{where}: pipeline.test")
        if "test" in settings else imagetests.BootTestSettings(),
    )
    _validate_pipeline(pipeline_kwargs, where, from_flag=bool(overrides.regions))
    checks.pipeline_name(pipeline_kwargs["name"], where)
    checks.tags(pipeline_kwargs["tags"], f"{where}: pipeline.tags")

    defaults_block = _one_block(doc, "defaults", where)
    if "enabled" in defaults_block:
        raise SpecError(f"{where}: defaults: `enabled` belongs in a variant block (enabled = false leaves that "
                        "variant out unless --variant names it)")
    variant_blocks = _variant_blocks(doc, where)
    var_file_layer = _read_var_files(overrides.var_files)
    flag_layer = _flag_layer(overrides)

    names = _select(variant_blocks, overrides, where)
    variants = []
    for name in names:
        layers = [
            ("defaults", dict(DEFAULTS)),
            (f"{where}: defaults", _file_layer(defaults_block, f"{where}: defaults", source)),
            *(
                (f'{where}: variant "{link}"', _file_layer(variant_blocks[link], f'{where}: variant "{link}"', source))
                for link in _lineage(name, variant_blocks, where)
            ),
            *var_file_layer,
            *flag_layer,
        ]
        variants.append(_build_variant(name, layers, root=source.parent if source else Path.cwd()))
        imagetests.check_set(variants[-1])  # a test block refused at load, before any AWS work
    if len(regions) > 1:
        for variant in variants:
            if variant.source_ami:
                raise SpecError(
                    f"{variant.origins.get('source_ami', where)}: source_ami {variant.source_ami} exists in one region "
                    f"only, but the pipeline builds in {', '.join(regions)}; build in one region and use copy_to"
                )
    pipeline = Pipeline(variants=tuple(variants), source=source, **pipeline_kwargs)
    check_names(pipeline, pipeline.default_channel, where)
    return pipeline


def check_names(pipeline: Pipeline, channel: str, where: str = "flags") -> None:
    """Refuse, before any AWS work, the SSM parameter and AMI names a build would make and publish."""
    from amibuild.pipeline import naming

    for variant in pipeline.variants:
        try:
            naming.parameter_name(pipeline, variant, channel)  # SSM's rules, checks.ssm_parameter_name
        except SpecError as exc:
            raise SpecError(f"{where}: pipeline.parameter_template / ssm_prefix: {exc}") from None
        if "ami_name_prefix" not in variant.packer_vars:  # a --var ami_name_prefix is checked on its own
            # the AMI name both bases render: see render.template_variables and UPSTREAM_VARS
            checks.ami_name(f"{pipeline.name}-{variant.name}-{variant.kubernetes_version}-{variant.arch}"
                            "-{{timestamp}}", f"{where}: pipeline.name + variant {variant.name!r}")


_PIPELINE_KEYS = {"name", "ssm_prefix", "regions", "copy_to", "ami_users", "tags", "parameter_template",
                  "default_channel", "test"}
_VARIANT_KEYS = set(DEFAULTS) - {"repos", "proxy", "tests"} | {"repo", "proxy", "vars", "extends", "enabled", "test"}


def _read_hcl(path: Path, what: str, error: type[SpecError]) -> dict[str, Any]:
    """Read and parse one HCL file; errors name it (and the line, when the parser knows it)."""
    try:
        size = path.stat().st_size
        if size > checks.MAX_FILE_BYTES:
            raise error(f"{path}: the {what} is {size} bytes; at most {checks.MAX_FILE_BYTES} are read "
                        "(is this the right file?)")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc.__class__.__name__
        raise error(f"{path}: cannot read the {what} ({reason}); check the path") from exc
    try:
        raw = hcl.loads(text, keep_quotes=True)
    except hcl.HclSyntaxError as exc:
        at = f"{path}:{exc.line}" if exc.line else str(path)
        raise error(f"{at}: HCL syntax error in the {what} ({exc}); fix the file and retry") from exc
    # Packer reads var-files as literals only ("Variables not allowed"); the pipeline file follows
    # the same rule, so `instance_type = m6i.large` is refused here, not rendered as a string.
    problem = checks.literal_problem(raw)
    if problem is not None:
        line = checks.line_of(text, problem)
        at = f"{path}:{line}" if line else str(path)
        shown = problem[2:-1] if problem.startswith("${") and problem.endswith("}") else problem
        raise error(f"{at}: {shown[:60]!r} is a reference or expression; the {what} takes literal values "
                    'only: write strings in quotes, e.g. instance_type = "m6i.large"')
    return hcl.unquote(raw)


def _parse_file(path: Path) -> dict[str, Any]:
    doc = _read_hcl(path, "pipeline file", SpecError)
    if not doc:
        # an empty file (or only comments) would otherwise fall back to the flags alone and
        # quietly build a variant named `default`
        raise SpecError(f"{path}: the pipeline file is empty; add a `variant \"NAME\" {{ ... }}` block "
                        "(`amibuild init` writes a starter file) or delete it")
    unknown = set(doc) - {"pipeline", "defaults", "variant", "channel"}
    if unknown:
        key = sorted(unknown)[0]
        raise SpecError(
            f"{path}: unknown top-level `{key}`{suggest(key, ['pipeline', 'defaults', 'variant', 'channel'])}; "
            "the file holds `pipeline`, `defaults`, `variant \"NAME\"` and `channel \"NAME\"` blocks"
        )
    return doc


def _one_block(doc: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    blocks = doc.get(name, [])
    if isinstance(blocks, dict):
        blocks = [blocks]
    if len(blocks) > 1:
        raise SpecError(f"{where}: more than one `{name}` block; merge them into one")
    if blocks and not isinstance(blocks[0], dict):
        raise SpecError(f"{where}: `{name}` must be a block: {name} {{ ... }}")
    return dict(blocks[0]) if blocks else {}


def _variant_blocks(doc: dict[str, Any], where: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for entry in doc.get("variant", []):
        if not isinstance(entry, dict) or len(entry) != 1:
            raise SpecError(f'{where}: a variant block needs one name: variant "NAME" {{ ... }}')
        (name, body), = entry.items()
        if not isinstance(body, dict):
            raise SpecError(f'{where}: variant "{name}" must be a block')
        if name in out:
            raise SpecError(f'{where}: variant "{name}" is defined twice')
        _check_name(name, f'{where}: variant "{name}"')
        out[name] = body
    return out


def _lineage(name: str, blocks: Mapping[str, Mapping[str, Any]], where: str) -> list[str]:
    """The chain of variants `name` extends, oldest ancestor first, ending with `name` itself."""
    chain: list[str] = []
    current: str | None = name
    while current is not None:
        if current in chain:
            raise SpecError(f'{where}: variant "{name}": `extends` loops through {" -> ".join([*chain, current])}')
        if current not in blocks:
            if current == name:  # a variant named by flags alone, with no block in the file
                return []
            raise SpecError(f'{where}: variant "{chain[-1]}" extends unknown variant "{current}"'
                            f"{suggest(current, blocks)}")
        chain.append(current)
        parent = blocks[current].get("extends")
        if parent is not None and not isinstance(parent, str):
            raise SpecError(f'{where}: variant "{current}": extends = "OTHER_VARIANT" (a name in quotes)')
        current = parent
    return chain[::-1]


def _select(variant_blocks: dict[str, Any], overrides: Overrides, where: str) -> list[str]:
    if overrides.variants and overrides.all_variants:
        raise SpecError("--all and --variant: give one of them (--all is every variant of the pipeline file)")
    if overrides.variants:
        for name in overrides.variants:
            if variant_blocks and name not in variant_blocks:
                raise SpecError(
                    f"--variant {name}: no such variant in {where}"
                    f"{suggest(name, variant_blocks)}; known: {', '.join(variant_blocks)}"
                )
            _check_name(name, f"--variant {name}")
        return list(dict.fromkeys(overrides.variants))
    if variant_blocks:
        # `enabled = false` leaves a variant out unless --variant names it (one that needs the
        # network to clone, say). It belongs to the block: a variant extending it is not disabled.
        enabled = [name for name, block in variant_blocks.items()
                   if _bool(block.get("enabled", True), f'{where}: variant "{name}": enabled')]
        if not enabled:
            raise SpecError(f"{where}: every variant has `enabled = false`; name one with --variant "
                            f"({', '.join(variant_blocks)}) or enable one in the file")
        return enabled
    return ["default"]


def _check_name(name: str, where: str) -> None:
    if not _VARIANT_NAME.match(name):
        raise SpecError(
            f"{where}: variant names are lowercase letters, digits and '-', starting with a letter "
            "or digit, at most 63 characters"
        )


def _check_keys(block: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
    for key in block:
        if key not in allowed:
            raise SpecError(f"{where}: unknown field `{key}`{suggest(key, allowed)}")


def _file_layer(block: Mapping[str, Any], where: str, source: Path | None) -> dict[str, Any]:
    """One block of the pipeline file as a layer of settings (paths made absolute)."""
    if not block:
        return {}
    layer: dict[str, Any] = {}
    for key, value in block.items():
        if key in ("extends", "enabled"):
            continue  # followed by _lineage; `enabled` only selects (see _select)
        if key == "vars":
            if not isinstance(value, dict):
                raise SpecError(f"{where}: `vars` must be a map: vars = {{ name = value }}")
            for var, var_value in value.items():
                layer[str(var)] = (var_value, f"{where}: vars.{var}")
        elif key == "repo":
            layer["repos"] = (_repos_from_blocks(value, where), f"{where}: repo")
        elif key == "test":
            layer["tests"] = (imagetests.test_blocks(value, where), f"{where}: test")
        elif key == "proxy":
            proxies = value if isinstance(value, list) else [value]
            if len(proxies) != 1 or not isinstance(proxies[0], dict):
                raise SpecError(f"{where}: write one block: proxy {{ http = ..., https = ..., no_proxy = ... }}")
            _check_keys(proxies[0], ("http", "https", "no_proxy"), f"{where}: proxy")
            layer["proxy"] = (proxies[0], f"{where}: proxy")
        elif key in DEFAULTS and key not in ("repos", "tests"):
            if key == "scripts" and source is not None and isinstance(value, list):
                value = [str((source.parent / str(s))) for s in value]
            layer[key] = (value, f"{where}: {key}")
        else:
            raise SpecError(f"{where}: unknown field `{key}`{suggest(key, _VARIANT_KEYS)}")
    return layer


def _repos_from_blocks(value: Any, where: str) -> list[dict[str, str]]:
    repos = []
    for entry in value if isinstance(value, list) else [value]:
        if not isinstance(entry, dict) or len(entry) != 1:
            raise SpecError(f'{where}: write repo "NAME" {{ baseurl = ..., gpgkey = ... }}')
        (name, body), = entry.items()
        if not isinstance(body, dict):
            raise SpecError(f'{where}: repo "{name}" must be a block')
        _check_keys(body, ("baseurl", "gpgkey"), f'{where}: repo "{name}"')
        repos.append({"name": name, "baseurl": body.get("baseurl", ""), "gpgkey": body.get("gpgkey", "")})
    return repos


def _read_var_files(paths: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    layers = []
    for name in paths:
        if not Path(name).is_file():
            raise VarFileError(f"--var-file {name}: no such file; check the path")
        doc = _read_hcl(Path(name), "var-file", VarFileError)
        layer: dict[str, Any] = {}
        for key, value in doc.items():
            if isinstance(value, list) and value and all(isinstance(v, dict) for v in value) and key not in DEFAULTS:
                raise VarFileError(f"{name}: `{key}` is a block; a var-file holds only `name = value` lines")
            layer[key] = (value, f"{name}: {key}")
        layers.append((name, layer))
    return layers


def _flag_layer(o: Overrides) -> list[tuple[str, dict[str, Any]]]:
    flags: dict[str, Any] = {}
    for key, flag in (
        ("base", "--base"),
        ("upstream", "--upstream"),
        ("upstream_ref", "--upstream-ref"),
        ("os", "--os"),
        ("kubernetes_version", "--k8s"),
        ("arch", "--arch"),
        ("flavor", "--flavor"),
    ):
        value = getattr(o, key)
        if value:
            flags[key] = (value, f"{flag} {value}")
    if o.extra_packages:
        flags["extra_packages"] = (list(o.extra_packages), "--extra-pkg")
    if o.extra_repos:
        repos = []
        for item in o.extra_repos:
            name, sep, url = item.partition("=")
            if not sep or not name or not url:
                raise SpecError(f"--extra-repo {item}: write NAME=URL, e.g. --extra-repo ceph=https://download.ceph.com/rpm-reef/el9/x86_64")
            repos.append({"name": name, "baseurl": url, "gpgkey": ""})
        flags["extra_repos_flag"] = (repos, "--extra-repo")
    variables: dict[str, Any] = {}
    for item in o.variables:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not _VAR_NAME.match(key):
            raise SpecError(f"--var {item}: write KEY=VALUE, e.g. --var volume_size=40")
        variables[key] = (value, f"--var {key}")
    return [("flags", flags), ("--var", variables)]


def _build_variant(name: str, layers: list[tuple[str, dict[str, Any]]], root: Path | None = None) -> Variant:
    merged: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for layer_name, layer in layers:
        for key, entry in layer.items():
            value, where = entry if layer_name != "defaults" else (entry, "defaults")
            if key == "extra_repos_flag":
                key = "repos"
            if key in ADDITIVE:
                merged[key] = [*merged.get(key, ()), *_as_list(value, where)]
            elif key == "tests":  # a later block of the same name replaces the earlier one
                merged[key] = imagetests.merge_blocks([merged.get(key, ()), value])
            else:
                merged[key] = value
            origin[key] = where
    return _validate_variant(name, merged, origin, root=root or Path.cwd())


# ------------------------------------------------------------------------------- validation


def _validate_pipeline(kw: dict[str, Any], where: str, *, from_flag: bool) -> None:
    prefix = kw["ssm_prefix"]
    if not prefix.startswith("/") or prefix.endswith("/") and prefix != "/" or "//" in prefix:
        raise SpecError(f"{where}: pipeline.ssm_prefix {prefix!r} must start with '/' and not end with '/', e.g. \"/amibuild\"")
    if not re.match(r"^[A-Za-z0-9_./-]+$", prefix) or prefix.lower().startswith(("/aws", "/ssm")):
        raise SpecError(f"{where}: pipeline.ssm_prefix {prefix!r}: use letters, digits, '_', '.', '-' and '/', not under /aws or /ssm")
    known = known_regions()
    for field_name in ("regions", "copy_to"):
        for region in kw[field_name]:
            if region not in known:
                label = "--region" if field_name == "regions" and from_flag else f"{where}: pipeline.{field_name}"
                raise SpecError(f"{label}: unknown region {region!r}{suggest(region, known)}")
    from amibuild.pipeline import naming

    for key, check in (("parameter_template", naming.check_template), ("default_channel", naming.check_channel)):
        if kw[key] is not None:
            try:
                check(kw[key])
            except SpecError as exc:
                raise SpecError(f"{where}: pipeline.{key}: {exc}") from None
    for account in kw["ami_users"]:
        if not re.match(r"^\d{12}$", account):
            raise SpecError(f"{where}: pipeline.ami_users: {account!r} is not a 12-digit AWS account id")


def _validate_variant(name: str, m: dict[str, Any], origin: dict[str, str], *, root: Path) -> Variant:
    def at(key: str) -> str:
        return origin.get(key, "defaults")

    base = _choice(m["base"], BASES, at("base"))
    os_ = _choice(m["os"], OSES, at("os"))
    arch = _choice(m["arch"], ARCHES, at("arch"))
    k8s = _str(m["kubernetes_version"], at("kubernetes_version"))
    match = _K8S.match(k8s) or (_K8S_PATCH.match(k8s) if base == "upstream" else None)
    if not match and base == "upstream":
        raise SpecError(f"{at('kubernetes_version')}: Kubernetes version {k8s!r} must look like 1.N or 1.N.P, "
                        "e.g. 1.30 or 1.30.4")
    if not match:
        hint = " (a patch release 1.N.P is for base \"upstream\")" if _K8S_PATCH.match(k8s) else ""
        raise SpecError(f"{at('kubernetes_version')}: Kubernetes version {k8s!r} must look like 1.N, e.g. 1.30{hint}")
    if os_ == "al2" and int(match.group(1)) > AL2_LAST_K8S and at("kubernetes_version") == "defaults":
        # AL2 asked for, the version left to the built-in default (AL2023's): name where AL2 came from
        raise SpecError(
            f"{at('os')}: Amazon Linux 2 needs a Kubernetes version of 1.{AL2_LAST_K8S} or older, and the built-in "
            f"default is {k8s}: set kubernetes_version (--k8s 1.{AL2_LAST_K8S}), or use os = \"al2023\""
        )
    if os_ == "al2" and int(match.group(1)) > AL2_LAST_K8S:
        raise SpecError(
            f"{at('kubernetes_version')}: Kubernetes {k8s} has no EKS Amazon Linux 2 image "
            f"(the last is 1.{AL2_LAST_K8S}); use os = \"al2023\" or an older version"
        )
    flavors = FLAVORS[os_]
    flavor = _choice(m["flavor"], tuple(flavors), at("flavor"))
    if arch not in flavors[flavor]:
        raise SpecError(f"{at('flavor')}: EKS publishes no {os_} {flavor} image for {arch}; "
                        f"use arch = \"{flavors[flavor][0]}\" or another flavor")
    if base == "upstream" and flavor != DEFAULT_FLAVOR:
        raise SpecError(f"{at('flavor')}: the upstream base builds the standard eks-worker-al2 image; "
                        "flavors are for base = \"eks-optimized\"")
    if base == "upstream" and not m["upstream"]:
        raise SpecError(f"{at('base')}: base \"upstream\" needs upstream = PATH_OR_GIT_URL (or --upstream)")

    checks.count(m.get("extra_packages", ()), checks.MAX_PACKAGES, at("extra_packages"), "extra packages")
    checks.count(m.get("repos", ()), checks.MAX_REPOS, at("repos"), "repositories")
    packages = tuple(dict.fromkeys(_str(p, at("extra_packages")) for p in m.get("extra_packages", ())))
    for pkg in packages:
        if not _RPM_NAME.match(pkg):
            raise SpecError(
                f"{at('extra_packages')}: package name {pkg!r} is not a valid RPM name "
                "(letters, digits and ._+~^- only, no spaces or shell characters)"
            )
    repos = []
    for raw in m.get("repos", ()):
        repo = Repo(str(raw.get("name", "")), str(raw.get("baseurl", "")), str(raw.get("gpgkey", "") or ""))
        checks.repo(repo.name, repo.baseurl, repo.gpgkey, at("repos"))
        if any(r.name == repo.name for r in repos):
            repos = [r for r in repos if r.name != repo.name]  # a later layer redefines it
        repos.append(repo)
    proxy_raw = m.get("proxy") or {}
    proxy = Proxy(**{k: _str(v, at("proxy")) for k, v in proxy_raw.items()})
    for label, url in (("http", proxy.http), ("https", proxy.https)):
        if url:
            checks.url(url, at("proxy"), f"proxy.{label}")
    checks.no_proxy(proxy.no_proxy, at("proxy"))
    scripts = []
    script_list = _as_list(m.get("scripts", ()), at("scripts"))
    checks.count(script_list, checks.MAX_SCRIPTS, at("scripts"), "scripts")
    top = root.resolve()
    for script in script_list:
        # the scripts are uploaded and run with sudo: only files of the pipeline repository, with
        # symlinks followed, so `../../etc/shadow` or a link out of the folder cannot be shipped
        path = (top / _str(script, at("scripts"))).resolve()
        if not path.is_relative_to(top):
            raise SpecError(f"{at('scripts')}: script {script} is outside {top}; keep provisioner scripts in "
                            "the pipeline file's folder")
        if not path.is_file():
            raise SpecError(f"{at('scripts')}: script {script} not found")
        scripts.append(path)

    volume_size = _int(m["volume_size"], at("volume_size"))
    if not 8 <= volume_size <= 16384:
        raise SpecError(f"{at('volume_size')}: volume_size {volume_size} must be between 8 and 16384 GiB")
    source_ami = _str(m["source_ami"], at("source_ami"))
    if source_ami and not re.match(r"^ami-[0-9a-f]{8,17}$", source_ami):
        raise SpecError(f"{at('source_ami')}: source_ami {source_ami!r} is not an AMI id (ami-0123456789abcdef0)")

    encrypted = _bool(m["encrypted"], at("encrypted"))
    kms_key_id = checks.pattern(_str(m["kms_key_id"], at("kms_key_id")), at("kms_key_id"), "kms_key_id")
    if kms_key_id and not encrypted:
        raise SpecError(f"{at('kms_key_id')}: kms_key_id is set but encrypted is false; set encrypted = true "
                        "or drop kms_key_id")
    for key in ("instance_type", "subnet_id", "security_group_id", "upstream_ref"):
        checks.pattern(_str(m[key], at(key)), at(key), key)
    upstream_src = _str(m["upstream"], at("upstream"))
    if upstream_src.startswith("-") or checks.has_control(upstream_src):
        raise SpecError(f"{at('upstream')}: upstream {upstream_src[:60]!r}: a path or git URL (not starting with '-')")
    checks.text(_str(m["description"], at("description")), at("description"), "description",
                limit=checks.AMI_DESCRIPTION_MAX)

    known = set(DEFAULTS)
    packer_vars = {k: v for k, v in m.items() if k not in known}
    regions = known_regions()
    for key, value in packer_vars.items():
        if not _VAR_NAME.match(key):
            raise SpecError(f"{origin[key]}: {key!r} is not a valid Packer variable name")
        checks.packer_variable(key, value, origin[key], known_regions=regions)
    return Variant(
        name=name,
        base=base,
        upstream=_str(m["upstream"], at("upstream")),
        upstream_ref=_str(m["upstream_ref"], at("upstream_ref")),
        os=os_,
        kubernetes_version=k8s,
        arch=arch,
        instance_type=_str(m["instance_type"], at("instance_type")),
        volume_size=volume_size,
        volume_type=_choice(m["volume_type"], VOLUME_TYPES, at("volume_type")),
        encrypted=encrypted,
        kms_key_id=kms_key_id,
        subnet_id=_str(m["subnet_id"], at("subnet_id")),
        security_group_id=_str(m["security_group_id"], at("security_group_id")),
        associate_public_ip_address=_bool(m["associate_public_ip_address"], at("associate_public_ip_address")),
        source_ami=source_ami,
        extra_packages=packages,
        repos=tuple(repos),
        proxy=proxy,
        scripts=tuple(scripts),
        description=_str(m["description"], at("description")),
        packer_vars=MappingProxyType({k: packer_vars[k] for k in sorted(packer_vars)}),
        origins=MappingProxyType(dict(origin)),
        flavor=flavor,
        tests=tuple(m.get("tests", ())),
        test_on_build=_bool(m["test_on_build"], at("test_on_build")),
    )


# ------------------------------------------------------------------------------- small helpers


def known_regions() -> frozenset[str]:
    """Every region botocore knows, across partitions, read straight from its endpoints data
    (a tenth of the time a botocore session takes to answer the same question)."""
    global _REGIONS
    if _REGIONS is None:
        import gzip
        import json

        import botocore

        data = Path(botocore.__file__).parent / "data" / "endpoints.json"
        raw = data.read_bytes() if data.exists() else gzip.decompress(data.with_suffix(".json.gz").read_bytes())
        _REGIONS = frozenset(region for partition in json.loads(raw)["partitions"] for region in partition["regions"])
    return _REGIONS


_REGIONS: frozenset[str] | None = None


def suggest(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _choice(value: Any, choices: Sequence[str], where: str) -> str:
    text = _str(value, where)
    if text not in choices:
        raise SpecError(f"{where}: {text!r} is not supported; use one of {', '.join(choices)}{suggest(text, choices)}")
    return text


def _str(value: Any, where: str) -> str:
    if isinstance(value, bool) or isinstance(value, (list, dict)):
        raise SpecError(f"{where}: expected a string, got {_kind(value)}")
    if isinstance(value, float):  # `1.30` unquoted would silently become "1.3"
        raise SpecError(f"{where}: write {value!r} in quotes, as a string")
    return "" if value is None else str(value)


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool):
        raise SpecError(f"{where}: expected a whole number, got {value!r}")
    try:
        return int(str(value).strip())
    except ValueError:
        raise SpecError(f"{where}: expected a whole number, got {value!r}") from None


def _bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise SpecError(f"{where}: expected true or false, got {value!r}")


def _as_list(value: Any, where: str) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):  # a --var or var-file may give "a,b"
        return [v for v in re.split(r"[,\s]+", value) if v]
    raise SpecError(f"{where}: expected a list, got {_kind(value)}")


def _str_list(block: Mapping[str, Any], key: str, where: str) -> list[str]:
    value = block.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"{where}: pipeline.{key} must be a list of strings")
    return value


def _str_map(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise SpecError(f"{where}: expected a map of strings")
    return {str(k): _str(v, f"{where}.{k}") for k, v in value.items()}


def _kind(value: Any) -> str:
    return {bool: "a bool", list: "a list", dict: "a map"}.get(type(value), type(value).__name__)
