"""KMS MAC calls of the gateway: GenerateMac with an HMAC key (what stands for URL credentials in
the fingerprint). Kept apart from KMS signing: a signing key cannot make a MAC."""

from __future__ import annotations

from dataclasses import dataclass

from amibuild.aws.error_map import mapped_errors


@dataclass(frozen=True)
class Mac:
    """A MAC made by KMS: the key's ARN, the algorithm and the MAC itself."""

    key_id: str
    algorithm: str
    mac: bytes


class KmsMacCalls:
    """KMS MAC calls; mixed into `amibuild.aws.Aws` (needs `Session`'s clients)."""

    def generate_mac(self, key: str, message: bytes, region: str) -> Mac:
        """KMS GenerateMac (HMAC_SHA_256, what an HMAC_256 key takes) of `message` (1 to 4096 bytes) with
        the HMAC key `key` (id, ARN or alias); NotFound when the key or alias does not exist in `region`."""
        with mapped_errors(f"kms:GenerateMac {key}", region):
            answer = self.client("kms", region).generate_mac(KeyId=key, Message=message, MacAlgorithm="HMAC_SHA_256")
        return Mac(str(answer["KeyId"]), str(answer["MacAlgorithm"]), bytes(answer["Mac"]))
