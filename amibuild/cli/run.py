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

from amibuild.errors import AmibuildError

T = TypeVar("T")

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def debugging() -> bool:
    return bool(os.environ.get("AMIBUILD_DEBUG")) or logging.getLogger().isEnabledFor(logging.DEBUG)


def run(body: Callable[[], T]) -> T:
    """Run a task body; turn expected errors into a one-line message and an exit code."""
    from invoke.exceptions import Exit

    from amibuild.aws import redact

    redact.install()  # before any AWS call: `--debug` logs botocore's requests, headers included
    try:
        return body()
    except AmibuildError as exc:
        if debugging():
            traceback.print_exc()
        raise Exit(f"amibuild: error: {exc}", code=exc.exit_code) from None
    except KeyboardInterrupt:
        raise Exit("amibuild: interrupted", code=EXIT_INTERRUPTED) from None


def finish(run: Any) -> None:
    """Exit code of a build run: 130 when interrupted, 1 when a variant failed, else 0."""
    from invoke.exceptions import Exit

    if run.interrupted:
        published = [o.name for o in run.outcomes or [] if o.published]
        raise Exit("amibuild: interrupted: " + (
            f"published before the interrupt: {', '.join(published)}; every other variant was not published"
            if published else "nothing was published") + (
            "; packer was killed before its cleanup finished: look for instances, key pairs and security "
            "groups named packer_* in the build regions" if run.aborted else ""), code=EXIT_INTERRUPTED)
    if run.failed and all(getattr(o, "input_refused", False) for o in run.failed) and not any(
            o.status == "built" for o in run.outcomes or []):
        # Packer refused values the user gave, before any instance started: bad input, exit 2
        raise Exit(f"amibuild: error: {run.failed[0].error}", code=EXIT_USAGE)
    if run.failed:
        names = ", ".join(f"{o.name} (not published: {o.publish_error})" if o.publish_error and o.status != "failed"
                          else f"{o.name} (log: {o.log})" for o in run.failed)
        raise Exit(f"amibuild: error: {len(run.failed)} variant(s) failed: {names}", code=EXIT_FAILED)


def say(line: str) -> None:
    """Progress and notes go to stderr, so stdout stays clean for --json and piping."""
    print(line, file=sys.stderr, flush=True)


def emit_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, default=str))


def options(c: Any, **flags: Any) -> "Options":  # noqa: F821
    """Flags of render/validate/build (+ invoke config) → `commands.Options`."""
    from amibuild.cli.commands import Options
    from amibuild.spec import Overrides

    config = c.config.get("amibuild", {}) if hasattr(c, "config") else {}

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
        regions=tup("region"),
        extra_packages=tup("extra_pkg"),
        extra_repos=tup("extra_repo"),
        variables=tup("var"),
        var_files=tup("var_file"),
    )
    return Options(
        pipeline_file=flags.get("pipeline") or config.get("pipeline") or None,
        overrides=overrides,
        build_dir=flags.get("build_dir") or config.get("build_dir", "build"),
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
