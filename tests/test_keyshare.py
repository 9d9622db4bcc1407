"""doctor's key-share decision over recorded key policies: which statements give a consumer account the
operations an encrypted image's launch needs, and which conditions amibuild can judge. Pure."""

from __future__ import annotations

import pytest

from amibuild.lifecycle.keyshare import KeyFacts, SharedKey, decide

BUILD, CONSUMER = "111122223333", "444455556666"
KEY = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
SHARED = SharedKey("us-west-2", KEY, (CONSUMER,), ("ceph",))
EVERY_OPERATION = ["kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKey*", "kms:ReEncrypt*", "kms:CreateGrant"]


def finding(*statements: dict):
    facts = KeyFacts(manager="CUSTOMER", state="Enabled",
                     policy={"Version": "2012-10-17", "Statement": list(statements)})
    (found,) = decide(SHARED, facts)
    return found


def allow(principal: str, condition: dict | None = None, actions=EVERY_OPERATION) -> dict:
    statement = {"Effect": "Allow", "Principal": {"AWS": principal}, "Action": actions, "Resource": "*"}
    return {**statement, "Condition": condition} if condition else statement


@pytest.mark.parametrize("condition", [
    {"StringEquals": {"kms:CallerAccount": BUILD}},  # the shape of AWS's EBS key policies
    {"StringEquals": {"aws:PrincipalAccount": [BUILD, "999999999999"]}},
    {"StringLike": {"kms:CallerAccount": "1111*"}},
])
def test_a_statement_for_everyone_limited_to_other_calling_accounts_gives_the_consumer_nothing(condition) -> None:
    found = finding(allow("*", condition))
    assert not found.ok
    assert "lacks kms:Decrypt, kms:DescribeKey" in found.line()


@pytest.mark.parametrize("condition", [
    {"StringEquals": {"kms:CallerAccount": [BUILD, CONSUMER]}},
    {"StringLike": {"aws:PrincipalAccount": "4444*"}},
])
def test_a_statement_for_everyone_limited_to_calling_accounts_that_include_the_consumer_is_its_right(condition) -> None:
    found = finding(allow("*", condition))
    assert found.ok and found.via == ("key policy",)


def test_a_condition_on_anything_else_is_counted_and_said_to_be_unjudged() -> None:
    # an organisation-wide key: whether the consumer is in o-abc is not known to the build account
    found = finding(allow("*", {"StringEquals": {"aws:PrincipalOrgID": "o-abc1234567"}}))
    assert found.ok
    assert found.via == ("key policy, under a condition amibuild cannot judge",)
    assert found.line().endswith("may use it (key policy, under a condition amibuild cannot judge)")


def test_create_grant_for_aws_resources_only_is_not_the_consumers_own_create_grant() -> None:
    found = finding(allow(f"arn:aws:iam::{CONSUMER}:root", actions=EVERY_OPERATION[:4]),
                    allow(f"arn:aws:iam::{CONSUMER}:root", {"Bool": {"kms:GrantIsForAWSResource": "true"}},
                          actions=["kms:CreateGrant"]))
    assert not found.ok and found.missing == ("CreateGrant",)


def test_an_unconditional_statement_still_wins_over_an_unjudged_one() -> None:
    found = finding(allow(CONSUMER), allow("*", {"StringEquals": {"aws:PrincipalOrgID": "o-abc1234567"}}))
    assert found.ok and found.via == ("key policy",)


def test_a_deny_wins_whatever_its_condition() -> None:
    deny = {"Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "kms:CreateGrant", "Resource": "*",
            "Condition": {"StringEquals": {"aws:PrincipalOrgID": "o-abc1234567"}}}
    found = finding(allow(CONSUMER), deny)
    assert not found.ok and found.missing == ("CreateGrant",)


def test_not_action_and_not_principal_statements_count_for_everything_they_do_not_name() -> None:
    """A Deny of every action but Decrypt, or of every principal but the build account, takes the
    consumer's operations away; an Allow with NotAction gives all it does not name."""
    everyone = {"Effect": "Deny", "Principal": {"AWS": "*"}, "NotAction": "kms:Decrypt", "Resource": "*"}
    assert finding(allow(CONSUMER), everyone).missing == ("DescribeKey", "GenerateDataKey", "GenerateDataKeyWithoutPlaintext",
                                                          "ReEncryptFrom", "ReEncryptTo", "CreateGrant")
    others = {"Effect": "Deny", "NotPrincipal": {"AWS": f"arn:aws:iam::{BUILD}:root"}, "Action": "kms:*",
              "Resource": "*"}
    assert not finding(allow(CONSUMER), others).ok
    spared = {**others, "NotPrincipal": {"AWS": [f"arn:aws:iam::{BUILD}:root", CONSUMER]}}
    assert finding(allow(CONSUMER), spared).ok
    assert finding({"Effect": "Allow", "Principal": {"AWS": CONSUMER}, "NotAction": "kms:ScheduleKeyDeletion",
                    "Resource": "*"}).ok
