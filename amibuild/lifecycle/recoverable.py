"""Whether a deregistered image can come back from the Recycle Bin: a pure decision over rbin rules.

An image is recoverable only when an EC2_IMAGE rule and an EBS_SNAPSHOT rule both cover it (an
image back without its snapshots cannot launch); the shorter retention is how long it stays so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

from amibuild.errors import AwsError

_UNIT = {"DAYS": 86400}


@dataclass(frozen=True)
class BinRule:
    """One Recycle Bin retention rule as rbin ListRules returns it (region-level or tag-level)."""

    resource_type: str  # EC2_IMAGE or EBS_SNAPSHOT
    retention: timedelta
    resource_tags: tuple[tuple[str, str], ...] = ()  # empty: covers every resource of the type
    exclude_tags: tuple[tuple[str, str], ...] = ()
    locked: bool = False

    def covers(self, tags: Mapping[str, str]) -> bool:
        if any(tags.get(k) == v for k, v in self.exclude_tags):
            return False
        # A tag-level rule matches a resource that carries any one of its tags (AWS: "any of").
        return not self.resource_tags or any(tags.get(k) == v for k, v in self.resource_tags)


@dataclass(frozen=True)
class Recovery:
    """What deregistering an image in one region means for getting it back."""

    recoverable: bool
    retention: timedelta | None
    reason: str

    def keep_snapshots(self) -> bool:
        """Prune deletes snapshots only when the bin would keep them; otherwise it leaves them."""
        return not self.recoverable


def rule_from_api(item: Mapping) -> BinRule:
    """A BinRule from one rbin ListRules/GetRule item; an unknown retention unit is refused loudly."""
    period = item["RetentionPeriod"]
    unit = period["RetentionPeriodUnit"]
    if unit not in _UNIT:
        raise AwsError(f"Recycle Bin retention unit {unit!r} is not one amibuild knows (DAYS)")
    return BinRule(
        resource_type=item["ResourceType"],
        retention=timedelta(seconds=int(period["RetentionPeriodValue"]) * _UNIT[unit]),
        resource_tags=_pairs(item, "ResourceTags"),
        exclude_tags=_pairs(item, "ExcludeResourceTags"),
        locked=item.get("LockState") == "locked",
    )


def _pairs(item: Mapping, key: str) -> tuple[tuple[str, str], ...]:
    return tuple((t["ResourceTagKey"], t.get("ResourceTagValue", "")) for t in item.get(key) or ())


def recovery(rules: Sequence[BinRule], image_tags: Mapping[str, str], snapshot_tags: Mapping[str, str]) -> Recovery:
    """Recoverable for the shorter of the longest covering image rule and the longest snapshot rule."""
    image = [r.retention for r in rules if r.resource_type == "EC2_IMAGE" and r.covers(image_tags)]
    snap = [r.retention for r in rules if r.resource_type == "EBS_SNAPSHOT" and r.covers(snapshot_tags)]
    if not image and not snap:
        return Recovery(False, None, "no Recycle Bin rule covers this image or its snapshots")
    if not image:
        return Recovery(False, None, "no EC2_IMAGE Recycle Bin rule covers this image; snapshots are kept")
    if not snap:
        return Recovery(False, None, "no EBS_SNAPSHOT Recycle Bin rule covers its snapshots; snapshots are kept")
    kept = min(max(image), max(snap))
    return Recovery(True, kept, f"recoverable from the Recycle Bin for {kept.days}d")
