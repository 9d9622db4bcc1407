"""Verification of a stored statement, pure over fetched facts: the envelope, the public key
(GetPublicKey's DER) by key ARN, the pipeline's key ARN, and the images as DescribeImages shows
them now. Nothing here calls AWS.

Each check that fails adds a `Failure` (a `Problem` and a sentence); `Verification.ok` is True
only when there is none.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_der_public_key

from amibuild.attest.dsse import PAYLOAD_TYPE, Envelope, EnvelopeError, pae, parse_envelope
from amibuild.attest.statement import ImageFacts, StatementError, parse_statement


class Problem(str, enum.Enum):
    MALFORMED = "malformed"  # not a DSSE envelope, or its payload not an in-toto Statement
    UNSIGNED = "unsigned"  # no signature: the build had no usable key
    WRONG_KEY = "wrong key"  # signed, but not by the pipeline's key
    BAD_SIGNATURE = "bad signature"  # the signature does not match the payload (altered?)
    WRONG_TYPE = "wrong predicate type"
    NOT_A_SUBJECT = "not a subject"  # the statement does not name this image
    DIGEST_MISMATCH = "digest mismatch"  # the image's record today differs from the one signed

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Failure:
    problem: Problem
    reason: str

    def __str__(self) -> str:
        return self.reason


@dataclass(frozen=True)
class Verification:
    """What one statement proves about the images asked: ``ok``, or the failures, one per reason."""

    failures: tuple[Failure, ...] = ()
    statement: Mapping[str, Any] | None = None  # the parsed Statement (None when malformed)
    keyid: str = ""  # the key that signed (its ARN), "" when unsigned
    key: str = ""  # the S3 key it was read from, when the caller says

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def problems(self) -> frozenset[Problem]:
        return frozenset(f.problem for f in self.failures)

    @property
    def predicate(self) -> Mapping[str, Any]:
        return (self.statement or {}).get("predicate") or {}

    @property
    def predicate_type(self) -> str:
        return str((self.statement or {}).get("predicateType", ""))

    def reason(self) -> str:
        return "; ".join(f.reason for f in self.failures) or "valid"

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "key": self.key or None, "keyid": self.keyid or None,
                "predicate_type": self.predicate_type or None,
                "failures": [{"problem": str(f.problem), "reason": f.reason} for f in self.failures]}


def signature_valid(public_key_der: bytes, envelope: Envelope, sig: bytes) -> bool:
    """An ECDSA P-256 / SHA-256 signature over the envelope's PAE, checked offline with the public key."""
    try:
        key = load_der_public_key(public_key_der)
    except (ValueError, UnsupportedAlgorithm):
        return False
    if not isinstance(key, ec.EllipticCurvePublicKey):
        return False
    try:
        key.verify(sig, pae(envelope.payload_type, envelope.payload), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True


def verify(envelope: Envelope | bytes | str | Mapping[str, Any], *, pipeline_key: str,
           public_keys: Mapping[str, bytes], images: Sequence[ImageFacts], account: str,
           predicate_type: str, key: str = "") -> Verification:
    """Check one statement against the facts.

    ``pipeline_key``: the ARN of the pipeline's key (DescribeKey of its alias), or "" when it has
    none; ``public_keys``: {key ARN: DER public key}; ``images``: the images the statement must
    name, each with the digest of its record today; ``account``: the account in their ARNs.
    """
    failures: list[Failure] = []
    try:
        env = envelope if isinstance(envelope, Envelope) else parse_envelope(
            dict(envelope) if isinstance(envelope, Mapping) else envelope)
    except EnvelopeError as exc:
        return Verification((Failure(Problem.MALFORMED, f"not a DSSE envelope: {exc}"),), key=key)
    if env.payload_type != PAYLOAD_TYPE:
        return Verification((Failure(Problem.MALFORMED, f"payloadType {env.payload_type!r}, not {PAYLOAD_TYPE}"),),
                            key=key)
    try:
        stmt = parse_statement(env.payload)
    except StatementError as exc:
        return Verification((Failure(Problem.MALFORMED, str(exc)),), key=key)
    keyid = ""
    if not env.signatures:
        failures.append(Failure(Problem.UNSIGNED, "unsigned: the statement carries no signature (the build had no "
                                                   "usable KMS key)"))
    else:
        ours = [s for s in env.signatures if pipeline_key and s.keyid == pipeline_key]
        if not ours:
            keyid = env.signatures[0].keyid
            failures.append(Failure(Problem.WRONG_KEY, f"signed by {', '.join(s.keyid for s in env.signatures)}, not by "
                                                        f"the pipeline's key {pipeline_key or '(none)'}"))
        else:
            keyid = ours[0].keyid
            der = public_keys.get(keyid)
            if der is None or not any(signature_valid(der, env, s.sig) for s in ours):
                failures.append(Failure(Problem.BAD_SIGNATURE, f"the signature of {keyid} does not match the statement "
                                                                "(altered after signing?)"))
    if stmt.get("predicateType") != predicate_type:
        failures.append(Failure(Problem.WRONG_TYPE, f"predicate type {stmt.get('predicateType')!r}, "
                                                     f"not {predicate_type}"))
    named = {str(s.get("name")): (s.get("digest") or {}).get("sha256") for s in stmt.get("subject", [])}
    for image in images:
        arn = image.arn(account)
        if arn not in named:
            failures.append(Failure(Problem.NOT_A_SUBJECT, f"{image.image_id} in {image.region} is not a subject "
                                                            "of the statement"))
        elif named[arn] != image.digest:
            failures.append(Failure(Problem.DIGEST_MISMATCH, f"{image.image_id} in {image.region}: its record today "
                                                              f"(id, region, snapshots) has digest {image.digest[:12]}…, "
                                                              f"the statement signed {str(named[arn])[:12]}…"))
    return Verification(tuple(failures), stmt, keyid, key)
