"""What a build run will do, as data: which variants to build, which to skip and why.

`plan_build` is pure. It is given the rendered variants and the images amibuild already made (one
DescribeImages per target region, done by the caller) and decides per variant:

    BUILD   no available image with this fingerprint in every target region (or --force)
    SKIP    an available image with the same fingerprint exists in every target region: reuse it

Because the fingerprint covers every rendered file and the resolved source AMI, a new EKS-optimized
release or any change of input means a new fingerprint, hence a build.
"""

from __future__ import annotations

import enum
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from amibuild import tags
from amibuild.aws import Image
from amibuild.render import Rendered
from amibuild.pipeline import Pipeline
from amibuild.bake.decide import ready_images


class BuildDecision(enum.StrEnum):
    BUILD = "build"
    SKIP = "skip"


@dataclass(frozen=True)
class PlanItem:
    name: str
    rendered: Rendered
    directory: Path
    decision: BuildDecision
    reason: str
    existing: Mapping[str, str]  # region -> AMI reused, for SKIP

    @property
    def fingerprint(self) -> str:
        return self.rendered.fingerprint


@dataclass(frozen=True)
class BuildPlan:
    run_id: str
    started: str  # ISO 8601 UTC
    pipeline: Pipeline
    regions: tuple[str, ...]  # every target region (build regions, then copies)
    items: tuple[PlanItem, ...]
    force: bool

    @property
    def to_build(self) -> tuple[PlanItem, ...]:
        return tuple(i for i in self.items if i.decision is BuildDecision.BUILD)

    def to_dict(self) -> dict:
        return {
            "run_id": self.run_id,
            "regions": list(self.regions),
            "force": self.force,
            "variants": [{"name": i.name, "decision": i.decision.value, "reason": i.reason,
                          "fingerprint": i.fingerprint, "amis": dict(i.existing), "directory": str(i.directory)}
                         for i in self.items],
        }


def new_run_id() -> str:
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def plan_build(pipeline: Pipeline, rendered: Sequence[tuple[Rendered, Path]], images: Mapping[str, Iterable[Image]],
               *, run_id: str, force: bool = False) -> BuildPlan:
    """Decide per variant; ``images`` maps each target region to amibuild's images there."""
    regions = pipeline.target_regions
    by_fingerprint: dict[str, dict[str, list[Image]]] = {}
    for region, found in images.items():
        for image in found:
            fp = image.tags.get(tags.FINGERPRINT)
            if fp and image.state == "available":
                by_fingerprint.setdefault(fp, {}).setdefault(region, []).append(image)
    items = []
    for item, directory in rendered:
        found = by_fingerprint.get(item.fingerprint, {})
        ready = ready_images(regions, found)  # one run's images, in every region
        existing: dict[str, str] = {}
        if force:
            decision, reason = BuildDecision.BUILD, "--force"
        elif ready is not None:
            decision, reason, existing = (BuildDecision.SKIP, "up to date: an available image with this fingerprint "
                                          "exists in every region", ready)
        elif all(found.get(r) for r in regions):
            decision, reason = BuildDecision.BUILD, ("images with this fingerprint are in every region, but no one "
                                                     "run's are: built again, one build for every region")
        elif found:
            missing = [r for r in regions if not found.get(r)]
            decision, reason = BuildDecision.BUILD, f"image with this fingerprint missing in {', '.join(missing)}"
        else:
            decision, reason = BuildDecision.BUILD, "no image with this fingerprint yet"
        items.append(PlanItem(item.variant.name, item, directory, decision, reason, existing))
    return BuildPlan(run_id=run_id, started=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                     pipeline=pipeline, regions=regions, items=tuple(items), force=force)


def provenance_tags(item: PlanItem, plan: BuildPlan, *, version: str, git_commit: str | None) -> dict[str, str]:
    """Tags every image and snapshot of this build carries, in every region.

    ``{{ .SourceAMI }}`` and ``{{ .SourceAMIName }}`` are filled in by Packer at build time.
    """
    variant = item.rendered.variant
    values = {
        tags.FINGERPRINT: item.fingerprint,
        tags.VARIANT: variant.name,
        tags.PIPELINE: plan.pipeline.name,
        tags.OS: variant.os,
        tags.KUBERNETES_VERSION: variant.kubernetes_version,
        tags.ARCH: variant.arch,
        tags.FLAVOR: variant.flavor,
        tags.BASE: variant.base,
        tags.SOURCE_AMI: "{{ .SourceAMI }}",
        tags.SOURCE_AMI_NAME: "{{ .SourceAMIName }}",
        tags.EXTRA_PACKAGES: _tag_value(",".join(variant.extra_packages) or "-"),
        tags.VERSION: version,
        tags.RUN_ID: plan.run_id,
        tags.CREATED: plan.started,
    }
    if git_commit:
        values[tags.GIT_COMMIT] = git_commit
    return values


def _tag_value(text: str) -> str:
    """EC2 tag values hold at most 256 characters."""
    return text if len(text) <= 256 else text[:253] + "..."
