"""The conversion of upstream's JSON template to HCL2 (`load`, the rules in the package docstring);
the one-file document with amibuild's provisioners placed is `document` (`hcl_document`, `order`)."""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from amibuild import hcl
from amibuild.errors import UpstreamError
from amibuild.render.upstream.layout import (UpstreamTemplate, amazon_ebs_builder, detect, json_object, makefile_defaults,
                                            makefile_var_files, read_json_object)


_ENV_ENTRY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=")
# a provisioner script that installs something upstream's image needs (worker, nodeadm, drivers,
# EFA, ...), and one that cleans up or checks the finished image
_INSTALLER = re.compile(r"install|enable-|accelerator|efa|neuron|nvidia", re.IGNORECASE)
_FINISHER = re.compile(r"cleanup|validate", re.IGNORECASE)

# amazon-ebs settings written as nested blocks in HCL2 (a JSON list of objects -> one block each)
BLOCK_FIELDS = frozenset({
    "launch_block_device_mappings", "ami_block_device_mappings", "source_ami_filter",
    "metadata_options", "aws_polling", "vpc_filter", "subnet_filter", "security_group_filter",
    "assume_role", "vault_aws_engine", "placement",
})
# fields HCL2 wants as lists, where the JSON decoder also took a comma-separated string
LIST_FIELDS = frozenset({
    "ami_users", "ami_groups", "ami_regions", "ami_product_codes", "ami_org_arns", "ami_ou_arns",
    "snapshot_users", "snapshot_groups", "security_group_ids", "spot_instance_types",
    "temporary_security_group_source_cidrs", "owners", "inline", "scripts", "environment_vars",
    "sources", "valid_exit_codes",
})
# bool / number fields, where the JSON decoder read "" as false / 0
SCALAR_FIELDS = frozenset({
    "associate_public_ip_address", "disable_stop_instance", "ebs_optimized", "ena_support",
    "enable_t2_unlimited", "encrypt_boot", "force_delete_snapshot", "force_deregister",
    "skip_region_validation", "skip_save_build_region", "sriov_support", "ssh_pty", "ssh_port",
    "most_recent", "most_free", "random", "delete_on_termination", "encrypted", "no_device",
    "volume_size", "iops", "throughput", "max_retries", "expect_disconnect", "skip_clean",
    "http_put_response_hop_limit", "delay_seconds", "max_attempts", "block_duration_minutes",
})
CREDENTIAL_ATTRS = frozenset({"access_key", "secret_key", "token", "mfa_code"})
_CREDENTIAL = re.compile(
    r"access_key|secret|session_token|password|passwd|api_key|(^|_)token\Z", re.IGNORECASE
)
LOCAL_PROVISIONERS = frozenset({"shell-local", "breakpoint"})

_GO_TEMPLATE = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}", re.DOTALL | re.ASCII)
_CALL = re.compile(r"""^(user|env)\s+[`"]([^`"]+)[`"]\Z""", re.ASCII)
_MENTIONS_CALL = re.compile(r"\b(user|env)\b", re.ASCII)


