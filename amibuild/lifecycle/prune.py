"""Retention for the images amibuild made: keep the newest, never touch one in use, delete the rest.

Three steps, as everywhere in amibuild: gather the facts, plan as data, execute thinly.

Each image gets one fate, with its steps and their reasons:
KEEP (newest `keep`, younger than `older_than`, in use, pending), DISABLE (`disable_after`; never an
image in use or shared), DELETE (protection off, deregister; its snapshots deleted only when Recycle
Bin rules keep both image and snapshots), UNPROTECT (a protection cooldown: a later prune
deregisters), DEPRECATE (`deprecate_only`). The plan says per region what the Recycle Bin keeps.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import enum
import itertools
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterable, Mapping, Sequence

from amibuild.aws import Aws, Image, fan_out
from amibuild import tags
from amibuild.errors import AmibuildError, NotFound, PruneFailed, SpecError
from amibuild.channels.plan import build_time
from amibuild.channels.publish import name_pattern, plain
# the in-use facts live in `consumers`, shared with `fleet`; ChannelFact and LaunchFacts stay importable from here
from amibuild.lifecycle.consumers import (DEFAULT_KEEP_VERSIONS, ChannelFact, LaunchFacts, Uses,  # noqa: F401
                                          gather_uses, in_use)
from amibuild.lifecycle.recoverable import NO_RULE, BinRule, Recovery, recovery, rule_from_gateway
from amibuild.values import parse_iso_time

DELETABLE_STATES = frozenset({"available", "failed", "error", "invalid", "disabled"})
_COMPLETE = frozenset({"available", "disabled"})  # what counts towards the newest `keep`
_LEAVE_ALONE = frozenset({"pending", "transient"})
PROTECTED = "enabled"
COOLDOWN = "enabled-with-cooldown"
WAITING = "disabled-until"  # DescribeImages: "disabled-until <time>" while a cooldown runs


# ------------------------------------------------------------------------------- plan (data)


class Fate(enum.StrEnum):
    KEEP = "keep"
    DELETE = "delete"
    DEPRECATE = "deprecate"
    DISABLE = "disable"
    UNPROTECT = "unprotect"


@dataclass(frozen=True)
class ImagePlan:
    """One image and what happens to it, and why."""

    image_id: str
    region: str
    variant: str
    name: str
    created: datetime | None
    state: str
    fate: Fate
    reasons: tuple[str, ...]  # why it is kept (empty for DELETE / DEPRECATE)
    snapshots: tuple[str, ...] = ()  # deleted with the image
    kept_snapshots: Mapping[str, str] = field(default_factory=dict)  # snapshot -> why it stays
    protection: str = "disabled"  # DescribeImages' DeregistrationProtection
    steps: tuple[str, ...] = ()  # what is done to it, in order, each with its reason
    recovery: str = ""  # what deregistering it means for getting it back (the Recycle Bin)


@dataclass(frozen=True)
class RegionBin:
    """Per region: whether an image prune deregisters there can come back from the Recycle Bin."""

    region: str
    images: int  # the pipeline's images there
    recoverable: int  # of them, those both an EC2_IMAGE and an EBS_SNAPSHOT rule cover
    retention: timedelta | None  # the shortest time a recoverable one stays in the bin
    reason: str  # why not, when none is
    rules: tuple[str, ...] = ()  # the covering rules' ids

    def line(self) -> str:
        head = f"  recycle bin {self.region}: "
        if self.images and self.recoverable == self.images:
            return head + (f"a deregistered image is recoverable for {_age_text(self.retention)} "
                           f"(rules {', '.join(self.rules)}); `amibuild restore --ami AMI --region {self.region}`")
        if self.recoverable:
            return head + (f"{self.recoverable} of {self.images} images recoverable (for {_age_text(self.retention)}); "
                           "the others' snapshots are kept")
        return head + f"a deregistered image is NOT recoverable: {self.reason}; its snapshots are kept"

    def to_dict(self) -> dict[str, Any]:
        return {"region": self.region, "images": self.images, "recoverable": self.recoverable,
                "retention": _age_text(self.retention), "reason": self.reason, "rules": list(self.rules)}

    def warning(self) -> str | None:
        if self.recoverable or not self.images:
            return None
        if self.reason != NO_RULE:  # a rule of one kind only covers them: the image or its snapshots, not both
            return (f"warning: the Recycle Bin rules in {self.region} do not keep both this pipeline's images and their "
                    f"snapshots ({self.reason}): a deregistered image cannot be restored; prune keeps its snapshots")
        return (f"warning: no Recycle Bin rule covers this pipeline's images in {self.region} (an EC2_IMAGE and an "
                "EBS_SNAPSHOT rule are both needed): a deregistered image cannot be restored; prune keeps its snapshots")


@dataclass(frozen=True)
class PrunePlan:
    pipeline: str
    keep: int
    older_than: timedelta | None
    keep_versions: int
    deprecate_only: bool
    now: datetime
    images: tuple[ImagePlan, ...]
    disable_after: timedelta | None = None
    bins: tuple[RegionBin, ...] = ()

    @property
    def to_change(self) -> tuple[ImagePlan, ...]:
        return tuple(i for i in self.images if i.fate is not Fate.KEEP)

    @property
    def kept(self) -> tuple[ImagePlan, ...]:
        return tuple(i for i in self.images if i.fate is Fate.KEEP)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline,
            "keep": self.keep,
            "older_than": _age_text(self.older_than),
            "keep_versions": self.keep_versions,
            "deprecate_only": self.deprecate_only,
            "now": self.now.isoformat(),
            "disable_after": _age_text(self.disable_after),
            "images": [plain(i) for i in self.images],
            "recycle_bin": [b.to_dict() for b in self.bins],
        }


def plan_prune(
    images: Iterable[Image],
    in_use: Mapping[str, Sequence[str]],
    keep: int,
    older_than: timedelta | None,
    now: datetime,
    *,
    snapshot_tags: Mapping[str, Mapping[str, str]] | None = None,
    deprecate_only: bool = False,
    keep_versions: int = DEFAULT_KEEP_VERSIONS,
    pipeline: str = "",
    deprecated: Mapping[str, datetime] | None = None,
    disable_after: timedelta | None = None,
    shared: Mapping[str, Sequence[str]] | None = None,
    rules: Mapping[str, Sequence[BinRule]] | None = None,
) -> PrunePlan:
    """Decide, per variant and region, what to keep (and why) and what to change. Pure.

    ``in_use`` maps image ids to the reasons they are in use; ``snapshot_tags`` maps snapshot ids
    to their tags (a snapshot missing there is not deleted: it is not known to be ours);
    ``deprecated`` maps image ids to their deprecation time (``deprecate_only`` leaves an image
    already deprecated alone: setting the time again would undo the deprecation for a while);
    ``shared`` maps image ids to whom their launch permission names (a shared image is not
    disabled); ``rules`` maps regions to their Recycle Bin rules (``None``: not read; every snapshot
    is deleted).
    """
    deprecated = deprecated or {}
    shared = shared or {}
    if keep < 1:
        raise SpecError(f"--keep {keep}: keep at least 1 image per variant and region")
    snapshot_tags = snapshot_tags or {}
    images = list(images)
    built = {image.image_id: build_time(image) for image in images}  # read once: the sort, the ranking, the plan

    def newest_first(image: Image) -> tuple[float, str]:
        created = built[image.image_id]
        # unknown creation times sort last; they are kept anyway
        return (-created.timestamp() if created else float("inf"), image.image_id)

    images.sort(key=lambda i: (i.region, i.tags.get(tags.VARIANT, ""), newest_first(i)))

    decided: list[tuple[Image, list[str]]] = []
    for _, group in itertools.groupby(images, key=lambda i: (i.region, i.tags.get(tags.VARIANT, ""))):
        ranked = 0
        for image in group:
            reasons: list[str] = []
            created = built[image.image_id]
            if image.state in _COMPLETE and ranked < keep:
                ranked += 1
                reasons.append(f"newest {keep}")
            if older_than is not None and created is not None and now - created < older_than:
                reasons.append(f"younger than {_age_text(older_than)}")
            if created is None:
                reasons.append("creation time unknown")
            if image.state in _LEAVE_ALONE:
                reasons.append(f"state {image.state}")
            elif image.state not in DELETABLE_STATES:
                reasons.append(f"state {image.state!r} not understood: left alone")
            reasons += in_use.get(image.image_id, ())
            since = deprecated.get(image.image_id)
            if deprecate_only and not reasons and since is not None and since <= now:
                reasons.append(f"deprecated already (since {since:%Y-%m-%d %H:%M} UTC)")
            if not reasons and image.protection.startswith(WAITING) and not deprecate_only:
                until = image.protection[len(WAITING):].strip()
                reasons.append(f"deregistration protection cooldown until {until}: a later prune deregisters it")
            decided.append((image, reasons))

    recoveries = {image.image_id: recovery(rules.get(image.region, ()), image.tags,
                                           [snapshot_tags.get(s, {}) for s in image.snapshot_ids])
                  for image, _ in decided if rules is not None}
    # a snapshot backing a kept image stays, even when a deleted image names it too
    kept_snapshots = {s for image, reasons in decided if reasons for s in image.snapshot_ids}
    why_delete = f"not among the newest {keep}" + (f", older than {_age_text(older_than)}" if older_than else "") + \
        ", and nothing uses it"
    plans = []
    for image, reasons in decided:
        found = recoveries.get(image.image_id)
        common = dict(image_id=image.image_id, region=image.region, variant=image.tags.get(tags.VARIANT, ""),
                      name=image.name, created=built[image.image_id], state=image.state, protection=image.protection,
                      recovery=found.reason if found else "")
        if reasons:
            plans.append(_kept(image, reasons, common, in_use, shared, disable_after, now, deprecate_only))
        elif deprecate_only:
            plans.append(ImagePlan(**common, fate=Fate.DEPRECATE, reasons=(),
                                   steps=(f"set a deprecation time: {why_delete}",)))
        elif image.protection == COOLDOWN:
            plans.append(ImagePlan(**common, fate=Fate.UNPROTECT, reasons=(), steps=(
                "turn deregistration protection off: no channel holds it any more; its cooldown "
                "(WithCooldown) keeps it 24 h, then a later prune deregisters it",)))
        else:
            stays = {snapshot: why for snapshot in image.snapshot_ids
                     if (why := _snapshot_stays(snapshot, image, snapshot_tags, kept_snapshots, found))}
            ours = [snapshot for snapshot in image.snapshot_ids if snapshot not in stays]
            steps = ["turn deregistration protection off: no channel holds it any more"] if image.protection == PROTECTED else []
            steps.append(f"deregister: {why_delete}" + (f" ({found.reason})" if found else ""))
            if ours:
                steps.append(f"delete snapshots {', '.join(ours)}: made by amibuild for it"
                             + (f", and the Recycle Bin keeps them for {_age_text(found.retention)}" if found else ""))
            plans.append(ImagePlan(**common, fate=Fate.DELETE, reasons=(), snapshots=tuple(ours),
                                   kept_snapshots=stays, steps=tuple(steps)))
    return PrunePlan(pipeline, keep, older_than, keep_versions, deprecate_only, now, tuple(plans), disable_after,
                     _bins(decided, recoveries, rules) if rules is not None else ())


def _kept(image: Image, reasons: list[str], common: dict[str, Any], in_use: Mapping[str, Sequence[str]],
          shared: Mapping[str, Sequence[str]], disable_after: timedelta | None, now: datetime,
          deprecate_only: bool) -> ImagePlan:
    """A kept image: disabled as well when `disable_after` says so and nothing forbids it."""
    created = common["created"]
    if (disable_after is not None and not deprecate_only and created is not None and now - created >= disable_after
            and not image.protection.startswith(WAITING)):
        if image.state == "disabled":
            reasons.append("disabled already")
        elif in_use.get(image.image_id):
            reasons.append("not disabled: in use")
        elif image.state != "available":
            reasons.append(f"not disabled: state {image.state}")
        elif shared.get(image.image_id):
            reasons.append(f"not disabled: shared with {', '.join(shared[image.image_id])} "
                           "(DisableImage would remove its launch permissions)")
        else:
            return ImagePlan(**common, fate=Fate.DISABLE, reasons=tuple(dict.fromkeys(reasons)),
                             steps=(f"disable: nothing uses it, it is older than {_age_text(disable_after)} and shared "
                                    f"with no one (`aws ec2 enable-image --image-id {image.image_id}` undoes it)",))
    return ImagePlan(**common, fate=Fate.KEEP, reasons=tuple(dict.fromkeys(reasons)))


def _bins(decided: Sequence[tuple[Image, list[str]]], recoveries: Mapping[str, Recovery],
          rules: Mapping[str, Sequence[BinRule]]) -> tuple[RegionBin, ...]:
    out = []
    for region in sorted({*rules, *(i.region for i, _ in decided)}):
        here = [recoveries[i.image_id] for i, _ in decided if i.region == region]
        good = [r for r in here if r.recoverable]
        reasons = sorted({r.reason for r in here if not r.recoverable})
        covering = tuple(r.identifier for r in rules.get(region, ()) if r.identifier)
        out.append(RegionBin(region, len(here), len(good), min((r.retention for r in good if r.retention),
                                                                 default=None),
                             "; ".join(reasons) or "no images here", covering))
    return tuple(out)


def _snapshot_stays(snapshot: str, image: Image, snapshot_tags: Mapping[str, Mapping[str, str]],
                    kept: set[str], found: Recovery | None) -> str:
    """Why a deleted image's snapshot stays ("": it is deleted with the image)."""
    if snapshot in kept:
        return "backs an image that is kept"
    mine = snapshot_tags.get(snapshot)
    if mine is None:
        return "not found among this account's snapshots"
    for key in (tags.FINGERPRINT, tags.PIPELINE):
        if not mine.get(key) or mine.get(key) != image.tags.get(key):
            return f"does not carry the image's {key} tag: not made by amibuild"
    if found is not None and found.keep_snapshots():
        return f"{found.reason}: kept, so the image can be registered again from it"
    return ""


