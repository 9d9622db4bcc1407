"""Evaluate the HCL2 expressions of a rendered Packer template, as Packer would before a build.

python-hcl2 hands attribute values back as text: a string template with its literal parts already
unescaped and each ``${...}`` left as source, a bare expression as ``${expr}``. What a rendered
provisioner uses is small — ``var.x``, ``local.x``, ``path.root``, string templates, conditionals,
comparisons with null, indexing and a handful of functions (join, split, compact, coalesce, ...) —
and that is what is implemented here. Anything else is refused by name, so a rehearsal never runs
a step with a value guessed wrong. Go templates (``{{ .Vars }}``, ``{{timestamp}}``) are text to
HCL and stay as they are: Packer fills them at build time, and so does the rehearsal.
"""

from __future__ import annotations

import contextlib
import json
import math
import operator
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping


class ExprError(ValueError):
    """An expression the rehearsal cannot evaluate."""


@dataclass
class Scope:
    """What names resolve to: variables, locals (evaluated on first use) and path.root."""

    variables: Mapping[str, Any]
    locals: Mapping[str, Any]  # name -> raw python-hcl2 value
    root: str
    _done: dict[str, Any] = field(default_factory=dict)
    _busy: set[str] = field(default_factory=set)

    def local(self, name: str) -> Any:
        if name in self._done:
            return self._done[name]
        if name not in self.locals:
            raise ExprError(f"local.{name} is not defined")
        if name in self._busy:
            raise ExprError(f"local.{name} refers to itself")
        self._busy.add(name)
        try:
            value = evaluate(self.locals[name], self)
        finally:
            self._busy.discard(name)
        self._done[name] = value
        return value


def evaluate(value: Any, scope: Scope) -> Any:
    """A python-hcl2 attribute value (str, list, dict, scalar) with every expression evaluated."""
    if isinstance(value, str):
        return template(value, scope, raw=False)
    if isinstance(value, list):
        return [evaluate(v, scope) for v in value]
    if isinstance(value, dict):
        return {k: evaluate(v, scope) for k, v in value.items()}
    return value


def template(text: str, scope: Scope, *, raw: bool) -> Any:
    """A string template. ``raw``: literal parts still carry HCL escapes (a nested literal)."""
    parts: list[Any] = []
    i, literal = 0, []
    while i < len(text):
        if text.startswith("$${", i) or text.startswith("%%{", i):
            literal.append(text[i + 1:i + 3])
            i += 3
        elif text.startswith("${", i):
            end = _closing(text, i + 2)
            if literal:
                parts.append("".join(literal))
                literal = []
            inner = text[i + 2:end].strip().lstrip("~").rstrip("~").strip()
            parts.append(_Parser(inner, scope).parse())
            i = end + 1
        elif text.startswith("%{", i):
            raise ExprError(f"template directive {text[i:i + 20]!r}... is not supported")
        elif raw and text[i] == "\\" and i + 1 < len(text):
            char, i = _escape(text, i)
            literal.append(char)
        else:
            literal.append(text[i])
            i += 1
    if literal:
        parts.append("".join(literal))
    if len(parts) == 1 and not isinstance(parts[0], str):
        return parts[0]  # "${expr}" alone keeps the expression's own type
    return "".join(_text(p) for p in parts)


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}


def _escape(text: str, i: int) -> tuple[str, int]:
    char = text[i + 1]
    if char in _ESCAPES:
        return _ESCAPES[char], i + 2
    if char == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2:i + 6] or ""):
        return chr(int(text[i + 2:i + 6], 16)), i + 6
    raise ExprError(f"unknown escape \\{char} in {text!r}")


def _closing(text: str, start: int) -> int:
    """Index of the '}' closing an interpolation opened just before ``start``."""
    depth, i, quote = 0, start, False
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == '"':
                quote = False
        elif c == '"':
            quote = True
        elif c == "{":
            depth += 1
        elif c == "}":
            if depth == 0:
                return i
            depth -= 1
        i += 1
    raise ExprError(f"unterminated ${{ in {text!r}")