def load(root: Path, *, os_family: str = "al2", k8s: str | None = None) -> UpstreamTemplate:
    """Detect the layout of the checkout at ``root``, read its JSON template and convert it.

    ``k8s`` (1.N or 1.N.P) picks the per-minor variable file of the templates layout.
    """
    root = Path(root).resolve()
    if not root.is_dir():
        raise UpstreamError(f"upstream checkout {root} is not a directory: fetch it first")
    layout, template_path, defaults_file = detect(root, os_family)
    doc = read_json_object(template_path)
    defaults = dict(json_object(doc.get("variables") or {}, template_path, "variables"))
    var_files = makefile_var_files(layout, defaults_file, k8s)
    set_by_file: set[str] = set()
    for path in var_files:
        layer = read_json_object(path)
        defaults.update(layer)
        set_by_file.update(layer)  # null included: Packer counts a null from a var file as set
    from_make = {k: v for k, v in makefile_defaults(root, k8s).items() if k in defaults}
    defaults.update(from_make)
    set_by_file.update(from_make)

    dropped = _credential_variables(defaults)
    variables = {k: v for k, v in defaults.items() if k not in dropped}
    required = frozenset(k for k, v in variables.items() if v is None and k not in set_by_file)
    conv = _Converter(template_path, root, variables, dropped, required)
    notes: list[str] = []
    if from_make:
        notes.append(f"from upstream's Makefile for Kubernetes {k8s}: {', '.join(sorted(from_make))}")
    sensitive = set(doc.get("sensitive-variables") or [])

    builder_name, builder = amazon_ebs_builder(doc, template_path)
    source = conv.body(builder, blocks=BLOCK_FIELDS, skip={"type", "name"}, notes=notes)

    provisioners: list[hcl.Block] = []
    remote: list[bool] = []
    scripts: list[list[str]] = []
    labels: list[str] = []
    for index, raw in enumerate(doc.get("provisioners") or []):
        raw = dict(json_object(raw, template_path, f"provisioners[{index}]"))
        kind = raw.get("type")
        if not isinstance(kind, str):
            raise UpstreamError(f"{template_path}: provisioners[{index}] has no type: fix it")
        raw.update((raw.pop("override", None) or {}).get(builder_name) or {})
        only, excluded = raw.pop("only", None), raw.pop("except", None) or []
        if (only is not None and builder_name not in only) or builder_name in excluded:
            notes.append(f"provisioner {index} ({kind}) skipped: only/except leave this build out")
            continue
        block = hcl.Block("provisioner", (kind,))
        if only is not None:
            block.attr("only", [builder_name])  # retargeted to the source name by hcl_document
        block.body += conv.body(raw, blocks=(), skip={"type"}, notes=notes, provisioner=kind)
        provisioners.append(block)
        remote.append(kind not in LOCAL_PROVISIONERS)
        names = [raw["script"]] if isinstance(raw.get("script"), str) else []
        names += [s for s in raw.get("scripts") or [] if isinstance(s, str)]
        scripts.append([os.path.basename(s) for s in names])
        labels.append(_label(kind, raw, scripts[-1]))

    return UpstreamTemplate(
        root=root,
        layout=layout,
        template=template_path,
        variables=variables,
        dropped=tuple(sorted(dropped)),
        declarations=tuple(conv.declarations(sensitive)),
        source=tuple(source),
        provisioners=tuple(provisioners),
        insert_at=_insert_at(scripts),
        remote=tuple(remote),
        notes=tuple(notes),
        os=os_family,
        required=required,
        var_files=tuple(var_files),
        labels=tuple(labels),
    )


def _insert_at(scripts: list[list[str]]) -> int:
    """Before the first cleanup/validate step after upstream's last installer (worker, nodeadm,
    drivers, EFA...): our repositories and packages need the finished worker, and upstream's
    cleanup and validation must see our changes. Without installers: before the first cleanup or
    validate step; without either: at the end."""
    installers = [i for i, names in enumerate(scripts) if any(_INSTALLER.search(n) for n in names)]
    start = installers[-1] + 1 if installers else 0
    finishers = (i for i in range(start, len(scripts)) if any(_FINISHER.search(n) for n in scripts[i]))
    return next(finishers, start if installers else len(scripts))


def _label(kind: str, raw: Mapping[str, Any], names: list[str]) -> str:
    if names:
        return ", ".join(names)
    if kind == "file":
        return f"file {raw.get('direction', 'upload')}"
    if kind == "shell" and raw.get("inline"):
        first = str(raw["inline"][0])
        return "inline: " + (first if len(first) <= 40 else first[:37] + "...")
    return kind


def _refs(value: Any, call: str) -> list[str]:
    """Names in ``{{user `x`}}`` (call="user") or ``{{env `X`}}`` (call="env") in a string."""
    if not isinstance(value, str):
        return []
    calls = (_CALL.match(m.group(1)) for m in _GO_TEMPLATE.finditer(value))
    return [c.group(2) for c in calls if c and c.group(1) == call]


def _credential_variables(defaults: Mapping[str, Any]) -> set[str]:
    """Credential-looking names or env sources, and every variable defaulting to one of them."""
    dropped = {
        name for name, default in defaults.items()
        if _CREDENTIAL.search(name) or any(_CREDENTIAL.search(e) for e in _refs(default, "env"))
    }
    while more := {n for n, d in defaults.items() if n not in dropped and set(_refs(d, "user")) & dropped}:
        dropped |= more
    return dropped


class _Dropped(Exception):
    """A value refers to a dropped credential: the enclosing element, entry or attribute goes."""


