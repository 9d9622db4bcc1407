"""Only the parser contexts a command line can reach: what keeps `--list` and `TASK --help` fast.

invoke's `Program._make_parser` turns every task of the collection into a parser context (each
task's signature inspected, an Argument per flag), and invoke's parser then deep-copies all of
them, twice per parse. With ~30 tasks of up to ~30 flags each that was the largest cost of
`invoke --list` and `amibuild --list` after the imports, for contexts nobody looks at.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from invoke import Collection, Parser, ParserContext, Program


def words(tokens: Iterable[str], help_value: object = None) -> set[str]:
    """Every word of the command line the parser may look up as a task name."""
    found: set[str] = set()
    for token in tokens:
        found.add(token)
        if token.startswith("-") and "=" in token:
            found.add(token.partition("=")[2])  # `--flag=value`: the parser splits it
    if isinstance(help_value, str):  # `--help TASK`: TASK is the core flag's value by now
        found.add(help_value)
    return found


def reachable(task_names: Mapping[str, Sequence[str]], seen: set[str]) -> list[str]:
    """The tasks (primary names, in the collection's order) named by a word of ``seen``."""
    return [primary for primary, aliases in task_names.items()
            if primary in seen or any(alias in seen for alias in aliases)]


def to_contexts(collection: Collection, names: Iterable[str], ignore_unknown_help: bool | None) -> list[ParserContext]:
    """`Collection.to_contexts` for the named tasks only."""
    aliases = collection.task_names
    return [ParserContext(name=name, aliases=aliases[name],
                          args=collection[name].get_arguments(ignore_unknown_help=ignore_unknown_help))
            for name in names]


def make_parser(program: Program) -> Parser:
    """The parser of ``program``'s tasks (its `_make_parser`), over the contexts it can reach."""
    ignore = program.config.tasks.ignore_unknown_help
    if program.args.complete.value:
        return Parser(initial=program.initial_context,
                      contexts=program.collection.to_contexts(ignore_unknown_help=ignore))
    seen = words(program.core.unparsed, program.args.help.value)
    names = reachable(program.collection.task_names, seen)
    return Parser(initial=program.initial_context, contexts=to_contexts(program.collection, names, ignore))
