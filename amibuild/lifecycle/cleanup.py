"""clean-run: remove what an unfinished build run left, and nothing that is in use.

Three steps, as prune: gather the facts, decide (pure), execute thinly.

`gather` finds the run's resources (`amibuild.bake.leftovers.find`: instances, key pairs, Packer's
security groups, volumes, images and snapshots by name and tag), the images' own state and tags,
the run's leases, and the same in-use facts prune gathers (`amibuild.lifecycle.prune.gather`:
every channel's history, launch templates, Auto Scaling groups, launch configurations, instances).

`decide` (pure) says, per resource, remove or keep and why.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from amibuild import tags
from amibuild.aws import Aws, Image, fan_out
from amibuild.bake import leftovers
from amibuild.bake.leftovers import Leftover
from amibuild.errors import AmibuildError, CleanupIncomplete, SpecError
from amibuild.lease import Holder, holder_gone, lease_root, parse_holder
from amibuild.lifecycle.prune import Uses, gather as gather_uses, in_use


@dataclass(frozen=True)
class RunFacts:
    """Everything `decide` needs about one run, as read."""

    run_id: str
    found: tuple[Leftover, ...]  # the run's resources in AWS
    images: Mapping[str, Image | None]  # image id -> the image as read (None: gone meanwhile)
    uses: Uses  # what uses which image (prune's facts)
    leases: tuple[tuple[str, str, Holder], ...] = ()  # (region, name, holder) of the run's leases
    record_published: bool = False  # the run's record says a variant published
    temp_dirs: tuple[str, ...] = ()  # the run's Packer temp folders left on this machine


@dataclass(frozen=True)
class Verdict:
    """Remove or keep one resource, and why."""

    item: Leftover
    remove: bool
    why: str = ""
    unprotect: bool = False  # turn its deregistration protection off first (or, kept, to start the cooldown)


@dataclass(frozen=True)
class LeaseLeftover:
    region: str
    name: str
    holder: Holder

    kind = "lease"

    @property
    def id(self) -> str:
        return self.name

    def command(self) -> str:
        return f"aws ssm delete-parameter --name {self.name} --region {self.region}"

    def __str__(self) -> str:
        return f"lease {self.name} in {self.region}"


@dataclass(frozen=True)
class TempLeftover:
    """A temporary folder of the run's Packer processes on this machine (its ``packer-log*`` among them)."""

    path: str
    kind = "temp-folder"
    region = ""

    @property
    def id(self) -> str:
        return self.path

    def command(self) -> str:
        return f"rm -rf {self.path}"

    def __str__(self) -> str:
        return f"temp folder {self.path}"


def decide(facts: RunFacts) -> list[Verdict]:
    """Per resource of the run: remove, or keep and why. Pure: facts in, verdicts out."""
    using = in_use(facts.uses)
    published = {ami for channel in facts.uses.channels for _, ami in channel.history}  # in any version
    run_images = [x for x in facts.found if x.kind == "image"]
    run_published = facts.record_published or any(x.id in published for x in run_images)
    verdicts: list[Verdict] = []
    for item in run_images:
        image = facts.images.get(item.id)
        why = ""
        if item.id in using:
            why = "in use: " + "; ".join(using[item.id])
        elif run_published:
            why = f"run {facts.run_id} published: its images are prune's to judge (`amibuild prune`)"
        elif image is not None and image.state in ("available", "disabled") and image.tags.get(tags.FINGERPRINT):
            why = (f"a complete image ({image.state}, tagged with its fingerprint) of a finished build: "
                   "prune judges it (`amibuild prune`)")
        protection = image.protection if image is not None else "disabled"
        if not why and protection == "enabled-with-cooldown":
            verdicts.append(Verdict(item, False, "deregistration protection has a cooldown: turned off now, the image "
                                                 "can go in 24 h; run clean-run again then", unprotect=True))
            continue
        if not why and protection.startswith("disabled-until"):
            why = (f"deregistration protection cooldown until {protection.split(' ', 1)[-1]}: "
                   "run clean-run again then")
        verdicts.append(Verdict(item, not why, why, unprotect=not why and protection == "enabled"))
    kept_images = {v.item.id for v in verdicts if not v.remove}  # only images' verdicts so far
    backing = {s: i for i, image in facts.images.items() if i in kept_images and image is not None
               for s in image.snapshot_ids}
    verdicts += [Verdict(item, False, f"backs the kept image {backing[item.id]}")
                 if item.kind == "snapshot" and item.id in backing else Verdict(item, True)
                 for item in facts.found if item.kind != "image"]
    order = {kind: n for n, kind in enumerate(leftovers.KINDS)}
    return sorted(verdicts, key=lambda v: (order[v.item.kind], v.item.region, v.item.id))


# ------------------------------------------------------------------------------- gather


class UnknownRun(SpecError):
    """No record, no resource and no lease carries this run id."""


