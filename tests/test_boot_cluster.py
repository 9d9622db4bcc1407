"""The boot test's user data and its node in a cluster; the sandbox's stand-ins go with their images.

The test instance gets the node group's user data (`amibuild.handoff.testnode`), read back by the
real nodeadm (../shared/nodeadm/) and checked against the real bootstrap.sh (../shared/upstream/).
`test-ami --cluster` runs in process against the sandbox, whose cluster API
(`amibuild.sandbox.kubeapi`) registers an instance that joins it as a Node, read through the real
`kubernetes` client and the kubeconfig the sandbox writes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import boto3
import pytest

from amibuild.handoff import testnode
from amibuild.handoff.cluster import cluster_facts
from amibuild.handoff.userdata import decode
from amibuild.imagetest import kube
from amibuild.pipeline import imagetests, load
from amibuild.sandbox import SANDBOX_CLUSTER
from conftest import run_cli, shared_dir, NODEADM, needs_nodeadm

REGION = "us-west-2"


STANDIN_NEEDS = ("packer and root are needed: the image's stand-in is an overlay of / in a private mount "
                 "namespace with a build user, which an unprivileged user namespace cannot give (no overlay "
                 "of / there, one uid mapped)")
SHARED = shared_dir("upstream")
NEEDS_BUILD = pytest.mark.skipif(shutil.which("packer") is None or os.geteuid() != 0,
                                 reason=STANDIN_NEEDS)

PIPELINE = """\
pipeline {
  name    = "bc"
  regions = ["us-west-2"]
  copy_to = ["eu-west-1"]
}

