"""What the accounts an encrypted image is shared with (`ami_users`) need on each region's KMS key,
and whether they have it: the key policy statements or CreateGrant calls (`run`, for
`iam-policy --task share`), and a pure verdict over a key's policy and grants (`decide`, for doctor).

A user of a shared encrypted snapshot needs on its key: DescribeKey, CreateGrant (the consumer
grants its Auto Scaling role itself), Decrypt, GenerateDataKey(WithoutPlaintext), ReEncrypt*.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from typing import Any, Mapping

from amibuild.errors import SpecError
from amibuild.pipeline.keys import region_keys
from amibuild.pipeline.options import Options, load_pipeline

OPERATIONS = ("Decrypt", "DescribeKey", "GenerateDataKey", "GenerateDataKeyWithoutPlaintext", "ReEncryptFrom",
              "ReEncryptTo", "CreateGrant")
FORMS = ("policy", "grants")


@dataclass(frozen=True)
class SharedKey:
    """One region's key of the pipeline's images, and the accounts that must be able to use it."""

    region: str
    key: str
    accounts: tuple[str, ...]
    variants: tuple[str, ...]


def shared_keys(pipeline: Any) -> tuple[SharedKey, ...]:
    """Every (region, key) an image shared by `ami_users` is encrypted with; none when not shared."""
    if not pipeline.ami_users:
        return ()
    found: dict[tuple[str, str], list[str]] = {}
    for variant in pipeline.variants:
        for region, key in region_keys(variant, pipeline.regions, pipeline.copy_to).items():
            if key:  # load refuses a shared image on aws/ebs
                found.setdefault((region, key), []).append(variant.name)
    return tuple(SharedKey(region, key, tuple(pipeline.ami_users), tuple(names))
                 for (region, key), names in found.items())


def principal(account: str, partition: str = "aws") -> str:
    return f"arn:{partition}:iam::{account}:root"


def key_policy_statements(shared: SharedKey, partition: str = "aws") -> list[dict[str, Any]]:
    """The statements to add to the key's policy: use the key, and create grants. CreateGrant has no
    kms:GrantIsForAWSResource condition: the consumer account itself grants its Auto Scaling
    service-linked role (node groups launch through it), and AWS requires that grant be made there."""
    principals = [principal(a, partition) for a in shared.accounts]
    return [
        {"Sid": "AmibuildSharedImageUse", "Effect": "Allow", "Principal": {"AWS": principals},
         "Action": ["kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKey", "kms:GenerateDataKeyWithoutPlaintext",
                    "kms:ReEncrypt*"], "Resource": "*"},
        {"Sid": "AmibuildSharedImageGrants", "Effect": "Allow", "Principal": {"AWS": principals},
         "Action": "kms:CreateGrant", "Resource": "*"},
    ]


def grant_calls(shared: SharedKey, partition: str = "aws") -> list[dict[str, Any]]:
    """The CreateGrant requests (one per account) that give the same rights without a policy change."""
    return [{"KeyId": shared.key, "GranteePrincipal": principal(a, partition), "Operations": list(OPERATIONS),
             "Name": f"amibuild-shared-image-{a}"} for a in shared.accounts]


def grant_command(region: str, call: Mapping[str, Any]) -> str:
    return (f"aws kms create-grant --region {region} --key-id {call['KeyId']} --grantee-principal "
            f"{call['GranteePrincipal']} --operations {' '.join(call['Operations'])} --name {call['Name']}")


def slr_grant_command(partition: str = "aws") -> str:
    """The grant a consumer account makes itself so its Auto Scaling groups can launch the image
    (OPERATIONS: a grant made by a grantee may not pass the operations of its own grant)."""
    return (f"aws kms create-grant --region REGION --key-id KEY_ARN --grantee-principal arn:{partition}:iam::"
            "CONSUMER_ACCOUNT:role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling "
            f"--operations {' '.join(OPERATIONS)}")


@dataclass(frozen=True)
class ShareSettings:
    """What `iam-policy --task share` reads: the pipeline, the form of the answer, the partition."""

    options: Options
    form: str = "policy"  # --form: policy (key policy statements) or grants (CreateGrant calls)
    partition: str = "aws"


@dataclass(frozen=True)
class ShareResult:
    form: str
    keys: tuple[dict[str, Any], ...]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"form": self.form, "keys": list(self.keys)}

    def lines(self) -> list[str]:
        if self.form == "grants":
            return [grant_command(k["region"], call) for k in self.keys for call in k["create_grant"]]
        return json.dumps(self.to_dict(), indent=2).splitlines()

    def raise_for_status(self) -> None:
        """Nothing to raise: bad input is refused before a result exists."""


def refuse_form(task: str, form: str) -> None:
    """--form belongs to --task share: refused (exit 2) with any other task."""
    raise SpecError(f"--form {form!r}: only with --task share (the key policy statements or CreateGrant calls of "
                    f"shared images' keys); --task {task} prints an IAM policy document")


def run(request: ShareSettings) -> ShareResult:
    """What each consumer account needs on each region's key (no AWS call)."""
    if request.form not in FORMS:
        raise SpecError(f"--form {request.form!r}: one of {', '.join(FORMS)}")
    if not re.match(r"^aws[a-z-]*\Z", request.partition or ""):
        raise SpecError(f"--partition {request.partition!r}: aws, aws-cn or aws-us-gov")
    pipeline = load_pipeline(request.options)
    if not pipeline.ami_users:
        raise SpecError("iam-policy --task share: the pipeline shares no image (pipeline.ami_users is empty); "
                        "list the consumer accounts in pipeline.ami_users")
    keys = [{"region": shared.region, "key": shared.key, "accounts": list(shared.accounts),
             "variants": list(shared.variants),
             **({"create_grant": grant_calls(shared, request.partition)} if request.form == "grants"
                else {"key_policy_statements": key_policy_statements(shared, request.partition)})}
            for shared in shared_keys(pipeline)]
    notes = ("no variant is encrypted with a KMS key: the shared images need no key rights",) if not keys else (
        "each consumer account's own principals also need an IAM policy allowing these actions on the key",
        "Auto Scaling (EKS node groups) launches through the consumer's service-linked role: run in the consumer "
        f"account, per key: {slr_grant_command(request.partition)}")
    return ShareResult(request.form, tuple(keys), notes)


