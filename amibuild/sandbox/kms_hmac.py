"""KMS GenerateMac / VerifyMac in the emulator as AWS answers them, and the fingerprint key it seeds.

moto 5.2.5 has both calls and MACs the message with the key's material, but takes any MacAlgorithm
with any HMAC key spec (AWS: InvalidKeyUsageException), MACs with a disabled key or one pending
deletion (AWS: DisabledException, KMSInvalidStateException), takes a message of any length (AWS:
1 to 4096 bytes, else ValidationException), and names the key by its id where AWS gives its ARN.
`install` wraps the backend's calls so they answer as AWS does; `seed` creates the HMAC_256 key
behind alias/amibuild-fingerprint in a region, so sandbox builds exercise the MAC path. Runs in
the emulator's process.
"""

from __future__ import annotations

from typing import Any

FINGERPRINT_ALIAS = "alias/amibuild-fingerprint"  # amibuild.pipeline.model.DEFAULT_FINGERPRINT_KEY
MAX_MESSAGE = 4096
# the one MacAlgorithm each HMAC key spec takes
ALGORITHM_OF_SPEC = {"HMAC_224": "HMAC_SHA_224", "HMAC_256": "HMAC_SHA_256", "HMAC_384": "HMAC_SHA_384",
                     "HMAC_512": "HMAC_SHA_512"}


def _error(code: str, message: str) -> Exception:
    from moto.core.exceptions import JsonRESTError

    error = JsonRESTError(code, message)
    error.code = 400
    return error


def _checked(backend: Any, key_id: str, message: Any, mac_algorithm: str) -> Any:
    """The key, once AWS would take the call; else the error AWS answers."""
    key = backend.keys[backend.any_id_to_key_id(key_id)]
    if key.key_state == "Disabled":
        raise _error("DisabledException", f"{key.arn} is disabled.")
    if key.key_state in ("PendingDeletion", "PendingReplicaDeletion", "Unavailable", "PendingImport"):
        raise _error("KMSInvalidStateException", f"{key.arn} is {_state_words(key.key_state)}.")
    if key.key_usage != "GENERATE_VERIFY_MAC" or key.key_spec not in ALGORITHM_OF_SPEC:
        raise _error("InvalidKeyUsageException", f"{key.arn} key usage is {key.key_usage} which is not valid for "
                                                 "GenerateMac.")
    if mac_algorithm != ALGORITHM_OF_SPEC[key.key_spec]:
        raise _error("InvalidKeyUsageException", f"Algorithm {mac_algorithm} is incompatible with key spec "
                                                 f"{key.key_spec}.")
    size = len(message or b"")
    if not 1 <= size <= MAX_MESSAGE:
        raise _error("ValidationException", "1 validation error detected: Value at 'message' failed to satisfy "
                                            f"constraint: Member must have length {'greater' if size < 1 else 'less'} "
                                            f"than or equal to {1 if size < 1 else MAX_MESSAGE}")
    return key


def _state_words(state: str) -> str:
    return {"PendingDeletion": "pending deletion", "PendingReplicaDeletion": "pending replica deletion",
            "PendingImport": "pending import"}.get(state, state.lower())


def install() -> None:
    """Wrap moto's KMS GenerateMac and VerifyMac (called once in the emulator's process)."""
    from moto.kms.models import KmsBackend

    generate, verify = KmsBackend.generate_mac, KmsBackend.verify_mac

    def generate_mac(self: Any, message: bytes, key_id: str, mac_algorithm: str, grant_tokens: Any,
                     dry_run: Any) -> tuple[str, str, str]:
        key = _checked(self, key_id, message, mac_algorithm)
        mac, algorithm, _ = generate(self, message=message, key_id=key_id, mac_algorithm=mac_algorithm,
                                     grant_tokens=grant_tokens, dry_run=dry_run)
        return mac, algorithm, key.arn

    def verify_mac(self: Any, message: bytes, key_id: str, mac_algorithm: str, mac: str, grant_tokens: Any,
                   dry_run: Any) -> None:
        _checked(self, key_id, message, mac_algorithm)
        verify(self, message=message, key_id=key_id, mac_algorithm=mac_algorithm, mac=mac,
               grant_tokens=grant_tokens, dry_run=dry_run)

    KmsBackend.generate_mac = generate_mac
    KmsBackend.verify_mac = verify_mac


def seed(account: str, region: str) -> None:
    """The fingerprint key: an HMAC_256 key behind alias/amibuild-fingerprint in `region`."""
    from moto.kms.models import kms_backends

    backend = kms_backends[account][region]
    if backend.get_key_id_from_alias(FINGERPRINT_ALIAS):
        return
    key = backend.create_key(policy=None, key_usage="GENERATE_VERIFY_MAC", key_spec="HMAC_256",
                             description="amibuild sandbox: the fingerprint's MAC of URL credentials", tags=None)
    backend.create_alias(key.id, FINGERPRINT_ALIAS)
