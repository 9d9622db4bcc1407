"""Where the EKS-optimized source AMI is found: AWS's public SSM parameter, or a name filter for
a build-time lookup, and the account that publishes it."""

from __future__ import annotations

from typing import Iterable

from amibuild.pipeline import Variant

EKS_OWNER = "602401143452"  # the account that publishes the EKS-optimized AMIs in most regions
# Opt-in, China and GovCloud regions have a publishing account of their own: the one AWS documents
# as the region's EKS add-on image registry ("Amazon container image registries for Amazon EKS add-ons").
REGION_OWNERS = {
    "af-south-1": "877085696533", "ap-east-1": "800184023465", "ap-east-2": "533267051163",
    "ap-south-2": "900889452093", "ap-southeast-3": "296578399912", "ap-southeast-4": "491585149902",
    "ap-southeast-5": "151610086707", "ap-southeast-6": "333609536671", "ap-southeast-7": "121268973566",
    "ca-west-1": "761377655185", "cn-north-1": "918309763551", "cn-northwest-1": "961992271922",
    "eu-central-2": "900612956339", "eu-south-1": "590381155156", "eu-south-2": "455263428931",
    "il-central-1": "066635153087", "me-central-1": "759879836304", "me-south-1": "558608220178",
    "mx-central-1": "730335286997", "us-gov-east-1": "151742754352", "us-gov-west-1": "013241004608",
}


def eks_owners(regions: Iterable[str]) -> list[str]:
    """The accounts that publish the EKS-optimized AMIs in `regions` (a build-time lookup's owners)."""
    return sorted({REGION_OWNERS.get(region, EKS_OWNER) for region in regions})


def eks_parameter(variant: Variant) -> str:
    """The public SSM parameter AWS publishes the recommended EKS-optimized image id under."""
    base = f"/aws/service/eks/optimized-ami/{variant.kubernetes_version}"
    if variant.os == "al2023":
        return f"{base}/amazon-linux-2023/{variant.arch}/{variant.flavor}/recommended/image_id"
    if variant.flavor == "gpu":
        return f"{base}/amazon-linux-2-gpu/recommended/image_id"
    path = "amazon-linux-2-arm64" if variant.arch == "arm64" else "amazon-linux-2"
    return f"{base}/{path}/recommended/image_id"


def eks_name_filter(variant: Variant) -> str:
    """An image-name filter that matches the same EKS-optimized images, for a build-time lookup."""
    k8s = variant.kubernetes_version
    if variant.os == "al2023":
        return f"amazon-eks-node-al2023-{variant.arch}-{variant.flavor}-{k8s}-v*"
    if variant.flavor == "gpu":
        return f"amazon-eks-gpu-node-{k8s}-v*"
    return f"amazon-eks-arm64-node-{k8s}-v*" if variant.arch == "arm64" else f"amazon-eks-node-{k8s}-v*"
