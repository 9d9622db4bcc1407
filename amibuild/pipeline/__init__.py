"""The pipeline file plus command-line flags → frozen, validated `Pipeline` and `Variant` objects.

Precedence, lowest first — this table is the one place it is decided (`LAYERS`):

    1. built-in defaults          (`DEFAULTS` below)
    2. the pipeline file           `defaults { ... }` block, then the variants a variant `extends`
                                   (oldest first), then its own `variant "NAME" { ... }` block
    3. var-files                   `--var-file FILE.pkrvars.hcl`, in the order given
    4. flags                       `--k8s`, `--os`, `--arch`, `--base`, ..., then `--var KEY=VALUE`

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

from amibuild.pipeline.model import (ADDITIVE, AL2_LAST_K8S, ARCHES, BASES, DEFAULT_FLAVOR, DEFAULTS, FLAVORS, LAYERS, NON_PACKER_FIELDS,
                                     OSES, PIPELINE_FILE, VOLUME_TYPES, Overrides, Pipeline, Proxy, Repo, Variant)
from amibuild.pipeline.validation import known_regions
from amibuild.suggest import suggest  # re-exported: the render stage words its near misses with it
from amibuild.pipeline.layering import check_names, load
from amibuild.errors import SpecError, VarFileError

__all__ = [
    "ADDITIVE",
    "AL2_LAST_K8S",
    "ARCHES",
    "BASES",
    "DEFAULTS",
    "DEFAULT_FLAVOR",
    "FLAVORS",
    "LAYERS",
    "NON_PACKER_FIELDS",
    "OSES",
    "Overrides",
    "PIPELINE_FILE",
    "Pipeline",
    "Proxy",
    "Repo",
    "VOLUME_TYPES",
    "Variant",
    "check_names",
    "known_regions",
    "load",
    "suggest",
    "SpecError",
    "VarFileError",
]
