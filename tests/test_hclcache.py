"""The python-hcl2 parse cache (amibuild.hclcache): an entry gives exactly what python-hcl2 gives
for the same text, never another text's parse, survives nothing it should not, and a pipeline
file refused as bad input leaves no entry."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from amibuild import hcl, hclcache
from amibuild.errors import SpecError
from amibuild.pipeline import load

ROOT = Path(__file__).resolve().parent.parent

TEXT_A = """\
pipeline {
  name    = "a"
  regions = ["us-west-2"]
}

variant "ceph" {
  extra_packages = ["ceph-common", "jq"]
  vars = { volume_size = 30, encrypted = true, ratio = 0.5, note = "x\\"y" }
}
"""
TEXT_B = TEXT_A.replace('name    = "a"', 'name    = "b"')


@pytest.fixture(autouse=True)
def fresh_memory():
    hclcache.clear_memory()
    yield
    hclcache.clear_memory()


def entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_an_entry_read_back_is_what_python_hcl2_gives(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    want = hcl.loads(TEXT_A, keep_quotes=True)
    assert hclcache.loads(TEXT_A, keep_quotes=True, folder=folder) == want
    assert hclcache.remember(TEXT_A, keep_quotes=True, folder=folder)
    assert entries(folder) == [f"{hclcache.key(TEXT_A, keep_quotes=True)}.json"]
    hclcache.clear_memory()  # as a new process would: only the folder knows it now
    got = hclcache.loads(TEXT_A, keep_quotes=True, folder=folder)
    assert got == want
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)  # types too (30, true, 0.5)
    got["pipeline"][0]["name"] = "changed by a caller"
    assert hclcache.loads(TEXT_A, keep_quotes=True, folder=folder) == want  # a fresh copy each read


def test_the_key_covers_the_text_the_options_and_the_parser(monkeypatch) -> None:
    a = hclcache.key(TEXT_A, keep_quotes=True)
    assert a == hclcache.key(TEXT_A, keep_quotes=True)
    assert a != hclcache.key(TEXT_B, keep_quotes=True)
    assert a != hclcache.key(TEXT_A, keep_quotes=False)
    assert a != hclcache.key(TEXT_A + " ", keep_quotes=True)
    monkeypatch.setattr(hclcache, "_versions", "python-hcl2 9.9.9, lark 0.0")
    assert a != hclcache.key(TEXT_A, keep_quotes=True)


def test_another_texts_entry_is_never_served(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    hclcache.loads(TEXT_A, keep_quotes=True, folder=folder)
    hclcache.remember(TEXT_A, keep_quotes=True, folder=folder)
    # A's entry put where B's would be (a copy, a rename, a collision): B's own parse comes back
    (folder / f"{hclcache.key(TEXT_A, keep_quotes=True)}.json").rename(
        folder / f"{hclcache.key(TEXT_B, keep_quotes=True)}.json")
    hclcache.clear_memory()
    assert hclcache.loads(TEXT_B, keep_quotes=True, folder=folder)["pipeline"][0]["name"] == '"b"'


@pytest.mark.parametrize("content", ["", "{not json", '{"key": "x", "doc": "{}"}', '["a list"]',
                                     '{"key": "KEY", "doc": "[1, 2]"}'],
                         ids=["empty", "half-written", "other-key", "not-an-entry", "not-a-document"])
def test_a_bad_entry_is_parsed_again_and_replaced(tmp_path: Path, content: str) -> None:
    folder = tmp_path / "cache"
    folder.mkdir()
    name = hclcache.key(TEXT_A, keep_quotes=True)
    (folder / f"{name}.json").write_text(content.replace("KEY", name))
    assert hclcache.loads(TEXT_A, keep_quotes=True, folder=folder) == hcl.loads(TEXT_A, keep_quotes=True)
    assert hclcache.remember(TEXT_A, keep_quotes=True, folder=folder)
    assert json.loads((folder / f"{name}.json").read_text())["key"] == name
    assert entries(folder) == [f"{name}.json"]  # no temporary file left


def test_a_syntax_error_is_raised_and_nothing_cached(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    with pytest.raises(hcl.HclSyntaxError):
        hclcache.loads('pipeline { name = "x"\n', keep_quotes=True, folder=folder)
    assert not hclcache.remember('pipeline { name = "x"\n', keep_quotes=True, folder=folder)
    assert entries(folder) == []


def test_a_text_with_credentials_is_never_written(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    text = TEXT_A.replace('"jq"]', '"jq"]\n  proxy = "http://user:S3cretPass@proxy.local:3128"')
    assert hclcache.loads(text, keep_quotes=True, folder=folder)["variant"][0]
    assert not hclcache.remember(text, keep_quotes=True, folder=folder)
    assert entries(folder) == []


def test_only_the_newest_entries_are_kept(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(hclcache, "KEEP", 3)
    folder = tmp_path / "cache"
    import os

    for i in range(5):
        text = TEXT_A.replace('"a"', f'"a{i}"')
        hclcache.loads(text, keep_quotes=True, folder=folder)
        assert hclcache.remember(text, keep_quotes=True, folder=folder)
        path = folder / f"{hclcache.key(text, keep_quotes=True)}.json"
        os.utime(path, (1_000_000 + i, 1_000_000 + i))  # mtimes in order, whatever the clock's resolution
    kept = {hclcache.key(TEXT_A.replace('"a"', f'"a{i}"'), keep_quotes=True) + ".json" for i in (2, 3, 4)}
    assert set(entries(folder)) == kept


# ----------------------------------------------------------------------------- through the pipeline load


def test_load_writes_an_entry_only_into_an_existing_build_folder(tmp_path: Path) -> None:
    pipeline_file = tmp_path / "amibuild.hcl"
    pipeline_file.write_text(TEXT_A)
    cache = tmp_path / "build" / ".hcl-cache"
    assert load(pipeline_file, parse_cache=cache).name == "a"
    assert not (tmp_path / "build").exists()  # no build folder yet: nothing created for the cache
    (tmp_path / "build").mkdir()
    first = load(pipeline_file, parse_cache=cache)
    assert entries(cache) == [f"{hclcache.key(TEXT_A, keep_quotes=True)}.json"]
    hclcache.clear_memory()
    assert load(pipeline_file, parse_cache=cache) == first  # from the entry: the same Pipeline


def test_an_edited_file_is_parsed_again_not_served_stale(tmp_path: Path) -> None:
    pipeline_file = tmp_path / "amibuild.hcl"
    (tmp_path / "build").mkdir()
    cache = tmp_path / "build" / ".hcl-cache"
    pipeline_file.write_text(TEXT_A)
    assert load(pipeline_file, parse_cache=cache).name == "a"
    pipeline_file.write_text(TEXT_B)
    hclcache.clear_memory()
    assert load(pipeline_file, parse_cache=cache).name == "b"
    assert len(entries(cache)) == 2


@pytest.mark.parametrize("text", [
    TEXT_A.replace('name    = "a"', 'name    = "a"\n  colour = "red"'),  # parses, then refused
    TEXT_A.replace('["ceph-common", "jq"]', "[ceph]"),  # a reference, refused after the parse
], ids=["unknown-key", "reference"])
def test_a_pipeline_file_refused_as_bad_input_leaves_no_entry(tmp_path: Path, text: str) -> None:
    pipeline_file = tmp_path / "amibuild.hcl"
    pipeline_file.write_text(text)
    (tmp_path / "build").mkdir()
    with pytest.raises(SpecError):
        load(pipeline_file, parse_cache=tmp_path / "build" / ".hcl-cache")
    assert sorted(p.name for p in (tmp_path / "build").iterdir()) == []


def test_a_cached_pipeline_file_loads_without_importing_python_hcl2(tmp_path: Path) -> None:
    """In a process of its own: what a command imports is only seen in a fresh interpreter."""
    pipeline_file = tmp_path / "amibuild.hcl"
    pipeline_file.write_text(TEXT_A)
    (tmp_path / "build").mkdir()
    script = ("import sys; from pathlib import Path; from amibuild.pipeline import load; "
              f"p = load(Path({str(pipeline_file)!r}), parse_cache=Path({str(tmp_path / 'build' / '.hcl-cache')!r})); "
              "print(p.name, 'hcl2' in sys.modules, 'lark' in sys.modules)")
    runs = [subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
            for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    assert [r.stdout.split() for r in runs] == [["a", "True", "True"], ["a", "False", "False"]]