def gather(aws: Aws, pipeline: Any, run_id: str, lines: Iterable[str], *, recorded: bool = False,
           record_published: bool = False, temp_dirs: Sequence[str] = ()) -> RunFacts:
    """Read everything `decide` needs. Refuses (SpecError) a run that still holds a live lease."""
    listed = aws.parameters_under(lease_root(pipeline.ssm_prefix, pipeline.name), pipeline.build_region)
    leases = [(pipeline.build_region, p.name, holder) for p in listed if (holder := parse_holder(p.value)).run_id == run_id]
    now = time.time()
    for _region, _name, holder in leases:
        if not holder.expired(now) and not holder_gone(holder):
            raise SpecError(f"--run-id: run {run_id} is still building ({holder}); "
                            "stop it first, or wait for its lease to expire")
    scope = leftovers.Scope(run_id, None, None, tuple(pipeline.regions), tuple(pipeline.target_regions))
    found = leftovers.find(aws, scope, leftovers.stream_resources(lines))
    image_items = [x for x in found if x.kind == "image"]
    images = fan_out(image_items, lambda x: aws.find_image(x.region, x.id))
    uses = gather_uses(aws, pipeline, tuple(pipeline.target_regions)).uses if image_items else Uses()
    if not found and not leases and not recorded and not temp_dirs:
        raise UnknownRun(f"--run-id: no run {run_id} is known: no record of it under build/runs/, and nothing "
                         "in AWS carries its id; `amibuild runs` lists the runs")
    return RunFacts(run_id, tuple(found), {x.id: images[x] for x in image_items}, uses, tuple(leases),
                    record_published, tuple(temp_dirs))


# ------------------------------------------------------------------------------- execute


@dataclass
class CleanupResult:
    """What clean-run found of one run, removed, kept (and why), and could not remove."""

    run_id: str
    found: list[Leftover]
    kept: list[tuple[Leftover, str]] = field(default_factory=list)
    removed: list[Any] = field(default_factory=list)  # Leftover or LeaseLeftover
    failed: list[tuple[Any, str]] = field(default_factory=list)
    leases: list[LeaseLeftover] = field(default_factory=list)
    temp_dirs: list[TempLeftover] = field(default_factory=list)
    dry_run: bool = False
    unprotect: list[Leftover] = field(default_factory=list)  # images whose deregistration protection goes off

    def raise_for_status(self) -> None:
        if self.failed:
            raise CleanupIncomplete(f"{len(self.failed)} leftover(s) of run {self.run_id} not removed")

    def to_dict(self) -> dict:
        return {
            "run_id": self.run_id,
            "dry_run": self.dry_run,
            "found": [{"kind": x.kind, "region": x.region, "id": x.id, "command": x.command()} for x in self.found],
            "kept": [{"kind": x.kind, "region": x.region, "id": x.id, "why": why} for x, why in self.kept],
            "leases": [{"region": x.region, "name": x.name, "holder": str(x.holder)} for x in self.leases],
            "temp_dirs": [x.path for x in self.temp_dirs],
            "unprotect": [{"kind": x.kind, "region": x.region, "id": x.id} for x in self.unprotect],
            "removed": [str(x) for x in self.removed],
            "left_behind": [{"kind": x.kind, "region": x.region, "id": x.id, "why": why, "command": x.command()}
                            for x, why in self.failed],
        }


def execute(aws: Aws, facts: RunFacts, verdicts: Sequence[Verdict], *, dry_run: bool = False) -> CleanupResult:
    """Remove what `decide` said may go (nothing with ``dry_run``): AWS resources in dependency order,
    then the run's leases (only while they still hold the value read)."""
    result = CleanupResult(facts.run_id, list(facts.found), dry_run=dry_run,
                           kept=[(v.item, v.why) for v in verdicts if not v.remove],
                           leases=[LeaseLeftover(r, n, h) for r, n, h in facts.leases],
                           temp_dirs=[TempLeftover(p) for p in facts.temp_dirs],
                           unprotect=[v.item for v in verdicts if v.unprotect])
    if dry_run:
        return result
    refused: set[str] = set()
    for item in result.unprotect:
        try:
            aws.unprotect_image(item.region, item.id)
        except AmibuildError as exc:
            refused.add(item.id)
            result.failed.append((item, f"deregistration protection not turned off: {exc}"))
    result.removed, failed = leftovers.remove(aws, [v.item for v in verdicts if v.remove and v.item.id not in refused])
    off = {x.id for x in result.unprotect} - refused  # its protection turned off, and it is still there: say so
    result.failed += [(x, f"{why}; its deregistration protection is off now (aws ec2 enable-image-deregistration-"
                          f"protection --image-id {x.id} --region {x.region} puts it back)" if x.id in off else why)
                      for x, why in failed]
    for lease in result.leases:
        try:
            if aws.delete_parameter_if_value(lease.name, lease.holder.raw, lease.region):
                result.removed.append(lease)
            else:  # taken over (or given back) since it was read: another run's now, or gone
                result.kept.append((lease, "changed since it was read (taken over or given back): left as it is"))
        except AmibuildError as exc:  # a lease left expires by itself; say so and go on
            result.failed.append((lease, f"{exc}; it expires by itself"))
    for folder in result.temp_dirs:
        try:
            shutil.rmtree(folder.path)
            result.removed.append(folder)
        except OSError as exc:
            result.failed.append((folder, str(exc)))
    return result
