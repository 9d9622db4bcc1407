"""Vulnerability scans of an image's SBOM (Amazon Inspector's ScanSbom) and the `scanned` gate. Pure.

ScanSbom takes a CycloneDX 1.5 document of at most `MAX_COMPONENTS` components, so the SBOM goes in
batches (`batches`); each answer (CycloneDX 1.5 with ``vulnerabilities``) is read by `findings`.
A channel's ``scan { max_severity = "high", ignore = [{ id = "CVE-...", reason = "...", until =
"2027-03-01" }] }`` block (`ScanPolicy`) refuses an image with a finding at or above the severity
that is not ignored, or ignored past its ``until`` (`judge`), naming each finding.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any, Iterable, Mapping, Sequence

from amibuild.errors import SpecError
from amibuild.suggest import one_block

MAX_COMPONENTS = 2000  # ScanSbom's limit: "passing 2000 components" fails with ValidationException
SEVERITIES = ("info", "low", "medium", "high", "critical")  # CycloneDX's, lowest first ("none"/"unknown" below)
SCAN_KEYS = ("max_severity", "ignore")
IGNORE_KEYS = ("id", "reason", "until")
_ID = re.compile(r"[A-Za-z][A-Za-z0-9]*-[0-9A-Za-z:._-]{1,60}", re.ASCII)
_FIXED = "amazon:inspector:sbom_scanner:fixed_version:"  # + the component's bom-ref
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)


@dataclass(frozen=True)
class Ignore:
    id: str
    reason: str
    until: date


@dataclass(frozen=True)
class ScanPolicy:
    """A channel's ``scan { ... }`` block."""

    max_severity: str = "high"
    ignore: tuple[Ignore, ...] = ()


@dataclass(frozen=True)
class Finding:
    id: str
    severity: str
    score: float | None
    package: str  # the affected component's purl
    fixed_in: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "severity": self.severity, "score": self.score, "package": self.package,
                "fixed_in": self.fixed_in or None}


def scan_policy(value: Any, where: str) -> ScanPolicy:
    """A channel block's ``scan { ... }``, checked."""
    body = one_block(value, where, 'scan { max_severity = "high" }')
    for key in body:
        if key not in SCAN_KEYS:
            raise SpecError(f"{where}: unknown field `{key}`; a scan block has {', '.join(SCAN_KEYS)}")
    severity = str(body.get("max_severity", "high")).lower()
    if severity not in SEVERITIES:
        raise SpecError(f"{where}.max_severity {body.get('max_severity')!r}: one of {', '.join(SEVERITIES)} (an "
                        "image with a finding at or above it is refused)")
    entries = body.get("ignore", [])
    if not isinstance(entries, list):
        raise SpecError(f'{where}.ignore: a list, e.g. ignore = [{{ id = "CVE-2024-1234", reason = "...", '
                        'until = "2027-03-01" }]')
    ignores = []
    for index, entry in enumerate(entries):
        at = f"{where}.ignore[{index}]"
        if not isinstance(entry, dict):
            raise SpecError(f'{at}: write {{ id = "CVE-...", reason = "...", until = "YYYY-MM-DD" }}')
        unknown = [k for k in entry if k not in IGNORE_KEYS]
        if unknown:
            raise SpecError(f"{at}: unknown field `{unknown[0]}`; an ignore has {', '.join(IGNORE_KEYS)}")
        ident, reason, until = (str(entry.get(k, "")) for k in IGNORE_KEYS)
        if not _ID.fullmatch(ident):
            raise SpecError(f"{at}.id {ident!r}: a vulnerability id such as CVE-2024-1234 or ALAS2023-2024-500")
        if not reason.strip() or "\n" in reason:
            raise SpecError(f"{at}.reason: say in one line why {ident} is accepted (it is kept with the verdict)")
        if not _DATE.fullmatch(until):
            raise SpecError(f"{at}.until {until!r}: the date the exception ends, YYYY-MM-DD (an ignore needs an end)")
        try:
            end = date.fromisoformat(until)
        except ValueError:
            raise SpecError(f"{at}.until {until!r}: not a date") from None
        ignores.append(Ignore(ident, reason.strip(), end))
    return ScanPolicy(severity, tuple(ignores))