variant "ceph" {
  extra_packages = ["ceph-common"]
  # the sandbox's stand-in is this machine, not an EKS image
  test "kubelet" {
    enabled = false
    reason  = "sandbox stand-in"
  }
  test "containerd" {
    enabled = false
    reason  = "sandbox stand-in"
  }
  test "nodeadm" {
    enabled = false
    reason  = "sandbox stand-in"
  }
  test "unpigz" {
    enabled = false
    reason  = "sandbox stand-in"
  }
  test "nodeadm-config" {
    enabled = false
    reason  = "sandbox stand-in: no instance metadata"
  }
}
"""


def nodeadm(command: str, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(NODEADM), "config", command, "--config-source", f"file://{path}"],
                          capture_output=True, text=True, timeout=60)


# ------------------------------------------------------------------------------- user data, real consumers


@needs_nodeadm
def test_without_a_cluster_the_al2023_user_data_is_a_nodeconfig_nodeadm_accepts(tmp_path: Path):
    path = tmp_path / "userdata"
    path.write_text(testnode.boot_test_userdata("al2023", region=REGION))
    checked = nodeadm("check", path)
    assert checked.returncode == 0 and "Configuration is valid" in checked.stdout + checked.stderr, checked.stderr
    dumped = nodeadm("dump", path)  # the check-only cluster, which resolves nowhere, with the test taint
    assert dumped.returncode == 0 and testnode.CHECK_ONLY_CLUSTER in dumped.stdout, dumped.stderr
    assert testnode.CHECK_ONLY_ENDPOINT in dumped.stdout and kube.TEST_TAINT in dumped.stdout


@needs_nodeadm
def test_with_a_cluster_the_user_data_is_the_node_groups_with_the_test_taint(tmp_path: Path, sandbox):
    raw = boto3.client("eks", region_name=REGION).describe_cluster(name=SANDBOX_CLUSTER)["cluster"]
    facts = cluster_facts(raw)
    path = tmp_path / "userdata"
    path.write_text(testnode.boot_test_userdata("al2023", region=REGION, cluster=facts))
    checked = nodeadm("check", path)
    assert checked.returncode == 0, checked.stderr
    dumped = nodeadm("dump", path)
    assert dumped.returncode == 0, dumped.stderr
    assert f"--register-with-taints={kube.TEST_TAINT}" in dumped.stdout
    assert facts.endpoint in dumped.stdout and SANDBOX_CLUSTER in dumped.stdout
    al2 = testnode.boot_test_userdata("al2", region=REGION, cluster=facts)
    (part,) = decode.decode(al2.encode(), "al2")
    assert f"/etc/eks/bootstrap.sh {SANDBOX_CLUSTER}" in part.body and kube.TEST_TAINT in part.body
    # without a cluster an AL2 node runs no bootstrap.sh at all
    check_only = testnode.boot_test_userdata("al2", region=REGION)
    assert [line for line in check_only.splitlines() if not line.startswith("#")] == ["exit 0"]


def real_bootstrap(tmp_path: Path) -> Path:
    tarball = SHARED / "upstream" / "amazon-eks-ami" / "amazon-eks-ami-v20240615.tar.gz" if SHARED else None
    if tarball is None or not tarball.is_file():
        pytest.skip("../shared/upstream/amazon-eks-ami (the real bootstrap.sh) is not here")
    with tarfile.open(tarball) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith("templates/al2/runtime/bootstrap.sh"))
        data = archive.extractfile(member).read()
    path = tmp_path / "bootstrap.sh"
    path.write_bytes(data)
    path.chmod(0o755)
    return path


@pytest.mark.skipif(os.geteuid() != 0, reason="bootstrap.sh refuses to run but as root")
def test_the_al2_boot_check_asks_the_real_bootstrap_sh_for_every_option_amibuild_passes(tmp_path: Path):
    (tmp_path / "amibuild.hcl").write_text('variant "old" {\n os = "al2"\n kubernetes_version = "1.30"\n}\n')
    (check,) = [c for c in imagetests.check_set(load(tmp_path / "amibuild.hcl").variants[0], stage="boot").checks
                if c.name == "bootstrap-options"]
    real = real_bootstrap(tmp_path)

    def run(bootstrap: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", check.command.replace("/etc/eks/bootstrap.sh", str(bootstrap))],
                              capture_output=True, text=True, timeout=60)

    assert run(real).returncode == 0, run(real).stdout
    older = tmp_path / "older.sh"  # a bootstrap.sh that does not know --use-max-pods
    older.write_text("\n".join(line for line in real.read_text().splitlines() if not line.strip().startswith('echo "--use-max-pods')))
    older.chmod(0o755)
    refused = run(older)
    assert refused.returncode == 1 and "bootstrap.sh does not take: --use-max-pods" in refused.stdout
    assert run(tmp_path / "absent.sh").returncode == 127  # not there: on the stand-in, not testable here


def test_boot_only_checks_are_not_rendered_into_the_build(tmp_path: Path):
    (tmp_path / "amibuild.hcl").write_text('variant "v" {\n}\n')
    variant = load(tmp_path / "amibuild.hcl").variants[0]
    assert "nodeadm-config" not in [c.name for c in imagetests.check_set(variant).checks]
    assert "nodeadm-config" in [c.name for c in imagetests.check_set(variant, stage="boot").checks]
    (tmp_path / "amibuild.hcl").write_text('variant "v" {\n test "nodeadm-config" {\n  enabled = false\n'
                                           '  reason = "no metadata"\n }\n}\n')
    variant = load(tmp_path / "amibuild.hcl").variants[0]
    checks = imagetests.check_set(variant, stage="boot")
    assert "nodeadm-config" not in [c.name for c in checks.checks] and [d.name for d in checks.disabled] == ["nodeadm-config"]


# ------------------------------------------------------------------------------- the node, pure parts


def node(name: str, provider: str, ready: str = "True", taints=(("amibuild.io/test", "true", "NoSchedule"),),
         reason: str = "") -> dict:
    return {"metadata": {"name": name}, "spec": {"providerID": provider, "taints": [
        {"key": k, "value": v, "effect": e} for k, v, e in taints]},
        "status": {"conditions": [{"type": "MemoryPressure", "status": "False"},
                                  {"type": "Ready", "status": ready, "reason": reason}]}}


def test_the_test_node_is_found_by_provider_id_or_private_dns_name_and_judged():
    taint = kube.Taint.parse(kube.TEST_TAINT)
    nodes = [kube.node_facts(node("ip-10-0-0-1.ec2.internal", "aws:///us-west-2a/i-0aaa")),
             kube.node_facts(node("ip-10-0-0-2.ec2.internal", "")),
             kube.node_facts(node("ip-10-0-0-3.ec2.internal", "aws:///us-west-2a/i-0ccc", ready="False",
                                  reason="KubeletNotReady"))]
    assert kube.node_of(nodes, "i-0aaa").name == "ip-10-0-0-1.ec2.internal"
    assert kube.node_of(nodes, "i-0bbb", "ip-10-0-0-2.ec2.internal").name == "ip-10-0-0-2.ec2.internal"
    assert kube.node_of(nodes, "i-0aa") is None  # a prefix of another id is not it
    assert kube.judge(None, taint) is kube.NodeState.ABSENT
    assert kube.judge(nodes[0], taint) is kube.NodeState.READY
    assert kube.judge(nodes[2], taint) is kube.NodeState.NOT_READY and nodes[2].reason == "KubeletNotReady"
    bare = kube.node_facts(node("n", "aws:///z/i-1", taints=()))
    assert kube.judge(bare, taint) is kube.NodeState.UNTAINTED


def test_what_the_test_node_s_kubelet_writes_in_its_ready_condition_is_shown_escaped():
    """The Ready condition's reason and message come from the kubelet of the image under test; they
    end up in the boot test's error, which `amibuild: error: ...` prints as it is."""
    said = kube.node_facts(node("n", "aws:///z/i-1", ready="False", reason="KubeletNotReady\x1b]0;owned\x07\x1b[2J"))
    assert "\x1b" not in said.reason and said.reason == "KubeletNotReady\\x1b]0;owned\\x07\\x1b[2J"


