"""The boot test's last gaps: `build-ami --boot-test --cluster`, the variant's proxy in the test
instance's user data, and the test Node cordoned before it is deleted.

User data is read back from the emulator (DescribeInstanceAttribute) and checked by the real
nodeadm (../shared/nodeadm/); the cluster is the sandbox's (`amibuild.sandbox.kubeapi`), read
through the real `kubernetes` client.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from amibuild.handoff import testnode
from amibuild.handoff.userdata import decode
from amibuild.imagetest import kube
from amibuild.pipeline import load
from amibuild.sandbox import SANDBOX_CLUSTER
from conftest import NODEADM, needs_nodeadm, run_cli

REGION = "us-west-2"


NEEDS_BUILD = pytest.mark.skipif(shutil.which("packer") is None or os.geteuid() != 0,
                                 reason="packer and root are needed: the image's stand-in is an overlay of / in a "
                                        "private mount namespace with a build user")

OFF = "\n".join(f'  test "{name}" {{\n    enabled = false\n    reason  = "sandbox stand-in"\n  }}'
                for name in ("kubelet", "containerd", "nodeadm", "nodeadm-config", "unpigz"))
PIPELINE = f"""\
pipeline {{
  name    = "br"
  regions = ["us-west-2"]
}}

variant "ceph" {{
  extra_packages = ["ceph-common"]
{OFF}
}}

variant "tools" {{
  extends        = "ceph"
  extra_packages = ["jq"]
}}
"""
PROXIED = f"""\
pipeline {{
  name    = "br"
  regions = ["us-west-2"]
}}

variant "ceph" {{
  proxy {{
    http                  = "http://proxy.local:3128"
    no_proxy              = "registry.local,10.9.0.0/16"
    credentials_parameter = "/amibuild/proxy-creds"
  }}
{OFF}
}}

variant "open" {{
  os = "al2023"
  proxy {{
    https    = "http://open-proxy.local:8080"
  }}
{OFF}
}}
"""
SECRET = "S3cretPw"


def nodeadm(command: str, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(NODEADM), "config", command, "--config-source", f"file://{path}"],
                          capture_output=True, text=True, timeout=60)


def boot_instances(region: str = REGION) -> list[dict]:
    ec2 = boto3.client("ec2", region_name=region)
    return [i for r in ec2.describe_instances(Filters=[{"Name": "tag:amibuild:purpose", "Values": ["boot-test"]}])
            ["Reservations"] for i in r["Instances"]]


def launched_user_data(instance_id: str) -> str:
    """The instance's user data as EC2 gives it back (base64), decoded."""
    raw = boto3.client("ec2", region_name=REGION).describe_instance_attribute(
        InstanceId=instance_id, Attribute="userData")["UserData"]["Value"]
    return base64.b64decode(raw).decode()


def foreign_image(name: str, variant: str) -> str:
    """An image with amibuild's tags that this sandbox has no stand-in of (no packer build needed)."""
    from amibuild.sandbox import seed_images

    ec2 = boto3.client("ec2", region_name=REGION)
    instance = ec2.run_instances(ImageId=seed_images()[0].image_id, MinCount=1, MaxCount=1, InstanceType="m5.large")
    ami = ec2.create_image(InstanceId=instance["Instances"][0]["InstanceId"], Name=name)["ImageId"]
    ec2.create_tags(Resources=[ami], Tags=[{"Key": "amibuild:variant", "Value": variant}])
    return ami


# ------------------------------------------------------------------------------- the proxy in the user data


