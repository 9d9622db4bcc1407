"""The parser over only the tasks a command line names (amibuild.cli.contexts) parses every command
line as invoke's parser over all of them: the same tasks, flag values and errors."""

from __future__ import annotations

import pytest
from invoke import Collection, Parser
from invoke.exceptions import ParseError

from amibuild.cli import tasks
from amibuild.cli.contexts import reachable, to_contexts, words
from amibuild.cli.main import program as amibuild_program


@pytest.mark.parametrize("tokens, help_value, want", [
    ([], None, set()),
    (["render", "--variant", "ceph"], None, {"render", "--variant", "ceph"}),
    (["--variant=build-ami"], None, {"--variant=build-ami", "build-ami"}),
    (["x=y"], None, {"x=y"}),  # not a flag: the parser does not split it
    ([], "render", {"render"}),
    ([], True, set()),  # bare --help names no task
], ids=["none", "plain", "inline-value", "not-a-flag", "help-task", "bare-help"])
def test_words_are_what_the_parser_may_look_up(tokens, help_value, want) -> None:
    assert words(tokens, help_value) == want


def test_reachable_names_tasks_by_name_or_alias_in_collection_order() -> None:
    names = {"render": [], "build-ami": ["build_ami", "bake"], "runs": []}
    assert reachable(names, {"bake", "render", "ceph"}) == ["render", "build-ami"]
    assert reachable(names, {"--list"}) == []


def _full_and_lazy(argv: list[str]) -> tuple[Parser, Parser]:
    ns = Collection.from_module(tasks)
    full = Parser(contexts=ns.to_contexts())
    lazy = Parser(contexts=to_contexts(ns, reachable(ns.task_names, words(argv)), None))
    return full, lazy


def _outcome(parser: Parser, argv: list[str]):
    try:
        result = parser.parse_argv(argv)
    except ParseError as exc:
        return "error", str(exc), getattr(exc.context, "name", None)
    except ValueError as exc:  # a flag's value failed its cast: invoke lets it through (cli.main reports it)
        return "bad value", str(exc)
    return [(ctx.name, {name: arg.value for name, arg in ctx.args.items()}) for ctx in result]


@pytest.mark.parametrize("argv", [
    [],
    ["render", "--variant", "ceph", "--extra-pkg", "a", "--extra-pkg", "b"],
    ["build-ami", "--parallel", "3", "--dry-run", "runs", "--limit", "2"],
    ["build-ami", "--parallel=4", "--json"],
    ["runs", "--limit", "abc"],
    ["render", "--extra-pkgs", "x"],
    ["rendr"],
    ["render", "ceph"],
    ["render", "--variant", "runs"],  # a flag's value that is also a task's name
    ["publish", "--variant", "ceph", "--", "render"],
], ids=["empty", "list-flag", "two-tasks", "inline", "bad-number", "unknown-flag", "unknown-task", "stray-word",
        "value-named-like-a-task", "remainder"])
def test_the_lazy_parser_parses_like_invokes_full_one(argv: list[str]) -> None:
    full, lazy = _full_and_lazy(argv)
    assert _outcome(lazy, argv) == _outcome(full, argv)
    assert len(lazy.contexts) < len(full.contexts)


def test_list_builds_no_task_context_and_task_help_builds_one(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    for argv, want in ((["amibuild", "--list"], []), (["amibuild", "--help", "render"], ["render"]),
                       (["amibuild", "render", "--help"], ["render"])):
        prog = amibuild_program()
        prog.argv = argv
        prog.create_config()
        prog.parse_core(argv)
        prog.parse_collection()
        prog.parse_tasks()
        assert list(prog.parser.contexts) == want, argv


def test_completion_still_sees_every_task(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["amibuild", "--complete", "--", "amibuild", "render", "--"]
    prog = amibuild_program()
    prog.create_config()
    prog.parse_core(argv)
    prog.parse_collection()
    assert set(prog._make_parser().contexts) == set(prog.collection.task_names)
