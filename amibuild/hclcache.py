"""A cache of python-hcl2 parses, keyed by the text itself: a pipeline file that has not changed is
not parsed again (nor python-hcl2 and lark imported) by the next command.

python-hcl2 (lark's LALR parser) takes ~0.15 s for a pipeline file of 50 variants and its import
~0.1 s more, the largest share of a no-change `build-ami` after the AWS lookups. What it returns
for a text depends only on that text, the options `amibuild.hcl.loads` passes and the versions of
python-hcl2 and lark, so the key is the SHA-256 of all of them: an edited file, another file, or
another python-hcl2 can never get this one's entry. An entry holds its own key and the parse as
JSON, which gives back exactly the values python-hcl2 gave (strings, numbers, booleans, null,
lists, string-keyed maps; a parse that would not round-trip is not cached) as a fresh object on
every read, so a caller changing what it got cannot change the next caller's.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from amibuild import hcl, secrets

FORMAT = "amibuild-hclcache-1"
KEEP = 64  # entries kept in a folder; older ones are removed when a new one is written

_memory: dict[str, str] = {}  # key -> the parse as JSON text
_lock = threading.Lock()
_versions: str | None = None


def _parser_versions() -> str:
    """python-hcl2's and lark's versions (from their metadata: neither is imported here), and a
    hash of `amibuild.hcl` itself, whose `loads` sets python-hcl2's options: any change there is a
    new key."""
    global _versions
    if _versions is None:
        from importlib import metadata

        found = [f"amibuild.hcl {hashlib.sha256(Path(hcl.__file__).read_bytes()).hexdigest()}"]
        for dist in ("python-hcl2", "lark"):
            try:
                found.append(f"{dist} {metadata.version(dist)}")
            except metadata.PackageNotFoundError:
                found.append(f"{dist} ?")
        _versions = ", ".join(found)
    return _versions


def key(text: str, *, keep_quotes: bool) -> str:
    """The entry's name: SHA-256 of the format, the parser versions, the options and the text."""
    digest = hashlib.sha256()
    for part in (FORMAT, _parser_versions(), f"keep_quotes={keep_quotes}"):
        digest.update(part.encode() + b"\0")
    digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def loads(text: str, *, keep_quotes: bool = False, folder: Path | None = None) -> dict[str, Any]:
    """`amibuild.hcl.loads(text, keep_quotes=...)`, from the cache when this text was parsed before."""
    name = key(text, keep_quotes=keep_quotes)
    with _lock:
        cached = _memory.get(name)
    if cached is None and folder is not None:
        cached = _read(folder, name)
        if cached is not None:
            with _lock:
                _memory[name] = cached
    if cached is not None:
        return json.loads(cached)
    doc = hcl.loads(text, keep_quotes=keep_quotes)  # a syntax error is raised as it is: nothing cached
    if _json_exact(doc):
        encoded = json.dumps(doc, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        with _lock:
            _memory[name] = encoded
    return doc


def remember(text: str, *, keep_quotes: bool = False, folder: Path) -> bool:
    """Write the entry of a text parsed in this process (and found good) under ``folder``.

    False when there is nothing to write (not parsed here, or not cacheable) or the folder cannot
    be written: the cache is an optimisation, never a reason for a command to fail. A bad entry under that
    name (unreadable, another key's) is replaced.
    """
    if secrets.has_credentials(text):  # a password in a URL is written nowhere (amibuild.secrets)
        return False
    name = key(text, keep_quotes=keep_quotes)
    with _lock:
        encoded = _memory.get(name)
    if encoded is None:
        return False
    if _read(folder, name) == encoded:
        return True
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{name}.{os.getpid()}.{threading.get_ident()}.tmp"
        tmp.write_text(json.dumps({"key": name, "doc": encoded}), encoding="utf-8")
        os.replace(tmp, folder / f"{name}.json")
        _prune(folder)
    except OSError:
        return False
    return True


def _read(folder: Path, name: str) -> str | None:
    """The entry's parse as JSON text, or None when it is missing, unreadable or not this key's."""
    try:
        entry = json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))
        if not isinstance(entry, dict) or entry.get("key") != name or not isinstance(entry.get("doc"), str):
            return None
        if not isinstance(json.loads(entry["doc"]), dict):
            return None
        return entry["doc"]
    except (OSError, ValueError):
        return None


def _prune(folder: Path) -> None:
    entries = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[KEEP:]:
        with contextlib.suppress(OSError):
            old.unlink()


def _json_exact(value: Any) -> bool:
    """True when JSON gives back exactly ``value`` (types included)."""
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, list):
        return all(_json_exact(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_exact(v) for k, v in value.items())
    return False


def clear_memory() -> None:
    """Forget the in-memory entries (tests)."""
    with _lock:
        _memory.clear()
