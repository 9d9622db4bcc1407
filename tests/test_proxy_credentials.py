"""The proxy's credentials read at boot from an SSM SecureString: `proxy { credentials_parameter }` and
`--proxy-credentials-parameter` (issue 18).

The boothook runs against a scratch root with stand-ins on PATH: curl for instance metadata (token,
mac, VPC CIDRs, region) and `aws` for `ssm get-parameter`, which answers `user:S3cret` or fails. The
user data goes to the real nodeadm (`config check`); the node group template to cfn-lint; a deploy to
the sandbox is read back (GetTemplate, DescribeStacks, the launch template's user data) and holds no
secret, only the parameter's name and the node role's policy for it. Bad names and combinations exit
2 naming the field or flag, before any AWS call.
"""

from __future__ import annotations

import ast
import base64
import json
import shutil
import subprocess
from pathlib import Path

import boto3
import pytest

from amibuild.channels import publish
from amibuild.errors import SpecError
from amibuild.handoff import nodegroup
from amibuild.handoff.userdata import decode as userdata_decode
from amibuild.handoff.userdata import render as userdata
from amibuild.pipeline import load, proxy_credentials
from amibuild.sandbox import SANDBOX_CLUSTER
from conftest import run_cli
from test_kubelet_settings import NODEADM, needs_nodeadm
from test_nodegroup_template import _cfn_lint
from test_today_nodes import REGION, _aws, fake_build, network, outputs_of, parameters_of
from test_userdata import BASH, SHELLCHECK, Node, al2023_config, al2_config, shell_of
from test_userdata_proxy import FAKE_SYSTEMCTL as SIGNAL_SYSTEMCTL

PARAMETER = "/amibuild/proxy-creds"
PROXY = "http://proxy.local:3128"
SECRET = "S3cret"
COMPOSED = f"http://user:{SECRET}@proxy.local:3128"

# Instance metadata as the boothook asks for it, and the region it reads for the SSM call.
FAKE_CURL = """#!/bin/bash
printf 'curl %s\\n' "$*" >>"$FAKE_LOG"
for arg; do last=$arg; done
case $last in
    */latest/api/token) printf 'TOKEN123' ;;
    */meta-data/mac) printf '0a:1b:2c:3d:4e:5f' ;;
    */macs/0a:1b:2c:3d:4e:5f/vpc-ipv4-cidr-blocks) printf '10.0.0.0/16' ;;
    */meta-data/placement/region) printf 'eu-west-1' ;;
    *) exit 22 ;;
esac
"""
# The AWS CLI: records its arguments, prints $FAKE_VALUE as `--output text` would, or fails as the CLI does
# when the role may not read the parameter.
FAKE_AWS = """#!/bin/bash
printf 'aws %s\\n' "$*" >>"$FAKE_LOG"
if [[ -n ${FAKE_FAIL:-} ]]; then
    echo 'An error occurred (AccessDeniedException) when calling the GetParameter operation' >&2
    exit 254
fi
printf '%s\\n' "$FAKE_VALUE"
"""


class CredentialNode(Node):
    """`Node` with the metadata stand-in answering the region, an `aws` stand-in, chmod and touch."""

    def __init__(self, tmp_path: Path, value: str = f"user:{SECRET}", fail: bool = False) -> None:
        super().__init__(tmp_path)
        for name, text in (("curl", FAKE_CURL), ("aws", FAKE_AWS)):
            (self.bin / name).write_text(text)
            (self.bin / name).chmod(0o755)
        for tool in ("chmod", "touch"):
            (self.bin / tool).symlink_to(shutil.which(tool))
        self.value, self.fail = value, fail

    def run(self, hook: str, active: str = "") -> subprocess.CompletedProcess[str]:
        script = self.root.parent / "boothook.sh"
        script.write_text(hook)
        env = {"PATH": str(self.bin), "AMIBUILD_ROOT": str(self.root), "FAKE_LOG": str(self.log),
               "FAKE_ACTIVE": active, "FAKE_VALUE": self.value, "FAKE_FAIL": "1" if self.fail else ""}
        return subprocess.run([BASH, str(script)], env=env, capture_output=True, text=True, timeout=20, check=False)

    def mode(self, path: str) -> int:
        return (self.root / path).stat().st_mode & 0o777


