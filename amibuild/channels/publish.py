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
    0. One writer at a time. A channel write is one transaction over all its regions, under a
       lease kept in AWS itself (`amibuild.channels.lease`): an SSM parameter created with
       ``Overwrite=False`` in the pipeline's home region, so it holds across machines and CI
       runners. Reading, deciding, writing and checking all happen while it is held; a second
       writer waits for it, then gives up naming the holder (`ChannelBusy`), with nothing written.
    1. Check before writing (`plan_publish`, no side effects): in every region the image exists,
       is ``available`` and carries amibuild's tags (``amibuild:fingerprint``, and
       ``amibuild:variant`` naming this variant) unless ``allow_foreign``. Every target region of
       the pipeline must have an image, or nothing is written. A region whose parameter already
       holds the AMI (with the image data type) is ``unchanged``: no new version for nothing.
    2. No lost update. SSM has no compare-and-swap, so each write records the version V it read
       and checks that PutParameter returned V+1. Anything else means another writer moved the
       channel in between: the history between V and ours names their AMI, our version is taken
       back out (their value put back, only if nobody wrote after us), and `PublishConflict`
       names both AMIs (retry, or ``force=True`` to skip the check). This still catches writers
       that take no lease (the console, another tool).
    3. Read back after writing: AWS validates ``aws:ec2:image`` asynchronously, so the written
       version is read back (polled briefly) and compared; then every region, the unchanged ones
       included, is read once more: any region not holding the intended AMI fails the transaction,
       which puts the written regions back (rule 4).
    4. All regions or none: when a write fails in one region, every region already written for
       this variant is put back to its previous value (deleted again if it did not exist), only
       where our version is still the current one, and the error says what was put back.

Throttling and speed
    PutParameter allows a few calls per second per account and region. The channel calls go
    through one SSM client per region with botocore's adaptive retry mode (client-side rate
    limiting) and more attempts (`Aws.ssm_write_attempts`); writes are paced per region
    (`WRITE_INTERVAL`); reads and writes fan out across regions in threads, so ten regions take
    about as long as one.

