"""The `amibuild` command (and `python -m amibuild`): invoke's Program over amibuild's task collection.

Why a Program of our own rather than plain `invoke`: a pipeline repository holds only
`amibuild.hcl`, no tasks.py; and the command line's own mistakes (an unknown flag or task, a flag
without its value, a number that is not one) must read like every other bad input — one
`amibuild: error: ...` line with a did-you-mean, exit 2 — where invoke prints "No idea what
'--extra-pkgs' is!" and exits 1, or a traceback for `--limit abc`. A reader closing the pipe early
(`amibuild runs | head -1`) ends the program quietly.

Configuration is invoke's, under the prefix `amibuild`: `/etc/amibuild.yaml`, `~/.amibuild.yaml`,
`amibuild.yaml` beside the pipeline file (else in the current folder), `--config FILE`, and
environment variables `AMIBUILD_AMIBUILD_<KEY>` (invoke's spelling) or the shorter
`AMIBUILD_<KEY>` for the keys of the `amibuild:` section (`AMIBUILD_BUILD_DIR=out`).
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import io
import os
import re
import sys
from typing import Any, Iterable

from invoke import Collection, Config, Program
from invoke import main as invoke_main
from invoke.exceptions import Exit, ParseError, UnexpectedExit
from invoke.vendor import yaml

from amibuild import __version__, redact
from amibuild.locate import find_pipeline
from amibuild.cli.run import ERROR
from amibuild.cli import tasks
from amibuild.cli.tasks import PATH_SETTINGS, SETTINGS
from amibuild.errors import ExitCode
from amibuild.suggest import suggest


def checked_file(path: str, data: Any) -> dict[str, Any]:
    """A configuration file's data, or exit 2 naming the file and what is wrong: it must be a mapping
    whose one section, `amibuild:`, holds only known settings (a typo would be ignored)."""
    if data is None:  # an empty file
        return {}

    def refuse(what: str) -> Exit:
        return Exit(f"{ERROR}{path}: {what}", code=ExitCode.USAGE)

    if not isinstance(data, dict):
        raise refuse(f"expected a mapping with an `amibuild:` section, e.g. `amibuild: {{build_dir: out}}`, "
                     f"got {type(data).__name__}")
    for key in data:
        if key != "amibuild":
            raise refuse(f"unknown section `{key}`{suggest(str(key), ['amibuild'])}; the file holds one section, "
                         f"`amibuild:`, with the settings {', '.join(SETTINGS)}")
    section = data.get("amibuild")
    if section is None:
        return data
    if not isinstance(section, dict):
        raise refuse(f"amibuild: expected a mapping of settings ({', '.join(SETTINGS)}), got {section!r}")
    for key in section:
        if key not in SETTINGS:
            raise refuse(f"amibuild.{key}: unknown setting{suggest(str(key), SETTINGS)}; the settings are "
                         f"{', '.join(SETTINGS)}")
    typed = {key: _typed(key, value, refuse) for key, value in section.items()}
    return {**data, "amibuild": typed}


def _typed(key: str, value: Any, refuse: Any) -> Any:
    """A setting's value as the program reads it: a path is text (a number, `build_dir: 5`, as its
    text), a number a number or its text; a list, a mapping or true/false is refused naming the key."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if value is None or isinstance(value, str):
        return value
    if key in PATH_SETTINGS:
        if number:
            return str(value)
        raise refuse(f"amibuild.{key}: expected text (a path), got {type(value).__name__} {value!r}; "
                     f"e.g. `{key}: {SETTINGS[key] or 'PATH'}`")
    if number:
        return value
    raise refuse(f"amibuild.{key}: expected a number, got {type(value).__name__} {value!r}")


def _refuse_unreadable(path: Any, exc: OSError) -> None:
    """An unreadable file (e.g. an /etc/amibuild.yaml only root may read) is one line, exit 2; one
    that is not there is left to invoke, which looks for each name and skips those."""
    if exc.errno != errno.ENOENT:
        raise Exit(f"{ERROR}{path}: cannot be read ({exc.strerror or exc}); fix or remove the file",
                   code=ExitCode.USAGE) from None


