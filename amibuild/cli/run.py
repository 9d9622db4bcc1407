"""The one place where errors and results become messages and exit codes.

Every task body runs in `run(...)` (`amibuild.cli.command.task`): an `AmibuildError` becomes one line on stderr
(`amibuild: error: ...`) and its exit code (`amibuild.errors.ExitCode`: 2 for bad input, 1 for
failures, 128 + the signal for interrupts); the traceback is shown only under `amibuild --debug`
or `AMIBUILD_DEBUG=1`. A task's result says itself whether it failed: its `raise_for_status` runs
in the task's `run` once its output is printed (`show`), so the same words and codes apply.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from typing import Any, Callable, Iterable, TypeVar

from invoke.exceptions import Exit

from amibuild import redact, secrets
from amibuild.errors import AmibuildError, EndpointUnreachable, ExitCode, Interrupted, NoCredentials
from amibuild.jobs.shown import Shown
from amibuild.views.summary import annotate, publish

T = TypeVar("T")

ERROR = "amibuild: error: "  # how every error line starts (the Program's own parse errors too)
# What else to try, said here: the stages' errors name AWS's own settings only; the CLI has the emulator.
HINTS = {NoCredentials: ", or run `amibuild sandbox` for the local emulator",
         EndpointUnreachable: ", or that `amibuild sandbox` is running"}
# doctor's own (`amibuild.jobs.doctor_job.Hints`): after the missing credentials' advice, before "fix or unset"
DOCTOR_HINTS = {"credentials": HINTS[NoCredentials], "endpoint": "start the emulator (`amibuild sandbox`) or "}


def debugging() -> bool:
    return bool(os.environ.get("AMIBUILD_DEBUG")) or logging.getLogger().isEnabledFor(logging.DEBUG)


def message(exc: AmibuildError) -> str:
    """The one line an error is shown as (a URL's user:password@ shown as user:***@)."""
    text = secrets.mask(str(exc)) + next((hint for kind, hint in HINTS.items() if isinstance(exc, kind)), "")
    if isinstance(exc, Interrupted) and exc.summary:
        return f"amibuild: {text}"
    return f"{ERROR}{text}"


# Notes about the whole run (no pipeline file found) wait here until the task says something or
# ends well: bad input stays one line, `amibuild: error: ...`, with nothing before it.
_PENDING: list[str] = []


def run(body: Callable[[], T]) -> T:
    """Run a task body; turn expected errors into a one-line message and an exit code."""
    redact.install()  # before any AWS call: `--debug` logs botocore's requests, headers included
    try:
        result = body()
        _flush_pending()
        return result
    except AmibuildError as exc:
        _PENDING.clear()
        if debugging():
            traceback.print_exc()

        annotate(secrets.mask(str(exc)))  # in GitHub Actions, an error naming a line of the pipeline file annotates it
        raise Exit(message(exc), code=int(exc.exit_code)) from None
    except KeyboardInterrupt:
        raise Exit(message(Interrupted(summary=True)), code=ExitCode.INTERRUPTED) from None


def show(shown: Shown, json: bool, *, markdown: bool = False) -> None:
    """Print a job's `Shown`: with --json its data as JSON, else (unless --markdown and it has a summary)
    its text or its lines; then its Markdown summary to $GITHUB_STEP_SUMMARY (and with --markdown to
    stdout), then its notes; then exit as its verdict says."""
    if json:
        emit_json(shown.to_dict())
    elif markdown and shown.summary:  # the summary in place of the lines
        pass
    elif shown.text is not None:
        _flush_pending()
        print(shown.text, end="", flush=True)  # a document (YAML, a policy): as it is, credentials and all
    else:
        lines_out(shown.report_lines())
    text = shown.markdown()
    if text is not None and (problem := publish(text, to_stdout=markdown)):
        say(f"warning: {problem}")
    for note in shown.notes:
        say(note)
    shown.raise_for_status()


def say(line: str) -> None:
    """Progress and notes go to stderr, so stdout stays clean for --json and piping."""
    _flush_pending()
    print(secrets.mask(line), file=sys.stderr, flush=True)  # a URL's user:password@ as user:***@


def _flush_pending() -> None:
    while _PENDING:
        print(_PENDING.pop(0), file=sys.stderr, flush=True)


def emit_json(data: Any) -> None:
    _flush_pending()  # the notes about the run come before its result, as they do before a line on stderr
    print(secrets.mask(json.dumps(data, indent=2, sort_keys=True, default=str)))


def pending(note: str) -> None:
    """A note about the whole run, said only once the task says something or ends well."""
    _PENDING[:] = [note]


def lines_out(items: Iterable[str]) -> None:
    """Result lines on stdout (the answer to the command)."""
    _flush_pending()
    for item in items:
        print(secrets.mask(item), flush=True)  # a URL's user:password@ as user:***@, as say() and emit_json
