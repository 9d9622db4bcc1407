"""KMS calls of the gateway: the asymmetric key that signs amibuild's statements (Sign,
GetPublicKey, DescribeKey; the private key never leaves KMS), and the reads of an image key's
policy and grants (GetKeyPolicy, ListGrants) that doctor checks sharing with."""

from __future__ import annotations

import json
from dataclasses import dataclass

from amibuild.aws.error_map import mapped_errors


@dataclass(frozen=True)
class KeyInfo:
    """DescribeKey's answer, the parts a signer needs."""

    arn: str
    key_spec: str
    key_usage: str
    state: str  # Enabled, Disabled, PendingDeletion, ...
    signing_algorithms: tuple[str, ...] = ()
    manager: str = ""  # KeyManager: CUSTOMER, or AWS for an AWS-managed key such as aws/ebs

    @property
    def enabled(self) -> bool:
        return self.state == "Enabled"


@dataclass(frozen=True)
class PublicKey:
    arn: str
    der: bytes  # SubjectPublicKeyInfo, DER


class KmsCalls:
    """KMS calls; mixed into `amibuild.aws.Aws` (needs `Session`'s clients)."""

    def describe_key(self, key_id: str, region: str) -> KeyInfo:
        """The key ``key_id`` names (an alias, id or ARN); NotFound when there is none."""
        with mapped_errors(f"kms:DescribeKey {key_id}", region):
            raw = self.client("kms", region).describe_key(KeyId=key_id)["KeyMetadata"]
        return KeyInfo(arn=raw["Arn"], key_spec=raw.get("KeySpec") or raw.get("CustomerMasterKeySpec", ""),
                       key_usage=raw.get("KeyUsage", ""), state=raw.get("KeyState", ""),
                       signing_algorithms=tuple(raw.get("SigningAlgorithms", [])), manager=raw.get("KeyManager", ""))

    def sign(self, key_id: str, message: bytes, region: str, *, message_type: str = "DIGEST",
             algorithm: str = "ECDSA_SHA_256") -> tuple[str, bytes]:
        """(the key's ARN, the DER signature) of ``message``: with DIGEST, a digest KMS signs as it is."""
        with mapped_errors(f"kms:Sign {key_id}", region):
            raw = self.client("kms", region).sign(KeyId=key_id, Message=message, MessageType=message_type,
                                                  SigningAlgorithm=algorithm)
        return raw["KeyId"], raw["Signature"]

    def public_key(self, key_id: str, region: str) -> PublicKey:
        with mapped_errors(f"kms:GetPublicKey {key_id}", region):
            raw = self.client("kms", region).get_public_key(KeyId=key_id)
        return PublicKey(arn=raw["KeyId"], der=raw["PublicKey"])

    def key_policy(self, key_arn: str, region: str) -> dict:
        """The key's (default) key policy document; ``key_arn`` is a key id or ARN, not an alias."""
        with mapped_errors(f"kms:GetKeyPolicy {key_arn}", region):
            raw = self.client("kms", region).get_key_policy(KeyId=key_arn, PolicyName="default")
        return json.loads(raw.get("Policy") or "{}")

    def grants(self, key_arn: str, region: str) -> tuple[dict, ...]:
        """Every grant on the key (ListGrants, all pages)."""
        with mapped_errors(f"kms:ListGrants {key_arn}", region):
            pages = self.client("kms", region).get_paginator("list_grants").paginate(KeyId=key_arn)
            return tuple(grant for page in pages for grant in page.get("Grants", []))
