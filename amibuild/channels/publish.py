"""SSM channels: publish AMI ids, promote between channels, roll back, read history.

Consumers (a nodegroup stack's ``NodeImageIdSSMParam``, Karpenter, Terraform, other accounts)
follow a parameter name; this module keeps those parameters right.

Layout
    One ``String`` parameter (data type ``aws:ec2:image``, standard tier) per variant x channel, in
    every region where the image lives. Its name comes from `DEFAULT_NAME_TEMPLATE`::

        {prefix}/{pipeline}/{k8s}/{variant}/{channel}/image_id
        /amibuild/eks-workers/1.30/ceph/recommended/image_id

    which has the shape of AWS's own ``/aws/service/eks/optimized-ami/1.30/amazon-linux-2/
    recommended/image_id``: a root, the Kubernetes version, the kind of image (for us the
    variant; for AWS the OS and architecture), the channel, ``image_id``. Templates may also use
    ``{os}`` and ``{arch}``; they must contain ``{variant}`` and ``{channel}`` (`check_template`).
    The default channel is ``recommended``, as AWS's.

    Each version's description says what wrote it and from which build::

        ceph recommended AMI, written by amibuild 0.1.0 (run 20240101T1200Z-1a2b, fingerprint 3c4d5e6f)

    `history` reads the run id and fingerprint back from there (SSM keeps descriptions per version;
    tags are per parameter, so the tags ``amibuild:fingerprint``, ``amibuild:run-id``,
    ``amibuild:variant``, ``amibuild:channel`` describe the current value only).

Safety rules, in the order they apply
    1. Check before writing (`plan_publish`, no side effects): in every region the image exists,
       is ``available`` and carries amibuild's tags (``amibuild:fingerprint``, and
       ``amibuild:variant`` naming this variant) unless ``allow_foreign``. Every target region of
       the pipeline must have an image, or nothing is written. A region whose parameter already
       holds the AMI (with the image data type) is ``unchanged``: no new version for nothing.
    2. No lost update. SSM has no compare-and-swap, so each write records the version V it read
       and checks that PutParameter returned V+1. Anything else means another writer moved the
       channel in between: the history between V and ours names their AMI, our version is taken
       back out (their value put back, only if nobody wrote after us), and `PublishConflict`
       names both AMIs (retry, or ``force=True`` to skip the check). The first region is written
       alone before the others, in parallel: of two writers that read the same state exactly one
       gets V+1 there, and the other stops before touching any other region.
    3. Read back after writing: AWS validates ``aws:ec2:image`` asynchronously, so the written
       version is read back (polled briefly) and compared; that is the proof.
    4. All regions or none: when a write fails in one region, every region already written for
       this variant is put back to its previous value (deleted again if it did not exist), only
       where our version is still the current one, and the error says what was put back.

Throttling and speed
    PutParameter allows a few calls per second per account and region. The channel calls go
    through one SSM client per region with botocore's adaptive retry mode (client-side rate
    limiting) and more attempts (`Aws.ssm_write_attempts`); writes are paced per region
    (`WRITE_INTERVAL`); reads and writes fan out across regions in threads, so ten regions take
    about as long as one plus one round trip (the first region's put, see rule 2).

Nothing here prints: functions return data (`PublishResult`, with ``to_dict()``) and raise amibuild
errors. The read side (history, the channel table, the sharing check) is `amibuild.channels.read`.
"""

from __future__ import annotations

import enum
import re
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterable, Mapping, Sequence

from amibuild import __version__, tags
from amibuild.aws import Aws, Image, Parameter, fan_out
from amibuild.errors import AmibuildError, PublishConflict, PublishFailed, PublishRefused, SpecError
from amibuild.spec.naming import (DEFAULT_CHANNEL, DEFAULT_NAME_TEMPLATE, TEMPLATE_FIELDS, PipelineLike,  # noqa: F401
                                  VariantLike, check_channel, check_template, name_pattern, parameter_name,
                                  template_of)

IMAGE_DATA_TYPE = "aws:ec2:image"

TAG_PREFIX = tags.PREFIX
FINGERPRINT_TAG = tags.FINGERPRINT
VARIANT_TAG = tags.VARIANT
RUN_ID_TAG = tags.RUN_ID
CHANNEL_TAG = tags.CHANNEL