class AmibuildConfig(Config):
    """invoke's configuration with amibuild's own file names and environment prefix, its files checked."""

    prefix = "amibuild"

    def _load_yaml(self, path: Any) -> Any:
        try:
            data = super()._load_yaml(path)
        except (yaml.YAMLError, UnicodeDecodeError) as exc:  # a file saved in Latin-1 is no YAML either
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise Exit(f"{ERROR}{path}: not valid YAML: {problem}{where}; fix or remove the file",
                       code=ExitCode.USAGE) from None
        except OSError as exc:
            _refuse_unreadable(path, exc)
            raise
        return checked_file(str(path), data)

    _load_yml = _load_yaml

    def load_base_conf_files(self) -> None:  # first thing read (Program's config is not lazy)
        self._set(_file_suffixes=("yaml", "yml", "json"))  # never invoke's "py": it imports (runs) amibuild.py
        super().load_base_conf_files()

    def _load_json(self, path: Any) -> Any:
        try:
            data = super()._load_json(path)
        except ValueError as exc:
            raise Exit(f"{ERROR}{path}: not valid JSON: {exc}; fix or remove the file", code=ExitCode.USAGE) from None
        except OSError as exc:
            _refuse_unreadable(path, exc)
            raise
        return checked_file(str(path), data)

    def load_runtime(self, merge: bool = True) -> None:
        """The file --config names, which must be there: invoke skips a runtime file it cannot find
        (a typo'd name ran with the defaults) and raises a traceback for any other suffix or a folder."""
        path = self._runtime_path
        if path is not None:
            where = os.path.expanduser(str(path))
            suffix = os.path.splitext(where)[1].lstrip(".")
            problem = ("no such file" if not os.path.lexists(where)
                       else "not a file" if not os.path.isfile(where)
                       else f"not a configuration file amibuild reads (.{suffix}): use .yaml, .yml or .json"
                       if suffix not in self._file_suffixes
                       else "cannot be read (permission denied)" if not os.access(where, os.R_OK) else "")
            if problem:  # named as given: --config, or invoke's AMIBUILD_RUNTIME_CONFIG
                source = "AMIBUILD_RUNTIME_CONFIG=" if path == os.environ.get("AMIBUILD_RUNTIME_CONFIG") else "--config "
                raise Exit(f"{ERROR}{source}{path}: {problem}", code=ExitCode.USAGE)
        super().load_runtime(merge=merge)

    def load_shell_env(self) -> None:
        super().load_shell_env()
        # invoke spells amibuild.build_dir as AMIBUILD_AMIBUILD_BUILD_DIR under this prefix; the
        # short AMIBUILD_BUILD_DIR is what people type. The long form, when both are set, wins.
        section = self.get("amibuild") or {}
        short = {key: os.environ[f"AMIBUILD_{key.upper()}"] for key in section
                 if f"AMIBUILD_{key.upper()}" in os.environ}
        if short:
            env = dict(self._env)
            env["amibuild"] = {**short, **env.get("amibuild", {})}
            self._set(_env=env)
            self.merge()