def with_parameter(make, **changes):
    return make(proxy=PROXY, proxy_credentials_parameter=PARAMETER, **changes)


def parts_of(cfg) -> list[userdata_decode.Part]:
    return userdata_decode.decode(userdata.render_userdata(cfg).encode())


# ------------------------------------------------------------------------------------ the boothook


@pytest.mark.parametrize("make, dropins", [(al2_config, ("containerd", "docker", "kubelet")),
                                           (al2023_config, ("containerd", "kubelet", "nodeadm-config", "nodeadm-run"))])
def test_boothook_reads_the_secure_string_and_writes_the_composed_proxy_into_private_files(tmp_path, make, dropins):
    node = CredentialNode(tmp_path)
    (node.root / "etc" / "dnf" / "dnf.conf").write_text("[main]\nbest=True\n")
    (node.root / "etc" / "environment").write_text("LANG=en_US.UTF-8\n")
    (node.root / "etc" / "environment").chmod(0o644)
    document = userdata.render_userdata(with_parameter(make))

    run = node.run(shell_of(userdata_decode.decode(document.encode())[0]))

    assert run.returncode == 0, run.stderr
    assert SECRET not in document and PARAMETER in document
    calls = node.log.read_text().splitlines()
    assert ("aws ssm get-parameter --with-decryption --name /amibuild/proxy-creds --region eu-west-1 "
            "--query Parameter.Value --output text") in calls
    # the region came from instance metadata with the IMDSv2 token, before the SSM call
    region_call = next(i for i, line in enumerate(calls) if line.endswith("/meta-data/placement/region"))
    assert "X-aws-ec2-metadata-token: TOKEN123" in calls[region_call]
    assert region_call < next(i for i, line in enumerate(calls) if line.startswith("aws "))
    environment = node.read("etc/environment")
    assert f"HTTPS_PROXY={COMPOSED}\n" in environment and f"http_proxy={COMPOSED}\n" in environment
    assert environment.startswith("LANG=en_US.UTF-8\n")
    assert node.mode("etc/environment") == 0o600
    assert node.read("etc/dnf/dnf.conf") == f"[main]\nproxy={COMPOSED}\nbest=True\n"
    assert node.mode("etc/dnf/dnf.conf") == 0o600
    for unit in dropins:
        path = f"etc/systemd/system/{unit}.service.d/http-proxy.conf"
        assert f'Environment="HTTPS_PROXY={COMPOSED}"\n' in node.read(path)
        assert node.mode(path) == 0o600
    assert SECRET not in run.stdout + run.stderr


def test_boothook_doubles_a_percent_of_the_secret_in_systemd_drop_ins_only(tmp_path):
    node = CredentialNode(tmp_path, value="user:p%40ss")

    run = node.run(shell_of(parts_of(with_parameter(al2023_config))[0]))

    assert run.returncode == 0, run.stderr
    assert "HTTPS_PROXY=http://user:p%40ss@proxy.local:3128\n" in node.read("etc/environment")
    assert 'Environment="HTTPS_PROXY=http://user:p%%40ss@proxy.local:3128"\n' in node.read(
        "etc/systemd/system/kubelet.service.d/http-proxy.conf")


@pytest.mark.parametrize("fail, value, says", [
    (True, "", "cannot read the proxy credentials from SSM parameter /amibuild/proxy-creds in eu-west-1"),
    (False, "no-colon-here", "does not hold user:password"),
    (False, "user:pa ss", "does not hold user:password"),
    (False, "user:$(reboot)", "does not hold user:password"),
    (False, "user:a'b", "does not hold user:password"),
])
def test_boothook_fails_closed_with_one_line_and_writes_no_proxy_setting(tmp_path, fail, value, says):
    node = CredentialNode(tmp_path, value=value, fail=fail)
    (node.root / "etc" / "dnf" / "dnf.conf").write_text("[main]\nbest=True\n")

    run = node.run(shell_of(parts_of(with_parameter(al2023_config))[0]))

    assert run.returncode != 0
    assert f"amibuild: error: {'' if fail else 'SSM parameter /amibuild/proxy-creds '}" in run.stderr
    assert says in run.stderr and "no proxy setting written" in run.stderr
    assert not (node.root / "etc" / "environment").exists()
    assert not (node.root / "etc" / "systemd").exists()
    assert node.read("etc/dnf/dnf.conf") == "[main]\nbest=True\n"
    assert "systemctl" not in node.log.read_text()


