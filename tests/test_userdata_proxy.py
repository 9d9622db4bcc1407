"""Proxy user data that matches the cluster: bootstrap.sh sees the proxy, the cluster endpoint is
bypassed only with private endpoint access, and al2023 nodes signal their stack once the kubelet runs.

Shell parts run against a scratch root with stand-ins (curl for instance metadata, systemctl,
bootstrap.sh, cfn-signal, aws) that record how they were called.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from amibuild.handoff.userdata import decode as userdata_decode
from amibuild.handoff.userdata import render as userdata
from amibuild.handoff.userdata.render import CfnSignal
from test_userdata import BASH, SHELLCHECK, Node, al2023_config, al2_config, shell_of

RECORD_ENV = """#!/bin/bash
printf '%s %s HTTPS_PROXY=%s NO_PROXY=%s\\n' "$(basename "$0")" "$*" "${HTTPS_PROXY:-}" "${NO_PROXY:-}" >>"$FAKE_LOG"
"""


def stand_in(path: Path, text: str = RECORD_ENV) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def parts_of(cfg) -> list[userdata_decode.Part]:
    return userdata_decode.decode(userdata.render_userdata(cfg).encode())


def test_al2_bootstrap_sh_runs_with_the_proxy_environment_the_boothook_wrote(tmp_path):
    node = Node(tmp_path)
    boothook, script = (shell_of(p) for p in parts_of(al2_config()))
    stand_in(node.root / "etc/eks/bootstrap.sh")
    stand_in(node.root / "opt/aws/bin/cfn-signal")
    (node.bin / "basename").symlink_to(shutil.which("basename"))

    assert node.run(boothook).returncode == 0
    # On a node these paths are absolute; here they point into the scratch root.
    local = script.replace("/etc/", f"{node.root}/etc/").replace("/opt/aws/", f"{node.root}/opt/aws/")
    run = node.run(local)

    assert run.returncode == 0, run.stderr
    bootstrap = next(line for line in node.log.read_text().splitlines() if line.startswith("bootstrap.sh "))
    assert bootstrap.startswith("bootstrap.sh prod-eu ")
    assert "HTTPS_PROXY=http://proxy.corp.example:3128" in bootstrap
    assert "NO_PROXY=10.0.0.0/16,100.64.0.0/16,10.100.0.0/16" in bootstrap
    assert "cfn-signal --exit-code 0 --stack prod-eu-nodes" in node.log.read_text()


def test_al2_bootstrap_script_without_a_proxy_reads_no_environment_file():
    script = shell_of(parts_of(al2_config(proxy=""))[0])

    assert "/etc/environment" not in script


def test_cluster_endpoint_bypasses_the_proxy_only_with_private_endpoint_access():
    public_only = userdata.no_proxy_entries(al2_config())
    private = userdata.no_proxy_entries(al2_config(private_endpoint=True))

    assert "eu-west-1.eks.amazonaws.com" not in public_only
    assert "eks.eu-west-1.amazonaws.com" in public_only  # the EKS API itself (describe-cluster)
    assert "eu-west-1.eks.amazonaws.com" in private
    assert set(private) - set(public_only) == {"eu-west-1.eks.amazonaws.com"}


def test_private_endpoint_bypass_needs_a_region_even_with_bypass_none():
    from amibuild.errors import SpecError

    with pytest.raises(SpecError, match="--region is required"):
        userdata.NodeConfig(cluster_name="c", proxy="http://p:3128", bypass=(), private_endpoint=True)


def test_al2023_proxy_drop_ins_reach_nodeadm_but_only_services_restart(tmp_path):
    node = Node(tmp_path)
    run = node.run(shell_of(parts_of(al2023_config())[0]), active="containerd nodeadm-config")

    assert run.returncode == 0, run.stderr
    for unit in ("containerd", "kubelet", "nodeadm-config", "nodeadm-run"):
        assert "HTTPS_PROXY=http://proxy.corp.example:3128" in node.read(
            f"etc/systemd/system/{unit}.service.d/http-proxy.conf")
    restarts = [line for line in node.log.read_text().splitlines() if "restart" in line]
    assert restarts == ["systemctl --no-block restart containerd.service"]


def al2023_signalling():
    return al2023_config(cfn_signal=CfnSignal("prod-eu-nodes", "NodeGroup", "eu-west-1"))


def test_al2023_in_a_stack_is_boothook_nodeconfig_then_a_signal_part():
    parts = parts_of(al2023_signalling())

    assert [p.content_type for p in parts] == [
        "text/cloud-boothook", "application/node.eks.aws", "text/x-shellscript"]
    assert "cfn-signal" in parts[2].body


FAKE_CURL = """#!/bin/bash
for arg; do last=$arg; done
case $last in
    */latest/api/token) printf 'TOKEN123' ;;
    */meta-data/instance-id) printf 'i-0123456789abcdef0' ;;
    *) exit 22 ;;
