"""How channels are named: the SSM parameter name template and channel names.

These rules belong to the spec (a pipeline file's `parameter_template` and `default_channel` are
checked at load); `amibuild.channels` writes and reads the parameters they name.
"""

from __future__ import annotations

import re
import string
from typing import Mapping, Protocol

from amibuild.errors import SpecError
from amibuild.pipeline.value_checks import ssm_parameter_name  # one rule for names, at load and at write

DEFAULT_CHANNEL = "recommended"
DEFAULT_NAME_TEMPLATE = "{prefix}/{pipeline}/{k8s}/{variant}/{channel}/image_id"
TEMPLATE_FIELDS = ("prefix", "pipeline", "k8s", "variant", "os", "arch", "flavor", "channel")
_CHANNEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}\Z")


class VariantLike(Protocol):
    name: str
    kubernetes_version: str
    os: str
    arch: str


class PipelineLike(Protocol):
    name: str
    ssm_prefix: str

    @property
    def target_regions(self) -> tuple[str, ...]: ...


def check_template(template: str) -> None:
    """Refuse a parameter name template that would not give one valid name per variant x channel."""
    try:
        used = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise SpecError(f"parameter name template {template!r}: {exc}") from exc
    unknown = used - set(TEMPLATE_FIELDS)
    if unknown:
        raise SpecError(
            f"parameter name template {template!r}: unknown field {{{min(unknown)}}}; "
            f"use {', '.join('{' + f + '}' for f in TEMPLATE_FIELDS)}"
        )
    if not {"variant", "channel"} <= used:
        raise SpecError(f"parameter name template {template!r} must contain {{variant}} and {{channel}}")
    if not template.startswith(("{prefix}", "/")):
        raise SpecError(f"parameter name template {template!r} must start with {{prefix}} or '/'")
    if template.lower().startswith(("/aws", "/ssm")):
        raise SpecError(f"parameter name template {template!r}: names under /aws and /ssm are reserved by AWS")


def check_channel(channel: str, where: str = "") -> str:
    """``channel`` when it is a channel name, else SpecError (after ``where``, when given)."""
    if not _CHANNEL.match(channel or ""):
        prefix = f"{where}: " if where else ""
        raise SpecError(f"{prefix}channel {channel!r}: use letters, digits, '.', '_' and '-', e.g. recommended or stable")
    return channel


def template_of(pipeline: PipelineLike, template: str | None = None) -> str:
    """The name template in force: the one given, else the pipeline file's, else the default."""
    return template or getattr(pipeline, "parameter_template", None) or DEFAULT_NAME_TEMPLATE


def parameter_name(pipeline: PipelineLike, variant: VariantLike, channel: str,
                   template: str | None = None) -> str:
    """The SSM parameter a channel of a variant lives in, e.g. /amibuild/eks-workers/1.30/ceph/recommended/image_id."""
    template = template_of(pipeline, template)
    check_template(template)
    check_channel(channel)
    return ssm_parameter_name(template.format(**_fields(pipeline, variant, channel)), f"template {template!r}")


def _fields(pipeline: PipelineLike, variant: VariantLike, channel: str) -> dict[str, str]:
    return {
        "prefix": pipeline.ssm_prefix.rstrip("/"),
        "pipeline": pipeline.name,
        "k8s": variant.kubernetes_version,
        "variant": variant.name,
        "os": variant.os,
        "arch": variant.arch,
        # variants made before flavors existed (and recorded values) have none: standard
        "flavor": getattr(variant, "flavor", "standard"),
        "channel": channel,
    }


def name_pattern(pipeline: PipelineLike, template: str | None = None, *,
                 known: Mapping[str, str] | None = None) -> tuple[str, re.Pattern[str]]:
    """(the path to list, a regex with one group per template field) for reading channels back;
    ``known`` fields ({"variant": ..., "k8s": ...}) are matched as given, which narrows the path."""
    template = template_of(pipeline, template)
    check_template(template)
    fixed = {"prefix": pipeline.ssm_prefix.rstrip("/"), "pipeline": pipeline.name, **(known or {})}
    regex, root, open_field = "", "", False
    for literal, name, _, _ in string.Formatter().parse(template):
        regex += re.escape(literal)
        if not open_field:
            root += literal
        if name is None:
            continue
        if name in fixed:
            regex += re.escape(fixed[name])
            if not open_field:
                root += fixed[name]
        else:
            regex += f"(?P<{name}>[^/]+)" if f"(?P<{name}>" not in regex else f"(?P={name})"
            open_field = True
    return root.rsplit("/", 1)[0] or "/", re.compile(rf"^{regex}\Z")
