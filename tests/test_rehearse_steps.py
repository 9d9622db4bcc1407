"""The pure half of rehearse: rendered HCL -> the steps Packer would run, and the expressions in them."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from amibuild import render as render_mod
from amibuild.pipeline import Overrides, load
from amibuild.rehearse import expr, rehearsal_report as report
from amibuild.rehearse.overlay import RawResult, RawRun
from amibuild.rehearse.steps import StepError, parse_steps
from amibuild.render import SourceAmi, Target


def rendered_variant(tmp_path: Path, pipeline_text: str, *, target: Target = Target(), **overrides):
    (tmp_path / "amibuild.hcl").write_text(pipeline_text)
    pipeline = load(tmp_path / "amibuild.hcl", Overrides(**overrides))
    variant = pipeline.variants[0]
    return render_mod.render_variant(pipeline, variant, uses_plugins=True, target=target,
                                     sources={r: SourceAmi("lookup") for r in pipeline.regions})


PIPELINE = """\
pipeline {
  name    = "t"
  regions = ["us-west-2"]
}

variant "ceph" {
  extra_packages = ["ceph-common", "jq"]
  repo "ceph" {
    baseurl = "https://download.ceph.com/rpm-octopus/el7/$basearch"
    gpgkey  = "https://download.ceph.com/keys/release.asc"
  }
  proxy {
    http  = "http://proxy.example:3128"
    https = "http://proxy.example:3128"
  }
  scripts = ["it's.sh"]
}
"""


def test_our_chain_becomes_the_steps_packer_runs_with_filled_execute_commands(tmp_path: Path) -> None:
    (tmp_path / "it's.sh").write_text("#!/bin/bash\necho hi\n")
    rendered = rendered_variant(tmp_path, PIPELINE)
    steps = parse_steps(rendered.files, "/r")

    assert [s.name for s in steps] == ["configure-proxy.sh", "add-repos.sh", "install-packages.sh",
                                       "user-01-it's.sh", "amibuild-checks.sh", "inventory.sh",
                                       "file: /tmp/amibuild-inventory.tsv <- /r/inventory.tsv", steps[7].name,
                                       "cleanup.sh", "amibuild-hygiene.sh"]
    assert steps[7].inline[0].startswith("sudo yum clean all")
    assert [s.script for s in steps[:4]] == ["/r/scripts/configure-proxy.sh", "/r/scripts/add-repos.sh",
                                             "/r/scripts/install-packages.sh", "/r/scripts/user-01-it's.sh"]
    install = steps[2]
    # Packer's order and quoting: its own two variables, then ours, sorted, each KEY='value'
    assert install.command == (
        "sudo -S env AMIBUILD_EXTRA_PACKAGES='ceph-common jq' PACKER_BUILDER_TYPE='amazon-ebs' "
        "PACKER_BUILD_NAME='us-west-2'  bash -eu '/tmp/script_3.sh'")
    repos = dict(steps[1].env)["AMIBUILD_REPOS"]
    assert repos == "ceph|https://download.ceph.com/rpm-octopus/el7/$basearch|https://download.ceph.com/keys/release.asc"
    proxy = dict(steps[0].env)
    assert proxy["AMIBUILD_HTTP_PROXY"] == "http://proxy.example:3128"
    assert "169.254.169.254" in proxy["AMIBUILD_NO_PROXY"]
    assert all(s.remote_path.startswith("/tmp/script_") for s in steps if s.kind == "shell")
    # stage 1's package list: written by the inventory step on the instance, then downloaded beside the template
    assert steps[5].command.endswith(">/tmp/amibuild-inventory.tsv")
    assert [(u.source, u.how) for u in steps[6].uploads] == [("/tmp/amibuild-inventory.tsv", "download")]


def test_a_sandbox_render_has_no_step_to_rehearse_so_the_rehearsal_takes_the_real_render(tmp_path: Path) -> None:
    from amibuild.rehearse.rehearse_job import real_render
    from amibuild.sandbox.transform import render_for_env

    (tmp_path / "it's.sh").write_text("echo\n")
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    pipeline = load(tmp_path / "amibuild.hcl", Overrides())
    sandboxed = render_for_env(pipeline, pipeline.variants[0], env={"AWS_ENDPOINT_URL": "http://127.0.0.1:5000"},
                               uses_plugins=True, sources={r: SourceAmi("lookup") for r in pipeline.regions})
    assert {s.kind for s in parse_steps(sandboxed.files, "/r")} == {"local"}

    again = real_render(sandboxed)
    # our four steps, the image's checks and inventory (stage 1), its download, the cache clean-up, the
    # clean-up and its checks
    assert [s.kind for s in parse_steps(again.files, "/r")] == ["shell"] * 6 + ["file"] + ["shell"] * 3


def test_single_quotes_in_values_are_escaped_as_packer_does() -> None:
    files = {"a.pkr.hcl": """
