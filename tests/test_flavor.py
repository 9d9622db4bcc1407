"""Accelerated images: a variant's flavor picks the EKS-optimized parent, its name filter, a build
instance type that boots it, the fingerprint, the tags and the channel's {flavor} field."""

from __future__ import annotations

import shutil
from pathlib import Path

import boto3
import pytest

from amibuild.pipeline import Overrides, Variant, load
from amibuild.errors import SpecError
from amibuild.render import eks_name_filter, eks_parameter
from amibuild.sandbox import recommended_parameter
from amibuild.pipeline.naming import parameter_name
from conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent


def variant(tmp_path: Path, body: str, *flags: str) -> Variant:
    (tmp_path / "amibuild.hcl").write_text(f'variant "v" {{\n{body}\n}}\n')
    overrides = Overrides(flavor=flags[0]) if flags else Overrides()
    return load(tmp_path / "amibuild.hcl", overrides).variants[0]


@pytest.mark.parametrize("body, parameter, name_filter, instance", [
    ('os = "al2023"\nkubernetes_version = "1.35"',
     "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/standard/recommended/image_id",
     "amazon-eks-node-al2023-x86_64-standard-1.35-v*", "m5.large"),
    ('os = "al2023"\nkubernetes_version = "1.35"\nflavor = "nvidia"',
     "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/nvidia/recommended/image_id",
     "amazon-eks-node-al2023-x86_64-nvidia-1.35-v*", "g5.xlarge"),
    ('os = "al2023"\nkubernetes_version = "1.35"\nflavor = "nvidia"\narch = "arm64"',
     "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/arm64/nvidia/recommended/image_id",
     "amazon-eks-node-al2023-arm64-nvidia-1.35-v*", "g5g.xlarge"),
    ('os = "al2023"\nkubernetes_version = "1.35"\nflavor = "neuron"',
     "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/neuron/recommended/image_id",
     "amazon-eks-node-al2023-x86_64-neuron-1.35-v*", "inf2.xlarge"),
    ('os = "al2"\nkubernetes_version = "1.32"\nflavor = "gpu"',
     "/aws/service/eks/optimized-ami/1.32/amazon-linux-2-gpu/recommended/image_id",
     "amazon-eks-gpu-node-1.32-v*", "g5.xlarge"),
])
def test_flavor_picks_parent_parameter_name_filter_and_instance_type(tmp_path, body, parameter, name_filter,
                                                                     instance) -> None:
    v = variant(tmp_path, body)

    assert eks_parameter(v) == parameter
    assert eks_name_filter(v) == name_filter
    assert v.effective_instance_type == instance


def test_sandbox_seeds_every_flavored_parent_the_render_asks_for(tmp_path) -> None:
    for body, args in (('os = "al2023"\nkubernetes_version = "1.35"\nflavor = "nvidia"', ("al2023", "x86_64", "nvidia")),
                       ('os = "al2"\nkubernetes_version = "1.32"\nflavor = "gpu"', ("al2", "x86_64", "gpu"))):
        v = variant(tmp_path, body)
        assert eks_parameter(v) == recommended_parameter(v.kubernetes_version, *args)


@pytest.mark.parametrize("body, flag, words", [
    ('os = "al2"\nkubernetes_version = "1.32"\nflavor = "nvidia"', None, "flavor"),
    ('os = "al2023"\nkubernetes_version = "1.35"\nflavor = "gpu"', None, "flavor"),
    ('os = "al2023"\nkubernetes_version = "1.35"\nflavor = "neuron"\narch = "arm64"', None,
     "no al2023 neuron image for arm64"),
    ('os = "al2"\nkubernetes_version = "1.32"\narch = "arm64"', "gpu", "--flavor gpu: EKS publishes no al2 gpu image"),
])
def test_flavor_that_eks_does_not_publish_is_refused(tmp_path, body, flag, words) -> None:
    with pytest.raises(SpecError, match=words):
        variant(tmp_path, body, *([flag] if flag else []))


def test_flavor_flag_overrides_the_file_and_changes_fingerprint_settings_and_channel_name(tmp_path) -> None:
    standard = variant(tmp_path, 'os = "al2023"\nkubernetes_version = "1.35"')
    nvidia = variant(tmp_path, 'os = "al2023"\nkubernetes_version = "1.35"', "nvidia")

    assert nvidia.flavor == "nvidia" and standard.flavor == "standard"
    # A standard variant's settings (hence fingerprint) are what they were before flavors existed.
    assert "flavor" not in standard.settings() and nvidia.settings()["flavor"] == "nvidia"
    pipeline = load(tmp_path / "amibuild.hcl")
    template = "{prefix}/{pipeline}/{k8s}/{variant}-{flavor}/{channel}/image_id"
    assert parameter_name(pipeline, nvidia, "stable", template).endswith("/1.35/v-nvidia/stable/image_id")


@pytest.mark.skipif(shutil.which("packer") is None, reason="the build runs the real packer")
def test_nvidia_al2023_variant_builds_from_the_nvidia_parent_tagged_with_its_flavor(sandbox, tmp_path) -> None:
    (tmp_path / "amibuild.hcl").write_text(
        'pipeline {\n  name = "gpu"\n  regions = ["us-west-2"]\n}\n'
        'variant "cuda" {\n  os = "al2023"\n  kubernetes_version = "1.35"\n  flavor = "nvidia"\n'
        '  extra_packages = ["ceph-common"]\n}\n')

    built = run_cli(tmp_path, "build-ami", "--json")

    assert built.returncode == 0, built.stderr
    ssm = boto3.client("ssm", region_name="us-west-2")
    parent = ssm.get_parameter(Name=recommended_parameter("1.35", "al2023", "x86_64", "nvidia"))["Parameter"]["Value"]
    ami = ssm.get_parameter(Name="/amibuild/gpu/1.35/cuda/recommended/image_id")["Parameter"]["Value"]
    image = boto3.client("ec2", region_name="us-west-2").describe_images(ImageIds=[ami])["Images"][0]
    tags = {t["Key"]: t["Value"] for t in image["Tags"]}
    assert tags["amibuild:flavor"] == "nvidia"
    assert tags["amibuild:source-ami"] == parent
    assert tags["amibuild:source-ami-name"].startswith("amazon-eks-node-al2023-x86_64-nvidia-1.35-v")
