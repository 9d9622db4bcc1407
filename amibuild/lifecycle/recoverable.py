"""Whether a deregistered image can come back from the Recycle Bin: a pure decision over rbin rules.

An image is recoverable only when an EC2_IMAGE rule covers it and an EBS_SNAPSHOT rule covers each
of its snapshots (an image back without its snapshots cannot launch); the shorter retention is how
long it stays so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

NO_RULE = "no Recycle Bin rule covers this image or its snapshots"


@dataclass(frozen=True)
class BinRule:
    """One Recycle Bin retention rule as rbin ListRules returns it (region-level or tag-level)."""

    resource_type: str  # EC2_IMAGE or EBS_SNAPSHOT
    retention: timedelta
    resource_tags: tuple[tuple[str, str], ...] = ()  # empty: covers every resource of the type
    exclude_tags: tuple[tuple[str, str], ...] = ()
    identifier: str = ""
    status: str = "available"  # rbin's Status: a "pending" rule is not active yet and retains nothing

    def covers(self, tags: Mapping[str, str]) -> bool:
        if any(_hit(tags, k, v) for k, v in self.exclude_tags):
            return False
        # A tag-level rule matches a resource that carries any one of its tags (AWS: "any of").
        return not self.resource_tags or any(_hit(tags, k, v) for k, v in self.resource_tags)


def _hit(tags: Mapping[str, str], key: str, value: str) -> bool:
    # a rule tag without a value (ResourceTagValue is optional) matches the key with any value
    return key in tags and (not value or tags[key] == value)


@dataclass(frozen=True)
class Recovery:
    """What deregistering an image in one region means for getting it back."""

    recoverable: bool
    retention: timedelta | None
    reason: str

    def keep_snapshots(self) -> bool:
        """Prune deletes snapshots only when the bin would keep them; otherwise it leaves them."""
        return not self.recoverable


def rule_from_gateway(rule: Any) -> BinRule:
    """A BinRule from the gateway's `RetentionRule` (in days, rbin's only unit: the gateway refuses another)."""
    return BinRule(rule.resource_type, timedelta(days=rule.days), tuple(rule.tags), tuple(rule.exclude),
                   rule.identifier, rule.status)


def recovery(rules: Sequence[BinRule], image_tags: Mapping[str, str],
             snapshot_tags: Mapping[str, str] | Sequence[Mapping[str, str]]) -> Recovery:
    """Recoverable for the shorter of the longest covering image rule and, per snapshot, the longest
    snapshot rule. ``snapshot_tags``: one snapshot's tags, or one mapping per snapshot. Only active rules
    count: a rule rbin still shows as pending (a region's first rule, for up to 30 minutes) keeps nothing."""
    active = [r for r in rules if r.status == "available"]
    found = _recovery(active, image_tags, snapshot_tags)
    if not found.recoverable and len(active) < len(rules) and _recovery(rules, image_tags, snapshot_tags).recoverable:
        waiting = ", ".join(r.identifier or r.resource_type for r in rules if r.status != "available")
        return Recovery(False, None, f"the Recycle Bin rule(s) {waiting} that would keep it are not active yet "
                                     f"({', '.join(sorted({r.status for r in rules if r.status != 'available'}))})")
    return found


def _recovery(rules: Sequence[BinRule], image_tags: Mapping[str, str],
              snapshot_tags: Mapping[str, str] | Sequence[Mapping[str, str]]) -> Recovery:
    snapshots = [snapshot_tags] if isinstance(snapshot_tags, Mapping) else list(snapshot_tags)
    image = [r.retention for r in rules if r.resource_type == "EC2_IMAGE" and r.covers(image_tags)]
    per_snapshot = [[r.retention for r in rules if r.resource_type == "EBS_SNAPSHOT" and r.covers(tags)]
                    for tags in snapshots]
    covered = [max(found) for found in per_snapshot if found]
    if not image and not covered:
        return Recovery(False, None, NO_RULE)
    if not image:
        return Recovery(False, None, "no EC2_IMAGE Recycle Bin rule covers this image")
    if len(covered) < len(per_snapshot):
        return Recovery(False, None, "no EBS_SNAPSHOT Recycle Bin rule covers its snapshots")
    kept = min([max(image), *covered])
    return Recovery(True, kept, f"recoverable from the Recycle Bin for {_days(kept)}")


def _days(span: timedelta) -> str:
    return f"{span.days}d" if span.days else f"{int(span.total_seconds() // 3600)}h"
