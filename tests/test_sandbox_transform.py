"""The sandbox is a transform of the real build, not a branch in render (issue 17).

Render writes the real build for the target its caller gives, whatever the environment says; the
sandbox's rewrite (`amibuild.sandbox.transform`) turns that build into what the emulator can run,
as a pure function; Packer 1.6.6 accepts both. Packer's environment carries the stand-in's two
variables only for sandbox builds.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from amibuild import hcl
from amibuild import render
from amibuild.bake import prepare
from amibuild.bake.packer import Packer
from amibuild.sandbox import image_standin as standin
from amibuild.pipeline import Overrides, imagetests, load
from amibuild.pipeline.options import Options
from amibuild.render import ProvisionerKind, SourceAmi, Target
from amibuild.render import upstream as upstream_mod
from amibuild.sandbox import transform
from conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = Path(__file__).parent / "data" / "upstream" / "templates-layout"
ENDPOINT = "http://127.0.0.1:4566"
WHERE = transform.SandboxTarget(ENDPOINT, "/opt/python3", "/var/tmp/stand-ins")

PIPELINE = """\
pipeline {
  name    = "sbx"
  regions = ["us-west-2"]
  copy_to = ["eu-west-1"]
}

variant "ceph" {
  extra_packages = ["ceph-common"]
  repo "ceph" {
    baseurl = "https://download.ceph.com/rpm-octopus/el7/$basearch"
    gpgkey  = "https://download.ceph.com/keys/release.asc"
  }
  proxy {
    http = "http://proxy.example:3128"
  }
  scripts = ["harden.sh"]
  test_on_build = true
}