# ------------------------------------------------------------------------------- gather


@dataclass(frozen=True)
class Facts:
    """What prune read: the pipeline's images, their snapshots' tags, and what uses which image."""

    images: tuple[Image, ...]
    in_use: Mapping[str, tuple[str, ...]]
    snapshot_tags: Mapping[str, Mapping[str, str]]
    deprecated: Mapping[str, datetime] = field(default_factory=dict)  # image id -> its deprecation time
    uses: Uses = field(default_factory=Uses)  # the facts `in_use` was decided from
    rules: Mapping[str, tuple[BinRule, ...]] | None = None  # region -> its Recycle Bin rules
    shared: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # image id -> its launch permission


def gather(aws: Aws, pipeline: Any, regions: Sequence[str], *, keep_versions: int = DEFAULT_KEEP_VERSIONS,
           variants: Sequence[str] = (), disable_after: timedelta | None = None, now: datetime | None = None) -> Facts:
    """Read everything `plan_prune` needs, the regions in parallel. Read-only.

    Per region one DescribeImages page walk (disabled images included: AWS hides them otherwise),
    the snapshots' tags, the Recycle Bin's rules; with `disable_after`, the launch permission of
    each image old enough to be disabled that nothing uses."""
    path, pattern = name_pattern(pipeline)

    def read(region: str) -> tuple[list[tuple[Image, str]], dict[str, dict[str, str]], tuple[BinRule, ...]]:
        filters = {"tag-key": [tags.FINGERPRINT], f"tag:{tags.PIPELINE}": [pipeline.name]}
        if variants:
            filters[f"tag:{tags.VARIANT}"] = list(variants)
        found = aws.own_images(region, filters, include_disabled=True)
        snapshots = aws.snapshot_tags(region, [s for i, _ in found for s in i.snapshot_ids])
        rules = tuple(rule_from_gateway(r) for kind in ("EC2_IMAGE", "EBS_SNAPSHOT")
                      for r in aws.retention_rules(region, kind))
        return found, snapshots, rules

    found = fan_out(list(dict.fromkeys(regions)), read)
    images = tuple(i for region in found for i, _ in found[region][0])
    deprecated = {i.image_id: when for region in found for i, text in found[region][0]
                  if (when := parse_iso_time(text)) is not None}
    uses = gather_uses(aws, pipeline.name, list(found), path, pattern,
                       {region: [i.image_id for i, _ in found[region][0]] for region in found})
    snapshot_tags = {snapshot: its_tags for region in found for snapshot, its_tags in found[region][1].items()}
    using = in_use(uses, keep_versions)
    shared: dict[str, tuple[str, ...]] = {}
    if disable_after is not None:
        moment = now or datetime.now(timezone.utc)
        jobs = [(i.region, i.image_id) for i in images if i.state == "available" and i.image_id not in using
                and (created := build_time(i)) is not None and moment - created >= disable_after]
        seen = fan_out(jobs, lambda job: aws.launch_permissions(*job))
        shared = {image_id: tuple(who) for (_, image_id), who in seen.items() if who}
    return Facts(images, using, snapshot_tags, deprecated, uses, {r: found[r][2] for r in found}, shared)


