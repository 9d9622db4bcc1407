"""The emulator's KMS keys as AWS answers for them across accounts and regions, with their key
policies and grants (facts: docs/sandbox-accounts.md, docs/sandbox-keys.md).

- another account's key ARN: DescribeKey, CreateGrant and ListGrants answer from the owner's key
  when its key policy (`allows`) or a grant lets the caller's account, else AccessDeniedException;
- a key or alias ARN of another region than the request's: NotFoundException ("Invalid arn R");
- GetKeyPolicy / PutKeyPolicy: PolicyName defaults to "default"; a document without statements is
  MalformedPolicyDocumentException;
- CreateGrant: Operations and GranteePrincipal checked (ValidationException), DryRun honoured
  (DryRunOperationException), a retried named request returns the first grant;
- ListGrants: GranteePrincipal / GrantId filters, Limit (1-100) and NextMarker pages, KeyId an ARN.
"""

from __future__ import annotations

import json
import re
from fnmatch import fnmatchcase
from typing import Any, Callable

_KEY_ARN = re.compile(r"arn:aws[a-z-]*:kms:([a-z0-9-]+):([0-9]{12}):key/(.+)")
_ANY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:([a-z0-9-]+):[0-9]{12}:(key|alias)/")
# the KmsResponse actions whose KeyId (or DestinationKeyId) must be of the region asked
KEYED_ACTIONS = ("describe_key", "get_key_policy", "put_key_policy", "create_grant", "list_grants", "encrypt",
                 "decrypt", "generate_data_key", "generate_data_key_without_plaintext", "sign", "verify",
                 "get_public_key", "generate_mac", "verify_mac", "re_encrypt", "enable_key", "disable_key")
MAX_LIMIT = 100  # ListGrants' Limit: 1 to 100, 50 when not given
DEFAULT_LIMIT = 50


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


def _for_aws_resource_only(statement: dict[str, Any]) -> bool:
    """A statement conditioned on kms:GrantIsForAWSResource: no direct call to the emulator is one."""
    condition = statement.get("Condition") or {}
    flags = {k.lower(): v for k, v in (condition.get("Bool") or {}).items()} if isinstance(condition, dict) else {}
    return str(flags.get("kms:grantisforawsresource", "")).lower() == "true"


def allows(key: Any, grants: list[Any], account: str, action: str) -> bool:
    """Whether ``account`` may do ``action`` (``kms:CreateGrant``) on ``key`` (pure over the key's policy)."""
    try:
        policy = json.loads(key.policy or "{}")
    except ValueError:
        policy = {}
    allowed = False
    statements = policy.get("Statement", [])
    for statement in [statements] if isinstance(statements, dict) else statements:
        if not _matches(statement.get("Action", []), action):
            continue
        if not any(_names(p, account) for p in _principals(statement)) or _for_aws_resource_only(statement):
            continue
        if statement.get("Effect") == "Deny":
            return False
        allowed = allowed or statement.get("Effect") == "Allow"
    operation = action.split(":", 1)[-1]
    return allowed or any(_names(g.grantee_principal or "", account) and operation in (g.operations or [])
                          for g in grants)


def region_problem(key_id: str, region: str) -> str:
    """AWS's NotFoundException message for a key or alias ARN of another region, "" when it may be used."""
    match = _ANY_ARN.match(key_id or "")
    if match and match.group(1) != region:
        return f"Invalid arn {match.group(1)}"
    return ""


def _error(code: str, message: str) -> Exception:
    from moto.core.exceptions import JsonRESTError  # deferred: moto lives in the emulator's process only

    return JsonRESTError(code, message)


def grant_operations() -> frozenset[str]:
    """CreateGrant's Operations enum, as KMS's API model (botocore's copy of it) lists it."""
    import botocore.session  # deferred: the emulator's process only

    shape = botocore.session.get_session().get_service_model("kms").operation_model("CreateGrant").input_shape
    return frozenset(shape.members["Operations"].member.enum)


def _grants_page(grants: list[Any], key: Any, response: Any) -> dict[str, Any]:
    """One ListGrants page of ``grants`` on ``key``, as AWS shapes it."""
    limit = int(response._get_param("Limit") or DEFAULT_LIMIT)
    if not 1 <= limit <= MAX_LIMIT:
        raise _error("ValidationException", f"1 validation error detected: Value '{limit}' at 'limit' failed to "
                                            f"satisfy constraint: Member must have value less than or equal to "
                                            f"{MAX_LIMIT}")
    grantee, grant_id = response._get_param("GranteePrincipal"), response._get_param("GrantId")
    chosen = [g for g in grants if (not grantee or g.grantee_principal == grantee) and (not grant_id or g.id == grant_id)]
    marker = response._get_param("Marker")
    try:
        start = int(marker or 0)
    except ValueError:
        raise _error("InvalidMarkerException", f"Invalid marker: {marker}") from None
    page = chosen[start:start + limit]
    answer: dict[str, Any] = {"Grants": [{**g.to_json(), "KeyId": key.arn,
                                          "IssuingAccount": f"arn:aws:iam::{key.account_id}:root"} for g in page],
                              "Truncated": start + limit < len(chosen)}
    if answer["Truncated"]:
        answer["NextMarker"] = str(start + limit)
    return answer


