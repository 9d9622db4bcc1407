"""Loading: the pipeline file, var-files and flags read into layers and merged in `LAYERS` order
(see the package docstring), each variant then validated (validation.py).

Each source is a `Layer` of `Setting`s (a value and where it was set); `Merged.apply` stacks them and
keeps each key's origin, the place an error names ("--extra-pkg", "--var volume_size").
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from amibuild import PIPELINE_FILE, hcl, hclcache, secrets
from amibuild.errors import SpecError, VarFileError
from amibuild.lease import build_lease_name, channel_lease_name
from amibuild.notify.destination import EventTarget, event_target
from amibuild.pipeline import attestation, value_checks as checks, files, imagetests, keys, naming, protection
from amibuild.pipeline.model import ADDITIVE, DEFAULT_FINGERPRINT_KEY, DEFAULTS, LAYERS, Overrides, Pipeline
from amibuild.pipeline.validation import (VAR_NAME, bool_value, known_regions, list_value, region_partitions, str_list,
                                          str_map, str_value, validate_pipeline, validate_variant)
from amibuild.suggest import one_block, suggest

_VARIANT_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}\Z")


class Setting(NamedTuple):
    """One key's value in one layer, and where it was set: "defaults", "--extra-pkg", "--var volume_size",
    'amibuild.hcl: variant "ceph": extra_packages' (errors name it)."""

    value: Any
    where: str


# The settings one source gives: the defaults, a block of the pipeline file, a var-file, the flags.
Layer = Mapping[str, Setting]


@dataclass(frozen=True)
class Merged:
    """Layers merged so far: each key's value, and where that value was set."""

    values: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    origins: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def apply(self, layers: Iterable[Layer]) -> Merged:
        """These values with `layers` on top, in order: later values win, ADDITIVE lists add up."""
        values, origins = dict(self.values), dict(self.origins)
        for layer in layers:
            for key, (value, where) in layer.items():
                if key in ADDITIVE:
                    values[key] = [*values.get(key, ()), *list_value(value, where)]
                elif key == "tests":  # a later block of the same name replaces the earlier one
                    values[key] = imagetests.merge_blocks([values.get(key, ()), value])
                else:
                    values[key] = value
                origins[key] = where
        return Merged(MappingProxyType(values), MappingProxyType(origins))