variant "arm" {
  arch          = "arm64"
  os            = "al2023"
  test_on_build = false
}
"""

# What the environment may say about endpoints: none of it may change what render writes.
ENVIRONMENTS = {
    "none": {},
    "AWS_ENDPOINT_URL on loopback": {"AWS_ENDPOINT_URL": ENDPOINT},
    "AWS_ENDPOINT_URL_EC2 elsewhere": {"AWS_ENDPOINT_URL_EC2": "https://ec2.eu-west-1.example.invalid"},
    "both, and a stand-in store": {"AWS_ENDPOINT_URL": "http://localhost:1", "AWS_ENDPOINT_URL_EC2": ENDPOINT,
                                   standin.STORE_ENV: "/elsewhere"},
}


@pytest.fixture
def pipeline_dir(tmp_path: Path) -> Path:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    (tmp_path / "harden.sh").write_text("#!/bin/sh\necho hardened\n")
    return tmp_path


def written(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_render_writes_the_same_bytes_whatever_the_endpoint_variables_say(
        pipeline_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}
    for name, env in ENVIRONMENTS.items():
        with monkeypatch.context() as mp:
            for key in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2", standin.STORE_ENV):
                mp.delenv(key, raising=False)
            for key, value in env.items():
                mp.setenv(key, value)
            out = pipeline_dir / "out" / name.replace(" ", "-")
            options = Options(pipeline_file=str(pipeline_dir / "amibuild.hcl"), build_dir=str(out), packer="no-packer-here")
            result = prepare.render(options, resolve=False)
            seen[name] = written(out)
            assert [d.name for d in result.directories] == ["ceph", "arm"]
    first = seen["none"]
    assert "ceph/scripts/user-01-harden.sh" in first and "ceph/amibuild.pkr.hcl" in first
    for name, files in seen.items():
        assert files == first, f"{name}: render wrote other files"
    text = first["ceph/amibuild.pkr.hcl"].decode()
    assert 'communicator                = "ssh"' in text and "custom_endpoint_ec2" not in text


def _builds(pipeline_dir: Path, target: Target = Target()):
    pipeline = load(pipeline_dir / "amibuild.hcl", Overrides())
    sources = {r: SourceAmi("pinned", "ami-0123456789abcdef0") for r in pipeline.regions}
    return [render.render_build(pipeline, v, uses_plugins=False, target=target, sources=sources)
            for v in pipeline.variants]


def _upstream_build(target: Target = Target()):
    pipeline = load(None, Overrides(base="upstream", upstream=str(UPSTREAM), kubernetes_version="1.29", arch="arm64",
                                    extra_packages=("ceph-common",), variables=("kubernetes_build_date=2024-02-01",)),
                    default_region="us-west-2")
    variant = pipeline.variants[0]
    return render.render_build(pipeline, variant, uses_plugins=False, target=target,
                               sources={"us-west-2": SourceAmi("lookup")}, upstream=upstream_mod.load(Path(variant.upstream)))


def _source(rendered: render.Rendered, region: str = "us-west-2") -> dict:
    return hcl.loads(rendered.files[render.HCL_FILE])["source"][0]["amazon-ebs"][region]


def _provisioners(rendered: render.Rendered) -> list[tuple[str, dict]]:
    build = hcl.loads(rendered.files[render.HCL_FILE])["build"][0]
    return [(kind, body) for p in build.get("provisioner", []) for kind, body in p.items()]


def test_the_sandbox_transform_turns_the_real_build_into_what_the_emulator_runs(pipeline_dir: Path) -> None:
    build = _builds(pipeline_dir)[0]  # ceph: proxy, repository, packages, a script, stage 1 checks
    real = render.finish(build)
    sandbox = render.finish(transform.sandboxed(build, where=WHERE))

    # the real build: ssh to the instance, AWS's own endpoint and polling, every step a shell step but
    # the download of stage 1's package list (before the cache clean-up, which removes it)
    assert _source(real)["communicator"] == "ssh" and "custom_endpoint_ec2" not in _source(real)
    assert _source(real)["aws_polling"] == [{"delay_seconds": 30, "max_attempts": 120}]
    # ... the last two the clean-up and its checks, which the stand-in rehearses as part of the real chain
    assert [k for k, _ in _provisioners(real)] == ["shell"] * 6 + ["file"] + ["shell"] * 3
    assert _provisioners(real)[-4][1]["direction"] == "download"
    assert [b.get("script", "").rsplit("/", 1)[-1] for _, b in _provisioners(real)[-2:]] == [
        "cleanup.sh", "amibuild-hygiene.sh"]
    assert real.packer_env == {} and real.real is None
    assert not any(name.startswith(standin.STANDIN_DIR + "/") for name in real.files)

    # the sandbox's: the emulator's endpoint, no connection, short polls, echo steps then the stand-in
    source = _source(sandbox)
    assert source["communicator"] == "none" and "ssh_username" not in source
    assert source["custom_endpoint_ec2"] == ENDPOINT and source["skip_region_validation"] is True
    assert source["aws_polling"] == [{"delay_seconds": 1, "max_attempts": 30}]
    steps = _provisioners(sandbox)
    assert [k for k, _ in steps] == ["shell-local"] * 5
    assert [next(e for e in body["environment_vars"] if e.startswith("AMIBUILD_STEP=")) for _, body in steps[:4]] == [
        "AMIBUILD_STEP=configure-proxy.sh", "AMIBUILD_STEP=add-repos.sh", "AMIBUILD_STEP=install-packages.sh",
        "AMIBUILD_STEP=user-01-harden.sh"]
    assert "amibuild.sandbox.image_standin" in steps[-1][1]["inline"][0]
    assert "AMIBUILD_RUN_CHECKS=true" in steps[-1][1]["environment_vars"]
    # the image's stand-in is the real build, byte for byte, with the scripts its chain ships
    assert sandbox.files[f"{standin.STANDIN_DIR}/{render.HCL_FILE}"] == real.files[render.HCL_FILE]
    assert sandbox.files[f"{standin.STANDIN_DIR}/{render.VARS_FILE}"] == real.files[render.VARS_FILE]
    assert {n for n in real.files if n.startswith("scripts/")} <= set(sandbox.files)
    assert sandbox.real == real and sandbox.real.files == real.files
    # the checks the stand-in runs one by one in its two checks steps' places: stage 1's, then the clean-up's
    listed = json.loads(sandbox.files[standin.CHECKS_LIST])
    stages = [c["stage"] for c in listed]
    assert stages == sorted(stages) and set(stages) == {"build", "hygiene"}  # "build" first
    assert [c["name"] for c in listed if c["stage"] == "hygiene"] == [
        c.name for c in imagetests.check_set(build.variant, stage="hygiene").checks]
    assert "clean-machine-id" not in [c["name"] for c in listed if c["stage"] == "build"]
    # Packer's environment for this build alone: the Python for the stand-in, where stand-ins are kept
    assert dict(sandbox.packer_env) == {"AMIBUILD_PYTHON": "/opt/python3", standin.STORE_ENV: "/var/tmp/stand-ins"}
    assert sandbox.fingerprint != real.fingerprint
    assert any("sandbox build" in n for n in sandbox.notes) and not any("sandbox build" in n for n in real.notes)


def test_the_transform_is_pure_and_keeps_stage_one_off_as_the_pipeline_says(pipeline_dir: Path) -> None:
    arm = _builds(pipeline_dir)[1]  # no steps of ours, stage 1 off
    before = render.finish(arm)
    once = render.finish(transform.sandboxed(arm, where=WHERE))
    again = render.finish(transform.sandboxed(arm, where=WHERE))
    assert once.files == again.files and once.fingerprint == again.fingerprint
    assert render.finish(arm).files == before.files  # its input is left as it was
    assert render.checks_step(arm.variant) is None and render.CHECKS_SCRIPT not in before.files
    # off or on, the sandbox build ends with the stand-in step (the boot test uses its checks script)
    steps = _provisioners(once)
    assert [k for k, _ in steps] == ["shell-local"]
    assert "AMIBUILD_RUN_CHECKS=false" in steps[0][1]["environment_vars"]
    assert render.CHECKS_SCRIPT in once.files and ProvisionerKind.CHECKS in {p.kind for p in transform.sandboxed(arm, where=WHERE).late}


def test_the_upstream_base_is_transformed_the_same_way(tmp_path: Path) -> None:
    build = _upstream_build()
    real = render.finish(build)
    sandbox = render.finish(transform.sandboxed(build, where=WHERE))
    assert _source(real).get("communicator") != "none" and "custom_endpoint_ec2" not in _source(real)
    assert "aws_polling" not in _source(real)  # upstream's own polling stands on a real build
    kinds = [k for k, _ in _provisioners(real)]
    assert "shell" in kinds  # upstream's remote steps and ours
    source = _source(sandbox)
    assert source["communicator"] == "none" and source["custom_endpoint_ec2"] == ENDPOINT
    assert source["aws_polling"] == [{"delay_seconds": 1, "max_attempts": 30}]
    assert {k for k, _ in _provisioners(sandbox)} == {"shell-local"}  # upstream's remote steps left out
    for name in (render.HCL_FILE, render.OWN_VARS_FILE, render.VARS_FILE):
        assert sandbox.files[f"{standin.STANDIN_DIR}/{name}"] == real.files[name]


def test_the_sandbox_platform_hands_in_its_target_transform_and_polls() -> None:
    chosen = transform.platform({"AWS_ENDPOINT_URL": ENDPOINT, standin.STORE_ENV: "/s"}, python="/py")
    assert chosen.name == "sandbox" and chosen.target == Target(ENDPOINT) and chosen.poll_seconds == 0.1
    assert chosen.transform.keywords["where"] == transform.SandboxTarget(ENDPOINT, "/py", "/s")
    # AWS_ENDPOINT_URL_EC2 wins, as boto3 reads it
    both = transform.platform({"AWS_ENDPOINT_URL": "http://localhost:1", "AWS_ENDPOINT_URL_EC2": ENDPOINT})
    assert both.target == Target(ENDPOINT)
    with pytest.raises(ValueError, match="communicator 'winrm'"):
        Target(communicator="winrm")


@pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")
def test_packer_validates_the_real_build_and_its_sandbox_transform(pipeline_dir: Path) -> None:
    packer = Packer()
    folders = []
    for index, build in enumerate([*_builds(pipeline_dir), _upstream_build()]):
        for kind, item in (("real", build), ("sandbox", transform.sandboxed(build, where=WHERE))):
            rendered = render.finish(item)
            out = pipeline_dir / "build" / f"{kind}-{index}"
            folders.append(render.write(rendered, out, {}))
    prepare.check_directories(packer, folders)  # python-hcl2, packer validate, packer fmt -check: raises on any
    assert len(folders) == 6


@pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")
def test_only_a_sandbox_build_gets_the_stand_ins_variables_in_packers_environment(tmp_path: Path, sandbox) -> None:
    (tmp_path / "amibuild.hcl").write_text('pipeline {\n  name = "envs"\n  regions = ["us-west-2"]\n}\n\n'
                                           'variant "v" {\n  extra_packages = ["jq"]\n}\n')
    calls = tmp_path / "packer-calls"
    wrapper = tmp_path / "packer-wrapper"
    # each packer invocation records its subcommand and whether the stand-in's variables reached it
    wrapper.write_text(f'#!/bin/sh\necho "$1 python=${{AMIBUILD_PYTHON:-unset}} store=${{{standin.STORE_ENV}:-unset}}" '
                       f'>> "{calls}"\nexec {shutil.which("packer")} "$@"\n')
    wrapper.chmod(0o755)
    result = run_cli(tmp_path, "build-ami", "--no-publish", "--json", env={"INVOKE_AMIBUILD_PACKER": str(wrapper)})
    assert result.returncode == 0, result.stderr
    lines = calls.read_text().splitlines()
    build_lines = [line for line in lines if line.startswith("build ")]
    assert len(build_lines) == 1 and "python=unset" not in build_lines[0] and "store=unset" not in build_lines[0]
    others = [line for line in lines if not line.startswith("build ")]
    # the sandbox's env names its own store (`Sandbox.env`): the other calls inherit the caller's value unchanged
    inherited = os.environ.get(standin.STORE_ENV, "unset")
    assert others and all(line.endswith(f"python=unset store={inherited}") for line in others), lines
    log = next((tmp_path / "build" / "runs").glob("*/v/packer.log")).read_text()
    assert "AMIBUILD_PYTHON is not set" not in log  # the stand-in step ran with amibuild's Python
    assert json.loads(result.stdout)["variants"][0]["status"] == "built"


def test_the_transform_comes_without_the_emulator_and_the_stand_in_runner() -> None:
    """What `build-ami` imports to pick its target: not the emulator's process, server and seed
    (amibuild.sandbox names them lazily), nor the stand-in runner and the rehearsal behind it."""
    import subprocess
    import sys

    probe = ("import sys, amibuild.sandbox.transform as t, amibuild.cli.command as c, amibuild.jobs.env as e; "
             "e.target(c.make_env(None)); "
             "print(sorted(m for m in sys.modules if m.startswith(('amibuild.sandbox.', 'amibuild.imagetest.', "
             "'amibuild.rehearse'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "['amibuild.sandbox.standin_store', 'amibuild.sandbox.transform']"


def test_every_public_name_of_the_sandbox_package_is_there() -> None:
    import amibuild.sandbox as package
    from amibuild.sandbox import process, seed

    assert package.Sandbox is process.Sandbox and package.DEFAULT_REGION == seed.DEFAULT_REGION
    for name in package.__all__:
        assert getattr(package, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'Sandbx'"):
        package.Sandbx  # noqa: B018
