"""Getting an amazon-eks-ami checkout: a local folder as it is, or a git URL / local repository at a ref,
cloned into a cache (`fetch`).

A git URL may carry credentials (``https://x-access-token:TOKEN@github.com/...``). They are never
written into the cache: the clone's remote is the URL without them (`_Remote.bare`), and git gets
them for each command that talks to the remote as an ``http.extraHeader`` passed in its
environment (``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n``, git >= 2.31), not on
its command line (which other users of the machine can read) nor in `.git/config`. The cache
folder's name is a hash of the bare URL, so it does not derive from the secret either.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from amibuild import secrets
from amibuild.errors import UpstreamError


@dataclass(frozen=True)
class _Remote:
    """A git URL split into what may be written (`bare`, `shown`) and what may not (`env`)."""

    bare: str  # the URL as the clone's remote: no password (and, over http, no user either)
    shown: str  # the URL for messages: credentials masked
    env: dict[str, str] = field(default_factory=dict, repr=False)  # git config for the credentials, via env


def _remote(source: str) -> _Remote:
    if not secrets.credentials(source):
        return _Remote(source, source)
    parts = urlsplit(source)
    user, _, password = parts.netloc.rpartition("@")[0].partition(":")
    host = parts.netloc.rpartition("@")[2]
    if parts.scheme not in ("http", "https"):  # ssh and the like: git cannot use a password from the URL
        return _Remote(urlunsplit(parts._replace(netloc=f"{user}@{host}")), secrets.mask(source))
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
    env = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "http.extraHeader",
           "GIT_CONFIG_VALUE_0": f"Authorization: Basic {token}"}
    return _Remote(urlunsplit(parts._replace(netloc=host)), secrets.mask(source), env)


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
    remote = _remote(source)
    key = hashlib.sha256(f"{remote.bare}\0{ref or ''}".encode()).hexdigest()[:16]
    dest = Path(cache_dir) / key
    if remote.bare != source:
        _forget_credentialed_clone(Path(cache_dir), source, ref)
    if not (dest / ".git").is_dir():
        _clone(remote, dest)
    commit = _resolve(dest, remote, ref)
    try:
        _git(dest, "checkout", "--quiet", "--force", "--detach", commit)
    except _GitFailed as exc:
        raise UpstreamError(f"cannot check out {ref} of {remote.shown} in {dest}: {exc}") from exc
    return dest


def _forget_credentialed_clone(cache_dir: Path, source: str, ref: str | None) -> None:
    """Remove the clone an amibuild before this one made of ``source``: it was kept under a hash of
    the URL with its credentials, and its ``.git/config`` holds them as the remote. It is only a
    cache; the clone under the bare URL's hash replaces it."""
    old = cache_dir / hashlib.sha256(f"{source}\0{ref or ''}".encode()).hexdigest()[:16]
    if old.is_dir() and not old.is_symlink():
        shutil.rmtree(old, ignore_errors=True)


class _GitFailed(Exception):
    """A git command exited non-zero; carries the last line of its stderr."""


def _is_git_url(source: str) -> bool:
    return "://" in source or re.match(r"^[A-Za-z0-9_.-]+@[A-Za-z0-9_.-]+:", source) is not None


def _git(cwd: Path, *args: str, remote: _Remote | None = None) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", **(remote.env if remote else {})}
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
        )
    except FileNotFoundError as exc:
        raise UpstreamError("git is not installed: install it to fetch upstream checkouts") from exc
    if done.returncode != 0:
        lines = secrets.mask(done.stderr).strip().splitlines()
        raise _GitFailed(lines[-1] if lines else f"git {args[0]} exited {done.returncode}")
    return done.stdout.strip()


def _clone(remote: _Remote, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    # clone beside the destination, then rename: a concurrent fetch never sees half a clone
    tmp = Path(tempfile.mkdtemp(prefix=".clone-", dir=dest.parent))
    try:
        _git(dest.parent, "clone", "--quiet", "--no-checkout", "--", remote.bare, str(tmp), remote=remote)
        try:
            tmp.rename(dest)
        except OSError:
            if not (dest / ".git").is_dir():
                raise
    except (_GitFailed, OSError) as exc:
        raise UpstreamError(f"cannot clone upstream {remote.shown}: {exc}; check the URL/path") from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone once renamed


def _resolve(repo: Path, remote: _Remote, ref: str | None) -> str:
    candidates = [ref, f"origin/{ref}"] if ref else ["origin/HEAD"]
    for fetched in (False, True):
        if fetched:
            try:
                heads = "+refs/heads/*:refs/remotes/origin/*"
                _git(repo, "fetch", "--quiet", "--tags", "--force", "origin", heads, remote=remote)
            except _GitFailed as exc:
                raise UpstreamError(f"cannot fetch {remote.shown}: {exc}") from exc
            if ref:
                with contextlib.suppress(_GitFailed):  # a commit on no branch or tag
                    _git(repo, "fetch", "--quiet", "origin", ref, remote=remote)
                    candidates.append("FETCH_HEAD")
        for candidate in candidates:
            with contextlib.suppress(_GitFailed):
                return _git(repo, "rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}")
    raise UpstreamError(
        f"ref {ref!r} not found in upstream {remote.shown}: give a tag, branch or commit it holds"
    )
