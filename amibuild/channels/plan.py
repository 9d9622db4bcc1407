"""Channel writes as data: what to write where and why, decided without side effects.

`decide` takes what was read (the channel's parameter and the image in every region) and returns
a `PublishPlan`: per region write, unchanged, or refused with the reason. Provenance (which run
and build an AMI came from) travels in each parameter version's description and in the
parameter's tags. `amibuild.channels.write` carries a plan out; `amibuild.channels.publish`
reads, decides and writes under the channel's lease.
"""

from __future__ import annotations

import enum
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Iterable, Mapping, Sequence

from amibuild import __version__, tags
from amibuild.aws import Image, Parameter
from amibuild.channels.safeguard import GuardStep
from amibuild.errors import PublishRefused, SpecError
from amibuild.pipeline import known_regions
from amibuild.pipeline.value_checks import AMI_ID as _AMI_ID
from amibuild.values import parse_iso_time

IMAGE_DATA_TYPE = "aws:ec2:image"
MAX_VERSIONS = 100  # SSM keeps a parameter's latest 100 versions: a put past them deletes the oldest


_PROVENANCE = re.compile(r"\(run (?P<run>[^,()\s]+), fingerprint (?P<fp>[^,()\s]+)", re.ASCII)
UNKNOWN_MARK = "-"


# ------------------------------------------------------------------------------- provenance


@dataclass(frozen=True)
class Provenance:
    """Which build an AMI came from: the run that built it and the fingerprint of its inputs."""

    run_id: str | None = None
    fingerprint: str | None = None

    @property
    def known(self) -> bool:
        return bool(self.run_id or self.fingerprint)


def description(variant: str, channel: str, provenance: Provenance, note: str = "") -> str:
    """``<variant> <channel> AMI, written by amibuild <version> (run <id>, fingerprint <fp>[, note])``."""
    extra = f", {note}" if note else ""
    return (f"{variant} {channel} AMI, written by amibuild {__version__} "
            f"(run {provenance.run_id or UNKNOWN_MARK}, fingerprint {provenance.fingerprint or UNKNOWN_MARK}{extra})")


def provenance_of(text: str) -> Provenance:
    """The run id and fingerprint a parameter version's description names (empty when not amibuild's)."""
    match = _PROVENANCE.search(text or "")
    if not match:
        return Provenance()
    return Provenance(*(None if value == UNKNOWN_MARK else value for value in match.group("run", "fp")))


def build_time(image: Image | None) -> datetime | None:
    """When an image's build was made: amibuild's created tag (the same in every region), else the
    image's own creation date; None when neither can be read."""
    if image is None:
        return None
    return parse_iso_time(image.tags.get(tags.CREATED, "")) or parse_iso_time(image.creation_date)


def parameter_tags(variant: str, channel: str, provenance: Provenance, pipeline: str = "",
                   regions: Sequence[str] = (), home: str = "") -> dict[str, str]:
    """The tags a channel's parameter carries. Pipeline, variant and channel let prune find every
    channel amibuild wrote by its tags, whatever name template named it."""
    found = {
        tags.FINGERPRINT: provenance.fingerprint or UNKNOWN_MARK,
        tags.RUN_ID: provenance.run_id or UNKNOWN_MARK,
        tags.VARIANT: variant,
        tags.CHANNEL: channel,
    }
    if pipeline:
        found[tags.PIPELINE] = pipeline
    if regions:  # every writer of the channel finds in any region where else the channel lives
        found[tags.CHANNEL_REGIONS] = " ".join(sorted(regions))
    if home:  # where every writer of the channel takes its lease (`amibuild.channels.home`)
        found[tags.LEASE_HOME] = home
    return found


def recorded_regions(tags_by_region: Mapping[str, Mapping[str, str]]) -> set[str]:
    """Every region the channel's parameters say the channel is written in (their regions tag)."""
    return {r for found in tags_by_region.values() for r in found.get(tags.CHANNEL_REGIONS, "").split() if r}


# ------------------------------------------------------------------------------- parsing flags


def parse_amis(values: str | Iterable[str]) -> dict[str, str]:
    """``us-west-2=ami-0abc,eu-west-1=ami-0def`` (or several such strings) → {region: ami}."""
    items = [values] if isinstance(values, str) else list(values)
    pairs = [part.strip() for item in items for part in str(item).split(",") if part.strip()]
    example = "--ami us-west-2=ami-0123456789abcdef0,eu-west-1=ami-0fedcba9876543210"
    if not pairs:
        raise SpecError(f"--ami: give REGION=AMI_ID pairs, e.g. {example}")
    amis: dict[str, str] = {}
    regions = known_regions()
    for pair in pairs:
        region, sep, ami = (s.strip() for s in pair.partition("="))
        if not sep or not region or not ami:
            raise SpecError(f"--ami {pair!r}: write REGION=AMI_ID, e.g. {example}")
        if region not in regions:
            raise SpecError(f"--ami {pair!r}: unknown region {region!r}")
        if not _AMI_ID.match(ami):
            raise SpecError(f"--ami {pair!r}: {ami!r} is not an AMI id (ami- and 8 or 17 hex digits)")
        if region in amis and amis[region] != ami:
            raise SpecError(f"--ami: {region} is given twice ({amis[region]} and {ami})")
        amis[region] = ami
    return amis


