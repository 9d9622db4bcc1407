"""The self-managed node group template (amibuild/handoff/templates/nodegroup.yaml) and amibuild/handoff/nodegroup.py.

cfn-lint checks the YAML and the JSON amibuild sends; the interface and the rolling-update
contract are asserted on the parsed template; stacks are created in the local emulator.

What the emulator (moto 5.2.5) does with this template, as observed:

* Creation completes at once (CREATE_COMPLETE, synchronous). `CreationPolicy` and `UpdatePolicy`
  are accepted and ignored: no signal is awaited, and SignalResource answers HTTP 500 (not
  implemented). That the roll waits for each node's cfn-signal is therefore asserted on the
  template, not observed.
* The Auto Scaling group launches DesiredCapacity instances from launch template version 1.
* `AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>` resolves into the launch template's ImageId.
  It resolves the parameter's Default as well as the value passed (the value wins), so the Default
  must exist in the emulator's SSM: the main test sets both to its own parameter.
* Conditions (NodeImageId override, optional KeyName, DisableIMDSv1) and Fn::Sub in the user data
  are evaluated. Its Fn::Sub drops every "!" inside a `${!...}`, where CloudFormation drops the
  first only, so the round trip of `${!!name}` (bash's `${!name}`) is checked on the text alone.
* The role is created but `ManagedPolicyArns` are not attached (ListAttachedRolePolicies is empty);
  the policies are asserted on the template.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from amibuild.handoff import nodegroup
from amibuild.handoff.cfn_parts import load_yaml
from amibuild.handoff.userdata import render as userdata
from amibuild.handoff.userdata.kubelet import KubeletSettings
from amibuild.errors import SpecError, TemplateError
from amibuild.sandbox import SANDBOX_VPC_NAME, Sandbox, recommended_parameter

REGION = "us-west-2"
IMAGE_PARAMETER = "/amibuild/eks-workers/1.30/default/stable/image_id"
BASH = shutil.which("bash") or "/bin/bash"

# User data the way `invoke userdata` will write it for a stack: CloudFormation references for the
# cluster and the stack, and shell of its own full of ${...}.
PROXY_USER_DATA = """\
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="==AMIBUILD-USERDATA=="

--==AMIBUILD-USERDATA==
Content-Type: text/cloud-boothook

#cloud-boothook
#!/bin/bash
proxy='http://proxy.corp.example:3128'
root=${AMIBUILD_ROOT:-}
name=proxy
echo "HTTPS_PROXY=${proxy} via ${!name}" >>"${root}/etc/environment"
--==AMIBUILD-USERDATA==
Content-Type: text/x-shellscript

#!/bin/bash
status=0
/etc/eks/bootstrap.sh ${ClusterName} --kubelet-extra-args '--node-labels=team=data' || status=$?
/opt/aws/bin/cfn-signal --exit-code "$status" --stack ${AWS::StackName} --resource NodeGroup \\
    --region ${AWS::Region} --https-proxy 'http://proxy.corp.example:3128'
