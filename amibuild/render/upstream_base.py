"""A variant on the upstream base: a converted amazon-eks-ami template (`render.upstream`) with
amibuild's settings in its variables, amibuild's own variables beside it and its provisioners
added in their place."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from amibuild import hcl
from amibuild.errors import SpecError
from amibuild.pipeline import Pipeline, Variant
from amibuild.pipeline.keys import region_keys
from amibuild.render.render_model import HCL_FILE, ProvisionerKind, SourceAmi
from amibuild.render.provisioners import provisioner_groups
from amibuild.render.template import manifest_block, variable_block
from amibuild.render.variables import hide_secrets, secret_variables, template_variables, tristate, user_values
from amibuild.render import upstream

if TYPE_CHECKING:
    from amibuild.render.render_model import Build


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
                                    lambda v, p: tristate(v.associate_public_ip_address)),
    "volume_type": ("volume_type", lambda v, p: v.volume_type),
    "volume_size": ("volume_size", lambda v, p: str(v.volume_size)),
    "launch_block_device_mappings_volume_size": ("volume_size", lambda v, p: str(v.volume_size)),
}
# upstream's Makefile (`source_ami_owners ?=` by aws_region): Amazon Linux's publishing account in
# the regions where it is not the template's default one
AMAZON_LINUX_OWNERS = {"cn-northwest-1": "141808717104", "us-gov-west-1": "045324592363", "us-gov-east-1": "045324592363"}
# amibuild's own variables, declared beside the converted upstream template
OWN_VARS = ("tags", "provenance_tags", "amibuild_run_id", "extra_packages", "extra_repos",
            "http_proxy", "https_proxy", "no_proxy")
OWN_VARS_FILE = "amibuild-variables.pkr.hcl"


def render_upstream(template: Any, pipeline: Pipeline, variant: Variant, *, uses_plugins: bool,
                    sources: Mapping[str, SourceAmi], binaries: Any = None) -> tuple[Any, ...]:
    """The upstream template (eks-worker-al2 or al2023) with our provisioners: (values, our
    variables, the source settings it overrides whatever the target, early and late provisioners,
    shipped, notes); `upstream_files` writes it out. ``binaries`` (render.upstream.binaries.Binaries)
    gives kubernetes_version (1.N.P) and kubernetes_build_date; without it the variant's own values stand."""

    if len(pipeline.regions) > 1:
        raise SpecError(f"variant {variant.name}: the upstream base builds in one region; "
                        "list one in pipeline.regions and the rest in copy_to")
    ours = [var for var in template_variables(variant, pipeline) if var.name in OWN_VARS]
    # only what we set goes into the var file; upstream's own defaults stay in its variable blocks
    declared = template.variables
    values: dict[str, Any] = {
        name: setting(variant, pipeline) for name, (field_name, setting) in UPSTREAM_VARS.items()
        if name in declared and (field_name is None or variant.origins.get(field_name, "defaults") != "defaults")}
    if pipeline.build_region in AMAZON_LINUX_OWNERS and "source_ami_owners" in declared:
        values["source_ami_owners"] = AMAZON_LINUX_OWNERS[pipeline.build_region]
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
    early, provisioners, shipped = provisioner_groups(variant, values, keep_tmp=_working_dir(template))
    overrides: dict[str, Any] = {}
    original = {item.key: item.value for item in template.source if isinstance(item, hcl.Attr)}
    for key in ("tags", "snapshot_tags"):
        base = hcl.value(original[key], "  ") if key in original else "{}"
        overrides[key] = hcl.Expr(f"merge({base}, var.tags, var.provenance_tags)")
    overrides["ssh_clear_authorized_keys"] = True  # Packer's temporary key out, after the provisioners
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
    if variant.region_kms_key_ids:  # upstream's templates have one kms_key_id: each copy gets its region's key
        by_region = region_keys(variant, pipeline.regions, pipeline.copy_to)
        overrides["region_kms_key_ids"] = {region: by_region[region] for region in copies}
        overrides["kms_key_id"] = by_region[pipeline.build_region] or None
    ours_early = [f"[amibuild] {p.name}" for p in early]
    ours_late = [f"[amibuild] {p.name}" for p in provisioners if p.kind is not ProvisionerKind.HYGIENE]
    ours_final = [f"[amibuild] {p.name}" for p in provisioners if p.kind is ProvisionerKind.HYGIENE]
    files = ", ".join(str(f.relative_to(template.root)) for f in template.var_files) or "none"
    notes[:0] = [
        f"upstream base: {template.root} ({template.layout} layout, {template.os}); variable files: {files}",
        "provisioner order on the instance: " + " -> ".join(upstream.order(template, ours_early, ours_late, ours_final)),
        *([binaries.note] if binaries is not None else []),
    ]
    variables = hide_secrets(ours, secret_variables(variant, values))
    return values, variables, overrides, early, provisioners, shipped, notes