# ------------------------------------------------------------------------------- the verdict


@dataclass(frozen=True)
class KeyFacts:
    """What was read about one `SharedKey`: DescribeKey, GetKeyPolicy and ListGrants; `problem` when unreadable."""

    manager: str = ""  # CUSTOMER or AWS
    state: str = ""
    policy: Mapping[str, Any] | None = None
    grants: tuple[Mapping[str, Any], ...] = ()
    problem: str = ""


@dataclass(frozen=True)
class Finding:
    region: str
    key: str
    account: str
    ok: bool
    missing: tuple[str, ...] = ()
    via: tuple[str, ...] = ()  # "key policy", "grant NAME"
    problem: str = ""

    def line(self) -> str:
        where = f"{self.region} key {self.key}"
        if self.problem:
            return f"{where}: {self.problem}"
        if self.ok:
            return f"{where}: account {self.account} may use it ({', '.join(self.via)})"
        return (f"{where}: account {self.account} lacks {', '.join('kms:' + m for m in self.missing)}; "
                "add the statements of `amibuild iam-policy --task share` to the key policy, or create the grants "
                "(--form grants)")


def decide(shared: SharedKey, facts: KeyFacts) -> list[Finding]:
    """One finding per consumer account: whether the key's policy and grants allow every operation."""
    problem = facts.problem
    if not problem and facts.manager == "AWS":
        problem = ("an AWS-managed key: its policy cannot be changed, so no other account can use it; "
                   "use a customer managed key")
    elif not problem and facts.state and facts.state != "Enabled":
        problem = f"the key is {facts.state}"
    if problem:
        return [Finding(shared.region, shared.key, a, False, problem=problem) for a in shared.accounts]
    out = []
    for account in shared.accounts:
        by_policy, unjudged = _policy_allows(facts.policy or {}, account)
        by_grants: dict[str, str] = {}
        for grant in facts.grants:
            if _is_account(grant.get("GranteePrincipal", ""), account):
                for op in grant.get("Operations", ()):
                    by_grants.setdefault(op, f"grant {grant.get('Name') or grant.get('GrantId', '')}".strip())
        missing = tuple(op for op in OPERATIONS if op not in by_policy and op not in by_grants)
        policy_via = ["key policy"] if by_policy - unjudged else []
        if unjudged & by_policy:  # allowed only under a condition on something else than the calling account
            policy_via.append("key policy, under a condition amibuild cannot judge")
        via = tuple(dict.fromkeys([*policy_via,
                                   *(by_grants[op] for op in OPERATIONS if op in by_grants and op not in by_policy)]))
        out.append(Finding(shared.region, shared.key, account, not missing, missing, via))
    return out


