"""The "upstream" base: an awslabs/amazon-eks-ami checkout's JSON Packer template as one HCL2 file.

`fetch` gets a checkout (a local folder, or a git URL / local repository at a ref, cloned into a
cache), `load` reads its JSON template in any layout the repository has had (2019 to today) and
converts it, and `hcl_document` writes one ``.pkr.hcl`` text with amibuild's provisioners placed
where they belong among upstream's (see `UpstreamTemplate.proxy_at` / `insert_at`)::

    root layout       eks-worker-al2.json [+ eks-worker-al2-variables.json], scripts/, files/  (to 2024-01)
    templates layout  templates/<os>/template.json, variables-default.json, variables-<1.N>.json,
                      provisioners/, runtime/ (al2 from 2024-06 until its removal in 2026-03; al2023)

Variables are read the way upstream's Makefile hands them to Packer: the template's own defaults,
then ``variables-default.json``, then ``variables-<1.N>.json`` for the Kubernetes minor being
built (the user's var files and flags come on top, in amibuild's spec). A variable that is ``null``
in the template and set by no file is required; one a file sets to ``null`` is set (Packer accepts
it) and is written with ``default = ""``, the value Packer's JSON templates give it.

What changes on the way (each rule is where it is applied):

- ``{{user `x`}}`` becomes ``var.x``, or ``local.x`` when x's default refers to other variables
  (HCL2 defaults cannot): ``variable "x" { default = null }`` plus a local that falls back to the
  derived value, so ``-var x=...`` still wins. ``{{template_dir}}`` becomes the template folder's
  absolute path; relative script and file paths are made absolute against the checkout root
  (upstream's Makefile runs packer there). ``{{env `X`}}`` in a variable default becomes
  ``env("X")``; Packer refuses it anywhere else, so do we. Every other Go template
  (``{{timestamp}}``, ``{{ .SourceAMIName }}``, ``{{.Vars}}``, ...) stays text: Packer still
  evaluates those at build time in HCL2 files.
- Credentials never reach the file: credential-looking variables are dropped, with every list
  element, map entry or attribute that refers to them, and the builder's access_key / secret_key /
  token. Packer takes credentials from its environment or profile. One exception keeps the
  scripts working: an ``environment_vars`` entry ``NAME={{user `aws_access_key_id`}}`` stays as
  ``NAME=`` (empty, never a value), because upstream's scripts run with ``set -o nounset`` and
  read those names (an empty key makes the aws CLI use the instance's own role).
- Packer's JSON decoder read comma-separated strings as lists and "" as false/0; HCL2 does not, so
  list fields become ``compact(split(",", ...))`` and bool/number fields bound to a variable whose
  default is "" become ``var.x == "" ? null : var.x`` (null = unset).
- Upstream's post-processors are dropped: amibuild adds its own manifest.

The parts: fetch.py (getting a checkout), layout.py (its layouts, variable files, the template read),
convert.py (JSON to HCL2) and document.py (the one-file document).
"""

from __future__ import annotations

from amibuild.render.upstream.fetch import fetch
from amibuild.render.upstream.layout import LAYOUTS, UpstreamTemplate, detect, makefile_defaults
from amibuild.render.upstream.convert import BLOCK_FIELDS, CREDENTIAL_ATTRS, LIST_FIELDS, LOCAL_PROVISIONERS, SCALAR_FIELDS, load
from amibuild.render.upstream.document import hcl_document, order

__all__ = [
    "BLOCK_FIELDS",
    "CREDENTIAL_ATTRS",
    "LAYOUTS",
    "LIST_FIELDS",
    "LOCAL_PROVISIONERS",
    "SCALAR_FIELDS",
    "UpstreamTemplate",
    "detect",
    "fetch",
    "hcl_document",
    "load",
    "makefile_defaults",
    "order",
]