def test_without_a_parameter_the_boothook_reads_nothing_from_ssm_and_is_unchanged():
    hook = shell_of(parts_of(al2_config())[0])

    assert "aws ssm" not in hook and "chmod" not in hook and "@CREDENTIALS" not in hook


def test_al2_bootstrap_and_cfn_signal_use_the_proxy_the_boothook_composed(tmp_path):
    node = CredentialNode(tmp_path)
    boothook, script = (shell_of(p) for p in parts_of(with_parameter(al2_config)))
    for path in ("etc/eks/bootstrap.sh", "opt/aws/bin/cfn-signal"):
        (node.root / path).parent.mkdir(parents=True, exist_ok=True)
        (node.root / path).write_text('#!/bin/bash\nprintf \'%s %s\\n\' "${0##*/}" "$*" >>"$FAKE_LOG"\n')
        (node.root / path).chmod(0o755)

    assert node.run(boothook).returncode == 0
    local = script.replace("/etc/", f"{node.root}/etc/").replace("/opt/aws/", f"{node.root}/opt/aws/")
    run = node.run(local)

    assert run.returncode == 0, run.stderr
    assert SECRET not in script
    assert f"cfn-signal --exit-code 0 --stack prod-eu-nodes --resource NodeGroup --region eu-west-1 " \
           f"--https-proxy {COMPOSED}" in node.log.read_text()


def test_al2_node_whose_boothook_could_not_read_the_credentials_does_not_bootstrap_and_signals_failure(tmp_path):
    node = CredentialNode(tmp_path, fail=True)
    boothook, script = (shell_of(p) for p in parts_of(with_parameter(al2_config)))
    for path in ("etc/eks/bootstrap.sh", "opt/aws/bin/cfn-signal"):
        (node.root / path).parent.mkdir(parents=True, exist_ok=True)
        (node.root / path).write_text('#!/bin/bash\nprintf \'%s %s\\n\' "${0##*/}" "$*" >>"$FAKE_LOG"\n')
        (node.root / path).chmod(0o755)
    (node.root / "etc" / "environment").write_text("LANG=en_US.UTF-8\n")  # the image's own, without a proxy

    assert node.run(boothook).returncode != 0
    local = script.replace("/etc/", f"{node.root}/etc/").replace("/opt/aws/", f"{node.root}/opt/aws/")
    run = node.run(local)

    assert run.returncode == 1
    assert "amibuild: error: no proxy: the boothook could not read its credentials" in run.stderr
    calls = node.log.read_text()
    assert "bootstrap.sh " not in calls
    assert "cfn-signal --exit-code 1 --stack prod-eu-nodes --resource NodeGroup --region eu-west-1" in calls


