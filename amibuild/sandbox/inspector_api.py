"""The emulator's Amazon Inspector Scan: ScanSbom (``POST /scan/sbom``), which moto does not have.

As Inspector does, it takes a CycloneDX 1.5 document (any other ``specVersion``, a document that
is not CycloneDX, or more than 2,000 components: ``ValidationException``, HTTP 400) and answers,
for ``outputFormat = CYCLONE_DX_1_5``, the same document with a ``vulnerabilities`` list and the
severity counts in its metadata. What it knows is the small list the project ships beside this
module (`vulnerabilities.json`): each entry names an rpm (package URL type, namespace and name,
and distro), the epoch:version-release range it affects (``introduced`` ≤ EVR < ``fixed``) and a
severity. A component matches on its purl and rpm's version order, never on the name alone. The
entries are the sandbox's own test data (ids ``AMIBUILD-SANDBOX-...``), not real advisories.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime, timezone
from importlib import resources
from typing import Any, Callable, Iterable

from packageurl import PackageURL

from amibuild.inventory.packages import compare_evr

MAX_COMPONENTS = 2000
PATH = "/scan/sbom"
SERVICE = "inspector-scan"
_SCOPE = re.compile(r"Credential=[^/,\s]+/[0-9]{8}/[a-z0-9-]+/([a-z0-9-]+)/aws4_request")
_FORMATS = ("CYCLONE_DX_1_5", "INSPECTOR", "INSPECTOR_ALT")


def is_scan(environ: dict[str, Any]) -> bool:
    signed = _SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
    return bool(signed and signed.group(1) == SERVICE)


def known() -> list[dict[str, Any]]:
    return json.loads(resources.files("amibuild.sandbox").joinpath("vulnerabilities.json").read_text())


class ValidationError(Exception):
    def __init__(self, message: str, reason: str = "FIELD_VALIDATION_FAILED") -> None:
        super().__init__(message)
        self.reason = reason


def scan(request: Any, entries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The ScanSbom answer for a request body, or ValidationError as Inspector refuses it."""
    if not isinstance(request, dict) or not isinstance(request.get("sbom"), dict):
        raise ValidationError("sbom is required and must be a CycloneDX 1.5 JSON document")
    form = request.get("outputFormat", "CYCLONE_DX_1_5")
    if form not in _FORMATS:
        raise ValidationError(f"outputFormat must be one of {', '.join(_FORMATS)}")
    sbom = request["sbom"]
    if sbom.get("bomFormat") != "CycloneDX":
        raise ValidationError("the SBOM must be a CycloneDX document (bomFormat CycloneDX)")
    if sbom.get("specVersion") != "1.5":
        raise ValidationError(f"unsupported specVersion {sbom.get('specVersion')!r}: only CycloneDX 1.5 is supported")
    components = sbom.get("components", [])
    if len(components) > MAX_COMPONENTS:
        raise ValidationError(f"the SBOM has {len(components)} components; at most {MAX_COMPONENTS} are scanned")
    vulnerabilities = []
    counts = dict.fromkeys(("critical", "high", "medium", "low"), 0)
    for entry in entries:
        affected = [c for c in components if _affects(entry, c.get("purl", ""))]
        if not affected:
            continue
        counts[entry["severity"]] = counts.get(entry["severity"], 0) + 1
        vulnerabilities.append({
            "bom-ref": f"vuln-{len(vulnerabilities) + 1}", "id": entry["id"],
            "source": {"name": "AMIBUILD-SANDBOX"}, "description": entry.get("description", ""),
            "ratings": [{"source": {"name": "AMIBUILD-SANDBOX"}, "severity": entry["severity"],
                         "score": entry.get("score"), "method": "CVSSv31"}],
            "affects": [{"ref": c.get("bom-ref", c.get("purl", ""))} for c in affected],
            "properties": [{"name": f"amazon:inspector:sbom_scanner:fixed_version:{c.get('bom-ref', '')}",
                            "value": entry["fixed"]} for c in affected if entry.get("fixed")],
        })
    answer = {"bomFormat": "CycloneDX", "specVersion": "1.5", "serialNumber": f"urn:uuid:{uuid.uuid4()}",
              "version": 1,
              "metadata": {"timestamp": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                           "properties": [{"name": f"amazon:inspector:sbom_scanner:{level}_vulnerabilities",
                                           "value": str(n)} for level, n in counts.items()]},
              "components": components, "vulnerabilities": vulnerabilities}
    return {"sbom": answer}


def _affects(entry: dict[str, Any], text: str) -> bool:
    try:
        url = PackageURL.from_string(text)
    except ValueError:
        return False
    if (url.type, url.namespace, url.name) != ("rpm", entry.get("namespace", "amazon"), entry["name"]):
        return False
    distros = entry.get("distros")
    if distros and (url.qualifiers or {}).get("distro") not in distros:
        return False
    epoch = (url.qualifiers or {}).get("epoch")
    evr = f"{epoch}:{url.version}" if epoch and epoch != "0" else str(url.version or "")
    if not evr:
        return False
    if entry.get("introduced") and compare_evr(evr, entry["introduced"]) < 0:
        return False
    return not entry.get("fixed") or compare_evr(evr, entry["fixed"]) < 0


def serve(environ: dict[str, Any], answer: Callable[[str, dict[str, Any]], Iterable[bytes]]) -> Iterable[bytes]:
    """The WSGI side: ``answer(status, body)`` writes the JSON response."""
    if environ.get("REQUEST_METHOD") != "POST" or environ.get("PATH_INFO") != PATH:
        return answer("404 Not Found", {"message": f"no route {environ.get('PATH_INFO')}"})
    length = int(environ.get("CONTENT_LENGTH") or 0)
    try:
        body = json.loads(environ["wsgi.input"].read(length) or b"{}")
        return answer("200 OK", scan(body, known()))
    except ValidationError as exc:
        return answer("400 Bad Request", {"__type": "ValidationException", "message": str(exc),
                                          "reason": exc.reason})
    except ValueError as exc:
        return answer("400 Bad Request", {"__type": "ValidationException", "message": f"not JSON: {exc}",
                                          "reason": "CANNOT_PARSE"})
