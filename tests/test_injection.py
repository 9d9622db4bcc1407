"""No value is ever run as code: every string setting, with shell and HCL syntax in it, through every
road (flag, --var, vars, var-file, pipeline file) is either refused with exit-2 input errors or
carried as data — it never becomes part of a shell command, and a sandbox build runs none of it.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from amibuild import hcl
from amibuild.pipeline import Overrides, Pipeline, Proxy, Repo, Variant, load
from amibuild.errors import SpecError
from conftest import run_cli
from amibuild.render import SourceAmi, Target, provisioner_blocks, render_build, template_variables, write
from amibuild.render.variables import apply_packer_vars
from amibuild.sandbox.transform import SandboxTarget, render_for_env, sandboxed

ROOT = Path(__file__).resolve().parent.parent

# Each would create a marker file if a shell ever read it as code; MARK is replaced per test.
HOSTILE = (
    "x'; touch MARK/squote; echo '",
    'x"; touch MARK/dquote; echo "',
    "x`touch MARK/backtick`",
    "x$(touch MARK/subshell)",
    "x; touch MARK/semicolon",
    "x\ntouch MARK/newline\n",
    "x${HOME}$(touch MARK/dollar-brace)",
)

# every string setting and the Packer variables of our template that hold text
FIRST_CLASS = ("instance_type", "kms_key_id", "subnet_id", "security_group_id", "source_ami", "description",
               "upstream_ref")
PACKER_VARS = ("http_proxy", "https_proxy", "no_proxy", "extra_repos", "ami_description", "ami_name_prefix",
               "iam_instance_profile", "ssh_username", "ssh_interface", "source_ami_filter_name", "ami_regions",
               "ami_users", "source_ami_owners", "kubernetes_version", "arch", "volume_type")
FLAGS = {"extra_packages": "extra_packages", "extra_repos": "extra_repos", "kubernetes_version": "kubernetes_version",
         "os": "os", "arch": "arch", "base": "base", "upstream_ref": "upstream_ref"}
ROADS = ("flag", "--var", "vars", "var-file", "pipeline file")


def _load(tmp: Path, road: str, setting: str, value: str) -> Pipeline:
    """Load a one-variant pipeline with `value` given for `setting` along `road`."""
    body = ""
    overrides = Overrides()
    if road == "flag":
        if setting == "extra_packages":
            overrides = Overrides(extra_packages=(value,))
        elif setting == "extra_repos":
            overrides = Overrides(extra_repos=(f"r={value}",))
        else:
            overrides = Overrides(**{setting: value})
    elif road == "--var":
        overrides = Overrides(variables=(f"{setting}={value}",))
    elif road == "vars":
        body = f"  vars = {{ {setting} = {hcl.quote(value)} }}\n"
    elif road == "var-file":
        (tmp / "v.pkrvars.hcl").write_text(f"{setting} = {hcl.quote(value)}\n")
        overrides = Overrides(var_files=(str(tmp / "v.pkrvars.hcl"),))
    elif setting == "proxy":
        body = f"  proxy {{\n    http = {hcl.quote(value)}\n  }}\n"
    elif setting == "repo":
        body = f'  repo "r" {{\n    baseurl = {hcl.quote(value)}\n  }}\n'
    else:
        body = f"  {setting} = {hcl.quote(value)}\n"
    (tmp / "amibuild.hcl").write_text(f'pipeline {{\n  name = "inj"\n}}\n\nvariant "v" {{\n{body}}}\n')
    return load(tmp / "amibuild.hcl", overrides, required=True)


def _combinations():
    for road in ROADS:
        if road == "flag":
            settings = FLAGS
        elif road == "pipeline file":
            settings = (*FIRST_CLASS, "proxy", "repo", "extra_packages")
        else:
            settings = (*FIRST_CLASS, *PACKER_VARS)
        for setting in settings:
            yield road, setting


def _shell_texts(variant: Variant, pipeline: Pipeline, sandbox: bool) -> list[str]:
    """Every piece of text our provisioners hand to a shell: inline commands and execute_command."""
    values = apply_packer_vars(template_variables(variant, pipeline), variant, sources={})
    blocks, _ = provisioner_blocks(variant, values)
    if sandbox:
        build = render_build(pipeline, variant, uses_plugins=False, target=Target(),
                             sources={r: SourceAmi("lookup") for r in pipeline.regions})
        build = sandboxed(build, where=SandboxTarget("http://127.0.0.1:9", sys.executable, "/nonexistent"))
        blocks = [p.block for p in (*build.early, *build.late)]
    texts = []
    for block in blocks:
        for item in block.body:
            if isinstance(item, hcl.Attr) and item.key in ("inline", "execute_command"):
                texts.append(hcl.value(item.value))
    return texts


@pytest.mark.parametrize("road,setting", list(_combinations()), ids=lambda x: str(x))
def test_a_hostile_value_is_refused_or_never_part_of_shell_text(tmp_path: Path, road: str, setting: str) -> None:
    refused = 0
    for template in HOSTILE:
        value = template.replace("MARK", str(tmp_path))
        try:
            pipeline = _load(tmp_path, road, setting, value)
        except SpecError as exc:
            assert exc.exit_code == 2
            refused += 1
            continue
        variant = pipeline.variants[0]
        for sandbox in (True, False):
            for text in _shell_texts(variant, pipeline, sandbox):
                assert "touch" not in text, f"{road} {setting}: {value!r} reached shell text: {text}"
    # settings with a shape (URLs, ids, names) refuse all of it; free text may carry it as data
    if setting not in ("description", "ami_description"):
        assert refused == len(HOSTILE), f"{road} {setting}: {len(HOSTILE) - refused} hostile value(s) accepted"


def test_even_unchecked_values_are_only_data_in_a_sandbox_build(tmp_path: Path, sandbox) -> None:
    """Defence in depth: a variant whose proxy, repos and packages bypassed every check (built with
    dataclasses.replace) is rendered and built by the real packer against the emulator; the values
    reach the shell-local steps as environment variables and are printed, never run."""
    if shutil.which("packer") is None:
        pytest.skip("packer is not installed")
    (tmp_path / "amibuild.hcl").write_text('pipeline {\n  name = "inj"\n}\n\nvariant "v" {\n}\n')
    pipeline = load(tmp_path / "amibuild.hcl", required=True)
    hostile = [t.replace("MARK", str(tmp_path)) for t in HOSTILE]
    variant = dataclasses.replace(
        pipeline.variants[0],
        proxy=Proxy(http=hostile[0], https=hostile[1], no_proxy=hostile[2]),
        repos=(Repo("r", hostile[3], hostile[4]),),
        extra_packages=tuple(hostile[5:]),
    )
    pipeline = dataclasses.replace(pipeline, variants=(variant,))
    region = pipeline.build_region
    source = SourceAmi("pinned", image_id=_seeded_image(sandbox, region))
    rendered = render_for_env(pipeline, variant, uses_plugins=False, env={"AWS_ENDPOINT_URL": sandbox.endpoint},
                              sources={region: source})
    directory = write(rendered, tmp_path / "build", rendered.record(pipeline, "1.6.6"))
    proc = subprocess.run(["packer", "build", "-machine-readable", "-color=false", "."], cwd=directory,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "would run configure-proxy.sh" in proc.stdout and "would run add-repos.sh" in proc.stdout
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name not in ("amibuild.hcl", "build"))
    assert leftovers == [], f"a value ran as a command: {leftovers}"
    assert "touch " + str(tmp_path) + "/squote" in proc.stdout  # printed as data


def test_a_sandbox_build_through_the_cli_carries_hostile_text_and_script_names_as_data(tmp_path: Path, sandbox) -> None:
    """Everything the checks let through with shell syntax in it — free text (description, tags) and
    a provisioner script whose file name is shell syntax — goes through a real `build-ami`."""
    if shutil.which("packer") is None:
        pytest.skip("packer is not installed")
    mark = Path(tempfile.mkdtemp(prefix="inj"))  # short: the text must fit EC2's 255-character description
    text = f"it's \"quoted\" `touch {mark}/bt` $(touch {mark}/sub); touch {mark}/semi $${{HOME}}"
    assert len(text) < 255
    # a file name cannot hold '/': these would land in Packer's working folder (build/v/)
    script = "a'$(touch PWNEDname);`touch PWNEDtick`.sh"
    (tmp_path / script).write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "amibuild.hcl").write_text(
        'pipeline {\n  name = "inj"\n  regions = ["us-west-2"]\n'
        f"  tags = {{ note = {hcl.quote(text)} }}\n}}\n\n"
        f'variant "v" {{\n  description = {hcl.quote(text)}\n  scripts = [{hcl.quote(script)}]\n}}\n')
    proc = run_cli(tmp_path, "build-ami", "--no-publish", "--var", f"ami_description={text}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    # each run writes its own folder (build/runs/<run>/<variant>/packer.log): find the one log
    logs = sorted((tmp_path / "build").rglob("packer.log"))
    assert len(logs) == 1, logs
    log = logs[-1].read_text()
    assert "would run user-01-" in log
    leftover = sorted(p.name for p in mark.iterdir())
    shutil.rmtree(mark)
    assert leftover == [], "a value ran as a command"
    assert [p for p in tmp_path.rglob("PWNED*")] == [], "a script name ran as a command"


def _seeded_image(sandbox, region: str) -> str:
    import boto3

    images = boto3.client("ec2", region_name=region).describe_images(
        Owners=["602401143452"], Filters=[{"Name": "name", "Values": ["amazon-eks-node-1.30-v*"]}])["Images"]
    return sorted(images, key=lambda i: i["CreationDate"])[-1]["ImageId"]
