"""Bad numbers in amibuild's own configuration (amibuild.yaml, AMIBUILD_KEY; invoke.yaml and
INVOKE_AMIBUILD_KEY under `invoke`): one line naming the key and where it is read from, exit 2,
nothing written, before any AWS work. No sandbox: a value that got through would fail on AWS
credentials instead, which the assertions tell apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli

PIPELINE = """\
pipeline {
  name    = "t"
  regions = ["us-west-2"]
}
variant "ceph" {
  kubernetes_version = "1.31"
  extra_packages     = ["ceph-common"]
}
"""

# (key, a bad value, the task that reads the key and the flags it needs)
CASES = [
    ("max_parallel", "abc", ("build-ami", "--dry-run")),
    ("max_parallel", "0", ("build-ami", "--dry-run")),
    ("stall_after", "abc", ("build-ami", "--dry-run")),
    ("read_timeout", "abc", ("test-ami", "--variant", "ceph", "--ami", "ami-12345678")),
    ("read_timeout", "abc", ("build-ami", "--dry-run", "--boot-test")),
    ("channel_deadline", "-1", ("build-ami", "--dry-run")),
]


def _workdir(tmp_path: Path) -> Path:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    return tmp_path


def _assert_refused(result, key: str, source: str, tmp_path: Path) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"amibuild: error: amibuild.{key} "), lines[0]
    assert source in lines[0], lines[0]
    assert "credentials" not in result.stderr and "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["amibuild.hcl"]  # no build folder, no record


@pytest.mark.parametrize("key,value,args", CASES)
@pytest.mark.parametrize("spelling", ["short", "long"])
def test_the_amibuild_command_names_the_key_and_its_source(tmp_path: Path, key, value, args, spelling) -> None:
    env_name = f"AMIBUILD_{key.upper()}" if spelling == "short" else f"AMIBUILD_AMIBUILD_{key.upper()}"
    result = run_cli(_workdir(tmp_path), *args, binary="amibuild", env={env_name: value})
    _assert_refused(result, key, f"amibuild.yaml / AMIBUILD_{key.upper()}", tmp_path)


@pytest.mark.parametrize("key,value,args", CASES[:3])
def test_invoke_in_this_repository_names_its_own_file_and_variable(tmp_path: Path, key, value, args) -> None:
    result = run_cli(_workdir(tmp_path), *args, "--pipeline", str(tmp_path / "amibuild.hcl"),
                     env={f"INVOKE_AMIBUILD_{key.upper()}": value})
    _assert_refused(result, key, f"invoke.yaml / INVOKE_AMIBUILD_{key.upper()}", tmp_path)


def test_a_config_file_value_is_refused_the_same_way(tmp_path: Path) -> None:
    workdir = _workdir(tmp_path)
    (workdir / "amibuild.yaml").write_text("amibuild:\n  max_parallel: many\n")
    result = run_cli(workdir, "build-ami", "--dry-run", binary="amibuild")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == ("amibuild: error: amibuild.max_parallel 'many': a whole number of at least 1, "
                                     "e.g. amibuild.max_parallel 5 (from amibuild.yaml / AMIBUILD_MAX_PARALLEL)")
    assert sorted(p.name for p in workdir.iterdir()) == ["amibuild.hcl", "amibuild.yaml"]


@pytest.mark.parametrize("name,text,words", [
    ("amibuild.yaml", "amibuild:\n  max_paralel: 4\n", "amibuild.max_paralel: unknown setting (did you mean 'max_parallel'?)"),
    ("amibuild.yaml", "amibuld:\n  max_parallel: 4\n", "unknown section `amibuld` (did you mean 'amibuild'?)"),
    ("amibuild.yaml", "amibuild: [1, 2\n", "not valid YAML: expected ',' or ']', but got '<stream end>' at line 2, column 1"),
    ("amibuild.yaml", "amibuild: 5\n", "amibuild: expected a mapping of settings"),
    ("amibuild.yaml", "- build_dir\n", "expected a mapping with an `amibuild:` section"),
    ("amibuild.json", '{"amibuild": ', "not valid JSON"),
    ("amibuild.yaml", "# r\xe9glages\namibuild: {}\n", "not valid YAML: 'utf-8' codec can't decode byte 0xe9"),
])
def test_a_config_file_that_is_not_amibuild_settings_is_one_line_naming_it(tmp_path: Path, name, text, words) -> None:
    """A typo'd setting would be ignored, and a broken file was a traceback: both are bad input."""
    workdir = _workdir(tmp_path)
    (workdir / name).write_bytes(text.encode("latin-1"))  # a file saved in Latin-1 was a traceback too
    result = run_cli(workdir, "build-ami", "--dry-run", binary="amibuild")
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"amibuild: error: {workdir / name}: {words}"), line
    assert sorted(p.name for p in workdir.iterdir()) == sorted(["amibuild.hcl", name])


@pytest.mark.parametrize("name", ["amibuild.yaml", "amibuild.json"])
def test_a_config_file_that_cannot_be_read_is_one_line_naming_it(tmp_path: Path, name: str) -> None:
    """An unreadable one (a folder here; for people, an /etc/amibuild.yaml only root may read) was a traceback."""
    workdir = _workdir(tmp_path)
    (workdir / name).mkdir()
    result = run_cli(workdir, "runs", binary="amibuild")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"amibuild: error: {workdir / name}: cannot be read (Is a directory); fix or remove the file"