# ------------------------------------------------------------------------------- plan (data)


class PublishAction(enum.StrEnum):
    WRITE = "write"
    UNCHANGED = "unchanged"
    REFUSED = "refused"


@dataclass(frozen=True)
class RegionPlan:
    """What happens to the channel's parameter in one region, and why."""

    region: str
    ami: str
    action: PublishAction
    reason: str
    previous_ami: str | None = None
    previous_version: int = 0  # 0: the parameter does not exist yet
    description: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PublishPlan:
    """Everything `execute_publish` needs, decided up front without side effects."""

    operation: str  # "publish", "promote recommended -> stable", "roll back to version 3"
    parameter: str
    variant: str
    channel: str
    regions: tuple[RegionPlan, ...]
    pipeline: str = ""
    # safeguards on the images the variant's channels hold, done before any put (amibuild.channels.safeguard)
    guards: tuple[GuardStep, ...] = ()

    @property
    def refusals(self) -> tuple[str, ...]:
        return tuple(r.reason for r in self.regions if r.action is PublishAction.REFUSED)

    @property
    def writes(self) -> tuple[RegionPlan, ...]:
        return tuple(r for r in self.regions if r.action is PublishAction.WRITE)

    def raise_for_status(self) -> None:
        """A refused plan's error, before anything is written; also a dry run's verdict (refused as the
        write would be: a dry run writes nothing either way)."""
        if self.refusals:
            raise PublishRefused(f"{self.operation} {self.variant} to {self.channel} ({self.parameter}) refused, "
                                 f"nothing written: " + "; ".join(self.refusals))

    def to_dict(self) -> dict[str, Any]:
        return plain(self)


def decide(*, operation: str, parameter: str, variant: str, channel: str, required_regions: Sequence[str],
           amis: Mapping[str, str], current: Mapping[str, Parameter | None], images: Mapping[str, Image | None],
           provenance: Mapping[str, Provenance], allow_foreign: bool = False, expected_fingerprint: str | None = None,
           note: str = "", pipeline: str = "", channel_regions: Iterable[str] = (), home: str = "",
           oldest: Mapping[str, Parameter] | None = None) -> PublishPlan:
    """Per region: write, unchanged, or refused with the reason. Pure: state in, plan out.

    ``channel_regions``: every region the channel is recorded in (`recorded_regions`); a write that
    does not cover them all is refused in every region: a channel is written everywhere or not at all.
    ``home``: the channel's lease home, recorded in every region written. ``oldest``: the oldest version
    where the channel keeps `MAX_VERSIONS` already (SSM refuses a put that would delete a labelled one).
    """
    regions = list(dict.fromkeys([*required_regions, *sorted(amis)]))
    outside = sorted(set(channel_regions) - set(regions))
    plans = []
    for region in regions:
        ami = amis.get(region, "")
        prov = provenance.get(region, Provenance())
        desc = description(variant, channel, prov, note)
        now = current.get(region)
        previous = {"previous_ami": now.value if now else None, "previous_version": now.version if now else 0}
        refusal = _refusal(region, ami, images.get(region), variant, allow_foreign, expected_fingerprint)
        if outside and not refusal and region == regions[0]:  # said once: it is about the whole write
            refusal = (f"channel {channel} is also written in {', '.join(outside)}, which this write does "
                       f"not cover (it writes {', '.join(regions)}); write every region of the channel or none "
                       "(drop --region), or delete the channel's parameter where it is to be retired")
        refusal = refusal or put_refusal(region, now, (oldest or {}).get(region))
        if refusal:
            plans.append(RegionPlan(region, ami, PublishAction.REFUSED, refusal, **previous))
        elif now is not None and now.value == ami:
            plans.append(RegionPlan(region, ami, PublishAction.UNCHANGED, f"{region}: already {ami} (version {now.version})",
                                    **previous))
        else:
            why = f"{region}: {now.value} (version {now.version}) → {ami}" if now else f"{region}: new parameter → {ami}"
            plans.append(RegionPlan(region, ami, PublishAction.WRITE, why, description=desc,
                                    tags=parameter_tags(variant, channel, prov, pipeline, regions, home), **previous))
    fingerprints = {p.fingerprint for r, p in provenance.items() if r in amis and p.fingerprint}
    if len(fingerprints) > 1 and not allow_foreign:
        detail = ", ".join(f"{r}: {provenance[r].fingerprint}" for r in regions if provenance.get(r, Provenance()).fingerprint)
        plans = [p if p.action is PublishAction.REFUSED else
                 RegionPlan(p.region, p.ami, PublishAction.REFUSED,
                            f"{p.region}: the images come from different builds ({detail}); "
                            "pass --allow-foreign to publish them anyway",
                            p.previous_ami, p.previous_version)
                 for p in plans]
    return PublishPlan(operation, parameter, variant, channel, tuple(plans), pipeline)


