"""What a publish reads to find the images a variant's other channels hold (`channels.safeguard.held`):
the variant's own path, not the whole pipeline's, whatever the name template. With 200 variants the
whole pipeline's path was 200 variants' parameters, 10 to a page, read again for each variant."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from amibuild.aws import Parameter
from amibuild.channels import safeguard
from amibuild.pipeline.naming import name_pattern, parameter_name


@dataclass(frozen=True)
class P:
    name: str = "eks-workers"
    ssm_prefix: str = "/amibuild"
    parameter_template: str | None = None
    target_regions: tuple[str, ...] = ("us-west-2",)


@dataclass(frozen=True)
class V:
    name: str
    kubernetes_version: str = "1.31"
    os: str = "al2023"
    arch: str = "x86_64"
    flavor: str = "standard"


class Listing:
    """The gateway's two reads `held` makes: the parameters under a path (the SSM paths' rule: a
    path names a whole level, /a/b lists /a/b/... and not /a/bc), and images (none found)."""

    def __init__(self, parameters: dict[str, str]) -> None:
        self.parameters, self.paths = parameters, []

    def parameters_under(self, path: str, region: str) -> list[Parameter]:
        self.paths.append(path)
        root = path.rstrip("/") + "/"
        return [Parameter(name=n, region=region, value=v, version=1, data_type="aws:ec2:image")
                for n, v in self.parameters.items() if n.startswith(root)]

    def images_at(self, places):
        return {place: None for place in places}


# (template, the path `held` lists for variant ceph, Kubernetes 1.31): up to the first field left open
TEMPLATES = [(None, "/amibuild/eks-workers/1.31/ceph"),
             ("{prefix}/{variant}/{arch}/{channel}", "/amibuild/ceph"),
             ("{prefix}/{pipeline}/{variant}/{channel}/{arch}/{k8s}", "/amibuild/eks-workers/ceph"),
             ("{prefix}/{channel}/{pipeline}/{k8s}/{variant}", "/amibuild")]  # the channel first: no narrower


@pytest.mark.parametrize("template,path", TEMPLATES)
def test_held_lists_only_the_variants_own_channels_and_finds_them_all(template, path) -> None:
    pipeline = P(parameter_template=template)
    ceph, others = V("ceph"), [V("ceph-arm"), V("plain")]
    if template is None or "{k8s}" in template:  # without it, ceph 1.30 and 1.31 share their names
        others.append(V("ceph", kubernetes_version="1.30"))
    params = {parameter_name(pipeline, ceph, "stable"): "ami-00000000000000001",
              parameter_name(pipeline, ceph, "candidate"): "ami-00000000000000002"}
    for i, other in enumerate(others):
        params[parameter_name(pipeline, other, "stable")] = f"ami-0000000000000010{i}"
    aws = Listing(params)
    found, holders = safeguard.held(aws, pipeline, ceph, channel="recommended",
                                    amis={"us-west-2": "ami-00000000000000009"}, regions=["us-west-2"])
    assert holders == {("us-west-2", "ami-00000000000000001"): ["stable"],
                       ("us-west-2", "ami-00000000000000002"): ["candidate"],
                       ("us-west-2", "ami-00000000000000009"): ["recommended"]}
    assert set(found) == set(holders)
    assert aws.paths == [path]


def test_a_known_field_narrows_the_path_and_is_matched_as_given() -> None:
    pipeline = P()
    assert name_pattern(pipeline)[0] == "/amibuild/eks-workers"
    path, pattern = name_pattern(pipeline, known={"variant": "ceph", "k8s": "1.31"})
    assert path == "/amibuild/eks-workers/1.31/ceph"
    assert pattern.match("/amibuild/eks-workers/1.31/ceph/stable/image_id").group("channel") == "stable"
    assert not pattern.match("/amibuild/eks-workers/1.31/ceph-arm/stable/image_id")
    assert not pattern.match("/amibuild/eks-workers/1.30/ceph/stable/image_id")