@needs_nodeadm
@pytest.mark.parametrize("variant", ["ceph", "open"])
def test_the_test_instance_gets_the_variants_proxy_read_back_from_ec2_and_nodeadm_accepts_it(
        tmp_path: Path, sandbox, variant: str):
    (tmp_path / "amibuild.hcl").write_text(PROXIED)
    ami = foreign_image(f"br-{variant}-proxy", variant)
    done = run_cli(tmp_path, "test-ami", "--variant", variant, "--ami", ami, "--json", binary="amibuild")
    assert done.returncode == 0, done.stderr  # no stand-in of a foreign image: untested, not failed
    assert json.loads(done.stdout)["terminated"] is True
    (instance,) = boot_instances()
    text = launched_user_data(instance["InstanceId"])
    path = tmp_path / "userdata"
    path.write_text(text)
    checked = nodeadm("check", path)
    assert checked.returncode == 0 and "Configuration is valid" in checked.stdout + checked.stderr, checked.stderr
    parts = {p.content_type: p.body for p in decode.decode(text.encode(), "instance")}
    boothook = parts["text/cloud-boothook"]
    if variant == "ceph":  # http only: that URL; the nodes read user:password from the SecureString at boot
        assert "proxy.local:3128" in boothook and "/amibuild/proxy-creds" in boothook
        assert "registry.local" in boothook and "10.9.0.0/16" in boothook
        assert "@proxy.local" not in text  # no credentials, only the parameter's name
    else:  # https given: its URL, in the boothook and in the NodeConfig nodeadm reads before cloud-init
        assert "http://open-proxy.local:8080" in boothook
        dumped = nodeadm("dump", path)
        assert dumped.returncode == 0 and "http://open-proxy.local:8080" in dumped.stdout, dumped.stderr
    assert testnode.CHECK_ONLY_CLUSTER in parts["application/node.eks.aws"]


def test_an_al2_variant_without_a_cluster_gets_the_proxy_boothook_and_a_script_that_starts_nothing(tmp_path: Path):
    (tmp_path / "amibuild.hcl").write_text('variant "old" {\n  os = "al2"\n  kubernetes_version = "1.30"\n'
                                           '  proxy {\n    http = "http://proxy.local:3128"\n  }\n}\n')
    (v,) = load(tmp_path / "amibuild.hcl").variants
    text = testnode.user_data_by_variant([v], region=REGION, cluster=None)["old"]
    parts = decode.decode(text.encode(), "al2")
    assert [p.content_type for p in parts] == ["text/cloud-boothook", "text/x-shellscript"]
    assert "http://proxy.local:3128" in parts[0].body and "/etc/eks/bootstrap.sh" not in parts[1].body
    assert [line for line in parts[1].body.splitlines() if not line.startswith("#")] == ["exit 0"]


@pytest.mark.parametrize("command", [["test-ami", "--variant", "ceph", "--ami", "ami-0123456789abcdef0"],
                                     ["build-ami", "--boot-test", "--no-publish"]])
def test_a_proxy_url_with_a_password_is_refused_for_a_boot_test_before_any_aws_work(tmp_path: Path, command):
    (tmp_path / "amibuild.hcl").write_text(
        f'pipeline {{\n  name = "br"\n  regions = ["us-west-2"]\n}}\nvariant "ceph" {{\n  proxy {{\n'
        f'    http = "http://user:{SECRET}@proxy.local:3128"\n  }}\n{OFF}\n}}\n')
    # no emulator: any AWS call would fail on the tripwire proxy instead
    done = run_cli(tmp_path, *command, binary="amibuild")
    assert done.returncode == 2, done.stderr
    assert "variant ceph: proxy http://user:***@proxy.local:3128 carries user:password" in done.stderr
    assert "credentials_parameter" in done.stderr and SECRET not in done.stderr + done.stdout
    assert not (tmp_path / "build").exists()


# ------------------------------------------------------------------------------- build-ami --boot-test --cluster


def test_build_ami_cluster_without_the_boot_test_or_the_client_or_a_kubeconfig_exits_2_before_any_aws_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    alone = run_cli(tmp_path, "build-ami", "--cluster", "prod", binary="amibuild")
    assert alone.returncode == 2 and "--cluster goes with --boot-test" in alone.stderr, alone.stderr
    bad = run_cli(tmp_path, "build-ami", "--boot-test", "--cluster", "no such!", binary="amibuild")
    assert bad.returncode == 2 and "--cluster 'no such!': an EKS cluster name" in bad.stderr, bad.stderr
    lost = run_cli(tmp_path, "build-ami", "--boot-test", "--cluster", "prod",
                   env={"KUBECONFIG": str(tmp_path / "none")}, binary="amibuild")
    assert lost.returncode == 2 and "--cluster prod: no kubeconfig" in lost.stderr, lost.stderr
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # what an amibuild without the extra has
    bare = run_cli(tmp_path, "build-ami", "--boot-test", "--cluster", "prod", binary="amibuild")
    assert bare.returncode == 2 and "--cluster needs the Kubernetes client" in bare.stderr, bare.stderr
    assert not (tmp_path / "build").exists()


