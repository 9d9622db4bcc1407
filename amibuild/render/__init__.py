"""Variant → Packer HCL2 files, resolved values and a fingerprint of everything that went in.

`render_variant` is pure: it takes a validated `Variant`, what is known about Packer, the `Target`
its caller chose (render never reads the environment) and the source AMI decision, and returns a
`Rendered` value holding every file's text: always the real build. It is `render_build` (a `Build`:
target, provisioners, shipped files) then `finish` (files and fingerprint); a transform (the platform's,
`amibuild.jobs.platform`) may rewrite the `Build` in between.
`write` puts a `Rendered` on disk (into a fresh folder, swapped in whole, so a failure never leaves
a half-written variant). Nothing here calls AWS or runs Packer.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

from amibuild.render.assemble import credential_env, fingerprint, finish, render_build, render_variant
from amibuild.render.disk import write, write_files
from amibuild.render.render_model import (AWS_POLLING, COMMUNICATORS, HCL_FILE, RECORD_FILE, VARS_FILE, Build, PackerVariable,
                                   Provisioner, ProvisionerKind, Rendered, SourceAmi, SourceHow, Target,
                                   Transform)
from amibuild.render.provisioners import (CHECKS_SCRIPT, CLEANUP_SCRIPT, EARLY_STEPS, EXECUTE, HYGIENE_SCRIPT,
                                          INVENTORY_FILE, INVENTORY_REMOTE, INVENTORY_SCRIPT,
                                          PROVISION_SCRIPTS, Step, checks_script, checks_step, hygiene_step,
                                          provisioner_blocks, provisioner_groups, provisioning_steps)
from amibuild.render.source import EKS_OWNER, eks_name_filter, eks_parameter
from amibuild.render.template import TEMPLATES, manifest_block, render_template
from amibuild.render.upstream_base import OWN_VARS, OWN_VARS_FILE, UPSTREAM_VARS, render_upstream
from amibuild.render.variables import (NO_PROXY_ALWAYS, SECRET_VARS, apply_packer_vars, effective_no_proxy, hide_secrets,
                                       secret_variables, template_variables, user_values)

__all__ = [
    "AWS_POLLING", "CHECKS_SCRIPT", "CLEANUP_SCRIPT", "COMMUNICATORS", "EARLY_STEPS", "EKS_OWNER", "EXECUTE", "HCL_FILE", "HYGIENE_SCRIPT",
    "INVENTORY_FILE", "INVENTORY_REMOTE", "INVENTORY_SCRIPT",
    "NO_PROXY_ALWAYS", "OWN_VARS", "OWN_VARS_FILE", "PROVISION_SCRIPTS", "RECORD_FILE", "SECRET_VARS", "TEMPLATES",
    "UPSTREAM_VARS", "VARS_FILE",
    "Build", "PackerVariable", "Provisioner", "ProvisionerKind", "Rendered", "SourceAmi", "SourceHow", "Step", "Target",
    "Transform",
    "apply_packer_vars", "checks_script", "checks_step", "credential_env", "effective_no_proxy", "eks_name_filter", "eks_parameter",
    "fingerprint", "finish", "hide_secrets", "hygiene_step", "manifest_block", "provisioner_blocks", "provisioner_groups",
    "provisioning_steps", "render_build", "render_template", "render_upstream", "render_variant", "secret_variables",
    "template_variables", "user_values", "write", "write_files",
]
