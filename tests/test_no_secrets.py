"""AWS credentials never reach a rendered file: not as values, not as provisioner environment."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from conftest import CliResult, run_cli

ROOT = Path(__file__).resolve().parent.parent
SENTINEL = "SENTINELsecretKEY0123456789abcdefDONOTLEAK"


def test_secret_access_key_is_in_no_rendered_file(tmp_path: Path, sandbox, monkeypatch) -> None:
    """With credentials set (sandbox: the source AMI is resolved), render every example variant."""
    # the example's upstream variant pins a ref: serve it from a local git repository of the fixture
    upstream = tmp_path / "upstream"
    shutil.copytree(ROOT / "tests/data/upstream/root-layout", upstream)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "fixture"], ["tag", "v20240227"]):
        subprocess.run([*git, *args], cwd=upstream, check=True, capture_output=True)
    monkeypatch.setenv("AMIBUILD_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SENTINEL)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SENTINEL + "TOKEN")
    def render(*args: str) -> CliResult:
        return run_cli(tmp_path, "render", "--pipeline", str(ROOT / "amibuild.hcl"),
                       "--build-dir", str(tmp_path / "build"), "--extra-pkg", "htop", *args)

    result = render("--variant", "ceph", "--variant", "ceph-arm")
    assert result.returncode == 0, result.stderr
    assert "source AMI ami-" in result.stderr  # credentials were there and were used
    upstream_result = render("--variant", "ceph-upstream", "--upstream", str(upstream),
                             "--var", "kubernetes_build_date=2024-01-04")
    assert upstream_result.returncode == 0, upstream_result.stderr
    files = [p for p in (tmp_path / "build").rglob("*") if p.is_file()]
    assert "ceph-upstream" in {p.parent.name for p in files}
    assert len(files) >= 9
    for path in files:
        assert SENTINEL not in path.read_text(errors="replace"), path
    assert SENTINEL not in result.stdout + result.stderr + upstream_result.stdout + upstream_result.stderr