class _Converter:
    """JSON template values -> Python values / hcl.Expr, for one template."""

    def __init__(self, path: Path, root: Path, variables: dict[str, Any], dropped: set[str], required: frozenset[str]):
        self.path, self.root, self.template_dir = path, root, path.parent
        self.variables, self.dropped, self.required = variables, dropped, required
        # variables whose default refers to other variables: written as locals
        self.derived = [n for n, d in variables.items() if _refs(d, "user")]
        self._check_cycles()

    def _check_cycles(self) -> None:
        visiting: set[str] = set()

        def visit(name: str) -> None:
            if name in visiting:
                raise UpstreamError(f"{self.path}: the default of {name} refers back to itself")
            visiting.add(name)
            for ref in _refs(self.variables.get(name), "user"):
                if ref in self.derived:
                    visit(ref)
            visiting.discard(name)

        for name in self.derived:
            visit(name)

    # strings -> literal text and expressions

    def parts(self, text: str, *, in_default: bool = False) -> list[str | hcl.Expr]:
        out: list[str | hcl.Expr] = []
        pos = 0
        for m in _GO_TEMPLATE.finditer(text):
            out.append(text[pos:m.start()])
            pos = m.end()
            inner = m.group(1)
            call = _CALL.match(inner)
            if inner == "template_dir":
                out.append(str(self.template_dir))
            elif call and call.group(1) == "user":
                out.append(self.ref(call.group(2)))
            elif call and call.group(1) == "env":
                name = call.group(2)
                if _CREDENTIAL.search(name):
                    raise _Dropped(name)
                if not in_default:
                    raise UpstreamError(
                        f"{self.path}: {m.group(0)} outside a plain variable default; Packer "
                        "allows env only there: move it into a variable of its own"
                    )
                out.append(hcl.Expr(f"env({json.dumps(name)})"))
            elif _MENTIONS_CALL.search(inner):
                raise UpstreamError(
                    f"{self.path}: unsupported template expression {m.group(0)}: amibuild converts "
                    "only {{user `x`}} and {{env `X`}}; simplify it in the template"
                )
            else:
                out.append(m.group(0))  # evaluated by Packer at build time
        out.append(text[pos:])
        return out

    def ref(self, name: str) -> hcl.Expr:
        if name in self.dropped:
            raise _Dropped(name)
        if name not in self.variables:
            raise UpstreamError(
                f"{self.path}: {{{{user `{name}`}}}} names an undeclared variable: declare it"
            )
        return hcl.Expr(f"local.{name}" if name in self.derived else f"var.{name}")

    def string(self, text: str, *, in_default: bool = False) -> str | hcl.Expr:
        return _join(self.parts(text, in_default=in_default))

    def value(self, raw: Any) -> Any:
        """A JSON value as Python values / hcl.Expr; elements and entries naming credentials go."""
        if isinstance(raw, str):
            return self.string(raw)
        if isinstance(raw, list):
            out = []
            for item in raw:
                with contextlib.suppress(_Dropped):
                    out.append(self.value(item))
            return out
        if isinstance(raw, dict):
            out_map = {}
            for key, item in raw.items():
                if _GO_TEMPLATE.search(key):
                    raise UpstreamError(f"{self.path}: map key {key!r} holds a template: remove it")
                with contextlib.suppress(_Dropped):
                    out_map[key] = self.value(item)
            return out_map
        return raw

    def field(self, key: str, raw: Any) -> Any:
        """An attribute value, fixed up where HCL2's types are stricter than the JSON decoder."""
        if key == "environment_vars" and isinstance(raw, list):
            return [self.env_entry(item) for item in raw]
        if isinstance(raw, str) and key in LIST_FIELDS:
            converted = self.string(raw)
            if isinstance(converted, str):
                return converted.split(",") if converted else []
            single = _single_ref(raw)
            if single is not None and isinstance(self.variables.get(single), list):
                return converted
            return hcl.Expr(f'compact(split(",", {_text(converted)}))')
        if isinstance(raw, str) and key in SCALAR_FIELDS:
            single = _single_ref(raw)
            if single and single not in self.derived and self.variables.get(single) == "":
                var = self.ref(single).text
                return hcl.Expr(f'{var} == "" ? null : {var}')
        return self.value(raw)

    def env_entry(self, item: Any) -> Any:
        """One ``NAME=value`` entry; a credential value leaves ``NAME=`` (set, empty)."""
        try:
            return self.value(item)
        except _Dropped:
            m = _ENV_ENTRY.match(item) if isinstance(item, str) else None
            if m is None:
                raise
            return f"{m.group(1)}="

    def body(
        self,
        raw: Mapping[str, Any],
        *,
        blocks: frozenset[str] | tuple[()],
        skip: set[str],
        notes: list[str],
        provisioner: str | None = None,
    ) -> list[Any]:
        """Attributes and blocks of a builder, block or provisioner, credentials left out."""
        out: list[Any] = []
        for key, item in raw.items():
            if key in skip or key.startswith("_") or item is None:
                continue
            if provisioner is None and key in CREDENTIAL_ATTRS:
                note = "the builder's credential settings are dropped too"
                if note not in notes:
                    notes.append(note)
                continue
            with contextlib.suppress(_Dropped):
                if key in blocks:
                    for entry in item if isinstance(item, list) else [item]:
                        entry = json_object(entry, self.path, key)
                        inner = self.body(entry, blocks=blocks, skip=set(), notes=notes)
                        out.append(hcl.Block(key, (), inner))
                    continue
                value = self.field(key, item)
                if provisioner is not None:
                    value = self.local_path(provisioner, key, value, raw)
                out.append(hcl.Attr(key, value))
        return out

    def local_path(self, kind: str, key: str, value: Any, raw: Mapping[str, Any]) -> Any:
        """Script and upload paths made absolute: upstream's Makefile runs packer at the root."""
        upload = kind == "file" and raw.get("direction", "upload") == "upload"
        is_path = key in ("script", "scripts") or (upload and key in ("source", "sources"))
        if not is_path:
            return value
        if isinstance(value, list):
            return [self.local_path(kind, "script", v, raw) for v in value]
        if not isinstance(value, str):
            return value
        path = os.path.normpath(os.path.join(self.root, value))
        if not os.path.exists(path):
            # Packer would fail only once the build instance is up: refuse before any AWS work
            what = "uploads" if upload else "runs"
            raise UpstreamError(
                f"{self.path}: a {kind} provisioner {what} {path}, which is not in the checkout: "
                "check the checkout and ref (a partial copy or a missing submodule?)"
            )
        return path + "/" if value.endswith("/") and not path.endswith("/") else path

    def declarations(self, sensitive: set[str]) -> list[hcl.Block]:
        """`variable` blocks (sorted), then one `locals` block for the derived defaults."""
        out = []
        for name in sorted(self.variables):
            raw = self.variables[name]
            block = hcl.Block("variable", (name,))
            if name in self.derived:  # null: the local below falls back to the derived value
                block.attr("type", hcl.Expr("string")).attr("default", None)
            else:
                block.attr("type", hcl.Expr(_hcl_type(self.path, name, raw)))
                if isinstance(raw, str):
                    block.attr("default", self.string(raw, in_default=True))
                elif name not in self.required:
                    # null from a variable file: set. Packer's JSON templates decode var-file values
                    # into strings, so upstream's own builds see "" (an unset optional setting),
                    # while HCL2 refuses a null inside a string template ("${var.x}"): write "".
                    block.attr("default", "" if raw is None else raw)
            if name in sensitive:
                block.attr("sensitive", True)
            out.append(block)
        if self.derived:
            locals_ = hcl.Block("locals")
            for name in self.derived:
                derived = _text(self.string(self.variables[name]))
                locals_.attr(name, hcl.Expr(f"var.{name} == null ? {derived} : var.{name}"))
            out.append(locals_)
        return out


