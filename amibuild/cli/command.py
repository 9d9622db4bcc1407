"""A command declared once: a frozen request dataclass whose fields are its flags (`flag(...)`),
and the invoke task generated from it — its flags, their `--help` and their casts — whose body
is looked up by name when the task runs.

    @dataclass(frozen=True)
    class RunsRequest:
        limit: int = flag("How many runs to show", 10, cast=values.count)

    task("jobs.build_commands", "runs", RunsRequest, "List recent build runs.")   # in amibuild.cli.tasks
    def runs(r: RunsRequest, env: Env) -> Shown: ...                              # in amibuild.jobs.build_commands
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from typing import Any, Callable, Mapping

from invoke import Task
from invoke.parser import Argument

from amibuild.cli import run as cli
from amibuild.errors import SpecError
from amibuild.jobs.env import Env
from amibuild.jobs.signals import CHANNEL_WRITE, held
from amibuild.request import flags


def flag_name(field: dataclasses.Field) -> str:
    """`--extra-pkg` for the field `extra_pkg`."""
    return "--" + (field.metadata["name"] or field.name.replace("_", "-"))


def argument(field: dataclasses.Field) -> Argument:
    """The invoke Argument of one flag: a list for a repeatable flag, a switch for a bool, an int
    for an int default (invoke casts it), else text for the field's cast."""
    if field.metadata["repeat"]:
        kind, default = list, []
    elif isinstance(field.default, (bool, int)):
        kind, default = type(field.default), field.default
    else:
        kind, default = str, None
    name = flag_name(field)[2:]
    return Argument(names=[name], attr_name=field.name if name != field.name else None, kind=kind,
                    default=default, help=field.metadata["help"], positional=field.metadata.get("positional", False))


def parse(request_type: type, given: Mapping[str, Any], **fields: Any) -> Any:
    """The request from invoke's flag values, each cast in declaration order (bad input: one
    SpecError naming the flag); ``fields`` are the request's fields that are not flags."""
    values: dict[str, Any] = {}
    for field in flags(request_type):
        raw = given.get(field.name)
        raw = field.default if raw is None else raw
        if field.metadata["repeat"]:
            values[field.name] = tuple(raw or ())
            continue
        if field.metadata["required"] and (raw is None or str(raw).strip() == ""):
            raise SpecError(field.metadata["required"])
        cast = field.metadata["cast"]
        values[field.name] = cast(raw, flag_name(field)) if cast and raw is not None else raw
    return request_type(**values, **fields)


class RequestTask(Task):
    """An invoke Task whose flags are its request's fields (not its body's signature)."""

    def __init__(self, body: Callable, request_type: type, *, shortflags: bool = False, **kwargs: Any) -> None:
        super().__init__(body, positional=[], auto_shortflags=shortflags, **kwargs)
        self.request_type = request_type

    def get_arguments(self, ignore_unknown_help: bool | None = None) -> list[Argument]:
        arguments = [argument(f) for f in flags(self.request_type)]
        taken: set[str] = set()
        for arg in arguments if self.auto_shortflags else ():  # invoke's rule: a flag's first free letter
            short = next((char for char in arg.name if char not in taken), None)
            if short:
                arg.names = (*arg.names, short)
                taken.add(short)
        return arguments


def make_env(c: Any) -> Env:
    """The job's `Env` from invoke's context: the config's `amibuild:` section, the program's prefix,
    the pipeline file the program found, the platform AMIBUILD_TARGET names, the cli's say and its hints."""
    config = getattr(c, "config", None)
    return Env(config=dict(config.get("amibuild", {}) or {}) if config is not None else {},
               prefix=getattr(config, "prefix", "invoke"), found=getattr(config, "_amibuild_found", None),
               platform=_platform, say=cli.say, pending=cli.pending, hints=cli.DOCTOR_HINTS)


def _platform():
    from amibuild.cli.target import platform  # deferred: jinja2 and the emulator's platform, when a job asks

    return platform()


def task(module: str, name: str, request_type: type, help: str, *, signals: bool | tuple[str, str] = False,  # noqa: A002
         **task_kwargs: Any) -> RequestTask:
    """The task ``name``: invoke's flag values become the frozen request, then the job runs.

    ``module`` is where the body lives: ``jobs.X`` names a job, ``amibuild.jobs.X.<name>(request, env)``,
    whose `Shown` (or result) the cli prints and whose verdict it exits with (``signals``: SIGINT, SIGTERM
    and SIGHUP held while it runs, for a channel write, or saying these words); else
    ``amibuild.cli.<module>.<name>(c, request)``.
    Either module is imported only when the task runs."""
    home = f"amibuild.{module}" if module.startswith("jobs.") else f"amibuild.cli.{module}"

    def task_body(c, **given):  # an error anywhere in the body: one line and its exit code (`cli.run`)
        job = getattr(importlib.import_module(home), name)
        if not module.startswith("jobs."):
            return cli.run(lambda: job(c, parse(request_type, given)))

        def run(seen=None):  # seen: the `Signals` held while a channel write runs
            request = parse(request_type, given)
            env = make_env(c)
            return request, job(request, env.with_signals(seen) if seen else env)

        if signals:  # an error after a signal exits with the signal's code (`jobs.signals.held`)
            says = signals if isinstance(signals, tuple) else CHANNEL_WRITE
            (request, shown), _ = cli.run(lambda: held(run, says))
        else:
            request, shown = cli.run(run)
        cli.run(lambda: cli.show(shown, getattr(request, "json", False), markdown=getattr(request, "markdown", False)))

    task_body.__name__ = task_body.__qualname__ = name
    task_body.__doc__ = help
    task_body.__module__ = home
    # what introspection of the task sees: the context and one keyword per flag
    task_body.__signature__ = inspect.Signature(
        [inspect.Parameter("c", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default)
           for f in flags(request_type)])
    return RequestTask(task_body, request_type, **task_kwargs)
