"""The pipeline file plus command-line flags → frozen, validated `Pipeline` and `Variant` objects.

Precedence, lowest first — this table is the one place it is decided (`model.LAYERS`):

    1. built-in defaults          (`model.DEFAULTS`)
    2. the pipeline file           `defaults { ... }` block, then the variants a variant `extends`
                                   (oldest first), then its own `variant "NAME" { ... }` block
    3. var-files                   `--var-file FILE.pkrvars.hcl`, in the order given
    4. flags                       `--k8s`, `--os`, `--arch`, `--base`, ..., then `--var KEY=VALUE`

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

from amibuild.pipeline.model import Overrides, Pipeline, Proxy, Repo, Variant
from amibuild.pipeline.validation import known_regions
from amibuild.pipeline.layering import check_names, load
from amibuild.errors import SpecError

__all__ = ["Overrides", "Pipeline", "Proxy", "Repo", "Variant", "check_names", "known_regions", "load", "SpecError"]