Nothing here prints: functions return data (`PublishResult`, with ``to_dict()``) and raise amibuild
errors. The read side (history, the channel table, the sharing check) is `amibuild.channels.read`.
"""

from __future__ import annotations

import enum
import re
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import Any, Callable, Iterable, Mapping, Sequence

from amibuild import __version__, tags
from amibuild.aws import Aws, Image, Parameter, fan_out
from amibuild.channels.lease import Guard, Lease, acquire, lease_name
from amibuild.errors import AmibuildError, Interrupted, PublishConflict, PublishFailed, PublishRefused, SpecError
from amibuild.spec.naming import (DEFAULT_CHANNEL, DEFAULT_NAME_TEMPLATE, TEMPLATE_FIELDS, PipelineLike,  # noqa: F401
                                  VariantLike, check_channel, check_template, name_pattern, parameter_name,
                                  template_of)

IMAGE_DATA_TYPE = "aws:ec2:image"

TAG_PREFIX = tags.PREFIX
FINGERPRINT_TAG = tags.FINGERPRINT
VARIANT_TAG = tags.VARIANT
RUN_ID_TAG = tags.RUN_ID
CHANNEL_TAG = tags.CHANNEL
PIPELINE_TAG = tags.PIPELINE

WRITE_INTERVAL = 0.34  # seconds between two PutParameter calls in one region (about 3 per second)
READBACK_TIMEOUT = 10.0  # how long a written version may take to become readable

_AMI_ID = re.compile(r"^ami-[0-9a-f]{8,17}$")
_PROVENANCE = re.compile(r"\(run (?P<run>[^,()\s]+), fingerprint (?P<fp>[^,()\s]+)")
_PUT_BACK = "; put back by amibuild"
_UNDONE = re.compile(r": (back to |deleted again|holds .* already)")  # what `_put_back` says when it undid ours
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


def parameter_tags(variant: str, channel: str, provenance: Provenance, pipeline: str = "") -> dict[str, str]:
    """The tags a channel's parameter carries. Pipeline, variant and channel let prune find every
    channel amibuild wrote by its tags, whatever name template named it."""
    found = {
        FINGERPRINT_TAG: provenance.fingerprint or _UNKNOWN,
        RUN_ID_TAG: provenance.run_id or _UNKNOWN,
        VARIANT_TAG: variant,
        CHANNEL_TAG: channel,
    }
    if pipeline:
        found[PIPELINE_TAG] = pipeline
    return found


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


class Action(enum.StrEnum):
    WRITE = "write"
    UNCHANGED = "unchanged"
    REFUSED = "refused"


@dataclass(frozen=True)
class RegionPlan:
    """What happens to the channel's parameter in one region, and why."""

    region: str
    ami: str
    action: Action
    reason: str
    previous_ami: str | None = None
    previous_version: int = 0  # 0: the parameter does not exist yet
    description: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PublishPlan:
    """Everything `execute` needs, decided up front without side effects."""

    operation: str  # "publish", "promote recommended -> stable", "roll back to version 3"
    parameter: str
    variant: str
    channel: str
    regions: tuple[RegionPlan, ...]
    pipeline: str = ""

    @property
    def refusals(self) -> tuple[str, ...]:
        return tuple(r.reason for r in self.regions if r.action is Action.REFUSED)

    @property
    def writes(self) -> tuple[RegionPlan, ...]:
        return tuple(r for r in self.regions if r.action is Action.WRITE)

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
    pipeline: str = "",
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
            plans.append(RegionPlan(region, ami, Action.REFUSED, refusal, **previous))
        elif now is not None and now.value == ami and now.data_type == IMAGE_DATA_TYPE:
            plans.append(RegionPlan(region, ami, Action.UNCHANGED, f"{region}: already {ami} (version {now.version})",
                                    **previous))
        else:
            if now is None:
                why = f"{region}: new parameter → {ami}"
            elif now.value == ami:
                why = f"{region}: {ami}, data type {now.data_type} → {IMAGE_DATA_TYPE}"
            else:
                why = f"{region}: {now.value} (version {now.version}) → {ami}"
            plans.append(RegionPlan(region, ami, Action.WRITE, why, description=desc,
                                    tags=parameter_tags(variant, channel, prov, pipeline), **previous))
    fingerprints = {p.fingerprint for r, p in provenance.items() if r in amis and p.fingerprint}
    if len(fingerprints) > 1 and not allow_foreign:
        detail = ", ".join(f"{r}: {provenance[r].fingerprint}" for r in regions if provenance.get(r, Provenance()).fingerprint)
        plans = [p if p.action is Action.REFUSED else
                 RegionPlan(p.region, p.ami, Action.REFUSED,
                            f"{p.region}: the images come from different builds ({detail}); "
                            "pass --allow-foreign to publish them anyway",
                            p.previous_ami, p.previous_version)
                 for p in plans]
    return PublishPlan(operation, parameter, variant, channel, tuple(plans), pipeline)


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
    action: Action  # WRITE (written) or UNCHANGED
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

    @property
    def changed(self) -> bool:
        return any(r.action is Action.WRITE for r in self.regions)

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
        allow_foreign=allow_foreign, expected_fingerprint=fingerprint, note=note, pipeline=pipeline.name,
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
    guard: Guard | None = None,
) -> PublishResult:
    """Point `channel` of `variant` at `amis` ({region: ami}) in every target region, or nowhere.

    `fingerprint` / `run_id` default to the images' ``amibuild:fingerprint`` / ``amibuild:run-id``
    tags; a given fingerprint must match the images' tag. Runs under the channel's lease.
    """
    def work(cancelled: Callable[[], bool]) -> PublishResult:
        plan = plan_publish(aws, pipeline=pipeline, variant=variant, channel=channel, amis=amis,
                            fingerprint=fingerprint, run_id=run_id, allow_foreign=allow_foreign, template=template)
        return execute(aws, plan, force=force, cancelled=cancelled)

    return transact(aws, pipeline=pipeline, variant=variant, channels=[channel], operation=f"publish to {channel}",
                    guard=guard or Guard(run_id=run_id or ""), work=work)


