"""Signing statements with the pipeline's KMS key, and storing them (the thin executor).

`where(aws, pipeline)` resolves the pipeline's ``attestation`` block (its defaults need the account:
one GetCallerIdentity); `signer(aws, where)` asks DescribeKey whether the key can sign (an
ECC_NIST_P256 SIGN_VERIFY key, enabled) and says why not; `attest(...)` builds the Statement, signs
the SHA-256 of its DSSE PAE in KMS (``MessageType=DIGEST``: RAW takes at most 4,096 bytes) and
puts the envelope under each image's AMI id. Without a usable key the envelope is stored unsigned,
and `Stored.unsigned_reason` says why (the caller says it on stderr).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from amibuild.aws import fan_out
from amibuild.errors import AmibuildError
from amibuild.attest import store
from amibuild.attest.dsse import PAYLOAD_TYPE, Envelope, Signature, pae_digest
from amibuild.attest.statement import KINDS, ImageFacts, statement

KEY_SPEC = "ECC_NIST_P256"
ALGORITHM = "ECDSA_SHA_256"


@dataclass(frozen=True)
class Where:
    """The pipeline's attestation settings, resolved: the key, the bucket and the region of both."""

    pipeline: str
    account: str
    kms_key: str  # as the pipeline names it (alias/amibuild), "" for none
    bucket: str
    region: str


@dataclass(frozen=True)
class Signer:
    """The key that signs (its ARN), or why nothing is signed."""

    key_arn: str = ""
    unsigned_reason: str = ""

    @property
    def usable(self) -> bool:
        return bool(self.key_arn)


@dataclass(frozen=True)
class Stored:
    """One statement made: where it went, and whether it is signed."""

    kind: str
    bucket: str
    region: str
    keys: tuple[str, ...]
    keyid: str = ""  # the signing key's ARN, "" when unsigned
    unsigned_reason: str = ""
    error: str = ""  # it could not be stored: why (nothing else was done)

    @property
    def signed(self) -> bool:
        return bool(self.keyid)

    def line(self) -> str:
        """What a report says of it: where it went, signed or not, or why it was not stored."""
        if self.error:
            return f"{self.kind} statement NOT stored: {self.error}"
        how = f"signed by {self.keyid}" if self.signed else f"UNSIGNED ({self.unsigned_reason})"
        more = (f" (and under {len(self.keys) - 1} more AMI id{'s' if len(self.keys) > 2 else ''})"
                if len(self.keys) > 1 else "")
        return f"{self.kind} statement {how}: s3://{self.bucket}/{self.keys[0] if self.keys else ''}{more}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "bucket": self.bucket, "region": self.region, "keys": list(self.keys),
                "signed": self.signed, "keyid": self.keyid or None,
                "unsigned_reason": self.unsigned_reason or None, "error": self.error or None}


def where(aws: Any, pipeline: Any) -> Where:
    """The pipeline's ``attestation`` settings with their defaults filled in (the account from STS
    when the bucket is the default one)."""
    settings = pipeline.attestation
    region = settings.region or pipeline.build_region
    account = aws.caller_identity(region)["account"]
    return Where(pipeline.name, account, settings.kms_key, settings.bucket or store.default_bucket(account), region)


def signer(aws: Any, where: Where) -> Signer:
    """The pipeline's key when it can sign; else a Signer saying why not (never an exception)."""
    if not where.kms_key:
        return Signer(unsigned_reason="the pipeline's attestation block names no kms_key")
    try:
        key = aws.describe_key(where.kms_key, where.region)
    except AmibuildError as exc:
        return Signer(unsigned_reason=f"KMS key {where.kms_key} in {where.region} cannot be used: {exc}")
    if not key.enabled:
        return Signer(unsigned_reason=f"KMS key {where.kms_key} ({key.arn}) is {key.state}, not Enabled")
    if key.key_usage != "SIGN_VERIFY" or key.key_spec != KEY_SPEC or ALGORITHM not in key.signing_algorithms:
        return Signer(unsigned_reason=f"KMS key {where.kms_key} ({key.arn}) is a {key.key_spec} {key.key_usage} key; "
                                      f"statements need an asymmetric {KEY_SPEC} SIGN_VERIFY key ({ALGORITHM})")
    return Signer(key.arn)