WRITE_INTERVAL = 0.34  # seconds between two PutParameter calls in one region (about 3 per second)
READBACK_TIMEOUT = 10.0  # how long a written version may take to become readable

_AMI_ID = re.compile(r"^ami-[0-9a-f]{8,17}$")
_PROVENANCE = re.compile(r"\(run (?P<run>[^,()\s]+), fingerprint (?P<fp>[^,()\s]+)")
_PUT_BACK = "; put back by amibuild"
_UNKNOWN = "-"


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
            f"(run {provenance.run_id or _UNKNOWN}, fingerprint {provenance.fingerprint or _UNKNOWN}{extra})")


def provenance_of(text: str) -> Provenance:
    """The run id and fingerprint a parameter version's description names (empty when not amibuild's)."""
    match = _PROVENANCE.search(text or "")
    if not match:
        return Provenance()

    def known(value: str) -> str | None:
        return None if value == _UNKNOWN else value

    return Provenance(known(match.group("run")), known(match.group("fp")))


def parameter_tags(variant: str, channel: str, provenance: Provenance) -> dict[str, str]:
    return {
        FINGERPRINT_TAG: provenance.fingerprint or _UNKNOWN,
        RUN_ID_TAG: provenance.run_id or _UNKNOWN,
        VARIANT_TAG: variant,
        CHANNEL_TAG: channel,
    }


# ------------------------------------------------------------------------------- parsing flags


def parse_amis(values: str | Iterable[str]) -> dict[str, str]:
    """``us-west-2=ami-0abc,eu-west-1=ami-0def`` (or several such strings) → {region: ami}."""
    from amibuild.spec import known_regions

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

    @property
    def refusals(self) -> tuple[str, ...]:
        return tuple(r.reason for r in self.regions if r.action is PublishAction.REFUSED)

    @property
    def writes(self) -> tuple[RegionPlan, ...]:
        return tuple(r for r in self.regions if r.action is PublishAction.WRITE)

    def to_dict(self) -> dict[str, Any]:
        return plain(self)


def decide(
    *,
    operation: str,
    parameter: str,
    variant: str,
    channel: str,
    required_regions: Sequence[str],
    amis: Mapping[str, str],
    current: Mapping[str, Parameter | None],
    images: Mapping[str, Image | None],
    provenance: Mapping[str, Provenance],
    allow_foreign: bool = False,
    expected_fingerprint: str | None = None,
    note: str = "",
) -> PublishPlan:
    """Per region: write, unchanged, or refused with the reason. Pure: state in, plan out."""
    regions = list(dict.fromkeys([*required_regions, *sorted(amis)]))
    plans = []
    for region in regions:
        ami = amis.get(region, "")
        prov = provenance.get(region, Provenance())
        desc = description(variant, channel, prov, note)
        now = current.get(region)
        previous = {"previous_ami": now.value if now else None, "previous_version": now.version if now else 0}
        refusal = _refusal(region, ami, images.get(region), variant, allow_foreign, expected_fingerprint)
        if refusal:
            plans.append(RegionPlan(region, ami, PublishAction.REFUSED, refusal, **previous))
        elif now is not None and now.value == ami and now.data_type == IMAGE_DATA_TYPE:
            plans.append(RegionPlan(region, ami, PublishAction.UNCHANGED, f"{region}: already {ami} (version {now.version})",
                                    **previous))
        else:
            if now is None:
                why = f"{region}: new parameter → {ami}"
            elif now.value == ami:
                why = f"{region}: {ami}, data type {now.data_type} → {IMAGE_DATA_TYPE}"
            else:
                why = f"{region}: {now.value} (version {now.version}) → {ami}"
            plans.append(RegionPlan(region, ami, PublishAction.WRITE, why, description=desc,
                                    tags=parameter_tags(variant, channel, prov), **previous))
    fingerprints = {p.fingerprint for r, p in provenance.items() if r in amis and p.fingerprint}
    if len(fingerprints) > 1 and not allow_foreign:
        detail = ", ".join(f"{r}: {provenance[r].fingerprint}" for r in regions if provenance.get(r, Provenance()).fingerprint)
        plans = [p if p.action is PublishAction.REFUSED else
                 RegionPlan(p.region, p.ami, PublishAction.REFUSED,
                            f"{p.region}: the images come from different builds ({detail}); "
                            "pass --allow-foreign to publish them anyway",
                            p.previous_ami, p.previous_version)
                 for p in plans]
    return PublishPlan(operation, parameter, variant, channel, tuple(plans))


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
    fingerprint = image.tags.get(FINGERPRINT_TAG)
    if not fingerprint:
        return (f"{region}: {ami} has no {FINGERPRINT_TAG} tag, so amibuild did not build it; "
                "pass --allow-foreign to publish it anyway")
    tagged_variant = image.tags.get(VARIANT_TAG)
    if tagged_variant and tagged_variant != variant:
        return f"{region}: {ami} was built for variant {tagged_variant}, not {variant}"
    if expected_fingerprint and fingerprint != expected_fingerprint:
        return f"{region}: {ami} has fingerprint {fingerprint}, not {expected_fingerprint} (an image from another build)"
    return ""


