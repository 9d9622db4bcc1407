"""Getting an amazon-eks-ami checkout: a local folder as it is, or a git URL / local repository at a ref,
cloned into a cache (`fetch`)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from amibuild.errors import UpstreamError


def fetch(source: str, ref: str | None, cache_dir: Path) -> Path:
    """A checkout of ``source`` at ``ref``: a local folder as is, else a clone in ``cache_dir``.

    Clones live in ``cache_dir/<hash of source and ref>`` so variants pinned to different refs of
    one repository never share a work tree (Packer reads the scripts from it at build time). A ref
    is resolved in the existing clone first and fetched only when missing: pin a tag or a commit;
    a branch (or no ref: the remote's default branch) stays where it was when first cloned until
    the cache folder is removed.
    """
    if ref is not None and (not ref or ref.startswith("-")):
        raise UpstreamError(f"upstream ref {ref!r} is not a tag, branch or commit name")
    if not _is_git_url(source):
        path = Path(source).expanduser()
        if not path.is_dir():
            raise UpstreamError(
                f"upstream checkout {source} is not a directory: give the path of an "
                "amazon-eks-ami checkout or a git URL"
            )
        if ref is None:
            return path.resolve()
        source = str(path.resolve())
    key = hashlib.sha256(f"{source}\0{ref or ''}".encode()).hexdigest()[:16]
    dest = Path(cache_dir) / key
    if not (dest / ".git").is_dir():
        _clone(source, dest)
    commit = _resolve(dest, source, ref)
    try:
        _git(dest, "checkout", "--quiet", "--force", "--detach", commit)
    except _GitFailed as exc:
        raise UpstreamError(f"cannot check out {ref} of {source} in {dest}: {exc}") from exc
    return dest


class _GitFailed(Exception):
    """A git command exited non-zero; carries the last line of its stderr."""


def _is_git_url(source: str) -> bool:
    return "://" in source or re.match(r"^[A-Za-z0-9_.-]+@[A-Za-z0-9_.-]+:", source) is not None


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
        )
    except FileNotFoundError as exc:
        raise UpstreamError("git is not installed: install it to fetch upstream checkouts") from exc
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise _GitFailed(lines[-1] if lines else f"git {args[0]} exited {done.returncode}")
    return done.stdout.strip()


def _clone(source: str, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    # clone beside the destination, then rename: a concurrent fetch never sees half a clone
    tmp = Path(tempfile.mkdtemp(prefix=".clone-", dir=dest.parent))
    try:
        _git(dest.parent, "clone", "--quiet", "--no-checkout", "--", source, str(tmp))
        try:
            tmp.rename(dest)
        except OSError:
            if not (dest / ".git").is_dir():
                raise
    except (_GitFailed, OSError) as exc:
        raise UpstreamError(f"cannot clone upstream {source}: {exc}; check the URL/path") from exc
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _resolve(repo: Path, source: str, ref: str | None) -> str:
    candidates = [ref, f"origin/{ref}"] if ref else ["origin/HEAD"]
    for fetched in (False, True):
        if fetched:
            try:
                heads = "+refs/heads/*:refs/remotes/origin/*"
                _git(repo, "fetch", "--quiet", "--tags", "--force", "origin", heads)
            except _GitFailed as exc:
                raise UpstreamError(f"cannot fetch {source}: {exc}") from exc
            if ref:
                try:  # a commit on no branch or tag
                    _git(repo, "fetch", "--quiet", "origin", ref)
                    candidates.append("FETCH_HEAD")
                except _GitFailed:
                    pass
        for candidate in candidates:
            try:
                return _git(repo, "rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}")
            except _GitFailed:
                continue
    raise UpstreamError(
        f"ref {ref!r} not found in upstream {source}: give a tag, branch or commit it holds"
    )