def promote(
    aws: Aws,
    *,
    pipeline: PipelineLike,
    variant: VariantLike,
    source: str,
    target: str,
    force: bool = False,
    template: str | None = None,
    guard: Guard | None = None,
) -> PublishResult:
    """Copy, region by region, the exact AMI of channel `source` into channel `target`.

    Both channels' leases are held: the source is not read while another writer is half way
    through moving it.
    """
    check_channel(source)
    check_channel(target)
    if source == target:
        raise SpecError(f"promote: --from and --to are both {source!r}; name two different channels")
    source_name = parameter_name(pipeline, variant, source, template)
    regions = pipeline.target_regions
    operation = f"promote {source} -> {target}"

    def work(cancelled: Callable[[], bool]) -> PublishResult:
        latest = fan_out(regions, lambda r: (aws.parameter_history(source_name, r) or [None])[-1])
        missing = [r for r in regions if latest[r] is None]
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
        return execute(aws, plan, force=force, cancelled=cancelled)

    return transact(aws, pipeline=pipeline, variant=variant, channels=[source, target], operation=operation,
                    guard=guard or Guard(), work=work)


def rollback(
    aws: Aws,
    *,
    pipeline: PipelineLike,
    variant: VariantLike,
    channel: str,
    to_version: int | None = None,
    force: bool = False,
    template: str | None = None,
    guard: Guard | None = None,
) -> PublishResult:
    """Put `channel` back to an earlier value from the parameter's own history.

    Versions are counted in the pipeline's first target region (as `history` shows them there);
    default: the newest version holding another AMI than now. Every other region gets its version
    from the same build (same run id and fingerprint), or the same version number when the chosen
    version was not written by amibuild. The history is read under the channel's lease.
    """
    name = parameter_name(pipeline, variant, channel, template)
    regions = pipeline.target_regions

    def work(cancelled: Callable[[], bool]) -> PublishResult:
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
        return execute(aws, plan, force=force, cancelled=cancelled)

    return transact(aws, pipeline=pipeline, variant=variant, channels=[channel], operation=f"roll back {channel}",
                    guard=guard or Guard(), work=work)


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


def home_region(pipeline: PipelineLike) -> str:
    """Where a pipeline's leases live: its build region (the first region it builds in)."""
    return getattr(pipeline, "build_region", None) or pipeline.target_regions[0]


def transact(aws: Aws, *, pipeline: PipelineLike, variant: VariantLike, channels: Sequence[str], operation: str,
             guard: Guard, work: Callable[[Callable[[], bool]], PublishResult]) -> PublishResult:
    """Run `work` (read, decide, write, check) while holding the lease of every channel it touches.

    Leases are taken in name order and given back in ``finally``, whatever happened.
    """
    held: list[Lease] = []
    notes: list[str] = []
    try:
        for channel in sorted(set(channels)):
            lease = acquire(aws, lease_name(pipeline, variant.name, channel), home_region(pipeline),
                            operation=f"{operation} ({variant.name})", guard=guard)
            held.append(lease)
            if lease.note:
                notes.append(lease.note)
        result = work(guard.cancelled)
        if any(lease.expired() for lease in held):
            notes.append(f"the write outlasted its lease ({guard.ttl:.0f} s): another writer may have written "
                         "at the same time; check every region with `invoke history`")
    finally:
        for lease in reversed(held):
            try:
                note = lease.release()
            except AmibuildError as exc:
                note = f"the lease {lease.name} could not be released ({exc}); it expires by itself"
            if note:
                notes.append(note)
    return replace(result, notes=(*result.notes, *notes)) if notes else result


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

    def __init__(self, region: str, error: AmibuildError, version: int | None, outside: bool = False) -> None:
        super().__init__(str(error))
        self.region, self.error, self.version = region, error, version
        self.outside = outside  # a region amibuild did not write holds another image: someone else moved it


