"""Retention for the images amibuild made: keep the newest, never touch one in use, delete the rest.

Three steps, as everywhere in amibuild: gather the facts, plan as data, execute thinly.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterable, Mapping, Sequence

from amibuild.aws import Aws, Image
from amibuild import tags
from amibuild.errors import AmibuildError, NotFound, PruneFailed, SpecError
from amibuild.aws import fan_out
from amibuild.channels.publish import name_pattern, plain
# the in-use facts and their classification live in one place, shared with `fleet`; these names
# stay importable from here
from amibuild.lifecycle.consumers import (DEFAULT_KEEP_VERSIONS, IN_USE_STATES, ChannelFact,  # noqa: F401
                                          LaunchFacts, Uses, gather_uses, in_use)

DELETABLE_STATES = frozenset({"available", "failed", "error", "invalid"})
_LEAVE_ALONE = frozenset({"pending", "transient", "disabled"})


# ------------------------------------------------------------------------------- plan (data)


class Fate(enum.StrEnum):
    KEEP = "keep"
    DELETE = "delete"
    DEPRECATE = "deprecate"


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


@dataclass(frozen=True)
class PrunePlan:
    pipeline: str
    keep: int
    older_than: timedelta | None
    keep_versions: int
    deprecate_only: bool
    now: datetime
    images: tuple[ImagePlan, ...]

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
            "images": [plain(i) for i in self.images],
        }


def created_at(image: Image) -> datetime | None:
    """When amibuild made the image: its ``amibuild:created`` tag, else EC2's CreationDate."""
    for text in (image.tags.get(tags.CREATED, ""), image.creation_date):
        moment = _moment(text)
        if moment is not None:
            return moment
    return None


def _moment(text: str) -> datetime | None:
    """An ISO 8601 time as EC2 and amibuild write them (``...Z``, with or without fractions)."""
    try:
        moment = datetime.fromisoformat((text or "").strip())
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


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
) -> PrunePlan:
    """Decide, per variant and region, what to keep (and why) and what to delete. Pure.

    ``in_use`` maps image ids to the reasons they are in use; ``snapshot_tags`` maps snapshot ids
    to their tags (a snapshot missing there is not deleted: it is not known to be ours);
    ``deprecated`` maps image ids to their deprecation time (``deprecate_only`` leaves an image
    already deprecated alone: setting the time again would undo the deprecation for a while).
    """
    deprecated = deprecated or {}
    if keep < 1:
        raise SpecError(f"--keep {keep}: keep at least 1 image per variant and region")
    snapshot_tags = snapshot_tags or {}
    images = sorted(images, key=lambda i: (i.region, i.tags.get(tags.VARIANT, ""), _newest_first(i)))
    groups: dict[tuple[str, str], list[Image]] = defaultdict(list)
    for image in images:
        groups[(image.region, image.tags.get(tags.VARIANT, ""))].append(image)

    decided: list[tuple[Image, list[str]]] = []
    for group in groups.values():
        ranked = 0
        for image in group:
            reasons: list[str] = []
            created = created_at(image)
            if image.state == "available" and ranked < keep:
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
            decided.append((image, reasons))

    # a snapshot backing a kept image stays, even when a deleted image names it too
    kept_snapshots = {s for image, reasons in decided if reasons for s in image.snapshot_ids}
    plans = []
    for image, reasons in decided:
        variant = image.tags.get(tags.VARIANT, "")
        common = dict(image_id=image.image_id, region=image.region, variant=variant, name=image.name,
                      created=created_at(image), state=image.state)
        if reasons:
            plans.append(ImagePlan(**common, fate=Fate.KEEP, reasons=tuple(dict.fromkeys(reasons))))
            continue
        ours, stays = [], {}
        for snapshot in image.snapshot_ids:
            why = _snapshot_stays(snapshot, image, snapshot_tags, kept_snapshots)
            if why:
                stays[snapshot] = why
            else:
                ours.append(snapshot)
        if deprecate_only:
            plans.append(ImagePlan(**common, fate=Fate.DEPRECATE, reasons=()))
        else:
            plans.append(ImagePlan(**common, fate=Fate.DELETE, reasons=(), snapshots=tuple(ours),
                                   kept_snapshots=stays))
    return PrunePlan(pipeline, keep, older_than, keep_versions, deprecate_only, now, tuple(plans))


