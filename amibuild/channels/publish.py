"""SSM channels: publish AMI ids, promote between channels, roll back, read history.

Consumers (a nodegroup stack's ``NodeImageIdSSMParam``, Karpenter, Terraform, other accounts)
follow a parameter name; this module keeps those parameters right.

Layout
    One ``String`` parameter (data type ``aws:ec2:image``, standard tier) per variant x channel, in
    every region where the image lives. Its name comes from `DEFAULT_NAME_TEMPLATE`::

        {prefix}/{pipeline}/{k8s}/{variant}/{channel}/image_id
        /amibuild/eks-workers/1.30/ceph/recommended/image_id

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import datetime, timezone
from typing import Callable, Mapping, Sequence

from amibuild import tags
from amibuild.aws import Aws, Image, Parameter, fan_out
from amibuild.channels import gates, safeguard
from amibuild.channels.home import lease_home
# the plan and write names are part of this module's interface (callers import them from here)
from amibuild.channels.plan import (IMAGE_DATA_TYPE, MAX_VERSIONS, UNKNOWN_MARK, PublishAction, Provenance,  # noqa: F401
                                    PublishPlan, PublishResult, decide, description, parse_amis, plain,
                                    provenance_from_images, provenance_of, recorded_regions)
from amibuild.channels.write import PUT_BACK, WRITE_INTERVAL, execute_publish, transact  # noqa: F401
from amibuild.errors import GateRefused, PublishRefused, SpecError
from amibuild.lease import Guard
from amibuild.pipeline.protection import ProtectionSettings
from amibuild.pipeline.value_checks import AMI_ID
from amibuild.pipeline.naming import (DEFAULT_CHANNEL, DEFAULT_NAME_TEMPLATE, PipelineLike, VariantLike,  # noqa: F401
                                      check_channel, name_pattern, parameter_name)


# ------------------------------------------------------------------------------- gates


def gate_checker(pipeline: PipelineLike, channel: str, *, came_from: str | None = None,
                 source_history: Mapping[str, Sequence[Parameter]] | None = None, now: datetime | None = None,
                 override: str = "", proofs: Callable[[Mapping[str, Image | None]], Mapping[str, gates.Evidence | None]]
                 | None = None) -> Callable[[Mapping[str, Image | None]], str] | None:
    """The gate check `plan_publish` runs for a write into ``channel`` (None: the channel has no gate).

    ``now``: the time AWS answered the source history read with (`gates.aws_time`), or a dry run's what-if time;
    ``proofs``: reads what the signed statements prove about the images (`evidence.gather`), for a
    gate that requires ``tested``."""
    gate = getattr(pipeline, "gates", {}).get(channel)
    if gate is None:
        return None

    def check(images: Mapping[str, Image | None]) -> str:
        found = proofs(images) if proofs is not None and {"tested", "scanned"} & set(gate.requires) else None
        decision = gates.decide(gate, images=images, came_from=came_from, source_history=source_history,
                                now=now, override=override, evidence=found)
        if not decision.passes:
            raise GateRefused(decision.refusal(), gate=decision.gate, missing=decision.missing,
                              amis={r: i.image_id for r, i in images.items() if i is not None})
        return decision.note()

    return check


def _proofs(aws: Aws, pipeline: PipelineLike, variant: VariantLike):
    def read(images: Mapping[str, Image | None]) -> Mapping[str, gates.Evidence | None]:
        # deferred: in-toto's protobuf and cryptography only when a gate reads signed statements
        from amibuild.channels import evidence

        return evidence.gather(evidence.Reader(aws, pipeline), variant.name, images)

    return read


def check_what_if(now: datetime | None, dry_run: bool) -> None:
    """A what-if time judges a dry run's plan only: a write's soak is measured on AWS's clock."""
    if now is not None and not dry_run:
        raise SpecError("a what-if time is for dry runs only: a write judges the soak on AWS's clock")


# ------------------------------------------------------------------------------- publish