def install() -> None:
    """Patch moto's KMS responses (once, in the emulator's process; after kms and kms_mac, whose
    handlers the region check wraps)."""
    from moto.kms.exceptions import AccessDeniedException, NotFoundException
    from moto.kms.models import kms_backends
    from moto.kms.responses import KmsResponse

    def owner_key(response: Any, action: str) -> tuple[Any, Any]:
        """(owner's backend, key) that KeyId names: another account's key this one may use, or its own."""
        key_id = str(response._get_param("KeyId") or "")
        match = _KEY_ARN.fullmatch(key_id)
        if match is not None and match.group(2) != response.current_account:
            region, owner, raw_id = match.groups()
            backend = kms_backends[owner][region]
            key = backend.keys.get(raw_id)
            if key is None:
                raise NotFoundException(f"Key '{match.group(0)}' does not exist")
            if not allows(key, list(key.grants.values()), response.current_account, action):
                raise AccessDeniedException(
                    f"User: arn:aws:iam::{response.current_account}:root is not authorized to perform: {action} on "
                    f"resource: {key.arn} because no resource-based policy allows the {action} action")
            return backend, key
        return response.kms_backend, own_key(response, key_id)

    def own_key(response: Any, key_id: str, *, aliases: bool = True) -> Any:
        backend = response.kms_backend
        if not key_id or (not aliases and (key_id.startswith("alias/") or ":alias/" in key_id)):
            raise NotFoundException(f"Invalid keyId {key_id}")
        try:
            return backend.keys[backend.any_id_to_key_id(key_id)]
        except (KeyError, TypeError, AttributeError):
            raise NotFoundException(f"Key '{key_id}' does not exist") from None

    def policy_name(response: Any) -> None:
        if (response._get_param("PolicyName") or "default") != "default":
            raise NotFoundException("No such policy exists")

    operations_enum = grant_operations()
    previous_describe = KmsResponse.describe_key

    def describe_key(response: Any) -> str:
        match = _KEY_ARN.fullmatch(str(response._get_param("KeyId") or ""))
        if match is None or match.group(2) == response.current_account:
            return previous_describe(response)
        return json.dumps(owner_key(response, "kms:DescribeKey")[1].to_dict())

    def create_grant(response: Any) -> str:
        operations = response._get_param("Operations") or []
        bad = [op for op in operations if op not in operations_enum]
        if not operations or bad:
            raise _error("ValidationException", f"1 validation error detected: Value '{bad or operations}' at "
                                                "'operations' failed to satisfy constraint: Member must satisfy "
                                                f"enum value set: [{', '.join(sorted(operations_enum))}]")
        grantee = response._get_param("GranteePrincipal") or response._get_param("GranteeServicePrincipal")
        if not grantee:
            raise _error("ValidationException", "You must specify either GranteePrincipal or GranteeServicePrincipal")
        backend, key = owner_key(response, "kms:CreateGrant")
        if response._get_param("DryRun"):
            raise _error("DryRunOperationException", "The request would have succeeded, but the DryRun option is set.")
        name = response._get_param("Name")
        if name:  # a retried named request: the grant made first, not a second one
            for grant in key.grants.values():
                if (grant.name, grant.grantee_principal, sorted(grant.operations)) == (name, grantee, sorted(operations)):
                    return json.dumps({"GrantId": grant.id, "GrantToken": grant.token})
        grant_id, token = backend.create_grant(
            key.id, grantee, operations, name, constraints=response._get_param("Constraints"),
            retiring_principal=response._get_param("RetiringPrincipal"))
        return json.dumps({"GrantId": grant_id, "GrantToken": token})

    def list_grants(response: Any) -> str:
        _, key = owner_key(response, "kms:ListGrants")
        return json.dumps(_grants_page(list(key.grants.values()), key, response))

    def get_key_policy(response: Any) -> str:  # own keys only: AWS allows no cross-account GetKeyPolicy
        key = own_key(response, response._get_param("KeyId"), aliases=False)
        policy_name(response)
        return json.dumps({"Policy": key.policy or "{}", "PolicyName": "default"})

    def put_key_policy(response: Any) -> str:
        key = own_key(response, response._get_param("KeyId"), aliases=False)
        policy_name(response)
        try:
            document = json.loads(response._get_param("Policy") or "")
        except ValueError:
            document = None
        if not isinstance(document, dict) or not document.get("Statement"):
            raise _error("MalformedPolicyDocumentException", "The policy is not a JSON document with statements.")
        key.policy = response._get_param("Policy")
        return json.dumps(None)

    def in_region(method: Callable[..., str]) -> Callable[..., str]:
        def checked(response: Any) -> str:
            for param in ("KeyId", "DestinationKeyId"):
                problem = region_problem(response._get_param(param) or "", response.region)
                if problem:
                    raise NotFoundException(problem)
            return method(response)

        checked.__name__ = method.__name__
        return checked

    KmsResponse.describe_key = describe_key
    KmsResponse.create_grant = create_grant
    KmsResponse.list_grants = list_grants
    KmsResponse.get_key_policy = get_key_policy
    KmsResponse.put_key_policy = put_key_policy
    for action in KEYED_ACTIONS:
        if hasattr(KmsResponse, action):
            setattr(KmsResponse, action, in_region(getattr(KmsResponse, action)))
