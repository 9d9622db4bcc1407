"""The one place where errors become messages and exit codes, and flags become `Options`.

tasks.py wraps every task body in `run(...)`: an `AmibuildError` becomes one line on stderr
(`amibuild: error: ...`) and its exit code (2 for bad input, 1 for failures, 130 for interrupts);
the traceback is shown only under `invoke --debug` or `AMIBUILD_DEBUG=1`.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from typing import Any, Callable, Iterable, TypeVar

from amibuild import secrets
from amibuild.errors import AmibuildError

T = TypeVar("T")

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def debugging() -> bool:
    return bool(os.environ.get("AMIBUILD_DEBUG")) or logging.getLogger().isEnabledFor(logging.DEBUG)


# Notes about the whole run (no pipeline file found) wait here until the task says something or
# ends well: bad input stays one line, `amibuild: error: ...`, with nothing before it.
_PENDING: list[str] = []


def run(body: Callable[[], T]) -> T:
    """Run a task body; turn expected errors into a one-line message and an exit code."""
    from invoke.exceptions import Exit

    from amibuild.aws import redact

    redact.install()  # before any AWS call: `--debug` logs botocore's requests, headers included
    try:
        result = body()
        _flush_pending()
        return result
    except AmibuildError as exc:
        _PENDING.clear()
        if debugging():
            traceback.print_exc()
        from amibuild.cli.summary import annotate

        message = secrets.mask(str(exc))  # a URL's user:password@ as user:***@
        annotate(message)  # in GitHub Actions, an error naming a line of the pipeline file annotates it
        raise Exit(f"amibuild: error: {message}", code=exc.exit_code) from None
    except KeyboardInterrupt:
        raise Exit("amibuild: interrupted", code=EXIT_INTERRUPTED) from None


def run_channel(body: Callable[[Any], T]) -> tuple[T, Any]:
    """Run a task body that writes channels, with SIGINT / SIGTERM / SIGHUP held off (`cli.signals`):
    (its result, the `Signals` seen). An error after a signal exits with the signal's code."""
    from invoke.exceptions import Exit

    from amibuild.cli.signals import Signals

    with Signals() as signals:
        try:
            return run(lambda: body(signals)), signals
        except Exit as exc:
            if not signals.requested():
                raise
            detail = str(exc.message or "").removeprefix("amibuild: error: ").removeprefix("amibuild: ")
            raise Exit(f"amibuild: interrupted by {signals.name}: {detail}", code=signals.exit_code) from None


def finish_channel(result: Any, signals: Any) -> None:
    """After a channel write that completed: exit 128 + signal, saying what moved, if a signal came."""
    from invoke.exceptions import Exit

    if not signals.requested():
        return
    if result.changed:
        moved = ", ".join(f"{r.region}={r.ami}" for r in result.regions)
        what = f"channel {result.channel} of {result.variant} moved in every region ({moved})"
    else:
        what = f"channel {result.channel} of {result.variant} already held these images: nothing moved"
    raise Exit(f"amibuild: interrupted by {signals.name} after the channel write finished: {what}",
               code=signals.exit_code)


def finish(run: Any) -> None:
    """Exit code of a build run: 130 when interrupted, 1 when a variant failed, else 0."""
    from invoke.exceptions import Exit

    if run.interrupted:
        # `published` is set only for a channel transaction that finished: every region, checked
        published = [o.name for o in run.outcomes or [] if o.published]
        by = f" by {run.signal}" if getattr(run, "signal", "") else ""
        others = [o.name for o in run.outcomes or [] if not o.published]
        # a failed transaction whose put-back failed too says so in its error: never hide that
        stuck = [o.name for o in run.outcomes or [] if "could NOT be put back" in (o.publish_error or "")]
        rest = (f"; not published: {', '.join(others)}" if others else "") + (
            f"; left partly written (see the run record): {', '.join(stuck)}" if stuck else "")
        raise Exit(f"amibuild: interrupted{by}: " + (
            f"published before the interrupt: {', '.join(published)} (every region){rest}"
            if published else f"nothing was published{rest if stuck else ''}") + (
            "; packer was killed before its cleanup finished" if run.aborted else "") + _left_behind(run),
                   code=getattr(run, "exit_code", EXIT_INTERRUPTED) or EXIT_INTERRUPTED)
    if run.failed and all(getattr(o, "input_refused", False) for o in run.failed) and not any(
            o.status == "built" for o in run.outcomes or []):
        # Packer refused values the user gave, before any instance started: bad input, exit 2
        raise Exit(f"amibuild: error: {run.failed[0].error}", code=EXIT_USAGE)
    if run.failed:
        names = ", ".join(f"{o.name} (not published: {o.publish_error})" if o.publish_error and o.status != "failed"
                          else f"{o.name} (log: {o.log})" if o.log else f"{o.name} ({o.error})" for o in run.failed)
        raise Exit(f"amibuild: error: {len(run.failed)} variant(s) failed: {names}{_left_behind(run)}",
                   code=EXIT_FAILED)