def batches(document: str, limit: int = MAX_COMPONENTS) -> list[dict[str, Any]]:
    """The SBOM split into documents of at most ``limit`` components each (every other key kept)."""
    data = json.loads(document)
    components = data.get("components", [])
    if not components:
        return [data]
    rest = {k: v for k, v in data.items() if k not in ("components", "dependencies")}
    return [{**rest, "components": components[start:start + limit]} for start in range(0, len(components), limit)]


def findings(answer: Mapping[str, Any]) -> list[Finding]:
    """The vulnerabilities of one ScanSbom answer (CycloneDX 1.5 output), one per affected package."""
    sbom = answer.get("sbom", answer)
    refs = {c.get("bom-ref"): c.get("purl", c.get("bom-ref", "")) for c in sbom.get("components", [])}
    out = []
    for vuln in sbom.get("vulnerabilities", []):
        ratings = vuln.get("ratings", [])
        severity, score = _worst(ratings)
        fixed = {p["name"].removeprefix(_FIXED): p.get("value", "") for p in vuln.get("properties", [])
                 if p.get("name", "").startswith(_FIXED)}
        for affected in vuln.get("affects", []) or [{"ref": ""}]:
            ref = affected.get("ref", "")
            out.append(Finding(str(vuln.get("id", "")), severity, score, refs.get(ref, ref), fixed.get(ref, "")))
    return sorted(out, key=lambda f: (-rank(f.severity), f.id, f.package))


def _worst(ratings: Sequence[Mapping[str, Any]]) -> tuple[str, float | None]:
    """The highest severity ("unknown" when no rating gives one; a rating of "none" stays "none") and the
    highest score (None when none is a number)."""
    named = [str(r.get("severity", "")).lower() for r in ratings]
    severity = max([*(s if s in (*SEVERITIES, "none") else "unknown" for s in named), "unknown"], key=rank)
    scores = [float(r["score"]) for r in ratings if isinstance(r.get("score"), (int, float))]
    return severity, max(0.0, *scores) if scores else None


def rank(severity: str) -> int:
    return SEVERITIES.index(severity) if severity in SEVERITIES else -1


@dataclass(frozen=True)
class ScanVerdict:
    refused: tuple[Finding, ...]
    ignored: tuple[tuple[Finding, Ignore], ...]
    expired: tuple[tuple[Finding, Ignore], ...]  # ignored, but past its `until`: refused too
    below: int  # findings under the severity

    @property
    def passes(self) -> bool:
        return not self.refused and not self.expired

    def reasons(self) -> list[str]:
        out = [f"{f.id} ({f.severity}{'' if f.score is None else f' {f.score:g}'}) in {f.package}"
               + (f", fixed in {f.fixed_in}" if f.fixed_in else "") for f in self.refused]
        out += [f"{f.id} ({f.severity}) in {f.package}: ignored until {i.until.isoformat()}, which has passed"
                for f, i in self.expired]
        return out


def judge(found: Iterable[Finding], policy: ScanPolicy, today: date | datetime) -> ScanVerdict:
    """Which findings refuse the image under ``policy`` on ``today`` (given, never read here); a time
    with a zone is taken on AWS's clock (UTC), whose day an ``until`` names."""
    if isinstance(today, datetime) and today.tzinfo is not None:
        today = today.astimezone(timezone.utc)
    day = today.date() if isinstance(today, datetime) else today
    ignores = {i.id: i for i in policy.ignore}
    refused, ignored, expired, below = [], [], [], 0
    for finding in found:
        if rank(finding.severity) < rank(policy.max_severity) and finding.severity != "unknown":
            below += 1
            continue
        rule = ignores.get(finding.id)
        if rule is None:
            refused.append(finding)
        elif rule.until < day:
            expired.append((finding, rule))
        else:
            ignored.append((finding, rule))
    return ScanVerdict(tuple(refused), tuple(ignored), tuple(expired), below)
