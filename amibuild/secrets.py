"""Credentials inside URLs: find them, and show every URL that holds them as ``user:***@host``.

A proxy or repository URL may carry a user and password (``http://user:S3cretPass@proxy:3128``),
an upstream git URL a token (``https://x-access-token:TOKEN@github.com/...``). amibuild needs the
real value in exactly two places: the environment of the Packer process (``PKR_VAR_<name>``, into a
variable marked ``sensitive = true``) and a ``NoEcho`` CloudFormation parameter. Everything amibuild
writes or prints (render.json, var files, run records, packer.log, stdout, ``--json``, messages,
``--debug`` logs) goes through `mask`, which needs to know nothing in advance: any
``scheme://userinfo@`` in any text is masked. `Known` adds the exact strings once they are seen, for
text where a password shows up without its URL around it (Packer's own messages, say).

Pure: no I/O, no global state.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Iterable
from urllib.parse import unquote

MASK = "***"
MIN_WORD = 4  # shorter exact strings would blank ordinary text; URLs around them are masked anyway

# scheme://userinfo@ — userinfo runs to the last '@' before the authority ends ('/', whitespace or a
# quote), so an unencoded '@' in a password (`user:p@ss@host`) is masked whole; ASCII only.
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>[^/\s'\"`<>]+)@", re.ASCII)
# users that name an account and are never secret on their own (ssh://git@github.com/...)
_PLAIN_USERS = frozenset({"git"})


def credentials(url: str) -> str:
    """The userinfo (``user:password`` or a token) of the first URL in `url`, "" when it has none."""
    found = _USERINFO.search(url or "")
    if found is None or found.group("info") in _PLAIN_USERS:
        return ""
    return found.group("info")


def has_credentials(value: Any) -> bool:
    """True when a string (or any string inside a list or map) holds a URL with credentials."""
    return any(credentials(text) for text in _strings(value))


def _masked_info(info: str) -> str:
    if info in _PLAIN_USERS:
        return info
    user, sep, _password = info.partition(":")
    return f"{user}:{MASK}" if sep else MASK  # a lone user part is usually a token


def mask(value: Any) -> Any:
    """`value` with the credentials of every URL in it masked; lists, tuples and maps are walked."""
    if isinstance(value, str):
        return _USERINFO.sub(lambda m: f"{m.group('scheme')}{_masked_info(m.group('info'))}@", value)
    if isinstance(value, dict):
        return {mask(k): mask(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(mask(v) for v in value)
    return value


def words(value: Any) -> set[str]:
    """The secret strings of every URL in `value`: the whole userinfo, the password alone and
    their percent-decoded forms (what a tool may print instead of the URL)."""
    found: set[str] = set()
    for text in _strings(value):
        for match in _USERINFO.finditer(text):
            info = match.group("info")
            if info in _PLAIN_USERS:
                continue
            user, sep, password = info.partition(":")
            secret = password if sep else user
            found.update(s for s in (info, secret, unquote(info), unquote(secret)) if s)
    return found


@dataclass
class Known:
    """Exact secret strings seen so far; `scrub` masks URLs and then each of them wherever it is."""

    secrets: set[str] = field(default_factory=set)

    def add(self, value: Any) -> None:
        self.secrets |= {word for word in words(value) if len(word) >= MIN_WORD}

    def scrub(self, text: str) -> str:
        text = mask(text)
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, MASK)
        return text


def mac_message(name: str, value: str) -> bytes:
    """What KMS GenerateMac is given for a credential-carrying variable: a sha256 of the variable's
    name and value (KMS takes at most 4096 bytes; a shipped key makes extra_repos longer). Only the
    MAC, made with a key nobody holds offline, reaches the fingerprint; this digest goes nowhere else."""
    return hashlib.sha256(b"amibuild fingerprint\0" + name.encode() + b"\0" + value.encode()).digest()


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, (dict, list, tuple)):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _strings(item)
