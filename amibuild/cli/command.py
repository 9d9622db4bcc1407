"""A command declared once: a frozen request dataclass whose fields are its flags (`flag(...)`),
and the invoke task generated from it — its flags, their `--help` and their casts — whose body
is looked up by name when the task runs.

    @dataclass(frozen=True)
    class RunsRequest:
        limit: int = flag("How many runs to show", 10, cast=values.count)

    task("tasks_build", "runs", RunsRequest, "List recent build runs.")   # in amibuild.cli.tasks
    def runs(c, request: RunsRequest): ...                                # in amibuild.cli.tasks_build
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

K8S_HELP = "Kubernetes version of the variant, if not the pipeline file's (it is part of the parameter name)"
JSON_HELP = "Print the result as JSON on stdout"

Cast = Callable[[Any, str], Any]  # (the flag's text, "--flag") -> its typed value; SpecError naming the flag


def flag(help: str, default: Any = None, *, cast: Cast | None = None, repeat: bool = False,  # noqa: A002
         name: str = "", required: str = "", positional: bool = False) -> Any:
    """A request field that is a flag: its help, its default, the cast of its text, whether it
    repeats (a tuple of every value given), its spelling when not the field's (`--from`), the
    message when it must be given, and whether it may also be given bare (`decode-userdata FILE`)."""
    metadata = {"help": help, "cast": cast, "repeat": repeat, "name": name, "required": required,
                "positional": positional}
    return dataclasses.field(default=() if repeat else default, metadata=metadata)


def like(request_type: type, name: str, **changes: Any) -> Any:
    """The same flag as ``request_type``'s field ``name``, for another request (``changes``: its
    help, default or cast there)."""
    field = request_type.__dataclass_fields__[name]
    default = changes.pop("default", field.default)
    return dataclasses.field(default=default, metadata={**field.metadata, **changes})


def flags(request_type: type) -> list[dataclasses.Field]:
    """The fields of a request that are flags, in declaration order."""
    return [f for f in dataclasses.fields(request_type) if "help" in f.metadata]


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


def task(module: str, name: str, request_type: type, help: str, **task_kwargs: Any) -> RequestTask:  # noqa: A002
    """The task ``name``: invoke's flag values become the frozen request, then
    ``amibuild.cli.<module>.<name>(c, request)`` runs, its module imported only then."""
    def task_body(c, **given):  # an error anywhere in the body: one line and its exit code (`cli.run`)
        body = getattr(importlib.import_module(f"amibuild.cli.{module}"), name)
        return cli.run(lambda: body(c, parse(request_type, given)))

    task_body.__name__ = task_body.__qualname__ = name
    task_body.__doc__ = help
    task_body.__module__ = f"amibuild.cli.{module}"
    # what introspection of the task sees: the context and one keyword per flag
    task_body.__signature__ = inspect.Signature(
        [inspect.Parameter("c", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default)
           for f in flags(request_type)])
    return RequestTask(task_body, request_type, **task_kwargs)
