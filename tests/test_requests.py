"""Every task is generated from its frozen Request: its --help options are exactly the Request's flags."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from invoke.parser import ParserContext

from amibuild.cli.command import RequestTask, flag_name, flags, parse
from amibuild.cli.tasks import ns
from amibuild.cli.tasks_channels import RollbackRequest
from amibuild.cli.tasks_nodes import DeployRequest
from amibuild.errors import SpecError

# the flags each task had when stored: a flag lost from a Request (or a task dropped) fails here,
# not only against the Request it was generated from; a new flag is added to this file on purpose
EXPECTED = json.loads((Path(__file__).parent / "data" / "task_flags.json").read_text())


def help_options(name: str) -> dict[str, str]:
    """{--flag: its help text} as invoke's `--help` of task ``name`` lists them (its help tuples)."""
    context = ParserContext(name=name, args=ns[name].get_arguments())
    found: dict[str, str] = {}
    for names, text in context.help_tuples():
        long = next(n for n in re.findall(r"--[a-z0-9-]+", names))
        found[long] = " ".join(text.split())
    return found


def test_every_task_has_a_request() -> None:
    without = {name for name in ns.task_names if not isinstance(ns[name], RequestTask)}
    assert not without, f"tasks without a Request: {sorted(without)}"


def test_each_tasks_help_lists_the_stored_flags() -> None:
    assert sorted(ns.task_names) == sorted(EXPECTED)
    for name, expected in EXPECTED.items():
        assert sorted(help_options(name)) == expected, (name, set(help_options(name)) ^ set(expected))


def test_each_tasks_help_is_its_requests_flags() -> None:
    for name in sorted(ns.task_names):
        request = ns[name].request_type
        assert dataclasses.is_dataclass(request) and request.__dataclass_params__.frozen, name
        shown = help_options(name)
        declared = {flag_name(f): " ".join(f.metadata["help"].split()) for f in flags(request)}
        assert shown == declared, (name, set(shown) ^ set(declared))
        for f in flags(request):
            arg = next(a for a in ns[name].get_arguments() if a.names[0] == flag_name(f)[2:])
            assert (arg.kind is list) == f.metadata["repeat"], (name, f.name)
            assert f.metadata["help"], (name, f.name)


def test_a_repeatable_flag_becomes_a_tuple_and_a_cast_runs_at_parse() -> None:
    assert parse(DeployRequest, {"subnet": ["a", "b"]}).subnet == ("a", "b")
    assert parse(RollbackRequest, {"to_version": "3"}).to_version == 3
    assert parse(RollbackRequest, {}).channel == "recommended"  # a text default survives invoke's None
    try:
        parse(RollbackRequest, {"to_version": "x"})
    except SpecError as exc:
        assert "--to-version 'x'" in str(exc)
    else:
        raise AssertionError("--to-version x was taken")