def test_the_kubeconfig_context_is_the_clusters_else_the_current_one():
    contexts = [{"name": "dev", "context": {"cluster": "dev"}},
                {"name": "arn:aws:eks:us-west-2:111122223333:cluster/prod", "context": {"cluster": "x"}},
                {"name": "mine", "context": {"cluster": "arn:aws:eks:eu-west-1:111122223333:cluster/staging"}}]
    assert kube.pick_context(contexts, "dev", "prod") == "arn:aws:eks:us-west-2:111122223333:cluster/prod"
    assert kube.pick_context(contexts, "dev", "staging") == "mine"
    assert kube.pick_context(contexts, "dev", "other") == "dev"


def test_cluster_without_the_kubernetes_client_exits_2_naming_the_extra_before_any_aws_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # what an amibuild without the extra has
    done = run_cli(tmp_path, "test-ami", "--variant", "ceph", "--ami", "ami-0123456789abcdef0", "--cluster", "c",
                   binary="amibuild")  # no emulator: any AWS call would fail on the tripwire proxy instead
    assert done.returncode == 2, done.stderr
    assert "--cluster needs the Kubernetes client" in done.stderr and "amibuild[cluster]" in done.stderr


# ------------------------------------------------------------------------------- against the sandbox


@pytest.fixture
def built(tmp_path: Path, sandbox) -> tuple[Path, dict]:
    """A ceph image built in the sandbox (stand-in kept), not published: (workdir, its amis)."""
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    done = run_cli(tmp_path, "build-ami", "--no-publish", "--json", binary="amibuild")
    assert done.returncode == 0, done.stderr
    return tmp_path, json.loads(done.stdout)["variants"][0]


def boot_instances() -> list[dict]:
    ec2 = boto3.client("ec2", region_name=REGION)
    return [i for r in ec2.describe_instances(Filters=[{"Name": "tag:amibuild:purpose", "Values": ["boot-test"]}])
            ["Reservations"] for i in r["Instances"]]


def cluster_nodes(sandbox) -> list[kube.NodeFacts]:
    return kube.Nodes(SANDBOX_CLUSTER, kubeconfig=str(sandbox.kubeconfig)).list()


@NEEDS_BUILD
def test_test_ami_with_a_cluster_joins_it_tainted_reports_ready_seconds_and_removes_the_node(built, sandbox):
    workdir, variant = built
    ami = variant["amis"][REGION]
    assert cluster_nodes(sandbox) == []
    done = run_cli(workdir, "test-ami", "--variant", "ceph", "--ami", ami, "--cluster", SANDBOX_CLUSTER, "--json",
                   binary="amibuild")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["result"] == "passed" and result["tag"] == "passed" and result["terminated"]
    (instance,) = boot_instances()
    assert result["node"] == instance["PrivateDnsName"] and result["cluster"] == SANDBOX_CLUSTER
    assert result["node_ready_seconds"] is not None and result["node_ready_seconds"] >= 0
    assert result["node_removed"] is True
    assert f"node {result['node']} joined {SANDBOX_CLUSTER}, Ready with {kube.TEST_TAINT}" in done.stderr
    # the instance had the node group's user data with the taint, and the Node is gone from the cluster
    raw = boto3.client("ec2", region_name=REGION).describe_instance_attribute(
        InstanceId=instance["InstanceId"], Attribute="userData")["UserData"]["Value"]
    text = "\n".join(p.body for p in decode.decode(raw.encode(), "instance"))
    assert f"name: {SANDBOX_CLUSTER}" in text and f"--register-with-taints={kube.TEST_TAINT}" in text
    assert instance["State"]["Name"] in ("shutting-down", "terminated") or boot_instances()[0]["State"]["Name"] in (
        "shutting-down", "terminated")
    assert [n.name for n in cluster_nodes(sandbox)] == []
    (image,) = boto3.client("ec2", region_name=REGION).describe_images(ImageIds=[ami])["Images"]
    assert {t["Key"]: t["Value"] for t in image["Tags"]}["amibuild:test"] == "passed"


