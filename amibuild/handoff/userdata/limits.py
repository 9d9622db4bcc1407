"""The caps of one `decode` (`Budget`: bytes read, bytes decoded over every layer, nesting) and the
scans that hold MIME, YAML and JSON to the nesting cap before a recursive parser sees them.

`at` below is the decoder's position (`decode._At`): its depth, its budget, and the errors it makes.
Pure but for `read_limited`, which reads the stream it is given.
"""

from __future__ import annotations

import email
import re
from typing import Any

import yaml

from amibuild.errors import UserDataTooBig

# EC2 user data is at most 16 KB and a CloudFormation template body at most 1 MB: 1 MiB holds
# either with room, and bounds the work a hostile input can cause.
MAX_BYTES = 1 << 20
# MIME multiparts inside each other, and encodings peeled in one chain. The email parser and the
# YAML/JSON readers recurse, so a deeper input must be refused before they see it.
MAX_NESTING = 32


class Budget:
    """The caps of one decode and what it used of them.

    `max_bytes` caps the input read and, separately, the bytes decoded from it over every layer
    together (base64, gzip, quoted-printable, MIME parts, JSON strings, UserData fields), so a
    gzip bomb stops at the cap. `max_nesting` caps MIME and structure nesting and the chain of
    encodings. `decoded` and `deepest` say what was used (tests assert on them).
    """

    def __init__(self, max_bytes: int = MAX_BYTES, max_nesting: int = MAX_NESTING) -> None:
        if max_bytes < 1 or max_nesting < 1:
            raise ValueError("a budget's caps are positive")
        self.max_bytes = max_bytes
        self.max_nesting = max_nesting
        self.decoded = 0
        self.deepest = 0

    @property
    def left(self) -> int:
        return self.max_bytes - self.decoded

    def charge(self, size: int, at: Any, what: str) -> None:
        self.decoded += size
        if self.decoded > self.max_bytes:
            raise at.too_big(f"{what} takes the bytes decoded over all layers beyond the limit of "
                             f"{shown_size(self.max_bytes)}")

    def reach(self, depth: int, at: Any, what: str) -> None:
        self.deepest = max(self.deepest, depth)
        if depth > self.max_nesting:
            raise at.too_big(f"{what} nested more than {self.max_nesting} deep (the limit)", nesting=True)


def shown_size(count: int) -> str:
    return f"{count >> 20} MiB" if count >= 1 << 20 and not count % (1 << 20) else f"{count} bytes"


def read_limited(stream: Any, source: str, max_bytes: int = MAX_BYTES) -> bytes:
    """At most `max_bytes` of a binary stream; `UserDataTooBig` if it holds more (it reads one
    byte beyond the cap to know, never more)."""
    chunks: list[bytes] = []
    wanted = max_bytes + 1
    while wanted > 0:
        chunk = stream.read(min(wanted, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        wanted -= len(chunk)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise UserDataTooBig(f"{source}: not read: more than {shown_size(max_bytes)} (the limit; user data is at most "
                             "16 KB on EC2, a template body at most 1 MB)")
    return data


# what the email parser takes for a header line (feedparser's headerRE), in bytes
_HEADER_LINE = re.compile(rb"(From |[\x21-\x39\x3b-\x7e]*:|[\t ])")
_EVENTS = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser where there is one: faster


def mime_nesting(document: bytes, at: Any) -> None:
    """Refuse a MIME document whose multiparts (and message/* parts) nest beyond the budget's
    limit, by a line scan that opens and closes levels where the email parser does."""
    levels: list[bytes | None] = []  # the boundary of each open multipart; None: a message/* part
    header: list[bytes] | None = []  # the header block being read, or None in a body
    for raw in document.split(b"\n"):
        line = raw.rstrip(b"\r")
        if header is not None:
            if _HEADER_LINE.match(line):
                header.append(line)
                continue
            # a blank line ends the header block; any other line does too and is the body's first
            message = email.message_from_bytes(b"\n".join(header) + b"\n\n")
            header = None
            boundary = message.get_boundary() if message.get_content_maintype() == "multipart" else None
            if boundary:
                levels.append(boundary.encode("utf-8", "surrogateescape"))
            elif message.get_content_maintype() == "message" and message.get_content_subtype() != "delivery-status":
                levels.append(None)  # its body is a message of its own: headers again
                header = []
            at.budget.reach(at.depth + len(levels), at, "MIME parts")
            if header is not None or not line:
                continue
        if line.startswith(b"--"):
            header = _boundary(line, levels)


def _boundary(line: bytes, levels: list[bytes | None]) -> list[bytes] | None:
    """Close the levels a boundary line ends: a new part's header block to read, or None."""
    for index in range(len(levels) - 1, -1, -1):
        boundary = levels[index]
        if boundary is None or not line.startswith(b"--" + boundary):
            continue
        rest = line[len(boundary) + 2:].rstrip(b" \t")
        if rest == b"--":
            del levels[index:]
            return None
        if not rest:
            del levels[index + 1:]
            return []
    return None


def structure_nesting(text: str, at: Any, *, aliases: bool = False) -> bool:
    """Refuse a YAML/JSON document nested beyond the budget's limit, or holding an alias unless
    `aliases` (a template's expansion is unbounded, and CloudFormation takes none), from the
    parser's events, before the recursive loaders see it. False: not YAML."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_EVENTS):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                at.budget.reach(at.depth + depth, at, "YAML/JSON collections")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            elif isinstance(event, yaml.AliasEvent) and not aliases:
                raise at.refuse(f"a YAML alias (*{event.anchor}): user data documents take none")
    except yaml.YAMLError:
        return False
    return True
