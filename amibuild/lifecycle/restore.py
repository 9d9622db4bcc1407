"""`amibuild restore`: bring a deregistered image back from the Recycle Bin, its snapshots too.

The image first (RestoreImageFromRecycleBin: back with its id and tags), then each snapshot its
block device mappings name that is in the bin (RestoreSnapshotFromRecycleBin). A restored image
keeps its ``amibuild:*`` tags, so `channels --repair` finds it as a build's image again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from amibuild import tags
from amibuild.aws import Aws, regions
from amibuild.errors import AmibuildError, NotFound, SpecError
from amibuild.pipeline.value_checks import AMI_ID_FLAG


class RestoreFailed(AmibuildError):
    """The image, or one of its snapshots, could not be brought back."""


def check(ami: str, region: str) -> None:
    """--ami and --region name a deregistered image and a region (exit 2 before AWS is asked)."""
    if not ami and not region:
        raise SpecError("restore: give --ami AMI and --region REGION (where it was deregistered), e.g. "
                        "--ami ami-0123456789abcdef0 --region us-west-2")
    if not ami:
        raise SpecError("--ami: name the deregistered image to bring back, e.g. --ami ami-0123456789abcdef0; "
                        "`aws ec2 list-images-in-recycle-bin` lists the images in the bin")
    if not AMI_ID_FLAG.fullmatch(ami):
        raise SpecError(f"--ami: {ami!r} is not an AMI id like ami-0123456789abcdef0; "
                        "`aws ec2 list-images-in-recycle-bin` lists the images in the bin")
    if not region:
        raise SpecError("--region: name the region the image was deregistered in, e.g. --region us-west-2")
    if problem := regions.problem(region):
        raise SpecError(f"--region: {problem}")


@dataclass(frozen=True)
class RestoreResult:
    ami: str
    region: str
    image_restored: bool  # False: it was registered already
    snapshots_restored: tuple[str, ...] = ()
    snapshots_present: tuple[str, ...] = ()  # not in the bin: never deleted
    missing: tuple[str, ...] = ()  # neither registered nor in the bin: the image cannot launch
    image_tags: dict[str, str] = field(default_factory=dict)

    def lines(self) -> list[str]:
        out = [f"restored {self.ami} in {self.region} from the Recycle Bin" if self.image_restored
               else f"{self.ami} in {self.region} is registered already"]
        out += [f"  snapshot {s}: restored" for s in self.snapshots_restored]
        out += [f"  snapshot {s}: present (not in the bin)" for s in self.snapshots_present]
        out += [f"  snapshot {s}: GONE (neither in the account nor in the bin): the image cannot launch"
                for s in self.missing]
        build = self.image_tags.get(tags.FINGERPRINT)
        out.append(f"  tags kept: build {build[:12]} of {self.image_tags.get(tags.VARIANT, '?')}; "
                   "`amibuild channels --repair` can use it" if build else
                   "  no amibuild:fingerprint tag: channels --repair will not take it for a build")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"ami": self.ami, "region": self.region, "image_restored": self.image_restored,
                "snapshots_restored": list(self.snapshots_restored),
                "snapshots_present": list(self.snapshots_present), "missing": list(self.missing),
                "tags": dict(self.image_tags)}

    def raise_for_status(self) -> None:
        if self.missing:
            state = "is back" if self.image_restored else "is registered"
            raise RestoreFailed(f"restore: {self.ami} {state}, but its snapshot(s) {', '.join(self.missing)} are gone "
                                "for good: the image cannot launch")


def run(ami: str, region: str, profile: str | None = None) -> RestoreResult:
    """Bring ``ami`` back from ``region``'s Recycle Bin, with its snapshots."""
    check(ami, region)
    aws = Aws(profile=profile, region=region)
    restored = any(b.resource_id == ami for b in aws.images_in_recycle_bin(region, [ami]))
    if restored:
        aws.restore_image(region, ami)
    image = aws.find_image(region, ami)
    if image is None:
        raise NotFound(f"restore: {ami} is neither registered in {region} nor in its Recycle Bin (no rule kept it, "
                       "or its retention is over)")
    snapshots = image.snapshot_ids
    in_bin = {b.resource_id for b in aws.snapshots_in_recycle_bin(region, snapshots)} if snapshots else set()
    for snapshot in snapshots:
        if snapshot in in_bin:
            try:
                aws.restore_snapshot(region, snapshot)
            except AmibuildError as exc:  # the image may be back already: say so, or the user thinks nothing changed
                state = "is back" if restored else "is registered"
                raise RestoreFailed(f"restore: {ami} {state}, but its snapshot {snapshot} is still in the Recycle Bin "
                                    f"({exc}): the image cannot launch until it is; restore again") from exc
    present = set(aws.snapshot_tags(region, [s for s in snapshots if s not in in_bin])) if snapshots else set()
    return RestoreResult(ami, region, restored, tuple(s for s in snapshots if s in in_bin),
                         tuple(s for s in snapshots if s in present),
                         tuple(s for s in snapshots if s not in in_bin and s not in present), dict(image.tags))
