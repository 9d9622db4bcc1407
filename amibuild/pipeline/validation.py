"""Validation of the merged settings into a `Variant` (and of the pipeline block), with the small
typed readers (`str_value`, `int_value`, ...) the loader shares and `known_regions`."""

from __future__ import annotations

import functools
import gzip
import importlib.util
import json
import re
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from amibuild.errors import SpecError
from amibuild.suggest import suggest
from amibuild.pipeline import value_checks as checks, files, keys, naming, protection, proxy_credentials
from amibuild.pipeline.model import (AL2_LAST_K8S, ARCHES, BASES, DEFAULT_FLAVOR, DEFAULTS, FLAVORS, OSES, VOLUME_TYPES, Proxy,
                                     Repo, Variant)

_RPM_NAME = re.compile(r"^[A-Za-z0-9_+][A-Za-z0-9._+~^-]*\Z")
_K8S = re.compile(r"^1\.(0|[1-9][0-9]*)\Z")  # no leading zero: "1.030" names no EKS image
# the upstream base also takes a patch release (its binaries live under 1.N.P/<build date>/)
_K8S_PATCH = re.compile(r"^1\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\Z")
VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*\Z")
MAX_STANDARD_GIB = 1024  # the largest magnetic (volume_type "standard") EBS volume


def validate_pipeline(kw: dict[str, Any], where: str, *, from_flag: bool) -> None:
    prefix = kw["ssm_prefix"]
    if not prefix.startswith("/") or prefix.endswith("/") and prefix != "/" or "//" in prefix:
        raise SpecError(f"{where}: pipeline.ssm_prefix {prefix!r} must start with '/' and not end with '/', e.g. \"/amibuild\"")
    if not re.match(r"^[A-Za-z0-9_./-]+\Z", prefix) or prefix.lower().startswith(("/aws", "/ssm")):
        raise SpecError(f"{where}: pipeline.ssm_prefix {prefix!r}: use letters, digits, '_', '.', '-' and '/', not under /aws or /ssm")
    for field_name in ("regions", "file_regions", "copy_to"):
        label = "--region" if field_name == "regions" and from_flag else f"{where}: pipeline.{field_name.removeprefix('file_')}"
        for region in kw.get(field_name, ()):
            checks.region(region, label, known_regions())
    # one partition: EC2 copies images and KMS keys work only within the partition of the build region
    first = kw["regions"][0]
    ours = region_partitions()[first]
    for field_name in ("regions", "copy_to"):  # not file_regions: --region may build elsewhere than the file says
        label = "--region" if field_name == "regions" and from_flag else f"{where}: pipeline.{field_name}"
        for region in kw.get(field_name, ()):
            theirs = region_partitions()[region]
            if theirs != ours:
                raise SpecError(f"{label}: {region} is in the {theirs} partition, but the pipeline builds in {first} "
                                f"({ours}); an image cannot be copied between partitions: give {region} a pipeline "
                                "file of its own")
    for key, check in (("parameter_template", naming.check_template), ("default_channel", naming.check_channel)):
        if kw[key] is not None:
            try:
                check(kw[key])
            except SpecError as exc:
                raise SpecError(f"{where}: pipeline.{key}: {exc}") from None
    for account in kw["ami_users"]:
        checks.account(account, f"{where}: pipeline.ami_users")


