"""Amazon Inspector Scan calls of the gateway: ScanSbom."""

from __future__ import annotations

from typing import Any, Mapping

from amibuild.aws.error_map import mapped_errors


class InspectorCalls:
    """Inspector Scan calls; mixed into `amibuild.aws.Aws` (needs `Session`'s clients)."""

    def scan_sbom(self, document: Mapping[str, Any], region: str) -> dict[str, Any]:
        """ScanSbom of one CycloneDX 1.5 document (at most 2,000 components): its CycloneDX answer."""
        with mapped_errors("inspector-scan:ScanSbom", region):
            answer = self.client("inspector-scan", region).scan_sbom(sbom=dict(document), outputFormat="CYCLONE_DX_1_5")
        return dict(answer.get("sbom") or {})
