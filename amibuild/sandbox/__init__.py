"""Local AWS emulator for the demo, `amibuild sandbox` and the test-suite.

`Sandbox` runs moto's server in a child process (``python -m amibuild.sandbox serve``) bound to
127.0.0.1 on a free port, seeded with what amibuild expects to find in a real account.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import importlib
from typing import Any

from amibuild.errors import AmibuildError


class SandboxError(AmibuildError):
    """The local AWS emulator failed to start, answer or do what it was asked."""


# Each public name and the module that defines it, imported on first use (PEP 562): a caller of one
# part, the build's transform (`amibuild.sandbox.transform`), say, does not import the emulator's
# process, server and seed modules with it.
_WHERE = {
    **dict.fromkeys(("SANDBOX_CLUSTER", "create_cluster", "model_eks_clusters", "read_short_form_yaml",
                     "sandbox_cluster"), "eks_cluster"),
    "moto_ami": "images",
    **dict.fromkeys((
        "ACCOUNT_ID", "API_PREFIX", "ARCHITECTURES", "DEFAULT_REGION", "EKS_AMI_OWNER", "FLAVOR_SEEDS",
        "KUBERNETES_VERSIONS", "LOOPBACK", "OS_FAMILIES", "RELEASE_STEP", "SANDBOX_SUBNETS", "SANDBOX_VPC_CIDR",
        "SANDBOX_VPC_NAME", "SEED_REGIONS", "SEED_RELEASES", "TRIPWIRE_PROXY", "EksImage", "recommended_parameter",
        "recommended_prefix", "seed_images"), "seed"),
    **dict.fromkeys(("CHILD_PREFIX", "EXIT_REFUSED", "Release", "Sandbox", "safety_env", "serve_foreground"),
                    "process"),
    "main": "server",
}

__all__ = sorted([*_WHERE, "SandboxError"])


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