def execute(aws: Aws, plan: PublishPlan, *, force: bool = False,
            cancelled: Callable[[], bool] = lambda: False) -> PublishResult:
    """Carry out a plan: every region's write in parallel, then every region checked; all or none.

    Call it under the channel's lease (`transact`). ``cancelled`` is asked once, before the first
    write: after that the transaction runs to its end, written everywhere or put back.
    """
    if plan.refusals:
        raise PublishRefused(f"{plan.operation} {plan.variant} to {plan.channel} ({plan.parameter}) refused, "
                             f"nothing written: " + "; ".join(plan.refusals))
    if cancelled():
        raise Interrupted(f"{plan.operation} {plan.variant} to {plan.channel} ({plan.parameter}): interrupted "
                          "before the first write; nothing was written")
    versions: dict[str, int] = {}
    failures: list[_RegionFailed] = []
    outcomes = fan_out([w.region for w in plan.writes],
                       lambda region: _guarded(lambda r: _write(aws, plan, _region_plan(plan, r), force), region))
    for region, outcome in outcomes.items():
        if isinstance(outcome, _RegionFailed):
            failures.append(outcome)
        else:
            versions[region] = outcome
    if not failures:
        failures = _check_all(aws, plan, versions)
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


def _check_all(aws: Aws, plan: PublishPlan, versions: Mapping[str, int]) -> list[_RegionFailed]:
    """Read every region of the channel once more, the unchanged ones included: each must hold the
    intended AMI (and a written one, our version). A region that does not fails the transaction."""
    def look(region: str) -> Parameter | None | AmibuildError:
        try:
            return aws.find_parameter(plan.parameter, region)
        except AmibuildError as exc:
            return exc

    seen = fan_out([r.region for r in plan.regions], look)
    failures = []
    for r in plan.regions:
        got = seen[r.region]
        ours = versions.get(r.region)
        if isinstance(got, AmibuildError):
            failures.append(_RegionFailed(r.region, got, ours))
            continue
        if got is not None and got.value == r.ami and got.data_type == IMAGE_DATA_TYPE and \
                (ours is None or got.version == ours):
            continue
        holds = f"{got.value} (version {got.version})" if got is not None else "nothing (deleted)"
        failures.append(_RegionFailed(r.region, PublishConflict(
            f"read back after the write, {r.region} holds {holds}, not {r.ami}: another writer moved it"), ours,
            outside=ours is None))
    return failures


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
        f"Retry, or pass --force to write {r.ami} over {theirs.value if theirs else 'it'}"
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
        try:
            if r.previous_version:
                previous = next((p for p in aws.parameter_history(plan.parameter, region)
                                 if p.version == r.previous_version), None)
                if previous is None:  # history lost it (deleted meanwhile): put the value back all the same
                    previous = Parameter(plan.parameter, region, r.previous_ami or "", r.previous_version,
                                         IMAGE_DATA_TYPE)
            return _put_back(aws, plan, region, to_undo[region], previous, "a failed write elsewhere")
        except AmibuildError as exc:
            return f"{region}: could NOT be put back ({exc}); it holds {r.ami}"

    notes = fan_out(sorted(to_undo), undo)
    failed = "; ".join(f"{f.region}: {f.error}" for f in failures)
    put_back = "; ".join(notes[region] for region in sorted(notes))
    # the claim is made only when it is true: every write of ours undone, and no region moved by
    # someone else (a writer that takes no lease) under our feet
    whole = all(_UNDONE.search(note) for note in notes.values()) and not any(f.outside for f in failures)
    verdict = "nothing is left half moved" if whole else "CHECK the channel with `invoke history`, its regions may differ"
    summary = f"{plan.operation} {plan.variant} to {plan.channel} ({plan.parameter}) failed, {verdict}: {failed}"
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
    aws.tag_parameter(name, region, parameter_tags(plan.variant, plan.channel, provenance_of(base), plan.pipeline))
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