def plan_publish(aws: Aws, *, pipeline: PipelineLike, variant: VariantLike, channel: str = DEFAULT_CHANNEL,
                 amis: Mapping[str, str], fingerprint: str | None = None, run_id: str | None = None,
                 allow_foreign: bool = False, provenance: Mapping[str, Provenance] | None = None,
                 operation: str = "publish", note: str = "", template: str | None = None,
                 gate_check: Callable[[Mapping[str, Image | None]], str] | None = None) -> PublishPlan:
    """Read the channel and the images in every region (read-only, in parallel), then `decide`.

    ``gate_check`` (see `gate_checker`) gets the images before anything is decided: it raises
    `GateRefused`, or returns a note for the history (an overridden gate's reason)."""
    name = parameter_name(pipeline, variant, channel, template)
    regions = list(dict.fromkeys([*pipeline.target_regions, *amis]))

    def read(job: tuple[str, str]) -> Parameter | Image | None:
        region, what = job
        if what == "parameter":
            return aws.find_parameter(name, region)
        ami = amis.get(region, "")
        return aws.find_image(region, ami) if AMI_ID.match(ami) else None

    state = fan_out([(r, what) for r in regions for what in ("parameter", "image")], read)
    images: dict[str, Image | None] = {r: state[(r, "image")] for r in regions}  # type: ignore[misc]
    current: dict[str, Parameter | None] = {r: state[(r, "parameter")] for r in regions}  # type: ignore[misc]
    # where else the channel lives, as its parameters record it: a write of fewer regions is refused
    tagged = fan_out([r for r in regions if current[r] is not None], lambda r: aws.parameter_tags(name, r))
    home = lease_home(tagged, getattr(pipeline, "channel_regions", ()) or pipeline.target_regions)
    if provenance is None:
        provenance = provenance_from_images(images, fingerprint=fingerprint, run_id=run_id)
    oldest = {region: kept for (_, region), kept in oldest_kept(aws, {(name, r): current[r] for r in regions}).items()}
    if gate_check is not None:
        note = ", ".join(n for n in (note, gate_check(images)) if n)
    plan = decide(
        operation=operation, parameter=name, variant=variant.name, channel=channel,
        required_regions=pipeline.target_regions, amis=amis,
        current=current, images=images, provenance=provenance,
        allow_foreign=allow_foreign, expected_fingerprint=fingerprint, note=note, pipeline=pipeline.name,
        # a brand-new channel (nothing recorded yet) lives in every region of the pipeline file
        channel_regions=recorded_regions(tagged) | set(getattr(pipeline, "channel_regions", ())), home=home,
        oldest=oldest,
    )
    return plan if plan.refusals else with_guards(aws, plan, pipeline=pipeline, variant=variant, regions=regions,
                                                  images=images, template=template)


def oldest_kept(aws: Aws, current: Mapping[tuple[str, str], Parameter | None]) -> dict[tuple[str, str], Parameter]:
    """(parameter, region) -> its oldest version, for each parameter in `current` that keeps SSM's
    `MAX_VERSIONS` already: the one a put would delete, which SSM refuses to when it has a label."""
    full = [job for job, now in current.items() if now is not None and now.version >= MAX_VERSIONS]
    return {job: history[0] for job, history in fan_out(full, lambda job: aws.parameter_history(*job)).items()
            if history}


def with_guards(aws: Aws, plan: PublishPlan, *, pipeline: PipelineLike, variant: VariantLike, regions: Sequence[str],
                images: Mapping[str, Image | None], template: str | None = None) -> PublishPlan:
    """The plan with its safeguard steps: protection (and the deprecation time) of every image the
    variant's channels hold once this write is done (`amibuild.channels.safeguard`)."""
    amis = {r.region: r.ami for r in plan.regions}
    found, holders = safeguard.held(aws, pipeline, variant, channel=plan.channel, amis=amis, regions=regions,
                                    template=template, known=images)
    steps = safeguard.decide(found, holders, protection=getattr(pipeline, "protection", ProtectionSettings()),
                             deprecate_after=getattr(variant, "deprecate_after", None), now=datetime.now(timezone.utc))
    return replace(plan, guards=steps)