def _left_behind(run: Any) -> str:
    """What failed builds left in AWS that amibuild could not remove, with the commands that do."""
    items = [x for o in run.outcomes or [] for x in getattr(o, "left_behind", [])]
    if not items:
        return ""
    return "; LEFT BEHIND (remove with): " + "; ".join(x["command"] for x in items)


def say(line: str) -> None:
    """Progress and notes go to stderr, so stdout stays clean for --json and piping."""
    _flush_pending()
    print(secrets.mask(line), file=sys.stderr, flush=True)  # a URL's user:password@ as user:***@


def _flush_pending() -> None:
    while _PENDING:
        print(_PENDING.pop(0), file=sys.stderr, flush=True)


def emit_json(data: Any) -> None:
    print(secrets.mask(json.dumps(data, indent=2, sort_keys=True, default=str)))


def options(c: Any, *, announce: bool = True, **flags: Any) -> "Options":  # noqa: F821
    """Flags of render/validate/build (+ invoke config) → `commands.Options`.

    Without --pipeline (or the config's `pipeline`), the pipeline file is the nearest
    `amibuild.hcl` from the current folder upwards (`spec.locate`); none found means flags alone,
    said once on stderr when ``announce``. A relative build folder from the config (default
    `build`) lies beside the pipeline file; --build-dir is taken as given.
    """
    from amibuild.cli.commands import Options
    from amibuild.pipeline import Overrides
    from amibuild.cli.locate import find_pipeline

    config = c.config.get("amibuild", {}) if hasattr(c, "config") else {}
    pipeline = flags.get("pipeline") or config.get("pipeline") or None
    if not pipeline:
        found = find_pipeline(os.getcwd())
        if found.path is not None:
            pipeline = os.path.relpath(found.path)
        elif announce:
            _PENDING[:] = [found.not_found_note()]
    build_dir = flags.get("build_dir")
    if not build_dir:
        build_dir = str(config.get("build_dir") or "build")
        if pipeline and not os.path.isabs(build_dir):
            build_dir = os.path.relpath(os.path.join(os.path.dirname(os.path.abspath(pipeline)), build_dir))

    def tup(name: str) -> tuple[str, ...]:
        value = flags.get(name) or ()
        return tuple(value) if isinstance(value, (list, tuple)) else (value,)

    overrides = Overrides(
        variants=tup("variant"),
        all_variants=bool(flags.get("all")),
        base=flags.get("base") or "",
        upstream=flags.get("upstream") or "",
        upstream_ref=flags.get("upstream_ref") or "",
        os=flags.get("os") or "",
        kubernetes_version=flags.get("k8s") or "",
        arch=flags.get("arch") or "",
        flavor=flags.get("flavor") or "",
        regions=tup("region"),
        extra_packages=tup("extra_pkg"),
        extra_repos=tup("extra_repo"),
        variables=tup("var"),
        var_files=tup("var_file"),
    )
    return Options(
        pipeline_file=pipeline,
        overrides=overrides,
        build_dir=build_dir,
        packer=config.get("packer", "packer"),
        profile=flags.get("profile") or os.environ.get("AWS_PROFILE") or None,
        cache_dir=config.get("cache_dir") or None,
    )


def lines(items: Iterable[str]) -> None:
    """Report lines on stderr (progress, notes)."""
    for item in items:
        say(item)


def lines_out(items: Iterable[str]) -> None:
    """Result lines on stdout (the answer to the command)."""
    for item in items:
        print(item, flush=True)
