"""The "upstream" base: an awslabs/amazon-eks-ami checkout's JSON Packer template as one HCL2 file.

`fetch` gets a checkout (a local folder, or a git URL / local repository at a ref, cloned into a
cache), `load` reads its JSON template in any layout the repository has had (2019 to today) and
converts it, and `hcl_document` writes one ``.pkr.hcl`` text with amibuild's provisioners placed
where they belong among upstream's (see `UpstreamTemplate.insert_at`)::

    root layout       eks-worker-al2.json [+ eks-worker-al2-variables.json], scripts/, files/  (to 2024-01)
    templates layout  templates/<os>/template.json, variables-default.json, variables-<1.N>.json,
                      provisioners/, runtime/ (al2 from 2024-06 until its removal in 2026-03; al2023)

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

from amibuild.render.upstream.fetch import fetch
from amibuild.render.upstream.convert import load
from amibuild.render.upstream.document import hcl_document, order

__all__ = ["fetch", "hcl_document", "load", "order"]