variable "msg" {
  type    = string
  default = "it's"
}
build {
  sources = ["source.amazon-ebs.w"]
  provisioner "shell" {
    inline           = ["echo $MSG"]
    environment_vars = ["MSG=${var.msg}"]
  }
}
"""}
    (step,) = parse_steps(files, "/r")
    assert "MSG='it'\"'\"'s'" in step.command
    assert step.command.startswith("chmod +x /tmp/script_1.sh; ")


def test_upstream_style_locals_files_and_only_are_evaluated() -> None:
    files = {"a.pkr.hcl": r"""
variable "remote_folder" {
  type    = string
  default = "/tmp"
}
variable "working_dir" {
  type    = string
  default = null
}
variable "regions" {
  type    = string
  default = "a,,b"
}
locals {
  working_dir = var.working_dir == null ? "${var.remote_folder}/worker" : var.working_dir
}
build {
  sources = ["source.amazon-ebs.us-west-2"]
  provisioner "shell" {
    remote_folder = var.remote_folder
    inline        = ["mkdir -p ${local.working_dir}", "echo $${HOME} ${join("|", compact(split(",", var.regions)))}"]
  }
  provisioner "file" {
    source      = "/src/files/"
    destination = local.working_dir
  }
  provisioner "shell-local" {
    only   = ["amazon-ebs.us-west-2"]
    inline = ["echo local"]
  }
  provisioner "shell" {
    only   = ["amazon-ebs.elsewhere"]
    inline = ["echo never"]
  }
  provisioner "file" {
    direction   = "download"
    source      = "${local.working_dir}/info.json"
    destination = "info.json"
  }
}
"""}
    steps = parse_steps(files, "/r")
    assert [s.kind for s in steps] == ["shell", "file", "local", "file"]
    assert steps[0].inline == ("mkdir -p /tmp/worker", "echo ${HOME} a|b")
    assert steps[1].uploads[0].destination == "/tmp/worker" and steps[1].uploads[0].how == "contents"
    assert steps[3].uploads[0].how == "download" and steps[3].uploads[0].source == "/tmp/worker/info.json"


def test_an_expression_it_cannot_evaluate_is_refused_by_name() -> None:
    files = {"a.pkr.hcl": """