def load(
    pipeline_file: str | Path | None,
    overrides: Overrides = Overrides(),
    *,
    default_region: str = "us-west-2",
    required: bool = False,
    parse_cache: Path | None = None,
) -> Pipeline:
    """Read the pipeline file (if any), apply var-files and flags, and validate everything.

    ``pipeline_file=None`` means the default name in the current directory, used when present.
    ``required`` makes a missing file an error (an explicit ``--pipeline``). ``parse_cache``: a
    folder of python-hcl2 parses keyed by the file's text (`amibuild.hclcache`), read when given;
    this file's parse is added to it only once the whole pipeline has loaded and only when the
    folder's parent (the build folder) exists already, so bad input writes nothing.
    """
    path = Path(pipeline_file) if pipeline_file else Path(PIPELINE_FILE)
    doc: dict[str, Any] = {}
    source: Path | None = None
    if path.is_file() or os.path.lexists(path) and files.problem(path) != "no such file":
        source = files.regular(path, str(path), "pipeline file")
        doc = _parse_file(path, parse_cache)
    elif required or pipeline_file:
        raise SpecError(f"{path}: pipeline file not found; pass --pipeline with an existing file")

    where = str(source) if source else "flags"
    settings = _one_block(doc, "pipeline", where)
    _check_keys(settings, _PIPELINE_KEYS, f"{where}: pipeline")
    # a region named twice is one region (two builds there would be two Packer sources of one name)
    file_regions = tuple(dict.fromkeys(str_list(settings, "regions", where)))
    regions = tuple(dict.fromkeys(overrides.regions)) or file_regions or (default_region,)
    pipeline_kwargs = dict(
        name=str_value(settings.get("name", "amibuild"), f"{where}: pipeline.name"),
        ssm_prefix=str_value(settings.get("ssm_prefix", "/amibuild"), f"{where}: pipeline.ssm_prefix"),
        regions=regions,
        file_regions=file_regions if overrides.regions else (),
        copy_to=tuple(str_list(settings, "copy_to", where)),
        ami_users=tuple(str_list(settings, "ami_users", where)),
        tags=MappingProxyType(str_map(settings.get("tags", {}), f"{where}: pipeline.tags")),
        parameter_template=str_value(settings["parameter_template"], f"{where}: pipeline.parameter_template")
        if "parameter_template" in settings else None,
        default_channel=str_value(settings.get("default_channel", "recommended"), f"{where}: pipeline.default_channel"),
        fingerprint_key=checks.kms_key(str_value(settings.get("fingerprint_key", DEFAULT_FINGERPRINT_KEY),
                                            f"{where}: pipeline.fingerprint_key"), f"{where}: pipeline.fingerprint_key"),
        gates=imagetests.gates(doc.get("channel", []), where),
        boot_test=imagetests.boot_test_settings(settings["test"], f"{where}: pipeline.test")
        if "test" in settings else imagetests.BootTestSettings(),
        attestation=attestation.attestation_settings(settings["attestation"], f"{where}: pipeline.attestation",
                                                     known_regions())
        if "attestation" in settings else attestation.AttestationSettings(),
        events=event_target(settings["events"], f"{where}: pipeline.events", known_regions())
        if "events" in settings else EventTarget(),
        protection=protection.protection_settings(settings["protection"], f"{where}: pipeline.protection")
        if "protection" in settings else protection.ProtectionSettings(),
    )
    validate_pipeline(pipeline_kwargs, where, from_flag=bool(overrides.regions))
    checks.pipeline_name(pipeline_kwargs["name"], where)
    checks.tags(pipeline_kwargs["tags"], f"{where}: pipeline.tags")

    defaults_block = _one_block(doc, "defaults", where)
    if "enabled" in defaults_block:
        raise SpecError(f"{where}: defaults: `enabled` belongs in a variant block (enabled = false leaves that "
                        "variant out unless --variant names it)")
    if "extends" in defaults_block:  # _file_layer skips it: every variant starts from the defaults already
        raise SpecError(f"{where}: defaults: `extends` belongs in a variant block (extends = \"OTHER_VARIANT\"); "
                        "every variant starts from the defaults")
    variant_blocks = _variant_blocks(doc, where)
    # LAYERS orders the kinds of layer (lowest first). The first two, the defaults and the pipeline
    # file, are merged once per variant block and shared along `extends` chains (`_Chains`); the
    # var-files and flags go on top of each variant's.
    assert LAYERS[:2] == ("defaults", "pipeline file"), "_Chains merges these two first"
    by_kind = {"var-files": _read_var_files(overrides.var_files), "flags": overrides_layers(overrides)}  # the rest of LAYERS
    assert {*LAYERS[:2], *by_kind} == set(LAYERS), "a layer kind missing from LAYERS would be dropped"
    later_layers = [layer for kind in LAYERS[2:] for layer in by_kind[kind]]

    names = _select(variant_blocks, overrides, where)
    defaults_layer: Layer = MappingProxyType({key: Setting(value, "defaults") for key, value in DEFAULTS.items()})
    base = Merged().apply([defaults_layer, _file_layer(defaults_block, f"{where}: defaults", source)])
    chains = _Chains(variant_blocks, base, where, source)
    for name in variant_blocks:  # every block's fields and `extends`, selected or not: a typo is refused today
        chains.state(name)
    variants = []
    for name in names:
        merged = chains.state(name).apply(later_layers)
        variants.append(validate_variant(name, dict(merged.values), dict(merged.origins),
                                          root=source.parent if source else Path.cwd()))
        imagetests.check_set(variants[-1])  # a test block refused at load, before any AWS work
    for variant in variants:
        if variant.source_ami and len(regions) > 1:
            raise SpecError(
                f"{variant.origins.get('source_ami', where)}: source_ami {variant.source_ami} exists in one region "
                f"only, but the pipeline builds in {', '.join(regions)}; build in one region and use copy_to"
            )
    for variant in variants:  # each region's key, and whether the accounts shared with can use it
        keys.check(variant, regions, pipeline_kwargs["copy_to"], pipeline_kwargs["ami_users"],
                   known_regions=known_regions(), where=where, file_regions=pipeline_kwargs["file_regions"],
                   partitions=region_partitions())
    for variant in variants:  # who may launch each image, and whether it carries credentials
        checks.sharing(variant, pipeline_kwargs["ami_users"], where=where,
                       public=bool_value(settings.get("public", False), f"{where}: pipeline.public"),
                       allow_shared_credentials=bool_value(settings.get("allow_shared_credentials", False),
                                                      f"{where}: pipeline.allow_shared_credentials"))
    pipeline = Pipeline(variants=tuple(variants), source=source, **pipeline_kwargs)
    check_names(pipeline, pipeline.default_channel, where)
    if source is not None and parse_cache is not None and parse_cache.parent.is_dir():
        # what was parsed is kept only for the text parsed: a file changed since is simply not found
        hclcache.remember(_text_of(source), keep_quotes=True, folder=parse_cache)
    return pipeline


