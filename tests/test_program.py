"""The `amibuild` program as a user meets it: parse errors, closed pipes, finding the pipeline file,
`amibuild init`, its own config, and the shipped example with the network blocked."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from amibuild.pipeline import Overrides, load
from amibuild.pipeline import support
from amibuild.errors import SpecError
from amibuild.sandbox import SandboxError
from amibuild.sandbox import moto_check
from conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "amibuild" / "pipeline" / "example.hcl"
ENABLED = {"ceph", "ceph-arm", "ceph-al2"}

PIPELINE = """\
pipeline {
  name    = "t"
  regions = ["us-west-2"]
}

variant "ceph" {
  extra_packages = ["ceph-common"]
}
"""


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("amibuild: error: "), lines[0]
    assert "Traceback" not in result.stderr
    return lines[0]


# ------------------------------------------------------------------------------- parse errors


@pytest.mark.parametrize("args, words", [
    (["build-ami", "--extra-pkgs", "ceph-common"], ["build-ami", "unknown flag --extra-pkgs", "did you mean --extra-pkg"]),
    (["build-ami", "--extra_pkg", "ceph-common"], ["unknown flag --extra_pkg", "did you mean --extra-pkg?"]),
    (["build-amis"], ["unknown task 'build-amis'", "did you mean build-ami?"]),
    (["--lisst"], ["unknown flag --lisst", "did you mean --list"]),
    (["render", "--extra-pkg"], ["render", "--extra-pkg needs a value"]),
    (["render", "--extra-pkg", "--json"], ["render", "--extra-pkg needs a value"]),
    (["runs", "--limit"], ["runs", "--limit needs a value"]),
    (["runs", "--limit", "abc"], ["runs", "--limit abc", "whole number"]),
    (["build-ami", "--parallel=x2"], ["--parallel 'x2'", "whole number"]),
    (["render", "ceph"], ["render", "unexpected argument 'ceph'"]),
    (["--list-depth", "abc", "--list"], ["--list-depth abc", "whole number"]),
], ids=["flag", "underscore", "task", "core-flag", "missing-list-value", "list-value-is-a-flag", "missing-value",
        "bad-number", "bad-number-inline", "stray-word", "core-bad-number"])
def test_parse_errors_are_one_line_with_exit_2_and_write_nothing(tmp_path: Path, args, words) -> None:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    line = one_error_line(run_cli(tmp_path, *args, binary="amibuild"))
    for word in words:
        assert word in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["amibuild.hcl"]


@pytest.mark.parametrize("args, word", [
    (["runs", "matrix"], "'matrix'"),
    (["iam-policy", "--task", "fleet", "--task", "matrix"], "'matrix'"),
], ids=["two-tasks", "a-flag-twice-then-a-task"])
def test_a_second_command_on_one_line_is_bad_input_and_nothing_runs(tmp_path: Path, args, word) -> None:
    """invoke runs every task named on the line: `amibuild runs matrix` ran both, and `iam-policy --task
    fleet --task matrix` printed a policy, then ran matrix. One command per line; a stray word is refused."""
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    result = run_cli(tmp_path, *args, binary="amibuild")
    line = one_error_line(result)
    assert word in line and "one command at a time" in line, line
    assert result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["amibuild.hcl"]


def test_version_list_and_task_help(tmp_path: Path) -> None:
    from amibuild import __version__

    assert run_cli(tmp_path, "--version", binary="amibuild").stdout.strip() == f"amibuild {__version__}"
    listing = run_cli(tmp_path, "--list", binary="amibuild")
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.startswith("Subcommands:")
    for name in ("render", "validate", "build-ami", "init", "sandbox", "demo"):
        assert f"\n  {name} " in listing.stdout or f"\n  {name}\n" in listing.stdout, name
    help_text = run_cli(tmp_path, "build-ami", "--help", binary="amibuild")
    assert help_text.returncode == 0 and "--extra-pkg" in help_text.stdout and "Usage: amibuild" in help_text.stdout


def closed_pipe_run(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`python ARGV` with stdout a pipe whose reader is already gone: every write fails,
    deterministically (what `| head -1` does to a long listing once head has its line). A real
    process: only one shows what a closed pipe does to the interpreter's own flush at exit."""
    environ = {k: v for k, v in os.environ.items() if k != "AMIBUILD_DEBUG"}
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environ.get("PYTHONPATH")]))
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, *argv], cwd=cwd, env=environ, text=True, timeout=120,
                              stdin=subprocess.DEVNULL, stdout=write_end, stderr=subprocess.PIPE)
    finally:
        os.close(write_end)


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    runs = tmp_path / "build" / "runs"
    runs.mkdir(parents=True)
    for n in range(30):
        (runs / f"2026010{n % 9}T00000{n}Z-{n:06x}.json").write_text(json.dumps(
            {"run_id": f"r{n}", "started": "2026-01-01T00:00:00Z", "variants": [{"name": "a", "status": "built"}]}))
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    for args in (["runs"], ["--list"], ["matrix"]):
        result = closed_pipe_run(tmp_path, "-m", "amibuild", *args)
        assert result.returncode == 0, (args, result.stderr)
        assert result.stderr == "", (args, result.stderr)


