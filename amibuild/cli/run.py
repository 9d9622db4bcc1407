"""The one place where errors and results become messages and exit codes, and flags become `Options`.

tasks.py wraps every task body in `run(...)`: an `AmibuildError` becomes one line on stderr
(`amibuild: error: ...`) and its exit code (`amibuild.errors.ExitCode`: 2 for bad input, 1 for
failures, 128 + the signal for interrupts); the traceback is shown only under `amibuild --debug`
or `AMIBUILD_DEBUG=1`. A task's result says itself whether it failed: the task passes its
`raise_for_status` through `run` once its output is printed, so the same words and codes apply.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

from amibuild import secrets
from amibuild.cli.locate import find_pipeline
from amibuild.errors import AmibuildError, EndpointUnreachable, ExitCode, Interrupted, NoCredentials, SpecError
from amibuild.jobs.signals import Signals

T = TypeVar("T")

ERROR = "amibuild: error: "  # how every error line starts (the Program's own parse errors too)
# What else to try, said here: the stages' errors name AWS's own settings only; the CLI has the emulator.
HINTS = {NoCredentials: ", or run `amibuild sandbox` for the local emulator",
         EndpointUnreachable: ", or that `amibuild sandbox` is running"}


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
    from invoke.exceptions import Exit

    from amibuild import redact  # deferred: logging filters, installed when the program starts

    redact.install()  # before any AWS call: `--debug` logs botocore's requests, headers included
    try:
        result = body()
        _flush_pending()
        return result
    except AmibuildError as exc:
        _PENDING.clear()
        if debugging():
            traceback.print_exc()
        from amibuild.cli.summary import annotate  # deferred: the summaries only when an error is shown

        annotate(secrets.mask(str(exc)))  # in GitHub Actions, an error naming a line of the pipeline file annotates it
        raise Exit(message(exc), code=int(exc.exit_code)) from None
    except KeyboardInterrupt:
        raise Exit(message(Interrupted(summary=True)), code=ExitCode.INTERRUPTED) from None


def run_channel(body: Callable[[Any], T]) -> tuple[T, Any]:
    """Run a task body that writes channels, with SIGINT / SIGTERM / SIGHUP held off (`jobs.signals`):
    (its result, the `Signals` seen). An error after a signal exits with the signal's code."""
    with Signals() as signals:
        def guarded():
            try:
                return body(signals)
            except AmibuildError as exc:
                if not signals.requested():
                    raise
                raise Interrupted(f"interrupted by {signals.name}: {exc}", signals.exit_code, summary=True) from exc
        return run(guarded), signals


def finish_channel(result: Any, signals: Any) -> None:
    """After a channel write that completed: exit 128 + signal, saying what moved, if a signal came."""
    if not signals.requested():
        return
    if result.changed:
        moved = ", ".join(f"{r.region}={r.ami}" for r in result.regions)
        what = f"channel {result.channel} of {result.variant} moved in every region ({moved})"
    else:
        what = f"channel {result.channel} of {result.variant} already held these images: nothing moved"

    def stop() -> None:
        raise Interrupted(f"interrupted by {signals.name} after the channel write finished: {what}",
                          signals.exit_code, summary=True)

    run(stop)


def finish(result: Any) -> None:
    """Exit as a task's result says: its `raise_for_status()` run through `run`."""
    run(result.raise_for_status)


def say(line: str) -> None:
    """Progress and notes go to stderr, so stdout stays clean for --json and piping."""
    _flush_pending()
    print(secrets.mask(line), file=sys.stderr, flush=True)  # a URL's user:password@ as user:***@


def _flush_pending() -> None:
    while _PENDING:
        print(_PENDING.pop(0), file=sys.stderr, flush=True)


def emit_json(data: Any) -> None:
    print(secrets.mask(json.dumps(data, indent=2, sort_keys=True, default=str)))


def options(c: Any, request: Any = None, *, announce: bool = True, **flags: Any) -> "Options":  # noqa: F821
    """A task's request (`amibuild.cli.command`; the tasks not declared as one yet pass their flags
    by name) + invoke config → `pipeline.options.Options`.

    Without --pipeline (or the config's `pipeline`), the pipeline file is the nearest
    `amibuild.hcl` from the current folder upwards (`spec.locate`); none found means flags alone,
    said once on stderr when ``announce``. A relative build folder from the config (default
    `build`) lies beside the pipeline file; --build-dir is taken as given.
    """
    # deferred: the pipeline model only once a task runs, not on the `amibuild --list` path
    from amibuild.pipeline import Overrides
    from amibuild.pipeline.options import Options

    def get(name: str) -> Any:
        return getattr(request, name, None) if request is not None else flags.get(name)

    config = c.config.get("amibuild", {}) if hasattr(c, "config") else {}
    pipeline = get("pipeline") or config.get("pipeline") or None
    if not pipeline:
        found = getattr(c.config, "_amibuild_found", None) if hasattr(c, "config") else None
        if found is None or found.searched[0] != Path(os.getcwd()).resolve():  # not the Program's, or moved
            found = find_pipeline(os.getcwd())
        if found.path is not None:
            pipeline = os.path.relpath(found.path)
        elif announce:
            _PENDING[:] = [found.not_found_note()]
    build_dir = get("build_dir")
    if not build_dir:
        build_dir = str(config.get("build_dir") or "build")
        if pipeline and not os.path.isabs(build_dir):
            build_dir = os.path.relpath(os.path.join(os.path.dirname(os.path.abspath(pipeline)), build_dir))

    def tup(name: str) -> tuple[str, ...]:
        value = get(name) or ()
        return tuple(value) if isinstance(value, (list, tuple)) else (value,)

    overrides = Overrides(
        variants=tup("variant"), all_variants=bool(get("all")), base=get("base") or "",
        upstream=get("upstream") or "", upstream_ref=get("upstream_ref") or "", os=get("os") or "",
        kubernetes_version=get("k8s") or "", arch=get("arch") or "", flavor=get("flavor") or "",
        regions=tup("region"), extra_packages=tup("extra_pkg"), extra_repos=tup("extra_repo"),
        variables=tup("var"), var_files=tup("var_file"),
    )
    return Options(
        pipeline_file=pipeline,
        overrides=overrides,
        build_dir=build_dir,
        packer=config.get("packer", "packer"),
        profile=get("profile") or os.environ.get("AWS_PROFILE") or None,
        cache_dir=config.get("cache_dir") or None,
    )


def lines(items: Iterable[str]) -> None:
    """Report lines on stderr (progress, notes)."""
    for item in items:
        say(item)


def lines_out(items: Iterable[str]) -> None:
    """Result lines on stdout (the answer to the command)."""
    for item in items:
        print(secrets.mask(item), flush=True)  # a URL's user:password@ as user:***@, as say() and emit_json


def channel_variant(options: "Options", variant: str | None):  # noqa: F821
    """(Pipeline, Variant) for publish / promote / rollback / history of one variant."""
    from amibuild.pipeline.options import load_pipeline  # deferred: the pipeline model, not on the --list path

    if not variant:
        raise SpecError("--variant: name the variant whose channel to change, e.g. --variant ceph")
    pipeline = load_pipeline(options)
    return pipeline, pipeline.variants[0]


def channel_target(options: "Options", variant: str | None):  # noqa: F821
    """(Aws, Pipeline, Variant) for the reads of one variant's channels (history)."""
    from amibuild.aws import Aws  # deferred: boto3, not on the `amibuild --list` path

    pipeline, chosen = channel_variant(options, variant)
    return Aws(profile=options.profile, region=pipeline.build_region), pipeline, chosen
