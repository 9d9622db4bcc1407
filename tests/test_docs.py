"""The docs site: `mkdocs build --strict` passes (a page the nav does not list included), and the
architecture page's layers are the import-linter contracts of pyproject.toml. The walkthrough's
run against the sandbox is tests/test_walkthrough.py (its own file, so xdist runs it beside this one)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
ARCHITECTURE = DOCS / "dev" / "architecture.md"
BIN = Path(sys.executable).parent  # the test venv: its mkdocs
BEGIN = "<!-- layers: generated from pyproject.toml by tests/test_docs.py; do not edit by hand -->"
END = "<!-- layers: end -->"


# ------------------------------------------------------------------------------ the layers drawing


def layers_markdown(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """The import-linter contracts as Markdown: each layers contract drawn top to bottom."""
    contracts = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]
    out: list[str] = []
    for contract in contracts:
        if contract["type"] == "layers":
            containers = contract.get("containers", [])
            where = f"inside `{', '.join(containers)}`" if containers else "the packages of `amibuild`"
            out += [f"### {where}", "", "```"]
            layers = [layer.strip() for layer in contract["layers"]]
            for number, layer in enumerate(layers):
                out.append(layer)
                if number < len(layers) - 1:
                    out.append("  ↓")
            out += ["```", ""]
        else:
            ancestors = ", ".join(f"`{a}`" for a in contract.get("ancestors", []))
            out += [f"### {contract['type']}", "", f"{contract['name']} ({ancestors}).", ""]
    return "\n".join(out)


def test_the_architecture_page_draws_the_import_linter_contracts() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    want = "\n\n" + layers_markdown() + "\n"
    if os.environ.get("AMIBUILD_UPDATE_DOCS") == "1":
        ARCHITECTURE.write_text(text[:start] + want + text[end:], encoding="utf-8")
        text = ARCHITECTURE.read_text(encoding="utf-8")
        start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    assert text[start:end] == want, (
        "docs/dev/architecture.md's layers differ from pyproject.toml's import-linter contracts; "
        "rerun with AMIBUILD_UPDATE_DOCS=1")


def test_the_architecture_layout_names_every_part_of_the_package() -> None:
    layout = ARCHITECTURE.read_text(encoding="utf-8").split("## Layout", 1)[1]
    parts = sorted(f"{p.name}/" if p.is_dir() else p.name for p in (ROOT / "amibuild").iterdir()
                   if p.name != "__init__.py" and (p.suffix == ".py" or (p / "__init__.py").is_file()))
    missing = [part for part in parts if not re.search(rf"(?<![\w/.]){re.escape(part)}", layout)]
    assert not missing, f"docs/dev/architecture.md's layout does not name {missing}: add a line for each"


# ------------------------------------------------------------------------------ mkdocs build --strict

MKDOCS = shutil.which("mkdocs", path=str(BIN)) or shutil.which("mkdocs")
needs_mkdocs = pytest.mark.skipif(MKDOCS is None, reason="mkdocs is not installed (pip install '.[docs]')")


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([MKDOCS, "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
                          cwd=config.parent, env=env, capture_output=True, text=True, timeout=300)


@needs_mkdocs
def test_the_site_builds_strict(tmp_path: Path) -> None:
    built = mkdocs_build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    for page in ("index.html", "own-repository/index.html", "sandbox/index.html", "dev/architecture/index.html"):
        assert (tmp_path / "site" / page).is_file(), page


@needs_mkdocs
def test_a_page_the_nav_does_not_list_is_built_and_added_to_the_nav(tmp_path: Path) -> None:
    # what another engineer's branch does: a new docs/<topic>.md and docs/sandbox-<topic>.md, no mkdocs.yml edit
    copy = tmp_path / "repo"
    shutil.copytree(DOCS, copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    (copy / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "mkdocs_nav.py", copy / "scripts" / "mkdocs_nav.py")
    (copy / "docs" / "zz-new-topic.md").write_text("# A new topic\n\nSee [the sandbox](sandbox.md).\n")
    (copy / "docs" / "sandbox-new-topic.md").write_text("# The sandbox's new topic\n\nIt answers.\n")
    built = mkdocs_build(copy / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    home = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert 'href="zz-new-topic/"' in home and "A new topic" in home
    assert 'href="sandbox-new-topic/"' in home and ("The sandbox&#39;s new topic" in home or "The sandbox's new topic" in home)
    # a link to a page that is not there still fails the strict build
    (copy / "docs" / "zz-new-topic.md").write_text("# A new topic\n\nSee [nothing](no-such-page.md).\n")
    broken = mkdocs_build(copy / "mkdocs.yml", tmp_path / "site2")
    assert broken.returncode != 0 and "no-such-page.md" in broken.stderr, broken.stderr


def test_the_nav_hook_files_an_unlisted_page_by_its_name(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("mkdocs_nav", ROOT / "scripts" / "mkdocs_nav.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    docs = tmp_path / "docs"
    (docs / "dev").mkdir(parents=True)
    for page in ("index.md", "sandbox.md", "sandbox-events.md", "events.md", "dev/testing.md", "dev/history.md"):
        (docs / page).write_text("# T\n")
    nav = [{"Home": "index.md"}, {"The sandbox": ["sandbox.md"]}, {"More": []}, {"Development": ["dev/testing.md"]}]
    config = hook.on_config({"nav": nav, "docs_dir": str(docs)})
    assert config["nav"] == [{"Home": "index.md"}, {"The sandbox": ["sandbox.md", "sandbox-events.md"]},
                             {"More": ["events.md"]}, {"Development": ["dev/testing.md", "dev/history.md"]}]
    # nothing unlisted: the empty section is dropped
    (docs / "events.md").unlink()
    nav = [{"Home": "index.md"}, {"More": []}, {"The sandbox": ["sandbox.md", "sandbox-events.md"]},
           {"Development": ["dev/testing.md", "dev/history.md"]}]
    assert hook.on_config({"nav": nav, "docs_dir": str(docs)})["nav"] == [
        {"Home": "index.md"}, {"The sandbox": ["sandbox.md", "sandbox-events.md"]},
        {"Development": ["dev/testing.md", "dev/history.md"]}]


def _whole_pipeline_examples() -> list:
    """The docs' ```hcl examples of a pipeline file (a top-level block at the start of a line) meant to be
    copied whole: not the ones showing alternatives (`# or`) or with a part left to the reader (`...`)."""
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        for number, match in enumerate(re.finditer(r"```hcl\n(.*?)```", page.read_text(encoding="utf-8"), re.S)):
            text = match.group(1)
            if re.search(r"^[a-z_]+( \"[^\"]*\")? *\{", text, re.M) and "# or" not in text and "..." not in text:
                found.append(pytest.param(text, id=f"{page.relative_to(DOCS)}#{number}"))
    return found


@pytest.mark.parametrize("text", _whole_pipeline_examples())
def test_a_whole_pipeline_example_in_the_docs_loads_as_written(tmp_path: Path, text: str) -> None:
    from amibuild.pipeline import load
    from amibuild.pipeline.shipped import STARTER, pipeline_text

    if not re.search(r"^pipeline\s*\{", text, re.M):  # an excerpt: what the reader adds to `amibuild init`'s file
        text = pipeline_text(STARTER) + "\n" + text
    (tmp_path / "amibuild.hcl").write_text(text, encoding="utf-8")
    assert load(tmp_path / "amibuild.hcl").variants  # a refusal raises SpecError naming the field
