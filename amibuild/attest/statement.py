"""in-toto Statements (v1) about images: subjects are the image ARN in each region with the SHA-256
of its canonical record (`amibuild.attest.image_record`).

`in_toto_attestation` builds and validates the Statement (type, subjects with digests, predicate
type and body). The payload amibuild signs is then the Statement's JSON written from the same
values in canonical form: protobuf's Struct keeps every number as a double (an exit code 1 would
come back 1.0), so the predicate is not sent through protobuf's own JSON writer. Pure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from google.protobuf import json_format
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor
from in_toto_attestation.v1.statement import STATEMENT_TYPE_URI, Statement

from amibuild.attest.image_record import canonical_json, image_arn, record_digest

PROVENANCE = "https://slsa.dev/provenance/v1"
# in-toto's Test Result predicate; amibuild adds its own fields beside the standard ones
# (result, passedTests, warnedTests, failedTests, configuration), which consumers of the
# standard predicate ignore
TEST = "https://in-toto.io/attestation/test-result/v0.1"
# the findings of an image's vulnerability scan (in-toto's vulns predicate, amibuild's fields beside it)
SCAN = "https://in-toto.io/attestation/vulns/v0.1"
KINDS = {PROVENANCE: "provenance", TEST: "test", SCAN: "scan"}


@dataclass(frozen=True)
class ImageFacts:
    """What DescribeImages shows of one image now: the facts its record is made of."""

    image_id: str
    region: str
    snapshot_ids: tuple[str, ...] = ()

    @property
    def digest(self) -> str:
        return record_digest(self.image_id, self.region, self.snapshot_ids)

    def arn(self, account: str) -> str:
        return image_arn(self.region, account, self.image_id)


def subjects(images: Sequence[ImageFacts], account: str) -> list[dict[str, Any]]:
    """One subject per region, in region order."""
    return [{"name": i.arn(account), "digest": {"sha256": i.digest}} for i in sorted(images, key=lambda i: i.region)]


def statement(images: Sequence[ImageFacts], account: str, predicate_type: str, predicate: Mapping[str, Any]) -> bytes:
    """The Statement's canonical JSON (the DSSE payload); ValueError when in-toto refuses it."""
    subject = subjects(images, account)
    built = Statement([ResourceDescriptor(name=s["name"], digest=s["digest"]).pb for s in subject],
                      predicate_type, dict(json.loads(canonical_json(dict(predicate)))))
    built.validate()
    return canonical_json({"_type": STATEMENT_TYPE_URI, "subject": subject, "predicateType": predicate_type,
                           "predicate": dict(predicate)})


class StatementError(ValueError):
    """A payload that is not a valid in-toto Statement v1."""


def parse_statement(payload: bytes) -> dict[str, Any]:
    """The Statement as a dict, checked by in-toto's own rules; StatementError saying what is wrong."""
    try:
        raw = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        raise StatementError("the payload is not JSON") from None
    if not isinstance(raw, dict):
        raise StatementError("the payload is not a JSON object")
    try:
        pb = json_format.ParseDict(raw, statement_pb2.Statement(), ignore_unknown_fields=False)
        Statement.copy_from_pb(pb).validate()
    except (json_format.ParseError, ValueError, TypeError) as exc:
        raise StatementError(f"not an in-toto Statement v1: {str(exc).splitlines()[0][:200]}") from None
    return raw
