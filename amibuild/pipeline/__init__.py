"""The pipeline file plus command-line flags → frozen, validated `Pipeline` and `Variant` objects.

Precedence, lowest first — this table is the one place it is decided (`LAYERS`):

    1. built-in defaults          (`DEFAULTS` below)
    2. the pipeline file           `defaults { ... }` block, then the variants a variant `extends`
                                   (oldest first), then its own `variant "NAME" { ... }` block
    3. var-files                   `--var-file FILE.pkrvars.hcl`, in the order given
    4. flags                       `--k8s`, `--os`, `--arch`, `--base`, ..., then `--var KEY=VALUE`

Lists named in `ADDITIVE` (extra packages, extra repos) are unions across layers, so
`--extra-pkg htop` adds to a variant's packages instead of replacing them; everything else is
replaced by the higher layer. Settings and Packer variables share one namespace: a variant field such
as `instance_type` *is* the Packer variable of that name, so `--var instance_type=m6i.large`,
`instance_type = "..."` in a var-file and the pipeline file all mean the same thing.

The model (names, defaults, value objects) is in model.py, the reading and merging in layering.py,
the checks of merged values in validation.py.

Nothing here touches AWS or the file system beyond reading the files it is given.
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