class AmibuildProgram(Program):
    """invoke's Program whose parse errors are amibuild's one-line usage errors (exit 2)."""

    # invoke's core flags that mean something here. The others set defaults for `c.run()`, which
    # no amibuild task calls, and `-R/--dry` would read like build-ami's --dry-run.
    CORE_FLAGS = frozenset({"complete", "print-completion-script", "debug", "config", "help", "list",
                            "list-depth", "list-format", "version", "write-pyc"})

    # what `amibuild --help` shows; invoke's other core flags (completion, list formats) still work
    SHOWN_HELP = (("-h, --help [COMMAND]", "Show this help, or a command's options"),
                  ("-V, --version", "Show amibuild's version"),
                  ("-l, --list", "List the commands"),
                  ("-d, --debug", "Log each step and AWS call to stderr (credentials masked)"),
                  ("-f FILE, --config=FILE", "A configuration file of amibuild.* settings, e.g. amibuild.read_timeout"))

    def core_args(self) -> list:
        return [arg for arg in super().core_args() if arg.name in self.CORE_FLAGS]

    def print_help(self) -> None:
        """amibuild's own options and its commands; invoke's other core flags are not shown."""
        print(f"Usage: {self.binary} [--debug] [--config FILE] <command> [--options] ...")
        print(f"       {self.binary} <command> --help   (a command's options)")
        print("")
        print("Options:")
        print("")
        self.print_columns(self.SHOWN_HELP)
        if self.namespace is not None:
            self.list_tasks()

    def print_task_help(self, name: str) -> None:
        """A command's help, its usage line without invoke's `[--core-opts]` and with its positional
        argument (`decode-userdata [--options] SOURCE`)."""
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            super().print_task_help(name)
        text = buffer.getvalue().replace(f"{self.binary} [--core-opts] ", f"{self.binary} ", 1)
        positional = "".join(f" {a.name.upper()}" for a in self.parser.contexts[name].positional_args)
        text = text.replace(" [other tasks here ...]", positional, 1)
        print(text, end="")

    def update_config(self, merge: bool = True) -> None:
        # invoke's version reads the `c.run()` flags dropped above; what remains is --config
        self.config.load_overrides({}, merge=False)
        self.config.set_runtime_path(self.args.config.value or os.environ.get("AMIBUILD_RUNTIME_CONFIG"))
        self.config.load_runtime(merge=False)
        if merge:
            self.config.merge()

    def parse_collection(self) -> None:
        super().parse_collection()
        # amibuild.yaml is read from the pipeline repository: beside the pipeline file found from
        # here upwards, else the current folder (a Program with a fixed namespace has no
        # collection folder for invoke to use). The task reads what was found from the config
        # (`cli.command.make_env`): the pipeline file is looked up once per command.
        found = find_pipeline(os.getcwd())
        self.config._set(_amibuild_found=found)
        self.config.set_project_location(str(found.path.parent if found.path else os.getcwd()))
        self.config.load_project()

    def run(self, argv: list[str] | None = None, exit: bool = True) -> None:  # noqa: A002 - invoke's name
        """invoke's `Program.run`, with parse errors reported our way."""
        try:
            self.create_config()
            try:
                self.parse_core(argv)
            except ValueError as exc:  # `--list-depth abc`: the same cast, in invoke's own flags
                raise _bad_core_value(self, exc) from None
            self.parse_collection()
            redact.install()  # invoke's --debug log echoes every argument, URLs with passwords included
            _parse_tasks(self, self.parse_tasks)
            self.parse_cleanup()
            self.update_config()
            self.execute()
        except ParseError as exc:
            print(f"{ERROR}{describe(self, exc)}", file=sys.stderr)
            if exit:
                sys.exit(ExitCode.USAGE)
        except Exit as exc:
            if exc.message:
                print(exc.message, file=sys.stderr)
            if exit:
                sys.exit(exc.code)
        except UnexpectedExit as exc:  # only from c.run(), which no amibuild task uses; kept as invoke does
            if exc.result.hide:
                print(exc, file=sys.stderr, end="")
            if exit:
                sys.exit(exc.result.exited)
        except KeyboardInterrupt:
            if exit:
                sys.exit(ExitCode.INTERRUPTED)


# ------------------------------------------------------------------------------- parse errors


def _parse_tasks(program: Program, parse_tasks) -> None:
    """invoke's parse of the tasks' flags, with a value that failed its cast (`--limit abc`, which invoke
    lets through), a repeatable flag without one, or a flag taken for a positional argument refused as
    a `ParseError`; `TASK --help` shows the task's help even where the task takes a positional argument."""
    try:
        parse_tasks()
    except ValueError as exc:
        if getattr(program, "parser", None) is None:
            raise  # not the command line: the collection itself is broken
        raise _bad_value(program, exc) from None
    except ParseError as exc:  # `decode-userdata --file x`: the flag became SOURCE, x an unknown task
        flag = _flag_as_positional(getattr(exc, "context", None))
        if flag:
            raise ParseError(f"No idea what '{flag}' is!", exc.context) from None
        raise
    for context in program.tasks:
        flag = _flag_as_positional(context)
        if flag in ("--help", "-h"):
            program.args.help.value = context.name  # what `--help TASK` sets: parse_cleanup prints it
        elif flag:
            raise ParseError(f"No idea what '{flag}' is!", context)
    if len(program.tasks) > 1:  # invoke would run each task named on the line, one after the other
        raise ParseError(f"No idea what '{program.tasks[1].name}' is!", program.tasks[0])
    _check_list_values(program)


