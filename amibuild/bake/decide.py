"""The executor's decisions, as pure functions over the facts it gathered (tested as tables).

* `packer_end`: what a finished (or killed) `packer build` process means, from its exit code, the
  errors and steps its machine-readable stream showed, and what amibuild itself did to it
  (interrupted, timed out, stopped it for a lost endpoint).
* `lease_step`: with a build lease's answer in hand, build, wait, fail busy, or stop (interrupted).
* `reuse_after_lease`: once the lease is held, whether another run's image is to be reused.
* `ready_images`: which image of a fingerprint to reuse in each region, if every region has one.

The executor (`amibuild.bake.executor`) does the I/O and acts on these answers.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from amibuild import tags


class PackerEnd(enum.StrEnum):
    """What one `packer build` process's end means."""

    CLEAN = "clean"  # exit 0, no error: artifacts to read
    INTERRUPTED = "interrupted"  # amibuild was signalled and cancelled it
    ENDPOINT_LOST = "endpoint lost"  # the watchdog stopped it: the endpoint stopped answering
    TIMED_OUT = "timed out"  # --timeout ran out
    STOPPED = "stopped"  # amibuild could not go on (its log refused, an error of its own) and stopped it
    REFUSED = "refused"  # errors before any step started: Packer refused the template or its values
    FAILED = "failed"  # a step failed (or a non-zero exit with nothing else to go by)

    @property
    def needs_cleanup(self) -> bool:
        """Packer may have left instances, key pairs, groups or images behind."""
        return self is not PackerEnd.CLEAN


@dataclass(frozen=True)
class PackerFacts:
    """What is known once a `packer build` process has ended."""

    exit_code: int
    errors: tuple[str, ...] = ()  # the stream's error lines
    failed_step: str | None = None  # the step running when it failed (None: no step had started)
    artifacts: bool = False  # the stream announced an artifact
    interrupted: bool = False  # amibuild was interrupted (and signalled Packer)
    timed_out: bool = False
    stalled: str = ""  # why the watchdog declared the endpoint lost, if it did
    stopped: str = ""  # why amibuild itself stopped it (a full disk, an error of its own), if it did


def packer_end(facts: PackerFacts) -> PackerEnd:
    """The meaning of a process end. Interrupt wins (the user asked), then the watchdog, then
    amibuild's own stop, then the timeout (each killed Packer, whose own exit then says little),
    then Packer's own verdict."""
    if facts.interrupted:
        return PackerEnd.INTERRUPTED
    if facts.stalled:
        return PackerEnd.ENDPOINT_LOST
    if facts.stopped:
        return PackerEnd.STOPPED
    if facts.timed_out:
        return PackerEnd.TIMED_OUT
    if facts.exit_code == 0 and not facts.errors:
        return PackerEnd.CLEAN
    if facts.errors and facts.failed_step is None and not facts.artifacts:
        return PackerEnd.REFUSED
    return PackerEnd.FAILED


class LeaseStep(enum.StrEnum):
    """What to do after asking for a variant's build lease."""

    TAKEN = "taken"  # the lease is ours: go on to the reuse check and the build
    WAIT = "wait"  # another run holds it: wait and ask again
    BUSY = "busy"  # another run holds it and --no-wait: fail this variant now
    INTERRUPTED = "interrupted"  # a signal came: stop asking


def lease_step(*, interrupted: bool, held_by: object | None, wait: bool) -> LeaseStep:
    """``held_by``: the live holder the lease named (None: the lease is now ours)."""
    if interrupted:
        return LeaseStep.INTERRUPTED
    if held_by is None:
        return LeaseStep.TAKEN
    return LeaseStep.WAIT if wait else LeaseStep.BUSY


def should_look_for_reuse(*, waited_for_run: str | None, force: bool) -> bool:
    """Look again for the image once the lease is held: after waiting for another run (it may
    have built it), or when not --force (a run may have finished it since this one planned)."""
    return waited_for_run is not None or not force


@dataclass(frozen=True)
class Reuse:
    """Another run's image, available in every region: reuse it instead of building."""

    amis: Mapping[str, str]
    reason: str


def reuse_after_lease(*, waited_for_run: str | None, found: Mapping[str, str] | None) -> Reuse | None:
    """``found``: `ready_images` of the fingerprint (None: not in every region)."""
    if not found:
        return None
    if waited_for_run is not None:
        return Reuse(dict(found), f"built by run {waited_for_run} while this run waited for it")
    return Reuse(dict(found), "built by another run since this run planned")


@dataclass(frozen=True)
class ImageFact:
    """The part of a DescribeImages answer the reuse decision needs."""

    image_id: str
    state: str
    creation_date: str
    tags: Mapping[str, str] = field(default_factory=dict)  # its amibuild:run-id tells one build from another


def ready_images(regions: Sequence[str], found: Mapping[str, Sequence[ImageFact]]) -> dict[str, str] | None:
    """Region -> an available image of one build run (its `amibuild:run-id` tag) in every region, the newest
    run that has one everywhere (its newest image in each); None when no run does. Two runs of one
    fingerprint are two builds (packages resolved at build time): a channel holds one build in every region."""
    runs: dict[str, dict[str, ImageFact]] = {}
    for region in regions:
        for image in found.get(region, []):
            if image.state == "available":
                held = runs.setdefault(image.tags.get(tags.RUN_ID, ""), {})
                if region not in held or (image.creation_date, image.image_id) > (held[region].creation_date,
                                                                                  held[region].image_id):
                    held[region] = image
    whole = [held for held in runs.values() if len(held) == len(regions)]
    if not whole:
        return None
    newest = max(whole, key=lambda held: max((i.creation_date, i.image_id) for i in held.values()))
    return {region: newest[region].image_id for region in regions}