build {
  sources = ["source.amazon-ebs.w"]
  provisioner "shell" {
    inline = ["echo ${timestamp()}"]
  }
}
"""}
    with pytest.raises(StepError, match=r"provisioner 1 \(shell\): function timestamp\(\) is not supported"):
        parse_steps(files, "/r")


@pytest.mark.parametrize("text, want", [
    ('${var.a == "" ? null : var.a}', None),
    ('${coalesce(var.b, "x")}', "x"),
    ('pre-${upper(var.c)}-${length(var.l)}', "pre-C-2"),
    ('${var.l[1]}', "y"),
    ('${format("%s:%d", var.c, 3)}', "c:3"),
    ('${!true || 1 < 2}', True),
])
def test_expressions(text: str, want) -> None:
    scope = expr.Scope(variables={"a": "", "b": "", "c": "c", "l": ["x", "y"]}, locals={}, root="/r")
    assert expr.evaluate(text, scope) == want


# What `packer console` (1.6.6) answers for each, with var.f = "false", var.t = "true", var.n = "10"
@pytest.mark.parametrize("text, want", [
    ('${var.f ? "yes" : "no"}', "no"),
    ('${"1" ? "yes" : "no"}', "yes"),
    ('${!var.f}', True),
    ('${var.f && true}', False),
    ('${var.f || var.t}', True),
    ('${"1" + "2"}', 3),
    ('${"5" * 2}', 10),
    ('${-"3"}', -3),
    ('${"1e3" + 0}', 1000),
    ('${"10" < "9"}', False),
    ('${var.n < "9"}', False),
    ('${var.n >= 10}', True),
    ('${5 % -3}', 2),
    ('${-5 % 3}', -2),
    ('${-5.5 % 2}', -1.5),
    ('${true == 1}', False),
    ('${var.n == 10}', False),
    ('${1 == 1.0}', True),
    ('${["a"] == ["a"]}', True),
    ('${null == null}', True),
    ('n=${"7" % 2}', "n=1"),
])
def test_operators_convert_their_operands_as_packer_does(text: str, want) -> None:
    scope = expr.Scope(variables={"f": "false", "t": "true", "n": "10"}, locals={}, root="/r")
    got = expr.evaluate(text, scope)
    assert got == want and type(got) is type(want)


@pytest.mark.parametrize("text", [
    '${"x" ? 1 : 2}', '${null ? 1 : 2}', '${true || "x"}', '${"" + 0}', '${"a" < "b"}', '${1 < true}',
    '${1 / 0}', '${5 % 0}', '${-"x"}', '${!"yes"}',
])
def test_operands_packer_refuses_or_that_have_no_useful_value_are_refused_by_name(text: str) -> None:
    scope = expr.Scope(variables={}, locals={}, root="/r")
    with pytest.raises(expr.ExprError):
        expr.evaluate(text, scope)


@pytest.mark.parametrize("text, want", [
    ('${var.l["1"]}', "y"), ('${var.m[1]}', "one"), ('${var.l[1.0]}', "y"), ('${var.m.a.0}', "x"),
])
def test_indexes_convert_as_packer_converts_them(text: str, want: str) -> None:
    scope = expr.Scope(variables={"l": ["x", "y"], "m": {"1": "one", "a": ["x"]}}, locals={}, root="/r")
    assert expr.evaluate(text, scope) == want


@pytest.mark.parametrize("text", ['${var.l[-1]}', '${var.l[0.5]}', '${var.l[2]}', '${var.s[0]}', '${var.m.b}'])
def test_an_index_packer_refuses_is_refused_not_read_from_the_end_or_a_string(text: str) -> None:
    scope = expr.Scope(variables={"l": ["x", "y"], "s": "abc", "m": {"a": 1}}, locals={}, root="/r")
    with pytest.raises(expr.ExprError, match="no element"):
        expr.evaluate(text, scope)


def test_the_report_names_a_gap_not_a_failure_and_stops_there() -> None:
    files = {"a.pkr.hcl": """