def _text(value: Any) -> str:
    if value is None:
        raise ExprError("a null value inside a string template")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, dict)):
        raise ExprError(f"a {type(value).__name__} inside a string template")
    return str(value)


# ------------------------------------------------------------------------------------- parsing

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>[0-9]+(\.[0-9]+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_-]*)
  | (?P<op>==|!=|<=|>=|&&|\|\||=>|\.\.\.|[-+*/%<>!?:.,()\[\]{}=])
  | (?P<quote>")
""", re.VERBOSE)


class _Parser:
    """Recursive descent over one expression, evaluating as it goes (both branches are parsed)."""

    def __init__(self, text: str, scope: Scope):
        self.text, self.scope, self.pos = text, scope, 0
        self.skip = 0  # >0 while parsing a branch that is not taken: names are not looked up

    def parse(self) -> Any:
        value = self.conditional()
        self._space()
        if self.pos != len(self.text):
            raise ExprError(f"cannot read {self.text!r} from {self.text[self.pos:]!r}")
        return value

    # tokens

    def _space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def _peek(self) -> tuple[str, str]:
        self._space()
        m = _TOKEN.match(self.text, self.pos)
        if not m:
            return ("end", "") if self.pos >= len(self.text) else ("bad", self.text[self.pos])
        kind = m.lastgroup or ""
        return kind, m.group(kind)

    def _take(self, value: str | None = None) -> tuple[str, str]:
        kind, text = self._peek()
        if value is not None and text != value:
            raise ExprError(f"expected {value!r} in {self.text!r} at {self.text[self.pos:]!r}")
        self.pos += len(text)
        return kind, text

    def _accept(self, value: str) -> bool:
        if self._peek()[1] == value:
            self._take()
            return True
        return False

    # grammar, lowest precedence first

    def conditional(self) -> Any:
        cond = self.binary(0)
        if not self._accept("?"):
            return cond
        truth = False if self.skip else _bool(cond, "the condition")
        yes = self._branch(truth)
        self._take(":")
        no = self._branch(not truth)
        return yes if truth else no

    def _branch(self, taken: bool) -> Any:
        if taken:
            return self.conditional()
        self.skip += 1
        try:
            self.conditional()
        finally:
            self.skip -= 1
        return None

    _LEVELS = (("||",), ("&&",), ("==", "!="), ("<", ">", "<=", ">="), ("+", "-"), ("*", "/", "%"))

    def binary(self, level: int) -> Any:
        if level == len(self._LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self._peek()[1] in self._LEVELS[level]:
            op = self._take()[1]
            right = self.binary(level + 1)
            left = None if self.skip else _apply(op, left, right)
        return left

    def unary(self) -> Any:
        for op, apply in (("!", lambda v: not _bool(v, "the operand of !")), ("-", lambda v: -_number(v, "-"))):
            if self._accept(op):
                value = self.unary()
                return None if self.skip else apply(value)
        return self.postfix()

    def postfix(self) -> Any:
        value = self.primary()
        while True:
            if self._accept("["):
                key = self.conditional()
                self._take("]")
                value = None if self.skip else _index(value, key)
            elif self._accept("."):
                name = self._take()[1]
                value = None if self.skip else _index(value, int(name) if name.isdigit() else name)
            else:
                return value

    def primary(self) -> Any:
        kind, text = self._peek()
        if kind == "number":
            self._take()
            return float(text) if "." in text else int(text)
        if kind == "quote":
            return self._string()
        if self._accept("("):
            value = self.conditional()
            self._take(")")
            return value
        if self._accept("["):
            items = []
            while not self._accept("]"):
                items.append(self.conditional())
                self._accept(",")
            return items
        if self._accept("{"):
            out = {}
            while not self._accept("}"):
                key = self.conditional() if self._peek()[0] != "ident" else self._take()[1]
                if not self._accept("="):
                    self._take(":")
                out[str(key)] = self.conditional()
                self._accept(",")
            return out
        if kind == "ident":
            self._take()
            if text in ("true", "false"):
                return text == "true"
            if text == "null":
                return None
            if text == "for":
                raise ExprError(f"for expressions are not supported: {self.text!r}")
            if self._accept("("):
                args = []
                while not self._accept(")"):
                    if self._accept("..."):
                        continue
                    args.append(self.conditional())
                    self._accept(",")
                return None if self.skip else _call(text, args)
            return self._name(text)
        raise ExprError(f"cannot read {self.text!r} at {self.text[self.pos:]!r}")

    def _name(self, root: str) -> Any:
        if root not in ("var", "local", "path"):
            raise ExprError(f"unknown name {root!r} in {self.text!r}")
        self._take(".")
        name = self._take()[1]
        if self.skip:
            return None
        if root == "var":
            if name not in self.scope.variables:
                raise ExprError(f"var.{name} is not declared")
            return self.scope.variables[name]
        if root == "local":
            return self.scope.local(name)
        if name in ("root", "cwd"):
            return self.scope.root
        raise ExprError(f"path.{name} is not supported")

    def _string(self) -> Any:
        start = self.pos + 1
        i = start
        while i < len(self.text):
            c = self.text[i]
            if c == "\\":
                i += 2
                continue
            if c == "$" and self.text.startswith("${", i) and not self.text.startswith("$${", i - 1):
                i = _closing(self.text, i + 2) + 1
                continue
            if c == '"':
                break
            i += 1
        else:
            raise ExprError(f"unterminated string in {self.text!r}")
        self.pos = i + 1
        if self.skip:
            return None
        return template(self.text[start:i], self.scope, raw=True)


def _index(value: Any, key: Any) -> Any:
    """``value[key]`` as HCL indexes: a list by a whole number from 0 (a string spelling one
    converts), a map by a string (a number or bool converts); nothing else."""
    if isinstance(value, list) and not isinstance(key, (bool, list, dict)) and key is not None:
        with contextlib.suppress(ExprError):
            number = _number(key, "[]")
            if float(number).is_integer() and 0 <= number < len(value):
                return value[int(number)]
    elif isinstance(value, dict) and not isinstance(key, (list, dict)) and key is not None and _text(key) in value:
        return value[_text(key)]
    raise ExprError(f"no element {key!r} in {value!r}")


_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt, ">": operator.gt, "<=": operator.le, ">=": operator.ge,
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
}


def _apply(op: str, a: Any, b: Any) -> Any:
    """``a op b`` as HCL computes it: logic on bools, arithmetic and ordering on numbers, each operand
    converted as HCL converts it ("false" is false, "10" is 10); equality never converts."""
    if op in ("&&", "||"):
        left, right = _bool(a, f"the left operand of {op}"), _bool(b, f"the right operand of {op}")
        return (left and right) if op == "&&" else (left or right)
    if op in ("==", "!="):
        return _equal(a, b) == (op == "==")
    x, y = _number(a, op), _number(b, op)
    if op in ("/", "%") and y == 0:
        raise ExprError(f"{a!r} {op} {b!r}: division by zero")
    if op == "%":  # the remainder takes the dividend's sign, as Go's (cty's) does, not the divisor's
        rest = math.fmod(x, y)
        return int(rest) if isinstance(x, int) and isinstance(y, int) else rest
    return _OPERATORS[op](x, y)


_NUMBER = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?\Z")


def _bool(value: Any, what: str) -> bool:
    """A bool as HCL converts one: true/false, or the strings "true"/"false"/"1"/"0"."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value in ("true", "false", "1", "0"):
        return value in ("true", "1")
    raise ExprError(f"{what} must be a bool, not {value!r}")


def _number(value: Any, op: str) -> int | float:
    """A number as HCL converts one: a number, or a string that spells one ("10", "-2.5", "1e3")."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _NUMBER.match(value):
        number = float(value)
        return int(number) if number.is_integer() else number
    raise ExprError(f"the operands of {op} must be numbers, not {value!r}")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def _equal(a: Any, b: Any) -> bool:
    """HCL's ==: values of different types are never equal (true != 1, "1" != 1)."""
    if _kind(a) != _kind(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return a == b


def _format(spec: str, *args: Any) -> str:
    """format() with %s, %d, %v and %%; any other verb (flags, width...) is refused, not copied, and
    so are too few or too many arguments, as Packer refuses them."""
    values = list(args)

    def verb(m: re.Match[str]) -> str:
        if m[0] == "%%":
            return "%"
        if m[0] not in ("%s", "%d", "%v") or not values:
            raise ExprError(f"format({spec!r}): {m[0]} is not supported, or has no argument left")
        value = values.pop(0)
        return _text(_number(value, "%d") if m[0] == "%d" else value)

    text = re.sub(r"%[^A-Za-z%]*[A-Za-z%]", verb, spec)
    if values:
        raise ExprError(f"format({spec!r}): too many arguments")
    return text


def _replace(text: str, old: str, new: str) -> str:
    """replace(): a ``/pattern/`` is a regular expression, ``$1`` / ``${name}`` in ``new`` its groups
    (Go's Expand: ``$$`` is "$", a group that does not exist is "")."""
    if len(old) < 2 or old[0] != "/" or old[-1] != "/":
        return text.replace(old, new)
    try:
        pattern = re.compile(old[1:-1])
    except re.error as exc:
        raise ExprError(f"replace(): {old} is not a regular expression the rehearsal reads: {exc}") from None

    def group(m: re.Match[str], name: str) -> str:
        with contextlib.suppress(IndexError):
            return m.group(int(name) if name.isdigit() else name) or ""
        return ""

    expand = re.compile(r"\$(?:\{(\w+)\}|(\w+)|\$)")
    return pattern.sub(lambda m: expand.sub(lambda g: group(m, g[1] or g[2]) if g[0] != "$$" else "$", new), text)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "join": lambda sep, *lists: sep.join(_text(x) for lst in lists for x in lst),
    "split": lambda sep, text: text.split(sep),
    "compact": lambda items: [x for x in items if x not in ("", None)],
    "concat": lambda *lists: [x for lst in lists for x in lst],
    "coalesce": lambda *xs: next((x for x in xs if x not in (None, "")), None),
    "lower": lambda s: s.lower(),
    "upper": lambda s: s.upper(),
    "trimspace": lambda s: s.strip(),
    "replace": _replace,
    "format": _format,
    "length": len,
    "contains": lambda items, x: x in items,
    "element": lambda items, i: items[int(i) % len(items)],
    "lookup": lambda m, k, *default: m.get(k, *default) if default else m[k],
    "merge": lambda *maps: {k: v for m in maps for k, v in m.items()},
    "basename": os.path.basename,
    "dirname": os.path.dirname,
    "abspath": os.path.abspath,
    "jsonencode": lambda v: json.dumps(v, separators=(",", ":")),
    "tostring": _text,
    "tonumber": lambda v: None if v is None else _number(v, "tonumber()"),  # as cty: "1e3" yes, true no
    "tolist": list,
    "toset": lambda v: sorted(set(v)),
}


def _call(name: str, args: list[Any]) -> Any:
    if name == "env":
        return ""  # the rehearsal gives the template no environment: every env() is unset
    if name not in _FUNCTIONS:
        raise ExprError(f"function {name}() is not supported by the rehearsal")
    try:
        return _FUNCTIONS[name](*args)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        raise ExprError(f"{name}() failed on {args!r}: {exc}") from None
