"""What a build run says of each variant: its `BuildStatus` and its frozen `BuildOutcome` (the build
only: publishing says its own result), and `WorkingOutcome`, the one a worker fills in while the
variant's build runs, frozen when it ends."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Mapping

from amibuild.bake.build_plan import BuildDecision


class BuildStatus(enum.StrEnum):
    """Where one variant's build stands; its value is what the JSON and the run record say."""

    QUEUED = "queued"
    BUILT = "built"
    SKIPPED = "skipped"  # reused: an image with its fingerprint is in every region
    FAILED = "failed"
    INTERRUPTED = "interrupted"

    @property
    def has_image(self) -> bool:
        """Built or reused: there is an image to publish or share."""
        return self in (BuildStatus.BUILT, BuildStatus.SKIPPED)


@dataclass(frozen=True)
class BuildOutcome:
    """What happened to one variant in this run (the build only: publishing says its own result)."""

    name: str
    fingerprint: str
    decision: BuildDecision
    reason: str
    status: BuildStatus = BuildStatus.QUEUED
    amis: Mapping[str, str] = field(default_factory=dict)
    log: str = ""
    error: str = ""
    started: str = ""
    seconds: float = 0.0
    input_refused: bool = False  # Packer refused a value the user gave (exit 2 when nothing else ran)
    lease: str = ""  # what the build lease did: waited for another run, took over a stale one
    removed: tuple[str, ...] = ()  # leftovers of a failed build, removed
    left_behind: tuple[Mapping, ...] = ()  # leftovers not removed: kind, region, id, why, command
    # build-ami --boot-test: imagetest.boot.BootTestResult.to_dict(), set on a new outcome after the test
    boot_test: Mapping = field(default_factory=dict)
    boot_error: str = ""  # why the variant is not published after its boot test ("" : passed, or none ran)

    @property
    def failed(self) -> bool:
        return self.status in (BuildStatus.FAILED, BuildStatus.INTERRUPTED) or bool(self.boot_error)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "status": str(self.status),
            "fingerprint": self.fingerprint,
            "decision": str(self.decision),
            "reason": self.reason,
            "amis": dict(sorted(self.amis.items())),
            "log": self.log,
            "error": self.error,
            "started": self.started,
            "seconds": round(self.seconds, 3),
            "lease": self.lease,
            "leftovers_removed": list(self.removed),
            "left_behind": [dict(x) for x in self.left_behind],
            **({"boot_test": dict(self.boot_test)} if self.boot_test else {}),
            **({"boot_error": self.boot_error} if self.boot_error else {}),
        }


@dataclass
class WorkingOutcome:
    """One variant's outcome while its build runs (the worker fills it in); `freeze` gives the result."""

    name: str
    fingerprint: str
    decision: BuildDecision
    reason: str
    status: BuildStatus = BuildStatus.QUEUED
    amis: dict[str, str] = field(default_factory=dict)
    log: str = ""
    error: str = ""
    started: str = ""
    seconds: float = 0.0
    input_refused: bool = False
    lease: str = ""
    removed: list[str] = field(default_factory=list)
    left_behind: list[dict] = field(default_factory=list)

    def freeze(self) -> BuildOutcome:
        return BuildOutcome(**{**vars(self), "amis": dict(self.amis), "removed": tuple(self.removed),
                               "left_behind": tuple(self.left_behind)})

