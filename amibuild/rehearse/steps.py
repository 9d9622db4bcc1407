"""A rendered variant's provisioners as the steps Packer would run on the instance. Pure.

`parse_steps` reads the rendered HCL (python-hcl2), evaluates every value against the variables,
locals and ``path.root`` as Packer would, and returns one `Step` per thing Packer does on the
instance, in order: one per script of a ``shell`` provisioner (``script`` or each of ``scripts``),
one for its ``inline`` commands, one per ``file`` upload or download. ``{{.Vars}}`` and
``{{.Path}}`` in ``execute_command`` are filled the way Packer's shell provisioner fills them:
``PACKER_BUILD_NAME`` and ``PACKER_BUILDER_TYPE`` first, then ``environment_vars`` and ``env``,
sorted, each as ``KEY='value' `` with single quotes escaped; the script goes to
``<remote_folder>/<remote_file>``. ``shell-local`` steps run where Packer runs, not on the
instance: they are listed and passed over.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Mapping

from amibuild import hcl
from amibuild.errors import UsageError
from amibuild.rehearse.expr import ExprError, Scope, evaluate

DEFAULT_EXECUTE = "chmod +x {{.Path}}; {{.Vars}} {{.Path}}"
DEFAULT_SHEBANG = "/bin/sh -e"
DEFAULT_REMOTE_FOLDER = "/tmp"
BUILDER_TYPE = "amazon-ebs"


class StepError(UsageError):
    """A rendered provisioner the rehearsal cannot turn into a step (bad input, nothing was run)."""


@dataclass(frozen=True)
class Upload:
    """A local file or folder copied to the instance (or, for a download, a remote path read)."""

    source: str  # a path on this machine (upload) or on the instance (download)
    destination: str
    how: str  # "path" (a file or a folder) | "contents" (folder ending in /) | "download"


@dataclass(frozen=True)
class Step:
    number: int  # 1-based, in the order Packer runs them
    provisioner: int  # index of the provisioner block it comes from
    kind: str  # "shell" | "file" | "local" (shell-local: not on the instance)
    name: str  # what the report calls it
    script: str = ""  # this machine's path of the script (shell, from `script(s)`)
    inline: tuple[str, ...] = ()
    inline_shebang: str = DEFAULT_SHEBANG
    command: str = ""  # execute_command with {{.Vars}} and {{.Path}} filled in
    remote_path: str = ""  # where the script is uploaded to
    env: tuple[tuple[str, str], ...] = ()
    uploads: tuple[Upload, ...] = ()
    expect_disconnect: bool = False
    valid_exit_codes: tuple[int, ...] = (0,)
    notes: tuple[str, ...] = ()


def _packer_env_value(raw: str, default: Any) -> Any:
    """A PKR_VAR_ value: a list variable's is an HCL (JSON) list, any other a string as is."""
    if isinstance(default, list) or raw.startswith("["):
        with contextlib.suppress(ValueError):
            value = json.loads(raw)
            if isinstance(value, list):
                return value
    return raw


def parse_steps(files: Mapping[str, str], root: str, *, packer_env: Mapping[str, str] | None = None) -> list[Step]:
    """The steps of a rendered variant. ``files``: relative name -> text, as `Rendered.files`;
    ``root``: where those files are (``path.root``). ``packer_env``: the ``PKR_VAR_<name>`` values
    Packer would get (the sensitive ones never reach a file), read as Packer reads them: over a
    variable's default, under its var files."""
    variables: dict[str, Any] = {}
    locals_: dict[str, Any] = {}
    builds: list[dict[str, Any]] = []
    values: dict[str, Any] = {}
    for name in sorted(files):
        if not name.endswith(".hcl") or "/" in name:
            continue
        try:
            doc = hcl.loads(files[name])
        except hcl.HclSyntaxError as exc:
            raise StepError(f"{name}: python-hcl2 cannot parse it ({exc}); render it again") from exc
        if name.endswith(".pkrvars.hcl"):
            values.update(doc)
            continue
        for block in doc.get("variable", []):
            for var_name, body in block.items():
                variables[var_name] = body.get("default") if isinstance(body, dict) else None
                given = (packer_env or {}).get(f"PKR_VAR_{var_name}")
                if given is not None:
                    variables[var_name] = _packer_env_value(given, variables[var_name])
        for block in doc.get("locals", []):
            locals_.update(block)
        builds += doc.get("build", [])
    variables.update(values)
    if len(builds) != 1:
        raise StepError(f"the rendered template has {len(builds)} build blocks; the rehearsal needs one")
    scope = Scope(variables=variables, locals=locals_, root=root)
    build = builds[0]
    sources = build.get("sources") or []
    source_name = str(sources[0]).rsplit(".", 1)[-1] if sources else "worker"
    steps: list[Step] = []
    for index, item in enumerate(build.get("provisioner", [])):
        for kind, raw in item.items():
            try:
                body = {k: evaluate(v, scope) for k, v in raw.items()}
            except ExprError as exc:
                raise StepError(f"provisioner {index + 1} ({kind}): {exc}") from exc
            if not _applies(body, source_name):
                continue
            steps += _steps(kind, index, body, source_name, len(steps) + 1)
    return steps


