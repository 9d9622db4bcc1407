"""One exception tree for amibuild.

Library code raises these and never prints or exits; ``amibuild.cli.run.run`` is the one place that
turns them into a one-line message and an exit code.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """What amibuild's exit status means (README: "Exit codes")."""

    OK = 0
    FAILED = 1  # a variant failed, AWS refused, a file amibuild ships is missing
    USAGE = 2  # bad input: nothing was done or written
    INCOMPLETE = 3  # a rehearsal stopped at a step it cannot rehearse (the later steps never ran)
    HANGUP = 129  # SIGHUP while channels were written
    INTERRUPTED = 130  # SIGINT
    TERMINATED = 143  # SIGTERM

    @classmethod
    def for_signal(cls, signum: int) -> "ExitCode":
        """128 + the signal, for the three signals amibuild handles (else INTERRUPTED)."""
        try:
            return cls(128 + int(signum))
        except ValueError:
            return cls.INTERRUPTED


class AmibuildError(Exception):
    """Root of everything amibuild raises on purpose."""

    exit_code: ExitCode = ExitCode.FAILED


class UsageError(AmibuildError):
    """Bad input from the user; refused before anything was done."""

    exit_code = ExitCode.USAGE


class SpecError(UsageError):
    """A pipeline file field or a flag holds a value amibuild refuses."""


class VarFileError(UsageError):
    """A Packer var-file does not parse."""


class UpstreamError(UsageError):
    """An upstream amazon-eks-ami checkout is missing, unreadable or of an unknown layout."""


class NotUserData(UsageError):
    """Input that is not user data: no base64, gzip, MIME, cloud-config, script or NodeConfig."""


class UserDataTooBig(NotUserData):
    """User data beyond a cap of the decoder: bytes read, bytes decoded over all layers, nesting."""

    def __init__(self, message: str, *, nesting: bool = False) -> None:
        super().__init__(message)
        self.nesting = nesting  # the nesting cap, not the byte cap, refused it


class RolloutRefused(UsageError):
    """The stack, node group or channel named cannot be rolled out as asked (nothing was changed)."""


class PackerInputRefused(UsageError):
    """`packer validate` refused a value the user gave (a flag, var-file or pipeline field)."""


class TemplateError(AmibuildError):
    """A template (packer/, cloudformation/) failed to render or load."""


class PackerError(AmibuildError):
    """The packer binary failed."""


class PackerNotFound(PackerError):
    """No usable packer binary."""

    exit_code = ExitCode.USAGE


class PackerValidateError(PackerError):
    """`packer validate` or `packer fmt -check` refused a rendered file."""


class PackerOutputError(PackerError):
    """Packer's machine-readable output or manifest is unreadable or inconsistent."""


class AwsError(AmibuildError):
    """An AWS call failed."""


class NoCredentials(AwsError):
    """No AWS credentials were found."""

    exit_code = ExitCode.USAGE


class ExpiredToken(AwsError):
    """The AWS credentials have expired."""

    exit_code = ExitCode.USAGE


class AccessDenied(AwsError):
    """AWS refused an action for lack of permission."""


class EndpointUnreachable(AwsError):
    """The AWS endpoint (or the endpoint override) cannot be reached."""


class DeadlineExceeded(EndpointUnreachable):
    """AWS gave no answer within a channel operation's deadline (`amibuild.aws.deadline`)."""


class NotFound(AwsError):
    """An AWS resource that should exist does not."""


class PublishRefused(AmibuildError):
    """A publish, promote or rollback was refused before anything was written."""


class GateRefused(PublishRefused):
    """The image does not meet the gate of the channel it was to enter; nothing was written."""

    def __init__(self, message: str, *, gate: str = "", missing: tuple[str, ...] = (),
                 amis: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.gate, self.missing, self.amis = gate, missing, dict(amis or {})  # for the gate-refused event


class PublishConflict(AmibuildError):
    """Another writer moved the channel between amibuild's read and its write."""

    stuck_regions: tuple[str, ...] = ()  # regions whose put-back failed: left holding amibuild's write


class ChannelBusy(PublishConflict):
    """Another writer holds the channel's lease (and kept it past the wait); nothing was written."""


class LeaseLost(PublishConflict):
    """The writer's lease ran out or was taken over before a write; it wrote no more."""


class PublishFailed(AmibuildError):
    """A write failed part-way; the regions already written were put back."""

    stuck_regions: tuple[str, ...] = ()  # regions whose put-back failed: left holding amibuild's write


class ChannelSplit(AmibuildError):
    """`channels --check`: a channel's regions hold images of different builds (or some hold none)."""


class RolloutBlocked(AmibuildError):
    """The stack or node group is busy or broken and cannot be updated now (nothing was changed)."""


class RolloutFailed(AmibuildError):
    """The update failed, rolled back, timed out, changed nothing or did not converge."""


class PruneFailed(AmibuildError):
    """Some images or snapshots prune meant to delete (or deprecate) are still there."""


class FleetBehind(AmibuildError):
    """`fleet --check-behind`: a consumer is further behind its channel than allowed, or orphaned."""


class Unverified(AmibuildError):
    """`verify`: an image's signed statements are missing, do not verify, or say it failed."""


class BuildFailed(AmibuildError):
    """One or more variants failed to build, or were built and not published."""


class BootTestFailed(AmibuildError):
    """`test-ami`: a check failed on the booted image (or none could run)."""


class OutputNotWritten(AmibuildError):
    """A file amibuild writes under build/ (rendered files, a run record) could not be written."""


class RecordNotWritten(OutputNotWritten):
    """The run record could not be written (disk full, read-only folder): the AMIs made are named."""


class CleanupIncomplete(AmibuildError):
    """clean-run found leftovers it could not remove."""


class HclSyntaxError(AmibuildError, ValueError):
    """python-hcl2 refused the text; carries the line number when the parser gave one."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


class Interrupted(AmibuildError):
    """The run was interrupted by Ctrl-C, SIGTERM or SIGHUP; its exit code is 128 + that signal.

    ``summary``: the message sums up the whole interrupted run ("interrupted by SIGTERM: ..."),
    not one step's error.
    """

    exit_code = ExitCode.INTERRUPTED

    def __init__(self, message: str = "interrupted", exit_code: int = ExitCode.INTERRUPTED, *,
                 summary: bool = False) -> None:
        super().__init__(message)
        self.exit_code = ExitCode(exit_code)
        self.summary = summary


class RehearsalUnavailable(UsageError):
    """`rehearse` cannot make its throwaway copy here (not root, not Linux, a tool missing)."""


class RehearsalError(AmibuildError):
    """The rehearsal itself broke (the copy could not be entered), not the chain it rehearsed."""


class RehearsalFailed(AmibuildError):
    """A rehearsed provisioning step failed: the variant's chain has an error."""


class RehearsalIncomplete(AmibuildError):
    """The rehearsal stopped at a step it cannot rehearse: the later steps were never run."""

    exit_code = ExitCode.INCOMPLETE


class MissingExtra(UsageError):
    """A task needs an optional part of amibuild that is not installed (e.g. `amibuild[cluster]`)."""


class PackageDataMissing(AmibuildError):
    """A file amibuild ships (template, provisioner script, example) is missing: the install is broken."""