exit "$status"
--==AMIBUILD-USERDATA==--
"""


def resource(template: dict[str, Any], logical_id: str) -> dict[str, Any]:
    return template["Resources"][logical_id]


def launch_template_data(template: dict[str, Any]) -> dict[str, Any]:
    return resource(template, nodegroup.LAUNCH_TEMPLATE)["Properties"]["LaunchTemplateData"]


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return nodegroup.load_template()


# ---------------------------------------------------------------------------------- cfn-lint


def test_template_and_the_json_amibuild_sends_pass_cfn_lint(tmp_path: Path) -> None:
    # The JSON with amibuild's own user data is linted too: its escaping must leave no stray
    # ${...} that CloudFormation would try (and fail) to resolve.
    sent = tmp_path / "nodegroup-with-proxy.json"
    sent.write_text(nodegroup.template_json(PROXY_USER_DATA))
    assert _cfn_lint(nodegroup.TEMPLATE_PATH) == (0, "", "")
    assert _cfn_lint(sent) == (0, "", "")
    # What nodegroup-deploy sends: user data written by amibuild (no CloudFormation reference left,
    # so no Fn::Sub: W1020) for al2 with a proxy and al2023 with every setting. The parameters
    # its user data does not name (BootstrapArguments, the settings) are used by the launch
    # template's Metadata (W2001).
    for name, cfg in (("al2-proxy", userdata.NodeConfig(
            cluster_name="prod", proxy="http://proxy.corp:3128", region=REGION, kubelet_flags=("--v=2",),
            cfn_signal=userdata.CfnSignal("ng", "NodeGroup", REGION))),
            ("al2023-everything", userdata.NodeConfig(
                cluster_name="prod", os="al2023", proxy="http://proxy.corp:3128", region=REGION,
                api_server_endpoint="https://ABC.gr7.us-west-2.eks.amazonaws.com",
                certificate_authority=base64.b64encode(b"-----BEGIN CERTIFICATE-----\nx\n").decode(),
                service_cidr="10.100.0.0/16", cfn_signal=userdata.CfnSignal("ng", "NodeGroup", REGION),
                kubelet=KubeletSettings.parse(flags=["--v=2"], labels=["a=b"], taints=["k=v:NoSchedule"],
                                              max_pods=20)))):
        body = tmp_path / f"{name}.json"
        body.write_text(nodegroup.template_json(userdata.render_userdata(cfg), node_os=cfg.os))
        assert _cfn_lint(body) == (0, "", ""), name


def _cfn_lint(path: Path, *options: str) -> tuple[int, str, str]:
    # cfn-lint reads its bundled schemas and never needs the network (it only downloads with
    # --update-specs); the autouse isolated_env's tripwire proxy would fail any attempt.
    result = subprocess.run(
        # What the cfn-lint console script runs (`-m cfnlint.runner.cli` warns about runpy).
        [sys.executable, "-c", "import sys; from cfnlint.runner import main; sys.exit(main())",
         "--format", "parseable", "--regions", REGION, *options, "--", str(path)],
        check=False, capture_output=True, text=True, timeout=120,
    )
    return result.returncode, result.stdout, result.stderr


# --------------------------------------------------------------------------------- interface

CLASSIC_INTERFACE = {
    "ClusterName": "String",
    "ClusterControlPlaneSecurityGroup": "AWS::EC2::SecurityGroup::Id",
    "NodeGroupName": "String",
    "NodeImageIdSSMParam": "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>",
    "NodeImageId": "String",
    "NodeInstanceType": "String",
    "NodeAutoScalingGroupMinSize": "Number",
    "NodeAutoScalingGroupDesiredCapacity": "Number",
    "NodeAutoScalingGroupMaxSize": "Number",
    "NodeVolumeSize": "Number",
    "NodeVolumeType": "String",
    "KeyName": "String",
    "BootstrapArguments": "String",
    "DisableIMDSv1": "String",
    "VpcId": "AWS::EC2::VPC::Id",
    "Subnets": "List<AWS::EC2::Subnet::Id>",
}


@pytest.mark.parametrize(("name", "type_"), sorted(CLASSIC_INTERFACE.items()))
def test_classic_interface_parameter_has_its_type(template: dict[str, Any], name: str, type_: str) -> None:
    assert template["Parameters"][name]["Type"] == type_


def test_parameters_constant_lists_every_template_parameter(template: dict[str, Any]) -> None:
    assert set(template["Parameters"]) == nodegroup.PARAMETERS


def test_image_id_and_key_name_are_optional(template: dict[str, Any]) -> None:
    params, conditions = template["Parameters"], template["Conditions"]
    assert params["NodeImageId"]["Default"] == "" and params["KeyName"]["Default"] == ""
    assert conditions["HasNodeImageId"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "NodeImageId"}, ""]}]}
    assert conditions["HasKeyName"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "KeyName"}, ""]}]}
    data = launch_template_data(template)
    assert data["ImageId"] == {"Fn::If": ["HasNodeImageId", {"Ref": "NodeImageId"}, {"Ref": "NodeImageIdSSMParam"}]}
    assert data["KeyName"] == {"Fn::If": ["HasKeyName", {"Ref": "KeyName"}, {"Ref": "AWS::NoValue"}]}


def test_imdsv2_is_required_by_default_with_room_for_pods(template: dict[str, Any]) -> None:
    assert template["Parameters"]["DisableIMDSv1"]["Default"] == "true"
    assert template["Conditions"]["IMDSv1Disabled"] == {"Fn::Equals": [{"Ref": "DisableIMDSv1"}, "true"]}
    metadata = launch_template_data(template)["MetadataOptions"]
    assert metadata["HttpTokens"] == {"Fn::If": ["IMDSv1Disabled", "required", "optional"]}
    assert metadata["HttpPutResponseHopLimit"] == 2


# ------------------------------------------------------------------------ rolling update, signals


def test_creation_and_rolling_update_wait_for_each_node_signal(template: dict[str, Any]) -> None:
    group = resource(template, nodegroup.NODE_GROUP)
    assert group["Type"] == "AWS::AutoScaling::AutoScalingGroup"
    signal = group["CreationPolicy"]["ResourceSignal"]
    assert signal["Count"] == {"Ref": "NodeAutoScalingGroupDesiredCapacity"}
    roll = group["UpdatePolicy"]["AutoScalingRollingUpdate"]
    assert roll["WaitOnResourceSignals"] is True
    assert roll["MinSuccessfulInstancesPercent"] == 100  # one node that fails to join stops the roll
    assert roll["MaxBatchSize"] == {"Ref": "RollingUpdateMaxBatchSize"}
    assert template["Parameters"]["RollingUpdateMaxBatchSize"]["Default"] == 1
    assert roll["MinInstancesInService"] == {
        "Fn::If": ["HasMinInstancesInService", {"Ref": "RollingUpdateMinInstancesInService"},
                   {"Ref": "NodeAutoScalingGroupDesiredCapacity"}]
    }
    assert roll["PauseTime"] == signal["Timeout"] == {"Ref": "RollingUpdatePauseTime"}
    assert template["Parameters"]["RollingUpdatePauseTime"]["Default"] == "PT15M"
    assert {"HealthCheck", "ReplaceUnhealthy", "AZRebalance"} <= set(roll["SuspendProcesses"])
    # Surge by default: a new node joins before an old one goes, so MaxSize must leave room.
    params = template["Parameters"]
    assert params["NodeAutoScalingGroupMaxSize"]["Default"] > params["NodeAutoScalingGroupDesiredCapacity"]["Default"]


def test_default_user_data_bootstraps_then_signals_the_node_group(template: dict[str, Any]) -> None:
    script = launch_template_data(template)["UserData"]["Fn::Base64"]["Fn::Sub"]
    lines = script.splitlines()
    bootstrap = lines.index("/etc/eks/bootstrap.sh ${ClusterName} ${BootstrapArguments}")
    signal = next(i for i, line in enumerate(lines) if line.startswith("/opt/aws/bin/cfn-signal "))
    assert bootstrap < signal
    assert lines[signal].split()[1:] == [
        "--exit-code", '"$status"', "--stack", "${AWS::StackName}", "--resource", nodegroup.NODE_GROUP,
        "--region", "${AWS::Region}",
    ]
    assert "set -e" not in script  # cfn-signal must still run when bootstrap.sh fails
    subprocess.run([BASH, "-n"], input=script, text=True, check=True)


# ----------------------------------------------------------------------------- IAM and network


def test_node_role_has_the_worker_managed_policies(template: dict[str, Any]) -> None:
    role = resource(template, "NodeInstanceRole")["Properties"]
    principal = role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
    assert principal == {"Service": {"Fn::Sub": "ec2.${AWS::URLSuffix}"}}
    assert role["ManagedPolicyArns"] == [
        {"Fn::Sub": f"arn:${{AWS::Partition}}:iam::aws:policy/{name}"}
        for name in ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy",
                     "AmazonEC2ContainerRegistryReadOnly", "AmazonSSMManagedInstanceCore")
    ]
    profile = resource(template, "NodeInstanceProfile")["Properties"]
    assert profile["Roles"] == [{"Ref": "NodeInstanceRole"}]
    assert launch_template_data(template)["IamInstanceProfile"] == {"Arn": {"Fn::GetAtt": ["NodeInstanceProfile", "Arn"]}}


def test_security_group_rules_cover_nodes_and_control_plane(template: dict[str, Any]) -> None:
    node, plane = {"Ref": "NodeSecurityGroup"}, {"Ref": "ClusterControlPlaneSecurityGroup"}
    rules = {
        (json.dumps(r["Properties"]["SourceSecurityGroupId"]), json.dumps(r["Properties"]["GroupId"]),
         r["Properties"]["IpProtocol"], r["Properties"].get("FromPort"), r["Properties"].get("ToPort"))
        for r in template["Resources"].values() if r["Type"] == "AWS::EC2::SecurityGroupIngress"
    }
    n, p = json.dumps(node), json.dumps(plane)
    assert rules == {
        (n, n, "-1", None, None),  # node to node, everything
        (p, n, "tcp", 1025, 65535),  # control plane to kubelets and pods
        (p, n, "tcp", 443, 443),
        (n, p, "tcp", 443, 443),  # nodes to the API server
    }
    assert launch_template_data(template)["SecurityGroupIds"] == [node]


def test_cluster_ownership_tag_propagates_to_instances(template: dict[str, Any]) -> None:
    tags = resource(template, nodegroup.NODE_GROUP)["Properties"]["Tags"]
    owned = {"Key": {"Fn::Sub": "kubernetes.io/cluster/${ClusterName}"}, "Value": "owned", "PropagateAtLaunch": True}
    assert owned in tags


def test_outputs_name_role_security_group_group_and_launch_template(template: dict[str, Any]) -> None:
    assert {name: output["Value"] for name, output in template["Outputs"].items()} == {
        "NodeInstanceRole": {"Fn::GetAtt": ["NodeInstanceRole", "Arn"]},
        "NodeSecurityGroup": {"Ref": "NodeSecurityGroup"},
        "NodeAutoScalingGroup": {"Ref": nodegroup.NODE_GROUP},
        "NodeLaunchTemplate": {"Ref": nodegroup.LAUNCH_TEMPLATE},
    }


# ------------------------------------------------------------------------- loading and writing


def test_short_form_tags_read_as_their_long_forms(tmp_path: Path) -> None:
    path = tmp_path / "short.yaml"
    path.write_text(
        "Resources:\n"
        "  R:\n"
        "    Properties:\n"
        "      a: !Ref X\n"
        "      b: !GetAtt Db.Endpoint.Address\n"
        "      c: !GetAtt [Db, Arn]\n"
        "      d: !Sub ${AWS::Region}-x\n"
        "      e: !Sub ['${A}', {A: !Ref B}]\n"
        "      f: !If [C, !Base64 {'Fn::Sub': 'x'}, !Ref 'AWS::NoValue']\n"
        "      g: !Join [',', !Split [' ', !Select [0, !GetAZs '']]]\n"
        "      h: !Not [!Equals [!Ref K, '']]\n"
        "      i: !FindInMap [M, !Ref 'AWS::Region', k]\n"
        "      j: !And [!Condition C, !Or [!Condition D, !Condition E]]\n"
        "      k: !ImportValue shared-vpc\n"
        "      l: !Select [1, !Cidr ['10.0.0.0/16', 4, 8]]\n"
        "      m: 2012-10-17\n"
    )
    properties = nodegroup.load_template(path)["Resources"]["R"]["Properties"]
    assert properties == {
        "a": {"Ref": "X"},
        "b": {"Fn::GetAtt": ["Db", "Endpoint.Address"]},
        "c": {"Fn::GetAtt": ["Db", "Arn"]},
        "d": {"Fn::Sub": "${AWS::Region}-x"},
        "e": {"Fn::Sub": ["${A}", {"A": {"Ref": "B"}}]},
        "f": {"Fn::If": ["C", {"Fn::Base64": {"Fn::Sub": "x"}}, {"Ref": "AWS::NoValue"}]},
        "g": {"Fn::Join": [",", {"Fn::Split": [" ", {"Fn::Select": [0, {"Fn::GetAZs": ""}]}]}]},
        "h": {"Fn::Not": [{"Fn::Equals": [{"Ref": "K"}, ""]}]},
        "i": {"Fn::FindInMap": ["M", {"Ref": "AWS::Region"}, "k"]},
        "j": {"Fn::And": [{"Condition": "C"}, {"Fn::Or": [{"Condition": "D"}, {"Condition": "E"}]}]},
        "k": {"Fn::ImportValue": "shared-vpc"},
        "l": {"Fn::Select": [1, {"Fn::Cidr": ["10.0.0.0/16", 4, 8]}]},
        "m": "2012-10-17",  # text, as CloudFormation reads it, not a YAML 1.1 date
    }


def test_what_the_loader_keeps_beside_cfn_flip() -> None:
    # cfn-flip alone: ["Db", "A"] (the Ref lost), an AttributeError for a map, ODicts, a date, no merge key
    assert load_yaml("a: !GetAtt [Db, !Ref A]") == {"a": {"Fn::GetAtt": ["Db", {"Ref": "A"}]}}
    with pytest.raises(yaml.YAMLError, match="!GetAtt takes Resource.Attribute"):
        load_yaml("a: !GetAtt {Db: Arn}")
    with pytest.raises(yaml.YAMLError, match="found unhashable key"):
        load_yaml("? [a, b]\n: c\n")
    loaded = load_yaml("b: &b {x: !Ref X}\nd: {<<: *b, y: 2012-10-17}\n")
    assert loaded == {"b": {"x": {"Ref": "X"}}, "d": {"x": {"Ref": "X"}, "y": "2012-10-17"}}
    assert repr(loaded) == repr({"b": {"x": {"Ref": "X"}}, "d": {"x": {"Ref": "X"}, "y": "2012-10-17"}})  # plain dicts
    # strict refuses a tag that is no CloudFormation short form; lenient reads it as cfn-flip does
    with pytest.raises(yaml.YAMLError, match="could not determine a constructor for the tag '!Foo'"):
        load_yaml("a: !Foo [x, !Ref Y]\n")
    assert load_yaml("a: !Foo [x, !Ref Y]\n", lenient=True) == {"a": {"Fn::Foo": ["x", {"Ref": "Y"}]}}


@pytest.mark.parametrize("text", ["Resources: [\n", "just: text\n", "Resources: !Unknown x\n"])
def test_load_template_refuses_what_is_not_a_template(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(TemplateError, match="bad.yaml"):
        nodegroup.load_template(path)


def test_template_json_is_the_template_marked_with_the_node_os(template: dict[str, Any]) -> None:
    sent = json.loads(nodegroup.template_json())
    shipped = json.loads(json.dumps(template))  # a copy: the fixture is shared

    assert sent["Metadata"].pop("amibuild") == {"template": "nodegroup", "os": "al2"}
    assert shipped["Metadata"].pop("amibuild") == {"template": "nodegroup"}
    assert sent == shipped


def test_custom_user_data_goes_under_base64_sub_with_shell_braces_escaped(template: dict[str, Any]) -> None:
    sent = json.loads(nodegroup.template_json(PROXY_USER_DATA))
    user_data = launch_template_data(sent)["UserData"]
    text = user_data["Fn::Base64"]["Fn::Sub"]
    assert set(user_data) == {"Fn::Base64"} and set(user_data["Fn::Base64"]) == {"Fn::Sub"}
    # CloudFormation's references stay; the shell's own ${...} come back unchanged from Fn::Sub.
    assert "/etc/eks/bootstrap.sh ${ClusterName} --kubelet" in text
    assert "--stack ${AWS::StackName} --resource NodeGroup" in text and "--region ${AWS::Region}" in text
    assert 'root=${!AMIBUILD_ROOT:-}' in text
    assert 'echo "HTTPS_PROXY=${!proxy} via ${!!name}" >>"${!root}/etc/environment"' in text
    assert text.replace("${!", "${") == PROXY_USER_DATA
    # Nothing else in the template changed.
    launch_template_data(sent).pop("UserData")
    expected = json.loads(json.dumps(template))
    launch_template_data(expected).pop("UserData")
    expected["Metadata"]["amibuild"]["os"] = "al2"
    assert sent == expected


@pytest.mark.parametrize(("text", "escaped"), [
    ("${ClusterName}-${AWS::StackName}", "${ClusterName}-${AWS::StackName}"),
    ("${proxy}", "${!proxy}"),
    ("${NodeGroup}", "${!NodeGroup}"),  # a resource, not a parameter: the node's own text
    ("${!name}", "${!!name}"),  # bash indirection
    ("${a:-${b}}", "${!a:-${!b}}"),  # nested: each ${ seen once
    ("${a:-${ClusterName}}", "${!a:-${ClusterName}}"),
    ("${ ClusterName }", "${! ClusterName }"),
    ("tail ${", "tail ${!"),  # unterminated
    ("$HOME ${}", "$HOME ${!}"),
])
def test_sub_text_keeps_references_and_escapes_the_rest(text: str, escaped: str) -> None:
    assert nodegroup.sub_text(text) == escaped


@pytest.mark.parametrize(("user_data", "message"), [
    ("", "empty"),
    ("   \n", "empty"),
    ("#!/bin/bash\n/etc/eks/bootstrap.sh ${ClusterName}\n", "never runs cfn-signal"),
])
def test_template_json_refuses_user_data_that_cannot_signal(user_data: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        nodegroup.template_json(user_data)


def test_template_json_refuses_a_template_body_cloudformation_would_not_take() -> None:
    huge = PROXY_USER_DATA + "#" * nodegroup.MAX_TEMPLATE_BODY
    with pytest.raises(SpecError, match="shorten the user data"):
        nodegroup.template_json(huge)


# ------------------------------------------------------------------------------ in the emulator


def _network(ec2: Any) -> tuple[str, list[str], str]:
    """The sandbox VPC, its subnets, and a new control plane security group in it."""
    vpc = ec2.describe_vpcs(Filters=[{"Name": "tag:Name", "Values": [SANDBOX_VPC_NAME]}])["Vpcs"][0]["VpcId"]
    subnets = [s["SubnetId"] for s in ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]]
    plane = ec2.create_security_group(GroupName="eks-cluster-demo", Description="control plane", VpcId=vpc)
    return vpc, sorted(subnets), plane["GroupId"]


def _create(cfn: Any, stack: str, body: str, **parameters: str) -> dict[str, Any]:
    cfn.create_stack(
        StackName=stack,
        TemplateBody=body,
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
        Capabilities=["CAPABILITY_IAM"],
    )
    deadline = time.monotonic() + 30
    while True:
        found = cfn.describe_stacks(StackName=stack)["Stacks"][0]
        if not found["StackStatus"].endswith("_IN_PROGRESS") or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def _outputs(stack: dict[str, Any]) -> dict[str, str]:
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


def _launch_data(ec2: Any, template_id: str) -> dict[str, Any]:
    versions = ec2.describe_launch_template_versions(LaunchTemplateId=template_id)["LaunchTemplateVersions"]
    assert [v["VersionNumber"] for v in versions] == [1]
    return versions[0]["LaunchTemplateData"]


def test_stack_creates_node_group_from_an_image_parameter(sandbox: Sandbox) -> None:
    ssm, ec2 = boto3.client("ssm", region_name=REGION), boto3.client("ec2", region_name=REGION)
    cfn, autoscaling = boto3.client("cloudformation", region_name=REGION), boto3.client("autoscaling", region_name=REGION)
    image = ssm.get_parameter(Name=recommended_parameter("1.30", "al2", "x86_64"))["Parameter"]["Value"]
    ssm.put_parameter(Name=IMAGE_PARAMETER, Value=image, Type="String", DataType="aws:ec2:image")
    vpc, subnets, plane = _network(ec2)
    body = json.loads(nodegroup.template_json())
    # The emulator resolves the Default of an SSM-typed parameter too: make it ours as well.
    body["Parameters"]["NodeImageIdSSMParam"]["Default"] = IMAGE_PARAMETER

    stack = _create(
        cfn, "demo-nodes", json.dumps(body),
        ClusterName="demo", ClusterControlPlaneSecurityGroup=plane, NodeGroupName="general",
        NodeImageIdSSMParam=IMAGE_PARAMETER, VpcId=vpc, Subnets=",".join(subnets),
    )

    assert stack["StackStatus"] == "CREATE_COMPLETE", stack.get("StackStatusReason")
    outputs = _outputs(stack)
    assert set(outputs) == {"NodeInstanceRole", "NodeSecurityGroup", "NodeAutoScalingGroup", "NodeLaunchTemplate"}
    assert outputs["NodeInstanceRole"].startswith("arn:aws:iam::") and ":role/" in outputs["NodeInstanceRole"]

    data = _launch_data(ec2, outputs["NodeLaunchTemplate"])
    assert data["ImageId"] == image
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert data["SecurityGroupIds"] == [outputs["NodeSecurityGroup"]]
    assert "KeyName" not in data
    user_data = base64.b64decode(data["UserData"]).decode()
    assert "/etc/eks/bootstrap.sh demo \n" in user_data
    assert "--stack demo-nodes --resource NodeGroup --region us-west-2" in user_data

    (group,) = autoscaling.describe_auto_scaling_groups(
        AutoScalingGroupNames=[outputs["NodeAutoScalingGroup"]]
    )["AutoScalingGroups"]
    assert group["LaunchTemplate"]["LaunchTemplateId"] == outputs["NodeLaunchTemplate"]
    assert (group["MinSize"], group["DesiredCapacity"], group["MaxSize"]) == (1, 3, 4)
    assert sorted(group["VPCZoneIdentifier"].split(",")) == subnets
    assert {t["Key"]: t["Value"] for t in group["Tags"]}["kubernetes.io/cluster/demo"] == "owned"
    instances = ec2.describe_instances(InstanceIds=[i["InstanceId"] for i in group["Instances"]])
    assert {i["ImageId"] for r in instances["Reservations"] for i in r["Instances"]} == {image}

    rules = ec2.describe_security_groups(GroupIds=[plane])["SecurityGroups"][0]["IpPermissions"]
    assert [(r["FromPort"], [p["GroupId"] for p in r["UserIdGroupPairs"]]) for r in rules] == [
        (443, [outputs["NodeSecurityGroup"]])
    ]


def test_stack_takes_image_id_key_imds_and_proxy_user_data_overrides(sandbox: Sandbox) -> None:
    ssm, ec2 = boto3.client("ssm", region_name=REGION), boto3.client("ec2", region_name=REGION)
    cfn = boto3.client("cloudformation", region_name=REGION)
    # The template's Default (the public 1.30 parameter) is seeded in the sandbox; NodeImageId wins.
    image = ssm.get_parameter(Name=recommended_parameter("1.29", "al2", "x86_64"))["Parameter"]["Value"]
    vpc, subnets, plane = _network(ec2)

    stack = _create(
        cfn, "proxied-nodes", nodegroup.template_json(PROXY_USER_DATA),
        ClusterName="demo", ClusterControlPlaneSecurityGroup=plane, NodeGroupName="proxied",
        NodeImageId=image, KeyName="ops", DisableIMDSv1="false", VpcId=vpc, Subnets=",".join(subnets),
    )

    assert stack["StackStatus"] == "CREATE_COMPLETE", stack.get("StackStatusReason")
    data = _launch_data(ec2, _outputs(stack)["NodeLaunchTemplate"])
    assert (data["ImageId"], data["KeyName"], data["MetadataOptions"]["HttpTokens"]) == (image, "ops", "optional")
    user_data = base64.b64decode(data["UserData"]).decode()
    assert "/etc/eks/bootstrap.sh demo --kubelet-extra-args" in user_data
    assert "--stack proxied-nodes --resource NodeGroup" in user_data and "--region us-west-2" in user_data
    assert "root=${AMIBUILD_ROOT:-}" in user_data and '"${root}/etc/environment"' in user_data
