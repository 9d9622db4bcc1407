"""Local AWS emulator for the demo, `amibuild sandbox` and the test-suite.

`Sandbox` runs moto's server in a child process (``python -m amibuild.sandbox serve``) bound to
127.0.0.1 on a free port, seeded with what amibuild expects to find in a real account:

* EKS-optimized base images (owner 602401143452, AL2 and AL2023, x86_64 and arm64, two releases
  per Kubernetes version) in every region, through ``MOTO_AMIS_PATH``, with the accelerated
  flavors AWS publishes (`FLAVOR_SEEDS`: AL2023 nvidia and neuron, AL2 gpu);
* the public ``/aws/service/eks/optimized-ami/...`` SSM parameters pointing at the newest of them,
  in every region of `SEED_REGIONS` (the emulator refuses to create ``/aws/`` names over the API,
  so the child writes them straight into its SSM backend);
* a VPC named ``amibuild-sandbox`` with two subnets in every region of `SEED_REGIONS`;
* an EKS cluster named ``amibuild-sandbox`` in that VPC, with a control plane security group,
  public and private endpoint access and authentication mode API_AND_CONFIG_MAP
  (`amibuild.sandbox.cluster`; what `amibuild sandbox` prints for `amibuild nodegroup-deploy`);
* for the upstream base: Amazon Linux minimal source images and the ``amazon-eks`` binaries bucket
  (`amibuild.sandbox.upstream`);
* for signed statements: the KMS key ``alias/amibuild`` (ECC_NIST_P256, SIGN_VERIFY) in every region
  and the bucket ``amibuild-attestations-123456789012``, with KMS Sign / Verify held to AWS's
  limits (`amibuild.sandbox.kms`).

Beyond the stack update model (`_model_stack_updates`) and the stack's tags on the Auto Scaling
groups it makes (`_tag_stack_groups`), the child closes two more gaps, in
`amibuild.sandbox.cluster`: CloudFormation reads YAML templates with amibuild's short-form loader,
so AWS's own amazon-eks-nodegroup.yaml (``!Base64`` over ``!Sub``) creates as users have it, and
EKS clusters carry a CA that is base64 of a PEM block and the ``accessConfig`` they were created with.

The child wraps moto's WSGI app in a small middleware with its own endpoints::

    GET  /amibuild-sandbox/health    {"regions": [...]}: answers once the seed is in place
    POST /amibuild-sandbox/reset     reset the moto backends of every region written to since the
                                     last reset (all of them after a write to IAM, S3, ... or a
                                     release), then seed those again (in-process; `touched`)
    POST /amibuild-sandbox/release   {"k8s", "os", "arch", ["release"]}: publish a newer image
    POST /moto-api/reset             same as /amibuild-sandbox/reset, so the seed survives it

Everything else is moto. The child never talks to anything but loopback: it gets dummy
credentials, no AWS config files, metadata disabled and a tripwire proxy (`safety_env`).

This module is imported by the parent side without importing moto: the child must set
``MOTO_AMIS_PATH`` before moto is imported, and `invoke --list` stays fast.
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
                     "sandbox_cluster"), "cluster"),
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