# ------------------------------------------------------------------------------- execute


class Done(enum.StrEnum):
    DELETED = "deleted"
    DEPRECATED = "deprecated"
    FAILED = "failed"
    KEPT = "kept"  # a channel named it when prune came to deregister it
    DISABLED = "disabled"
    WAITING = "waiting"  # protection off, its cooldown running: a later prune deregisters it
    NOT_STARTED = "not started"  # a signal came first: the images under way were finished, no other begun


@dataclass(frozen=True)
class PruneOutcome:
    """What happened to one image prune meant to change."""

    image_id: str
    region: str
    variant: str
    status: Done
    snapshots_deleted: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()  # the image's own failure and any snapshot's
    unprotected: bool = False  # deregistration protection was turned off first
    notes: tuple[str, ...] = ()  # e.g. when a cooldown lets it go
    deregistered: bool = False  # DeregisterImage done (FAILED too, when a snapshot was not deleted)


@dataclass(frozen=True)
class PruneResult:
    plan: PrunePlan
    outcomes: tuple[PruneOutcome, ...] | None  # None: dry run
    deprecate_at: datetime | None = None

    @property
    def failed(self) -> tuple[PruneOutcome, ...]:
        return tuple(o for o in self.outcomes or () if o.status is Done.FAILED)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.outcomes is None,
            **self.plan.to_dict(),
            "deprecate_at": self.deprecate_at.isoformat() if self.deprecate_at else None,
            "outcomes": None if self.outcomes is None else [plain(o) for o in self.outcomes],
            "failed": [o.image_id for o in self.failed],
        }

    def raise_for_status(self) -> None:
        """Raise `PruneFailed` naming what could not be deleted."""
        if self.failed:
            detail = "; ".join(f"{o.region} {o.image_id}: {' / '.join(o.errors)}" for o in self.failed)
            raise PruneFailed(f"prune: {len(self.failed)} image(s) not (fully) pruned: {detail}")


