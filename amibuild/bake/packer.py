"""The packer binary: `Packer`, a thin wrapper with `version`, `init`, `validate`, `fmt_check` and
`build_argv` (the build executor runs that argv itself so it can stream and cancel it).

What the binary prints is read by the pure parsers of `amibuild.bake.packer_output`; they meet
the wrapper only through plain values, and the names callers use are importable from here too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterable, Mapping

from amibuild.bake.packer_output import (MIN_VERSION, MachineLine, PackerVersion, blame, cross_check, error_summary,
                                         escape_field, input_refusal, manifest_builds, parse_line, parse_machine_readable,
                                         parse_manifest, parse_version, progress_step)
from amibuild.errors import PackerError, PackerNotFound, PackerValidateError, UsageError

__all__ = ["INSTALL_HINT", "MIN_VERSION", "MachineLine", "Packer", "PackerVersion", "blame", "check_temp_room",
           "cross_check", "error_summary", "escape_field", "input_refusal", "manifest_builds", "parse_line", "parse_machine_readable",
           "parse_manifest", "parse_version", "progress_step", "temp_prefix"]

INSTALL_HINT = (
    "install it with `apt-get install -y packer` (Debian/Ubuntu) or from HashiCorp's release "
    "at https://releases.hashicorp.com/packer/"
)

# Seconds; generous, they only guard against a hung binary.
VERSION_TIMEOUT = 60
VALIDATE_TIMEOUT = 300
INIT_TIMEOUT = 900
# A unix socket's path: at most 107 bytes on Linux, 103 on macOS and the BSDs (sun_path, less its NUL).
# Packer puts its plugin sockets in TMPDIR, named packer-plugin (1.6) or plugin (go-plugin) and up to 10 digits.
SOCKET_PATH_MAX = 107 if sys.platform.startswith("linux") else 103
SOCKET_NAME_MAX = len("packer-plugin") + 10


def temp_prefix(run_id: str) -> str:
    """How the temporary folders of one run's Packer processes are named in the system's temp folder:
    by the run id's random part, short for the plugin sockets' path limit."""
    return f"amibuild-{run_id.rpartition('-')[2]}-"


def check_temp_room(temp_dir: str) -> None:
    """Refuse a temp folder (TMPDIR) whose path leaves no room for Packer's plugin sockets in a run's
    folder there: Packer would crash on every build ("bind: invalid argument")."""
    folder = os.path.join(temp_dir, temp_prefix("000000") + "x" * 8)  # mkdtemp adds 8 characters
    longest = len(os.path.join(folder, "")) + SOCKET_NAME_MAX
    if longest > SOCKET_PATH_MAX:
        most = SOCKET_PATH_MAX - (longest - len(temp_dir))
        raise UsageError(f"TMPDIR {temp_dir}: too long for Packer's plugin sockets in amibuild's folder there "
                         f"({longest} characters, over this system's {SOCKET_PATH_MAX}); set TMPDIR to a folder of "
                         f"at most {most} characters, e.g. /tmp")


def _refused(cls: type[PackerError], command: str, directory: Path, proc) -> PackerError:
    reason = error_summary(proc.stdout) or f"exit status {proc.returncode}"
    exc = cls(f"{command} refused {directory}: {reason}")
    exc.output = proc.stdout  # type: ignore[attr-defined]  # Packer's full output, for --debug
    return exc


def _template_dir(directory: str | os.PathLike) -> Path:
    path = Path(directory).resolve()
    if not path.is_dir():
        # checked here: a missing cwd would otherwise surface as "cannot run packer"
        raise PackerError(f"no template directory at {path}")
    return path


def _var_args(var_files: Iterable[str | os.PathLike], variables: Mapping[str, object]) -> list[str]:
    args = [f"-var-file={Path(f).resolve()}" for f in var_files]
    for key, value in variables.items():
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        args += ["-var", f"{key}={text}"]
    return args


class Packer:
    """The packer binary.

    ``env`` is the whole environment for the child (default: this process's); checkpoint is
    always disabled unless the caller set ``CHECKPOINT_DISABLE``, so Packer does not phone home
    to ask whether it is out of date. The executor should pass `Packer.env` to its own Popen.
    """

    def __init__(self, binary: str = "packer", env: Mapping[str, str] | None = None) -> None:
        self.binary = binary
        self.env: dict[str, str] = dict(os.environ if env is None else env)
        self.env.setdefault("CHECKPOINT_DISABLE", "1")
        self._version: PackerVersion | None = None

    def __repr__(self) -> str:
        return f"Packer({self.binary!r})"

    @property
    def path(self) -> str:
        """The binary's full path; `PackerNotFound` when there is none."""
        found = shutil.which(self.binary, path=self.env.get("PATH", os.defpath))
        if found is None:
            raise PackerNotFound(f"packer not found ({self.binary!r}); {INSTALL_HINT}")
        return found

    def _run(self, args: list[str], *, cwd: Path | None = None, timeout: float) -> subprocess.CompletedProcess[str]:
        argv = [self.path, *args]
        try:
            return subprocess.run(argv, cwd=cwd, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT,  # Packer splits diagnostics across both; keep their order
                                  text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise PackerError(f"`packer {args[0]}` did not finish within {timeout:g}s") from exc
        except OSError as exc:
            reason = exc.strerror or exc
            raise PackerNotFound(f"cannot run {argv[0]}: {reason}; {INSTALL_HINT}") from exc

    def version(self) -> PackerVersion:
        """The binary's version (asked once); `PackerNotFound` when missing or older than 1.6.0."""
        if self._version is None:
            proc = self._run(["version"], timeout=VERSION_TIMEOUT)
            if proc.returncode != 0:
                raise _refused(PackerError, "packer version", Path(self.path), proc)
            version = parse_version(proc.stdout)
            if version < MIN_VERSION:
                raise PackerNotFound(f"packer {version} at {self.path} is older than {MIN_VERSION}; {INSTALL_HINT}")
            self._version = version
        return self._version

    def init(self, directory: str | os.PathLike) -> None:
        """`packer init <dir>` when the version uses plugins (1.7+); nothing on 1.6."""
        if not self.version().uses_plugins:
            return
        directory = _template_dir(directory)
        proc = self._run(["init", str(directory)], cwd=directory, timeout=INIT_TIMEOUT)
        if proc.returncode != 0:
            raise _refused(PackerError, "packer init", directory, proc)

    def validate(
        self,
        directory: str | os.PathLike,
        var_files: Iterable[str | os.PathLike] = (),
        variables: Mapping[str, object] = {},  # noqa: B006  (read only)
    ) -> None:
        """`packer validate` the template directory, from inside it (as the build runs).

        `PackerValidateError`: one line naming the directory and Packer's first error; the full
        output is on ``.output``.
        """
        directory = _template_dir(directory)
        # "." from inside it: Packer then names files relative to it in its diagnostics
        args = ["validate", *_var_args(var_files, variables), "."]
        proc = self._run(args, cwd=directory, timeout=VALIDATE_TIMEOUT)
        if proc.returncode != 0:
            raise _refused(PackerValidateError, "packer validate", directory, proc)

    def fmt_check(self, directory: str | os.PathLike) -> list[str]:
        """The files in ``directory`` that `packer fmt -check` would rewrite; [] when clean."""
        directory = _template_dir(directory)
        proc = self._run(["fmt", "-check", "."], cwd=directory, timeout=VERSION_TIMEOUT)
        if proc.returncode == 0:
            return []
        if proc.returncode == 3:  # "not formatted": one file name per line
            names = (line.strip() for line in proc.stdout.splitlines())
            return [os.path.normpath(name) for name in names if name]
        raise _refused(PackerValidateError, "packer fmt -check", directory, proc)

    def build_argv(
        self,
        directory: str | os.PathLike,
        *,
        var_files: Iterable[str | os.PathLike] = (),
        variables: Mapping[str, object] = {},  # noqa: B006  (read only)
        only: Iterable[str] | None = None,
    ) -> list[str]:
        """The argv of `packer build -machine-readable` for ``directory``.

        Paths are absolute, so the argv works from any cwd; run it with ``cwd=directory`` (as
        `validate` does) so relative paths inside the template resolve the same way, with
        ``env=self.env``. A directory, not a file, so Packer reads ``*.auto.pkrvars.hcl``.
        """
        argv = [self.path, "build", "-machine-readable", "-color=false"]
        if only is not None:
            argv.append(f"-only={','.join(only)}")
        argv += _var_args(var_files, variables)
        argv.append(str(Path(directory).resolve()))
        return argv
