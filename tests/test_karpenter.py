"""`amibuild karpenter`: an EC2NodeClass that follows a channel, checked against Karpenter's own CRD
(v1.14.1, ../shared/karpenter/) and its AL2023 user data against the real nodeadm (../shared/nodeadm/).

The commands run in process against the emulator; the channels are written by `amibuild publish`
and `promote` from images made the quick way (tests/test_fleet.py's `make_image`).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from test_fleet import amibuild, make_image
from conftest import shared_dir, unlimited

ROOT = Path(__file__).resolve().parent.parent
REGIONS = ("us-west-2", "eu-west-1")
PIPELINE = """
pipeline {
  name       = "karp"
  ssm_prefix = "/amibuild"
  regions    = ["us-west-2", "eu-west-1"]
}
variant "ceph" {
  os                 = "al2023"
  kubernetes_version = "1.33"
}
variant "ceph-al2" {
  os                 = "al2"
  kubernetes_version = "1.32"
}
"""
CLUSTER_PART = """---
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: prod
    apiServerEndpoint: https://ABCDEF0123456789.gr7.us-west-2.eks.amazonaws.com
    certificateAuthority: {ca}
    cidr: 172.20.0.0/16
"""


@pytest.fixture(scope="module")
def node_class_schema() -> dict:
    shared = shared_dir("karpenter")
    if shared is None:
        pytest.skip("Karpenter's CRDs (shared/karpenter/) are not beside the repository")
    crd = yaml.safe_load((shared / "karpenter" / "karpenter.k8s.aws_ec2nodeclasses.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return version["schema"]["openAPIV3Schema"]


def assert_valid(manifest: dict, schema: dict) -> None:
    import jsonschema

    jsonschema.Draft7Validator(schema).validate(manifest)  # x-kubernetes-* keywords are not JSON Schema: ignored
    spec = manifest["spec"]
    # the CEL rules that matter here, by hand
    assert ("role" in spec) != ("instanceProfile" in spec), "role or instanceProfile, exactly one"
    assert "amiFamily" in spec, "amiFamily is required without an alias term"
    assert all(term["ssmParameter"] for term in spec["amiSelectorTerms"])
    assert not [k for k in spec.get("tags", {}) if k.startswith(("kubernetes.io/cluster", "karpenter.sh/"))]


@pytest.fixture
def channels(tmp_path: Path, sandbox, monkeypatch: pytest.MonkeyPatch, capsys) -> dict[str, str]:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    monkeypatch.chdir(tmp_path)
    published = {}
    with unlimited():  # set-up: the tests' own commands still wait for tokens
        for variant in ("ceph", "ceph-al2"):
            amis = {region: make_image(variant, 1, region) for region in REGIONS}
            flag = ",".join(f"{r}={a}" for r, a in amis.items())
            assert amibuild(capsys, "publish", "--variant", variant, "--ami", flag)[0] == 0
            assert amibuild(capsys, "promote", "--variant", variant, "--from", "recommended", "--to", "stable")[0] == 0
            published[variant] = amis["us-west-2"]
    return published


def manifest_of(capsys, *args: str) -> dict:
    code, out, err = amibuild(capsys, "karpenter", *args)
    assert code == 0, err
    assert "&id" not in out and "*id" not in out  # plain YAML for kubectl and reviewers: no anchors
    return yaml.safe_load(out)


def test_the_node_class_follows_the_channel_and_is_valid_against_karpenters_crd(channels, capsys,
                                                                               node_class_schema) -> None:
    manifest = manifest_of(capsys, "--variant", "ceph", "--channel", "stable", "--cluster", "prod")
    assert_valid(manifest, node_class_schema)
    assert (manifest["apiVersion"], manifest["kind"], manifest["metadata"]["name"]) == (
        "karpenter.k8s.aws/v1", "EC2NodeClass", "ceph-stable")
    spec = manifest["spec"]
    assert spec["amiSelectorTerms"] == [{"ssmParameter": "/amibuild/karp/1.33/ceph/stable/image_id"}]
    assert spec["amiFamily"] == "AL2023"
    assert spec["role"] == "KarpenterNodeRole-prod"
    assert spec["subnetSelectorTerms"] == spec["securityGroupSelectorTerms"] == [
        {"tags": {"karpenter.sh/discovery": "prod"}}]
    assert spec["metadataOptions"]["httpTokens"] == "required"
    assert spec["tags"] == {"amibuild:pipeline": "karp", "amibuild:variant": "ceph", "amibuild:channel": "stable"}
    assert "userData" not in spec  # nothing amibuild manages beyond the image
    assert manifest["metadata"]["annotations"]["amibuild/region"] == "us-west-2"

    other = manifest_of(capsys, "--variant", "ceph", "--channel", "recommended", "--region", "eu-west-1",
                        "--instance-profile", "nodes", "--name", "general", "--discovery", "shared", "--json")
    assert_valid(other, node_class_schema)
    assert other["spec"]["amiSelectorTerms"] == [{"ssmParameter": "/amibuild/karp/1.33/ceph/recommended/image_id"}]
    assert other["metadata"]["annotations"]["amibuild/region"] == "eu-west-1"
    assert (other["metadata"]["name"], other["spec"]["instanceProfile"]) == ("general", "nodes")
    assert "role" not in other["spec"]


def test_al2023_user_data_is_a_nodeconfig_that_nodeadm_accepts_with_a_cluster_part(channels, capsys, tmp_path,
                                                                                   node_class_schema) -> None:
    from amibuild.sandbox.eks_cluster import fake_certificate_authority

    shared = shared_dir("karpenter")
    nodeadm = shared / "nodeadm" / "nodeadm" if shared else None
    if nodeadm is None or not nodeadm.is_file():
        pytest.skip("the real nodeadm (shared/nodeadm/nodeadm) is not beside the repository")
    manifest = manifest_of(capsys, "--variant", "ceph", "--channel", "stable", "--cluster", "prod",
                           "--proxy", "http://proxy.internal:3128", "--vpc-cidr", "10.42.0.0/16",
                           "--kubelet-flag=--node-labels=team=storage", "--kubelet-flag=--max-pods=58")
    assert_valid(manifest, node_class_schema)
    userdata = manifest["spec"]["userData"]
    assert "Content-Type: application/node.eks.aws" in userdata and "apiServerEndpoint" not in userdata
    # Karpenter adds its own NodeConfig part with the cluster's details; nodeadm merges them
    boundary = userdata.split('boundary="', 1)[1].split('"', 1)[0]
    cluster = CLUSTER_PART.format(ca=fake_certificate_authority("prod"))
    merged = userdata.replace(f"--{boundary}--", f"--{boundary}\nContent-Type: application/node.eks.aws\n\n"
                              f"{cluster}\n--{boundary}--")
    path = tmp_path / "userdata"
    path.write_text(merged)
    check = subprocess.run([str(nodeadm), "config", "check", "--config-source", f"file://{path}"],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    dump = subprocess.run([str(nodeadm), "config", "dump", "--config-source", f"file://{path}"],
                          capture_output=True, text=True, timeout=60)
    assert dump.returncode == 0, dump.stderr
    config = json.loads(dump.stdout) if dump.stdout.lstrip().startswith("{") else yaml.safe_load(dump.stdout)
    spec = config["spec"]
    assert spec["cluster"]["name"] == "prod"
    assert spec["kubelet"]["flags"] == ["--node-labels=team=storage", "--max-pods=58"]
    environment = spec["instance"]["environment"]["default"]
    assert environment["HTTPS_PROXY"] == "http://proxy.internal:3128"
    assert environment["NO_PROXY"].split(",")[:2] == ["10.42.0.0/16", "10.100.0.0/16"]


def test_al2_variants_give_al2_user_data(channels, capsys, node_class_schema) -> None:
    manifest = manifest_of(capsys, "--variant", "ceph-al2", "--channel", "stable", "--cluster", "prod",
                           "--proxy", "http://proxy.internal:3128")
    assert_valid(manifest, node_class_schema)
    assert manifest["spec"]["amiFamily"] == "AL2"
    assert manifest["spec"]["amiSelectorTerms"] == [{"ssmParameter": "/amibuild/karp/1.32/ceph-al2/stable/image_id"}]
    userdata = manifest["spec"]["userData"]
    assert "Content-Type: text/cloud-boothook" in userdata and "application/node.eks.aws" not in userdata
    assert "nodeadm" not in userdata and "docker" in userdata  # the AL2 units get the proxy
    code, out, err = amibuild(capsys, "karpenter", "--variant", "ceph-al2", "--channel", "stable",
                              "--kubelet-flag=--max-pods=58")
    assert code == 2 and out == "" and "spec.kubelet" in err


BAD = [
    (["--variant", "cehp", "--channel", "stable"], "did you mean 'ceph'"),
    (["--variant", "ceph", "--channel", "stabel"], "did you mean 'stable'"),
    (["--variant", "ceph", "--channel", "candidate"], "its channels there: recommended, stable"),
    (["--variant", "ceph", "--channel", "stable", "--region", "ap-southeast-2"],
     "has no channel stable in ap-southeast-2"),
    (["--variant", "ceph"], "--channel CHANNEL"),
    (["--variant", "ceph", "--channel", "stable", "--name", "Ceph_Stable"], "--name 'Ceph_Stable'"),
    (["--variant", "ceph", "--channel", "stable", "--role", "r", "--instance-profile", "p"], "give one of them"),
    (["--variant", "ceph", "--channel", "stable", "--proxy", "http://proxy:3128", "--vpc-cidr", "10.42.0.1/16"],
     "--vpc-cidr '10.42.0.1/16': not a network in CIDR notation"),
]


def test_a_variant_or_channel_that_does_not_exist_is_exit_2_with_a_suggestion(channels, capsys) -> None:
    for args, words in BAD:
        code, out, err = amibuild(capsys, "karpenter", *args)
        assert code == 2, (args, err)
        assert out == "" and words in err, (args, err)
