"""The read side of the channels: history of a channel, every variant x channel x region, and
whether the pipeline's AMI users may launch the images and read their snapshots.

Pure reads through the gateway, fanned out over regions; nothing here writes (publish.py does).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Mapping, Sequence

from amibuild.aws import Aws, Parameter, fan_out
from amibuild.lease import is_lease
from amibuild.channels.publish import (DEFAULT_CHANNEL, PipelineLike, VariantLike, name_pattern, parameter_name, plain,
                                       provenance_of)

# ------------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class HistoryEntry:
    """One version of one channel's parameter in one region."""

    channel: str
    region: str
    parameter: str
    version: int
    modified: datetime | None
    ami: str
    fingerprint: str | None
    run_id: str | None
    user: str
    description: str
    data_type: str

    def to_dict(self) -> dict[str, Any]:
        return plain(self)


@dataclass(frozen=True)
class ChannelEntry:
    """One variant x channel x region: the AMI it holds (None: not published there)."""

    variant: str
    k8s: str
    channel: str
    region: str
    parameter: str
    ami: str | None
    version: int
    modified: datetime | None
    protection: str = ""  # the image's DeregistrationProtection ("": not read, or no image)
    deprecation_time: str = ""  # the image's DeprecationTime ("": none)

    def to_dict(self) -> dict[str, Any]:
        return plain(self)


def history(aws: Aws, *, pipeline: PipelineLike, variant: VariantLike, channel: str | None = None,
            region: str | None = None) -> list[HistoryEntry]:
    """Every version of the variant's channels (or one channel), per region, oldest first."""
    regions = (region,) if region else pipeline.target_regions
    if channel:
        names = [channel]
    else:
        found = channels(aws, pipeline=pipeline, regions=regions)
        names = sorted({e.channel for e in found if e.variant == variant.name and e.ami is not None
                        and e.k8s in ("", variant.kubernetes_version)})  # "": the template names no {k8s}
    jobs = [(c, r) for c in names for r in regions]

    def read(job: tuple[str, str]) -> list[HistoryEntry]:
        chan, reg = job
        name = parameter_name(pipeline, variant, chan)
        return [
            HistoryEntry(chan, reg, name, p.version, p.last_modified, p.value,
                         provenance_of(p.description).fingerprint, provenance_of(p.description).run_id,
                         p.user, p.description, p.data_type)
            for p in aws.parameter_history(name, reg)
        ]

    results = fan_out(jobs, read)
    return [entry for job in jobs for entry in results[job]]


def channels(aws: Aws, *, pipeline: PipelineLike, regions: Sequence[str] | None = None,
             listed: Mapping[str, Sequence[Parameter]] | None = None) -> list[ChannelEntry]:
    """Every variant x channel x region under the pipeline's prefix, with a row where one is missing.

    `listed`: every region's parameters under the prefix, already read (else read here)."""
    regions = tuple(regions or pipeline.target_regions)
    path, pattern = name_pattern(pipeline)
    if listed is None:
        listed = fan_out(regions, lambda r: aws.parameters_under(path, r))
    found: dict[tuple[str, str, str], dict[str, Parameter]] = {}
    for region in regions:
        for p in listed[region]:
            match = pattern.match(p.name)
            # a channel's lease can fit a template with three fields after the pipeline: not a channel
            if match and not is_lease(p.name):
                key = (match.group("variant"), match.groupdict().get("k8s") or "", match.group("channel"))
                found.setdefault(key, {})[region] = p
    for variant in getattr(pipeline, "variants", ()):
        if not any(k[0] == variant.name for k in found):
            found[(variant.name, variant.kubernetes_version, DEFAULT_CHANNEL)] = {}
    rows = []
    for (variant_name, k8s, chan), held in sorted(found.items()):
        for region in regions:
            p = held.get(region)
            rows.append(ChannelEntry(variant_name, k8s, chan, region, p.name if p else "", p.value if p else None,
                                     p.version if p else 0, p.last_modified if p else None))
    return rows


def with_safeguards(aws: Aws, entries: Sequence[ChannelEntry]) -> list[ChannelEntry]:
    """The entries with each image's deregistration protection and deprecation time (one read per image)."""
    images = aws.images_at({(e.region, e.ami) for e in entries if e.ami})

    def filled(e: ChannelEntry) -> ChannelEntry:
        image = images.get((e.region, e.ami or ""))
        if image is None:
            return replace(e, protection="(no image)" if e.ami else "")
        return replace(e, protection=image.protection, deprecation_time=image.deprecation_time)

    return [filled(e) for e in entries]


# ------------------------------------------------------------------------------- sharing


@dataclass(frozen=True)
class SharingGap:
    """In one region: which accounts cannot launch the image, or read one of its snapshots."""

    region: str
    ami: str
    missing_launch: tuple[str, ...]
    missing_snapshot: Mapping[str, tuple[str, ...]]  # snapshot id -> accounts

    @property
    def ok(self) -> bool:
        return not self.missing_launch and not any(self.missing_snapshot.values())


@dataclass(frozen=True)
class SharingReport:
    users: tuple[str, ...]
    regions: tuple[SharingGap, ...]

    @property
    def ok(self) -> bool:
        return all(g.ok for g in self.regions)

    def problems(self) -> list[str]:
        """One line per missing permission, e.g. for a build summary."""
        lines = []
        for gap in self.regions:
            if gap.missing_launch:
                lines.append(f"{gap.region}: {gap.ami} launch permission missing for {', '.join(gap.missing_launch)}")
            for snapshot, users in gap.missing_snapshot.items():
                if users:
                    lines.append(f"{gap.region}: {gap.ami} snapshot {snapshot} volume permission missing for "
                                 f"{', '.join(users)}")
        return lines


def check_sharing(aws: Aws, *, amis: Mapping[str, str], users: Sequence[str]) -> SharingReport:
    """Check that every account in `users` may launch each image and read its snapshots, per region."""
    wanted = tuple(dict.fromkeys(users))

    def check(region: str) -> SharingGap:
        ami = amis[region]
        image = aws.find_image(region, ami)
        if image is None:
            return SharingGap(region, ami, wanted, {})
        launch = aws.launch_permissions(region, ami)  # account ids among them
        snapshots = {s: tuple(u for u in wanted if u not in aws.snapshot_volume_users(region, s))
                     for s in image.snapshot_ids}
        return SharingGap(region, ami, tuple(u for u in wanted if u not in launch), snapshots)

    if not wanted:
        return SharingReport((), ())
    gaps = fan_out(list(amis), check)
    return SharingReport(wanted, tuple(gaps[r] for r in amis))