def test_build_ami_boot_test_with_a_cluster_that_is_not_there_exits_2_before_building(tmp_path: Path, sandbox):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    done = run_cli(tmp_path, "build-ami", "--boot-test", "--cluster", "elsewhere", binary="amibuild")
    assert done.returncode == 2, done.stderr
    assert "--cluster elsewhere: no such EKS cluster in us-west-2" in done.stderr
    assert not (tmp_path / "build" / "runs").exists() or not any((tmp_path / "build" / "runs").iterdir())
    assert boto3.client("ec2", region_name=REGION).describe_images(Owners=["self"])["Images"] == []


@NEEDS_BUILD
def test_build_ami_boot_test_cluster_joins_each_node_tainted_reports_ready_seconds_and_removes_them(
        tmp_path: Path, sandbox):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    done = run_cli(tmp_path, "build-ami", "--boot-test", "--cluster", SANDBOX_CLUSTER, "--json", binary="amibuild")
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)
    tests = {v["name"]: v["boot_test"] for v in run["variants"]}
    assert sorted(tests) == ["ceph", "tools"]
    instances = {i["InstanceId"]: i for i in boot_instances()}
    assert len(instances) == 2
    for name, test in tests.items():
        assert test["result"] == "passed" and test["cluster"] == SANDBOX_CLUSTER, (name, test)
        assert test["node_ready_seconds"] is not None and test["node_ready_seconds"] >= 0
        assert test["node_removed"] is True and test["terminated"] is True
        assert test["node"] == instances[test["instance_id"]]["PrivateDnsName"]
        text = launched_user_data(test["instance_id"])
        assert f"name: {SANDBOX_CLUSTER}" in text and f"--register-with-taints={kube.TEST_TAINT}" in text
        assert f"node {test['node']} joined {SANDBOX_CLUSTER}, Ready with {kube.TEST_TAINT}" in done.stderr
    # the run record keeps the same, and the report says it per variant
    record = json.loads((tmp_path / run["record"]).read_text())
    assert {v["name"]: v["boot_test"]["node_ready_seconds"] for v in record["variants"]} == \
        {n: t["node_ready_seconds"] for n, t in tests.items()}
    report = run_cli(tmp_path, "runs", binary="amibuild")  # the record is readable by amibuild itself
    assert report.returncode == 0 and run["run_id"] in report.stdout, report.stderr
    # read back: both instances terminated, both Nodes gone, each cordoned before it was deleted, with the taint
    ec2 = boto3.client("ec2", region_name=REGION)
    states = {i["InstanceId"]: i["State"]["Name"] for r in ec2.describe_instances(InstanceIds=list(instances))
              ["Reservations"] for i in r["Instances"]}
    assert set(states.values()) <= {"shutting-down", "terminated"}, states
    assert kube.Nodes(SANDBOX_CLUSTER, kubeconfig=str(sandbox.kubeconfig)).list() == []
    deleted = {n["metadata"]["name"]: n for n in sandbox.deleted_nodes()}
    assert set(deleted) == {t["node"] for t in tests.values()}
    for node in deleted.values():
        assert node["spec"].get("unschedulable") is True
        assert {"key": "amibuild.io/test", "value": "true", "effect": "NoSchedule"} in node["spec"]["taints"]
    # both passed, so both are published
    assert all(v["status"] == "built" and v["published"] and not v["publish_error"] for v in run["variants"]), \
        run["variants"]
    # the report says it per variant too
    again = run_cli(tmp_path, "build-ami", "--boot-test", "--cluster", SANDBOX_CLUSTER, "--force", binary="amibuild")
    assert again.returncode == 0, again.stderr
    lines = [line for line in again.stdout.splitlines() if "boot test" in line]
    assert len(lines) == 2 and all(f"Ready in {SANDBOX_CLUSTER} after" in line and line.endswith("removed")
                                   and "passed" in line for line in lines), again.stdout


