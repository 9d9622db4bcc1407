"""Kubernetes version rules and binary resolution for the upstream base, and the Packer-version
dependent parts of its rendering. The bucket is a small fake here (its listing is tested against
the sandbox in test_upstream_real.py); nothing in this file needs AWS."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from amibuild import hcl
from amibuild import render as render_mod
from amibuild import pipeline as pipeline_model
from amibuild.errors import NotFound, SpecError
from amibuild.render import Target
from amibuild.render.upstream import binaries, load

DATA = Path(__file__).parent / "data" / "upstream"


class FakeBucket:
    """`list_eks_binaries` over a fixed set of "<1.N.P>/<date>" prefixes; records the calls."""

    def __init__(self, builds: list[str], bucket: str = "amazon-eks") -> None:
        self.builds, self.bucket = builds, bucket
        self.calls: list[tuple[str, str, str]] = []

    def list_eks_binaries(self, bucket: str, region: str, prefix: str) -> list[str]:
        self.calls.append((bucket, region, prefix))
        if bucket != self.bucket:
            raise NotFound(f"s3:ListObjectsV2 s3://{bucket}: The specified bucket does not exist")
        if prefix.endswith("/"):
            return sorted(b.split("/")[1] for b in self.builds if b.startswith(prefix))
        return sorted({b.split("/")[0] for b in self.builds if b.startswith(prefix)})


BUILDS = ["1.30.2/2024-01-04", "1.30.9/2024-05-12", "1.30.10/2024-06-20", "1.30.10/2024-07-03",
          "1.3.5/2019-01-01", "1.31.1/2024-08-01"]


def variant(k8s: str = "1.30", **packer_vars: str) -> pipeline_model.Variant:
    flags = [f"{k}={v}" for k, v in packer_vars.items()]
    overrides = pipeline_model.Overrides(base="upstream", upstream=str(DATA / "root-layout"), kubernetes_version=k8s,
                               variables=tuple(flags))
    return pipeline_model.load(None, overrides).variants[0]


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # flags alone, not the repository's amibuild.hcl


def test_newest_compares_versions_as_numbers_and_keeps_to_the_minor() -> None:
    assert binaries.newest(["1.30.9", "1.30.10", "1.30.2", "1.3.99", "1.31.0"], "1.30") == "1.30.10"
    assert binaries.newest(["1.31.0"], "1.30") is None


def test_a_minor_resolves_to_the_newest_release_and_its_newest_build() -> None:
    fake = FakeBucket(BUILDS)
    found = binaries.resolve(variant("1.30"), {}, fake)
    assert (found.version, found.build_date, found.how) == ("1.30.10", "2024-07-03", "listed")
    assert fake.calls[0] == ("amazon-eks", "us-west-2", "1.30.")  # not "1.3": that also matches 1.30


def test_a_patch_release_gets_its_newest_build_and_a_date_picks_the_release_built_that_day() -> None:
    assert binaries.resolve(variant("1.30.9"), {}, FakeBucket(BUILDS)).build_date == "2024-05-12"
    found = binaries.resolve(variant("1.30", kubernetes_build_date="2024-01-04"), {}, FakeBucket(BUILDS))
    assert (found.version, found.build_date) == ("1.30.2", "2024-01-04")
    with pytest.raises(SpecError, match="no Kubernetes 1.30 build of 2023-12-31"):
        binaries.resolve(variant("1.30", kubernetes_build_date="2023-12-31"), {}, FakeBucket(BUILDS))


def test_a_full_pin_needs_no_aws_and_anything_less_says_both_ways_in_one_line() -> None:
    pinned = binaries.resolve(variant("1.30.4", kubernetes_build_date="2024-09-11"), {}, None)
    assert (pinned.version, pinned.build_date, pinned.how) == ("1.30.4", "2024-09-11", "pinned")
    for half in (variant("1.30"), variant("1.30.4"), variant("1.30", kubernetes_build_date="2024-09-11")):
        with pytest.raises(SpecError) as caught:
            binaries.resolve(half, {}, None)
        assert "configure AWS credentials" in str(caught.value)
        assert "--var kubernetes_build_date=YYYY-MM-DD" in str(caught.value)
        assert "\n" not in str(caught.value)


def test_bucket_and_region_follow_the_template_and_the_users_vars() -> None:
    fake = FakeBucket(BUILDS, bucket="my-mirror")
    found = binaries.resolve(variant("1.30", binary_bucket_name="my-mirror", binary_bucket_region="eu-west-1"),
                             {"binary_bucket_name": "amazon-eks"}, fake)
    assert found.version == "1.30.10" and fake.calls[0][:2] == ("my-mirror", "eu-west-1")
    with pytest.raises(SpecError, match="holds no Kubernetes 1.29.P binaries"):
        binaries.resolve(variant("1.29"), {}, FakeBucket(BUILDS))
    with pytest.raises(SpecError, match="cannot list s3://amazon-eks .*binary_bucket_name"):
        binaries.resolve(variant("1.30"), {}, FakeBucket(BUILDS, bucket="elsewhere"))
    with pytest.raises(SpecError, match="YYYY-MM-DD"):
        binaries.resolve(variant("1.30.4", kubernetes_build_date="11/09/2024"), {}, None)


def test_patch_versions_are_for_the_upstream_base_only_flag_or_var() -> None:
    assert variant("1.32.9").kubernetes_version == "1.32.9"
    via_var = pipeline_model.load(None, pipeline_model.Overrides(base="upstream", upstream="x", variables=("kubernetes_version=1.32.9",)))
    assert via_var.variants[0].kubernetes_version == "1.32.9"
    with pytest.raises(SpecError, match=r"must look like 1\.N, e\.g\. 1\.30 \(a patch release 1\.N\.P is for base"):
        pipeline_model.load(None, pipeline_model.Overrides(kubernetes_version="1.32.9"))
    with pytest.raises(SpecError, match=r"must look like 1\.N or 1\.N\.P"):
        pipeline_model.load(None, pipeline_model.Overrides(base="upstream", upstream="x", kubernetes_version="1.32.x"))
    al2023 = pipeline_model.load(None, pipeline_model.Overrides(base="upstream", upstream="x", os="al2023", kubernetes_version="1.33"))
    assert al2023.variants[0].os == "al2023"  # AL2023 is an upstream template now


def render_upstream(tmp_path: Path, *, uses_plugins: bool, var_file: str = "") -> str:
    flags: dict = {}
    if var_file:
        path = tmp_path / "user.pkrvars.hcl"
        path.write_text(var_file)
        flags["var_files"] = (str(path),)
    pipeline = pipeline_model.load(None, pipeline_model.Overrides(base="upstream", upstream=str(DATA / "templates-layout"), os="al2",
                                              kubernetes_version="1.30.4",
                                              variables=("kubernetes_build_date=2024-09-11", "ami_name=abc"),
                                              **flags))
    v = pipeline.variants[0]
    template = load(Path(v.upstream), os_family=v.os, k8s=v.kubernetes_version)
    rendered = render_mod.render_variant(
        pipeline, v, uses_plugins=uses_plugins, target=Target(), sources={"us-west-2": render_mod.SourceAmi("lookup")},
        upstream=template, upstream_binaries=binaries.resolve(v, template.variables, None))
    return rendered.files[render_mod.HCL_FILE], rendered.files[render_mod.VARS_FILE], rendered.notes


def test_metadata_options_stay_for_packer_17_and_go_with_a_note_for_16(tmp_path: Path) -> None:
    root = tmp_path / "with-imds"
    shutil.copytree(DATA / "templates-layout", root)
    path = root / "templates/al2/template.json"
    doc = json.loads(path.read_text())
    doc["builders"][0]["metadata_options"] = {"http_tokens": "required"}
    path.write_text(json.dumps(doc))
    for uses_plugins in (True, False):
        template = load(root)
        pipeline = pipeline_model.load(None, pipeline_model.Overrides(base="upstream", upstream=str(root), kubernetes_version="1.30.4",
                                                  variables=("kubernetes_build_date=2024-09-11", "ami_name=abc")))
        v = pipeline.variants[0]
        rendered = render_mod.render_variant(
            pipeline, v, uses_plugins=uses_plugins, target=Target(),
            sources={"us-west-2": render_mod.SourceAmi("lookup")}, upstream=template,
            upstream_binaries=binaries.resolve(v, template.variables, None))
        source = hcl.loads(rendered.files[render_mod.HCL_FILE])["source"][0]["amazon-ebs"]["us-west-2"]
        if uses_plugins:
            assert source["metadata_options"] == [{"http_tokens": "required"}]
        else:
            assert "metadata_options" not in source
            assert any("IMDSv2" in n and "left out" in n for n in rendered.notes)


def test_a_null_in_the_users_var_file_is_set_to_null(tmp_path: Path) -> None:
    _, var_text, _ = render_upstream(tmp_path, uses_plugins=False, var_file="ami_description = null\n")
    assert hcl.loads(var_text)["ami_description"] is None


def test_the_build_policy_lets_an_upstream_pipeline_list_the_binaries_bucket_and_nothing_more() -> None:
    from amibuild.lifecycle import iam

    upstream = pipeline_model.load(None, pipeline_model.Overrides(base="upstream", upstream="x"))
    listed = [s for s in iam.policy("build", upstream)["Statement"] if "s3:ListBucket" in s["Action"]]
    assert [s["Resource"] for s in listed] == [["arn:aws:s3:::amazon-eks"]]
    mirror = pipeline_model.load(None, pipeline_model.Overrides(base="upstream", upstream="x", variables=("binary_bucket_name=mirror",)))
    assert "arn:aws:s3:::mirror" in str(iam.policy("build", mirror))
    # an eks-optimized pipeline reads no bucket: its only S3 right is writing its own signed statements
    layered = iam.policy("build", pipeline_model.load(None, pipeline_model.Overrides()))["Statement"]
    s3 = [s for s in layered if any(a.startswith("s3:") for a in s["Action"])]
    assert [(s["Action"], s["Resource"]) for s in s3] == [
        (["s3:PutObject"], ["arn:aws:s3:::amibuild-attestations-*/amibuild/amibuild/*"])]


@pytest.mark.parametrize("region, owner", [("cn-northwest-1", "141808717104"), ("us-gov-west-1", "045324592363"),
                                           ("us-west-2", None)])
def test_the_source_ami_owner_follows_the_build_region_as_upstreams_makefile_sets_it(region: str, owner) -> None:
    pipeline = pipeline_model.load(None, pipeline_model.Overrides(
        base="upstream", upstream=str(DATA / "templates-layout"), os="al2", kubernetes_version="1.30.4", regions=(region,),
        variables=("kubernetes_build_date=2024-09-11", "ami_name=abc")))
    v = pipeline.variants[0]
    template = load(Path(v.upstream), os_family=v.os, k8s=v.kubernetes_version)
    rendered = render_mod.render_variant(
        pipeline, v, uses_plugins=True, target=Target(), sources={region: render_mod.SourceAmi("lookup")},
        upstream=template, upstream_binaries=binaries.resolve(v, template.variables, None))
    assert hcl.loads(rendered.files[render_mod.VARS_FILE]).get("source_ami_owners") == owner
