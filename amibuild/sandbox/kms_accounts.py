"""The emulator's KMS keys used from another account, as a consumer of a shared encrypted image uses them.

moto keeps keys per account, so a key ARN of account A asked for with account B's credentials is
not found. Here DescribeKey, CreateGrant and ListGrants given a key ARN of another account answer
from that account's key when its key policy allows B or a grant on it names a principal of B:

- a policy statement allows when its ``Effect`` is Allow, its ``Action`` matches (``kms:*``,
  wildcards) and its ``Principal`` is ``*`` or names B (``B``, ``arn:aws:iam::B:root``, any ARN in
  B); a matching Deny wins. Conditions are not evaluated;
- a grant allows its ``Operations`` to a ``GranteePrincipal`` in B.

Otherwise the answer is ``AccessDeniedException``; a key that does not exist is
``NotFoundException``. CreateGrant with ``DryRun`` answers ``DryRunOperationException`` when it
would have succeeded. An alias or bare key id is looked up in B's own keys, as on AWS.
"""

from __future__ import annotations

import json
import re
from fnmatch import fnmatchcase
from typing import Any

_KEY_ARN = re.compile(r"arn:aws[a-z-]*:kms:([a-z0-9-]+):([0-9]{12}):key/(.+)")


def _principals(statement: dict[str, Any]) -> list[str]:
    principal = statement.get("Principal", [])
    if principal == "*":
        return ["*"]
    if isinstance(principal, dict):
        principal = principal.get("AWS", [])
    return [principal] if isinstance(principal, str) else list(principal)


def _names(principal: str, account: str) -> bool:
    return principal == "*" or principal == account or principal.startswith(f"arn:aws:iam::{account}:") \
        or principal.startswith(f"arn:aws:sts::{account}:")


def _matches(patterns: Any, action: str) -> bool:
    patterns = [patterns] if isinstance(patterns, str) else list(patterns or [])
    return any(fnmatchcase(action.lower(), str(p).lower()) for p in patterns)


def allows(key: Any, grants: list[Any], account: str, action: str) -> bool:
    """Whether ``account`` may do ``action`` (``kms:CreateGrant``) on ``key`` (pure over the key's policy)."""
    try:
        policy = json.loads(key.policy or "{}")
    except ValueError:
        policy = {}
    allowed = False
    for statement in policy.get("Statement", []):
        if not _matches(statement.get("Action", []), action):
            continue
        if not any(_names(p, account) for p in _principals(statement)):
            continue
        if statement.get("Effect") == "Deny":
            return False
        allowed = allowed or statement.get("Effect") == "Allow"
    operation = action.split(":", 1)[-1]
    return allowed or any(_names(g.grantee_principal or "", account) and operation in (g.operations or [])
                          for g in grants)


def install() -> None:
    """Patch moto's KMS responses (once, in the emulator's process)."""
    from moto.core.exceptions import JsonRESTError
    from moto.kms.exceptions import AccessDeniedException, NotFoundException
    from moto.kms.models import kms_backends
    from moto.kms.responses import KmsResponse

    def foreign(response: Any, action: str) -> tuple[Any, Any] | None:
        """(owner's backend, key) when KeyId is another account's key ARN this account may use; None when
        it is not another account's ARN."""
        match = _KEY_ARN.fullmatch(str(response._get_param("KeyId") or ""))
        if match is None or match.group(2) == response.current_account:
            return None
        region, owner, key_id = match.groups()
        backend = kms_backends[owner][region]
        key = backend.keys.get(key_id)
        if key is None:
            raise NotFoundException(f"Key '{match.group(0)}' does not exist")
        grants = list(getattr(key, "grants", {}).values())
        if not allows(key, grants, response.current_account, action):
            raise AccessDeniedException(
                f"User: arn:aws:iam::{response.current_account}:root is not authorized to perform: {action} on "
                f"resource: {key.arn} because no resource-based policy allows the {action} action")
        return backend, key

    previous_describe = KmsResponse.describe_key
    previous_grant = KmsResponse.create_grant
    previous_list = KmsResponse.list_grants

    def describe_key(response: Any) -> str:
        found = foreign(response, "kms:DescribeKey")
        if found is None:
            return previous_describe(response)
        return json.dumps(found[1].to_dict())

    def create_grant(response: Any) -> str:
        found = foreign(response, "kms:CreateGrant")
        if found is None:
            return previous_grant(response)
        if response._get_param("DryRun"):
            raise JsonRESTError("DryRunOperationException",
                                "The request would have succeeded, but the DryRun option is set.")
        backend, key = found
        grant_id, token = backend.create_grant(
            key.id, response._get_param("GranteePrincipal"), response._get_param("Operations"),
            response._get_param("Name"), constraints=response._get_param("Constraints"),
            retiring_principal=response._get_param("RetiringPrincipal"))
        return json.dumps({"GrantId": grant_id, "GrantToken": token})

    def list_grants(response: Any) -> str:
        found = foreign(response, "kms:ListGrants")
        if found is None:
            return previous_list(response)
        backend, key = found
        grants = backend.list_grants(key_id=key.id, grant_id=response._get_param("GrantId"))
        return json.dumps({"Grants": [g.to_json() for g in grants], "Truncated": False})

    KmsResponse.describe_key = describe_key
    KmsResponse.create_grant = create_grant
    KmsResponse.list_grants = list_grants
