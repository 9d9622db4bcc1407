"""Allowed AMIs as amibuild decides it (amibuild.handoff.allowed): pure, over recorded facts."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from amibuild.handoff import allowed

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
BUILD, CONSUMER = "123456789012", "210987654321"
IMAGE = allowed.SeenImage("ami-1", BUILD, "acct-ceph-1.33-x86_64-1767225600", "2026-11-20T00:00:00.000Z")


def settings(state: str, *criteria: dict) -> allowed.Settings:
    return allowed.Settings(state, tuple(allowed.criterion_from_api(c) for c in criteria))


@pytest.mark.parametrize("criteria, admitted, says", [
    ([{"ImageProviders": [BUILD], "ImageNames": ["acct-ceph-*"]}], True, ""),
    ([{"ImageProviders": ["111111111111"]}], False, f"do not name the provider account {BUILD}"),
    ([{"ImageProviders": [BUILD], "ImageNames": ["other-*"]}], False, "ImageNames other-* do not match"),
    ([{"ImageProviders": [BUILD], "CreationDateCondition": {"MaximumDaysSinceCreated": 5}}], False,
     "created more than 5 d ago"),
    ([{"ImageProviders": [BUILD], "CreationDateCondition": {"MaximumDaysSinceCreated": 30}}], True, ""),
    ([{"ImageProviders": ["111111111111"]}, {"ImageNames": ["acct-*"]}], True, ""),  # any criterion admits
    ([], False, "no image criteria are set"),
])
def test_an_image_is_admitted_when_any_criterion_holds_in_full(criteria, admitted, says) -> None:
    verdict = allowed.admission(settings("enabled", *criteria), IMAGE, CONSUMER, NOW)
    assert verdict.allowed is admitted and verdict.refused is (not admitted)
    assert says in "; ".join(verdict.reasons)


def test_image_names_know_only_aws_s_wildcards_and_brackets_are_letters() -> None:
    """ImageNames take * and ? only: an AMI name may hold brackets, which fnmatch would read as a class."""
    bracketed = allowed.SeenImage("ami-3", BUILD, "eks [prod] 1.33", "2026-11-20T00:00:00.000Z")
    for pattern, admitted in (("eks [prod] *", True), ("eks [prod] 1.3?", True), ("eks [dorp] *", False),
                              ("eks p *", False)):
        verdict = allowed.admission(settings("enabled", {"ImageNames": [pattern]}), bracketed, CONSUMER, NOW)
        assert verdict.allowed is admitted, pattern


def test_audit_mode_and_disabled_refuse_nothing_and_own_images_are_always_allowed() -> None:
    for state in ("audit-mode", "disabled"):
        verdict = allowed.admission(settings(state, {"ImageProviders": ["111111111111"]}), IMAGE, CONSUMER, NOW)
        assert not verdict.allowed and not verdict.refused
    assert allowed.admission(settings("enabled"), IMAGE, BUILD, NOW).allowed


def test_a_deprecated_image_passes_the_deprecation_condition_only_within_its_days() -> None:
    old = allowed.SeenImage("ami-2", BUILD, "acct-x", "2026-01-01T00:00:00Z", deprecation_time="2026-10-01T00:00:00Z")
    within = settings("enabled", {"ImageProviders": [BUILD], "DeprecationTimeCondition": {"MaximumDaysSinceDeprecated": 90}})
    past = settings("enabled", {"ImageProviders": [BUILD], "DeprecationTimeCondition": {"MaximumDaysSinceDeprecated": 30}})
    assert allowed.admission(within, old, CONSUMER, NOW).allowed
    assert not allowed.admission(past, old, CONSUMER, NOW).allowed


def test_the_cli_commands_carry_the_criteria_as_the_api_takes_them() -> None:
    (criterion,) = allowed.pipeline_criteria(BUILD, ["acct-ceph-1.33-x86_64", "acct-ceph-1.33-x86_64"],
                                             max_days_since_created=180)
    assert criterion.to_api() == {"ImageProviders": [BUILD], "ImageNames": ["acct-ceph-1.33-x86_64-*"],
                                  "CreationDateCondition": {"MaximumDaysSinceCreated": 180}}
    replace, enable = allowed.cli_commands([criterion], ["eu-west-1"])
    assert json.loads(replace.split("--image-criteria ", 1)[1].strip("'")) == [criterion.to_api()]
    assert "enable-allowed-images-settings --region eu-west-1" in enable
    template = allowed.cloudformation([criterion])
    assert template["Resources"]["AllowedImages"]["Properties"]["ImageCriteria"] == [criterion.to_api()]


def test_more_than_fifty_name_patterns_are_split_into_criteria_of_fifty() -> None:
    criteria = allowed.pipeline_criteria(BUILD, [f"acct-v{n}-1.33-x86_64" for n in range(120)])
    assert [len(c.names) for c in criteria] == [50, 50, 20]
    assert all(c.providers == (BUILD,) for c in criteria)
    assert criteria[0].names[0] == "acct-v0-1.33-x86_64-*"


def test_doctor_consumers_rows_from_recorded_facts() -> None:
    from amibuild.aws.accounts import SharedImage
    from amibuild.handoff.consumer import RegionFacts, decide

    facts = RegionFacts(
        "eu-west-1", settings("audit-mode", {"ImageProviders": ["111111111111"]}), block_public="block-new-sharing",
        images={"ceph/stable": "ami-1", "gpu/stable": ""}, seen={"ami-1": None}, known={"ami-1": IMAGE},
        launch_users={"ami-1": frozenset({"999999999999"})}, keys={"arn:aws:kms:eu-west-1:123456789012:key/k": "denied"})
    rows = {(r.name, r.ok, r.warn): r.message for r in decide(CONSUMER, [facts])}
    assert ("block-public-access eu-west-1", True, False) in rows
    warned = rows[("allowed-amis eu-west-1", True, True)]  # audit mode: a warning, not a failure
    assert warned.startswith("audit-mode (refuses nothing yet): ami-1") and "111111111111" in warned
    assert "not shared with account 210987654321" in rows[("image ceph/stable eu-west-1", False, False)]
    assert "the channel has no image here" in rows[("image gpu/stable eu-west-1", False, False)]
    assert "denied" in rows[("key eu-west-1", False, False)]
    seen = SharedImage("ami-1", BUILD, IMAGE.name, "available")
    ok = RegionFacts("eu-west-1", settings("enabled", {"ImageProviders": [BUILD]}), block_public="unblocked",
                     images={"ceph/stable": "ami-1"}, seen={"ami-1": seen})
    rows = {(r.name, r.ok): r.message for r in decide(CONSUMER, [ok])}
    assert rows[("allowed-amis eu-west-1", True)] == "enabled: admits ami-1"
    assert "enable-image-block-public-access" in rows[("block-public-access eu-west-1", False)]
    assert rows[("image ceph/stable eu-west-1", True)] == "ami-1 visible (available)"


def test_the_cloudformation_template_passes_cfn_lint_and_names_no_partition() -> None:
    # deployed per consumer account and region, e.g. by a StackSet: aws-cn and aws-us-gov included
    from cfnlint.api import ManualArgs, lint

    criteria = allowed.pipeline_criteria(BUILD, ["acct-ceph-1.33-x86_64"], max_days_since_created=180)
    text = json.dumps(allowed.cloudformation(criteria))
    for regions in (["eu-west-1"], ["cn-north-1"], ["us-gov-west-1"]):
        assert [(m.rule.id, m.message) for m in lint(text, config=ManualArgs(regions=regions))] == [], regions
    assert "arn:aws:" not in text  # every ARN takes ${AWS::Partition}


@pytest.mark.parametrize("permission", [
    "all",  # public
    "arn:aws:organizations::123456789012:organization/o-abc123example",
    "arn:aws:organizations::123456789012:ou/o-abc123example/ou-ab12-cdef3456",
])
def test_doctor_consumer_does_not_call_an_image_shared_with_everyone_or_an_organisation_unshared(permission) -> None:
    from amibuild.aws.accounts import SharedImage
    from amibuild.handoff.consumer import RegionFacts, decide

    # the launch permission names no account: the consumer may still be covered (public, or in the organisation)
    seen = SharedImage("ami-1", BUILD, IMAGE.name, "available")
    facts = RegionFacts("eu-west-1", settings("disabled"), block_public="block-new-sharing",
                        images={"ceph/stable": "ami-1"}, seen={"ami-1": seen}, known={"ami-1": IMAGE},
                        launch_users={"ami-1": frozenset({permission})})
    rows = {(r.name, r.ok): r.message for r in decide(CONSUMER, [facts])}
    assert rows[("image ceph/stable eu-west-1", True)] == "ami-1 visible (available)"
    unseen = RegionFacts("eu-west-1", settings("disabled"), block_public="block-new-sharing",
                         images={"ceph/stable": "ami-1"}, seen={"ami-1": None}, known={"ami-1": IMAGE},
                         launch_users={"ami-1": frozenset({permission})})
    rows = {(r.name, r.ok): r.message for r in decide(CONSUMER, [unseen])}
    assert "is not visible from account 210987654321" in rows[("image ceph/stable eu-west-1", False)]