def _single_ref(raw: str) -> str | None:
    m = _GO_TEMPLATE.fullmatch(raw.strip())
    call = _CALL.match(m.group(1)) if m else None
    return call.group(2) if call and call.group(1) == "user" else None


def _join(parts: Sequence[str | hcl.Expr]) -> str | hcl.Expr:
    """Literal text and expressions as one value: a str, a lone Expr, or an HCL string template."""
    merged: list[str | hcl.Expr] = []
    for part in parts:
        if isinstance(part, str) and merged and isinstance(merged[-1], str):
            merged[-1] += part
        elif part != "":
            merged.append(part)
    if not merged:
        return ""
    if len(merged) == 1:
        return merged[0]
    return hcl.template(merged)


def _text(value: str | hcl.Expr) -> str:
    return value.text if isinstance(value, hcl.Expr) else hcl.quote(value)


def _hcl_type(path: Path, name: str, default: Any) -> str:
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, (int, float)):
        return "number"
    if isinstance(default, list) and all(isinstance(v, str) for v in default):
        return "list(string)"
    if isinstance(default, dict) and all(isinstance(v, str) for v in default.values()):
        return "map(string)"
    if default is None or isinstance(default, str):
        return "string"
    raise UpstreamError(f"{path}: no HCL type fits the default of {name}: {default!r}")
