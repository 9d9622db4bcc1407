"""Where the EKS-optimized source AMI is found: AWS's public SSM parameter, or a name filter for
a build-time lookup, and the account that publishes it."""

from __future__ import annotations

from amibuild.pipeline import Variant

EKS_OWNER = "602401143452"  # the account that publishes the EKS-optimized AMIs


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