def _applies(body: Mapping[str, Any], source: str) -> bool:
    names = {f"{BUILDER_TYPE}.{source}", source}
    only, excluded = body.get("only"), body.get("except") or []
    if only is not None and not names & set(only):
        return False
    return not names & set(excluded)


def _steps(kind: str, index: int, body: Mapping[str, Any], source: str, number: int) -> list[Step]:
    notes = tuple(f"{key} = {body[key]} (not waited for in a rehearsal)"
                  for key in ("pause_before", "pause_after") if body.get(key))
    if kind in ("shell-local", "breakpoint"):
        what = body.get("inline") or body.get("script") or body.get("scripts") or ""
        return [Step(number, index, "local", f"{kind}: {_short(what)}",
                     notes=notes + ("runs where Packer runs, not on the instance: not rehearsed",))]
    if kind == "file":
        return [_file_step(number, index, body, notes)]
    if kind != "shell":
        raise StepError(f"provisioner {index + 1}: type {kind!r} is not rehearsable (shell, file and shell-local are)")
    remote_folder = str(body.get("remote_folder") or DEFAULT_REMOTE_FOLDER)
    env_pairs = [("PACKER_BUILD_NAME", source), ("PACKER_BUILDER_TYPE", BUILDER_TYPE)]
    for entry in body.get("environment_vars") or []:
        key, sep, value = str(entry).partition("=")
        if not sep:
            raise StepError(f"provisioner {index + 1}: environment_vars entry {entry!r} has no '='")
        env_pairs.append((key, value))
    env_pairs += [(str(k), str(v)) for k, v in (body.get("env") or {}).items()]
    env = tuple(sorted(dict(env_pairs).items()))
    execute = str(body.get("execute_command") or DEFAULT_EXECUTE)
    fmt = str(body.get("env_var_format") or "%s='%s' ")
    if body.get("use_env_var_file"):
        raise StepError(f"provisioner {index + 1}: use_env_var_file is not rehearsable yet; drop it")
    codes = tuple(int(c) for c in body.get("valid_exit_codes") or [0])
    scripts = list(body.get("scripts") or []) + ([body["script"]] if body.get("script") else [])
    common = dict(env=env, expect_disconnect=bool(body.get("expect_disconnect")), valid_exit_codes=codes, notes=notes)
    steps = []
    if body.get("inline"):
        remote = str(PurePosixPath(remote_folder) / str(body.get("remote_file") or f"script_{number}.sh"))
        inline = tuple(str(line) for line in body["inline"])
        steps.append(Step(number, index, "shell", f"inline: {_short(inline)}", inline=inline,
                          inline_shebang=str(body.get("inline_shebang") or DEFAULT_SHEBANG),
                          command=_fill(execute, env, fmt, remote), remote_path=remote, **common))
    for script in scripts:
        n = number + len(steps)
        remote = str(PurePosixPath(remote_folder) / str(body.get("remote_file") or f"script_{n}.sh"))
        steps.append(Step(n, index, "shell", PurePosixPath(str(script)).name, script=str(script),
                          command=_fill(execute, env, fmt, remote), remote_path=remote, **common))
    if not steps:
        raise StepError(f"provisioner {index + 1} (shell) has neither inline, script nor scripts")
    return steps


def _file_step(number: int, index: int, body: Mapping[str, Any], notes: tuple[str, ...]) -> Step:
    destination = str(body.get("destination") or "")
    sources = [str(s) for s in (body.get("sources") or ([body["source"]] if body.get("source") else []))]
    if not destination or not sources:
        raise StepError(f"provisioner {index + 1} (file) needs a source and a destination")
    download = body.get("direction", "upload") == "download"
    # "path": a file or a folder, the executor knows which
    uploads = [Upload(source, destination, "download" if download else "contents" if source.endswith("/") else "path")
               for source in sources]
    arrow = "<-" if download else "->"
    shown = ", ".join(_tail(s) for s in sources)
    return Step(number, index, "file", f"file: {shown} {arrow} {_tail(destination)}", uploads=tuple(uploads),
                notes=notes + (("downloads to the Packer machine: the rehearsal checks the remote file exists "
                                "and writes nothing here",) if download else ()))


_GO_VARS = re.compile(r"\{\{\s*\.Vars\s*\}\}", re.ASCII)
_GO_PATH = re.compile(r"\{\{\s*\.Path\s*\}\}", re.ASCII)


def _fill(execute: str, env: tuple[tuple[str, str], ...], fmt: str, remote: str) -> str:
    """execute_command as Packer's shell provisioner fills it in."""
    flat = "".join(_format(fmt, key, value.replace("'", "'\"'\"'")) for key, value in env)
    text = _GO_VARS.sub(lambda _: flat, execute)
    return _GO_PATH.sub(lambda _: remote, text)


def _format(fmt: str, key: str, value: str) -> str:
    parts = iter((key, value))
    return re.sub(r"%s", lambda _: next(parts, ""), fmt)


def _tail(path: str) -> str:
    """A long path by its last two parts (the report's step names stay one line)."""
    parts = path.rstrip("/").split("/")
    short = path if len(parts) <= 3 else ".../" + "/".join(parts[-2:]) + ("/" if path.endswith("/") else "")
    return short if len(short) < len(path) else path


def _short(what: Any) -> str:
    text = "; ".join(str(x) for x in what) if isinstance(what, (list, tuple)) else str(what)
    return text if len(text) <= 60 else text[:57] + "..."
