"""The emulator's KMS signing, held to AWS's limits (moto 5.2.5 ignores them), and the signing key
the sandbox seeds.

- ``MessageType=RAW`` (the default) takes at most 4,096 bytes: more is a ValidationException;
- ``MessageType=DIGEST`` signs the given digest as a pre-hashed one (moto hashed it again), and a
  digest whose length is not the algorithm's (32 bytes for *_SHA_256) is a ValidationException,
  as KMS answers; Verify checks a DIGEST signature the same way, so it agrees with an offline check
  over the message (cryptography, the public key from GetPublicKey);
- another MessageType is refused, and Sign, Verify and GetPublicKey refuse a disabled key
  (DisabledException) or one pending deletion (KMSInvalidStateException) and name the key's ARN, as KMS does.

`seed` creates what a pipeline's statements need by default: the key ``alias/amibuild``
(ECC_NIST_P256, SIGN_VERIFY) in every region it is given, and the bucket
``amibuild-attestations-<account>`` (in `BUCKET_REGION`, the default build region).
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from typing import Any, Iterable

RAW_LIMIT = 4096
SEED_ALIAS = "alias/amibuild"
BUCKET_REGION = "us-west-2"
_HASHES = {"256": 32, "384": 48, "512": 64}


def install() -> None:
    """Patch moto's KMS Sign and Verify (called once in the emulator's process)."""
    from moto.core.exceptions import JsonRESTError
    from moto.kms.exceptions import ValidationException
    from moto.kms.responses import KmsResponse

    def _enabled(self: Any) -> Any:
        key = self.kms_backend.describe_key(self._get_param("KeyId"))
        if key.key_state == "Disabled":
            raise JsonRESTError("DisabledException", f"{key.arn} is disabled.")
        if key.key_state != "Enabled":
            raise JsonRESTError("KMSInvalidStateException", f"{key.arn} is pending deletion.")
        return key

    def _inputs(self: Any) -> tuple[Any, bytes, str, str]:
        key_id = self._get_param("KeyId")
        algorithm = self._get_param("SigningAlgorithm")
        message_type = self._get_param("MessageType") or "RAW"
        self._validate_key_id(key_id)
        message = _blob(self._get_param("Message"), "Message", ValidationException)
        if not message:
            raise ValidationException("1 validation error detected: Value at 'Message' failed to satisfy constraint: "
                                      "Member must have length greater than or equal to 1")
        if message_type not in ("RAW", "DIGEST"):
            raise ValidationException(f"1 validation error detected: Value '{message_type}' at 'messageType' failed to "
                                      "satisfy constraint: Member must satisfy enum value set: [RAW, DIGEST]")
        if message_type == "RAW" and len(message) > RAW_LIMIT:
            raise ValidationException("1 validation error detected: Value at 'message' failed to satisfy constraint: "
                                      f"Member must have length less than or equal to {RAW_LIMIT}")
        key = _enabled(self)
        if key.key_usage != "SIGN_VERIFY":
            raise ValidationException(f"1 validation error detected: Value '{key.id}' at 'KeyId' failed to satisfy "
                                      "constraint: Member must point to a key with usage: 'SIGN_VERIFY'")
        if algorithm not in key.signing_algorithms:
            raise ValidationException(f"1 validation error detected: Value '{algorithm}' at 'SigningAlgorithm' failed "
                                      f"to satisfy constraint: Member must satisfy enum value set: {key.signing_algorithms}")
        if message_type == "DIGEST" and len(message) != _HASHES[algorithm.rsplit("_", 1)[-1]]:
            raise ValidationException(f"Digest is invalid length for algorithm {algorithm}.")
        return key, message, message_type, algorithm

    def sign(self: Any) -> str:
        key, message, message_type, algorithm = _inputs(self)
        if message_type == "RAW":
            signature = key.private_key.sign(message, algorithm)
        else:
            signature = _sign_digest(key.private_key.private_key, message, algorithm)
        return json.dumps({"KeyId": key.arn, "Signature": base64.b64encode(signature).decode("ascii"),
                           "SigningAlgorithm": algorithm})

    def verify(self: Any) -> str:
        key, message, message_type, algorithm = _inputs(self)
        signature = _blob(self._get_param("Signature"), "Signature", ValidationException)
        if not signature:
            raise ValidationException("1 validation error detected: Value at 'Signature' failed to satisfy "
                                      "constraint: Member must have length greater than or equal to 1")
        if message_type == "RAW":
            valid = key.private_key.verify(message, signature, algorithm)
        else:
            valid = _verify_digest(key.private_key.private_key.public_key(), message, signature, algorithm)
        if not valid:  # KMS answers an error, not SignatureValid false
            raise JsonRESTError("KMSInvalidSignatureException", "")
        return json.dumps({"KeyId": key.arn, "SignatureValid": True, "SigningAlgorithm": algorithm})

    def get_public_key(self: Any) -> str:
        self._validate_key_id(self._get_param("KeyId"))
        key = _enabled(self)
        return json.dumps({"KeyId": key.arn, "PublicKey": base64.b64encode(key.private_key.public_key()).decode("ascii"),
                           "KeySpec": key.key_spec, "CustomerMasterKeySpec": key.key_spec, "KeyUsage": key.key_usage,
                           "SigningAlgorithms": key.signing_algorithms, "EncryptionAlgorithms": key.encryption_algorithms})

    KmsResponse.sign = sign
    KmsResponse.verify = verify
    KmsResponse.get_public_key = get_public_key
    _private_key_on_first_use()


class _KeyPairOnFirstUse:
    """A key's private key, generated the first time it is used (Sign, Verify, GetPublicKey). Once:
    the emulator answers requests in threads, and two first uses at once (builds signing in parallel)
    must not each make a key pair, one signing with a pair the other then replaces."""

    def __init__(self, generate: Any, key_spec: str) -> None:
        self._generate, self._key_spec, self._key = generate, key_spec, None
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        if self._key is None:
            with self._lock:
                if self._key is None:
                    self._key = self._generate(self._key_spec)
        return getattr(self._key, name)


def _private_key_on_first_use() -> None:
    """moto 5.2 generates an RSA-2048 private key for every key it creates, symmetric and HMAC ones
    too, which have none on AWS: about a tenth of a second each, and the emulator creates keys on
    every reset. The key pair is made when first used instead; what AWS answers is unchanged."""
    from moto.kms import models

    generate = models.generate_private_key
    models.generate_private_key = lambda key_spec: _KeyPairOnFirstUse(generate, key_spec)


def _blob(value: Any, name: str, error: type[Exception]) -> bytes:
    """A blob parameter: botocore sends it base64-encoded in the JSON body (moto's parser may have
    decoded it already)."""
    if value is None:
        return b""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError, TypeError):
        raise error(f"1 validation error detected: Value at '{name}' is not valid base64") from None


def _scheme(algorithm: str) -> tuple[Any, Any]:
    """(the hash, the padding or None) of a KMS signing algorithm, pre-hashed."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    bits = algorithm.rsplit("_", 1)[-1]
    digest = {"256": hashes.SHA256(), "384": hashes.SHA384(), "512": hashes.SHA512()}[bits]
    if algorithm.startswith("RSASSA_PSS"):
        return digest, padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size)  # KMS: salt = hash length
    if algorithm.startswith("RSASSA_PKCS1"):
        return digest, padding.PKCS1v15()
    return digest, None


