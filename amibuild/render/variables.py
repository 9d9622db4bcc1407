"""The Packer variables of amibuild's template and their values: template defaults, the variant's
own (typed, an unknown name refused naming its origin), and the few that may hold credentials,
marked sensitive and handed to Packer in the environment."""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from amibuild import secrets, tags
from amibuild.errors import SpecError
from amibuild.pipeline import Pipeline, Variant
from amibuild.pipeline.keys import region_keys
from amibuild.render.render_model import HCL_FILE, PackerVariable, SourceAmi
from amibuild.render.source import eks_name_filter, eks_owners
from amibuild.suggest import suggest


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
        PackerVariable("associate_public_ip_address", "string", tristate(v.associate_public_ip_address)),
        PackerVariable("iam_instance_profile", "string", ""),
        PackerVariable("ssh_username", "string", "ec2-user"),
        PackerVariable("ssh_interface", "string", ""),
        PackerVariable("source_amis", "map(string)", {}),  # build region -> source AMI, when known
        PackerVariable("source_ami_filter_name", "string", eks_name_filter(v)),
        PackerVariable("source_ami_owners", "list(string)", eks_owners(pipeline.regions)),
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
        PackerVariable("extra_repos", "list(string)", [r.record() for r in v.repos]),
        PackerVariable("http_proxy", "string", v.proxy.http),
        PackerVariable("https_proxy", "string", v.proxy.https),
        PackerVariable("no_proxy", "string", effective_no_proxy(v.proxy.no_proxy) if v.proxy else v.proxy.no_proxy),
        # each target region's key, only for a variant that names them (the others render as before)
        *([PackerVariable("region_kms_key_ids", "map(string)", region_keys(v, pipeline.regions, pipeline.copy_to))]
          if v.region_kms_key_ids else []),
    ]


# Always bypassed by a baked-in proxy: loopback, the instance metadata service, the EKS Pod Identity
# agent (169.254.170.23) and the ECS-style container credentials address (169.254.170.2), and the
# VPC-internal DNS names.
NO_PROXY_ALWAYS = ("localhost", "127.0.0.1", "169.254.169.254", "169.254.170.2", "169.254.170.23", ".internal")


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
        if isinstance(raw, bool) or str(raw).lower() in ("true", "false"):
            return str(raw).lower() == "true"
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


def env_value(value: Any) -> str:
    """A value as Packer reads PKR_VAR_<name>: a string as is, a list as an HCL (JSON) list."""
    return json.dumps(list(value)) if isinstance(value, (list, tuple)) else str(value)


def tristate(value: bool | None) -> str:
    """"true" / "false", or "" for unset (the template passes null to Packer)."""
    return "" if value is None else str(value).lower()