def provenance_from_images(images: Mapping[str, Image | None], *, fingerprint: str | None = None,
                           run_id: str | None = None) -> dict[str, Provenance]:
    """What to record per region: the given fingerprint / run id, else the image's own tags."""
    result = {}
    for region, image in images.items():
        tags = image.tags if image is not None else {}
        result[region] = Provenance(run_id or tags.get(RUN_ID_TAG), fingerprint or tags.get(FINGERPRINT_TAG))
    return result


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

    @property
    def changed(self) -> bool:
        return any(r.action is PublishAction.WRITE for r in self.regions)

    def to_dict(self) -> dict[str, Any]:
        return plain(self)


# ------------------------------------------------------------------------------- publish


def plan_publish(
    aws: Aws,
    *,
    pipeline: PipelineLike,
    variant: VariantLike,
    channel: str = DEFAULT_CHANNEL,
    amis: Mapping[str, str],
    fingerprint: str | None = None,
    run_id: str | None = None,
    allow_foreign: bool = False,
    provenance: Mapping[str, Provenance] | None = None,
    operation: str = "publish",
    note: str = "",
    template: str | None = None,
) -> PublishPlan:
    """Read the channel and the images in every region (read-only, in parallel), then `decide`."""
    name = parameter_name(pipeline, variant, channel, template)
    regions = list(dict.fromkeys([*pipeline.target_regions, *amis]))

    def read(job: tuple[str, str]) -> Parameter | Image | None:
        region, what = job
        if what == "parameter":
            return aws.find_parameter(name, region)
        ami = amis.get(region, "")
        return aws.find_image(region, ami) if _AMI_ID.match(ami) else None

    state = fan_out([(r, what) for r in regions for what in ("parameter", "image")], read)
    images: dict[str, Image | None] = {r: state[(r, "image")] for r in regions}  # type: ignore[misc]
    current: dict[str, Parameter | None] = {r: state[(r, "parameter")] for r in regions}  # type: ignore[misc]
    if provenance is None:
        provenance = provenance_from_images(images, fingerprint=fingerprint, run_id=run_id)
    return decide(
        operation=operation, parameter=name, variant=variant.name, channel=channel,
        required_regions=pipeline.target_regions, amis=amis,
        current=current, images=images, provenance=provenance,
        allow_foreign=allow_foreign, expected_fingerprint=fingerprint, note=note,
    )


def publish_variant(
    aws: Aws,
    *,
    pipeline: PipelineLike,
    variant: VariantLike,
    amis: Mapping[str, str],
    channel: str = DEFAULT_CHANNEL,
    fingerprint: str | None = None,
    run_id: str | None = None,
    allow_foreign: bool = False,
    force: bool = False,
    template: str | None = None,
) -> PublishResult:
    """Point `channel` of `variant` at `amis` ({region: ami}) in every target region, or nowhere.

    `fingerprint` / `run_id` default to the images' ``amibuild:fingerprint`` / ``amibuild:run-id``
    tags; a given fingerprint must match the images' tag.
    """
    plan = plan_publish(aws, pipeline=pipeline, variant=variant, channel=channel, amis=amis,
                        fingerprint=fingerprint, run_id=run_id, allow_foreign=allow_foreign, template=template)
    return execute_publish(aws, plan, force=force)


