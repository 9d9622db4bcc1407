"""amibuild installed like a tool: build the wheel, install it into a fresh virtual environment, and
run `amibuild` from a folder that holds only a pipeline file — no checkout, no tasks.py.

Offline and fast: the wheel is installed with `--no-deps`, and the fresh environment finds the
dependencies through a `.pth` file naming a folder of links to this venv's installed packages — every
one but amibuild itself (so the wheel's copy is what runs) and moto (so the environment is one
without the `sandbox` extra until the test adds it). Slower than most tests (a wheel build, a
sandbox start and the demo), and kept in the suite on purpose: it is the only test of the install.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENABLED = {"ceph", "ceph-arm", "ceph-al2"}
PACKAGE_DATA = [
    "amibuild/render/templates/", "amibuild/render/provision/", "amibuild/handoff/templates/nodegroup.yaml",
    "amibuild/pipeline/example.hcl", "amibuild/pipeline/starter.hcl",
]


def run(argv: list, cwd: Path, **kwargs) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AMIBUILD_DEBUG")}
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=kwargs.pop("timeout", 300), **kwargs)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of the sources (setuptools leaves build/ and *.egg-info behind)."""
    src = tmp_path_factory.mktemp("src")
    shutil.copytree(ROOT / "amibuild", src / "amibuild", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("dist")
    # build isolation fetches setuptools through pip's configured index (the machine's, reachable offline here)
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                 "-w", out, src], cwd=src)
    assert built.returncode == 0, built.stderr
    (path,) = out.glob("amibuild-*.whl")
    return path


def link_farm(target: Path, keep) -> Path:
    """A folder of links to this venv's installed packages for which `keep(name)` holds."""
    target.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        if keep(entry.name.lower()):
            (target / entry.name).symlink_to(entry)
    return target


def is_moto(name: str) -> bool:
    return name == "moto" or name.startswith("moto-")


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed and the dependencies but not the sandbox extra."""
    base = tmp_path_factory.mktemp("venv")
    venv = base / "env"
    made = run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=base)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=base).stdout.strip())
    deps = link_farm(base / "deps", lambda n: not (
        n.startswith(("amibuild", "__editable__", "_virtualenv", "pip", "__pycache__")) or n.endswith(".pth")
        or is_moto(n)))
    (site / "amibuild-test-deps.pth").write_text(f"{deps}\n")
    done = run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel],
               cwd=base)
    assert done.returncode == 0, done.stderr
    return venv


def add_sandbox_extra(venv: Path) -> None:
    """What `pip install 'amibuild[sandbox]'` adds here: moto (its own dependencies are there already)."""
    site = Path(run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                    cwd=venv).stdout.strip())
    farm = link_farm(venv.parent / "sandbox-extra", is_moto)
    assert any(farm.iterdir())
    (site / "amibuild-test-sandbox-extra.pth").write_text(f"{farm}\n")


def test_the_wheel_carries_the_package_data_and_the_command(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
        metadata = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    for wanted in PACKAGE_DATA:
        assert any(n.startswith(wanted) for n in names), wanted
    assert sum(n.startswith("amibuild/render/templates/") and n.endswith(".j2") for n in names) >= 1
    shipped_scripts = {n.rsplit("/", 1)[1] for n in names if n.startswith("amibuild/render/provision/")}
    assert shipped_scripts == {p.name for p in (ROOT / "amibuild/render/provision").glob("*.sh")}
    assert "amibuild = amibuild.cli.main:main" in entry_points
    assert "Provides-Extra: sandbox" in metadata and "extra == \"sandbox\"" in metadata


def test_the_installed_command_works_in_a_folder_holding_only_a_pipeline_file(installed: Path,
                                                                               tmp_path: Path) -> None:
    amibuild = installed / "bin" / "amibuild"
    shutil.copy(ROOT / "amibuild" / "pipeline" / "example.hcl", tmp_path / "amibuild.hcl")
    where = run([installed / "bin" / "python", "-c", "import amibuild; print(amibuild.__file__)"], cwd=tmp_path)
    assert where.stdout.strip().startswith(str(installed)), where  # the wheel's copy, not this checkout

    listing = run([amibuild, "--list"], cwd=tmp_path)
    assert listing.returncode == 0 and "build-ami" in listing.stdout, listing.stderr
    version = run([installed / "bin" / "python", "-m", "amibuild", "--version"], cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("amibuild "), version.stderr

    rendered = run([amibuild, "render", "--extra-pkg", "ceph-common"], cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    assert {p.name for p in (tmp_path / "build").iterdir()} == ENABLED
    assert (tmp_path / "build" / "ceph" / "scripts" / "install-packages.sh").is_file()
    if shutil.which("packer"):
        validated = run([amibuild, "validate"], cwd=tmp_path)
        assert validated.returncode == 0, validated.stderr
        assert validated.stdout.startswith("3 variant(s) valid with packer")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["amibuild.hcl", "build"]


def test_sandbox_needs_the_extra_then_starts_and_the_demo_runs(installed: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    amibuild = installed / "bin" / "amibuild"
    refused = run([amibuild, "sandbox"], cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip() == ("amibuild: error: the local AWS emulator needs moto, which amibuild installs "
                                      "as an extra: pip install 'amibuild[sandbox]'")
    assert run([amibuild, "demo"], cwd=tmp_path).returncode == 2

    add_sandbox_extra(installed)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    server = subprocess.Popen([str(amibuild), "sandbox"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        exports = []
        for line in server.stdout:
            exports.append(line)
            if line.startswith("# sandbox ready at"):
                break
        assert any(line.startswith("export AWS_ENDPOINT_URL=http://127.0.0.1:") for line in exports), exports
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=30)
        stderr = server.stderr.read()
        server.stdout.close()
        server.stderr.close()
    assert code == 0, stderr

    # the demo keeps its folder for the user to look at (it says where): here, in a temp folder of the
    # test's own (short, as Packer's plugin sockets need), removed after it
    temp = Path(tempfile.mkdtemp(prefix="demo-"))
    monkeypatch.setenv("TMPDIR", str(temp))
    try:
        demo = run([amibuild, "demo"], cwd=tmp_path, timeout=600)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "$ amibuild build-ami --extra-pkg ceph-common" in demo.stdout
    assert "# demo finished" in demo.stdout
    assert f"files are in {temp}{os.sep}amibuild-demo-" in demo.stdout
    for name in ENABLED:
        assert f"/{name}/recommended/image_id" in demo.stdout, name
