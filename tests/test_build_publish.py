"""Which variants build-ami publishes, and with what: `channels.from_build`, pure, without AWS."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from amibuild import render
from amibuild.pipeline import Overrides, load
from amibuild.bake.executor import BuildOutcome, BuildStatus
from amibuild.bake.build_plan import BuildDecision, BuildPlan, PlanItem
from amibuild.aws import Parameter
from amibuild.channels.from_build import channel_reads, plan_build_publish, plan_moves
from amibuild.render import SourceAmi, Target

PIPELINE = """\
pipeline {
  name    = "pub"
  regions = ["us-west-2"]
  copy_to = ["eu-west-1"]
}

variant "new" {}
variant "same" { extra_packages = ["htop"] }
variant "moved" { extra_packages = ["jq"] }
variant "broken" { arch = "arm64" }
"""
SOURCE = SourceAmi("pinned", "ami-0123456789abcdef0")
REGIONS = ("us-west-2", "eu-west-1")


@pytest.fixture
def plan(tmp_path: Path) -> BuildPlan:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    pipeline = load(tmp_path / "amibuild.hcl", Overrides())
    items = []
    for variant in pipeline.variants:
        rendered = render.render_variant(pipeline, variant, uses_plugins=False, target=Target(None),
                                         sources={r: SOURCE for r in pipeline.regions})
        decision = BuildDecision.SKIP if variant.name in ("same", "moved") else BuildDecision.BUILD
        items.append(PlanItem(variant.name, rendered, tmp_path / variant.name, decision, "test", {}))
    return BuildPlan("run-1", "2026-01-01T00:00:00Z", pipeline, REGIONS, tuple(items), force=False)


def amis(tag: str) -> dict[str, str]:
    return {region: f"ami-{tag}{i}" for i, region in enumerate(REGIONS)}


def outcomes(plan: BuildPlan) -> list[BuildOutcome]:
    status = {"new": BuildStatus.BUILT, "same": BuildStatus.SKIPPED, "moved": BuildStatus.SKIPPED,
              "broken": BuildStatus.FAILED}
    return [BuildOutcome(i.name, i.fingerprint, i.decision, i.reason, status=status[i.name],
                         amis={} if i.name == "broken" else amis(i.name)) for i in plan.items]


def parameter(name: str, channel: str = "recommended") -> str:
    return f"/amibuild/pub/1.35/{name}/{channel}/image_id"


def test_only_reused_variants_have_their_channel_read_first(plan: BuildPlan) -> None:
    reads = channel_reads(plan, outcomes(plan), "recommended")
    assert reads == {region: [parameter("same"), parameter("moved")] for region in REGIONS}
    built_only = [o for o in outcomes(plan) if o.status is not BuildStatus.SKIPPED]
    assert channel_reads(plan, built_only, "recommended") == {}


def test_built_and_moved_variants_publish_while_a_current_channel_and_a_failure_do_not(plan: BuildPlan) -> None:
    current = {region: {parameter("same"): amis("same")[region], parameter("moved"): "ami-older"}
               for region in REGIONS}
    decided = {p.name: p for p in plan_build_publish(plan, outcomes(plan), "recommended", current)}

    assert list(decided) == ["new", "same", "moved"]  # outcome order; the failed variant has no images
    assert (decided["new"].unchanged, decided["new"].run_id, decided["new"].amis) == (False, "run-1", amis("new"))
    assert (decided["same"].unchanged, decided["same"].run_id) == (True, None)
    assert (decided["moved"].unchanged, decided["moved"].run_id) == (False, None)  # reused: keeps its images' run id
    assert {p.parameter for p in decided.values()} == {parameter(n) for n in ("new", "same", "moved")}
    fingerprints = {i.name: i.fingerprint for i in plan.items}
    assert all(p.fingerprint == fingerprints[p.name] and p.variant.name == p.name for p in decided.values())


def test_a_reused_variant_is_unchanged_only_when_every_region_names_its_image(plan: BuildPlan) -> None:
    one_region = {"us-west-2": {parameter("same", "stable"): amis("same")["us-west-2"]}}  # not in eu-west-1 yet
    decided = {p.name: p for p in plan_build_publish(plan, outcomes(plan), "stable", one_region)}
    assert decided["same"].parameter == parameter("same", "stable")
    assert decided["same"].unchanged is False
    everywhere = {r: {parameter("same", "stable"): amis("same")[r]} for r in REGIONS}
    assert {p.name: p.unchanged for p in plan_build_publish(plan, outcomes(plan), "stable", everywhere)} == {
        "new": False, "same": True, "moved": False}


def test_an_interrupted_variant_publishes_nothing(plan: BuildPlan) -> None:
    stopped = [o if o.name != "new" else BuildOutcome(o.name, o.fingerprint, o.decision, o.reason,
                                                      status=BuildStatus.INTERRUPTED, amis=amis("new"))
               for o in outcomes(plan)]
    assert [p.name for p in plan_build_publish(plan, stopped, "recommended", {})] == ["same", "moved"]


def test_a_dry_run_shows_a_reused_variant_unchanged_exactly_when_the_real_publish_skips_it(plan: BuildPlan) -> None:
    plan = replace(plan, items=tuple(replace(i, existing=amis(i.name)) if i.decision is BuildDecision.SKIP else i
                                     for i in plan.items))
    # the channel names the reused images everywhere, written once without DataType (SSM then says text)
    held = {r: {parameter("same"): amis("same")[r]} for r in REGIONS}
    current = {(parameter("same"), r): Parameter(parameter("same"), r, amis("same")[r], 3, "text") for r in REGIONS}
    real = {p.name: p.unchanged for p in plan_build_publish(plan, outcomes(plan), "recommended", held)}
    moves = {m.variant: m for m in plan_moves(plan, "recommended", current, {})}
    assert real["same"] is True
    assert [(r.unchanged, r.version) for r in moves["same"].regions] == [(True, 3), (True, 3)]


def test_a_dry_run_says_a_publish_over_a_parameter_of_another_data_type_is_refused(plan: BuildPlan) -> None:
    """As the real run's plan refuses it (SSM cannot change a parameter to aws:ec2:image)."""
    current = {(parameter(name), r): Parameter(parameter(name), r, "ami-held", 3, "text" if name == "moved" else
                                                 "aws:ec2:image") for name in ("new", "moved") for r in REGIONS}
    moves = {m.variant: m for m in plan_moves(plan, "recommended", current, {})}
    assert moves["moved"].refused.startswith("us-west-2: the parameter has data type text")
    assert (moves["new"].refused, moves["same"].refused) == ("", "")


def test_a_dry_run_says_a_publish_that_would_delete_a_labelled_oldest_version_is_refused(plan: BuildPlan) -> None:
    """As the real run's plan refuses it (SSM keeps 100 versions and will not delete a labelled one)."""
    current = {(parameter(name), r): Parameter(parameter(name), r, "ami-held", 100, "aws:ec2:image")
               for name in ("new", "moved") for r in REGIONS}
    oldest = {(parameter("moved"), "eu-west-1"): Parameter(parameter("moved"), "eu-west-1", "ami-first", 1,
                                                           "aws:ec2:image", labels=("known-good",))}
    moves = {m.variant: m for m in plan_moves(plan, "recommended", current, {}, oldest)}
    assert moves["moved"].refused.startswith("eu-west-1: the parameter keeps SSM's 100 versions, and its oldest")
    assert moves["new"].refused == ""