def deprecation_time(now: datetime) -> datetime:
    """The next whole minute after `now`, plus one: EC2 rounds to the minute and refuses the past."""
    return now.replace(second=0, microsecond=0) + timedelta(minutes=2)


def execute_prune(aws: Aws, plan: PrunePlan, *, now: datetime | None = None,
                  named: Callable[[str], set[str]] | None = None,
                  cancelled: Callable[[], bool] = lambda: False) -> PruneResult:
    """Carry out the plan: per region (in parallel) image by image; a failure does not stop the rest.

    ``named(region)``: the images channels name there right now, read again right before each
    deregister; an image named there is kept after all (`Done.KEPT`). Once ``cancelled()`` says so,
    each image under way is finished (deregistered with its snapshots) and no other begun."""
    at = deprecation_time(now or datetime.now(timezone.utc)) if plan.deprecate_only else None

    def region_run(region: str) -> list[PruneOutcome]:
        return _verify(aws, region, [
            PruneOutcome(item.image_id, item.region, item.variant, Done.NOT_STARTED) if cancelled()
            else _change(aws, item, at, named) for item in plan.to_change if item.region == region])

    done = fan_out(sorted({item.region for item in plan.to_change}), region_run)
    order = {item.image_id: n for n, item in enumerate(plan.to_change)}
    outcomes = sorted((o for region in done for o in done[region]), key=lambda o: order[o.image_id])
    return PruneResult(plan, tuple(outcomes), at)