@NEEDS_BUILD
def test_a_node_that_never_gets_ready_fails_the_boot_test_and_its_instance_is_terminated(built, sandbox):
    workdir, variant = built
    ami = variant["amis"][REGION]
    sandbox.nodes_ready(False)
    done = run_cli(workdir, "test-ami", "--variant", "ceph", "--ami", ami, "--cluster", SANDBOX_CLUSTER,
                   "--timeout", "2s", "--json", binary="amibuild")
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["result"] == "failed" and result["node_ready_seconds"] is None
    assert "was not Ready within 2s (KubeletNotReady: container runtime network not ready" in result["error"]
    assert {c["result"] for c in result["checks"]} == {"not run"}
    (instance,) = boot_instances()
    assert instance["State"]["Name"] in ("shutting-down", "terminated")
    assert result["node_removed"] is True and cluster_nodes(sandbox) == []
    (image,) = boto3.client("ec2", region_name=REGION).describe_images(ImageIds=[ami])["Images"]
    assert {t["Key"]: t["Value"] for t in image["Tags"]}["amibuild:test"] == "failed"


@NEEDS_BUILD
def test_a_stand_in_goes_with_the_last_copy_of_its_image_and_with_a_reset(built, sandbox):
    workdir, variant = built
    (fingerprint,) = {t["Value"] for t in boto3.client("ec2", region_name=REGION).describe_images(
        ImageIds=[variant["amis"][REGION]])["Images"][0]["Tags"] if t["Key"] == "amibuild:fingerprint"}
    standin = sandbox.images / fingerprint
    assert standin.is_dir()
    boto3.client("ec2", region_name=REGION).deregister_image(ImageId=variant["amis"][REGION])
    assert standin.is_dir()  # its copy in eu-west-1 is still there, and may be booted
    boto3.client("ec2", region_name="eu-west-1").deregister_image(ImageId=variant["amis"]["eu-west-1"])
    assert not standin.exists()
    # a reset drops every image: their stand-ins go too
    again = run_cli(workdir, "build-ami", "--no-publish", "--force", "--json", binary="amibuild")
    assert again.returncode == 0, again.stderr
    assert standin.is_dir()
    sandbox.reset()
    assert list(sandbox.images.iterdir()) == []


def test_a_stopped_sandbox_leaves_neither_its_stand_ins_nor_its_kubeconfig(isolated_env, monkeypatch):
    from amibuild.sandbox import Sandbox

    monkeypatch.delenv("AMIBUILD_SANDBOX_IMAGES", raising=False)
    with Sandbox() as own:
        env = own.env()
        images, kubeconfig = Path(env["AMIBUILD_SANDBOX_IMAGES"]), Path(env["KUBECONFIG"])
        images.mkdir(parents=True, exist_ok=True)
        (images / "f").mkdir()
        assert kubeconfig.is_file() and SANDBOX_CLUSTER in kubeconfig.read_text()
    assert not images.exists() and not kubeconfig.exists()


