"""Kubernetes support warnings: the dated EKS calendar, and render / build-ami / doctor saying so."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from amibuild.pipeline import Overrides, SpecError, load
from amibuild.jobs.doctor_job import check_support
from amibuild.sandbox import KUBERNETES_VERSIONS
from amibuild.pipeline.support import AS_OF, CALENDAR, newest_in_standard_support, support_warning
from conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
TODAY = date(2026, 11, 30)


def test_calendar_gives_fourteen_months_standard_then_twelve_extended() -> None:
    for version, support in CALENDAR.items():
        assert support.released < support.standard_until <= support.extended_until, version
        if version != "1.22":  # ended before extended support existed
            months = (support.extended_until.year - support.standard_until.year) * 12 + (
                support.extended_until.month - support.standard_until.month)
            assert months == 12, version


@pytest.mark.parametrize("version, words", [
    ("1.35", None),
    ("1.34", None),  # standard support until 2026-12-02
    ("1.33", "past the end of EKS standard support (2026-07-29); extended support, at extra cost, ends 2027-07-29"),
    ("1.32", "past the end of EKS standard support (2026-03-23); extended support, at extra cost, ends 2027-03-23"),
    ("1.30", "past the end of EKS support (2026-07-23)"),
    ("1.28", "past the end of EKS support (2025-11-26)"),
    ("1.99", None),  # not in the table: no guess
])
def test_support_warning_on_a_given_day(version: str, words: str | None) -> None:
    warning = support_warning(version, TODAY)
    if words is None:
        assert warning is None
    else:
        assert warning is not None and words in warning and "1.35" in warning


def test_newest_in_standard_support_moves_with_the_day() -> None:
    assert newest_in_standard_support(date(2025, 6, 1)) == "1.33"
    assert newest_in_standard_support(TODAY) == "1.35"


def test_the_built_in_defaults_build_al2023_on_the_newest_version_in_standard_support(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no amibuild.hcl here
    # A pipeline that sets neither os nor kubernetes_version (here: no file at all, as with
    # `amibuild render --extra-pkg ceph-common`) gets today's default, which does not warn.
    pipeline = load(None, Overrides(extra_packages=("ceph-common",)))

    (variant,) = pipeline.variants
    assert (variant.os, variant.kubernetes_version) == ("al2023", "1.35")
    assert variant.kubernetes_version == newest_in_standard_support(AS_OF)
    assert support_warning(variant.kubernetes_version, AS_OF) is None
    # the sandbox seeds the parent image the default resolves to
    assert variant.kubernetes_version in KUBERNETES_VERSIONS[variant.os]


def test_the_default_yields_to_a_pipeline_that_names_al2_on_1_30(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text('defaults {\n  os = "al2"\n  kubernetes_version = "1.30"\n}\n'
                                           'variant "old" {}\nvariant "new" {\n  kubernetes_version = "1.32"\n}\n')

    pipeline = load(tmp_path / "amibuild.hcl")

    assert [(v.name, v.os, v.kubernetes_version) for v in pipeline.variants] == [
        ("old", "al2", "1.30"), ("new", "al2", "1.32")]


def test_doctor_warns_about_an_old_variant_but_passes(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text('variant "old" {\n  kubernetes_version = "1.30"\n}\n'
                                           'variant "new" {\n  os = "al2023"\n  kubernetes_version = "1.35"\n}\n')
    pipeline = load(tmp_path / "amibuild.hcl")

    check = check_support(pipeline, TODAY)

    assert check.ok and check.warn
    assert check.line().startswith("WARN kubernetes: variant old: Kubernetes 1.30 is past")
    assert "variant new" not in check.message


def test_render_prints_the_warning_and_still_renders(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text('variant "old" {\n  kubernetes_version = "1.28"\n}\n')

    result = run_cli(tmp_path, "render")

    assert result.returncode == 0, result.stderr
    assert "warning: variant old: Kubernetes 1.28 is past the end of EKS support" in result.stderr
    assert (tmp_path / "build" / "old" / "amibuild.pkr.hcl").is_file()


def test_al2_without_a_version_names_the_os_flag_and_the_default_it_cannot_take(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no amibuild.hcl here
    with pytest.raises(SpecError) as refused:
        load(None, Overrides(os="al2"))
    assert str(refused.value).startswith("--os al2: Amazon Linux 2 needs a Kubernetes version of 1.32 or older")
    assert "the built-in default is 1.35" in str(refused.value) and "--k8s 1.32" in str(refused.value)
