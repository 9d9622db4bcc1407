"""One variant's render: `render_build` (the real build for a target, not yet files), `finish`
(every file's text, the values with credentials masked, the fingerprint) and `render_variant`,
the two in a row. Pure."""

from __future__ import annotations

import hashlib
import json
from types import MappingProxyType
from typing import Any, Mapping

from amibuild import __version__
from amibuild import hcl, secrets, tags
from amibuild.pipeline import Pipeline, Variant, imagetests
from amibuild.pipeline.protection import packer_duration
from amibuild.render.render_model import AWS_POLLING, HCL_FILE, VARS_FILE, Build, Rendered, SourceAmi, Target
from amibuild.render.provisioners import provisioner_groups
from amibuild.render.template import indent, manifest_block, render_template, variable_block
from amibuild.render.upstream_base import render_upstream, upstream_files
from amibuild.render.variables import apply_packer_vars, env_value, hide_secrets, secret_variables, template_variables


_BUILD_TIME_VARS = frozenset({"provenance_tags", "amibuild_run_id"})


def render_variant(pipeline: Pipeline, variant: Variant, **build: Any) -> Rendered:
    """All files of one variant's real build for ``target``, their values and fingerprint: `finish` of
    `render_build`, which takes the keywords (uses_plugins, target, sources, upstream, upstream_binaries). Pure."""
    return finish(render_build(pipeline, variant, **build))


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
        values, variables, overrides, early, late, shipped, notes = render_upstream(
            upstream, pipeline, variant, uses_plugins=uses_plugins, sources=sources, binaries=upstream_binaries)
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


def credential_env(build: Build) -> dict[str, str]:
    """The variables that carry URL credentials, as Packer gets them (PKR_VAR_<name> -> value). Pure."""
    return {f"PKR_VAR_{name}": env_value(build.values[name]) for name in secret_variables(build.variant, build.values)}


def finish(build: Build, macs: Mapping[str, str] | None = None) -> Rendered:
    """A build written out: every file's text, the values (credentials masked) and the fingerprint.
    `macs` (PKR_VAR_<name> -> KMS MAC of `secrets.mac_message`, gathered before) stand for the
    credentials in the fingerprint; without them the credentials stay out of it. Pure."""
    variant, target = build.variant, build.target
    if build.upstream is not None:
        templates = upstream_files(build)
    else:
        delay, attempts = target.polling or AWS_POLLING
        templates = {HCL_FILE: render_template(
            "eks-worker.pkr.hcl.j2",
            amibuild_version=__version__,
            variant=variant.name,
            run_id_tag=tags.RUN_ID,
            variant_tag=tags.VARIANT,
            os_label="Amazon Linux 2023" if variant.os == "al2023" else "Amazon Linux 2",
            uses_plugins=build.uses_plugins,
            # Packer >= 1.7's amazon plugin takes deprecate_at (1.6.6 refuses it); publish sets it anyway
            deprecate_after=packer_duration(variant.deprecate_after) if variant.deprecate_after else "",
            variables=[hcl.dumps([variable_block(v)]).rstrip("\n") for v in build.variables],
            build_regions=list(build.pipeline.regions),
            region_keys=bool(variant.region_kms_key_ids),
            sources=[f"source.amazon-ebs.{r}" for r in build.pipeline.regions],
            endpoint=target.endpoint,
            communicator=target.communicator,
            skip_region_validation=bool(target.endpoint),
            pinned_source=all(s.known for s in build.sources.values()),
            polling_delay=delay,
            polling_attempts=attempts,
            provisioners=[indent(hcl.dumps([p.block]).rstrip("\n"), "  ") for p in (*build.early, *build.late)],
            manifest=indent(hcl.dumps([manifest_block(variant.name)]).rstrip("\n"), "  "),
        )}
    notes = [*build.notes, *(s.note for s in build.sources.values() if s.note),
             *(f"test {off.name!r} ({off.where}): {off.note}"
               for off in imagetests.check_set(variant, stage="all").disabled if off.note)]
    hidden = secret_variables(variant, build.values)
    secret_env = credential_env(build)
    values = secrets.mask(dict(build.values))  # from here on, what is written and fingerprinted
    header = f"Resolved values for variant \"{variant.name}\", written by amibuild {__version__}."
    if hidden:
        header += (f" {', '.join(hidden)}: credentials inside; amibuild passes them to Packer as "
                   f"{', '.join('PKR_VAR_' + n for n in hidden)} (sensitive variables), never in a file.")
    var_text = hcl.dumps([hcl.Attr(k, v) for k, v in sorted(values.items())
                          if k not in _BUILD_TIME_VARS and k not in hidden], header=header)
    files = {**templates, VARS_FILE: var_text, **build.shipped, **build.extra_files}
    return Rendered(
        variant=variant,
        files=MappingProxyType(files),
        values=MappingProxyType(values),
        sources=MappingProxyType(dict(build.sources)),
        fingerprint=fingerprint(files, values, macs if secret_env else None, hidden=tuple(secret_env)),
        notes=tuple(secrets.mask(n) for n in notes),
        executable=frozenset(name for name in build.shipped if name.endswith(".sh")),
        secret_env=MappingProxyType(secret_env),
        packer_env=MappingProxyType(dict(build.packer_env)),
        real=build.real,
    )


def fingerprint(files: Mapping[str, str], values: Mapping[str, Any], macs: Mapping[str, str] | None = None,
                *, hidden: tuple[str, ...] = ()) -> str:
    """sha256 over every file (name and text) and the resolved values (credentials masked), source
    AMI included. Of the credentials (the variables `hidden`) it sees only `macs`, made by a KMS key
    nobody can use offline; without them, nothing: no function of a password anyone could compute
    from the pipeline file and a guess reaches the fingerprint (an AMI tag)."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    digest.update(json.dumps(dict(values), sort_keys=True, default=str).encode())
    if macs:  # absent without credentials (or without the key): those fingerprints stay as they were
        if set(macs) != set(hidden):
            raise ValueError(f"fingerprint: MACs for {sorted(macs)}, credentials in {sorted(hidden)}")
        digest.update(json.dumps({"kms-mac": dict(macs)}, sort_keys=True).encode())
    return digest.hexdigest()