def _sign_digest(private_key: Any, digest: bytes, algorithm: str) -> bytes:
    from cryptography.hazmat.primitives.asymmetric import ec, utils

    hashed, pad = _scheme(algorithm)
    if pad is None:
        return private_key.sign(digest, ec.ECDSA(utils.Prehashed(hashed)))
    return private_key.sign(digest, pad, utils.Prehashed(hashed))


def _verify_digest(public_key: Any, digest: bytes, signature: bytes, algorithm: str) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric import ec, utils

    hashed, pad = _scheme(algorithm)
    try:
        if pad is None:
            public_key.verify(signature, digest, ec.ECDSA(utils.Prehashed(hashed)))
        else:
            public_key.verify(signature, digest, pad, utils.Prehashed(hashed))
    except InvalidSignature:
        return False
    return True


def seed(regions: Iterable[str], account_id: str, bucket: bool = True) -> None:
    """Emulator side: the statements' signing key, ``alias/amibuild``, in every region given, and
    their bucket (unless ``bucket`` is false: a reset of some regions leaves the partition's S3 alone)."""
    from moto.kms.models import kms_backends
    from moto.s3.models import s3_backends

    for region in regions:
        backend = kms_backends[account_id][region]
        if backend.get_key_id_from_alias(SEED_ALIAS):
            continue
        key = backend.create_key(None, "SIGN_VERIFY", "ECC_NIST_P256", "amibuild statements (sandbox)", None)
        backend.create_alias(key.id, SEED_ALIAS)
    if bucket:
        s3_backends[account_id]["aws"].create_bucket(f"amibuild-attestations-{account_id}", BUCKET_REGION)
