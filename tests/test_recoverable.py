from datetime import timedelta

import pytest

from amibuild.errors import AwsError

from amibuild.aws.image_lifecycle import retention_rule
from amibuild.lifecycle.recoverable import BinRule, recovery, rule_from_gateway

DAY = timedelta(days=1)
TAGS = {"amibuild:pipeline": "p1"}


def test_recoverable_only_when_image_and_snapshot_rules_both_cover():
    rules = [BinRule("EC2_IMAGE", 10 * DAY), BinRule("EBS_SNAPSHOT", 7 * DAY)]
    got = recovery(rules, TAGS, TAGS)
    assert got.recoverable and got.retention == 7 * DAY and not got.keep_snapshots()


@pytest.mark.parametrize("rules, why", [
    ([], "no Recycle Bin rule"),
    ([BinRule("EC2_IMAGE", DAY)], "EBS_SNAPSHOT"),
    ([BinRule("EBS_SNAPSHOT", DAY)], "EC2_IMAGE"),
    ([BinRule("EC2_IMAGE", DAY), BinRule("EBS_SNAPSHOT", DAY, resource_tags=(("team", "x"),))], "EBS_SNAPSHOT"),
])
def test_not_recoverable_keeps_snapshots(rules, why):
    got = recovery(rules, TAGS, TAGS)
    assert not got.recoverable and got.keep_snapshots() and why in got.reason


def test_exclude_tags_and_api_items():
    item = {"ResourceType": "EC2_IMAGE", "RetentionPeriod": {"RetentionPeriodValue": 3, "RetentionPeriodUnit": "DAYS"},
            "ExcludeResourceTags": [{"ResourceTagKey": "amibuild:pipeline", "ResourceTagValue": "p1"}]}
    rule = rule_from_gateway(retention_rule(item, "EC2_IMAGE"))
    assert rule.retention == 3 * DAY and not rule.covers(TAGS) and rule.covers({})
    with pytest.raises(AwsError, match="HOURS"):
        retention_rule({**item, "RetentionPeriod": {"RetentionPeriodValue": 3, "RetentionPeriodUnit": "HOURS"}},
                       "EC2_IMAGE")


def test_a_pending_rule_keeps_nothing_yet_so_the_snapshots_stay():
    """rbin's first rule in a region takes up to 30 minutes to become active (GetRule's Status is
    "pending" until then): a deleted snapshot it would cover is gone for good, not in the bin."""
    image = {"ResourceType": "EC2_IMAGE", "RetentionPeriod": {"RetentionPeriodValue": 7, "RetentionPeriodUnit": "DAYS"},
             "Status": "available", "Identifier": "rule-image"}
    snapshot = {**image, "ResourceType": "EBS_SNAPSHOT", "Status": "pending", "Identifier": "rule-snap"}
    rules = [rule_from_gateway(retention_rule(item, item["ResourceType"])) for item in (image, snapshot)]

    got = recovery(rules, TAGS, TAGS)

    assert not got.recoverable and got.keep_snapshots()
    assert "rule-snap" in got.reason and "pending" in got.reason
    assert recovery([rule_from_gateway(retention_rule({**snapshot, "Status": "available"}, "EBS_SNAPSHOT")),
                     rules[0]], TAGS, TAGS).recoverable