def test_al2023_signal_unit_reports_failure_at_once_when_the_boothook_wrote_no_proxy(tmp_path):
    node = CredentialNode(tmp_path)
    (node.bin / "basename").symlink_to(shutil.which("basename"))
    (node.bin / "systemctl").write_text(SIGNAL_SYSTEMCTL)  # answers for the kubelet and nodeadm-run by $KUBELET
    part = shell_of(parts_of(with_parameter(
        al2023_config, cfn_signal=userdata.CfnSignal("prod-eu-nodes", "NodeGroup", "eu-west-1")))[2])
    assert node.run(part).returncode == 0
    (node.root / "opt/aws/bin").mkdir(parents=True)
    (node.root / "opt/aws/bin/cfn-signal").write_text('#!/bin/bash\nprintf \'cfn-signal %s\\n\' "$*" >>"$FAKE_LOG"\n')
    (node.root / "opt/aws/bin/cfn-signal").chmod(0o755)
    env = {"PATH": str(node.bin), "AMIBUILD_ROOT": str(node.root), "FAKE_LOG": str(node.log)}

    # the unit's EnvironmentFile gave no HTTPS_PROXY: no waiting for a kubelet that cannot pull through the proxy
    failed = subprocess.run([BASH, str(node.root / "etc/amibuild/cfn-signal.sh")], env=env, capture_output=True,
                            text=True, timeout=20, check=False)
    sent = node.log.read_text().splitlines()[-1]
    assert "no proxy: the boothook could not read its credentials" in failed.stderr
    assert sent == "cfn-signal --exit-code 1 --stack prod-eu-nodes --resource NodeGroup --region eu-west-1"
    assert not any("is-active kubelet" in line for line in node.log.read_text().splitlines())

    # with the proxy the boothook composed, the unit waits for the kubelet and passes that proxy on
    ok = subprocess.run([BASH, str(node.root / "etc/amibuild/cfn-signal.sh")], env={
        **env, "HTTPS_PROXY": COMPOSED, "KUBELET": "active"}, capture_output=True, text=True, timeout=20,
        check=False)
    assert ok.returncode == 0, ok.stderr
    assert node.log.read_text().splitlines()[-1] == (
        "cfn-signal --exit-code 0 --stack prod-eu-nodes --resource NodeGroup --region eu-west-1 "
        f"--https-proxy {COMPOSED}")


@pytest.mark.skipif(not SHELLCHECK, reason="shellcheck is not installed")
def test_boothook_with_a_parameter_passes_shellcheck():
    for make in (al2_config, al2023_config):
        for part in parts_of(with_parameter(make, cfn_signal=userdata.CfnSignal("s", "NodeGroup", "eu-west-1"))):
            if part.content_type == "application/node.eks.aws":
                continue
            scripts = [shell_of(part)]
            if "<<'AMIBUILD_SIGNAL'\n" in part.body:  # al2023: the script the signal unit runs, too
                scripts.append(part.body.split("<<'AMIBUILD_SIGNAL'\n", 1)[1].split("\nAMIBUILD_SIGNAL\n", 1)[0] + "\n")
            for script in scripts:
                linted = subprocess.run([SHELLCHECK, "-s", "bash", "-"], input=script, text=True,
                                        capture_output=True, check=False)
                assert linted.returncode == 0, linted.stdout


@needs_nodeadm
def test_al2023_user_data_passes_nodeadm_config_check_and_its_nodeconfig_carries_no_proxy(tmp_path):
    document = userdata.render_userdata(with_parameter(
        al2023_config, cfn_signal=userdata.CfnSignal("prod-eu-nodes", "NodeGroup", "eu-west-1")))
    path = tmp_path / "userdata"
    path.write_text(document)

    check = subprocess.run([str(NODEADM), "config", "check", "--config-source", f"file://{path}"],
                           capture_output=True, text=True, timeout=60)

    assert check.returncode == 0 and "Configuration is valid" in check.stderr, check.stderr
    parts = userdata_decode.decode(document.encode())
    assert [p.content_type for p in parts] == ["text/cloud-boothook", "application/node.eks.aws", "text/x-shellscript"]
    # without the credentials the proxy would answer 407: nodeadm gets no proxy rather than a wrong one
    assert "HTTPS_PROXY" not in parts[1].body and "proxy.local" not in parts[1].body
    assert 'proxy=${HTTPS_PROXY:-}' in parts[2].body  # the signal unit reads what the boothook wrote


# ---------------------------------------------------------------------------------- values refused


@pytest.mark.parametrize("name, says", [
    ("amibuild/proxy-creds", "starting with '/'"),
    ("/amibuild/proxy-creds\n", "starting with '/'"),
    ("/amibuild//creds", "non-empty levels"),
    ("/amibuild/créds", "letters, digits"),
    ("/amibuild/proxy creds", "letters, digits"),
    ("/aws/service/x", "reserved by AWS"),
    ("/" + "a" * 2048, "SSM allows 2048"),
])
def test_parameter_names_ssm_would_refuse_are_refused(name, says):
    with pytest.raises(SpecError, match="--proxy-credentials-parameter") as raised:
        proxy_credentials.check_name(name, "--proxy-credentials-parameter")
    assert says in str(raised.value)
    assert proxy_credentials.check_name("/" + "a" * 2047, "x") == "/" + "a" * 2047


