"""The command line as users meet it: task list, help, and validate with the real packer, offline."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent


def tasks(cwd: Path) -> dict[str, str]:
    """Task name -> its summary, from invoke's JSON listing."""
    listing = json.loads(run_cli(cwd, "--list", "--list-format", "json").stdout)
    return {t["name"]: t["help"] or "" for t in listing["tasks"]}


def test_every_task_is_listed_with_a_summary(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "--list")
    assert result.returncode == 0
    summaries = tasks(tmp_path)
    assert {"render", "validate", "build-ami", "runs", "sandbox", "demo"} <= set(summaries)
    for name, summary in summaries.items():
        assert len(summary) > 10, f"{name} has no summary"
        assert name in result.stdout


def test_every_flag_of_every_task_has_help(tmp_path: Path) -> None:
    for name in tasks(tmp_path):
        result = run_cli(tmp_path, "--help", name)
        assert result.returncode == 0, (name, result.stdout, result.stderr)
        options = result.stdout.split("Options:", 1)
        if len(options) == 1:
            continue  # a task without flags
        for line in options[1].splitlines():
            match = re.match(r"^  (-\S.*?)(?:\s{2,}(\S.*))?$", line)
            if match:
                assert match.group(2), f"invoke {name}: {match.group(1)} has no help text"


@pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")
def test_validate_passes_on_the_example_without_aws_access(tmp_path: Path) -> None:
    """No credentials, no endpoint: the source AMI stays a build-time lookup and packer validates."""
    result = run_cli(tmp_path, "validate", "--pipeline", str(ROOT / "amibuild.hcl"), "--variant", "ceph",
                    "--variant", "ceph-arm", "--variant", "ceph-al2")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("valid ceph") == 3
    assert "looked up at build time" in result.stderr
    assert result.stdout.startswith("3 variant(s) valid with packer")  # the answer on stdout, progress on stderr


@pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")
def test_validate_reports_a_packer_refusal_as_one_line(tmp_path: Path) -> None:
    """A value packer itself refuses (not caught by amibuild's checks) still ends as one clear line,
    naming the flag that gave it (bad input: exit 2)."""
    result = run_cli(tmp_path, "validate", "--extra-pkg", "htop", "--var", "volume_type=io1")
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("amibuild: error: --var volume_type: Packer refuses the value of volume_type")
    assert "Traceback" not in result.stderr


def test_userdata_round_trips_through_decode_userdata(tmp_path: Path) -> None:
    made = run_cli(tmp_path, "userdata", "--cluster", "prod", "--os", "al2", "--proxy", "http://proxy.local:3128",
                  "--region", "eu-west-1", "--base64")
    assert made.returncode == 0, made.stderr
    (tmp_path / "ud.txt").write_text(made.stdout)
    decoded = run_cli(tmp_path, "decode-userdata", "ud.txt")
    assert decoded.returncode == 0, decoded.stderr
    assert "text/cloud-boothook" in decoded.stdout and "text/x-shellscript" in decoded.stdout
    assert "/etc/eks/bootstrap.sh prod" in decoded.stdout
    assert "http://proxy.local:3128" in decoded.stdout


def test_decode_userdata_refuses_garbage_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "junk.bin").write_bytes(bytes(range(256)) * 4)
    result = run_cli(tmp_path, "decode-userdata", "junk.bin")
    assert result.returncode == 2
    assert result.stderr.strip().startswith("amibuild: error: junk.bin: not user data")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("binary", ["amibuild", "invoke"])
def test_decode_userdata_help_and_a_mistyped_flag_where_its_source_goes(tmp_path: Path, binary: str) -> None:
    """invoke hands a positional argument the next token, a flag included: `--help` read as SOURCE, and
    `--file ud.txt` as SOURCE --file and an unknown task ud.txt."""
    for asked in ("--help", "-h"):
        shown = run_cli(tmp_path, "decode-userdata", asked, binary=binary)
        assert shown.returncode == 0, shown.stderr
        assert "decode-userdata [--options]" in shown.stdout and "--max-bytes" in shown.stdout
    assert run_cli(tmp_path, "decode-userdata", "--help", binary="amibuild").stdout.startswith(
        "Usage: amibuild decode-userdata [--options] SOURCE\n")
    for argv, words in ((["--file", "ud.txt"], "unknown flag --file"), (["--jsn", "ud.txt"], "unknown flag --jsn; "
                                                                                             "did you mean --json?"),
                        (["ud.txt", "--jsn"], "unknown flag --jsn; did you mean --json?")):
        refused = run_cli(tmp_path, "decode-userdata", *argv, binary=binary)
        assert refused.returncode == 2, refused.stderr
        (line,) = refused.stderr.strip().splitlines()
        assert line.startswith(f"amibuild: error: decode-userdata: {words}"), line
        assert line.endswith(f" (see `{binary} decode-userdata --help`)"), line
    (tmp_path / "ud.txt").write_text(run_cli(tmp_path, "userdata", "--cluster", "prod", "--os", "al2").stdout)
    for argv in (["ud.txt"], ["--source", "ud.txt"]):  # (`-`, stdin, needs a real process's stdin)
        decoded = run_cli(tmp_path, "decode-userdata", *argv, binary=binary)
        assert decoded.returncode == 0, decoded.stderr
        assert "/etc/eks/bootstrap.sh prod" in decoded.stdout


def test_every_task_that_reports_takes_json(tmp_path: Path) -> None:
    """Issue 6: reports are machine-readable. Tasks that print a document of their own kind
    (user data, YAML, a policy that is JSON already) or run a service are the exceptions."""
    documents = {"userdata", "aws-auth", "iam-policy", "sandbox", "demo"}
    for name in tasks(tmp_path):
        if name in documents:
            continue
        assert "--json" in run_cli(tmp_path, "--help", name).stdout, f"invoke {name} has no --json"


def test_render_json_lists_folders_and_fingerprints(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "render", "--extra-pkg", "htop", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    (variant,) = document["variants"]
    assert variant["name"] == "default" and len(variant["fingerprint"]) == 64
    assert (tmp_path / variant["directory"] / "render.json").is_file()
    assert json.loads((tmp_path / variant["directory"] / "render.json").read_text())["fingerprint"] == variant["fingerprint"]