def test_test_ami_joins_the_cluster_the_pipeline_names_and_cordons_its_node_before_deleting_it(
        tmp_path: Path, sandbox):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE.replace(
        '  regions = ["us-west-2"]\n', f'  regions = ["us-west-2"]\n  test {{\n    cluster = "{SANDBOX_CLUSTER}"\n  }}\n'))
    ami = foreign_image("br-ceph-joined", "ceph")
    done = run_cli(tmp_path, "test-ami", "--variant", "ceph", "--ami", ami, "--json", binary="amibuild")
    assert done.returncode == 0, done.stderr  # a foreign image: untested, but its node joined and got Ready
    result = json.loads(done.stdout)
    assert result["cluster"] == SANDBOX_CLUSTER and result["node_ready_seconds"] is not None
    assert result["node_removed"] is True and result["terminated"] is True
    (node,) = sandbox.deleted_nodes()
    assert node["metadata"]["name"] == result["node"] and node["spec"]["unschedulable"] is True
    assert kube.Nodes(SANDBOX_CLUSTER, kubeconfig=str(sandbox.kubeconfig)).list() == []


def test_a_bad_cluster_in_the_pipelines_test_block_is_refused_at_load(tmp_path: Path):
    from amibuild.errors import SpecError

    (tmp_path / "amibuild.hcl").write_text('pipeline {\n  name = "p"\n  test {\n    cluster = "a b"\n  }\n}\n'
                                           'variant "v" {\n}\n')
    with pytest.raises(SpecError) as caught:
        load(tmp_path / "amibuild.hcl")
    assert "pipeline.test.cluster 'a b': an EKS cluster name" in str(caught.value)


def test_hcl_parses_in_threads_at_once_give_what_one_parse_gives():
    """The emulator rehearses two stand-ins at once (build-ami --boot-test of two variants): python-hcl2
    alone then gave a list default as its source text ('["ceph-common"]'), which failed the chain."""
    import threading

    from amibuild import hcl

    texts = ['variable "extra_packages" {\n  type = list(string)\n  default = ["ceph-common"]\n}\n',
             'variable "extra_packages" {\n  default = ["ceph-common", "jq"]\n}\nlocals {\n  y = "${var.a} hi"\n}\n']
    want = [hcl.loads(t) for t in texts]
    wrong: list = []

    def parse(i: int) -> None:
        for _ in range(200):
            got = hcl.loads(texts[i])
            if got != want[i]:
                wrong.append(got)
                return

    threads = [threading.Thread(target=parse, args=(i % 2,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == [] and want[0]["variable"][0]["extra_packages"]["default"] == ["ceph-common"]


# ------------------------------------------------------------------------------- test-ami --channel


def test_test_ami_channel_boots_what_the_channel_holds_and_refuses_a_typo_or_two_images(tmp_path: Path, sandbox):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    ami = foreign_image("br-channel", "ceph")
    boto3.client("ssm", region_name=REGION).put_parameter(
        Name="/amibuild/br/1.35/ceph/recommended/image_id", Value=ami, Type="String", DataType="aws:ec2:image")
    done = run_cli(tmp_path, "test-ami", "--variant", "ceph", "--channel", "recommended", "--json", binary="amibuild")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["image_id"] == ami
    (instance,) = boot_instances()
    assert instance["ImageId"] == ami
    for args, words in ((["--channel", "recomended"], "--channel recomended: no such channel (did you mean "
                                                      "'recommended'?)"),
                        (["--channel", "stable"], "--channel stable: channel stable of ceph holds no image in "
                                                  "us-west-2"),
                        (["--channel", "recommended", "--ami", ami], "test-ami: give --ami ami-... (in the build "
                                                                     "region), --run-id RUN")):
        refused = run_cli(tmp_path, "test-ami", "--variant", "ceph", *args, binary="amibuild")
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.strip().splitlines()[-1].startswith(f"amibuild: error: {words}"), refused.stderr
    assert len(boot_instances()) == 1  # nothing launched for a refusal