def promote(
    aws: Aws,
    *,
    pipeline: PipelineLike,
    variant: VariantLike,
    source: str,
    target: str,
    force: bool = False,
    template: str | None = None,
) -> PublishResult:
    """Copy, region by region, the exact AMI of channel `source` into channel `target`."""
    check_channel(source)
    check_channel(target)
    if source == target:
        raise SpecError(f"promote: --from and --to are both {source!r}; name two different channels")
    source_name = parameter_name(pipeline, variant, source, template)
    regions = pipeline.target_regions
    latest = fan_out(regions, lambda r: (aws.parameter_history(source_name, r) or [None])[-1])
    missing = [r for r in regions if latest[r] is None]
    operation = f"promote {source} -> {target}"
    if missing:
        raise PublishRefused(
            f"{operation} for {variant.name}: channel {source} ({source_name}) does not exist in "
            f"{', '.join(missing)}; publish it there first"
        )
    amis = {r: p.value for r, p in latest.items() if p is not None}
    provenance = {r: provenance_of(p.description) for r, p in latest.items() if p is not None}
    # The source channel's images were checked when they were published; what can have changed
    # since is whether they still exist, which plan_publish checks.
    plan = plan_publish(aws, pipeline=pipeline, variant=variant, channel=target, amis=amis, allow_foreign=True,
                        provenance=provenance, operation=operation, note=f"promoted from {source}",
                        template=template)
    return execute_publish(aws, plan, force=force)


def rollback(
    aws: Aws,
    *,
    pipeline: PipelineLike,
    variant: VariantLike,
    channel: str,
    to_version: int | None = None,
    force: bool = False,
    template: str | None = None,
) -> PublishResult:
    """Put `channel` back to an earlier value from the parameter's own history.

    Versions are counted in the pipeline's first target region (as `history` shows them there);
    default: the newest version holding another AMI than now. Every other region gets its version
    from the same build (same run id and fingerprint), or the same version number when the chosen
    version was not written by amibuild.
    """
    name = parameter_name(pipeline, variant, channel, template)
    regions = pipeline.target_regions
    histories = fan_out(regions, lambda r: aws.parameter_history(name, r))
    empty = [r for r in regions if not histories[r]]
    if empty:
        raise PublishRefused(f"roll back {name}: it does not exist in {', '.join(empty)}; nothing to roll back")
    lead = regions[0]
    chosen = {lead: _rollback_target(name, lead, histories[lead], to_version)}
    target = chosen[lead]
    target_prov = provenance_of(target.description)
    for region in regions[1:]:
        if target_prov.known:
            same = [p for p in histories[region] if provenance_of(p.description) == target_prov]
        else:
            same = [p for p in histories[region] if p.version == target.version]
        if not same:
            raise PublishRefused(
                f"roll back {name} to version {target.version}: {region} has no version from the same build "
                f"(run {target_prov.run_id or _UNKNOWN}, fingerprint {target_prov.fingerprint or _UNKNOWN}); "
                "publish the wanted images with `invoke publish --ami ...` instead"
            )
        chosen[region] = same[-1]
    operation = f"roll back to version {target.version}"
    plan = plan_publish(
        aws, pipeline=pipeline, variant=variant, channel=channel,
        amis={r: p.value for r, p in chosen.items()}, allow_foreign=True,
        provenance={r: provenance_of(p.description) for r, p in chosen.items()},
        operation=operation, note=f"rolled back to version {target.version}", template=template,
    )
    return execute_publish(aws, plan, force=force)


def _rollback_target(name: str, region: str, history: list[Parameter], to_version: int | None) -> Parameter:
    if to_version is not None:
        for entry in history:
            if entry.version == to_version:
                return entry
        raise SpecError(
            f"--to-version {to_version}: {name} in {region} has versions "
            f"{history[0].version}..{history[-1].version}; see `invoke history`"
        )
    current = history[-1]
    for entry in reversed(history):
        if entry.value != current.value:
            return entry
    raise PublishRefused(f"roll back {name}: every version in {region} holds {current.value}; nothing earlier to go back to")


# ------------------------------------------------------------------------------- execute