def sign(aws: Any, who: Signer, region: str, payload: bytes) -> Envelope:
    """The payload in a DSSE envelope, signed by ``who`` (unsigned when it has no key)."""
    if not who.usable:
        return Envelope(payload, PAYLOAD_TYPE)
    key_arn, sig = aws.sign(who.key_arn, pae_digest(PAYLOAD_TYPE, payload), region, message_type="DIGEST",
                            algorithm=ALGORITHM)
    return Envelope(payload, PAYLOAD_TYPE, (Signature(key_arn, sig),))


def image_facts(aws: Any, amis: Mapping[str, str]) -> list[ImageFacts]:
    """What DescribeImages shows now of each region's image (one call per region)."""
    found = fan_out(sorted(amis), lambda region: aws.find_image(region, amis[region]))
    missing = [f"{amis[r]} in {r}" for r, image in found.items() if image is None]
    if missing:
        raise AmibuildError(f"cannot make a statement about images that do not exist: {', '.join(missing)}")
    return [ImageFacts(image.image_id, region, tuple(image.snapshot_ids)) for region, image in found.items()]


def attest(aws: Any, where: Where, who: Signer, images: Sequence[ImageFacts], predicate_type: str,
           predicate: Mapping[str, Any], run_id: str) -> Stored:
    """Make, sign and store one statement about ``images``: unsigned (with the reason) when KMS
    refuses to sign; a failure to store is said in `Stored.error`, naming how many keys were
    written before it (the same envelope: each is whole)."""
    kind = KINDS[predicate_type]
    keys = tuple(store.statement_key(where.pipeline, i.image_id, kind, run_id) for i in images)
    payload = statement(images, where.account, predicate_type, predicate)
    try:
        envelope = sign(aws, who, where.region, payload)
    except AmibuildError as exc:  # the key could not sign after all (denied, disabled since): stored unsigned
        who = Signer(unsigned_reason=f"kms:Sign refused: {exc}")
        envelope = sign(aws, who, where.region, payload)
    written: list[str] = []
    try:
        for key in keys:
            aws.put_object(where.bucket, key, envelope.to_json(), where.region)
            written.append(key)
    except AmibuildError as exc:
        return Stored(kind, where.bucket, where.region, tuple(written), unsigned_reason=who.unsigned_reason,
                      error=f"not stored: {exc}" + (f" (stored under {len(written)} of {len(keys)} keys)" if written else ""))
    return Stored(kind, where.bucket, where.region, keys, envelope.signatures[0].keyid if envelope.signed else "",
                  who.unsigned_reason)


@dataclass(frozen=True)
class Attestor:
    """Makes a run's statements: the resolved settings and the signer, asked once per run."""

    aws: Any
    where: Where
    signer: Signer

    def make(self, amis: Mapping[str, str], predicate_type: str, predicate: Mapping[str, Any], run_id: str) -> Stored:
        """One statement about the image in every region of ``amis`` ({region: ami}), as DescribeImages shows it now."""
        try:
            images = image_facts(self.aws, amis)
        except AmibuildError as exc:
            return Stored(KINDS[predicate_type], self.where.bucket, self.where.region, (), error=f"not made: {exc}")
        return attest(self.aws, self.where, self.signer, images, predicate_type, predicate, run_id)


def attestor(aws: Any, pipeline: Any, say: Any = lambda _: None) -> Attestor | None:
    """The pipeline's attestor; says on ``say`` (stderr) when its statements will be unsigned, and
    returns None (said too) when none can be made at all (the account cannot be read)."""
    try:
        place = where(aws, pipeline)
    except AmibuildError as exc:
        say(f"warning: no signed statements: {exc}")
        return None
    who = signer(aws, place)
    if not who.usable:
        say(f"warning: statements are unsigned: {who.unsigned_reason}; they are stored in s3://{place.bucket}/"
            f"{store.pipeline_prefix(place.pipeline)} and `verify` fails them as unsigned")
    return Attestor(aws, place, who)
