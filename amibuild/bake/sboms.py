"""build-ami's SBOMs: each built variant's package list (stage 1's `inventory.tsv`, brought back beside
its template) as CycloneDX 1.5, stored beside the image's statements; its digest goes into the provenance."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

from amibuild.attest import store
from amibuild.attest.sign import Where
from amibuild.bake.executor import BuildOutcome
from amibuild.bake.build_plan import BuildPlan, PlanItem
from amibuild.bake.provenance import for_each_attestable
from amibuild.errors import AmibuildError
from amibuild.inventory import sbom
from amibuild.inventory.packages import parse_inventory
from amibuild.render import INVENTORY_FILE


@dataclass(frozen=True)
class SbomStored:
    """One variant's SBOM: where it went and its digest, or why there is none."""

    digest: str = ""  # hex SHA-256 of the stored document
    packages: int = 0
    bucket: str = ""
    keys: tuple[str, ...] = ()
    error: str = ""
    document: str = ""  # the stored CycloneDX JSON (for build-ami --scan; not in `to_dict`)

    def line(self) -> str:
        if self.error:
            return f"SBOM NOT stored: {self.error}"
        more = (f" (and under {len(self.keys) - 1} more AMI id{'s' if len(self.keys) > 2 else ''})"
                if len(self.keys) > 1 else "")
        return f"SBOM of {self.packages} package{'' if self.packages == 1 else 's'} (sha256 {self.digest[:12]}): s3://{self.bucket}/{self.keys[0]}{more}"

    def to_dict(self) -> dict[str, Any]:
        return {"digest": self.digest or None, "packages": self.packages, "bucket": self.bucket or None,
                "keys": list(self.keys), "error": self.error or None}


def document_of(text: str, *, os_name: str, image: str, created: datetime) -> tuple[str, int]:
    """The CycloneDX 1.5 document of an inventory's text, and how many packages it lists. Pure."""
    packages = parse_inventory(text)
    return sbom.cyclonedx(packages, os_name=os_name, image=image, created=created), len(packages)


def store_sboms(aws: Any, where: Where, plan: BuildPlan, outcomes: Sequence[BuildOutcome]) -> Mapping[str, SbomStored]:
    """{variant: its SBOM, stored under every region's AMI id}, for the variants built in this run."""
    def one(item: PlanItem, outcome: BuildOutcome) -> SbomStored:
        path = item.directory / INVENTORY_FILE
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            return SbomStored(error=f"stage 1 brought back no package list ({path} is missing)")
        image = outcome.amis[plan.regions[0]]
        try:
            document, count = document_of(text, os_name=item.rendered.variant.os, image=image,
                                          created=datetime.now(timezone.utc))
        except AmibuildError as exc:
            return SbomStored(error=f"{path}: {exc}")
        body = document.encode("utf-8")
        keys = tuple(store.sbom_key(where.pipeline, outcome.amis[r], plan.run_id) for r in plan.regions)
        try:
            for key in keys:
                aws.put_object(where.bucket, key, body, where.region)
        except AmibuildError as exc:
            return SbomStored(error=f"not stored in s3://{where.bucket}: {exc}")
        return SbomStored(hashlib.sha256(body).hexdigest(), count, where.bucket, keys, document=document)

    return for_each_attestable(plan, outcomes, one)