class _Pacer:
    """Spaces PutParameter calls `interval` seconds apart per region (a quota per account and region)."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._next: dict[str, float] = {}
        self._lock = threading.Lock()

    def wait(self, region: str) -> None:
        with self._lock:
            now = time.monotonic()
            at = max(now, self._next.get(region, 0.0))
            self._next[region] = at + self.interval
        if at > now:
            time.sleep(at - now)


_PACER = _Pacer(WRITE_INTERVAL)


class _RegionFailed(Exception):
    """A write in one region failed; `version` is ours when our PutParameter had landed."""

    def __init__(self, region: str, error: AmibuildError, version: int | None) -> None:
        super().__init__(str(error))
        self.region, self.error, self.version = region, error, version


def execute_publish(aws: Aws, plan: PublishPlan, *, force: bool = False) -> PublishResult:
    """Carry out a plan: the first region's write alone, then everything else in parallel; all or none."""
    if plan.refusals:
        raise PublishRefused(f"{plan.operation} {plan.variant} to {plan.channel} ({plan.parameter}) refused, "
                             f"nothing written: " + "; ".join(plan.refusals))
    writes = plan.writes
    versions: dict[str, int] = {}
    failures: list[_RegionFailed] = []
    if writes:
        first = writes[0]
        try:
            # Of two writers racing from the same read, exactly one gets the next version here, and
            # the other stops before it touches any other region.
            first_version = _put_checked(aws, plan, first, force)
        except _RegionFailed as failed:
            failures.append(failed)
        else:
            def rest(region: str) -> int:
                if region == first.region:
                    _finish(aws, plan, first, first_version)
                    return first_version
                return _write(aws, plan, _region_plan(plan, region), force)

            outcomes = fan_out([w.region for w in writes], lambda region: _guarded(rest, region))
            for region, outcome in outcomes.items():
                if isinstance(outcome, _RegionFailed):
                    failures.append(outcome)
                else:
                    versions[region] = outcome
    if failures:
        raise _unwind(aws, plan, versions, failures)
    return PublishResult(
        plan.operation, plan.parameter, plan.variant, plan.channel,
        tuple(
            RegionResult(r.region, r.ami, r.action, r.previous_ami, r.previous_version,
                         versions.get(r.region, r.previous_version))
            for r in plan.regions
        ),
    )


def _guarded(work: Callable[[str], int], region: str) -> int | _RegionFailed:
    try:
        return work(region)
    except _RegionFailed as failed:
        return failed


def _region_plan(plan: PublishPlan, region: str) -> RegionPlan:
    return next(r for r in plan.regions if r.region == region)


def _write(aws: Aws, plan: PublishPlan, r: RegionPlan, force: bool) -> int:
    version = _put_checked(aws, plan, r, force)
    _finish(aws, plan, r, version)
    return version


def _put_checked(aws: Aws, plan: PublishPlan, r: RegionPlan, force: bool) -> int:
    """Put, and check nobody wrote between our read and our write. Raises `_RegionFailed`."""
    try:
        _PACER.wait(r.region)
        version = aws.put_image_parameter(plan.parameter, r.ami, r.region, description=r.description)
    except AmibuildError as exc:
        raise _RegionFailed(r.region, exc, None) from exc
    if version != r.previous_version + 1 and not force:
        try:
            conflict = _conflict(aws, plan, r, version)
        except AmibuildError as exc:
            raise _RegionFailed(r.region, exc, version) from exc
        if conflict is not None:
            raise _RegionFailed(r.region, conflict, None)  # _conflict took our version back out
    return version


def _finish(aws: Aws, plan: PublishPlan, r: RegionPlan, version: int) -> None:
    """Read our version back (the proof), then tag the parameter. Raises `_RegionFailed`."""
    try:
        _read_back(aws, plan.parameter, r.region, version, r.ami)
        aws.tag_parameter(plan.parameter, r.region, r.tags)
    except AmibuildError as exc:
        raise _RegionFailed(r.region, exc, version) from exc


def _conflict(aws: Aws, plan: PublishPlan, r: RegionPlan, ours: int) -> PublishConflict | None:
    """Someone wrote between our read (version V) and our write: take ours back out, name both AMIs."""
    name = plan.parameter
    others = [p for p in aws.parameter_history(name, r.region) if r.previous_version < p.version < ours]
    if others and all(p.value == r.ami and p.description == r.description for p in others):
        return None  # an earlier attempt of this very request landed (a retried PutParameter): not a conflict
    theirs = others[-1] if others else None
    if theirs is None:
        what = f"the parameter was deleted and re-created (we read version {r.previous_version}, wrote version {ours})"
        undone = _put_back(aws, plan, r.region, ours, None, "a conflict")
    else:
        what = (f"another writer set it to {theirs.value} (version {theirs.version}"
                f"{', by ' + theirs.user if theirs.user and theirs.user != 'N/A' else ''}) "
                f"after amibuild read version {r.previous_version} ({r.previous_ami or 'no value'})")
        undone = _put_back(aws, plan, r.region, ours, theirs, "a conflict")
    return PublishConflict(
        f"conflict on {name} in {r.region}: {what}; our {r.ami} (version {ours}) was taken back out: {undone}. "
        f"Nothing else was written. Retry, or pass --force to write {r.ami} over {theirs.value if theirs else 'it'}"
    )


