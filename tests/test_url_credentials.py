"""Credentials inside a proxy or repository URL are written down nowhere amibuild writes or prints.

One sandbox flow with the real CLI and the real packer: build-ami (which publishes), publish to a
second channel, nodegroup-deploy --debug with the same proxy, runs --json and render. Then every
file under build/, every stream and every stack resource (template body, parameters, outputs and
launch template data) is searched for the password. The only place it may be is the nodes' user
data, which must carry it, and then the stderr notice saying so is asserted.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from amibuild import secrets
from amibuild.sandbox import SANDBOX_CLUSTER

ROOT = Path(__file__).resolve().parent.parent
REGION = "us-west-2"
PASSWORD = "S3cretPass"
PROXY = f"http://user:{PASSWORD}@proxy.local:3128"
REPO = f"https://builder:{PASSWORD}@mirror.local/el9/$basearch"

PIPELINE = f"""\
pipeline {{
  name    = "sec"
  regions = ["us-west-2"]
}}

variant "v" {{
  extra_packages = ["htop"]
  proxy {{
    http  = "{PROXY}"
    https = "{PROXY}"
  }}
  repo "mirror" {{
    baseurl = "{REPO}"
    gpgkey  = "https://mirror.local/RPM-GPG-KEY"
  }}
}}
"""


def invoke(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # A real process, not conftest.run_cli: one of the runs is --debug, and what it prints is the
    # logging a whole process gets (invoke's logging.basicConfig on an unconfigured root logger),
    # which pytest's own handlers on the root logger would change in process.
    return subprocess.run([sys.executable, "-m", "invoke", "-r", str(ROOT), *args], cwd=workdir,
                          capture_output=True, text=True, timeout=300)


def test_mask_shows_user_and_hides_password_token_and_at_signs() -> None:
    assert secrets.mask(PROXY) == "http://user:***@proxy.local:3128"
    assert secrets.mask("https://ghp_token123@github.com/o/r.git") == "https://***@github.com/o/r.git"
    assert secrets.mask("ssh://git@github.com/o/r.git") == "ssh://git@github.com/o/r.git"
    assert secrets.mask("x http://u:p@ss@h:1/y") == "x http://u:***@h:1/y"
    assert secrets.mask({"a": [PROXY]}) == {"a": ["http://user:***@proxy.local:3128"]}
    assert secrets.mask("http://proxy.local:3128") == "http://proxy.local:3128"
    known = secrets.Known()
    known.add(PROXY)
    assert known.scrub(f"proxy {PASSWORD} and user:{PASSWORD}") == "proxy *** and ***"


@pytest.mark.skipif(shutil.which("packer") is None, reason="the build runs the real packer")
def test_a_password_in_proxy_and_repo_urls_is_written_and_printed_nowhere(sandbox, tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    streams: list[str] = []

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        result = invoke(tmp_path, *args)
        shown = secrets.mask(" ".join(args))  # the command line itself holds the password, of course
        streams.extend([f"$ {shown} (stdout)\n{result.stdout}", f"$ {shown} (stderr)\n{result.stderr}"])
        assert result.returncode == 0, result.stderr
        return result

    built = run("build-ami", "--json")
    variant = json.loads(built.stdout)["variants"][0]
    ami = variant["amis"][REGION]
    # the build really went through the proxy and repository steps, with the credentials
    run_dir = next(p for p in (tmp_path / "build" / "runs").iterdir() if p.is_dir()) / "v"
    log = (run_dir / "packer.log").read_text()
    assert "configure-proxy.sh" in log and "add-repos.sh" in log
    assert "AMIBUILD_HTTP_PROXY=http://user:***@proxy.local:3128" in log
    assert "https://builder:***@mirror.local/el9/$basearch" in log
    run("publish", "--variant", "v", "--channel", "stable", "--ami", f"{REGION}={ami}")
    cluster = sandbox.cluster(REGION)
    deployed = run("--debug", "nodegroup-deploy", "--stack", "ng-sec", "--cluster", SANDBOX_CLUSTER,
                   "--vpc-id", cluster["vpc"], "--subnet", ",".join(cluster["subnets"]),
                   "--control-plane-sg", cluster["control_plane_sg"], "--variant", "v", "--channel", "stable",
                   "--proxy", PROXY)
    assert "CreateStack" in deployed.stderr  # --debug really logged the requests
    # an update without --proxy keeps the stack's proxy, credentials included (UsePreviousValue)
    updated = run("--debug", "nodegroup-deploy", "--stack", "ng-sec", "--variant", "v", "--channel", "stable",
                  "--parameter", "NodeInstanceType=m5.large")
    assert "ProxyCredentials (kept as it is)" in updated.stderr
    run("runs", "--json")
    run("render", "--json")

    files = [p for p in (tmp_path / "build").rglob("*") if p.is_file()]
    assert {"render.json", "amibuild.auto.pkrvars.hcl", "amibuild.pkr.hcl", "packer.log"} <= {p.name for p in files}
    assert any(p.parent.name == "runs" and p.suffix == ".json" for p in files), sorted(str(p) for p in files)
    for path in files:
        assert PASSWORD not in path.read_text(errors="replace"), path
    for text in streams:
        at = text.find(PASSWORD)
        assert at < 0, text[max(0, at - 1500):at + 200]
    # the credentials are marked and masked where they are named
    record = json.loads((run_dir / "render.json").read_text())
    assert record["inputs"]["proxy"]["http"] == "http://user:***@proxy.local:3128"
    hcl_text = (run_dir / "amibuild.pkr.hcl").read_text()
    assert "sensitive = true" in hcl_text

    cfn = boto3.client("cloudformation", region_name=REGION)
    assert PASSWORD not in json.dumps(cfn.get_template(StackName="ng-sec")["TemplateBody"])
    stack = cfn.describe_stacks(StackName="ng-sec")["Stacks"][0]
    assert PASSWORD not in json.dumps(stack.get("Parameters", []) + stack.get("Outputs", []), default=str)
    parameters = {p["ParameterKey"]: p.get("ParameterValue") for p in stack["Parameters"]}
    assert "ProxyCredentials" in parameters
    assert parameters["HttpProxy"] == "http://user:***@proxy.local:3128"
    assert parameters["NodeInstanceType"] == "m5.large"
    resources = cfn.describe_stack_resources(StackName="ng-sec")["StackResources"]
    template_id = next(r["PhysicalResourceId"] for r in resources if r["ResourceType"] == "AWS::EC2::LaunchTemplate")
    data = boto3.client("ec2", region_name=REGION).describe_launch_template_versions(
        LaunchTemplateId=template_id)["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    user_data = base64.b64decode(data.pop("UserData")).decode()
    assert PASSWORD not in json.dumps(data, default=str)
    # the nodes need the credentials: only the user data carries them, and stderr said so
    assert f"user:{PASSWORD}@proxy.local:3128" in user_data
    assert "user data still carries them" in deployed.stderr
    assert "NoEcho parameter ProxyCredentials" in deployed.stderr


def test_a_dry_run_create_names_the_proxy_credentials_parameter_but_never_prints_the_password(sandbox, tmp_path):
    from conftest import run_cli
    from test_today_nodes import fake_build, network

    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    planned = run_cli(tmp_path, "nodegroup-deploy", "--stack", "ng-sec", "--cluster", SANDBOX_CLUSTER, *network(sandbox),
                      "--parameter", f"NodeImageId={fake_build('v')}", "--proxy", PROXY, "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert "would set ProxyCredentials: (hidden, NoEcho)" in planned.stdout
    assert PASSWORD not in planned.stdout + planned.stderr


def test_a_password_packer_prints_with_its_commas_escaped_is_masked_in_packer_log(tmp_path: Path) -> None:
    """Packer escapes "," as %!(PACKER_COMMA) on its machine-readable stream: a password with a comma
    (a legal userinfo character) reaches packer.log in that form, and is masked in it too."""
    import io
    import os
    from types import SimpleNamespace

    from amibuild.bake.build_plan import BuildDecision
    from amibuild.bake.executor import Executor
    from amibuild.bake.packer import Packer
    from amibuild.bake.progress import Progress

    password = "S3cret,Pass"
    fake = tmp_path / "packer"
    fake.write_text("#!/bin/sh\n"
                    "if [ \"$1\" = version ]; then echo 'Packer v1.6.6'; exit 0; fi\n"
                    "echo '1796000023,,ui,message,    amazon-ebs.worker: proxy password S3cret%!(PACKER_COMMA)Pass'\n"
                    "exit 1\n")
    fake.chmod(0o755)
    directory = tmp_path / "v"
    directory.mkdir()
    item = SimpleNamespace(name="v", fingerprint="0" * 64, decision=BuildDecision.BUILD, reason="new", existing={},
                           directory=directory,
                           rendered=SimpleNamespace(secret_env={"PKR_VAR_http_proxy": f"http://user:{password}@proxy:3128"},
                                                    packer_env={}, variant=SimpleNamespace(origins={})))
    plan = SimpleNamespace(items=(item,), to_build=(item,), run_id="20261204T221600Z-abc123", regions=("us-west-2",),
                           force=False, pipeline=SimpleNamespace(build_region="us-west-2"))
    packer = Packer(str(fake), env={"PATH": os.environ["PATH"]})
    with Progress(["v"], stream=io.StringIO(), live=False) as progress:
        outcome, = Executor(plan, packer, None, provenance=lambda _: {}, progress=progress, parallel=1).build()
    assert outcome.status == "failed"
    log = (directory / "packer.log").read_text()
    assert "proxy password ***" in log, log
    assert "S3cret" not in log, log
