"""Bad input is refused through the real command line: exit code 2, one line naming the file:line,
field or flag and what to do, nothing written anywhere (no build/ folder appears) and no AWS write.

The cases are data: tests/data/bad_input.yaml, one entry per input."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from amibuild import hcl
from amibuild.bake.build_plan import new_run_id
from amibuild.pipeline import value_checks as checks
from faultproxy import FaultProxy
from conftest import run_cli

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


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    (tmp_path / "bad.pkrvars.hcl").write_text('volume_size = 40\ninstance_type = = "x"\n')
    (tmp_path / "good.pkrvars.hcl").write_text('volume_size = 40\n')
    return tmp_path


def _expand(text: str) -> str:
    """@@TEXT*N@@ -> TEXT repeated N times (long values and big files without storing them)."""
    return re.sub(r"@@(.*?)\*(\d+)@@", lambda m: m.group(1) * int(m.group(2)), text, flags=re.S)


def _load_cases() -> list[dict]:
    cases = yaml.safe_load((ROOT / "tests" / "data" / "bad_input.yaml").read_text())
    for case in cases:
        case["args"] = [_expand(str(a)) for a in case["args"]]
    return cases


CASES = _load_cases()
_READS = ("Describe", "Get", "List")


@pytest.fixture(scope="module")
def proxy(sandbox_server) -> Iterator[FaultProxy]:
    """Every AWS call of the cases goes through this proxy, which counts them."""
    with FaultProxy(sandbox_server.endpoint) as fault_proxy:
        yield fault_proxy


@pytest.fixture
def aws_through_proxy(proxy: FaultProxy, sandbox_server, isolated_env, monkeypatch: pytest.MonkeyPatch) -> FaultProxy:
    """The emulator's credentials and endpoint (through the counting proxy): a case that slipped
    through the checks would really build and publish, and the proxy would see the writes."""
    for name, value in sandbox_server.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
    proxy.clear()
    return proxy


def writes(proxy: FaultProxy) -> list[str]:
    return [seen.op for seen in proxy.log if not seen.op.rsplit(".", 1)[-1].startswith(_READS)]


def test_the_table_holds_at_least_80_cases_each_naming_what_to_look_for() -> None:
    assert len(CASES) >= 80
    assert len({c["id"] for c in CASES}) == len(CASES)
    assert all(c["words"] for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_bad_input_is_refused_with_one_line_and_exit_2(workdir: Path, aws_through_proxy: FaultProxy, case) -> None:
    text = PIPELINE
    for old, new in case.get("pipeline", []):
        assert old in text, f"case edit {old!r} does not apply to the base pipeline"
        text = text.replace(old, _expand(new), 1)
    (workdir / "amibuild.hcl").write_text(text)
    for name, content in case.get("files", {}).items():
        (workdir / name).write_text(_expand(content))
    for name, target in case.get("links", {}).items():
        (workdir / name).symlink_to(target)
    for name in case.get("fifos", []):
        os.mkfifo(workdir / name)
    before = sorted(p.name for p in workdir.iterdir())
    result = run_cli(workdir, *case["args"], env=case.get("env"))
    assert result.returncode == 2, result.stderr + result.stdout
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert message.startswith("amibuild: error: ")
    for word in case["words"]:
        assert word in message, f"{word!r} not in {message!r}"
    for word in case.get("absent", []):  # a password given in the input, say
        assert word not in result.stderr + result.stdout, f"{word!r} was printed"
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in workdir.iterdir()) == before, "something was written"
    assert writes(aws_through_proxy) == [], "an AWS write was made"
    assert not (workdir / "PWNED").exists() and not (workdir / "F").exists()


def test_good_input_renders_through_the_same_command(workdir: Path) -> None:
    """The control: the fixture's pipeline with a good var-file renders, so refusals above are real."""
    result = run_cli(workdir, "render", "--var-file", "good.pkrvars.hcl", "--extra-pkg", "htop")
    assert result.returncode == 0, result.stderr
    assert (workdir / "build" / "ceph" / "amibuild.pkr.hcl").is_file()
    values = hcl.loads((workdir / "build" / "plain" / "amibuild.auto.pkrvars.hcl").read_text())
    assert values["volume_size"] == 40
    assert values["extra_packages"] == ["htop"]


def test_the_ami_name_check_counts_the_run_id_build_ami_appends() -> None:
    assert len(checks.RUN_ID_SUFFIX) == len(f"-{new_run_id()}")


@pytest.mark.skipif(shutil.which("packer") is None, reason="packer is not installed")
def test_a_packer_refusal_of_a_value_the_user_gave_is_exit_2_naming_its_flag(workdir: Path) -> None:
    """io1 needs IOPS the template only sets for gp3: packer validate refuses, and the refusal is
    blamed on --var volume_type (exit 2), not reported as amibuild's failure (exit 1)."""
    result = run_cli(workdir, "validate", "--variant", "plain", "--var", "volume_type=io1")
    assert result.returncode == 2, result.stderr
    message = result.stderr.strip().splitlines()[-1]
    assert message.startswith("amibuild: error: --var volume_type: Packer refuses the value of volume_type")
    assert "IOPS" in message


@pytest.mark.skipif(shutil.which("packer") is None, reason="packer is not installed")
def test_a_temp_folder_too_long_for_packers_plugin_sockets_is_refused_before_anything(
        workdir: Path, aws_through_proxy: FaultProxy, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Packer puts its plugin sockets in TMPDIR, in amibuild's folder of the run there: past the
    system's socket path limit every build would crash ("bind: invalid argument")."""
    long_temp = tmp_path_factory.mktemp("t") / ("t" * 60)
    long_temp.mkdir()
    before = sorted(p.name for p in workdir.iterdir())
    # what a process started with this TMPDIR finds (tempfile reads TMPDIR once, and this one is in-process)
    monkeypatch.setattr(tempfile, "tempdir", str(long_temp))
    result = run_cli(workdir, "build-ami", "--variant", "ceph", env={"TMPDIR": str(long_temp)})
    assert result.returncode == 2, result.stderr + result.stdout
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert message.startswith(f"amibuild: error: TMPDIR {long_temp}: too long for Packer's plugin sockets")
    assert "set TMPDIR to a folder of at most" in message and "e.g. /tmp" in message
    assert sorted(p.name for p in workdir.iterdir()) == before, "something was written"
    assert list(long_temp.iterdir()) == []
    assert writes(aws_through_proxy) == [], "an AWS write was made"