def test_an_image_the_sandbox_has_no_stand_in_of_is_untested_not_passed_nor_failed(tmp_path: Path, sandbox):
    from amibuild.sandbox import seed_images

    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    ec2 = boto3.client("ec2", region_name=REGION)
    instance = ec2.run_instances(ImageId=seed_images()[0].image_id, MinCount=1, MaxCount=1, InstanceType="m5.large")
    ami = ec2.create_image(InstanceId=instance["Instances"][0]["InstanceId"], Name="bc-ceph-foreign")["ImageId"]
    ec2.create_tags(Resources=[ami], Tags=[{"Key": "amibuild:variant", "Value": "ceph"},
                                           {"Key": "amibuild:fingerprint", "Value": "0" * 64}])
    done = run_cli(tmp_path, "test-ami", "--variant", "ceph", "--ami", ami, "--json", binary="amibuild")
    assert done.returncode == 0, done.stderr  # nothing failed; the tag keeps gated channels closed
    result = json.loads(done.stdout)
    # the emulator's agent answers each check as SSM answers a command it could not deliver: not tested
    assert result["result"] == "not tested" and result["tag"] == "untested" and result["terminated"]
    assert result["untestable"] == ["package-ceph-common", "no-credentials", "disk-free", "no-nerdctl0", "dkms",
                                    "clean-machine-id", "clean-authorized-keys"]
    assert all("Undeliverable" in c["reason"] and "has no stand-in here" in c["reason"] for c in result["checks"])
    (image,) = ec2.describe_images(ImageIds=[ami])["Images"]
    assert {t["Key"]: t["Value"] for t in image["Tags"]}["amibuild:test"] == "untested"
    # and a channel that requires tested does not take it
    (tmp_path / "amibuild.hcl").write_text(PIPELINE.replace('  copy_to = ["eu-west-1"]\n', "")
                                           + 'channel "stable" {\n  requires = ["tested"]\n}\n')
    refused = run_cli(tmp_path, "publish", "--variant", "ceph", "--ami", f"{REGION}={ami}", "--channel", "stable",
                      binary="amibuild")
    # the gate reads the signed statements: amibuild never built this image, so it has no provenance
    assert refused.returncode == 1 and "requires tested" in refused.stderr and "no valid provenance" in refused.stderr


@pytest.mark.parametrize("body, complaint", [
    ('role = "r"', "role goes with instance_profile"),
    ('instance_profile = "p"\n    role = "arn:aws:iam::123456789012:role/r"', "not its ARN"),
])
def test_a_bad_test_role_is_refused_at_load_naming_the_field(tmp_path: Path, body: str, complaint: str):
    from amibuild.errors import SpecError

    (tmp_path / "amibuild.hcl").write_text(f'pipeline {{\n  name = "p"\n  test {{\n    {body}\n  }}\n}}\nvariant "v" {{\n}}\n')
    with pytest.raises(SpecError) as caught:
        load(tmp_path / "amibuild.hcl")
    assert complaint in str(caught.value) and "pipeline.test.role" in str(caught.value)


def foreign_image(name: str) -> str:
    """An image with amibuild's tags that this sandbox has no stand-in of (no packer build needed)."""
    from amibuild.sandbox import seed_images

    ec2 = boto3.client("ec2", region_name=REGION)
    instance = ec2.run_instances(ImageId=seed_images()[0].image_id, MinCount=1, MaxCount=1, InstanceType="m5.large")
    ami = ec2.create_image(InstanceId=instance["Instances"][0]["InstanceId"], Name=name)["ImageId"]
    ec2.create_tags(Resources=[ami], Tags=[{"Key": "amibuild:variant", "Value": "ceph"}])
    return ami


def test_cluster_without_a_kubeconfig_exits_2_before_any_aws_work(tmp_path: Path):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    done = run_cli(tmp_path, "test-ami", "--variant", "ceph", "--ami", "ami-0123456789abcdef0", "--cluster", "prod",
                   env={"KUBECONFIG": str(tmp_path / "none")}, binary="amibuild")
    assert done.returncode == 2, done.stderr
    assert "--cluster prod: no kubeconfig" in done.stderr and "aws eks update-kubeconfig --name prod" in done.stderr


def test_a_cluster_api_that_cannot_be_read_terminates_the_instance_and_leaves_the_image_untagged(
        tmp_path: Path, sandbox):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    ami = foreign_image("bc-ceph-unreachable")
    dead = tmp_path / "kubeconfig"  # the sandbox cluster's context, at a port nothing listens on
    dead.write_text(sandbox.kubeconfig.read_text().replace(sandbox.endpoint, "http://127.0.0.1:9"))
    done = run_cli(tmp_path, "test-ami", "--variant", "ceph", "--ami", ami, "--cluster", SANDBOX_CLUSTER, "--json",
                   env={"KUBECONFIG": str(dead)}, binary="amibuild")
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["result"] == "failed" and "listing the nodes at http://127.0.0.1:9" in result["error"]
    assert result["terminated"] and result["tagged"] == [] and "says nothing about the image" in " ".join(result["notes"])
    (instance,) = boot_instances()
    assert instance["State"]["Name"] in ("shutting-down", "terminated")
    (image,) = boto3.client("ec2", region_name=REGION).describe_images(ImageIds=[ami])["Images"]
    assert "amibuild:test" not in {t["Key"] for t in image.get("Tags", [])}


