"""Every task is generated from its frozen Request: its --help options are exactly the Request's flags."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from invoke.parser import ParserContext

from amibuild.cli.command import RequestTask, flag_name, flags, parse
from amibuild.cli.tasks import ns
from amibuild.jobs.requests_channels import RollbackRequest
from amibuild.jobs.requests_nodes import DeployRequest
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


def test_every_task_body_is_found_where_the_table_says_and_takes_its_request() -> None:
    import importlib
    import inspect

    from amibuild.cli.tasks import TASKS

    for entry in TASKS:
        module = importlib.import_module(entry.body.__module__)
        body = getattr(module, entry.body.__name__)
        takes = list(inspect.signature(body).parameters)[:2]
        if entry.body.__module__.startswith("amibuild.jobs."):  # a job: its request, then its Env
            assert takes in (["request", "env"], ["r", "env"]), entry.name
            assert inspect.signature(body).parameters[takes[0]].annotation in (entry.request_type.__name__,
                                                                                entry.request_type), entry.name
        else:
            assert takes in (["c", "request"], ["c", "r"]), entry.name
        assert body.__doc__ is None and entry.body.__doc__, entry.name  # the help lives in the table alone


def test_the_task_list_and_a_tasks_help_load_no_task_body() -> None:
    """`amibuild --list` and `amibuild build-ami --help` read the table and the requests only: no
    task body module, and nothing of boto3, jinja2 or python-hcl2."""
    import subprocess
    import sys

    probe = ("import sys, contextlib, io\n"
             "from amibuild.cli.main import main\n"
             "for argv in (['amibuild', '--list'], ['amibuild', 'build-ami', '--help']):\n"
             "    sys.argv = argv\n"
             "    with contextlib.redirect_stdout(io.StringIO()):\n"
             "        try:\n"
             "            main()\n"
             "        except SystemExit:\n"
             "            pass\n"
             "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in ('amibuild', 'boto3', 'botocore', "
             "'jinja2', 'hcl2'))))\n")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    from amibuild.cli.tasks import TASKS

    bodies = {entry.body.__module__ for entry in TASKS}  # the table names them
    assert "amibuild.jobs.requests_build" in loaded and "amibuild.cli.tasks" in loaded, loaded
    assert not bodies & set(loaded), sorted(bodies & set(loaded))
    assert not [m for m in loaded if not m.startswith("amibuild")], loaded