build {
  sources = ["source.amazon-ebs.w"]
  provisioner "shell" {
    inline = ["yum frobnicate"]
  }
  provisioner "shell" {
    inline = ["echo after"]
  }
}
"""}
    first, second = parse_steps(files, "/r")
    raw = RawRun(results=[RawResult(first, True, 97, 0.1, "", "cannot answer"), RawResult(second, False)],
                 calls=[], gaps=[("001", "yum frobnicate")], errors=[], packages=[], units=[],
                 etc_written=[], etc_removed=[], timed_out=False, kept=None)
    rep = report.build_report("v", raw, [], 0.2, {})
    assert [v.status for v in rep.steps] == [report.GAP, report.NOT_RUN]
    assert rep.failure is None and rep.ok and rep.to_dict()["complete"] is False
    assert "stand-in cannot answer: yum frobnicate" in rep.steps[0].reason
    assert any(line.startswith("not rehearsable: step 1") for line in report.lines(rep))


# ------------------------------------------------------------------------------------- stand-ins

STANDINS = Path(__file__).resolve().parent.parent / "amibuild" / "rehearse" / "standins"


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is installed by scripts/setup.sh")
def test_the_stand_ins_and_the_runner_are_shellcheck_clean() -> None:
    scripts = sorted(STANDINS.glob("*.sh"))
    assert {p.name for p in scripts} >= {"standin.sh", "runner.sh", "enter.sh", "errhook.sh"}
    done = subprocess.run(["shellcheck", *map(str, scripts)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


@pytest.fixture
def tools(tmp_path: Path):
    """The stand-in under each tool name, run on this machine with its state in a temp folder (outside
    the rehearsal copy a stand-in lays down no files)."""
    state, bin_dir = tmp_path / "state", tmp_path / "bin"
    state.mkdir()
    bin_dir.mkdir()
    for name in ("calls", "gaps", "packages", "units", "refuse", "step"):
        (state / name).touch()
    (state / "refuse").write_text("vendor-agent\n")
    for tool in ("yum", "rpm", "systemctl", "curl", "wget", "aws", "uname"):
        (bin_dir / tool).symlink_to(STANDINS / "standin.sh")

    def call(*argv: str, cwd: Path = tmp_path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", str(bin_dir / argv[0]), *argv[1:]], cwd=cwd, capture_output=True, text=True,
                              env={"PATH": os.environ["PATH"], "AMIBUILD_REHEARSE_STATE": str(state)})

    call.state = state  # type: ignore[attr-defined]
    return call


def test_an_install_is_recorded_and_rpm_q_knows_it(tools) -> None:
    assert tools("yum", "install", "-y", "ceph-common", "containerd-1.7.*").returncode == 0
    assert tools("rpm", "-q", "ceph-common").stdout == "ceph-common-1.0.0-1.amzn2.x86_64\n"
    assert tools("rpm", "-q", "containerd", "--qf", "%{VERSION}").stdout == "1.7.0"
    missing = tools("rpm", "-q", "nope")
    assert missing.returncode == 1 and "package nope is not installed" in missing.stdout
    refused = tools("yum", "install", "-y", "vendor-agent")
    assert refused.returncode == 1 and "vendor-agent" in refused.stderr
    assert (tools.state / "packages").read_text() == "ceph-common\t\ncontainerd\t1.7.*\n"


def test_a_download_and_its_checksum_file_match(tools, tmp_path: Path) -> None:
    url = "https://amazon-eks.s3.us-west-2.amazonaws.com/1.29.0/2024-01-04/bin/linux/amd64/kubelet"
    assert tools("curl", "-sSL", "-o", "kubelet", url).returncode == 0
    assert tools("wget", "-q", f"{url}.sha256").returncode == 0
    assert subprocess.run(["sha256sum", "-c", "kubelet.sha256"], cwd=tmp_path, capture_output=True).returncode == 0
    assert tools("aws", "s3", "cp", "--region", "us-west-2", "s3://b/1.29/cni.tgz", ".").returncode == 0
    assert tarfile.is_tarfile(tmp_path / "cni.tgz")
    (tmp_path / "kubelet").chmod(0o755)
    assert subprocess.run([str(tmp_path / "kubelet"), "--version"], capture_output=True,
                          text=True).stdout == "Kubernetes v1.29.0\n"


def test_systemctl_enable_records_the_unit_and_every_call_is_logged(tools) -> None:
    assert tools("systemctl", "enable", "--now", "kubelet").returncode == 0
    assert tools("systemctl", "is-enabled", "kubelet").stdout == "enabled\n"
    assert (tools.state / "units").read_text() == "kubelet.service\tenabled\n"
    assert [line.split("\t")[1] for line in (tools.state / "calls").read_text().splitlines()] == [
        "systemctl", "systemctl"]


def test_a_call_a_stand_in_cannot_answer_says_so_by_name(tools) -> None:
    result = tools("aws", "ec2", "describe-instances")
    assert result.returncode == 97
    assert "the stand-in for aws cannot answer: aws ec2 describe-instances" in result.stderr
    assert (tools.state / "gaps").read_text().endswith("aws ec2 describe-instances\n")


def test_a_command_this_machine_lacks_is_not_rehearsable_and_a_failure_names_its_line() -> None:
    files = {"a.pkr.hcl": """
