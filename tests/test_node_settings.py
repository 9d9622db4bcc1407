"""Node settings a node group stack keeps: an update that does not name the proxy, kubelet flags,
labels, taints or max pods keeps them (stack parameters remember them), ``none`` removes one, and
the report says each change old -> new. The launch templates `nodegroup-deploy` creates and
updates in the sandbox are read back and given to the real nodeadm (`config check`, `config dump`).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import boto3
import pytest

from amibuild.handoff.userdata import decode as userdata_decode
from amibuild.sandbox import SANDBOX_CLUSTER, seed_images
from test_kubelet_settings import NODEADM, needs_nodeadm
from conftest import run_cli
from test_today_nodes import PROXY, REGION, ceph_channel, network, outputs_of, parameters_of


def latest_user_data(stack: str) -> list[userdata_decode.Part]:
    """The parts of the newest launch template version of `stack` (the emulator leaves the Auto
    Scaling group on version 1, so the newest version is what the next node would get)."""
    template = outputs_of(stack)["NodeLaunchTemplate"]
    version = boto3.client("ec2", region_name=REGION).describe_launch_template_versions(
        LaunchTemplateId=template, Versions=["$Latest"])["LaunchTemplateVersions"][0]
    return userdata_decode.decode(version["LaunchTemplateData"]["UserData"].encode(), stack)


def nodeadm_spec(stack: str, tmp_path: Path) -> dict:
    """nodeadm's view of the newest user data: `config check` passes, `config dump`'s spec."""
    assert NODEADM is not None
    template = outputs_of(stack)["NodeLaunchTemplate"]
    version = boto3.client("ec2", region_name=REGION).describe_launch_template_versions(
        LaunchTemplateId=template, Versions=["$Latest"])["LaunchTemplateVersions"][0]
    import base64

    path = tmp_path / f"{stack}-v{version['VersionNumber']}.userdata"
    path.write_bytes(base64.b64decode(version["LaunchTemplateData"]["UserData"]))
    source = f"file://{path}"
    checked = subprocess.run([str(NODEADM), "config", "check", "--config-source", source],
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0 and "Configuration is valid" in checked.stderr, checked.stderr
    dumped = subprocess.run([str(NODEADM), "config", "dump", "--config-source", source],
                            capture_output=True, text=True, timeout=60)
    assert dumped.returncode == 0, dumped.stderr
    return json.loads(dumped.stdout[: dumped.stdout.rindex("}") + 1])["spec"]


def test_update_without_proxy_keeps_it_and_proxy_none_removes_it_saying_so(sandbox, tmp_path) -> None:
    ceph_channel(tmp_path)
    created = run_cli(tmp_path, "nodegroup-deploy", "--stack", "ng-keep", "--cluster", SANDBOX_CLUSTER,
                     *network(sandbox), "--variant", "ceph", "--proxy", PROXY, "--node-label", "team=data")
    assert created.returncode == 0, created.stderr

    updated = run_cli(tmp_path, "nodegroup-deploy", "--stack", "ng-keep", "--variant", "ceph",
                     "--parameter", "NodeInstanceType=m5.large")

    assert updated.returncode == 0, updated.stderr
    assert "changed NodeInstanceType: 't3.medium' -> 'm5.large'" in updated.stdout
    assert "HttpProxy" not in updated.stdout  # not changed
    assert "HttpProxy" in next(line for line in updated.stderr.splitlines() if "keeping" in line)
    parts = latest_user_data("ng-keep")
    assert [p.content_type for p in parts] == ["text/cloud-boothook", "text/x-shellscript"]
    assert f"proxy={PROXY}" in parts[0].body
    assert "--node-labels=team=data" in parts[1].body
    assert parameters_of("ng-keep")["HttpProxy"] == PROXY

    removed = run_cli(tmp_path, "nodegroup-deploy", "--stack", "ng-keep", "--variant", "ceph", "--proxy", "none")

    assert removed.returncode == 0, removed.stderr
    assert f"changed HttpProxy: '{PROXY}' -> ''" in removed.stdout
    parts = latest_user_data("ng-keep")
    assert [p.content_type for p in parts] == ["text/x-shellscript"]
    assert PROXY not in parts[0].body
    assert "--node-labels=team=data" in parts[0].body  # the labels were not named: kept
    assert parameters_of("ng-keep")["HttpProxy"] == ""


@needs_nodeadm
def test_al2023_launch_templates_created_and_updated_give_nodeadm_exactly_the_settings_asked(
        sandbox, tmp_path) -> None:
    image = seed_images()[0].image_id
    created = run_cli(tmp_path, "nodegroup-deploy", "--stack", "ng-nodeadm", "--cluster", SANDBOX_CLUSTER,
                     *network(sandbox), "--os", "al2023", "--parameter", f"NodeImageId={image}",
                     "--proxy", PROXY, "--kubelet-flag=--v=2", "--node-label", "team=data",
                     "--taint", "dedicated=ceph:NoSchedule", "--max-pods", "58")
    assert created.returncode == 0, created.stderr

    spec = nodeadm_spec("ng-nodeadm", tmp_path)

    assert spec["kubelet"] == {"config": {"maxPods": 58}, "flags": [
        "--v=2", "--node-labels=team=data", "--register-with-taints=dedicated=ceph:NoSchedule"]}
    assert spec["instance"]["environment"]["default"]["HTTPS_PROXY"] == PROXY
    assert spec["instance"]["environment"]["default"]["HTTP_PROXY"] == PROXY

    # Only the labels named: the flag, taint, max pods and proxy stay.
    updated = run_cli(tmp_path, "nodegroup-deploy", "--stack", "ng-nodeadm", "--node-label", "team=ml",
                     "--node-label", "tier=gpu")

    assert updated.returncode == 0, updated.stderr
    assert "changed NodeLabels: 'team=data' -> 'team=ml,tier=gpu'" in updated.stdout
    changed = [line for line in updated.stdout.splitlines() if "changed " in line]
    assert len(changed) == 1, updated.stdout
    spec = nodeadm_spec("ng-nodeadm", tmp_path)
    assert spec["kubelet"] == {"config": {"maxPods": 58}, "flags": [
        "--v=2", "--node-labels=team=ml,tier=gpu", "--register-with-taints=dedicated=ceph:NoSchedule"]}
    assert spec["instance"]["environment"]["default"]["HTTP_PROXY"] == PROXY

    # none removes: the taints and the proxy go, the rest stays.
    cleared = run_cli(tmp_path, "nodegroup-deploy", "--stack", "ng-nodeadm", "--taint", "none", "--proxy", "none")

    assert cleared.returncode == 0, cleared.stderr
    assert "changed NodeTaints: 'dedicated=ceph:NoSchedule' -> ''" in cleared.stdout
    assert f"changed HttpProxy: '{PROXY}' -> ''" in cleared.stdout
    spec = nodeadm_spec("ng-nodeadm", tmp_path)
    assert spec["kubelet"] == {"config": {"maxPods": 58}, "flags": ["--v=2", "--node-labels=team=ml,tier=gpu"]}
    assert "environment" not in spec["instance"]


@pytest.mark.parametrize(("args", "named"), [
    pytest.param(["--parameter", "BootstrapArguments=--kubelet-extra-args '--node-labels=ceph=yes'"],
                 "give --kubelet-flag, --node-label, --taint or --max-pods", id="bootstrap arguments"),
    pytest.param(["--kubelet-flag=--node-labels=a=b --max-pods=9"], "--kubelet-flag", id="flag with a space"),
    pytest.param(["--parameter", "HttpProxy=http://p:1"], "set it with --proxy", id="setting as a parameter"),
])
def test_al2023_stack_refuses_what_its_nodes_would_not_get_and_changes_nothing(sandbox, tmp_path, args,
                                                                              named) -> None:
    image = seed_images()[0].image_id
    created = run_cli(tmp_path, "nodegroup-deploy", "--stack", "ng-refuse", "--cluster", SANDBOX_CLUSTER,
                     *network(sandbox), "--os", "al2023", "--parameter", f"NodeImageId={image}")
    assert created.returncode == 0, created.stderr
    before = parameters_of("ng-refuse")

    refused = run_cli(tmp_path, "nodegroup-deploy", "--stack", "ng-refuse", *args)

    assert refused.returncode == 2, refused.stdout
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], refused.stderr
    assert parameters_of("ng-refuse") == before


# ------------------------------------------------------------------------------ decode-userdata


SUB_USER_DATA = """#!/bin/bash
root=${AMIBUILD_ROOT:-}
token=$(curl -s http://169.254.169.254/latest/api/token)
echo "${token}" >"${root}/tmp/t"
/etc/eks/bootstrap.sh ${ClusterName} ${BootstrapArguments}
/opt/aws/bin/cfn-signal --stack ${AWS::StackName} --resource NodeGroup --region ${AWS::Region}
"""


def test_decode_reads_sub_text_as_the_node_gets_it_and_names_references_it_cannot_fill() -> None:
    from amibuild.handoff import nodegroup

    template = nodegroup.template_json(SUB_USER_DATA)
    assert "${!token}" in template  # what CloudFormation holds

    unfilled = userdata_decode.decode(template.encode(), "t.json")
    filled = userdata_decode.decode(template.encode(), "t.json", userdata_decode.stack_references(
        {"ClusterName": "prod", "BootstrapArguments": "--use-max-pods false"}, stack="ng", region=REGION))

    assert unfilled[0].body == SUB_USER_DATA  # ${! back to ${; references left as they are ...
    assert unfilled[0].via[-1] == "CloudFormation references: ClusterName BootstrapArguments AWS::StackName AWS::Region"
    assert filled[0].body == (SUB_USER_DATA.replace("${ClusterName}", "prod")
                              .replace("${BootstrapArguments}", "--use-max-pods false")
                              .replace("${AWS::StackName}", "ng").replace("${AWS::Region}", REGION))
    assert not any(layer.startswith("CloudFormation references") for layer in filled[0].via)


@pytest.mark.parametrize(("region", "partition", "suffix"), [
    ("us-west-2", "aws", "amazonaws.com"), ("cn-north-1", "aws-cn", "amazonaws.com.cn"),
    ("us-gov-west-1", "aws-us-gov", "amazonaws.com"), ("us-iso-east-1", "aws-iso", "c2s.ic.gov"),
    ("us-isob-east-1", "aws-iso-b", "sc2s.sgov.gov"), ("eusc-de-east-1", "aws-eusc", "amazonaws.eu"),
])
def test_decode_fills_partition_and_url_suffix_as_cloudformation_does_in_that_region(region, partition, suffix) -> None:
    filled = userdata_decode.stack_references({}, stack="ng", region=region)
    assert (filled["AWS::Partition"], filled["AWS::URLSuffix"]) == (partition, suffix)


def test_decode_reads_a_bare_user_data_value_as_query_prints_it() -> None:
    from amibuild.handoff import nodegroup

    template = json.loads(nodegroup.template_json(SUB_USER_DATA))
    value = template["Resources"]["NodeLaunchTemplate"]["Properties"]["LaunchTemplateData"]["UserData"]
    # aws cloudformation get-template --query TemplateBody.Resources...UserData (JSON output)
    printed = json.dumps(value, indent=4) + "\n"

    parts = userdata_decode.decode(printed.encode(), "query.json")

    assert [p.content_type for p in parts] == ["text/x-shellscript"]
    assert parts[0].body == SUB_USER_DATA


def test_decode_userdata_stack_fills_in_the_stack_parameters(sandbox, tmp_path) -> None:
    ceph_channel(tmp_path)
    created = run_cli(tmp_path, "nodegroup-deploy", "--stack", "ng-decode", "--cluster", SANDBOX_CLUSTER,
                     *network(sandbox), "--variant", "ceph", "--parameter", "BootstrapArguments=--use-max-pods false")
    assert created.returncode == 0, created.stderr

    decoded = run_cli(tmp_path, "decode-userdata", "ng-decode", "--stack", "--region", REGION)

    assert decoded.returncode == 0, decoded.stderr
    assert f"/etc/eks/bootstrap.sh {SANDBOX_CLUSTER} --use-max-pods false\n" in decoded.stdout
    assert f"--stack ng-decode --resource NodeGroup --region {REGION}" in decoded.stdout
    assert "${" not in decoded.stdout and "CloudFormation references" not in decoded.stdout
