"""DSSE envelopes (https://github.com/secure-systems-lab/dsse, v1) and their pre-authentication encoding.

A signature covers ``PAE(payloadType, payload)``, never the payload alone, so a payload cannot be
read as another type. amibuild signs the SHA-256 of the PAE (KMS ``MessageType=DIGEST``). Pure.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from typing import Any

PAYLOAD_TYPE = "application/vnd.in-toto+json"


def pae(payload_type: str, payload: bytes) -> bytes:
    """``DSSEv1 SP len(type) SP type SP len(body) SP body``, lengths in ASCII decimal of bytes."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def pae_digest(payload_type: str, payload: bytes) -> bytes:
    """The SHA-256 of the PAE: what KMS signs with ``MessageType=DIGEST``."""
    return hashlib.sha256(pae(payload_type, payload)).digest()


@dataclass(frozen=True)
class Signature:
    keyid: str  # the KMS key's ARN: it names the region whose key signed
    sig: bytes  # DER-encoded ECDSA signature


@dataclass(frozen=True)
class Envelope:
    payload: bytes
    payload_type: str = PAYLOAD_TYPE
    signatures: tuple[Signature, ...] = ()

    @property
    def signed(self) -> bool:
        return bool(self.signatures)

    def to_dict(self) -> dict[str, Any]:
        return {"payloadType": self.payload_type, "payload": base64.b64encode(self.payload).decode("ascii"),
                "signatures": [{"keyid": s.keyid, "sig": base64.b64encode(s.sig).decode("ascii")}
                               for s in self.signatures]}

    def to_json(self) -> bytes:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True).encode("utf-8") + b"\n"


class EnvelopeError(ValueError):
    """Text that is not a DSSE envelope."""


def parse_envelope(data: bytes | str | dict[str, Any]) -> Envelope:
    """An envelope from its JSON; EnvelopeError saying what is wrong."""
    try:
        raw = data if isinstance(data, dict) else json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise EnvelopeError(f"not JSON ({exc.__class__.__name__})") from None
    if not isinstance(raw, dict):
        raise EnvelopeError("not a JSON object")
    kind, payload, signatures = raw.get("payloadType"), raw.get("payload"), raw.get("signatures", [])
    if not isinstance(kind, str) or not isinstance(payload, str) or not isinstance(signatures, list):
        raise EnvelopeError("payloadType, payload (base64) and signatures (a list) are required")
    try:
        body = base64.b64decode(payload, validate=True)
        sigs = tuple(Signature(str(s.get("keyid", "")), base64.b64decode(s["sig"], validate=True))
                     for s in signatures)
    except (binascii.Error, KeyError, TypeError, AttributeError, ValueError):
        raise EnvelopeError("payload or a signature is not base64 (or a signature has no sig)") from None
    return Envelope(body, kind, sigs)
