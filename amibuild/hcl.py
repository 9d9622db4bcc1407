"""Write HCL2 that `packer fmt -check` accepts, and read HCL2 with python-hcl2.

Writing: a tiny document model (`Block`, `Attr`, `Expr`, `BLANK`) and `dumps`. Every Python value
is escaped for HCL here and nowhere else (strings get ``\\``, ``"``, newlines, ``${`` and ``%{``
escaped, so a user's value can never become an HCL expression). The layout follows hclwrite's
formatter, which `packer fmt` uses: two-space indents, and the ``=`` of consecutive attribute lines
aligned one space after the longest key; any line without ``=`` (a block, a closing brace, a blank
line, a line inside a multi-line value) ends an alignment run.

Reading: `loads` returns plain Python values (strings unquoted, no block markers) and turns parse
errors into `SpecError`-like errors carrying file:line.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from amibuild.errors import HclSyntaxError

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*\Z")


@dataclass(frozen=True)
class Expr:
    """A raw HCL expression, written as is (``var.region``, ``source.amazon-ebs.worker``)."""

    text: str


@dataclass(frozen=True)
class Attr:
    key: str
    value: Any


@dataclass
class Block:
    type: str
    labels: tuple[str, ...] = ()
    body: list[Any] = field(default_factory=list)

    def attr(self, key: str, value: Any) -> "Block":
        self.body.append(Attr(key, value))
        return self

    def block(self, type_: str, *labels: str) -> "Block":
        child = Block(type_, tuple(labels))
        self.body.append(child)
        return child


BLANK = object()


def quote(text: str) -> str:
    """An HCL quoted string whose value is exactly ``text`` (no interpolation)."""
    # a regex pass, not a loop over characters: rendering quotes thousands of strings, most plain
    body = _NEEDS_ESCAPE.sub(_escape, text)
    return '"' + body.replace("${", "$${").replace("%{", "%%{") + '"'


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f\x7f]')


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    return _ESCAPES.get(ch) or f"\\u{ord(ch):04x}"


def template(parts: Sequence[str | Expr]) -> Expr:
    """An HCL string template: str parts are literal text, `Expr` parts become ``${...}``."""
    out = []
    for i, part in enumerate(parts):
        if isinstance(part, Expr):
            out.append("${" + part.text + "}")
            continue
        text = quote(part)[1:-1]
        dollars = len(text) - len(text.rstrip("$"))
        if dollars and i + 1 < len(parts):
            # "$" right before "${" would read as the "$${" escape: write the run as an expression
            text = text[:-dollars] + "${" + json.dumps("$" * dollars) + "}"
        out.append(text)
    return Expr('"' + "".join(out) + '"')


_KEYWORDS = frozenset({"for", "if", "in", "null", "true", "false"})


def _key(key: str) -> str:
    return key if _IDENT.match(key) and key not in _KEYWORDS else quote(key)


def _inline(value: Any) -> str | None:
    """Single-line form of a value, or None when it must span lines (non-empty maps)."""
    if isinstance(value, Expr):
        return None if "\n" in value.text else value.text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return quote(value)
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        parts = [_inline(v) for v in value]
        if any(p is None for p in parts):
            return None
        return "[" + ", ".join(parts) + "]"  # type: ignore[arg-type]
    if isinstance(value, dict):
        return "{}" if not value else None
    raise TypeError(f"cannot write {type(value).__name__} as HCL")


def value(value: Any, indent: str = "") -> str:
    """One value as HCL text; continuation lines of a multi-line map are indented by ``indent``."""
    return "\n".join(_value_lines(value, indent))


def _value_lines(value: Any, indent: str) -> list[str]:
    """Lines of a value; the first is appended after ``key = ``."""
    inline = _inline(value)
    if inline is not None:
        return [inline]
    if isinstance(value, Expr):  # an expression written over several lines, already indented
        return value.text.split("\n")
    inner = indent + "  "
    if isinstance(value, dict):
        return ["{", *_attr_lines([Attr(str(k), v) for k, v in value.items()], inner), indent + "}"]
    # a list holding a map: one element per line
    lines = ["["]
    for item in value:
        sub = _value_lines(item, inner)
        sub[-1] += ","
        lines.append(inner + sub[0])
        lines += sub[1:]
    lines.append(indent + "]")
    return lines


def _attr_lines(attrs: list[Attr], indent: str) -> list[str]:
    """Attribute lines with ``=`` aligned across each run of single-line attributes."""
    rendered = [(_key(a.key), _value_lines(a.value, indent)) for a in attrs]
    out: list[str] = []
    for single, group in itertools.groupby(rendered, key=lambda item: len(item[1]) == 1):
        run = list(group)
        # hclwrite leaves a multi-line value out of alignment runs altogether
        width = max(len(key) for key, _ in run) if single else 0
        for key, lines in run:
            out.append(f"{indent}{key.ljust(width)} = {lines[0]}")
            out.extend(lines[1:])
    return out


def _body_lines(body: Iterable[Any], indent: str) -> list[str]:
    out: list[str] = []
    pending: list[Attr] = []
    for item in body:
        if isinstance(item, Attr):
            pending.append(item)
            continue
        out += _attr_lines(pending, indent)
        pending = []
        if item is BLANK:
            out.append("")
        elif isinstance(item, Block):
            out += _block_lines(item, indent)
        else:
            raise TypeError(f"unexpected HCL body item {item!r}")
    return out + _attr_lines(pending, indent)


def _block_lines(block: Block, indent: str) -> list[str]:
    head = " ".join([block.type, *(quote(label) for label in block.labels)])
    return [f"{indent}{head} {{", *_body_lines(block.body, indent + "  "), f"{indent}}}"]


def dumps(body: Iterable[Any], header: str = "") -> str:
    """A whole file: top-level attributes and blocks, blocks separated by blank lines."""
    items: list[Any] = []
    previous = None
    for item in body:
        if isinstance(item, Block) and previous is not None and previous is not BLANK:
            items.append(BLANK)
        elif isinstance(item, Attr) and isinstance(previous, Block):
            items.append(BLANK)
        items.append(item)
        previous = item
    text = "\n".join(_body_lines(items, ""))
    prefix = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    if prefix:
        prefix += "\n"
    return prefix + text + "\n"


# ---------------------------------------------------------------------------------------- reading


# python-hcl2 is not thread-safe: two parses at once in one process (an emulator serving
# requests in threads renders in each) can give a list as its source text, e.g. the string
# '["ceph-common"]'. One parse at a time costs nothing: parsing holds the GIL anyway.
_PARSE_LOCK = threading.Lock()


def loads(text: str, *, keep_quotes: bool = False) -> dict[str, Any]:
    """Parse HCL2 text into plain Python values (blocks as lists of dicts, strings unquoted).

    ``keep_quotes`` leaves string literals in their quotes, so a caller can tell ``"m6i.large"``
    (a string) from ``m6i.large`` (a reference, which python-hcl2 gives as ``${m6i.large}``).
    """
    # deferred: python-hcl2 and lark (~0.1 s) only when a text is parsed; amibuild.hclcache answers a
    # pipeline file it has seen without a parse
    import hcl2

    options = hcl2.SerializationOptions(
        strip_string_quotes=not keep_quotes, explicit_blocks=False, with_comments=False
    )
    try:
        with _PARSE_LOCK:
            return hcl2.loads(text, serialization_options=options)
    except Exception as exc:  # lark raises a family of its own; all mean "does not parse"
        line = getattr(exc, "line", None)
        if not isinstance(line, int) or line < 1:
            line = None
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise HclSyntaxError(first, line) from exc


_STRING_ESCAPE = re.compile(r'\\(["\\nrt]|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})')
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "r": "\r", "t": "\t"}


def unquote(value: Any) -> Any:
    """What ``loads(text)`` gives, from what ``loads(text, keep_quotes=True)`` gave: string literals
    out of their quotes with their escapes read, at any depth (keys too). Parsing once and
    unquoting is half the work of parsing twice."""
    if isinstance(value, dict):
        return {unquote(k): unquote(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unquote(v) for v in value]
    if isinstance(value, str) and len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        return _STRING_ESCAPE.sub(
            lambda m: _SIMPLE_ESCAPES.get(m.group(1)) or chr(int(m.group(1)[1:], 16)), value[1:-1])
    return value