def validate_variant(name: str, m: dict[str, Any], origin: dict[str, str], *, root: Path) -> Variant:
    def at(key: str) -> str:
        return origin.get(key, "defaults")

    base = _choice(m["base"], BASES, at("base"))
    os_ = _choice(m["os"], OSES, at("os"))
    arch = _choice(m["arch"], ARCHES, at("arch"))
    k8s = str_value(m["kubernetes_version"], at("kubernetes_version"))
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
    packages = tuple(dict.fromkeys(str_value(p, at("extra_packages")) for p in m.get("extra_packages", ())))
    for pkg in packages:
        if not _RPM_NAME.match(pkg):
            raise SpecError(
                f"{at('extra_packages')}: package name {pkg!r} is not a valid RPM name "
                "(letters, digits and ._+~^- only, no spaces or shell characters)"
            )
    repos: dict[str, Repo] = {}
    for raw in m.get("repos", ()):
        repo_name, gpgkey = str(raw.get("name", "")), str(raw.get("gpgkey", "") or "")
        insecure = bool_value(raw["insecure"], at("repos")) if "insecure" in raw else False
        repo = Repo(repo_name, str(raw.get("baseurl", "")), gpgkey,
                    _shipped_key(repo_name, gpgkey, root, at("repos")), insecure)
        checks.repo(repo.name, repo.baseurl, repo.gpgkey, at("repos"),
                    gpgcheck=bool_value(raw["gpgcheck"], at("repos")) if "gpgcheck" in raw else None,
                    insecure=insecure, shipped_key=bool(repo.gpgkey_text))
        repos.pop(repo.name, None)  # a later layer redefines it
        repos[repo.name] = repo
    proxy = Proxy(**{k: str_value(v, at("proxy")) for k, v in (m.get("proxy") or {}).items()})
    for label, url in (("http", proxy.http), ("https", proxy.https)):
        if url:
            checks.url(url, at("proxy"), f"proxy.{label}")
    checks.no_proxy(proxy.no_proxy, at("proxy"))
    proxy_credentials.check_with_proxy(proxy.credentials_parameter, (proxy.http, proxy.https),
                                       f"{at('proxy')}: proxy.credentials_parameter", "proxy.http / proxy.https")
    scripts = []
    script_list = list_value(m.get("scripts", ()), at("scripts"))
    checks.count(script_list, checks.MAX_SCRIPTS, at("scripts"), "scripts")
    top = root.resolve()
    for script in script_list:
        # the scripts are uploaded and run with sudo: only files of the pipeline repository, with
        # symlinks followed, so `../../etc/shadow` or a link out of the folder cannot be shipped
        path = _inside(top, str_value(script, at("scripts")), f"{at('scripts')}: script {script}", "provisioner scripts")
        why = files.problem(path)
        if why == "no such file":
            raise SpecError(f"{at('scripts')}: script {script} not found")
        if why is not None:
            raise SpecError(f"{at('scripts')}: script {script} {why}; give a regular file")
        scripts.append(path)

    volume_size = int_value(m["volume_size"], at("volume_size"))
    if not 8 <= volume_size <= 16384:
        raise SpecError(f"{at('volume_size')}: volume_size {volume_size} must be between 8 and 16384 GiB")
    source_ami = str_value(m["source_ami"], at("source_ami"))
    if source_ami and not checks.AMI_ID.match(source_ami):
        raise SpecError(f"{at('source_ami')}: source_ami {source_ami!r} is not an AMI id (ami-0123456789abcdef0)")

    encrypted = bool_value(m["encrypted"], at("encrypted"))
    kms_key_id = checks.pattern(str_value(m["kms_key_id"], at("kms_key_id")), at("kms_key_id"), "kms_key_id")
    if kms_key_id and not encrypted:
        raise SpecError(f"{at('kms_key_id')}: kms_key_id is set but encrypted is false; set encrypted = true "
                        "or drop kms_key_id")
    checked = {key: checks.pattern(str_value(m[key], at(key)), at(key), key)
               for key in ("instance_type", "subnet_id", "security_group_id", "upstream_ref")}
    upstream_src = str_value(m["upstream"], at("upstream"))
    if upstream_src.startswith("-") or checks.has_control(upstream_src):
        raise SpecError(f"{at('upstream')}: upstream {upstream_src[:60]!r}: a path or git URL (not starting with '-')")
    description = str_value(m["description"], at("description"))
    checks.text(description, at("description"), "description", limit=checks.AMI_DESCRIPTION_MAX)
    checks.no_template(description, at("description"), "description")

    packer_vars = {k: v for k, v in m.items() if k not in DEFAULTS}
    for key, value in packer_vars.items():
        if not VAR_NAME.match(key):
            raise SpecError(f"{origin[key]}: {key!r} is not a valid Packer variable name")
        checks.packer_variable(key, value, origin[key], known_regions=known_regions())
    volume_type = _choice(m["volume_type"], VOLUME_TYPES, at("volume_type"))
    if volume_type == "standard" and volume_size > MAX_STANDARD_GIB:
        # EBS volume types: a magnetic volume holds 1 GiB to 1 TiB; RunInstances refuses more, after render
        raise SpecError(f"{at('volume_size')}: volume_size {volume_size} GiB is more than a standard (magnetic) "
                        f"volume holds ({MAX_STANDARD_GIB} GiB); give at most {MAX_STANDARD_GIB}, or use "
                        f"volume_type = \"gp3\" ({at('volume_type')})")
    return Variant(
        name=name,
        base=base,
        upstream=upstream_src,
        upstream_ref=checked["upstream_ref"],
        os=os_,
        kubernetes_version=k8s,
        arch=arch,
        instance_type=checked["instance_type"],
        volume_size=volume_size,
        volume_type=volume_type,
        encrypted=encrypted,
        kms_key_id=kms_key_id,
        subnet_id=checked["subnet_id"],
        security_group_id=checked["security_group_id"],
        associate_public_ip_address=None if m["associate_public_ip_address"] is None else
        bool_value(m["associate_public_ip_address"], at("associate_public_ip_address")),
        source_ami=source_ami,
        extra_packages=packages,
        repos=tuple(repos.values()),
        proxy=proxy,
        scripts=tuple(scripts),
        description=description,
        packer_vars=MappingProxyType({k: packer_vars[k] for k in sorted(packer_vars)}),
        origins=MappingProxyType(dict(origin)),
        flavor=flavor,
        tests=tuple(m.get("tests", ())),
        test_on_build=bool_value(m["test_on_build"], at("test_on_build")),
        region_kms_key_ids=keys.parse_map(m.get("region_kms_key_ids"), at("region_kms_key_ids")),
        deprecate_after=protection.deprecate_after(m["deprecate_after"], at("deprecate_after")),
    )