def _change(aws: Aws, item: ImagePlan, at: datetime | None,
            named: Callable[[str], set[str]] | None = None) -> PruneOutcome:
    base = dict(image_id=item.image_id, region=item.region, variant=item.variant)
    if named is not None and item.fate in (Fate.DELETE, Fate.UNPROTECT, Fate.DISABLE):
        try:
            now_named = item.image_id in named(item.region)
        except AmibuildError as exc:
            return PruneOutcome(**base, status=Done.FAILED, errors=(f"not deregistered: channels unreadable: {exc}",))
        if now_named:
            return PruneOutcome(**base, status=Done.KEPT,
                                errors=("a channel names it now (read again right before the change): kept",))
    if item.fate is Fate.DISABLE:
        try:
            aws.disable_image(item.region, item.image_id)
        except AmibuildError as exc:
            return PruneOutcome(**base, status=Done.FAILED, errors=(f"not disabled: {exc}",))
        return PruneOutcome(**base, status=Done.DISABLED)
    unprotected = item.fate is Fate.UNPROTECT or (item.fate is Fate.DELETE and item.protection == PROTECTED)
    if unprotected:
        try:
            aws.unprotect_image(item.region, item.image_id)
        except AmibuildError as exc:
            return PruneOutcome(**base, status=Done.FAILED,
                                errors=(f"deregistration protection not turned off, not deregistered: {exc}",))
    if item.fate is Fate.UNPROTECT:
        return PruneOutcome(**base, status=Done.WAITING, unprotected=True, notes=(_cooldown_note(aws, item),))
    if item.fate is Fate.DEPRECATE:
        assert at is not None
        try:
            aws.deprecate_image(item.region, item.image_id, at)
        except AmibuildError as exc:
            return PruneOutcome(**base, status=Done.FAILED, errors=(str(exc),))
        return PruneOutcome(**base, status=Done.DEPRECATED)
    try:
        aws.deregister_image(item.region, item.image_id)
    except NotFound:
        pass  # gone already (deregistered by someone else): its snapshots are still ours to delete
    except AmibuildError as exc:
        # its snapshots back a registered image: deleting them would fail, and they are needed
        return PruneOutcome(**base, status=Done.FAILED, errors=(f"not deregistered: {exc}",), unprotected=unprotected)
    deleted, errors, notes = [], [], []
    for snapshot in item.snapshots:
        try:
            if aws.delete_snapshot(item.region, snapshot):
                deleted.append(snapshot)
            else:
                notes.append(f"snapshot {snapshot} left: another image uses it (EC2 refused: InvalidSnapshot.InUse)")
        except NotFound:
            deleted.append(snapshot)
        except AmibuildError as exc:
            errors.append(f"deregistered, but snapshot {snapshot} not deleted: {exc}")
    return PruneOutcome(**base, status=Done.FAILED if errors else Done.DELETED, snapshots_deleted=tuple(deleted),
                        errors=tuple(errors), unprotected=unprotected, notes=tuple(notes), deregistered=True)