def test_a_config_file_given_with_config_is_checked_too_and_an_empty_one_is_fine(tmp_path: Path) -> None:
    workdir = _workdir(tmp_path)
    (workdir / "settings.yaml").write_text("amibuild:\n  lease_wiat: 3\n")
    result = run_cli(workdir, "--config", "settings.yaml", "build-ami", "--dry-run", binary="amibuild")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().startswith("amibuild: error: settings.yaml: amibuild.lease_wiat: unknown setting "
                                            "(did you mean 'lease_wait'?)"), result.stderr
    (workdir / "amibuild.yaml").write_text("# nothing set yet\n")
    (workdir / "settings.yaml").write_text("amibuild:\n  build_dir: out\n")
    fine = run_cli(workdir, "--config", "settings.yaml", "runs", "--json", binary="amibuild")
    assert fine.returncode == 0, fine.stderr
    assert fine.stdout.strip() == "[]" and fine.stderr == ""


@pytest.mark.parametrize("text,words", [
    ("amibuild:\n  pipeline: [amibuild.hcl]\n", "amibuild.pipeline: expected text"),
    ("amibuild:\n  pipeline: true\n", "amibuild.pipeline: expected text"),
    ("amibuild:\n  packer: [packer, x]\n", "amibuild.packer: expected text"),
    ("amibuild:\n  build_dir: {a: b}\n", "amibuild.build_dir: expected text"),
    ("amibuild:\n  build_dir: [a, b]\n", "amibuild.build_dir: expected text"),
    ("amibuild:\n  cache_dir: [x]\n", "amibuild.cache_dir: expected text"),
    ("amibuild:\n  max_parallel: [4]\n", "amibuild.max_parallel: expected a number"),
    ("amibuild:\n  lease_wait: true\n", "amibuild.lease_wait: expected a number"),
    ("amibuild:\n  read_timeout: {s: 3}\n", "amibuild.read_timeout: expected a number"),
])
def test_a_setting_of_the_wrong_type_is_one_line_naming_it(tmp_path: Path, text, words) -> None:
    """`pipeline: [a.hcl]` or `packer: [x]` was a traceback, `build_dir: [a, b]` a folder named "['a', 'b']",
    `lease_wait: true` one second: each is refused naming the file and the setting, exit 2."""
    workdir = _workdir(tmp_path)
    (workdir / "amibuild.yaml").write_text(text)
    result = run_cli(workdir, "build-ami", "--dry-run", binary="amibuild")
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"amibuild: error: {workdir / 'amibuild.yaml'}: {words}"), line
    assert sorted(p.name for p in workdir.iterdir()) == ["amibuild.hcl", "amibuild.yaml"]


def test_a_number_where_a_path_is_expected_is_read_as_its_text(tmp_path: Path) -> None:
    workdir = _workdir(tmp_path)
    (workdir / "amibuild.yaml").write_text("amibuild:\n  build_dir: 5\n")
    result = run_cli(workdir, "render", binary="amibuild")
    assert result.returncode == 0, result.stderr
    assert (workdir / "5" / "ceph" / "amibuild.pkr.hcl").is_file()


@pytest.mark.parametrize("name,words", [
    ("nope.yaml", "no such file"),
    ("settings.toml", "not a configuration file amibuild reads"),
    ("settings.py", "not a configuration file amibuild reads (.py)"),  # invoke would import (run) it
    ("folder.yaml", "not a file"),
])
def test_a_config_file_given_with_config_that_cannot_be_read_is_refused(tmp_path: Path, name, words) -> None:
    """`--config nope.yaml` (a typo) was ignored without a word, the build run with the defaults;
    `--config settings.toml` or a folder was a traceback. Each is one line naming the file, exit 2."""
    workdir = _workdir(tmp_path)
    if name == "settings.toml":
        (workdir / name).write_text("[amibuild]\nbuild_dir = 'out'\n")
    elif name == "settings.py":
        (workdir / name).write_text("open('ran', 'w')\n")
    elif name == "folder.yaml":
        (workdir / name).mkdir()
    before = sorted(p.name for p in workdir.iterdir())
    result = run_cli(workdir, "--config", name, "build-ami", "--dry-run", binary="amibuild")
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"amibuild: error: --config {name}: {words}"), line
    assert sorted(p.name for p in workdir.iterdir()) == before


def test_a_config_file_named_by_amibuild_runtime_config_that_is_not_there_is_refused(tmp_path: Path) -> None:
    result = run_cli(_workdir(tmp_path), "runs", binary="amibuild", env={"AMIBUILD_RUNTIME_CONFIG": "nope.json"})
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == "amibuild: error: AMIBUILD_RUNTIME_CONFIG=nope.json: no such file"


def test_an_amibuild_py_beside_the_pipeline_file_is_no_configuration_and_never_run(tmp_path: Path) -> None:
    """invoke imports `amibuild.py` (a user's own script of that name) as configuration: running it."""
    workdir = _workdir(tmp_path)
    (workdir / "amibuild.py").write_text("open('ran', 'w')\n")
    result = run_cli(workdir, "runs", "--json", binary="amibuild")
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stderr
    assert not (workdir / "ran").exists()
