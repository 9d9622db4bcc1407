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
from amibuild.render.render_model import (HCL_FILE, RECORD_FILE, VARS_FILE, Build, Provisioner, ProvisionerKind, Rendered,
                                          SourceAmi, SourceHow, Target, Transform)
from amibuild.render.provisioners import (CHECKS_SCRIPT, HYGIENE_SCRIPT, INVENTORY_FILE, INVENTORY_REMOTE, INVENTORY_SCRIPT,
                                          PROVISION_SCRIPTS, checks_script, checks_step, provisioner_blocks)
from amibuild.render.source import eks_name_filter, eks_owners, eks_parameter
from amibuild.render.upstream_base import OWN_VARS_FILE
from amibuild.render.variables import template_variables

__all__ = [
    "CHECKS_SCRIPT", "HCL_FILE", "HYGIENE_SCRIPT", "INVENTORY_FILE", "INVENTORY_REMOTE", "INVENTORY_SCRIPT",
    "OWN_VARS_FILE", "PROVISION_SCRIPTS", "RECORD_FILE", "VARS_FILE",
    "Build", "Provisioner", "ProvisionerKind", "Rendered", "SourceAmi", "SourceHow", "Target", "Transform",
    "checks_script", "checks_step", "credential_env", "eks_name_filter", "eks_owners", "eks_parameter", "fingerprint", "finish",
    "provisioner_blocks", "render_build", "render_variant", "template_variables", "write", "write_files",
]
