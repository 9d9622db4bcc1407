"""What the pipeline's signed statements prove about channel images: the reading for `gates` and
`verify`, then a pure summary (`summarise`).

One reading (`Reader`) asks where the statements are (`attest.sign.where`: one GetCallerIdentity),
the pipeline's key (one DescribeKey of its alias) and its public key (one GetPublicKey: amibuild
signs in the attestation region only, so one key), then per image one ListObjectsV2 and a
GetObject per statement. Each statement is verified purely (`attest.verify.verify`) against the
image as DescribeImages shows it now (its canonical record): a statement altered in S3, one signed
by another key, an unsigned one and an image changed since it was signed all fail.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Mapping

from amibuild.attest import predicates, sign, store
from amibuild.attest.statement import KINDS, PROVENANCE, SCAN, TEST, ImageFacts
from amibuild.attest.verify import Verification, verify
from amibuild.aws import Image, fan_out
from amibuild.channels.gates import PASSED, Evidence
from amibuild.errors import AmibuildError
from amibuild.inventory.scan import Finding

FOREIGN = "no provenance statement names it: this pipeline did not build it (a foreign image)"
NO_TEST = "no signed test statement"
NO_SCAN = "no signed scan statement (run `amibuild scan` or build with --scan)"


@dataclass(frozen=True)
class Statements:
    """Every statement stored about one region's image, each verified."""

    region: str
    image_id: str
    provenance: tuple[Verification, ...] = ()
    test: tuple[Verification, ...] = ()
    key_problem: str = ""  # why the pipeline's key could not be read ("" when it was)
    scan: tuple[Verification, ...] = ()


@dataclass
class Reader:
    """Reads and verifies statements for one pipeline; the key and its public key are read once."""

    aws: Any
    pipeline: Any
    _where: sign.Where | None = None
    _key: tuple[str, Mapping[str, bytes], str] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def where(self) -> sign.Where:
        with self._lock:
            if self._where is None:
                self._where = sign.where(self.aws, self.pipeline)
            return self._where

    def keys(self) -> tuple[str, Mapping[str, bytes], str]:
        """(the pipeline key's ARN, {ARN: DER public key}, why it cannot be used or "")."""
        where = self.where
        with self._lock:
            if self._key is None:
                self._key = _read_key(self.aws, where)
            return self._key

    def read(self, images: Mapping[str, Image | None]) -> dict[str, Statements | None]:
        """{region: its image's statements, verified}; None where there is no image."""
        return fan_out(sorted(images), lambda region: self.about(images[region]) if images[region] else None)

    def about(self, image: Image) -> Statements:
        """Every statement stored about ``image``, each verified against its record today."""
        where = self.where
        arn, public, problem = self.keys()
        facts = [ImageFacts(image.image_id, image.region, tuple(image.snapshot_ids))]
        found: dict[str, list[Verification]] = {kind: [] for kind in KINDS.values()}
        for key, body in store.fetch(self.aws, where.bucket, where.region, where.pipeline, image.image_id):
            parsed = store.parse_key(key)
            predicate_type = next((t for t, k in KINDS.items() if parsed and k == parsed[1]), None)
            if predicate_type is None:
                continue
            found[KINDS[predicate_type]].append(verify(body, pipeline_key=arn, public_keys=public, images=facts,
                                                       account=where.account, predicate_type=predicate_type, key=key))
        return Statements(image.region, image.image_id, tuple(found[KINDS[PROVENANCE]]), tuple(found[KINDS[TEST]]),
                          problem, tuple(found[KINDS[SCAN]]))


def _read_key(aws: Any, where: sign.Where) -> tuple[str, Mapping[str, bytes], str]:
    if not where.kms_key:
        return "", {}, "the pipeline's attestation block names no kms_key: its statements are unsigned"
    try:
        arn = aws.describe_key(where.kms_key, where.region).arn
        public = aws.public_key(arn, where.region)
    except AmibuildError as exc:
        return "", {}, f"the pipeline's key {where.kms_key} in {where.region} cannot be read: {exc}"
    return arn, {arn: public.der}, ""


def built_here(verification: Verification, pipeline: str, variant: str) -> bool:
    """Whether a verified provenance statement says this pipeline built this variant."""
    given = verification.predicate
    return predicates.pipeline_of(given) == pipeline and predicates.variant_of(given) == variant


def provenance_of(found: Statements, pipeline: str, variant: str) -> Verification | None:
    """The newest valid provenance statement from this pipeline for this variant, or None."""
    return next((v for v in reversed(found.provenance) if v.ok and built_here(v, pipeline, variant)), None)


def built_by(verification: Verification) -> dict[str, str]:
    """{image ARN: record digest} of every image a verified provenance statement names (its subjects)."""
    return {str(s.get("name")): str((s.get("digest") or {}).get("sha256")) for s in verification.statement["subject"]}


def names(built: Mapping[str, str], image: Image, account: str) -> bool:
    """Whether ``built`` (`built_by` of a signed provenance) names ``image`` as it is today: the same
    image ARN and the same record digest (id, region, snapshot ids). Pure."""
    facts = ImageFacts(image.image_id, image.region, tuple(image.snapshot_ids))
    return built.get(facts.arn(account)) == facts.digest


def verdict(verification: Verification) -> str:
    """A test statement's verdict in amibuild's words (passed, failed, not tested: ...)."""
    given = predicates.verdict_of(verification.predicate)
    return given or {"PASSED": PASSED, "FAILED": "failed"}.get(str(verification.predicate.get("result")), "")


def test_of(found: Statements) -> Verification | None:
    """The test statement that decides: the newest valid one with a verdict of passed or failed
    (a later "not tested" never overrides it), else the newest valid one; None when none is valid."""
    valid = [v for v in found.test if v.ok]
    decided = [v for v in valid if verdict(v) in (PASSED, "failed")]
    return (decided or valid or [None])[-1]


def findings_of(verification: Verification) -> tuple[Finding, ...]:
    """The findings a verified scan statement records."""
    return tuple(Finding(str(f.get("id", "")), str(f.get("severity", "unknown")), f.get("score"),
                         str(f.get("package", "")), str(f.get("fixed_in") or ""))
                 for f in verification.predicate.get("findings") or [])


def summarise(found: Statements | None, pipeline: str, variant: str) -> Evidence | None:
    """What the statements prove about one image, for `gates.decide`. Pure."""
    if found is None:
        return None
    provenance = provenance_of(found, pipeline, variant)
    problem = ""
    if provenance is None:
        problem = _why(found.provenance, FOREIGN, found.key_problem)
        if found.provenance and all(v.ok for v in found.provenance):
            problem = f"its provenance says another pipeline or variant built it, not {pipeline} {variant}"
    test = test_of(found)
    scans = [v for v in found.scan if v.ok]
    return Evidence(provenance=problem, test=verdict(test) if test else "",
                    test_problem="" if test else _why(found.test, NO_TEST, found.key_problem),
                    scan=findings_of(scans[-1]) if scans else None,
                    scan_problem="" if scans else _why(found.scan, NO_SCAN, found.key_problem))


def _why(statements: tuple[Verification, ...], none: str, key_problem: str) -> str:
    if not statements:
        return none
    reason = statements[-1].reason()
    return f"{reason} ({key_problem})" if key_problem else reason


def gather(reader: Reader, variant: str, images: Mapping[str, Image | None]) -> dict[str, Evidence | None]:
    """{region: what the signed statements prove about its image} (the facts a gate is decided on)."""
    found = reader.read(images)
    return {region: summarise(found[region], reader.where.pipeline, variant) for region in images}