build {
  sources = ["source.amazon-ebs.w"]
  provisioner "shell" {
    inline = ["grubby2 --update-kernel=ALL"]
  }
}
"""}
    (step,) = parse_steps(files, "/r")
    gap = RawRun(results=[RawResult(step, True, 127, 0.1, "", "/tmp/script_1.sh: line 2: grubby2: command not found\n")],
                 calls=[], gaps=[], errors=[], packages=[], units=[], etc_written=[], etc_removed=[],
                 timed_out=False, kept=None)
    rep = report.build_report("v", gap, [], 0.1, {})
    assert rep.steps[0].status == report.GAP and "`grubby2` is not on this machine" in rep.steps[0].reason

    failed = RawRun(results=[RawResult(step, True, 2, 0.1, "out\n", "bad thing\n")], calls=[], gaps=[],
                    errors=[("/tmp/script_1.sh", 2, 2, "grubby2 --update-kernel=ALL")], packages=[], units=[],
                    etc_written=[], etc_removed=[], timed_out=False, kept=None)
    rep = report.build_report("v", failed, [], 0.1, {})
    assert rep.steps[0].status == report.FAILED and not rep.ok
    # line 2 of the uploaded file is the first inline command (line 1 is Packer's shebang)
    assert rep.failure.script == "inline command 1 (grubby2 --update-kernel=ALL)"
    assert rep.failure.output_tail == ("out", "bad thing")


@pytest.mark.parametrize("text, want", [('${tonumber("1e3")}', 1000), ('${tonumber("2.5")}', 2.5), ('${tonumber(7)}', 7),
                                        ('${tonumber(null) == null}', True)])
def test_tonumber_converts_as_packer_does(text: str, want) -> None:
    got = expr.evaluate(text, expr.Scope(variables={}, locals={}, root="/r"))
    assert got == want and type(got) is type(want)


@pytest.mark.parametrize("text", ['${tonumber(true)}', '${tonumber(" 5")}', '${tonumber("1_000")}', '${tonumber("x")}'])
def test_tonumber_refuses_what_packer_refuses(text: str) -> None:
    with pytest.raises(expr.ExprError, match="tonumber"):
        expr.evaluate(text, expr.Scope(variables={}, locals={}, root="/r"))


@pytest.mark.parametrize("text, want", [
    ('${replace(var.v, "/\\\\.[0-9]+$/", "")}', "1.29"), ('${replace("a-b-c", "/(\\\\w)-/", "$1+")}', "a+b+c"),
    ('${replace("ab", "/(?P<x>a)/", "[$${x}$2$$]")}', "[a$]b"), ('${replace("a/b", "/", "-")}', "a-b"),
])
def test_replace_reads_a_pattern_between_slashes_as_a_regular_expression_as_packer_does(text: str, want: str) -> None:
    assert expr.evaluate(text, expr.Scope(variables={"v": "1.29.3"}, locals={}, root="/r")) == want


@pytest.mark.parametrize("text", ['${format("%03d", 5)}', '${format("%.1f", 2)}', '${format("%q", "x")}',
                                  '${format("%s")}', '${format("%s", "a", "b")}', '${format("%d", "x")}'])
def test_format_refuses_by_name_what_it_would_get_wrong(text: str) -> None:
    with pytest.raises(expr.ExprError, match="format"):
        expr.evaluate(text, expr.Scope(variables={}, locals={}, root="/r"))