def test_node_config_refuses_a_parameter_without_a_proxy_or_beside_a_url_with_credentials():
    with pytest.raises(SpecError, match="there is no proxy: give --proxy"):
        userdata.NodeConfig(cluster_name="c", region="eu-west-1", proxy_credentials_parameter=PARAMETER)
    with pytest.raises(SpecError, match=r"--proxy http://user:\*\*\*@proxy.local:3128 carries credentials already"):
        userdata.NodeConfig(cluster_name="c", region="eu-west-1", proxy=COMPOSED, proxy_credentials_parameter=PARAMETER)


PIPELINE = """\
pipeline {{
  name    = "creds"
  regions = ["us-west-2"]
}}

variant "v" {{
  os                 = "{os}"
  kubernetes_version = "1.30"
  proxy {{
    http                  = "{proxy}"
    credentials_parameter = "{parameter}"
  }}
}}
"""


@pytest.mark.parametrize("proxy, parameter, says", [
    (PROXY, "amibuild/proxy-creds", "proxy.credentials_parameter 'amibuild/proxy-creds': an SSM parameter name"),
    (COMPOSED, PARAMETER, "proxy.credentials_parameter: proxy.http / proxy.https http://user:***@proxy.local:3128 "
                          "carries credentials already"),
    ("", PARAMETER, "proxy.credentials_parameter: names the proxy's credentials, but there is no proxy"),
])
def test_pipeline_file_refuses_a_bad_credentials_parameter_naming_the_field(tmp_path, proxy, parameter, says):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE.format(os="al2", proxy=proxy, parameter=parameter))

    result = run_cli(tmp_path, "render")

    assert result.returncode == 2, result.stderr
    assert says in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert SECRET not in result.stderr
    assert not (tmp_path / "build").exists()


def test_pipeline_credentials_parameter_leaves_the_fingerprint_and_render_json_as_they_were(tmp_path):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE.format(os="al2", proxy=PROXY, parameter=PARAMETER))
    with_it = load(tmp_path / "amibuild.hcl").variants[0]
    (tmp_path / "amibuild.hcl").write_text(PIPELINE.format(os="al2", proxy=PROXY, parameter="").replace(
        '    credentials_parameter = ""\n', ""))
    without = load(tmp_path / "amibuild.hcl").variants[0]

    assert with_it.proxy.credentials_parameter == PARAMETER and without.proxy.credentials_parameter == ""
    assert with_it.settings() == without.settings()  # what the fingerprint and render.json see


@pytest.mark.parametrize("args, says", [
    (["userdata", "--cluster", "c", "--os", "al2", "--region", "eu-west-1", "--proxy", PROXY,
      "--proxy-credentials-parameter", "creds"], "--proxy-credentials-parameter 'creds': an SSM parameter name"),
    (["userdata", "--cluster", "c", "--os", "al2", "--region", "eu-west-1", "--proxy", COMPOSED,
      "--proxy-credentials-parameter", PARAMETER], "--proxy http://user:***@proxy.local:3128 carries credentials"),
    (["userdata", "--cluster", "c", "--os", "al2", "--region", "eu-west-1",
      "--proxy-credentials-parameter", PARAMETER], "there is no proxy: give --proxy"),
    (["nodegroup-deploy", "--stack", "ng", "--proxy", PROXY, "--proxy-credentials-parameter", "/ssm/x"],
     "--proxy-credentials-parameter '/ssm/x': names starting with aws or ssm are reserved"),
    (["karpenter", "--variant", "v", "--channel", "stable", "--proxy", PROXY,
      "--proxy-credentials-parameter", "bad name"], "--proxy-credentials-parameter 'bad name'"),
])
def test_flags_refuse_a_bad_credentials_parameter_with_exit_2_before_any_aws_call(tmp_path, args, says):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE.format(os="al2", proxy=PROXY, parameter=PARAMETER))

    # no AWS endpoint at all: a call would fail differently (exit 1), not with this line
    result = run_cli(tmp_path, *args, env={"AWS_ENDPOINT_URL": "http://127.0.0.1:9"})

    assert result.returncode == 2, result.stderr
    assert says in result.stderr, result.stderr
    assert SECRET not in result.stderr + result.stdout