def _cooldown_note(aws: Aws, item: ImagePlan) -> str:
    """When the image can go, as DescribeImages says once its protection is off ("disabled-until T")."""
    try:
        image = aws.find_image(item.region, item.image_id)
    except AmibuildError as exc:
        return f"protection off; its cooldown's end could not be read ({exc}): run prune again in 24 h"
    shown = image.protection if image is not None else ""
    until = shown[len(WAITING):].strip() if shown.startswith(WAITING) else "24 h from now"
    return f"protection off with a cooldown: it can be deregistered after {until}; a later prune finishes it"


def _verify(aws: Aws, region: str, outcomes: list[PruneOutcome]) -> list[PruneOutcome]:
    """Converge, then check: list the images again; one still registered after a deregister failed."""
    claimed = [o.image_id for o in outcomes if o.status is Done.DELETED]
    if not claimed:
        return outcomes
    try:
        # find_images: the ids in calls of at most the values one filter takes (a prune may delete more)
        still = {i.image_id for i in aws.find_images(region, claimed).values() if i.state != "deregistered"}
    except AmibuildError as exc:
        return [o if o.status is not Done.DELETED else
                replace(o, status=Done.FAILED, errors=(*o.errors, f"could not check that it is gone: {exc}"))
                for o in outcomes]
    return [o if o.image_id not in still else
            replace(o, status=Done.FAILED, errors=(*o.errors, "still registered after DeregisterImage"), deregistered=False)
            for o in outcomes]


