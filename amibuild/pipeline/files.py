"""The files a pipeline names (the pipeline file, var-files, provisioner scripts): regular files only.

A FIFO would block the read forever, a device (/dev/zero) would feed it without end, and a symlink
loop makes `Path.resolve` raise RuntimeError: each is refused before it is opened, with the reason
it is refused ("is a FIFO", "is a symlink loop"), not "no such file".
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from amibuild.errors import SpecError


def problem(path: Path) -> str | None:
    """Why `path` cannot be read as a file, or None when it is a regular file (symlinks followed)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symlink loop"
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return "no such file" if not os.path.lexists(path) else "is a broken symlink"
        return f"cannot be read ({exc.strerror})"
    if stat.S_ISREG(mode):
        return None
    kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "not a regular file")
    return f"is {kind}, not a regular file"


def resolve(path: Path) -> Path:
    """`path.resolve()`, with a symlink loop as SpecError-ready OSError instead of RuntimeError."""
    try:
        return path.resolve()
    except RuntimeError as exc:  # Python < 3.13: "Symlink loop from ..."
        raise OSError(errno.ELOOP, "symlink loop", str(path)) from exc


def regular(path: Path, where: str, what: str, error: type[SpecError] = SpecError) -> Path:
    """`path` when it is a regular file; else `error` naming it, what it is, and what to do."""
    found = problem(path)
    if found is not None:
        raise error(f"{where}: the {what} {found}; give the path of a regular file")
    return path