# ------------------------------------------------------------------------- the node group template


def test_template_gives_the_node_role_exactly_this_parameter_and_passes_cfn_lint(tmp_path):
    cfg = with_parameter(al2023_config, region=REGION,
                         cfn_signal=userdata.CfnSignal("ng", nodegroup.NODE_GROUP, REGION))
    body = nodegroup.template_json(userdata.render_userdata(cfg), node_os="al2023",
                                   proxy_credentials_parameter=PARAMETER)
    sent = tmp_path / "nodegroup.json"
    sent.write_text(body)

    assert _cfn_lint(sent) == (0, "", "")
    template = json.loads(body)
    policies = {p["PolicyName"]: p["PolicyDocument"]["Statement"]
                for p in template["Resources"][nodegroup.NODE_ROLE]["Properties"]["Policies"]}
    read, decrypt = policies[proxy_credentials.POLICY_NAME]
    assert read["Action"] == "ssm:GetParameter"
    assert read["Resource"] == {
        "Fn::Sub": "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/amibuild/proxy-creds"}
    assert decrypt["Action"] == "kms:Decrypt"
    assert decrypt["Condition"] == {"StringEquals": {"kms:ViaService": {"Fn::Sub": "ssm.${AWS::Region}.${AWS::URLSuffix}"}}}
    assert nodegroup.PROXY_CREDENTIALS not in template["Parameters"]
    assert SECRET not in body
    # without a parameter the role has its one policy, as before
    plain = json.loads(nodegroup.template_json(userdata.render_userdata(al2023_config(
        region=REGION, cfn_signal=userdata.CfnSignal("ng", nodegroup.NODE_GROUP, REGION))), node_os="al2023"))
    assert [p["PolicyName"] for p in plain["Resources"][nodegroup.NODE_ROLE]["Properties"]["Policies"]] == [
        "signal-own-stack"]


# ------------------------------------------------------------------------------ through the sandbox


def creds_channel(tmp_path: Path, os_: str = "al2023") -> None:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE.format(os=os_, proxy=PROXY, parameter=PARAMETER))
    pipeline = load(tmp_path / "amibuild.hcl")
    publish.publish_variant(_aws(), pipeline=pipeline, variant=pipeline.variants[0], amis={REGION: fake_build("v")},
                            channel="stable")


