"""The fingerprint: same inputs, same fingerprint; any single input changed, a different one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from amibuild import render
from amibuild.pipeline import Overrides, load
from amibuild.render import SourceAmi, Target

BASE_PIPELINE = """\
pipeline {
  name    = "fp"
  regions = ["us-west-2"]
  copy_to = ["eu-west-1"]
}

variant "ceph" {
  os                 = "al2"  # the source below is AL2's; "os" changes it to al2023 alone
  kubernetes_version = "1.30"
  extra_packages = ["ceph-common"]
  repo "ceph" {
    baseurl  = "https://download.ceph.com/rpm-octopus/el7/x86_64"
    gpgcheck = false
  }
}
"""
SOURCE = SourceAmi("resolved", "ami-0123456789abcdef0", "/aws/service/eks/optimized-ami/1.30/amazon-linux-2/recommended/image_id")


def fingerprint(tmp_path: Path, text: str = BASE_PIPELINE, overrides: Overrides = Overrides(),
                *, source: SourceAmi = SOURCE, uses_plugins: bool = False, endpoint: str | None = None,
                script: str | None = None) -> str:
    path = tmp_path / "amibuild.hcl"
    path.write_text(text)
    pipeline = load(path, overrides)
    variant = pipeline.variants[0]
    rendered = render.render_variant(pipeline, variant, uses_plugins=uses_plugins, target=Target(endpoint),
                                     sources={r: source for r in pipeline.regions})
    return rendered.fingerprint


def test_same_inputs_give_the_same_fingerprint(tmp_path: Path) -> None:
    first = fingerprint(tmp_path)
    assert len(first) == 64
    assert fingerprint(tmp_path) == first
    # a rerender into another folder, with the same inputs, is the same build
    other = tmp_path / "other"
    other.mkdir()
    assert fingerprint(other) == first


CHANGES = {
    "kubernetes version": dict(overrides=Overrides(kubernetes_version="1.29")),
    "arch": dict(overrides=Overrides(arch="arm64")),
    "os": dict(overrides=Overrides(os="al2023")),
    "extra package": dict(overrides=Overrides(extra_packages=("htop",))),
    "extra repo": dict(overrides=Overrides(extra_repos=("epel=https://dl.fedoraproject.org/pub/epel/7/x86_64|gpgcheck=false",))),
    "packer variable": dict(overrides=Overrides(variables=("volume_size=40",))),
    "instance type": dict(overrides=Overrides(variables=("instance_type=c5.large",))),
    "build region": dict(overrides=Overrides(regions=("us-east-1",))),
    "copy-to region": dict(text=BASE_PIPELINE.replace('["eu-west-1"]', '["eu-central-1"]')),
    "pipeline tags": dict(text=BASE_PIPELINE.replace('copy_to = ["eu-west-1"]', 'copy_to = ["eu-west-1"]\n  tags = { team = "x" }')),
    "proxy": dict(text=BASE_PIPELINE.replace("variant \"ceph\" {\n", "variant \"ceph\" {\n  proxy {\n    http = \"http://p:3128\"\n  }\n")),
    "source AMI": dict(source=replace(SOURCE, image_id="ami-0fffffffffffffff0")),
    "source AMI unknown (build-time lookup)": dict(source=SourceAmi("lookup")),
    "packer version (plugins block)": dict(uses_plugins=True),
    "endpoint override": dict(endpoint="http://127.0.0.1:4566"),
}


@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_each_input_changed_alone_changes_the_fingerprint(tmp_path: Path, change: str) -> None:
    assert fingerprint(tmp_path, **CHANGES[change]) != fingerprint(tmp_path)


def test_a_shipped_script_edit_changes_the_fingerprint(tmp_path: Path) -> None:
    script = tmp_path / "harden.sh"
    script.write_text("#!/bin/sh\necho one\n")
    text = BASE_PIPELINE.replace('extra_packages = ["ceph-common"]', 'extra_packages = ["ceph-common"]\n  scripts = ["harden.sh"]')
    before = fingerprint(tmp_path, text)
    script.write_text("#!/bin/sh\necho two\n")
    assert fingerprint(tmp_path, text) != before


def test_our_provisioner_scripts_are_covered(tmp_path: Path) -> None:
    path = tmp_path / "amibuild.hcl"
    path.write_text(BASE_PIPELINE)
    pipeline = load(path)
    rendered = render.render_variant(pipeline, pipeline.variants[0], uses_plugins=False, target=Target(),
                                     sources={"us-west-2": SOURCE})
    assert "scripts/install-packages.sh" in rendered.files
    changed = {**rendered.files, "scripts/install-packages.sh": rendered.files["scripts/install-packages.sh"] + "\n"}
    assert render.fingerprint(changed, rendered.values) != rendered.fingerprint


@pytest.mark.parametrize("twice", [dict(overrides=Overrides(regions=("us-west-2", "us-west-2"))),
                                   dict(text=BASE_PIPELINE.replace('regions = ["us-west-2"]', 'regions = ["us-west-2", "us-west-2"]'))],
                         ids=["--region twice", "pipeline.regions twice"])
def test_a_build_region_named_twice_is_one_build_region(tmp_path: Path, twice: dict) -> None:
    """`--region us-west-2 --region us-west-2` rendered two `source "amazon-ebs" "us-west-2"` blocks,
    which packer validate refuses (exit 1, after render had written them), under another fingerprint."""
    assert fingerprint(tmp_path, **twice) == fingerprint(tmp_path)
    path = tmp_path / "amibuild.hcl"
    path.write_text(twice.get("text", BASE_PIPELINE))
    pipeline = load(path, twice.get("overrides", Overrides()))
    assert pipeline.regions == ("us-west-2",)
    rendered = render.render_variant(pipeline, pipeline.variants[0], uses_plugins=False, target=Target(),
                                     sources={"us-west-2": SOURCE})
    assert rendered.files["amibuild.pkr.hcl"].count('source "amazon-ebs" "us-west-2"') == 1