def _text_of(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def check_names(pipeline: Pipeline, channel: str, where: str = "flags") -> None:
    """Refuse, before any AWS work, the SSM parameter and AMI names a build would make and publish."""
    for variant in pipeline.variants:
        try:
            naming.parameter_name(pipeline, variant, channel)  # SSM's rules, checks.ssm_parameter_name
        except SpecError as exc:
            raise SpecError(f"{where}: pipeline.parameter_template / ssm_prefix: {exc}") from None
        # the leases live under ssm_prefix whatever the template: a short template can hide a deep prefix
        for lease in (channel_lease_name(pipeline.ssm_prefix, pipeline.name, variant.name, channel),
                      build_lease_name(pipeline.ssm_prefix, pipeline.name, variant.name, "0" * 32)):
            checks.ssm_parameter_name(lease, f"{where}: pipeline.ssm_prefix (amibuild's leases live under it)",
                                      "ssm_prefix")
        if "ami_name_prefix" not in variant.packer_vars:  # a --var ami_name_prefix is checked on its own
            # the AMI name both bases render: see render.template_variables and UPSTREAM_VARS
            checks.ami_name(f"{pipeline.name}-{variant.name}-{variant.kubernetes_version}-{variant.arch}-{{{{timestamp}}}}"
                            + ("" if variant.base == "upstream" else checks.RUN_ID_SUFFIX),
                            f"{where}: pipeline.name + variant {variant.name!r}")


_TOP_BLOCKS = ("pipeline", "defaults", "variant", "channel")
_PIPELINE_KEYS = {"name", "ssm_prefix", "regions", "copy_to", "ami_users", "tags", "parameter_template",
                  "default_channel", "public", "allow_shared_credentials", "test", "attestation", "fingerprint_key",
                  "events", "protection"}
_PROXY_KEYS = ("http", "https", "no_proxy", "credentials_parameter")
_REPO_KEYS = ("baseurl", "gpgkey", "gpgcheck", "insecure")
_VARIANT_KEYS = set(DEFAULTS) - {"repos", "proxy", "tests"} | {"repo", "proxy", "vars", "extends", "enabled", "test"}


def _read_hcl(path: Path, what: str, error: type[SpecError], cache: Path | None = None) -> dict[str, Any]:
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
        raw = hclcache.loads(text, keep_quotes=True, folder=cache)
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


def _parse_file(path: Path, cache: Path | None = None) -> dict[str, Any]:
    doc = _read_hcl(path, "pipeline file", SpecError, cache)
    if not doc:
        # an empty file (or only comments) would otherwise fall back to the flags alone and
        # quietly build a variant named `default`
        raise SpecError(f"{path}: the pipeline file is empty; add a `variant \"NAME\" {{ ... }}` block "
                        "(`amibuild init` writes a starter file) or delete it")
    unknown = set(doc) - set(_TOP_BLOCKS)
    if unknown:
        key = sorted(unknown)[0]
        raise SpecError(
            f"{path}: unknown top-level `{key}`{suggest(key, _TOP_BLOCKS)}; "
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


class _Chains:
    """The settings of each variant block after its `extends` chain, oldest ancestor first.

    Each block's merged state is computed once and reused by every variant that extends it (a
    chain of N links costs N merges, not N²); the walk is a loop, not recursion, so no depth
    limit applies, and a set finds loops.
    """

    def __init__(self, blocks: Mapping[str, Mapping[str, Any]], base: Merged, where: str, source: Path | None):
        self.blocks, self.base, self.where, self.source = blocks, base, where, source
        self.memo: dict[str, Merged] = {}

    def state(self, name: str) -> Merged:
        if name in self.memo:
            return self.memo[name]
        if name not in self.blocks:  # a variant named by flags alone, with no block in the file
            return self.base
        chain: list[str] = []  # from `name` up to the first link already known
        seen: set[str] = set()
        current: str | None = name
        while current is not None and current not in self.memo:
            if current in seen:
                raise SpecError(f'{self.where}: variant "{name}": `extends` loops through '
                                f'{" -> ".join([*chain[chain.index(current):], current])}')
            if current not in self.blocks:
                raise SpecError(f'{self.where}: variant "{chain[-1]}" extends unknown variant "{current}"'
                                f"{suggest(current, self.blocks)}")
            seen.add(current)
            chain.append(current)
            parent = self.blocks[current].get("extends")
            if parent is not None and not isinstance(parent, str):
                raise SpecError(f'{self.where}: variant "{current}": extends = "OTHER_VARIANT" (a name in quotes)')
            current = parent
        state = self.memo[current] if current is not None else self.base
        for link in reversed(chain):
            label = f'{self.where}: variant "{link}"'
            state = state.apply([_file_layer(self.blocks[link], label, self.source)])
            self.memo[link] = state
        return state


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
                   if bool_value(block.get("enabled", True), f'{where}: variant "{name}": enabled')]
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


def _unknown(key: str, allowed: Iterable[str], where: str) -> SpecError:
    if key in _TOP_BLOCKS:  # `channel "stable" { ... }` written inside a variant
        return SpecError(f"{where}: a `{key}` block goes at the top level of the file, beside the variant blocks, "
                         "not inside this one")
    return SpecError(f"{where}: unknown field `{key}`{suggest(key, allowed)}")


def _check_keys(block: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
    for key in block:
        if key not in allowed:
            raise _unknown(key, allowed, where)


def _file_layer(block: Mapping[str, Any], where: str, source: Path | None) -> Layer:
    """One block of the pipeline file as a layer of settings (paths made absolute)."""
    layer: dict[str, Setting] = {}
    for key, value in block.items():
        if key in ("extends", "enabled"):
            continue  # followed by _Chains; `enabled` only selects (see _select)
        if key == "vars":
            if not isinstance(value, dict):
                raise SpecError(f"{where}: `vars` must be a map: vars = {{ name = value }}")
            for var, var_value in value.items():
                _check_block_setting(str(var), var_value, f"{where}: vars.{var}")
                layer[str(var)] = Setting(var_value, f"{where}: vars.{var}")
        elif key == "test":
            layer["tests"] = Setting(imagetests.test_blocks(value, where), f"{where}: test")
        elif key == "repo":
            layer["repos"] = Setting(_repos_from_blocks(value, where), f"{where}: repo")
        elif key == "proxy":
            proxy = one_block(value, where, "proxy { http = ..., https = ..., no_proxy = ... }")
            _check_keys(proxy, _PROXY_KEYS, f"{where}: proxy")
            layer["proxy"] = Setting(proxy, f"{where}: proxy")
        elif key in DEFAULTS and key not in ("repos", "tests"):
            if key == "scripts" and source is not None and isinstance(value, list):
                value = [str(source.parent / str(s)) for s in value]
            layer[key] = Setting(value, f"{where}: {key}")
        else:
            raise _unknown(key, _VARIANT_KEYS, where)
    return MappingProxyType(layer)


def _repos_from_blocks(value: Any, where: str) -> list[dict[str, str]]:
    repos = []
    for entry in value if isinstance(value, list) else [value]:
        if not isinstance(entry, dict) or len(entry) != 1:
            raise SpecError(f'{where}: write repo "NAME" {{ baseurl = ..., gpgkey = ... }}')
        (name, body), = entry.items()
        if not isinstance(body, dict):
            raise SpecError(f'{where}: repo "{name}" must be a block')
        _check_keys(body, _REPO_KEYS, f'{where}: repo "{name}"')
        if any(repo["name"] == name for repo in repos):  # a later layer may redefine it, one block may not
            raise SpecError(f'{where}: repo "{name}" is defined twice in one block; merge them')
        repos.append({"name": name, "baseurl": body.get("baseurl", ""), "gpgkey": body.get("gpgkey", ""),
                      **{key: body[key] for key in ("gpgcheck", "insecure") if key in body}})
    return repos


def _read_var_files(paths: Sequence[str]) -> list[Layer]:
    layers = []
    for name in paths:
        if files.problem(Path(name)) == "no such file":
            raise VarFileError(f"--var-file {name}: no such file; check the path")
        files.regular(Path(name), f"--var-file {name}", "var-file", VarFileError)
        doc = _read_hcl(Path(name), "var-file", VarFileError)
        for key, value in doc.items():
            if isinstance(value, list) and value and all(isinstance(v, dict) for v in value) and key not in DEFAULTS:
                raise VarFileError(f"{name}: `{key}` is a block; a var-file holds only `name = value` lines")
            _check_block_setting(key, value, f"{name}: {key}")
        layers.append(MappingProxyType({key: Setting(value, f"{name}: {key}") for key, value in doc.items()}))
    return layers


# The settings the pipeline file gives as blocks: `vars`, a var-file or --var may give them only in the shape those load to.
_BLOCK_SETTINGS = {"proxy": "a proxy { http = ... } block in the pipeline file (or --var http_proxy=URL)",
                   "repos": 'repo "NAME" { ... } blocks in the pipeline file (or --extra-repo NAME=URL|GPGKEY)',
                   "tests": 'test "NAME" { ... } blocks in the pipeline file'}


def _check_block_setting(key: str, value: Any, where: str) -> None:
    if key == "proxy" and isinstance(value, dict) and set(value) <= {*_PROXY_KEYS}:
        return
    if key == "repos" and isinstance(value, list) and all(
            isinstance(r, dict) and set(r) <= {"name", *_REPO_KEYS} for r in value):
        return
    if key in _BLOCK_SETTINGS:
        raise SpecError(f"{where}: `{key}` is written as {_BLOCK_SETTINGS[key]}")


# The flags that set one variant field, each with its spelling (errors name it: "--k8s 1.30").
_FIELD_FLAGS = (("base", "--base"), ("upstream", "--upstream"), ("upstream_ref", "--upstream-ref"), ("os", "--os"),
                ("kubernetes_version", "--k8s"), ("arch", "--arch"), ("flavor", "--flavor"))


def overrides_layers(o: Overrides) -> list[Layer]:
    """The command line's two layers, the flags and then the --var KEY=VALUE pairs (each a string)."""
    flags = {key: Setting(getattr(o, key), f"{flag} {getattr(o, key)}") for key, flag in _FIELD_FLAGS
             if getattr(o, key)}
    if o.extra_packages:
        flags["extra_packages"] = Setting(list(o.extra_packages), "--extra-pkg")
    if o.extra_repos:  # under the key a pipeline file's repo blocks have
        flags["repos"] = Setting([_repo_from_flag(item) for item in o.extra_repos], "--extra-repo")
    variables: dict[str, Setting] = {}
    for item in o.variables:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not VAR_NAME.match(key):
            raise SpecError(f"--var {item}: write KEY=VALUE, e.g. --var volume_size=40")
        _check_block_setting(key, value, f"--var {key}")
        variables[key] = Setting(value, f"--var {key}")
    return [MappingProxyType(flags), MappingProxyType(variables)]


def _repo_from_flag(item: str) -> dict[str, Any]:
    """One --extra-repo: NAME=URL|GPGKEY (a URL or a local file), NAME=URL|gpgcheck=false; |insecure=true after either."""
    name, sep, rest = item.partition("=")
    url, _, key = rest.partition("|")
    key, insecure = (key.removesuffix("|insecure=true"), True) if key.endswith("|insecure=true") else (key, False)
    if not sep or not name or not url:
        raise SpecError(f"--extra-repo {secrets.mask(item)}: write NAME=URL|GPGKEY_URL, e.g. --extra-repo "
                        "ceph=https://download.ceph.com/rpm-reef/el9/x86_64|https://download.ceph.com/keys/release.asc")
    unsigned = key == "gpgcheck=false"
    return {"name": name, "baseurl": url, "gpgkey": "" if unsigned else key,
            **({"gpgcheck": False} if unsigned else {}), **({"insecure": True} if insecure else {})}