def test_runs_piped_into_head_gives_the_first_line(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    shell = subprocess.run(f"{sys.executable} -m amibuild --list | head -1; echo \"status=${{PIPESTATUS[0]}}\"",
                           shell=True, executable="/bin/bash", cwd=tmp_path, capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert shell.stdout.splitlines()[-1] == "status=0"
    assert "Traceback" not in shell.stderr and "BrokenPipe" not in shell.stderr


# ------------------------------------------------------------------------------- the pipeline file


def test_render_from_a_subfolder_finds_the_file_above_and_writes_build_beside_it(tmp_path: Path) -> None:
    repo = tmp_path / "pipelines"
    (repo / ".git").mkdir(parents=True)
    (repo / "amibuild.hcl").write_text(PIPELINE)
    deep = repo / "docs" / "notes"
    deep.mkdir(parents=True)
    result = run_cli(deep, "render", "--json", binary="amibuild")
    assert result.returncode == 0, result.stderr
    (variant,) = json.loads(result.stdout)["variants"]
    assert variant["name"] == "ceph"  # the file's variant, not a `default` made of flags
    assert (repo / "build" / "ceph" / "amibuild.pkr.hcl").is_file()
    assert not (deep / "build").exists() and not (repo / "docs" / "build").exists()
    assert "no amibuild.hcl" not in result.stderr


def test_the_search_stops_at_the_repository_root_and_says_where_it_looked(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)  # outside the repository: not this one's
    repo = tmp_path / "other"
    (repo / ".git").mkdir(parents=True)
    sub = repo / "sub"
    sub.mkdir()
    result = run_cli(sub, "render", "--extra-pkg", "htop", "--json", binary="amibuild")
    assert result.returncode == 0, result.stderr
    assert [v["name"] for v in json.loads(result.stdout)["variants"]] == ["default"]
    notes = [line for line in result.stderr.splitlines() if "no amibuild.hcl" in line]
    assert len(notes) == 1 and str(sub) in notes[0] and str(repo) in notes[0], result.stderr
    assert (sub / "build" / "default").is_dir()


def test_pipeline_flag_overrides_the_search(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "mine.hcl").write_text(PIPELINE.replace('variant "ceph"', 'variant "mine"'))
    result = run_cli(tmp_path, "render", "--pipeline", "elsewhere/mine.hcl", "--json", binary="amibuild")
    assert result.returncode == 0, result.stderr
    assert [v["name"] for v in json.loads(result.stdout)["variants"]] == ["mine"]
    assert (other / "build" / "mine").is_dir()


@pytest.mark.parametrize("text", ["", "# only a comment\n\n"], ids=["empty", "comments"])
def test_an_empty_pipeline_file_is_bad_input(tmp_path: Path, text: str) -> None:
    (tmp_path / "amibuild.hcl").write_text(text)
    (tmp_path / "sub").mkdir()
    line = one_error_line(run_cli(tmp_path / "sub", "render", "--extra-pkg", "htop", binary="amibuild"))
    assert "amibuild.hcl: the pipeline file is empty" in line
    assert not (tmp_path / "build").exists() and not (tmp_path / "sub" / "build").exists()


def test_the_shipped_example_renders_with_the_network_blocked(tmp_path: Path) -> None:
    """The tripwire proxy (conftest) fails anything that leaves loopback: the opt-in variant that
    clones GitHub must stay out of a plain run."""
    assert os.environ["HTTPS_PROXY"] == "http://127.0.0.1:9"
    assert (ROOT / "amibuild.hcl").read_text() == EXAMPLE.read_text()  # the repository's file is the packaged one
    shutil.copy(EXAMPLE, tmp_path / "amibuild.hcl")
    result = run_cli(tmp_path, "render", "--extra-pkg", "ceph-common", "--json",
                      env={"AMIBUILD_CACHE": str(tmp_path / "cache")}, binary="amibuild")
    assert result.returncode == 0, result.stderr
    assert {v["name"] for v in json.loads(result.stdout)["variants"]} == ENABLED
    assert {p.name for p in (tmp_path / "build").iterdir()} == ENABLED
    assert not (tmp_path / "cache").exists()  # nothing was cloned


def test_the_human_answer_goes_to_stdout_and_run_wide_notes_once(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE, tmp_path / "amibuild.hcl")
    result = run_cli(tmp_path, "render", binary="amibuild")
    assert result.returncode == 0, result.stderr
    assert sorted(line.split()[0] for line in result.stdout.splitlines()) == sorted(ENABLED)
    note_counts = {line: result.stderr.count(line) for line in result.stderr.splitlines() if "note:" in line}
    assert note_counts and all(n == 1 for n in note_counts.values()), result.stderr


# ------------------------------------------------------------------------------- enabled = false


def test_a_disabled_variant_is_left_out_unless_named(tmp_path: Path) -> None:
    path = tmp_path / "amibuild.hcl"
    path.write_text(PIPELINE + 'variant "later" {\n  enabled = false\n  extends = "ceph"\n}\n'
                    'variant "child" {\n  extends = "later"\n}\n')
    assert [v.name for v in load(path).variants] == ["ceph", "child"]  # a child of a disabled one is not
    assert [v.name for v in load(path, Overrides(variants=("later",))).variants] == ["later"]


def test_enabled_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "amibuild.hcl"
    path.write_text('variant "a" {\n  enabled = false\n}\n')
    with pytest.raises(SpecError, match="every variant has `enabled = false`.*--variant"):
        load(path)
    path.write_text('defaults {\n  enabled = false\n}\nvariant "a" {\n}\n')
    with pytest.raises(SpecError, match="`enabled` belongs in a variant block"):
        load(path)
    path.write_text('variant "a" {\n  enabled = "perhaps"\n}\n')
    with pytest.raises(SpecError, match='variant "a": enabled: expected true or false'):
        load(path)


# ------------------------------------------------------------------------------- init


def test_init_writes_a_starter_that_validates_and_refuses_to_overwrite(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("*.log")  # no final newline: the entry goes on its own line
    result = run_cli(tmp_path, "init", binary="amibuild")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / ".gitignore").read_text() == "*.log\n/build/\n"
    pipeline = load(tmp_path / "amibuild.hcl")
    (variant,) = pipeline.variants
    assert (variant.os, variant.extra_packages) == ("al2023", ("ceph-common",))
    # a version in EKS standard support: the starter gives a new user no warning
    assert support.support_warning(variant.kubernetes_version, support.AS_OF) is None
    starter = (tmp_path / "amibuild.hcl").read_text()
    assert starter.count("\n#") >= 5  # commented for a new user

    (tmp_path / "amibuild.hcl").write_text("# mine\n" + starter)
    line = one_error_line(run_cli(tmp_path, "init", binary="amibuild"))
    assert "already exists" in line
    assert (tmp_path / "amibuild.hcl").read_text().startswith("# mine\n")
    assert (tmp_path / ".gitignore").read_text() == "*.log\n/build/\n"

    if shutil.which("packer"):
        validated = run_cli(tmp_path, "validate", binary="amibuild")
        assert validated.returncode == 0, validated.stderr
        assert validated.stdout.startswith("1 variant(s) valid with packer")


def test_init_keeps_an_existing_build_entry(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("/build/\n")
    assert run_cli(tmp_path, "init", binary="amibuild").returncode == 0
    assert (tmp_path / ".gitignore").read_text() == "/build/\n"


# ------------------------------------------------------------------------------- config


def test_amibuild_yaml_beside_the_pipeline_file_and_env_set_the_build_folder(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    (tmp_path / "amibuild.yaml").write_text("amibuild:\n  build_dir: out\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    assert run_cli(sub, "render", binary="amibuild").returncode == 0
    assert (tmp_path / "out" / "ceph").is_dir() and not (tmp_path / "build").exists()
    assert run_cli(sub, "render", env={"AMIBUILD_BUILD_DIR": "env-out"}, binary="amibuild").returncode == 0
    assert (tmp_path / "env-out" / "ceph").is_dir()
    assert run_cli(sub, "render", "--build-dir", "flag-out", binary="amibuild").returncode == 0
    assert (sub / "flag-out" / "ceph").is_dir()  # a flag is taken as given, from the current folder


# ------------------------------------------------------------------------------- packaging faults


def test_a_missing_packaged_script_is_an_internal_error_not_bad_input(tmp_path: Path) -> None:
    """A copy of the package without one provisioner script, as a broken install would be."""
    broken = tmp_path / "site"
    shutil.copytree(ROOT / "amibuild", broken / "amibuild", ignore=shutil.ignore_patterns("__pycache__"))
    (broken / "amibuild" / "render" / "provision" / "install-packages.sh").unlink()
    work = tmp_path / "work"
    work.mkdir()
    (work / "amibuild.hcl").write_text(PIPELINE)
    result = subprocess.run([sys.executable, "-m", "amibuild", "render"], cwd=work, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(broken)}, timeout=120)
    assert result.returncode == 1, result.stderr
    assert "install-packages.sh" in result.stderr and "reinstall amibuild" in result.stderr
    assert str(broken) in result.stderr  # it was the broken copy that ran
    assert not (work / "build").exists()


def test_sandbox_and_demo_without_moto_name_the_extra(tmp_path: Path) -> None:
    for task in ("sandbox", "demo"):
        # moto made unimportable in this process only, as in an install without the extra
        result = subprocess.run(
            [sys.executable, "-c", "import sys; sys.modules['moto'] = None; from amibuild.cli.main import main; "
                                   f"main(['amibuild', '{task}'])"],
            cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
        line = one_error_line(result)
        assert "pip install 'amibuild[sandbox]'" in line, line
    assert list(tmp_path.iterdir()) == []


def test_the_moto_check_names_a_missing_attribute() -> None:
    moto_check.check_internals()  # the installed moto has everything
    with pytest.raises(SandboxError, match=r"moto \S+ has no moto\.ssm\.models\.ssm_backendz, which the sandbox"):
        moto_check.check_internals(required=(*moto_check.REQUIRED, ("moto.ssm.models", "ssm_backendz")))
    with pytest.raises(SandboxError, match=r"has no moto\.cloudformation\.parsing\.ResourceMap\.gone"):
        moto_check.check_internals(required_instance=(("moto.cloudformation.parsing", "ResourceMap", "gone"),))


def test_the_moto_check_covers_every_moto_name_the_sandbox_imports() -> None:
    """A new `from moto... import X` in the sandbox without a line in REQUIRED fails here."""
    import ast

    # what amibuild/sandbox/__init__.py held before it was split into these modules
    trees = [ast.parse((ROOT / "amibuild" / "sandbox" / f"{name}.py").read_text())
             for name in ("__init__", "seed", "process", "server", "patches", "touched")]
    imported = {(node.module, alias.name) for tree in trees for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("moto")
                for alias in node.names}
    assert len(imported) >= 10
    checked = {(module, dotted.split(".")[0]) for module, dotted in moto_check.REQUIRED}
    assert imported <= checked, imported - checked


# ------------------------------------------------------------------------------- `invoke` in this repository


@pytest.mark.parametrize("args, words", [
    (["build-ami", "--extra-pkgs", "ceph-common"], ["build-ami: unknown flag --extra-pkgs", "did you mean --extra-pkg",
                                                    "`invoke build-ami --help`"]),
    (["build-amis"], ["unknown task 'build-amis'", "did you mean build-ami?"]),
    (["runs", "--limit", "abc"], ["--limit abc", "whole number"]),
], ids=["flag", "task", "bad-number"])
def test_invoke_here_reports_parse_errors_the_same_way(tmp_path: Path, args, words) -> None:
    line = one_error_line(run_cli(tmp_path, *args))
    for word in words:
        assert word in line, line
    assert list(tmp_path.iterdir()) == []


def test_invoke_here_ends_quietly_on_a_closed_pipe(tmp_path: Path) -> None:
    result = closed_pipe_run(tmp_path, "-m", "invoke", "-r", str(ROOT), "--list")
    assert (result.returncode, result.stderr) == (0, "")


@pytest.mark.parametrize("sitecustomize, words", [
    ("import moto.cloudformation.responses as r\ndel r.CloudFormationResponse._validate_different_update\n",
     ["has no moto.cloudformation.responses.CloudFormationResponse._validate_different_update, "
      "which the sandbox patches"]),
    ("import moto.core.utils\ndel moto.core.utils.utcnow\n", ["cannot import moto.", "utcnow"]),
], ids=["attribute", "import"])
def test_a_sandbox_on_a_moto_without_what_it_uses_refuses_to_start_naming_it(tmp_path: Path, monkeypatch,
                                                                             sitecustomize, words) -> None:
    """The emulator child checks moto before serving; its one line becomes the error. Here moto
    loses a name at interpreter start-up (a sitecustomize on PYTHONPATH), as an upgrade that renamed
    it would."""
    from importlib.metadata import version

    from amibuild.sandbox import Sandbox

    (tmp_path / "sitecustomize.py").write_text(sitecustomize)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    sandbox = Sandbox()
    with pytest.raises(SandboxError) as caught:
        sandbox.start()
    message = str(caught.value)
    assert message.startswith(f"moto {version('moto')}") and "\n" not in message, message
    assert message.endswith("install the moto version amibuild was made for: pip install 'amibuild[sandbox]'")
    for word in words:
        assert word in message, message
    assert not sandbox.running


def test_help_shows_amibuilds_own_options_only(tmp_path: Path) -> None:
    """`amibuild --help` lists amibuild's options and commands, not invoke's core flags; a command's
    help has no `[--core-opts]`. The hidden core flags still parse (shell completion uses them)."""
    top = run_cli(tmp_path, "--help", binary="amibuild")
    assert top.returncode == 0 and top.stdout.startswith("Usage: amibuild [--debug] [--config FILE] <command>")
    for invoke_only in ("--write-pyc", "--list-depth", "--list-format", "--complete", "--print-completion-script",
                        "core-opts", "Core options"):
        assert invoke_only not in top.stdout, invoke_only
    assert "build-ami" in top.stdout and "--version" in top.stdout
    one = run_cli(tmp_path, "verify", "--help", binary="amibuild")
    assert one.returncode == 0 and one.stdout.startswith("Usage: amibuild verify [--options]\n"), one.stdout
    assert "core-opts" not in one.stdout and "other tasks here" not in one.stdout and "--channel" in one.stdout
    assert run_cli(tmp_path, "--list-depth", "1", "--list", binary="amibuild").returncode == 0