def _read_back(aws: Aws, name: str, region: str, version: int, ami: str) -> None:
    deadline = time.monotonic() + READBACK_TIMEOUT
    while True:
        got = aws.find_parameter(name, region, version=version)
        if got is not None:
            break
        if time.monotonic() > deadline:
            raise PublishFailed(
                f"{name} in {region}: version {version} cannot be read back after {READBACK_TIMEOUT:.0f} s; "
                f"AWS may have refused {ami} as {IMAGE_DATA_TYPE}"
            )
        time.sleep(0.5)
    if got.value != ami or got.data_type != IMAGE_DATA_TYPE:
        raise PublishFailed(
            f"{name} in {region}: read back version {version} holds {got.value} ({got.data_type}), "
            f"not {ami} ({IMAGE_DATA_TYPE})"
        )


def _unwind(aws: Aws, plan: PublishPlan, versions: Mapping[str, int], failures: list[_RegionFailed]) -> AmibuildError:
    """Put back every region this run wrote; the error to raise says what failed and what was put back."""
    to_undo = dict(versions)
    to_undo.update({f.region: f.version for f in failures if f.version is not None})

    def undo(region: str) -> str:
        r = _region_plan(plan, region)
        previous = None
        if r.previous_version:
            previous = next((p for p in aws.parameter_history(plan.parameter, region)
                             if p.version == r.previous_version), None)
            if previous is None:  # history lost it (deleted meanwhile): put the value back all the same
                previous = Parameter(plan.parameter, region, r.previous_ami or "", r.previous_version, IMAGE_DATA_TYPE)
        try:
            return _put_back(aws, plan, region, to_undo[region], previous, "a failed write elsewhere")
        except AmibuildError as exc:
            return f"{region}: could NOT be put back ({exc}); it holds {r.ami}"

    notes = fan_out(sorted(to_undo), undo)
    failed = "; ".join(f"{f.region}: {f.error}" for f in failures)
    put_back = "; ".join(notes[region] for region in sorted(notes))
    summary = (f"{plan.operation} {plan.variant} to {plan.channel} ({plan.parameter}) failed, "
               f"nothing is left half moved: {failed}")
    if put_back:
        summary += f". Put back: {put_back}"
    conflict = any(isinstance(f.error, PublishConflict) for f in failures)
    return PublishConflict(summary) if conflict else PublishFailed(summary)


def _put_back(aws: Aws, plan: PublishPlan, region: str, ours: int, previous: Parameter | None, why: str) -> str:
    """Replace our version `ours` by `previous` (None: delete), only while ours is still the current one."""
    name = plan.parameter
    current = aws.find_parameter(name, region)
    if current is None or current.version != ours:
        moved = f"version {current.version}: {current.value}" if current else "deleted"
        return f"{region}: left as is, another writer has moved it on since ({moved})"
    if previous is None:
        aws.delete_parameter(name, region)
        return f"{region}: deleted again (it did not exist before)"
    if current.value == previous.value:
        return f"{region}: holds {previous.value} already"
    base = (previous.description or "").split(_PUT_BACK)[0]
    if not base:
        base = description(plan.variant, plan.channel, Provenance())
    text = f"{base}{_PUT_BACK} after {why}"[:1024]
    _PACER.wait(region)
    version = aws.put_image_parameter(name, previous.value, region, description=text)
    aws.tag_parameter(name, region, parameter_tags(plan.variant, plan.channel, provenance_of(base)))
    if version != ours + 1:
        return (f"{region}: put back {previous.value} as version {version}, but another writer wrote in between; "
                "check `invoke history`")
    return f"{region}: back to {previous.value} (version {version})"


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