def _working_dir(template: Any) -> hcl.Expr | None:
    """Upstream's working folder under /tmp, which its steps after the clean-up still read (version
    info, then its own removal): the clean-up leaves it. Templates before 2024 have none of their own."""
    if "working_dir" not in template.variables:
        return None
    derived = "{{" in str(template.variables["working_dir"])
    return hcl.Expr("local.working_dir" if derived else "var.working_dir")


def upstream_files(build: Build) -> dict[str, str]:
    """An upstream build's two HCL files: the converted template with our provisioners, and our variables."""

    pipeline, variant, target = build.pipeline, build.variant, build.target
    overrides = dict(build.source_overrides)
    if target.endpoint:
        overrides["custom_endpoint_ec2"] = target.endpoint
        overrides["skip_region_validation"] = True
    if target.communicator == "none":
        overrides.update(communicator="none", ssh_username=None, ssh_pty=None, ssh_interface=None,
                         ssh_clear_authorized_keys=None)
    if target.polling:
        overrides["aws_polling"] = hcl.Block("aws_polling", (), [
            hcl.Attr("delay_seconds", target.polling[0]), hcl.Attr("max_attempts", target.polling[1])])
    packer_block = None
    if build.uses_plugins:
        packer_block = hcl.Block("packer").attr("required_version", ">= 1.7.0")
        packer_block.block("required_plugins").attr("amazon", {"version": ">= 1.2.0", "source": "github.com/hashicorp/amazon"})
    text = upstream.hcl_document(
        build.upstream, source_name=pipeline.build_region, source_overrides=overrides,
        extra_provisioners=[p.block for p in build.late if p.kind is not ProvisionerKind.HYGIENE],
        early_provisioners=[p.block for p in build.early],
        # after upstream's own clean-up, validation and SELinux steps: the last on the instance
        final_provisioners=[p.block for p in build.late if p.kind is ProvisionerKind.HYGIENE],
        post_processors=[manifest_block(variant.name)], drop_remote_provisioners=not build.remote_steps,
        packer_block=packer_block,
    )
    own = hcl.dumps([variable_block(var) for var in build.variables],
                    header=f"amibuild's own variables for variant \"{variant.name}\" (upstream base).")
    return {HCL_FILE: text, OWN_VARS_FILE: own}


def _gp3_defaults_for_packer_16(source: Sequence[Any]) -> dict[str, list[hcl.Block]]:
    """Block device mappings with throughput/iops set for gp3, which Packer 1.6 requires (it reads
    an unset throughput as 0 and refuses it); Packer >= 1.7 and AWS take these same defaults."""
    out: dict[str, list[hcl.Block]] = {}
    for key in ("launch_block_device_mappings", "ami_block_device_mappings"):
        changed = False
        new_blocks = []
        for block in (x for x in source if isinstance(x, hcl.Block) and x.type == key):
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
