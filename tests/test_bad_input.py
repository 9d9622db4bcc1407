"""Bad input is refused through the real command line: exit code 2, one line naming the file:line,
field or flag and what to do, and nothing written anywhere (no build/ folder appears)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from amibuild import hcl

ROOT = Path(__file__).resolve().parent.parent

PIPELINE = """\
pipeline {
  name       = "t"
  ssm_prefix = "/amibuild"
  regions    = ["us-west-2"]
}

variant "ceph" {
  extra_packages = ["ceph-common"]
}

variant "plain" {
}
"""


def invoke(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "AMIBUILD_DEBUG"}
    return subprocess.run(
        [sys.executable, "-m", "invoke", "-r", str(ROOT), *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
    )


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    (tmp_path / "bad.pkrvars.hcl").write_text('volume_size = 40\ninstance_type = = "x"\n')
    (tmp_path / "good.pkrvars.hcl").write_text('volume_size = 40\n')
    return tmp_path


CASES = [
    # (id, args, pipeline file text or None for the default, words the message must contain)
    ("unknown-variant", ["render", "--variant", "cepf"], None, ["--variant cepf", "did you mean 'ceph'"]),
    ("unknown-packer-var", ["render", "--var", "volume_sise=40"], None,
     ["--var volume_sise", "unknown Packer variable", "did you mean 'volume_size'"]),
    ("malformed-var", ["render", "--var", "volume_size"], None, ["--var volume_size", "KEY=VALUE"]),
    ("var-file-syntax", ["render", "--var-file", "bad.pkrvars.hcl"], None, ["bad.pkrvars.hcl:2", "syntax"]),
    ("var-file-missing", ["render", "--var-file", "nope.pkrvars.hcl"], None, ["--var-file nope.pkrvars.hcl"]),
    ("package-shell-chars", ["render", "--extra-pkg", "ceph;reboot"], None, ["--extra-pkg", "'ceph;reboot'", "RPM name"]),
    ("package-space", ["render", "--extra-pkg", "ceph common"], None, ["--extra-pkg", "'ceph common'"]),
    ("package-subshell", ["render", "--extra-pkg", "$(id)"], None, ["--extra-pkg", "'$(id)'"]),
    ("repo-not-http", ["render", "--extra-repo", "ceph=ftp://download.ceph.com/x"], None,
     ["--extra-repo", "ftp://download.ceph.com/x", "http:// or https://"]),
    ("repo-malformed", ["render", "--extra-repo", "https://x"], None, ["--extra-repo", "NAME=URL"]),
    ("bad-arch", ["render", "--arch", "aarch64"], None, ["--arch aarch64", "x86_64, arm64"]),
    ("bad-os", ["render", "--os", "ubuntu"], None, ["--os ubuntu", "al2, al2023"]),
    ("k8s-not-1-n", ["render", "--k8s", "1.30.1"], None, ["--k8s 1.30.1", "1.N"]),
    ("k8s-word", ["render", "--k8s", "latest"], None, ["--k8s latest", "1.N"]),
    ("al2-past-1-32", ["render", "--k8s", "1.33"], None, ["--k8s 1.33", "Amazon Linux 2", "al2023"]),
    ("unknown-region", ["render", "--region", "us-west-9"], None, ["--region", "'us-west-9'"]),
    ("ssm-prefix-no-slash", ["render"], PIPELINE.replace('"/amibuild"', '"amibuild"'),
     ["amibuild.hcl", "ssm_prefix", "must start with '/'"]),
    ("pipeline-syntax", ["render"], PIPELINE.replace('name       = "t"', 'name = = "t"'), ["amibuild.hcl:2", "syntax"]),
    ("pipeline-unknown-field", ["render"], PIPELINE.replace("extra_packages", "extra_pkgs"),
     ["amibuild.hcl", 'variant "ceph"', "extra_pkgs", "did you mean 'extra_packages'"]),
    ("pipeline-region-typo", ["render"], PIPELINE.replace('["us-west-2"]', '["eu-wset-1"]'),
     ["amibuild.hcl", "pipeline.regions", "'eu-wset-1'", "did you mean 'eu-west-1'"]),
    ("k8s-unquoted", ["render"], PIPELINE.replace("variant \"plain\" {\n", "variant \"plain\" {\n  kubernetes_version = 1.30\n"),
     ["kubernetes_version", "in quotes"]),
    ("missing-pipeline-flag", ["render", "--pipeline", "other.hcl"], None, ["other.hcl", "not found"]),
    ("parameter-template-without-variant", ["render"],
     PIPELINE.replace('ssm_prefix = "/amibuild"', 'ssm_prefix = "/amibuild"\n  parameter_template = "{prefix}/{channel}"'),
     ["amibuild.hcl", "pipeline.parameter_template", "{variant}"]),
    ("bad-default-channel", ["render"],
     PIPELINE.replace('ssm_prefix = "/amibuild"', 'ssm_prefix = "/amibuild"\n  default_channel = "a b"'),
     ["amibuild.hcl", "pipeline.default_channel", "'a b'"]),
    ("bad-channel-flag", ["build-ami", "--channel", "a/b"], None, ["--channel", "'a/b'"]),
    ("all-and-variant", ["build-ami", "--all", "--variant", "ceph"], None, ["--all and --variant"]),
    ("build-unknown-variant", ["build-ami", "--variant", "cepf"], None, ["--variant cepf", "did you mean 'ceph'"]),
]


@pytest.mark.parametrize("args,pipeline,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_refused_with_one_line_and_exit_2(workdir: Path, args, pipeline, words) -> None:
    if pipeline is not None:
        (workdir / "amibuild.hcl").write_text(pipeline)
    before = sorted(p.name for p in workdir.iterdir())
    result = invoke(workdir, *args)
    assert result.returncode == 2, result.stderr + result.stdout
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert message.startswith("amibuild: error: ")
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in workdir.iterdir()) == before, "something was written"


def test_good_input_renders_through_the_same_command(workdir: Path) -> None:
    """The control: the fixture's pipeline with a good var-file renders, so refusals above are real."""
    result = invoke(workdir, "render", "--var-file", "good.pkrvars.hcl", "--extra-pkg", "htop")
    assert result.returncode == 0, result.stderr
    assert (workdir / "build" / "ceph" / "amibuild.pkr.hcl").is_file()
    values = hcl.loads((workdir / "build" / "plain" / "amibuild.auto.pkrvars.hcl").read_text())
    assert values["volume_size"] == 40
    assert values["extra_packages"] == ["htop"]
