"""Run records: build/runs/<run id>.json, what one build-ami run did.

A record is written twice: once before the run's first AWS write (state ``running``: what is
planned), once after its last (state ``finished``: what happened). Each write is atomic — a temporary
file in the same folder, flushed to disk, then renamed over the record — so a reader never sees
half a record, and a full or read-only disk leaves the old one whole.

Reading is careful too: `runs` and `clean-run` read only regular files (never a FIFO, a device or
a symlink, which could hang or stream for ever), and a record that does not parse or has the
wrong shape is listed as such, not a traceback.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amibuild.errors import RecordNotWritten

RUNS_DIR = "runs"
MAX_READ = 64 * 1024 * 1024  # a record or a Packer log larger than this is not ours


def runs_folder(build_dir: str | Path) -> Path:
    return Path(build_dir) / RUNS_DIR


def run_directory(build_dir: str | Path, run_id: str) -> Path:
    """Where one build run writes its rendered files, Packer logs and manifests: its own folder."""
    return runs_folder(build_dir) / run_id


def record_path(build_dir: str | Path, run_id: str) -> Path:
    return runs_folder(build_dir) / f"{run_id}.json"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (temp file + fsync + rename, same folder).

    `RecordNotWritten` (naming the path and why) when the disk is full, read-only or refuses.
    """
    temp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except OSError as exc:
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp)
        raise RecordNotWritten(f"{path}: cannot write the run record ({why_not_written(exc)})") from exc


def write_record(path: Path, record: dict) -> None:
    write_atomic(path, json.dumps(record, indent=2, sort_keys=True) + "\n")


def why_not_written(exc: OSError) -> str:
    """The reason a write failed, in words (a full disk, a read-only one, ...)."""
    names = {errno.ENOSPC: "no space left on the device", errno.EROFS: "read-only file system",
             errno.EDQUOT: "disk quota exceeded", errno.EACCES: "permission denied"}
    return names.get(exc.errno or 0, exc.strerror or str(exc))


def read_regular(path: Path, limit: int = MAX_READ) -> str:
    """The text of ``path`` when it is a regular file (not a symlink, FIFO or device), else OSError.

    Opened without following a symlink and without blocking (a FIFO with no writer would hang an
    ordinary open), then checked with fstat before anything is read.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if info.st_size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes")
        with os.fdopen(fd, "rb", closefd=True) as handle:
            fd = -1
            data = handle.read(limit + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    return data.decode("utf-8", errors="replace")


def is_regular(path: Path) -> bool:
    """A regular file, not through a symlink."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


@dataclass(frozen=True)
class ListedRun:
    """One entry of `runs`: a record read, or the file that could not be (and why)."""

    path: Path
    record: dict | None
    problem: str = ""

    def to_dict(self) -> dict:
        if self.record is not None:
            return self.record
        return {"run_id": self.path.stem, "unreadable": self.problem, "path": str(self.path)}


def check_record(data: Any) -> str:
    """Why a parsed record is not one amibuild wrote ("" when it has the right shape). Pure."""
    if not isinstance(data, dict):
        return f"not a run record (a JSON {type(data).__name__}, not an object)"
    if not isinstance(data.get("run_id", ""), str):
        return "not a run record (run_id is not a string)"
    variants = data.get("variants", [])
    if not isinstance(variants, list) or not all(isinstance(v, dict) for v in variants):
        return "not a run record (variants is not a list of objects)"
    return ""


def list_runs(build_dir: str | Path, limit: int = 10) -> list[ListedRun]:
    """The newest run records under build/runs/, newest first; unreadable ones say why."""
    folder = runs_folder(build_dir)
    try:
        names = sorted((p for p in folder.iterdir() if p.suffix == ".json" and not p.name.startswith(".")),
                       reverse=True)[:limit]
    except OSError:
        return []
    out = []
    for path in names:
        try:
            data = json.loads(read_regular(path))
        except OSError as exc:
            problem = f"cannot read it ({exc.strerror or exc})"
        except ValueError as exc:
            problem = f"not JSON ({exc})"
        else:
            problem = check_record(data)
        out.append(ListedRun(path, None if problem else data, problem))
    return out


def packer_logs(build_dir: str | Path, run_id: str) -> list[str]:
    """Every line of the run's Packer logs still on disk (regular files only)."""
    lines: list[str] = []
    for log in sorted(run_directory(build_dir, run_id).glob("*/packer.log")):
        if is_regular(log):
            with contextlib.suppress(OSError):
                lines += read_regular(log).splitlines()
    return lines
