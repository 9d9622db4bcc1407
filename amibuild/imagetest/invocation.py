"""One check's SSM invocation read as its verdict: the ResponseCode and the status decide, the output is data. Pure.

SSM's statuses (GetCommandInvocation's Status and StatusDetails) say whether the command ran:
``Success`` / ``Failed`` with a ResponseCode ran, and that exit status is the check's verdict;
``ExecutionTimedOut`` ran past its time, a failure of the check; every other end (the command not
delivered, the agent or the instance gone, cancelled) gave no result: "not tested", with the reason,
which never fails the image nor replaces an earlier verdict on it.
"""

from __future__ import annotations

from dataclasses import dataclass

from amibuild.aws.testing import ERROR_LIMIT, OUTPUT_LIMIT, Invocation, StoredOutput
from amibuild.pipeline import imagetests
from amibuild.printable import printable

Verdict = imagetests.Verdict
# StatusDetails that mean the command never gave a result on the instance
NO_RESULT = frozenset({"DeliveryTimedOut", "Undeliverable", "Terminated", "Cancelled", "Canceled", "Cancelling",
                       "InvalidPlatform", "AccessDenied", "Delayed"})
# ... and the ones that say the instance or its agent is gone: the checks after it are not sent
GONE = frozenset({"DeliveryTimedOut", "Terminated"})


@dataclass(frozen=True)
class Output:
    """What is known of a command's output: SSM's kept head, and from S3 (when asked for) the whole's
    size and end."""

    stdout: str
    stderr: str
    stored_stdout: StoredOutput | None = None
    stored_stderr: StoredOutput | None = None
    from_s3: bool = False  # the command wrote its output to S3 and it was read

    def text(self) -> tuple[str, int | None, bool]:
        """(the output to keep, its size in bytes when known, whether it is only the head)."""
        if self.from_s3:
            parts = [s.tail for s in (self.stored_stdout, self.stored_stderr) if s is not None and s.tail]
            size = sum(s.size for s in (self.stored_stdout, self.stored_stderr) if s is not None)
            return "\n".join(p.rstrip("\n") for p in parts), size, False
        head_only = len(self.stdout) >= OUTPUT_LIMIT or len(self.stderr) >= ERROR_LIMIT
        return "\n".join(p.rstrip("\n") for p in (self.stdout, self.stderr) if p), None, head_only


def judge(name: str, invocation: Invocation, output: Output, seconds: float) -> imagetests.CheckResult:
    """The check's result from its finished invocation."""
    text, size, head_only = output.text()
    details = invocation.status_details or invocation.status
    code = invocation.response_code

    def result(verdict: Verdict, exit_status: int | None, reason: str = "") -> imagetests.CheckResult:
        return imagetests.CheckResult(name, "boot", verdict, exit_status, seconds, text, reason=reason,
                                      output_size=size, head_only=head_only)

    if details in NO_RESULT or invocation.status in ("Cancelled", "Cancelling"):
        said = (invocation.stderr or invocation.stdout).strip().splitlines()[:1]
        return result(Verdict.NOT_TESTED, None, f"SSM command {invocation.command_id}: {details}"
                      + (f": {printable(said[0][:300])}" if said else ""))
    if details == "ExecutionTimedOut" or invocation.status == "TimedOut":
        return result(Verdict.FAILED, code if code >= 0 else None, f"ran past its timeout (SSM {details})")
    if code < 0:
        return result(Verdict.NOT_TESTED, None, f"SSM command {invocation.command_id}: {details} with no exit status")
    if invocation.status == "Success" and code == 0:
        return result(Verdict.PASSED, 0)
    return result(Verdict.FAILED, code)


def not_tested(name: str, reason: str, seconds: float = 0.0) -> imagetests.CheckResult:
    """A check that gave no result, and why."""
    return imagetests.CheckResult(name, "boot", Verdict.NOT_TESTED, None, seconds, reason=reason)