def _is_account(value: str, account: str) -> bool:
    return value == account or (value.startswith("arn:aws") and value.endswith(f":iam::{account}:root"))


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _policy_allows(policy: Mapping[str, Any], account: str) -> tuple[set[str], set[str]]:
    """The OPERATIONS the policy's statements for the account (or every principal) allow it, Deny winning;
    and those of them allowed only under a condition `_condition_holds` cannot judge."""
    allowed: set[str] = set()
    unjudged: set[str] = set()
    denied: set[str] = set()
    for statement in _listed(policy.get("Statement", [])):
        if not isinstance(statement, Mapping):
            continue
        # NotPrincipal: everyone but those named; NotAction: every action but those named
        named = "NotPrincipal" not in statement
        who = statement.get("Principal" if named else "NotPrincipal", {})
        names = _listed(who.get("AWS", [])) if isinstance(who, Mapping) else _listed(who)
        if any(n == "*" or _is_account(str(n), account) for n in names) is not named:
            continue
        ops = {op for op in OPERATIONS for action in _listed(statement.get("Action", statement.get("NotAction", [])))
               if fnmatch.fnmatchcase(f"kms:{op}".lower(), str(action).lower())}
        if "NotAction" in statement:
            ops = set(OPERATIONS) - ops
        if statement.get("Effect") == "Deny":
            denied.update(ops)
            continue
        holds = _condition_holds(statement.get("Condition"), account)
        if holds is not False:
            (allowed if holds else unjudged).update(ops)
    return (allowed | unjudged) - denied, unjudged - allowed


def _condition_holds(condition: Any, account: str) -> bool | None:
    """Whether an Allow's Condition holds for the consumer account's own calls: False when it names other
    calling accounts (kms:CallerAccount, aws:PrincipalAccount) or keeps to grants for AWS resources (the
    consumer creates its grants itself); None when it tests anything else; True when there is none."""
    if not condition:
        return True
    holds: bool | None = True
    for operator, block in (condition.items() if isinstance(condition, Mapping) else [("", None)]):
        test = str(operator).removeprefix("ForAnyValue:").removesuffix("IfExists")
        for key, values in (block.items() if isinstance(block, Mapping) else [("", None)]):
            key, values = str(key).lower(), [str(v) for v in _listed(values)]
            if key == "kms:grantisforawsresource" and test == "Bool" and "true" in (v.lower() for v in values):
                return False
            if key in ("kms:calleraccount", "aws:principalaccount") and test in ("StringEquals", "StringLike"):
                if not any(fnmatch.fnmatchcase(account, v) if test == "StringLike" else account == v for v in values):
                    return False
            else:
                holds = None
    return holds