def test_a_cluster_api_that_cannot_be_read_signs_no_test_statement(tmp_path: Path, sandbox):
    # the statement is what a tested gate reads: a "failed" one would speak for an image nothing was learnt about
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    ami = foreign_image("bc-ceph-unsigned")
    dead = tmp_path / "kubeconfig"
    dead.write_text(sandbox.kubeconfig.read_text().replace(sandbox.endpoint, "http://127.0.0.1:9"))
    done = run_cli(tmp_path, "test-ami", "--variant", "ceph", "--ami", ami, "--cluster", SANDBOX_CLUSTER, "--json",
                   env={"KUBECONFIG": str(dead)}, binary="amibuild")
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["says_nothing"].startswith("the cluster's API could not be read")
    assert "statement" not in result and "statement signed" not in done.stderr
    s3 = boto3.client("s3", region_name=REGION)
    stored = [o["Key"] for b in s3.list_buckets()["Buckets"]
              for o in s3.list_objects_v2(Bucket=b["Name"]).get("Contents", []) if f"/images/{ami}/test/" in o["Key"]]
    assert stored == []


def test_ctrl_c_while_waiting_for_the_node_terminates_the_instance(tmp_path: Path, sandbox):
    import signal

    from faultproxy import FaultProxy

    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    ami = foreign_image("bc-ceph-interrupted")
    with FaultProxy(sandbox.endpoint) as proxy:
        # only the cluster's API goes through the proxy: its requests carry no AWS operation name
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(sandbox.kubeconfig.read_text().replace(sandbox.endpoint, proxy.endpoint))
        held = proxy.gate({""}, count=1)
        proc = subprocess.Popen([sys.executable, "-m", "amibuild", "test-ami", "--variant", "ceph", "--ami", ami,
                                 "--cluster", SANDBOX_CLUSTER], cwd=tmp_path, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env={**os.environ, "KUBECONFIG": str(kubeconfig)})
        try:
            assert held.wait_held(timeout=60), "the boot test never asked the cluster for its nodes"
            (instance,) = boot_instances()
            assert instance["State"]["Name"] == "running"
            proc.send_signal(signal.SIGINT)
        finally:
            held.release()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "the boot test stopped and its instance was terminated" in err
    state = boto3.client("ec2", region_name=REGION).describe_instances(
        InstanceIds=[instance["InstanceId"]])["Reservations"][0]["Instances"][0]["State"]["Name"]
    assert state in ("shutting-down", "terminated")
    (image,) = boto3.client("ec2", region_name=REGION).describe_images(ImageIds=[ami])["Images"]
    assert "amibuild:test" not in {t["Key"] for t in image.get("Tags", [])}


def test_where_nothing_can_run_the_sandbox_agent_answers_undeliverable_which_reads_not_tested_with_the_reason():
    """What the stand-in cannot answer is the sandbox's to say, as an SSM outcome: never a pass, never a
    failure of the image. The command itself knows nothing of the sandbox."""
    from amibuild.aws.testing import Invocation
    from amibuild.imagetest import invocation
    from amibuild.sandbox import runcommand

    answer = runcommand.undeliverable("rehearse needs root")
    assert (answer.status, answer.details, answer.code) == ("Failed", "Undeliverable", -1)
    ran = Invocation("c-1", "i-1", answer.status, answer.code, answer.stdout, answer.stderr, answer.details)
    result = invocation.judge("kubelet", ran, invocation.Output(answer.stdout, answer.stderr), 0.1)
    assert result.verdict == imagetests.Verdict.NOT_TESTED and result.exit_status is None
    assert result.reason == "SSM command c-1: Undeliverable: amibuild sandbox: not testable here: rehearse needs root"
    assert imagetests.overall([result]) == imagetests.Verdict.NOT_TESTED  # the image: untested, not failed
    assert "stand-in" not in imagetests.check_command(imagetests.Check("kubelet", "kubelet --version"))