esac
"""
FAKE_SYSTEMCTL = """#!/bin/bash
printf 'systemctl %s\\n' "$*" >>"$FAKE_LOG"
case "$1 ${3:-}" in
    "is-active kubelet.service") [[ ${KUBELET:-} == active ]] ;;
    "is-failed nodeadm-run.service") [[ ${KUBELET:-} == failed ]] ;;
esac
"""


@pytest.mark.parametrize("kubelet, status, code", [("active", "SUCCESS", "0"), ("failed", "FAILURE", "1")])
def test_al2023_signal_unit_reports_the_real_outcome(tmp_path, kubelet, status, code):
    node = Node(tmp_path)
    (node.bin / "systemctl").write_text(FAKE_SYSTEMCTL)
    stand_in(node.bin / "aws")
    (node.bin / "basename").symlink_to(shutil.which("basename"))
    (node.bin / "curl").write_text(FAKE_CURL)
    part = shell_of(parts_of(al2023_signalling())[2])

    installed = node.run(part)
    assert installed.returncode == 0, installed.stderr
    unit = node.read("etc/systemd/system/amibuild-cfn-signal.service")
    assert "After=nodeadm-run.service" in unit and "ExecStart=/bin/bash /etc/amibuild/cfn-signal.sh" in unit
    assert "systemctl --no-block start amibuild-cfn-signal.service" in node.log.read_text()

    # What the unit runs once nodeadm is done: the AL2023 image has no cfn-signal here, so the CLI.
    env = {"PATH": str(node.bin), "AMIBUILD_ROOT": str(node.root), "FAKE_LOG": str(node.log), "KUBELET": kubelet}
    signal = subprocess.run([BASH, str(node.root / "etc/amibuild/cfn-signal.sh")], env=env, capture_output=True,
                            text=True, timeout=20, check=False)
    assert signal.returncode == 0, signal.stderr
    sent = node.log.read_text().splitlines()[-1]
    assert sent.startswith("aws cloudformation signal-resource --stack-name prod-eu-nodes --logical-resource-id "
                           f"NodeGroup --unique-id i-0123456789abcdef0 --status {status} --region eu-west-1")

    # With cfn-signal installed, that is used, with the exit code and the proxy.
    stand_in(node.root / "opt/aws/bin/cfn-signal")
    subprocess.run([BASH, str(node.root / "etc/amibuild/cfn-signal.sh")], env=env, check=True, timeout=20)
    assert node.log.read_text().splitlines()[-1].startswith(
        f"cfn-signal --exit-code {code} --stack prod-eu-nodes --resource NodeGroup --region eu-west-1 "
        "--https-proxy http://proxy.corp.example:3128")


@pytest.mark.skipif(not SHELLCHECK, reason="shellcheck is not installed")
def test_al2023_signal_part_and_the_script_it_installs_pass_shellcheck(tmp_path):
    part = shell_of(parts_of(al2023_signalling())[2])
    inner = part.split("<<'AMIBUILD_SIGNAL'\n", 1)[1].split("\nAMIBUILD_SIGNAL\n", 1)[0] + "\n"

    for script in (part, inner):
        linted = subprocess.run([SHELLCHECK, "-s", "bash", "-"], input=script, text=True, capture_output=True,
                                check=False)
        assert linted.returncode == 0, linted.stdout


def test_k8s_manifests_say_how_to_restart_aws_node_and_kube_proxy_after_a_change():
    text = userdata.k8s_manifests(al2_config(), "10.0.0.0/16")

    assert "#   kubectl -n kube-system rollout restart daemonset aws-node kube-proxy\n" in text