def put_refusal(region: str, now: Parameter | None, oldest: Parameter | None) -> str:
    """Why SSM would refuse a put of the channel's parameter in `region` ("" when it would not): its data
    type (`typed_refusal`), or a labelled oldest version the put would delete (`labelled_refusal`). Pure."""
    return typed_refusal(region, now) or labelled_refusal(region, oldest)


def typed_refusal(region: str, now: Parameter | None) -> str:
    """Why the channel's parameter in `region` cannot be written ("" when it can): SSM refuses to
    change a parameter's data type to or from ``aws:ec2:image``. Pure."""
    if now is None or now.data_type == IMAGE_DATA_TYPE:
        return ""
    return (f"{region}: the parameter has data type {now.data_type}, and SSM cannot change a parameter to "
            f"{IMAGE_DATA_TYPE}; delete it there (the next write creates it anew)")


def labelled_refusal(region: str, oldest: Parameter | None) -> str:
    """Why a put in `region` is refused ("" when it is not): the parameter keeps `MAX_VERSIONS` and
    `oldest`, the version the put would delete, has a label. Pure."""
    if oldest is None or not oldest.labels:
        return ""
    return (f"{region}: the parameter keeps SSM's {MAX_VERSIONS} versions, and its oldest (version {oldest.version}) "
            f"has the label {', '.join(oldest.labels)}: SSM refuses a new version until the label is moved to "
            "another version (`aws ssm label-parameter-version`)")


def _refusal(region: str, ami: str, image: Image | None, variant: str, allow_foreign: bool,
             expected_fingerprint: str | None) -> str:
    if not ami:
        return f"{region}: no image for this region (every target region needs one)"
    if not _AMI_ID.match(ami):
        return f"{region}: {ami!r} is not an AMI id"
    if image is None:
        return f"{region}: {ami} does not exist there (deregistered, or never copied there)"
    if image.state != "available":
        return f"{region}: {ami} is {image.state}, not available"
    if allow_foreign:
        return ""
    fingerprint = image.tags.get(tags.FINGERPRINT)
    if not fingerprint:
        return (f"{region}: {ami} has no {tags.FINGERPRINT} tag, so amibuild did not build it; "
                "pass --allow-foreign to publish it anyway")
    tagged_variant = image.tags.get(tags.VARIANT)
    if tagged_variant and tagged_variant != variant:
        return f"{region}: {ami} was built for variant {tagged_variant}, not {variant}"
    if expected_fingerprint and fingerprint != expected_fingerprint:
        return f"{region}: {ami} has fingerprint {fingerprint}, not {expected_fingerprint} (an image from another build)"
    return ""


def provenance_from_images(images: Mapping[str, Image | None], *, fingerprint: str | None = None,
                           run_id: str | None = None) -> dict[str, Provenance]:
    """What to record per region: the given fingerprint / run id, else the image's own tags."""
    own = {region: image.tags if image is not None else {} for region, image in images.items()}
    return {region: Provenance(run_id or found.get(tags.RUN_ID), fingerprint or found.get(tags.FINGERPRINT))
            for region, found in own.items()}


# ------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class RegionResult:
    region: str
    ami: str
    action: PublishAction  # WRITE (written) or UNCHANGED
    previous_ami: str | None
    previous_version: int
    version: int  # the version now holding `ami`


@dataclass(frozen=True)
class PublishResult:
    operation: str
    parameter: str
    variant: str
    channel: str
    regions: tuple[RegionResult, ...]
    notes: tuple[str, ...] = ()  # about the lease: a stale one taken over, one that could not be released
    guarded: tuple[GuardStep, ...] = ()  # the safeguard steps done before the write (amibuild.channels.safeguard)

    @property
    def changed(self) -> bool:
        return any(r.action is PublishAction.WRITE for r in self.regions)

    def to_dict(self) -> dict[str, Any]:
        return plain(self)


# ------------------------------------------------------------------------------- helpers

def plain(value: Any) -> Any:
    """A dataclass as JSON-ready data: enums as their value, datetimes as ISO 8601."""
    if hasattr(value, "__dataclass_fields__"):
        value = asdict(value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    return value