def publish_variant(aws: Aws, *, pipeline: PipelineLike, variant: VariantLike, amis: Mapping[str, str],
                    channel: str = DEFAULT_CHANNEL, fingerprint: str | None = None, run_id: str | None = None,
                    allow_foreign: bool = False, force: bool = False, template: str | None = None,
                    guard: Guard | None = None, dry_run: bool = False, override_gate: str = "",
                    now: datetime | None = None) -> PublishResult | PublishPlan:
    """Point `channel` of `variant` at `amis` ({region: ami}) in every target region, or nowhere.

    `fingerprint` / `run_id` default to the images' ``amibuild:fingerprint`` / ``amibuild:run-id``
    tags; a given fingerprint must match the images' tag. Runs under the channel's lease. A gated
    channel (`gates`) refuses images that do not meet it unless `override_gate` gives the reason.
    ``dry_run``: the plan the write would carry out, read without the lease; nothing written;
    ``now``: a what-if time for a dry run's gate (a write with one is refused).
    """
    check_what_if(now, dry_run)
    gate = getattr(pipeline, "gates", {}).get(channel)

    def make_plan() -> PublishPlan:
        when = now
        if when is None and gate is not None and "scanned" in gate.requires and gate.scan.ignore:
            when = aws_clock(aws, pipeline, variant, channel, template)
        return plan_publish(aws, pipeline=pipeline, variant=variant, channel=channel, amis=amis,
                            fingerprint=fingerprint, run_id=run_id, allow_foreign=allow_foreign, template=template,
                            gate_check=gate_checker(pipeline, channel, now=when, override=override_gate,
                                                    proofs=_proofs(aws, pipeline, variant)))

    return _write_or_plan(aws, make_plan, dry_run=dry_run, force=force, pipeline=pipeline, variant=variant,
                          channels=[channel], operation=f"publish to {channel}",
                          guard=guard or Guard(run_id=run_id or ""), template=template)


def promote(aws: Aws, *, pipeline: PipelineLike, variant: VariantLike, source: str, target: str, force: bool = False,
            guard: Guard | None = None, dry_run: bool = False, override_gate: str = "",
            now: datetime | None = None) -> PublishResult | PublishPlan:
    """Copy, region by region, the exact AMI of channel `source` into channel `target`.

    Both channels' leases are held: the source is not read while another writer is half way
    through moving it. ``dry_run``: the plan, read without the leases; nothing written. The soak
    is judged at the time AWS answered the source history read with, or at ``now``, a what-if time
    for a dry run (a write with one is refused).
    """
    check_what_if(now, dry_run)
    check_channel(source)
    check_channel(target)
    if source == target:
        raise SpecError(f"promote: --from and --to are both {source!r}; name two different channels")
    source_name = parameter_name(pipeline, variant, source)
    regions = pipeline.target_regions
    operation = f"promote {source} -> {target}"

    def make_plan() -> PublishPlan:
        dated = fan_out(regions, lambda r: aws.dated_history(source_name, r))
        histories = {r: list(dated[r].versions) for r in regions}
        latest = {r: (histories[r] or [None])[-1] for r in regions}
        missing = [r for r in regions if latest[r] is None]
        if missing:
            raise PublishRefused(f"{operation} for {variant.name}: channel {source} ({source_name}) does not exist in "
                                 f"{', '.join(missing)}; publish it there first")
        amis = {r: p.value for r, p in latest.items() if p is not None}
        provenance = {r: provenance_of(p.description) for r, p in latest.items() if p is not None}
        # which build each region holds, from the image's own tag (a description can be stale:
        # an overwrite that gives none keeps the previous one)
        split = split_refusal(operation, variant.name, source, fan_out(sorted(amis), lambda r: aws.find_image(r, amis[r])))
        if split:
            raise PublishRefused(split)
        # The source channel's images were checked when they were published; what can have changed
        # since is whether they still exist, which plan_publish checks.
        return plan_publish(aws, pipeline=pipeline, variant=variant, channel=target, amis=amis, allow_foreign=True,
                            provenance=provenance, operation=operation, note=f"promoted from {source}",
                            gate_check=gate_checker(pipeline, target, came_from=source, override=override_gate,
                                                    now=now or gates.aws_time(h.answered_at for h in dated.values()),
                                                    source_history=histories, proofs=_proofs(aws, pipeline, variant)))

    return _write_or_plan(aws, make_plan, dry_run=dry_run, force=force, pipeline=pipeline, variant=variant,
                          channels=[source, target], operation=operation, guard=guard or Guard())


def aws_clock(aws: Aws, pipeline: PipelineLike, variant: VariantLike, channel: str,
              template: str | None = None) -> datetime | None:
    """AWS's time now: the Date of its answer to a read of the channel's history in the build region. A
    scan ignore's `until` is judged on it, never on this machine's clock."""
    return aws.dated_history(parameter_name(pipeline, variant, channel, template), pipeline.target_regions[0]).answered_at


def split_refusal(operation: str, variant: str, source: str, images: Mapping[str, Image | None]) -> str:
    """Why a promote refuses ``source``: its regions hold images of different builds ("" when one). Pure."""
    builds = {r: f"{image.tags[tags.FINGERPRINT][:12]} (run {image.tags.get(tags.RUN_ID, UNKNOWN_MARK)})"
              for r, image in images.items() if image is not None and image.tags.get(tags.FINGERPRINT)}
    if len(set(builds.values())) <= 1:
        return ""
    # copying a split channel would split the target too
    return (f"{operation} for {variant}: channel {source} is split across regions ("
            + ", ".join(f"{r} holds build {b}" for r, b in sorted(builds.items()))
            + "); nothing written. Repair it first with `amibuild channels --repair`")


