"""A command's request: a frozen dataclass whose fields are what the command is asked, each
declared with `flag(...)` (its help, default, cast and whether it repeats). The job takes the
request as it is; the cli generates the command's flags and `--help` from the same fields.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

K8S_HELP = "Kubernetes version of the variant, if not the pipeline file's (it is part of the parameter name)"
JSON_HELP = "Print the result as JSON on stdout"
MARKDOWN_HELP = "Print a Markdown summary on stdout (what is appended to $GITHUB_STEP_SUMMARY in GitHub Actions)"

Cast = Callable[[Any, str], Any]  # (the given text, "--flag") -> its typed value; SpecError naming the flag


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