def _flag_as_positional(context: Any) -> str | None:
    """A flag that invoke gave a task's positional argument (it hands a positional the next token,
    whatever it is); "-" (stdin) is a value."""
    for arg in getattr(context, "positional_args", ()):
        if isinstance(arg.value, str) and arg.value.startswith("-") and arg.value != "-":
            return arg.value
    return None


def describe(program: Program, exc: ParseError, binary: str | None = None) -> str:
    """One line for a parse error: what was wrong, where, and the nearest valid spelling."""
    text = str(exc)
    task = _task_of(program, exc)
    where = f"{task}: " if task else ""
    binary = binary or program.binary
    help_hint = f"`{binary} {task} --help`" if task else f"`{binary} --list`"
    if text.startswith("No idea what '") and text.endswith("' is!"):
        token = text[len("No idea what '"):-len("' is!")]
        if token.startswith("-"):
            flags = _flags(exc.context) if task else _flags(program.initial_context)
            return f"{where}unknown flag {token}{_did_you_mean(token, flags)} (see {help_hint})"
        names = _task_names(program)
        if task and token in names:  # a second command: invoke would run it after the first
            return f"{where}unexpected argument {token!r}: one command at a time (see {help_hint})"
        if task:
            # invoke reads any word after a task as the next task
            return (f"{where}unexpected argument {token!r}{_did_you_mean(token, names)}; "
                    f"flags take the form --name VALUE (see {help_hint})")
        return f"unknown task {token!r}{_did_you_mean(token, names)} (see {help_hint})"
    if "needed value and was not given one" in text:
        flag = _flag_in(text) or "a flag"
        return f"{where}{flag} needs a value, e.g. {flag} VALUE (see {help_hint})"
    return f"{where}{text.rstrip('!')} (see {help_hint})"


def _task_of(program: Program, exc: ParseError) -> str | None:
    context = getattr(exc, "context", None)
    name = getattr(context, "name", None)
    return name if name and name in _task_names(program) else None


def _task_names(program: Program) -> list[str]:
    collection = getattr(program, "collection", None) or program.namespace
    if collection is None:
        return []
    return [name for primary, aliases in collection.task_names.items() for name in (primary, *aliases)]


def _flags(context: Any) -> list[str]:
    if context is None:
        return []
    return [*context.flags.keys(), *context.inverse_flags.keys()]


NEAR_TIE = 0.9  # a runner-up within 10 % of the best match is named beside it


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    choices = list(choices)
    asked = word.replace("_", "-")  # `--extra_pkg`: invoke spells every flag with dashes
    if asked != word and asked in choices:
        return f"; did you mean {asked}?"
    ratios = {name: difflib.SequenceMatcher(None, asked, name).ratio()
              for name in difflib.get_close_matches(asked, choices, n=2, cutoff=0.6)}
    # a second name only when it is nearly as close as the first: a tie, not a far runner-up
    close = [name for name, ratio in ratios.items() if ratio >= NEAR_TIE * max(ratios.values())]
    return f"; did you mean {' or '.join(close)}?" if close else ""


def _flag_in(text: str) -> str | None:
    """`--name` out of invoke's "Flag <Argument: name (n) [int]> needed value ..."."""
    match = re.search(r"<Argument: ([A-Za-z0-9_-]+)", text)
    return "--" + match.group(1).replace("_", "-").rstrip("-") if match else None


def _bad_value(program: Program, exc: ValueError) -> ParseError:
    """The flag whose value failed invoke's cast, found by walking the command line again."""
    for task, flag, value, kind in _flag_values(program):
        if kind in (int, float):
            try:
                kind(value)
            except (TypeError, ValueError):
                noun = "a whole number" if kind is int else "a number"
                return ParseError(f"{flag} {value}: expected {noun}, e.g. {flag} 5", program.parser.contexts[task])
    return ParseError(f"a flag's value was refused ({exc})")