# ------------------------------------------------------------------------------- report


def report_lines(result: PruneResult) -> Iterable[str]:
    plan = result.plan
    age = f", and any younger than {_age_text(plan.older_than)}" if plan.older_than else ""
    head = (f"prune {plan.pipeline or 'images'}: keep the newest {plan.keep} per variant and region{age}, "
            f"and every image in use (rollback window: {plan.keep_versions} earlier versions per channel)")
    if plan.disable_after:
        head += f"; disable those nothing uses older than {_age_text(plan.disable_after)}"
    yield head + (" — dry run, nothing changed:" if result.outcomes is None else ":")
    if not plan.images:
        yield "  no images made by amibuild for this pipeline"
    verb = "deprecate" if plan.deprecate_only else "delete"
    last = None
    for item in plan.images:
        if (item.region, item.variant) != last:
            last = (item.region, item.variant)
            yield f"  {item.region} {item.variant or '(no variant tag)'}"
        when = item.created.strftime("%Y-%m-%d %H:%M") if item.created else "unknown time"
        guard = "" if item.protection == "disabled" else f"  [deregistration protection {item.protection}]"
        if item.fate is Fate.KEEP:
            yield f"    keep    {item.image_id}  {when}  {'; '.join(item.reasons)}{guard}"
        else:
            word = verb if item.fate in (Fate.DELETE, Fate.DEPRECATE) else item.fate.value
            extra = f"  + {', '.join(item.snapshots)}" if item.snapshots else ""
            stays = "".join(f"; leaves {s} ({why})" for s, why in item.kept_snapshots.items())
            kept = f"  (kept: {'; '.join(item.reasons)})" if item.reasons else ""
            yield f"    {word:7} {item.image_id}  {when}{extra}{stays}{kept}{guard}"
            yield from (f"      - {step}" for step in item.steps)
    yield from (b.line() for b in plan.bins)
    yield from (w for b in plan.bins if (w := b.warning()))
    if result.outcomes is None:
        return
    for outcome in result.outcomes:
        first = "protection off, " if outcome.unprotected and outcome.status is not Done.WAITING else ""
        if outcome.status is Done.FAILED:
            yield f"  NOT {verb}d {outcome.region} {outcome.image_id}: {first}{' / '.join(outcome.errors)}"
        elif outcome.status is Done.KEPT:
            yield f"  kept {outcome.region} {outcome.image_id}: {' / '.join(outcome.errors)}"
        elif outcome.status is Done.WAITING:
            yield f"  waiting {outcome.region} {outcome.image_id}: {' / '.join(outcome.notes)}"
        else:
            snaps = f" and {', '.join(outcome.snapshots_deleted)}" if outcome.snapshots_deleted else ""
            left = f"; {' / '.join(outcome.notes)}" if outcome.notes else ""
            yield f"  {first}{outcome.status.value} {outcome.region} {outcome.image_id}{snaps}{left}"
    counts = Counter(o.status for o in result.outcomes)
    changed = counts[Done.DELETED] + counts[Done.DEPRECATED]
    when = f" (deprecation at {result.deprecate_at:%Y-%m-%d %H:%M} UTC)" if result.deprecate_at else ""
    more = "".join(f", {n} {word}" for word, n in (
        ("disabled", counts[Done.DISABLED]), ("waiting for a protection cooldown", counts[Done.WAITING]),
        ("not started", counts[Done.NOT_STARTED])) if n)
    yield (f"summary: {changed} {verb}d{when}{more}, {len(result.failed)} failed, {len(plan.kept)} kept")


def _age_text(age: timedelta | None) -> str | None:
    if age is None:
        return None
    # the largest unit that divides the age: --older-than takes s, m, h, d and w alike
    seconds = int(age.total_seconds())
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"

