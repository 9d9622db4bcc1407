"""Shared encrypted images against the emulator: `doctor`'s key-share check before and after the
statements and grants `iam-policy --task share` prints are applied, and the emulator's KMS as AWS
answers it (key regions, key policies, CreateGrant's validation, DryRun and retries, ListGrants' pages)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError

from conftest import run_cli

BUILD = "123456789012"
CONSUMERS = ("210987654321", "333344445555")


def amibuild(cwd: Path, *args: str):
    return run_cli(cwd, *args, binary="amibuild")


def code(refused: pytest.ExceptionInfo) -> str:
    return refused.value.response["Error"]["Code"]


@pytest.fixture
def keys(sandbox, tmp_path: Path) -> dict:
    """A key in us-west-2 and one in eu-west-1 (the build account's), and a pipeline that builds in
    us-west-2, copies to eu-west-1 and shares with CONSUMERS."""
    west = boto3.client("kms", region_name="us-west-2").create_key()["KeyMetadata"]["Arn"]
    eu = boto3.client("kms", region_name="eu-west-1").create_key()["KeyMetadata"]["Arn"]
    (tmp_path / "amibuild.hcl").write_text(f"""
pipeline {{
  name      = "keys"
  regions   = ["us-west-2"]
  copy_to   = ["eu-west-1"]
  ami_users = {json.dumps(list(CONSUMERS))}
}}
variant "ceph" {{
  os                 = "al2023"
  kubernetes_version = "1.33"
  encrypted          = true
  kms_key_id         = "{west}"
  region_kms_key_ids = {{ "eu-west-1" = "{eu}" }}
}}
""")
    return {"us-west-2": west, "eu-west-1": eu, "dir": tmp_path}


def key_share(work: Path) -> tuple[int, list[dict]]:
    done = amibuild(work, "doctor", "--json")
    return done.returncode, [c for c in json.loads(done.stdout) if c["name"] == "key-share"]


def test_doctor_names_each_account_region_and_key_without_rights_and_the_fixing_command(keys) -> None:
    returncode, rows = key_share(keys["dir"])
    assert returncode == 1
    assert len(rows) == 4 and not any(r["ok"] for r in rows)
    for region in ("us-west-2", "eu-west-1"):
        for account in CONSUMERS:
            (row,) = [r for r in rows if r["message"].startswith(f"{region} key {keys[region]}: account {account} ")]
            assert "lacks kms:Decrypt, kms:DescribeKey" in row["message"]
            assert "`amibuild iam-policy --task share`" in row["message"] and "(--form grants)" in row["message"]


def test_the_share_tasks_statements_and_grants_applied_make_doctor_pass(keys) -> None:
    work = keys["dir"]
    # us-west-2: the key policy statements, added to the key's own policy
    statements = json.loads(amibuild(work, "iam-policy", "--task", "share").stdout)
    (west,) = [k for k in statements["keys"] if k["region"] == "us-west-2"]
    kms = boto3.client("kms", region_name="us-west-2")
    policy = json.loads(kms.get_key_policy(KeyId=keys["us-west-2"])["Policy"])
    policy["Statement"] += west["key_policy_statements"]
    kms.put_key_policy(KeyId=keys["us-west-2"], Policy=json.dumps(policy))
    # eu-west-1: the CreateGrant calls, for the first consumer only
    calls = amibuild(work, "iam-policy", "--task", "share", "--form", "grants").stdout.splitlines()
    eu = boto3.client("kms", region_name="eu-west-1")

    def grant(line: str) -> None:
        args = re.match(r"aws kms create-grant --region eu-west-1 --key-id (\S+) --grantee-principal (\S+) "
                        r"--operations (.+) --name (\S+)$", line).groups()
        eu.create_grant(KeyId=args[0], GranteePrincipal=args[1], Operations=args[2].split(), Name=args[3])

    eu_calls = [c for c in calls if "--region eu-west-1" in c]
    grant(next(c for c in eu_calls if CONSUMERS[0] in c))
    returncode, rows = key_share(work)
    failing = [r["message"] for r in rows if not r["ok"]]
    assert returncode == 1 and len(failing) == 1
    assert failing[0].startswith(f"eu-west-1 key {keys['eu-west-1']}: account {CONSUMERS[1]} lacks ")
    assert sum(r["ok"] and "(key policy)" in r["message"] for r in rows) == 2
    assert f"account {CONSUMERS[0]} may use it (grant amibuild-shared-image-{CONSUMERS[0]})" in \
        " ".join(r["message"] for r in rows)
    grant(next(c for c in eu_calls if CONSUMERS[1] in c))
    returncode, rows = key_share(work)
    assert len(rows) == 4 and all(r["ok"] for r in rows), rows
    assert returncode == 0


def test_a_consumer_uses_a_key_by_the_share_tasks_grant(keys, tmp_path: Path) -> None:
    for line in amibuild(keys["dir"], "iam-policy", "--task", "share", "--form", "grants").stdout.splitlines():
        region, key, grantee, operations, name = re.match(
            r"aws kms create-grant --region (\S+) --key-id (\S+) --grantee-principal (\S+) --operations (.+) "
            r"--name (\S+)$", line).groups()
        boto3.client("kms", region_name=region).create_grant(KeyId=key, GranteePrincipal=grantee,
                                                             Operations=operations.split(), Name=name)
    assumed = boto3.client("sts", region_name="eu-west-1").assume_role(
        RoleArn=f"arn:aws:iam::{CONSUMERS[0]}:role/platform", RoleSessionName="consumer")["Credentials"]
    consumer = boto3.client("kms", region_name="eu-west-1", aws_access_key_id=assumed["AccessKeyId"],
                            aws_secret_access_key=assumed["SecretAccessKey"], aws_session_token=assumed["SessionToken"])
    assert consumer.describe_key(KeyId=keys["eu-west-1"])["KeyMetadata"]["Arn"] == keys["eu-west-1"]
    with pytest.raises(ClientError) as refused:  # what EC2 needs to launch from the image: it would succeed
        consumer.create_grant(KeyId=keys["eu-west-1"], GranteePrincipal=f"arn:aws:iam::{CONSUMERS[0]}:root",
                              Operations=["Decrypt"], DryRun=True)
    assert code(refused) == "DryRunOperationException"
    with pytest.raises(ClientError) as refused:  # AWS allows no GetKeyPolicy from another account
        consumer.get_key_policy(KeyId=keys["eu-west-1"])
    assert code(refused) == "NotFoundException"


def test_doctor_says_nothing_of_keys_for_a_pipeline_that_shares_nothing(sandbox, tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text('pipeline {\n  name = "keys"\n  regions = ["us-west-2"]\n}\n'
                                           'variant "ceph" {\n  os = "al2023"\n  kubernetes_version = "1.33"\n}\n')
    done = amibuild(tmp_path, "doctor", "--json")
    assert "key-share" not in done.stdout and "identity" in done.stdout


# ------------------------------------------------------------------------------- the emulator's KMS


def test_a_key_arn_of_another_region_is_not_found_there(sandbox) -> None:
    east = boto3.client("kms", region_name="us-east-1").create_key()["KeyMetadata"]["Arn"]
    eu = boto3.client("kms", region_name="eu-west-1")
    for key_id in (east, east.replace(":key/", ":alias/").rsplit("/", 1)[0] + "/mine"):
        with pytest.raises(ClientError) as refused:
            eu.describe_key(KeyId=key_id)
        assert code(refused) == "NotFoundException" and refused.value.response["Error"]["Message"] == "Invalid arn us-east-1"
    with pytest.raises(ClientError) as refused:
        eu.create_grant(KeyId=east, GranteePrincipal=f"arn:aws:iam::{CONSUMERS[0]}:root", Operations=["Decrypt"])
    assert code(refused) == "NotFoundException"
    assert boto3.client("kms", region_name="us-east-1").describe_key(KeyId=east)["KeyMetadata"]["Arn"] == east


def test_key_policies_default_their_name_and_refuse_a_document_without_statements(sandbox) -> None:
    kms = boto3.client("kms", region_name="us-west-2")
    key = kms.create_key()["KeyMetadata"]["Arn"]
    answer = kms.get_key_policy(KeyId=key)  # no PolicyName: "default", as AWS takes it
    assert answer["PolicyName"] == "default" and json.loads(answer["Policy"])["Statement"]
    for document in ("{}", "not json", json.dumps({"Statement": []})):
        with pytest.raises(ClientError) as refused:
            kms.put_key_policy(KeyId=key, Policy=document)
        assert code(refused) == "MalformedPolicyDocumentException"
    with pytest.raises(ClientError) as refused:
        kms.get_key_policy(KeyId=key, PolicyName="other")
    assert code(refused) == "NotFoundException"


def test_create_grant_validates_honours_dry_run_and_returns_the_first_grant_on_a_retry(sandbox) -> None:
    kms = boto3.client("kms", region_name="us-west-2")
    key = kms.create_key()["KeyMetadata"]["Arn"]
    grantee = f"arn:aws:iam::{CONSUMERS[0]}:root"
    with pytest.raises(ClientError) as refused:
        kms.create_grant(KeyId=key, GranteePrincipal=grantee, Operations=["Decrypt", "Fly"])
    assert code(refused) == "ValidationException" and "'operations'" in refused.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as refused:
        kms.create_grant(KeyId=key, Operations=["Decrypt"])  # neither GranteePrincipal nor GranteeServicePrincipal
    assert code(refused) == "ValidationException"
    with pytest.raises(ClientError) as refused:
        kms.create_grant(KeyId=key, GranteePrincipal=grantee, Operations=["Decrypt"], DryRun=True)
    assert code(refused) == "DryRunOperationException"
    assert kms.list_grants(KeyId=key)["Grants"] == []  # a dry run makes nothing
    first = kms.create_grant(KeyId=key, GranteePrincipal=grantee, Operations=["Decrypt", "DescribeKey"], Name="share")
    again = kms.create_grant(KeyId=key, GranteePrincipal=grantee, Operations=["DescribeKey", "Decrypt"], Name="share")
    assert again["GrantId"] == first["GrantId"]
    (only,) = kms.list_grants(KeyId=key)["Grants"]
    assert only["KeyId"] == key and only["IssuingAccount"] == f"arn:aws:iam::{BUILD}:root"


def test_list_grants_pages_by_limit_and_marker_and_filters_by_grantee(sandbox) -> None:
    kms = boto3.client("kms", region_name="us-west-2")
    key = kms.create_key()["KeyMetadata"]["Arn"]
    made = [kms.create_grant(KeyId=key, GranteePrincipal=f"arn:aws:iam::{CONSUMERS[n % 2]}:root",
                             Operations=["Decrypt"], Name=f"g{n}")["GrantId"] for n in range(5)]
    first = kms.list_grants(KeyId=key, Limit=2)
    assert len(first["Grants"]) == 2 and first["Truncated"] is True and first["NextMarker"]
    seen = [g["GrantId"] for page in kms.get_paginator("list_grants").paginate(KeyId=key, PaginationConfig={"PageSize": 2})
            for g in page["Grants"]]
    assert sorted(seen) == sorted(made) and len(seen) == 5
    last = kms.list_grants(KeyId=key, Limit=100)
    assert last["Truncated"] is False and "NextMarker" not in last and len(last["Grants"]) == 5
    mine = kms.list_grants(KeyId=key, GranteePrincipal=f"arn:aws:iam::{CONSUMERS[1]}:root")["Grants"]
    assert [g["Name"] for g in mine] == ["g1", "g3"]
    with pytest.raises(ClientError) as refused:
        kms.list_grants(KeyId=key, Limit=101)
    assert code(refused) == "ValidationException"



def test_a_create_grant_statement_for_aws_resources_only_does_not_let_a_consumer_call_it_directly(sandbox) -> None:
    kms = boto3.client("kms", region_name="us-west-2")
    key = kms.create_key()["KeyMetadata"]["Arn"]
    policy = json.loads(kms.get_key_policy(KeyId=key)["Policy"])
    statement = {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{CONSUMERS[0]}:root"},
                 "Action": ["kms:CreateGrant", "kms:DescribeKey"], "Resource": "*"}
    policy["Statement"].append({**statement, "Condition": {"Bool": {"kms:GrantIsForAWSResource": "true"}}})
    kms.put_key_policy(KeyId=key, Policy=json.dumps(policy))
    assumed = boto3.client("sts", region_name="us-west-2").assume_role(
        RoleArn=f"arn:aws:iam::{CONSUMERS[0]}:role/platform", RoleSessionName="consumer")["Credentials"]
    consumer = boto3.client("kms", region_name="us-west-2", aws_access_key_id=assumed["AccessKeyId"],
                            aws_secret_access_key=assumed["SecretAccessKey"], aws_session_token=assumed["SessionToken"])
    for call in (lambda: consumer.describe_key(KeyId=key),
                 lambda: consumer.create_grant(KeyId=key, GranteePrincipal=f"arn:aws:iam::{CONSUMERS[0]}:root",
                                               Operations=["Decrypt"], DryRun=True)):
        with pytest.raises(ClientError) as refused:
            call()
        assert code(refused) == "AccessDeniedException"
    policy["Statement"][-1] = statement  # the share task's form: no condition
    kms.put_key_policy(KeyId=key, Policy=json.dumps(policy))
    with pytest.raises(ClientError) as refused:
        consumer.create_grant(KeyId=key, GranteePrincipal=f"arn:aws:iam::{CONSUMERS[0]}:root", Operations=["Decrypt"],
                              DryRun=True)
    assert code(refused) == "DryRunOperationException"


def test_a_key_policy_statement_for_everyone_under_a_condition_is_not_taken_as_the_consumers_right(keys) -> None:
    # the shape of AWS's own EBS key policies: every principal, but only calls from the build account (or
    # from a consumer only for AWS resources): whether the condition holds for a consumer is not judged here
    work = keys["dir"]
    kms = boto3.client("kms", region_name="us-west-2")
    policy = json.loads(kms.get_key_policy(KeyId=keys["us-west-2"])["Policy"])
    policy["Statement"] += [
        {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": ["kms:Decrypt", "kms:DescribeKey", "kms:ReEncrypt*",
                                                                  "kms:GenerateDataKey*", "kms:CreateGrant"],
         "Resource": "*", "Condition": {"StringEquals": {"kms:CallerAccount": BUILD}}},
        {"Effect": "Allow", "Principal": {"AWS": [f"arn:aws:iam::{a}:root" for a in CONSUMERS]},
         "Action": "kms:CreateGrant", "Resource": "*", "Condition": {"Bool": {"kms:GrantIsForAWSResource": "true"}}}]
    kms.put_key_policy(KeyId=keys["us-west-2"], Policy=json.dumps(policy))
    returncode, rows = key_share(work)
    west = [r for r in rows if r["message"].startswith(f"us-west-2 key {keys['us-west-2']}: ")]
    assert len(west) == 2 and not any(r["ok"] for r in west), west
    assert all("lacks kms:Decrypt, kms:DescribeKey" in r["message"] and "kms:CreateGrant" in r["message"] for r in west)
    assert returncode == 1