def _bad_core_value(program: Program, exc: ValueError) -> ParseError:
    """The core flag (`-D/--list-depth`, ...) whose value failed invoke's cast."""
    context = program.initial_context
    tokens = list(program.argv[1:])
    for index, token in enumerate(tokens):
        name, eq, inline = token.partition("=")
        if name in context.flags and context.flags[name].kind is int:
            value = inline if eq else (tokens[index + 1] if index + 1 < len(tokens) else "")
            try:
                int(value)
            except ValueError:
                return ParseError(f"{name} {value}: expected a whole number, e.g. {name} 2")
    return ParseError(f"a flag's value was refused ({exc})")


def _check_list_values(program: Program) -> None:
    """A repeatable flag with no value (`--extra-pkg` last, or followed by another flag) is an
    error; invoke itself drops it silently."""
    for task, flag, value, kind in _flag_values(program):
        if kind is list and value is None:
            raise ParseError(f"{flag} needs a value, e.g. {flag} VALUE", program.parser.contexts[task])


def _flag_values(program: Program) -> Iterable[tuple[str, str, str | None, Any]]:
    """(task, flag, value or None, kind) for each value-taking flag on the command line."""
    contexts = program.parser.contexts
    task = None
    tokens = list(program.core.unparsed)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token == "--":
            return
        if not token.startswith("-"):
            if token in contexts:
                task = token
            continue
        name, eq, inline = token.partition("=")
        flags = contexts[task].flags if task is not None else {}
        if name not in flags or not flags[name].takes_value:
            continue
        argument = flags[name]
        if eq:
            yield task, name, inline, argument.kind
        elif i < len(tokens) and not (tokens[i].startswith("-") and tokens[i] != "-"):
            yield task, name, tokens[i], argument.kind
            i += 1
        else:
            yield task, name, None, argument.kind


# ------------------------------------------------------------------------------- plain `invoke` here


def adopt_invoke_program() -> None:
    """Give the `invoke` run that is importing this repository's tasks.py the same handling of
    command-line mistakes (one `amibuild: error:` line, exit 2) and closed pipes as `amibuild`.

    The `invoke` command (and `python -m invoke`) is one Program instance, `invoke.main.program`.
    It parses the tasks' flags only after it has imported tasks.py, and looks its steps up on the
    instance, so wrapping that one instance's later steps is enough: nothing in invoke is patched.
    Only while it is loading the collection (it has its command line, not yet a parser for the
    tasks' flags); a tasks.py loaded any other way (a test, `amibuild`) changes nothing. A mistake
    invoke rejects before it has read tasks.py keeps invoke's wording.
    """
    program = invoke_main.program  # invoke's own command: the instance `invoke` runs
    if isinstance(program, AmibuildProgram) or not program.argv or getattr(program, "parser", None) is not None:
        return
    binary = "invoke"

    def wrap(step, parses_tasks: bool = False):
        def wrapped() -> None:
            try:
                _parse_tasks(program, step) if parses_tasks else step()
            except ParseError as exc:
                raise Exit(f"{ERROR}{describe(program, exc, binary)}", code=ExitCode.USAGE) from None
            except BrokenPipeError:
                _quiet_stdout()
                raise Exit(code=ExitCode.OK) from None
        return wrapped

    redact.install()  # before invoke parses (and, under --debug, logs) the tasks' arguments
    program.parse_tasks = wrap(program.parse_tasks, parses_tasks=True)
    program.parse_cleanup = wrap(program.parse_cleanup)  # --help TASK, --list (| head)
    program.execute = wrap(program.execute)  # a task printing into a closed pipe


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: the reader went away, and the interpreter's own flush at exit
    must not complain either."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def program() -> AmibuildProgram:
    # A copy of the collection, as invoke's own loader makes of a tasks.py: building the parser
    # consumes each Task's help (invoke pops it), so a second Program in this process (a test, a
    # caller of main()) would otherwise list every flag without its help. ~1 ms.
    ns = Collection.from_module(tasks)
    return AmibuildProgram(namespace=ns, version=__version__, name="amibuild", binary="amibuild",
                           binary_names=["amibuild"], config_class=AmibuildConfig)


def main(argv: list[str] | None = None) -> None:
    """Console script `amibuild`; `python -m amibuild` runs the same."""
    try:
        try:
            program().run(argv)
        finally:
            sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`amibuild runs | head -1`): it has what it wanted.
        _quiet_stdout()
        sys.exit(ExitCode.OK)
