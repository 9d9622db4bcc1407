"""EC2 image lifecycle calls of the gateway: deregistration protection, deprecation, disable, and the
Recycle Bin (its retention rules, and the images and snapshots in it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping, Sequence

from amibuild.aws.error_map import mapped_errors
from amibuild.errors import AwsError


@dataclass(frozen=True)
class RetentionRule:
    """A Recycle Bin rule: what it keeps (EC2_IMAGE, EBS_SNAPSHOT), for how long, and which tags select."""

    identifier: str
    resource_type: str
    days: int
    tags: tuple[tuple[str, str], ...] = ()  # (key, value) of ResourceTags; () = every resource of the region
    exclude: tuple[tuple[str, str], ...] = ()
    status: str = "available"  # GetRule's Status: "pending" until the rule is active (it retains nothing yet)


def retention_rule(rule: Mapping[str, Any], resource_type: str) -> RetentionRule:
    """One rbin GetRule answer. A retention unit other than DAYS (rbin's only one) is refused, not
    read as days: prune would trust a retention it does not know."""
    period = rule.get("RetentionPeriod", {})
    if (unit := period.get("RetentionPeriodUnit", "DAYS")) != "DAYS":
        raise AwsError(f"Recycle Bin rule {rule.get('Identifier', '')}: retention unit {unit!r} is not one amibuild "
                       "knows (DAYS)")

    def pairs(key: str) -> tuple[tuple[str, str], ...]:
        return tuple((t["ResourceTagKey"], t.get("ResourceTagValue", "")) for t in rule.get(key) or ())

    return RetentionRule(rule.get("Identifier", ""), rule.get("ResourceType", resource_type),
                         int(period.get("RetentionPeriodValue", 0)), pairs("ResourceTags"), pairs("ExcludeResourceTags"),
                         rule.get("Status") or "available")


@dataclass(frozen=True)
class Binned:
    """An image or snapshot in the Recycle Bin, and when it leaves for good."""

    resource_id: str
    entered: datetime | None
    exits: datetime | None


class ImageLifecycleCalls:
    """Image protection, deprecation, disabling and the Recycle Bin; mixed into `amibuild.aws.Aws`."""

    def protect_image(self, region: str, image_id: str, *, cooldown: bool = False) -> None:
        with mapped_errors(f"ec2:EnableImageDeregistrationProtection {image_id}", region):
            self.client("ec2", region).enable_image_deregistration_protection(ImageId=image_id, WithCooldown=cooldown)

    def unprotect_image(self, region: str, image_id: str) -> None:
        with mapped_errors(f"ec2:DisableImageDeregistrationProtection {image_id}", region):
            self.client("ec2", region).disable_image_deregistration_protection(ImageId=image_id)

    def undeprecate_image(self, region: str, image_id: str) -> None:
        with mapped_errors(f"ec2:DisableImageDeprecation {image_id}", region):
            self.client("ec2", region).disable_image_deprecation(ImageId=image_id)

    def launch_permissions(self, region: str, image_id: str) -> tuple[str, ...]:
        """Whom the image's launch permission names: account ids, ``all`` (public), organization and OU ARNs."""
        with mapped_errors(f"ec2:DescribeImageAttribute {image_id}", region):
            raw = self.client("ec2", region).describe_image_attribute(ImageId=image_id, Attribute="launchPermission")
        return tuple(p.get("UserId") or p.get("Group") or p.get("OrganizationArn") or p.get("OrganizationalUnitArn")
                     for p in raw.get("LaunchPermissions", []) if any(p.values()))

    def disable_image(self, region: str, image_id: str) -> None:
        with mapped_errors(f"ec2:DisableImage {image_id}", region):
            self.client("ec2", region).disable_image(ImageId=image_id)

    def retention_rules(self, region: str, resource_type: str) -> list[RetentionRule]:
        """Every Recycle Bin rule of ``resource_type`` in ``region``, with its tags."""
        client = self.client("rbin", region)
        with mapped_errors(f"rbin:ListRules {resource_type}", region):
            listed = [r for page in client.get_paginator("list_rules").paginate(ResourceType=resource_type)
                      for r in page.get("Rules", [])]
            answers = [answer for summary in listed if (answer := self._rule(client, summary["Identifier"]))]
        return [retention_rule(rule, resource_type) for rule in answers]

    @staticmethod
    def _rule(client: Any, identifier: str) -> Mapping[str, Any] | None:
        """GetRule; None for a rule deleted since the listing (it keeps nothing now)."""
        try:
            return client.get_rule(Identifier=identifier)
        except client.exceptions.ResourceNotFoundException:
            return None

    def images_in_recycle_bin(self, region: str, image_ids: Sequence[str] = ()) -> list[Binned]:
        kwargs: dict[str, Any] = {"ImageIds": list(image_ids)} if image_ids else {}
        with mapped_errors("ec2:ListImagesInRecycleBin", region):
            pages = self.client("ec2", region).get_paginator("list_images_in_recycle_bin").paginate(**kwargs)
            return [Binned(i["ImageId"], i.get("RecycleBinEnterTime"), i.get("RecycleBinExitTime"))
                    for page in pages for i in page.get("Images", [])]

    def snapshots_in_recycle_bin(self, region: str, snapshot_ids: Sequence[str] = ()) -> list[Binned]:
        kwargs: dict[str, Any] = {"SnapshotIds": list(snapshot_ids)} if snapshot_ids else {}
        with mapped_errors("ec2:ListSnapshotsInRecycleBin", region):
            pages = self.client("ec2", region).get_paginator("list_snapshots_in_recycle_bin").paginate(**kwargs)
            return [Binned(s["SnapshotId"], s.get("RecycleBinEnterTime"), s.get("RecycleBinExitTime"))
                    for page in pages for s in page.get("Snapshots", [])]

    def restore_image(self, region: str, image_id: str) -> None:
        with mapped_errors(f"ec2:RestoreImageFromRecycleBin {image_id}", region):
            self.client("ec2", region).restore_image_from_recycle_bin(ImageId=image_id)

    def restore_snapshot(self, region: str, snapshot_id: str) -> None:
        with mapped_errors(f"ec2:RestoreSnapshotFromRecycleBin {snapshot_id}", region):
            self.client("ec2", region).restore_snapshot_from_recycle_bin(SnapshotId=snapshot_id)
