"""EC2's safeguards on the images a variant's channels hold: deregistration protection, and a
deprecation time that a held image never reaches.

`decide` (pure) turns the held images and the pipeline's settings into `GuardStep`s, each with its
reason: PROTECT an image whose DeregistrationProtection is not what the pipeline asks for; with
``deprecate_after``, DEPRECATE (move its time to now + deprecate_after) an image with no time or
one more than `SLACK` short of that; without it, UNDEPRECATE (clear) an image's time. `held` reads
which image each channel of the variant holds (the one being written counted at its new image);
`apply` carries the steps out, before the channel's write points at anything (`amibuild.channels.write`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Callable, Mapping, Sequence

from amibuild.aws import Aws, Image, fan_out
from amibuild.errors import AmibuildError, PublishFailed
from amibuild.lease import is_lease
from amibuild.pipeline.naming import PipelineLike, VariantLike, name_pattern
from amibuild.pipeline.protection import ProtectionSettings
from amibuild.values import parse_iso_time

SLACK = timedelta(days=1)  # a held image's deprecation time is moved when it falls more than this short


class GuardAction(enum.StrEnum):
    PROTECT = "protect"  # EnableImageDeregistrationProtection
    DEPRECATE = "deprecate"  # EnableImageDeprecation at `at`
    UNDEPRECATE = "undeprecate"  # DisableImageDeprecation


@dataclass(frozen=True)
class GuardStep:
    """One safeguard write on one image in one region, and why."""

    region: str
    image_id: str
    action: GuardAction
    reason: str
    at: datetime | None = None  # DEPRECATE: the new deprecation time
    cooldown: bool = False  # PROTECT: WithCooldown

    def describe(self) -> str:
        return f"{self.region}: {self.action.value} {self.image_id} ({self.reason})"


def decide(held: Mapping[tuple[str, str], Image | None], holders: Mapping[tuple[str, str], Sequence[str]], *,
           protection: ProtectionSettings, deprecate_after: timedelta | None, now: datetime) -> tuple[GuardStep, ...]:
    """The safeguard steps for every held image (pure). ``held``: (region, ami) -> the image (None: not
    found, left to the write's own checks); ``holders``: (region, ami) -> the channels holding it."""
    steps: list[GuardStep] = []
    wanted = protection.wanted
    # whole minutes, as EC2 keeps it (it rounds to the nearest): 3650d stays within its 10-year limit
    target = (now + deprecate_after).replace(second=0, microsecond=0) if deprecate_after else None
    for (region, ami), image in sorted(held.items()):
        if image is None:
            continue
        by = f"held by channel {', '.join(sorted(holders.get((region, ami), ())))}"
        if image.protection != wanted:
            steps.append(GuardStep(region, ami, GuardAction.PROTECT,
                                   f"{by}: deregistration protection {image.protection} -> {wanted}",
                                   cooldown=protection.cooldown))
        current = parse_iso_time(image.deprecation_time)
        if target is not None and (current is None or current < target - SLACK):
            was = f"deprecation time {current:%Y-%m-%d %H:%M} UTC" if current else "no deprecation time"
            steps.append(GuardStep(region, ami, GuardAction.DEPRECATE,
                                   f"{by}: {was} -> {target:%Y-%m-%d %H:%M} UTC (deprecate_after)", at=target))
        elif target is None and image.deprecation_time:
            steps.append(GuardStep(region, ami, GuardAction.UNDEPRECATE,
                                   f"{by}: deprecation time {image.deprecation_time} cleared (the variant sets no "
                                   "deprecate_after, and a channel's image must not deprecate)"))
    return tuple(steps)


# ------------------------------------------------------------------------------- reads and writes


def held(aws: Aws, pipeline: PipelineLike, variant: VariantLike, *, channel: str, amis: Mapping[str, str],
         regions: Sequence[str], template: str | None = None,
         known: Mapping[str, Image | None] | None = None) -> tuple[dict[tuple[str, str], Image | None],
                                                                    dict[tuple[str, str], list[str]]]:
    """Which image every channel of ``variant`` holds in each region once ``channel`` holds ``amis``, and
    those images (``known``: region -> the image of ``amis`` already read)."""
    # this variant's channels only: the path lists them, not every variant's (a page walk per variant
    # over the whole pipeline would grow with the number of variants)
    path, pattern = name_pattern(pipeline, template, known={"variant": variant.name, "k8s": variant.kubernetes_version})
    listed = fan_out(list(regions), lambda r: aws.parameters_under(path, r))
    holders: dict[tuple[str, str], list[str]] = {}
    for region in regions:
        for p in listed[region]:
            match = pattern.match(p.name)
            if not match or is_lease(p.name) or match.group("channel") == channel or not p.value:
                continue
            holders.setdefault((region, p.value), []).append(match.group("channel"))
    for region, ami in amis.items():
        if ami:
            holders.setdefault((region, ami), []).append(channel)
    known = known or {}
    images: dict[tuple[str, str], Image | None] = {(region, ami): image for region, ami in holders
                                                   if (image := known.get(region)) is not None and image.image_id == ami}
    images.update(aws.images_at([pair for pair in holders if pair not in images]))
    return images, holders


def apply(aws: Aws, steps: Sequence[GuardStep], check: Callable[[str], None]) -> None:
    """Carry out the steps, each region's in order, the regions in parallel; ``check(what)`` (the writer's
    lease check) before each. Raises `PublishFailed` naming what was done and what was not."""
    if not steps:
        return
    regions = sorted({s.region for s in steps})

    def run(region: str) -> tuple[list[str], AmibuildError | None]:
        """The steps done in the region, and the error that stopped it (None: every step done)."""
        done: list[str] = []
        for step in (s for s in steps if s.region == region):
            try:
                check(f"{step.action.value} {step.image_id} in {region}")
                _one(aws, step)
            except AmibuildError as exc:
                return done, exc
            done.append(f"{step.action.value} {step.image_id}")
        return done, None

    outcomes = fan_out(regions, run)
    failed = {r: error for r, (_, error) in outcomes.items() if error is not None}
    if failed:
        done = [f"{r}: {d}" for r, (steps_done, _) in sorted(outcomes.items()) for d in steps_done]
        raise PublishFailed(
            "the channel's images could not be safeguarded, so the channel was not written (nothing written to SSM): "
            + "; ".join(f"{r}: {e}" for r, e in sorted(failed.items()))
            + (f". Done before that (left as is: harmless, prune turns protection off): {'; '.join(done)}"
               if done else ""))


def _one(aws: Aws, step: GuardStep) -> None:
    if step.action is GuardAction.PROTECT:
        aws.protect_image(step.region, step.image_id, cooldown=step.cooldown)
    elif step.action is GuardAction.DEPRECATE:
        assert step.at is not None
        aws.deprecate_image(step.region, step.image_id, step.at)
    else:
        aws.undeprecate_image(step.region, step.image_id)