def rollback(aws: Aws, *, pipeline: PipelineLike, variant: VariantLike, channel: str, to_version: int | None = None,
             force: bool = False, guard: Guard | None = None, dry_run: bool = False) -> PublishResult | PublishPlan:
    """Put `channel` back to an earlier value from the parameter's own history.

    Versions are counted in the pipeline's first target region (as `history` shows them there) and
    chosen per region as `rollback_versions` says. The history is read under the channel's lease.
    """
    name = parameter_name(pipeline, variant, channel)
    regions = pipeline.target_regions

    def make_plan() -> PublishPlan:
        histories = fan_out(regions, lambda r: aws.parameter_history(name, r))
        chosen = rollback_versions(name, regions, histories, to_version)
        target = chosen[regions[0]]
        return plan_publish(aws, pipeline=pipeline, variant=variant, channel=channel,
                            amis={r: p.value for r, p in chosen.items()}, allow_foreign=True,
                            provenance={r: provenance_of(p.description) for r, p in chosen.items()},
                            operation=f"roll back to version {target.version}",
                            note=f"rolled back to version {target.version}")

    return _write_or_plan(aws, make_plan, dry_run=dry_run, force=force, pipeline=pipeline, variant=variant,
                          channels=[channel], operation=f"roll back {channel}", guard=guard or Guard())


def _write_or_plan(aws: Aws, make_plan: Callable[[], PublishPlan], *, dry_run: bool, force: bool,
                   pipeline: PipelineLike, variant: VariantLike, channels: Sequence[str], operation: str,
                   guard: Guard, template: str | None = None) -> PublishResult | PublishPlan:
    """A dry run's plan, read without the lease; else the plan made, and carried out, under the
    channels' leases (`transact`)."""
    if dry_run:
        return make_plan()
    return transact(aws, pipeline=pipeline, variant=variant, channels=channels, operation=operation, guard=guard,
                    work=lambda turn: execute_publish(aws, make_plan(), force=force, cancelled=turn),
                    template=template)


def rollback_versions(name: str, regions: Sequence[str], histories: Mapping[str, Sequence[Parameter]],
                      to_version: int | None) -> dict[str, Parameter]:
    """Region -> the history entry a rollback goes back to. Pure: the histories are read by the caller.

    The version is chosen in the first region (``to_version``, else the newest holding another
    AMI than now); every other region takes its newest version from the same build (same run id
    and fingerprint), or the same version number when the chosen one was not written by amibuild.
    """
    empty = [r for r in regions if not histories.get(r)]
    if empty:
        raise PublishRefused(f"roll back {name}: it does not exist in {', '.join(empty)}; nothing to roll back")
    lead = regions[0]
    target = _rollback_target(name, lead, list(histories[lead]), to_version)
    chosen = {lead: target}
    target_prov = provenance_of(target.description)
    for region in regions[1:]:
        if target_prov.known:
            same = [p for p in histories[region] if provenance_of(p.description) == target_prov]
        else:
            same = [p for p in histories[region] if p.version == target.version]
        if not same:
            raise PublishRefused(f"roll back {name} to version {target.version}: {region} has no version from the same "
                                 f"build (run {target_prov.run_id or UNKNOWN_MARK}, fingerprint "
                                 f"{target_prov.fingerprint or UNKNOWN_MARK}); "
                                 "publish the wanted images with `amibuild publish --ami ...` instead")
        chosen[region] = same[-1]
    return chosen


def _rollback_target(name: str, region: str, history: list[Parameter], to_version: int | None) -> Parameter:
    if to_version is not None:
        for entry in history:
            if entry.version == to_version:
                return entry
        raise SpecError(f"--to-version {to_version}: {name} in {region} has versions "
                        f"{history[0].version}..{history[-1].version}; see `amibuild history`")
    current = history[-1]
    # a write amibuild put back (a transaction failed in another region) never held the channel: not a target
    undone = {entry.version for entry, after in itertools.pairwise(history) if PUT_BACK in (after.description or "")}
    for entry in reversed(history):
        if entry.value != current.value and entry.version not in undone:
            return entry
    raise PublishRefused(f"roll back {name}: every version in {region} holds {current.value}; nothing earlier to go back to")