@functools.cache
def known_regions() -> frozenset[str]:
    """Every region botocore knows, across partitions, read straight from its endpoints data
    (a tenth of the time a botocore session takes to answer the same question)."""
    return frozenset(region_partitions())


@functools.cache
def _partitions() -> tuple[Mapping[str, Any], ...]:
    """The partitions of botocore's endpoints data (name, dnsSuffix, regions ...)."""
    # botocore's package found, not imported: its data file is all this needs
    data = Path(importlib.util.find_spec("botocore").origin).parent / "data" / "endpoints.json"
    raw = data.read_bytes() if data.exists() else gzip.decompress(data.with_suffix(".json.gz").read_bytes())
    return tuple(json.loads(raw)["partitions"])


@functools.cache
def region_partitions() -> Mapping[str, str]:
    """Each region botocore knows -> its partition (aws, aws-cn, aws-us-gov, ...), from its endpoints data."""
    return MappingProxyType({region: partition["partition"] for partition in _partitions()
                             for region in partition["regions"]})


@functools.cache
def partition_dns_suffixes() -> Mapping[str, str]:
    """Each partition -> its DNS suffix (amazonaws.com, amazonaws.com.cn, c2s.ic.gov, ...): AWS::URLSuffix there."""
    return MappingProxyType({partition["partition"]: partition["dnsSuffix"] for partition in _partitions()})


def _choice(value: Any, choices: Sequence[str], where: str) -> str:
    text = str_value(value, where)
    if text not in choices:
        raise SpecError(f"{where}: {text!r} is not supported; use one of {', '.join(choices)}{suggest(text, choices)}")
    return text


def str_value(value: Any, where: str) -> str:
    if isinstance(value, (bool, list, dict)):
        raise SpecError(f"{where}: expected a string, got {_kind(value)}")
    if isinstance(value, float):  # `1.30` unquoted would silently become "1.3"
        raise SpecError(f"{where}: {value!r} is a number here (unquoted, 1.30 reads as 1.3): write the value "
                        "in quotes, as a string, e.g. \"1.30\"")
    return "" if value is None else str(value)


def int_value(value: Any, where: str) -> int:
    if isinstance(value, bool):
        raise SpecError(f"{where}: expected a whole number, got {value!r}")
    try:
        return int(str(value).strip())
    except ValueError:
        raise SpecError(f"{where}: expected a whole number, got {value!r}") from None


def bool_value(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise SpecError(f"{where}: expected true or false, got {value!r}")


def list_value(value: Any, where: str) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):  # a --var or var-file may give "a,b"
        return [v for v in re.split(r"[,\s]+", value) if v]
    raise SpecError(f"{where}: expected a list, got {_kind(value)}")


def str_list(block: Mapping[str, Any], key: str, where: str) -> list[str]:
    value = block.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"{where}: pipeline.{key} must be a list of strings")
    return value


def str_map(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise SpecError(f"{where}: expected a map of strings")
    return {str(k): str_value(v, f"{where}.{k}") for k, v in value.items()}


def _kind(value: Any) -> str:
    return {bool: "a bool", list: "a list", dict: "a map"}.get(type(value), type(value).__name__)


def _inside(top: Path, name: str, label: str, kept: str) -> Path:
    """``top / name`` with symlinks followed; SpecError (naming ``label``) when it loops or leads out of ``top``."""
    try:
        path = files.resolve(top / name)
    except OSError:
        raise SpecError(f"{label} is a symlink loop; point it at a file") from None
    if not path.is_relative_to(top):
        raise SpecError(f"{label} is outside {top}; keep {kept} in the pipeline file's folder")
    return path


_HEREDOC = re.compile(r"<<-?([A-Za-z_][A-Za-z0-9_]*)\n(.*)\n[ \t]*\1", re.DOTALL)


def _shipped_key(name: str, gpgkey: str, root: Path, where: str) -> str:
    """The armored key of repo `name` when `gpgkey` gives it inline or names a local file (in the
    pipeline file's folder, as scripts are); "" when it is a URL the instance fetches, or none."""
    if not gpgkey or "://" in gpgkey:
        return ""
    label = f"repo {name!r} gpgkey"
    heredoc = _HEREDOC.fullmatch(gpgkey.strip())
    if heredoc:  # python-hcl2 hands a heredoc over as written
        gpgkey = heredoc.group(2)
    if gpgkey.lstrip().startswith(checks.ARMORED_KEY_BEGIN):
        return checks.armored_key(gpgkey, where, f"{label} (inline)")
    path = _inside(root.resolve(), gpgkey, f"{where}: {label} {gpgkey}", "keys")
    why = files.problem(path)
    if why is not None:
        raise SpecError(f"{where}: {label} {gpgkey}: {why}; give an https:// URL, an inline key or a local file")
    with path.open("rb") as stream:
        data = stream.read(checks.MAX_KEY_BYTES + 1)
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        text = ""  # a binary key: refused below with what to give instead
    return checks.armored_key(text, where, f"{label} {gpgkey}")