@needs_nodeadm
def test_deploy_reads_the_variants_parameter_gives_the_role_its_policy_and_writes_no_secret(sandbox, tmp_path):
    creds_channel(tmp_path)
    args = ("nodegroup-deploy", "--stack", "ng-creds", "--cluster", SANDBOX_CLUSTER, *network(sandbox),
            "--variant", "v", "--channel", "stable", "--proxy", PROXY)

    planned = run_cli(tmp_path, *args, "--dry-run")

    assert planned.returncode == 0, planned.stderr
    assert "would create" in planned.stdout
    assert f"ProxyCredentialsParameter: (new) -> '{PARAMETER}'" in planned.stdout
    assert f"the nodes would read its credentials at boot from SSM parameter {PARAMETER}" in planned.stderr
    cfn = boto3.client("cloudformation", region_name=REGION)
    assert not [s for s in cfn.list_stacks()["StackSummaries"] if s["StackName"] == "ng-creds"]

    deployed = run_cli(tmp_path, *args)

    assert deployed.returncode == 0, deployed.stderr
    assert f"the nodes read its credentials at boot from SSM parameter {PARAMETER}" in deployed.stderr
    assert proxy_credentials.POLICY_NAME in deployed.stderr
    assert "user data still carries them" not in deployed.stderr and "NoEcho" not in deployed.stderr
    template = cfn.get_template(StackName="ng-creds")["TemplateBody"]
    template = template if isinstance(template, dict) else json.loads(template)
    role = template["Resources"][nodegroup.NODE_ROLE]["Properties"]
    statements = next(p["PolicyDocument"]["Statement"] for p in role["Policies"]
                      if p["PolicyName"] == proxy_credentials.POLICY_NAME)
    assert statements[0]["Resource"]["Fn::Sub"].endswith(":parameter/amibuild/proxy-creds")
    assert nodegroup.PROXY_CREDENTIALS not in template["Parameters"]
    # the role CloudFormation made holds the policy with the ARN resolved (the emulator gives the document
    # back as a Python literal, AWS as JSON)
    role_name = outputs_of("ng-creds")["NodeInstanceRole"].rsplit("/", 1)[1]
    document = boto3.client("iam", region_name=REGION).get_role_policy(
        RoleName=role_name, PolicyName=proxy_credentials.POLICY_NAME)["PolicyDocument"]
    document = document if isinstance(document, dict) else ast.literal_eval(document)
    read, decrypt = document["Statement"]
    assert (read["Action"], read["Resource"]) == (
        "ssm:GetParameter", "arn:aws:ssm:us-west-2:123456789012:parameter/amibuild/proxy-creds")
    assert decrypt["Condition"] == {"StringEquals": {"kms:ViaService": "ssm.us-west-2.amazonaws.com"}}
    parameters = parameters_of("ng-creds")
    assert parameters["ProxyCredentialsParameter"] == PARAMETER and parameters["HttpProxy"] == PROXY
    assert nodegroup.PROXY_CREDENTIALS not in parameters
    versions = boto3.client("ec2", region_name=REGION).describe_launch_template_versions(
        LaunchTemplateId=outputs_of("ng-creds")["NodeLaunchTemplate"])["LaunchTemplateVersions"]
    user_data = base64.b64decode(versions[-1]["LaunchTemplateData"]["UserData"])
    assert PARAMETER.encode() in user_data and b"aws ssm get-parameter --with-decryption" in user_data
    path = tmp_path / "node.userdata"
    path.write_bytes(user_data)
    check = subprocess.run([str(NODEADM), "config", "check", "--config-source", f"file://{path}"],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stderr
    for text in (json.dumps(template), json.dumps(parameters), user_data.decode(), deployed.stdout, deployed.stderr):
        assert SECRET not in text

    # the stack keeps the parameter on an update that does not name it; `none` removes it with its policy
    kept = run_cli(tmp_path, "nodegroup-deploy", "--stack", "ng-creds", "--parameter", "NodeInstanceType=m5.large")
    assert kept.returncode == 0, kept.stderr
    assert parameters_of("ng-creds")["ProxyCredentialsParameter"] == PARAMETER
    removed = run_cli(tmp_path, "nodegroup-deploy", "--stack", "ng-creds", "--proxy-credentials-parameter", "none")
    assert removed.returncode == 0, removed.stderr
    assert f"changed ProxyCredentialsParameter: '{PARAMETER}' -> ''" in removed.stdout
    after = cfn.get_template(StackName="ng-creds")["TemplateBody"]
    after = after if isinstance(after, dict) else json.loads(after)
    assert [p["PolicyName"] for p in after["Resources"][nodegroup.NODE_ROLE]["Properties"]["Policies"]] == [
        "signal-own-stack"]


@pytest.mark.parametrize("os_", ["al2023", "al2"])
def test_karpenter_user_data_carries_the_boothook_and_says_what_the_node_role_needs(sandbox, tmp_path, os_):
    creds_channel(tmp_path, os_)

    result = run_cli(tmp_path, "karpenter", "--variant", "v", "--channel", "stable", "--cluster", "prod",
                     "--proxy", PROXY, "--json")

    assert result.returncode == 0, result.stderr
    manifest = json.loads(result.stdout)
    parts = userdata_decode.decode(manifest["spec"]["userData"].encode())
    assert [p.content_type for p in parts] == ["text/cloud-boothook"]
    assert f"credentials_parameter={PARAMETER}" in parts[0].body
    assert ("nodeadm-run" in parts[0].body) == (os_ == "al2023")  # the drop-ins of that OS's units
    note = manifest["metadata"]["annotations"]["amibuild/proxy-credentials"]
    assert f"ssm:GetParameter on SSM parameter {PARAMETER}" in note
    assert proxy_credentials.STATEMENT_SID in note and proxy_credentials.POLICY_NAME in note
    assert note in result.stderr
