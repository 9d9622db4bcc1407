"""Data-driven rendering tests: one folder per case under tests/render_cases/.

Each case holds `case.json` (flags, Packer version, endpoint, source AMI decision), optionally an
`amibuild.hcl`, and `expected/<variant>/` with the HCL files it must render. Both sides are parsed
with python-hcl2 and compared as data, so layout changes that `packer fmt` accepts do not matter
but every value does. Set AMIBUILD_UPDATE_GOLDEN=1 to rewrite the expected files after a deliberate
change, then review the diff.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from amibuild import hcl
from amibuild import render
from amibuild.pipeline import Overrides, load
from amibuild.render import SourceAmi
from amibuild.sandbox.transform import render_for_env

CASES = Path(__file__).parent / "render_cases"
ROOT = Path(__file__).resolve().parent.parent
COMPARED = (render.HCL_FILE, render.VARS_FILE)


def _real_render(pipeline, variant, *, env, **kwargs) -> render.Rendered:
    return render.finish(render.render_build(pipeline, variant, target=render.Target(), **kwargs))


def render_case(case_dir: Path) -> dict[str, render.Rendered]:
    """Render a case as `invoke render` would from inside the case folder."""
    case = json.loads((case_dir / "case.json").read_text())
    pipeline_file = case_dir / "amibuild.hcl" if (case_dir / "amibuild.hcl").exists() else None
    flags = dict(case.get("flags", {}))
    if "upstream" in flags:
        flags["upstream"] = str(ROOT / flags["upstream"])
    overrides = Overrides(**{k: tuple(v) if isinstance(v, list) else v for k, v in flags.items()})
    pipeline = load(pipeline_file, overrides, default_region="us-west-2")
    source = case.get("source", {"how": "lookup"})
    out = {}
    for variant in pipeline.variants:
        upstream_template = None
        if variant.base == "upstream":
            from amibuild.render import upstream

            upstream_template = upstream.load(Path(variant.upstream))
        # a case with an endpoint is the sandbox's build (AMIBUILD_TARGET=sandbox), else a real one
        how = render_for_env if case.get("endpoint") else _real_render
        out[variant.name] = how(
            pipeline,
            variant,
            uses_plugins=case.get("uses_plugins", False),
            env={"AWS_ENDPOINT_URL": case["endpoint"]} if case.get("endpoint") else {},
            sources={
                region: SourceAmi(**source) if not variant.source_ami else SourceAmi("pinned", variant.source_ami)
                for region in pipeline.regions
            },
            upstream=upstream_template,
        )
    return out


def normalised(text: str) -> dict:
    # upstream paths are absolute on the machine that renders; compare them relative to the repo
    return hcl.loads(text.replace(str(ROOT), "<repo>"))


@pytest.mark.parametrize("case_dir", sorted(p for p in CASES.iterdir() if p.is_dir()), ids=lambda p: p.name)
def test_render_case_matches_expected_hcl(case_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(case_dir)  # no amibuild.hcl there means flags alone
    rendered = render_case(case_dir)
    expected_dir = case_dir / "expected"
    if os.environ.get("AMIBUILD_UPDATE_GOLDEN"):
        for name, item in rendered.items():
            for file in COMPARED:
                path = expected_dir / name / file
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(item.files[file].replace(str(ROOT), "<repo>"))
    assert sorted(p.name for p in expected_dir.iterdir()) == sorted(rendered), "variants rendered"
    for name, item in rendered.items():
        for file in COMPARED:
            want = normalised((expected_dir / name / file).read_text())
            got = normalised(item.files[file])
            assert got == want, (
                f"{case_dir.name}/{name}/{file} differs\n--- got ---\n{item.files[file]}"
            )


@pytest.mark.parametrize("case_dir", sorted(p for p in CASES.iterdir() if p.is_dir()), ids=lambda p: p.name)
def test_render_case_passes_packer_validate_and_fmt(case_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    """Every case's files, written out, pass the real packer binary (validate needs no AWS)."""
    from amibuild.bake.prepare import check_directory
    from amibuild.bake.packer import Packer

    if shutil.which("packer") is None:
        # only a bare development machine has no packer at all; CI installs it, so there it fails
        if os.environ.get("CI"):
            pytest.fail("no packer binary on PATH, and CI installs one")
        pytest.skip("no packer binary on PATH")
    packer = Packer()
    version = packer.version()  # a packer that is there but broken (or too old) fails this test
    monkeypatch.chdir(case_dir)
    for name, item in render_case(case_dir).items():
        directory = tmp_path / name
        for file, text in item.files.items():
            (directory / file).parent.mkdir(parents=True, exist_ok=True)
            (directory / file).write_text(text)
        if item.files[render.HCL_FILE].lstrip("# ").find("required_plugins") >= 0 and not version.uses_plugins:
            # Packer 1.6 rejects required_plugins; fmt and python-hcl2 still check the file
            assert packer.fmt_check(directory) == []
            hcl.loads(item.files[render.HCL_FILE])
            continue
        check_directory(packer, directory)


def test_a_build_time_lookup_asks_for_the_images_of_the_eks_account_of_each_build_region(tmp_path: Path) -> None:
    """EKS publishes its images in opt-in, China and GovCloud regions from accounts of their own: a
    lookup owned by the usual account finds no image there, and the build fails at its first step."""
    from amibuild.bake.prepare import resolve_sources

    (tmp_path / "amibuild.hcl").write_text('pipeline {\n  name = "far"\n  regions = ["ap-east-1", "us-west-2"]\n}\n'
                                           'variant "a" {}\n')
    pipeline = load(tmp_path / "amibuild.hcl")
    variables = {v.name: v.default for v in render.template_variables(pipeline.variants[0], pipeline)}
    assert variables["source_ami_owners"] == ["602401143452", "800184023465"]
    notes = {region: source.note for region, source in resolve_sources(pipeline, None)["a"].items()}
    assert "owner 800184023465)" in notes["ap-east-1"] and "owner 602401143452)" in notes["us-west-2"]
    china = load(tmp_path / "amibuild.hcl", Overrides(regions=("cn-north-1",)))
    assert {v.name: v.default for v in render.template_variables(china.variants[0], china)}[
        "source_ami_owners"] == ["918309763551"]
