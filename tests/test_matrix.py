"""`invoke matrix`: the pipeline's variants as a CI matrix, and GitHub's `$GITHUB_OUTPUT` format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from amibuild.pipeline import matrix as matrix_mod
from amibuild.pipeline import load
from amibuild.errors import UsageError
from conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "amibuild.hcl"

# The repository's example pipeline file, as a matrix: file order, one entry per variant.
EXAMPLE_MATRIX = {
    "include": [
        {"variant": "ceph", "os": "al2023", "arch": "x86_64", "kubernetes_version": "1.35", "base": "eks-optimized"},
        {"variant": "ceph-arm", "os": "al2023", "arch": "arm64", "kubernetes_version": "1.35",
         "base": "eks-optimized"},
        {"variant": "ceph-al2", "os": "al2", "arch": "x86_64", "kubernetes_version": "1.32", "base": "eks-optimized"},
    ]
}


def test_matrix_of_the_example_pipeline_lists_every_enabled_variant_in_file_order() -> None:
    assert matrix_mod.matrix(load(EXAMPLE)) == EXAMPLE_MATRIX


def test_github_output_appends_one_compact_line_after_what_is_there(tmp_path: Path) -> None:
    out = tmp_path / "github_output"
    out.write_text("earlier=1\n")
    line = matrix_mod.github_output(EXAMPLE_MATRIX, out)
    assert out.read_text().splitlines() == ["earlier=1", line]
    name, _, value = line.partition("=")
    assert name == "matrix" and " " not in value
    assert json.loads(value) == EXAMPLE_MATRIX


def test_github_output_without_the_variable_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
    with pytest.raises(UsageError, match="GITHUB_OUTPUT is not set"):
        matrix_mod.github_output(EXAMPLE_MATRIX)


def test_github_output_refuses_more_jobs_than_github_runs(tmp_path: Path) -> None:
    big = {"include": [{"variant": f"v{i}"} for i in range(matrix_mod.GITHUB_MAX_JOBS + 1)]}
    with pytest.raises(UsageError, match="at most 256 jobs"):
        matrix_mod.github_output(big, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_matrix_json_through_the_cli(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "matrix", "--pipeline", str(EXAMPLE), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == EXAMPLE_MATRIX


def test_matrix_prints_a_readable_table_by_default(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "matrix", "--pipeline", str(EXAMPLE))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["variant", "os", "arch", "k8s", "base"]
    assert [line.split() for line in lines[1:]] == [
        [e["variant"], e["os"], e["arch"], e["kubernetes_version"], e["base"]] for e in EXAMPLE_MATRIX["include"]
    ]


def test_matrix_variant_flag_selects(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "matrix", "--pipeline", str(EXAMPLE), "--variant", "ceph-arm",
                    "--variant", "ceph", "--json")
    assert result.returncode == 0, result.stderr
    assert [e["variant"] for e in json.loads(result.stdout)["include"]] == ["ceph-arm", "ceph"]


def test_matrix_github_writes_exactly_one_matrix_line(tmp_path: Path) -> None:
    """What a workflow's plan job runs: the same matrix as --json, one `matrix=` line in the file."""
    out = tmp_path / "github_output"
    out.write_text("other=value\n")
    result = run_cli(tmp_path, "matrix", "--pipeline", str(EXAMPLE), "--github", env={"GITHUB_OUTPUT": str(out)})
    assert result.returncode == 0, result.stderr
    written = out.read_text().splitlines()
    assert written[0] == "other=value"
    matrix_lines = [line for line in written if line.startswith("matrix=")]
    assert len(matrix_lines) == 1 and len(written) == 2
    assert json.loads(matrix_lines[0].removeprefix("matrix=")) == EXAMPLE_MATRIX
    assert result.stdout.strip() == matrix_lines[0], "it prints what it wrote"


def test_matrix_github_without_github_output_exits_2_with_one_line(tmp_path: Path) -> None:
    result = run_cli(tmp_path, "matrix", "--pipeline", str(EXAMPLE), "--github")
    assert result.returncode == 2
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert message.startswith("amibuild: error: --github: GITHUB_OUTPUT is not set")
    assert result.stdout == ""


def test_matrix_refuses_a_bad_pipeline_file_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text('variant "Bad_Name" {\n}\n')
    result = run_cli(tmp_path, "matrix")
    assert result.returncode == 2
    assert result.stderr.strip().startswith("amibuild: error: amibuild.hcl")