def _newest_first(image: Image) -> tuple[float, str]:
    created = created_at(image)
    # unknown creation times sort last; they are kept anyway
    return (-created.timestamp() if created else float("inf"), image.image_id)


def _snapshot_stays(snapshot: str, image: Image, snapshot_tags: Mapping[str, Mapping[str, str]],
                    kept: set[str]) -> str:
    if snapshot in kept:
        return "backs an image that is kept"
    mine = snapshot_tags.get(snapshot)
    if mine is None:
        return "not found among this account's snapshots"
    for key in (tags.FINGERPRINT, tags.PIPELINE):
        if not mine.get(key) or mine.get(key) != image.tags.get(key):
            return f"does not carry the image's {key} tag: not made by amibuild"
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


def gather(aws: Aws, pipeline: Any, regions: Sequence[str], *, keep_versions: int = DEFAULT_KEEP_VERSIONS,
           variants: Sequence[str] = (), template: str | None = None) -> Facts:
    """Read everything `plan_prune` needs, the regions in parallel. Read-only."""
    path, pattern = name_pattern(pipeline, template)

    def read(region: str) -> tuple[list[tuple[Image, str]], dict[str, dict[str, str]]]:
        filters = {"tag-key": [tags.FINGERPRINT], f"tag:{tags.PIPELINE}": [pipeline.name]}
        if variants:
            filters[f"tag:{tags.VARIANT}"] = list(variants)
        found = aws.own_images(region, filters)
        images = [image for image, _ in found]
        snapshots = aws.snapshot_tags(region, [s for i in images for s in i.snapshot_ids]) if images else {}
        return found, snapshots

    found = fan_out(list(dict.fromkeys(regions)), read)
    images = tuple(i for region in found for i, _ in found[region][0])
    deprecated = {i.image_id: when for region in found for i, text in found[region][0]
                  if (when := _moment(text)) is not None}
    # the in-use facts come from the one gatherer `fleet` reads too (amibuild.lifecycle.consumers)
    uses = gather_uses(aws, pipeline.name, list(found), path, pattern,
                       {region: [i.image_id for i, _ in found[region][0]] for region in found})
    snapshot_tags: dict[str, dict[str, str]] = {}
    for region in found:
        snapshot_tags.update(found[region][1])
    return Facts(images, in_use(uses, keep_versions), snapshot_tags, deprecated, uses)


# ------------------------------------------------------------------------------- execute


class Done(enum.StrEnum):
    DELETED = "deleted"
    DEPRECATED = "deprecated"
    FAILED = "failed"
    KEPT = "kept"  # a channel named it when prune came to deregister it


@dataclass(frozen=True)
class PruneOutcome:
    """What happened to one image prune meant to change."""

    image_id: str
    region: str
    variant: str
    status: Done
    snapshots_deleted: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()  # the image's own failure and any snapshot's


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
                  named: Callable[[str], set[str]] | None = None) -> PruneResult:
    """Carry out the plan: per region (in parallel) image by image; a failure does not stop the rest.

    ``named(region)``: the images channels name there right now, read again right before each
    deregister; an image named there is kept after all (`Done.KEPT`)."""
    at = deprecation_time(now or datetime.now(timezone.utc)) if plan.deprecate_only else None
    work: dict[str, list[ImagePlan]] = defaultdict(list)
    for item in plan.to_change:
        work[item.region].append(item)

    def region_run(region: str) -> list[PruneOutcome]:
        outcomes = [_change(aws, item, at, named) for item in work[region]]
        return _verify(aws, region, outcomes)

    done = fan_out(sorted(work), region_run)
    order = {item.image_id: n for n, item in enumerate(plan.to_change)}
    outcomes = sorted((o for region in done for o in done[region]), key=lambda o: order[o.image_id])
    return PruneResult(plan, tuple(outcomes), at)


