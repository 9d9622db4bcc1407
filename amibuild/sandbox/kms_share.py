"""KMS key policies, grants and key regions in the emulator as AWS answers them (docs/sandbox-keys.md).

moto 5.2.5 resolves a key ARN by its id alone, so a us-east-1 key ARN used in eu-west-1 finds a key
there when the id matches (a multi-Region key's replica); AWS answers NotFoundException. It refuses
GetKeyPolicy without PolicyName (AWS: "default"), takes any CreateGrant operation (AWS:
ValidationException), makes a new grant for a repeated named request (AWS returns the first), and
ListGrants names the key by id, takes no GranteePrincipal filter and no Limit / Marker pages.
`install` (called once in the emulator's process) wraps KmsResponse to answer as AWS does.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

OPERATIONS = frozenset({"Decrypt", "Encrypt", "GenerateDataKey", "GenerateDataKeyWithoutPlaintext", "ReEncryptFrom",
                        "ReEncryptTo", "Sign", "Verify", "GetPublicKey", "CreateGrant", "RetireGrant", "DescribeKey",
                        "GenerateDataKeyPair", "GenerateDataKeyPairWithoutPlaintext", "GenerateMac", "VerifyMac",
                        "DeriveSharedSecret"})
_ARN = re.compile(r"^arn:aws[a-z-]*:kms:([a-z0-9-]+):[0-9]{12}:(key|alias)/")
# the actions whose KeyId (or DestinationKeyId) is checked against the region asked
KEYED_ACTIONS = ("describe_key", "get_key_policy", "put_key_policy", "create_grant", "list_grants", "encrypt",
                 "generate_data_key", "generate_data_key_without_plaintext", "sign", "verify", "get_public_key",
                 "generate_mac", "verify_mac", "re_encrypt", "enable_key", "disable_key")
MAX_LIMIT = 100


def _error(code: str, message: str) -> Exception:
    from moto.core.exceptions import JsonRESTError

    error = JsonRESTError(code, message)
    error.code = 400
    return error


def region_problem(key_id: str, region: str) -> str:
    """AWS's NotFoundException message for a key or alias ARN of another region, "" when it may be used."""
    match = _ARN.match(key_id or "")
    if match and match.group(1) != region:
        return f"Invalid arn {match.group(1)}"
    return ""


def _key(response: Any, key_id: str, *, aliases: bool = True) -> Any:
    """The backend's key that `key_id` names, or AWS's NotFoundException."""
    backend = response.kms_backend
    if not key_id or (not aliases and (key_id.startswith("alias/") or ":alias/" in key_id)):
        raise _error("NotFoundException", f"Invalid keyId {key_id}")
    try:
        return backend.keys[backend.any_id_to_key_id(key_id)]
    except (KeyError, TypeError, AttributeError):
        raise _error("NotFoundException", f"Key '{key_id}' does not exist") from None


def _in_region(method: Callable[..., str]) -> Callable[..., str]:
    def checked(self: Any) -> str:
        for param in ("KeyId", "DestinationKeyId"):
            problem = region_problem(self._get_param(param) or "", self.region)
            if problem:
                raise _error("NotFoundException", problem)
        return method(self)

    checked.__name__ = method.__name__
    return checked


def install() -> None:
    """Wrap moto's KMS responses (once, in the emulator's process)."""
    from moto.kms.responses import KmsResponse

    def get_key_policy(self: Any) -> str:
        key = _key(self, self._get_param("KeyId"), aliases=False)
        if (self._get_param("PolicyName") or "default") != "default":
            raise _error("NotFoundException", "No such policy exists")
        return json.dumps({"Policy": key.policy or "{}", "PolicyName": "default"})

    def put_key_policy(self: Any) -> str:
        key = _key(self, self._get_param("KeyId"), aliases=False)
        if (self._get_param("PolicyName") or "default") != "default":
            raise _error("NotFoundException", "No such policy exists")
        try:
            document = json.loads(self._get_param("Policy") or "")
        except ValueError:
            document = None
        if not isinstance(document, dict) or not document.get("Statement"):
            raise _error("MalformedPolicyDocumentException", "The policy is not a JSON document with statements.")
        key.policy = self._get_param("Policy")
        return json.dumps(None)

    def create_grant(self: Any, _original: Callable[..., str] = KmsResponse.create_grant) -> str:
        operations = self._get_param("Operations") or []
        bad = [op for op in operations if op not in OPERATIONS]
        if not operations or bad:
            raise _error("ValidationException", f"1 validation error detected: Value '{bad or operations}' at "
                                                "'operations' failed to satisfy constraint: Member must satisfy "
                                                f"enum value set: [{', '.join(sorted(OPERATIONS))}]")
        if not self._get_param("GranteePrincipal"):
            raise _error("ValidationException", "GranteePrincipal is required")
        key = _key(self, self._get_param("KeyId"))
        name = self._get_param("Name")
        if name:  # a retried named request: the grant made first, not a second one
            for grant in key.grants.values():
                if (grant.name, grant.grantee_principal, sorted(grant.operations)) == (
                        name, self._get_param("GranteePrincipal"), sorted(operations)):
                    return json.dumps({"GrantId": grant.id, "GrantToken": grant.token})
        return _original(self)

    def list_grants(self: Any) -> str:
        key = _key(self, self._get_param("KeyId"))
        grantee, grant_id = self._get_param("GranteePrincipal"), self._get_param("GrantId")
        limit = int(self._get_param("Limit") or MAX_LIMIT)
        if not 1 <= limit <= MAX_LIMIT:
            raise _error("ValidationException", f"1 validation error detected: Value '{limit}' at 'limit' failed to "
                                                f"satisfy constraint: Member must have value less than or equal to "
                                                f"{MAX_LIMIT}")
        grants = [g for g in key.grants.values() if (not grantee or g.grantee_principal == grantee)
                  and (not grant_id or g.id == grant_id)]
        start = int(self._get_param("Marker") or 0)
        page = grants[start:start + limit]
        answer: dict[str, Any] = {"Grants": [{**g.to_json(), "KeyId": key.arn, "IssuingAccount":
                                              f"arn:aws:iam::{key.account_id}:root"} for g in page],
                                  "Truncated": start + limit < len(grants)}
        if answer["Truncated"]:
            answer["NextMarker"] = str(start + limit)
        return json.dumps(answer)

    KmsResponse.get_key_policy = get_key_policy
    KmsResponse.put_key_policy = put_key_policy
    KmsResponse.create_grant = create_grant
    KmsResponse.list_grants = list_grants
    for action in KEYED_ACTIONS:
        if hasattr(KmsResponse, action):
            setattr(KmsResponse, action, _in_region(getattr(KmsResponse, action)))
