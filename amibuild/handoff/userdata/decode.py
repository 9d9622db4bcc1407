"""Decode node user data as EC2 or a CloudFormation template holds it, whatever the nesting. Pure.

`decode` peels base64, gzip, MIME multi-part, quoted-printable, `#cloud-config`, nodeadm
NodeConfig, JSON strings and JSON/YAML documents with a `UserData` field into `Part`s;
`format_parts` prints them. Input that is none of these raises `NotUserData`; input beyond a
`Budget`'s caps raises `UserDataTooBig` (`limits`).

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import base64
import binascii
import email
import email.message
import json
import re
import shlex
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from amibuild.errors import NotUserData, UserDataTooBig
from amibuild.handoff.cfn_parts import load_yaml
from amibuild.handoff.userdata.kubelet import yaml_text
from amibuild.handoff.userdata.limits import MAX_BYTES, Budget, mime_nesting, read_limited, shown_size, structure_nesting
from amibuild.pipeline.validation import partition_dns_suffixes, region_partitions

__all__ = ["MAX_BYTES", "Budget", "Part", "decode", "format_parts", "read_limited", "stack_references"]


@dataclass(frozen=True)
class Part:
    """One leaf of decoded user data.

    `path` is a write_files path or a MIME part's file name; `via` lists the encodings peeled off
    on the way from the input (base64, gzip, quoted-printable, a template's UserData field);
    `depth` counts the multiparts and cloud-configs it sits in beyond the outermost document.
    """

    content_type: str
    body: str
    path: str = ""
    permissions: str = ""
    owner: str = ""
    via: tuple[str, ...] = ()
    depth: int = 0


# cloud-init's type for a payload by its first characters; longer prefixes first.
_PREFIX_TYPES = (
    ("#include-once", "text/x-include-once-url"),
    ("#include", "text/x-include-url"),
    ("#cloud-config-archive", "text/cloud-config-archive"),
    ("#cloud-config-jsonp", "text/cloud-config-jsonp"),
    ("#cloud-config", "text/cloud-config"),
    ("#cloud-boothook", "text/cloud-boothook"),
    ("#part-handler", "text/part-handler"),
    ("#upstart-job", "text/upstart-job"),
    ("## template: jinja", "text/jinja2"),
    ("#!", "text/x-shellscript"),
)
_MIME_HEAD = re.compile(r"^(mime-version|content-type)[ \t]*:", re.IGNORECASE)
_NODECONFIG = re.compile(r"^apiVersion:\s*['\"]?node\.eks\.aws/", re.MULTILINE | re.ASCII)
_BASE64 = re.compile(r"^[A-Za-z0-9+/]+={0,2}\Z")
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_TYPES = ("application/gzip", "application/x-gzip", "application/x-gzip-compressed")
_SNIFFED_TYPES = ("text/plain", "text/x-not-multipart", "application/octet-stream", *_GZIP_TYPES)
_WRITE_FILES_ENCODINGS = {
    "": (), "text/plain": (),
    "b64": ("base64",), "base64": ("base64",),
    "gz": ("gzip",), "gzip": ("gzip",),
    "gz+b64": ("base64", "gzip"), "gz+base64": ("base64", "gzip"),
    "gzip+b64": ("base64", "gzip"), "gzip+base64": ("base64", "gzip"),
}


@dataclass(frozen=True)
class _At:
    """Where the decoder is: the input's name, the encodings peeled so far, the nesting depth."""

    source: str
    via: tuple[str, ...] = ()
    depth: int = 0
    refs: tuple[tuple[str, str], ...] = ()  # CloudFormation references -> values (`decode`)
    budget: Budget = field(default_factory=Budget, compare=False)

    def peel(self, layer: str) -> _At:
        here = replace(self, via=(*self.via, layer))
        self.budget.reach(len(here.via), here, "encodings")
        return here

    def deeper(self) -> _At:
        return replace(self, depth=self.depth + 1)

    def part(self, content_type: str, body: str, **where: str) -> Part:
        return Part(content_type, body, via=self.via, depth=self.depth, **where)

    def charge(self, data: bytes | str, what: str) -> None:
        self.budget.charge(len(data), self, what)

    def refuse(self, why: str) -> NotUserData:
        return NotUserData(f"{self.source}: not user data: {self._after()}{why}")

    def too_big(self, why: str, *, nesting: bool = False) -> UserDataTooBig:
        return UserDataTooBig(f"{self.source}: not decoded: {self._after()}{why}", nesting=nesting)

    def _after(self) -> str:
        return f"after {', '.join(self.via[:8])}{', ...' if len(self.via) > 8 else ''}: " if self.via else ""


def decode(data: bytes, source: str = "<input>", references: Mapping[str, str] | None = None,
           budget: Budget | None = None) -> list[Part]:
    """Every part of the user data in `data`, however it is encoded and nested; `references`
    fill in a template's CloudFormation references (parameter or pseudo parameter -> value).
    `budget` (default: 1 MiB, 32 deep) caps the work; `UserDataTooBig` beyond it."""
    at = _At(source, refs=tuple(sorted((references or {}).items())), budget=budget or Budget())
    if len(data) > at.budget.max_bytes:
        raise at.too_big(f"{len(data)} bytes, more than the limit of {shown_size(at.budget.max_bytes)}")
    return _sniff(data, at)


def stack_references(parameters: Mapping[str, str], *, stack: str = "", region: str = "") -> dict[str, str]:
    """What a stack's template references resolve to: its parameters and the pseudo parameters known."""
    out = dict(parameters)
    partition = region_partitions().get(region, "aws")
    if stack:
        out["AWS::StackName"] = stack
    if region:
        out.update({"AWS::Region": region, "AWS::Partition": partition,
                    "AWS::URLSuffix": partition_dns_suffixes().get(partition, "amazonaws.com")})
    return out


def _sniff(data: bytes, at: _At, declared: str = "") -> list[Part]:
    """Parts of a payload recognised by its first bytes. `declared` is the MIME type of a part
    whose content cloud-init sniffs as well (text/plain, gzip): it stands when nothing matches."""
    if data.startswith(_GZIP_MAGIC):
        here = at.peel("gzip")
        return _sniff(_gunzip(data, here), here, declared)
    text = _text(data)
    if text is None:
        if declared:
            return [_binary(data, declared, at)]
        raise at.refuse(f"{len(data)} bytes of binary data that is not gzip")
    text = text.lstrip("\ufeff")
    start = text.lstrip()
    if not start:
        if declared:
            return [at.part(declared, "")]
        raise at.refuse("empty")
    if not declared and _MIME_HEAD.match(start):
        document = data.removeprefix(b"\xef\xbb\xbf").lstrip()
        mime_nesting(document, at)  # before the email parser, which recurses per level
        # From bytes, so that 8-bit bodies come back unchanged from get_payload(decode=True).
        return _mime_parts(email.message_from_bytes(document), at)
    for prefix, content_type in _PREFIX_TYPES:
        if start.startswith(prefix):
            if content_type == "text/cloud-config":
                return _cloud_config(text, at)
            return [at.part(content_type, text)]
    if _NODECONFIG.search(text):
        return [at.part("application/node.eks.aws", text)]
    if declared:
        return [at.part("text/plain" if declared in _GZIP_TYPES else declared, text)]
    raw = _unbase64(start)
    if raw is not None:
        return _inner(at.peel("base64"), raw, "base64")
    quoted = _json_string(start)
    if quoted is not None:
        # What the AWS CLI prints for a string under --query (get-template's TemplateBody of a
        # YAML template, a launch template's UserData): one JSON string, quoted and escaped.
        return _inner(at.peel("JSON string"), quoted, "a JSON string")
    body = _template_body(start, at)
    if body is not None:
        # A whole `aws cloudformation get-template` answer: a YAML template comes back as text.
        return _inner(at.peel("TemplateBody"), body, "TemplateBody")
    found = _template_user_data(start, at)
    if found is None:
        raise at.refuse("no MIME header, #cloud-config, #! script, NodeConfig, base64, gzip or UserData field")
    if not found:
        raise at.refuse("a JSON/YAML document without a UserData field")
    parts: list[Part] = []
    for where, value, unresolved in found:
        here = at.peel(where)
        if unresolved:
            here = here.peel("CloudFormation references: " + " ".join(unresolved))
        parts += _inner(here, value, where)
    return parts


def _inner(here: _At, held: bytes | str, what: str) -> list[Part]:
    """The parts of what one peeled layer held, charged to the budget as `what`."""
    data = held.encode() if isinstance(held, str) else held
    here.charge(data, what)
    return _sniff(data, here)


def _text(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _binary(data: bytes, content_type: str, at: _At, **where: str) -> Part:
    return at.part(content_type, f"<{len(data)} bytes of binary data>", **where)


def _gunzip(data: bytes, at: _At, what: str = "") -> bytes:
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        # never more than the budget left, and one byte to know it would have gone beyond
        out = inflater.decompress(data, at.budget.left + 1)
    except zlib.error as exc:
        raise at.refuse(f"{what}corrupt gzip data ({exc})") from None
    at.charge(out, f"{what}gzip data")
    if not inflater.eof:
        raise at.refuse(f"{what}truncated gzip data")
    return out


def _unbase64(text: str) -> bytes | None:
    compact = "".join(text.split())
    if len(compact) < 4 or len(compact) % 4 or not _BASE64.match(compact):
        return None
    return base64.b64decode(compact, validate=True)


def _mime_parts(message: email.message.Message, at: _At) -> list[Part]:
    content_type = message.get_content_type()
    if not message.is_multipart():
        if content_type.startswith("multipart/"):
            raise at.refuse(f"{content_type} whose boundary {message.get_boundary()!r} never appears")
        return _mime_leaf(message, at)
    children = message.get_payload()
    if not children:
        raise at.refuse(f"{content_type} with no parts")
    parts: list[Part] = []
    for child in children:
        parts += _mime_parts(child, at.deeper()) if child.is_multipart() else _mime_leaf(child, at)
    return parts


def _mime_leaf(message: email.message.Message, at: _At) -> list[Part]:
    content_type = message.get_content_type()
    name = message.get_filename() or ""
    encoding = str(message.get("Content-Transfer-Encoding", "")).strip().lower()
    if encoding in ("base64", "quoted-printable"):
        at = at.peel(encoding)
    payload = message.get_payload(decode=True) or b""
    at.charge(payload, f"MIME part {content_type}")
    if content_type in _SNIFFED_TYPES or payload.startswith(_GZIP_MAGIC):
        parts = _sniff(payload, at, declared=content_type)
    elif content_type == "text/cloud-config":
        parts = _cloud_config(_text(payload) or "", at)
    else:
        text = _text(payload)
        parts = [_binary(payload, content_type, at) if text is None else at.part(content_type, text)]
    if name and len(parts) == 1 and not parts[0].path:
        parts = [replace(parts[0], path=name)]
    return parts


def _cloud_config(text: str, at: _At) -> list[Part]:
    # cloud-init takes aliases: what this decoder makes of them is charged to the budget
    structure_nesting(text, at, aliases=True)
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise at.refuse(f"#cloud-config that is not YAML ({' '.join(str(exc).split())})") from None
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise at.refuse("#cloud-config that is not a mapping")
    listed = ("bootcmd", "write_files", "runcmd")
    rest = {key: value for key, value in config.items() if key not in listed}
    parts = [at.part("text/cloud-config", yaml_text(rest) if rest else "")]
    inner = at.deeper()
    # In the order cloud-init acts on them: bootcmd and write_files at init, runcmd at the end.
    if "bootcmd" in config:
        parts.append(_commands("bootcmd", config["bootcmd"], inner))
    for index, entry in enumerate(_as_list(config.get("write_files"), "write_files", at), 1):
        parts.append(_write_file(entry, index, inner))
    if "runcmd" in config:
        parts.append(_commands("runcmd", config["runcmd"], inner))
    return parts


def _as_list(value: Any, key: str, at: _At) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise at.refuse(f"#cloud-config whose {key} is not a list")
    return value


def _commands(key: str, value: Any, at: _At) -> Part:
    lines = [shlex.join(str(word) for word in command) if isinstance(command, list) else str(command)
             for command in _as_list(value, key, at)]
    body = "\n".join(lines) + ("\n" if lines else "")
    at.charge(body, f"#cloud-config {key}")
    return at.part(f"cloud-config/{key}", body)


def _write_file(entry: Any, index: int, at: _At) -> Part:
    if not isinstance(entry, dict) or not entry.get("path"):
        raise at.refuse(f"#cloud-config write_files entry {index} has no path")
    path = str(entry["path"])
    encoding = str(entry.get("encoding") or "").strip().lower()
    if encoding not in _WRITE_FILES_ENCODINGS:
        raise at.refuse(f"write_files {path}: unknown encoding {encoding!r}")
    content = entry.get("content")
    raw = content if isinstance(content, bytes) else str(content if content is not None else "").encode()
    at.charge(raw, f"write_files {path}")
    here = at
    for layer in _WRITE_FILES_ENCODINGS[encoding]:
        if layer == "base64":
            try:
                raw = base64.b64decode(b"".join(raw.split()), validate=True)
            except (binascii.Error, ValueError):
                raise here.refuse(f"write_files {path}: content is not base64") from None
            here.charge(raw, f"write_files {path}: base64")
        else:
            raw = _gunzip(raw, here, f"write_files {path}: ")
        here = here.peel(layer)
    where = {"path": path, "permissions": _permissions(entry.get("permissions")), "owner": str(entry.get("owner") or "")}
    text = _text(raw)
    if text is None:
        return _binary(raw, "application/octet-stream", here, **where)
    content_type = next((kind for prefix, kind in _PREFIX_TYPES if text.startswith(prefix)), "text/plain")
    return here.part(content_type, text, **where)


def _permissions(value: Any) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, int):  # YAML 1.1 reads an unquoted 0644 as the number 420
        return f"{value:04o}"
    text = str(value).strip()
    match = re.match(r"^0?o?([0-7]{3,4})\Z", text)
    return match.group(1).rjust(4, "0") if match else text


def _json_string(text: str) -> str | None:
    """The text of a document that is one JSON string, else None."""
    if not text.startswith('"'):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def _template_body(text: str, at: _At) -> str | None:
    """TemplateBody of a get-template answer when it is text (a YAML template), else None."""
    if not text.startswith("{"):
        return None
    structure_nesting(text, at)
    try:
        document = json.loads(text)
    except ValueError:
        return None
    body = document.get("TemplateBody") if isinstance(document, dict) else None
    return body if isinstance(body, str) and body.strip() else None


_INTRINSICS = ("Fn::Base64", "Fn::Sub", "Fn::Join")


def _template_user_data(text: str, at: _At) -> list[tuple[str, str, tuple[str, ...]]] | None:
    """(where, text, references left unfilled) of each `UserData` field of a JSON/YAML document
    (EC2 or CloudFormation), or None if it is none. A document that is itself one intrinsic
    function (a UserData value as `--query` prints it) is read as one UserData value."""
    if not structure_nesting(text, at):
        return None
    refs = dict(at.refs)
    try:
        # CloudFormation's short forms (!Sub, !Base64, !Ref, ...) read as their long forms
        document = load_yaml(text, lenient=True)
    except yaml.YAMLError:
        return None
    if not isinstance(document, (dict, list)):
        return None
    found = list(_find_key(document, "UserData", ""))
    if not found and isinstance(document, dict) and len(document) == 1 and next(iter(document)) in _INTRINSICS:
        found = [("UserData", document)]
    out = []
    for where, value in found:
        left: list[str] = []
        out.append((where, _template_text(value, refs, left, at), tuple(dict.fromkeys(left))))
    return out


def _find_key(node: Any, key: str, where: str) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for name, value in node.items():
            here = f"{where}.{name}" if where else str(name)
            if name == key:
                yield here, value
            else:
                yield from _find_key(value, key, here)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _find_key(value, key, f"{where}[{index}]")


# In Fn::Sub text: "${!" (a literal "${") or a reference "${Name}".
_SUB = re.compile(r"\$\{(?:!|([^!${}][^${}]*)\})")


def _template_text(value: Any, refs: Mapping[str, str], left: list[str], at: _At) -> str:
    """The text of a UserData value as the node gets it: references filled in from `refs`; one
    that is not there stays ${Name} and is added to `left`. Every value filled in is charged to
    the budget (one reference repeated can multiply a document)."""
    def ref(name: str, known: Mapping[str, str] = refs) -> str:
        if name in known:
            at.charge(known[name], f"reference {name}")
            return known[name]
        left.append(name)
        return "${" + name + "}"

    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((name, inner),) = value.items()
        if name in ("Fn::Base64", "Value"):  # Value: describe-instance-attribute's wrapper
            return _template_text(inner, refs, left, at)
        if name == "Fn::Sub":
            text, variables = (inner[0], inner[1] if len(inner) > 1 else {}) if isinstance(inner, list) and inner \
                else (inner, {})
            local = {**refs, **{str(k): _template_text(v, refs, left, at) for k, v in dict(variables or {}).items()}}
            body = _template_text(text, refs, left, at)
            return _SUB.sub(lambda match: "${" if match.group(1) is None else ref(match.group(1), local), body)
        if name == "Fn::Join" and isinstance(inner, list) and len(inner) == 2 and isinstance(inner[1], list):
            return str(inner[0]).join(_template_text(item, refs, left, at) for item in inner[1])
        if name == "Ref":
            return ref(str(inner))
        if name == "Fn::GetAtt":
            return ref(".".join(map(str, inner)) if isinstance(inner, list) else str(inner))
        return ref(str(name))
    if isinstance(value, dict) and "Value" in value:
        return _template_text(value["Value"], refs, left, at)
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)


# ------------------------------------------------------------------------------------ printing

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def format_parts(parts: Sequence[Part]) -> str:
    """Each part as a header line (type, path, mode, owner, depth, encodings) and its body."""
    out = []
    for number, part in enumerate(parts, 1):
        head = [f"part {number}/{len(parts)}: {part.content_type}"]
        if part.path:
            head.append(f"path={shlex.quote(_visible(part.path))}")
        if part.permissions:
            head.append(f"mode={_visible(part.permissions)}")
        if part.owner:
            head.append(f"owner={_visible(part.owner)}")
        if part.depth:
            head.append(f"depth={part.depth}")
        if part.via:
            head.append("via=" + ",".join(_visible(layer) for layer in part.via))
        out.append(f"--- {' '.join(head)} ---")
        body = _visible(part.body.replace("\r\n", "\n")).rstrip("\n")
        if body:
            out.append(body)
    return "\n".join(out) + "\n"


def _visible(text: str) -> str:
    """Control characters (terminal escapes among them) shown as \\xNN rather than sent to a terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