def _change(aws: Aws, item: ImagePlan, at: datetime | None,
            named: Callable[[str], set[str]] | None = None) -> PruneOutcome:
    base = dict(image_id=item.image_id, region=item.region, variant=item.variant)
    if named is not None and item.fate is Fate.DELETE:
        try:
            now_named = item.image_id in named(item.region)
        except AmibuildError as exc:
            return PruneOutcome(**base, status=Done.FAILED, errors=(f"not deregistered: channels unreadable: {exc}",))
        if now_named:
            return PruneOutcome(**base, status=Done.KEPT,
                                errors=("a channel names it now (read again right before the deregister): kept",))
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
        return PruneOutcome(**base, status=Done.FAILED, errors=(f"not deregistered: {exc}",))
    deleted, errors = [], []
    for snapshot in item.snapshots:
        try:
            aws.delete_snapshot(item.region, snapshot)
        except NotFound:
            deleted.append(snapshot)
        except AmibuildError as exc:
            errors.append(f"deregistered, but snapshot {snapshot} not deleted: {exc}")
        else:
            deleted.append(snapshot)
    status = Done.FAILED if errors else Done.DELETED
    return PruneOutcome(**base, status=status, snapshots_deleted=tuple(deleted), errors=tuple(errors))


def _verify(aws: Aws, region: str, outcomes: list[PruneOutcome]) -> list[PruneOutcome]:
    """Converge, then check: list the images again; one still registered after a deregister failed."""
    claimed = [o.image_id for o in outcomes if o.status is Done.DELETED]
    if not claimed:
        return outcomes
    try:
        still = {i.image_id for i in aws.describe_images(region, owners=["self"], filters={"image-id": claimed})
                 if i.state != "deregistered"}
    except AmibuildError as exc:
        return [o if o.status is not Done.DELETED else
                PruneOutcome(o.image_id, o.region, o.variant, Done.FAILED, o.snapshots_deleted,
                             (*o.errors, f"could not check that it is gone: {exc}")) for o in outcomes]
    return [o if o.image_id not in still else
            PruneOutcome(o.image_id, o.region, o.variant, Done.FAILED, o.snapshots_deleted,
                         (*o.errors, "still registered after DeregisterImage")) for o in outcomes]


# ------------------------------------------------------------------------------- the command


# ------------------------------------------------------------------------------- report


def report_lines(result: PruneResult) -> Iterable[str]:
    plan = result.plan
    age = f", and any younger than {_age_text(plan.older_than)}" if plan.older_than else ""
    head = (f"prune {plan.pipeline or 'images'}: keep the newest {plan.keep} per variant and region{age}, "
            f"and every image in use (rollback window: {plan.keep_versions} earlier versions per channel)")
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
        if item.fate is Fate.KEEP:
            yield f"    keep    {item.image_id}  {when}  {'; '.join(item.reasons)}"
        else:
            extra = f"  + {', '.join(item.snapshots)}" if item.snapshots else ""
            stays = "".join(f"; leaves {s} ({why})" for s, why in item.kept_snapshots.items())
            yield f"    {verb:7} {item.image_id}  {when}{extra}{stays}"
    if result.outcomes is None:
        return
    for outcome in result.outcomes:
        if outcome.status is Done.FAILED:
            yield f"  NOT {verb}d {outcome.region} {outcome.image_id}: {' / '.join(outcome.errors)}"
        elif outcome.status is Done.KEPT:
            yield f"  kept {outcome.region} {outcome.image_id}: {' / '.join(outcome.errors)}"
        else:
            snaps = f" and {', '.join(outcome.snapshots_deleted)}" if outcome.snapshots_deleted else ""
            yield f"  {outcome.status.value} {outcome.region} {outcome.image_id}{snaps}"
    changed = sum(1 for o in result.outcomes if o.status not in (Done.FAILED, Done.KEPT))
    when = f" (deprecation at {result.deprecate_at:%Y-%m-%d %H:%M} UTC)" if result.deprecate_at else ""
    yield (f"summary: {changed} {verb}d{when}, {len(result.failed)} failed, {len(plan.kept)} kept")


def _age_text(age: timedelta | None) -> str | None:
    if age is None:
        return None
    # the largest unit that divides the age: --older-than takes s, m, h, d and w alike
    seconds = int(age.total_seconds())
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"

