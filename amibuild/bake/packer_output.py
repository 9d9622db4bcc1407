"""What Packer prints, read by pure functions with no I/O (fed recorded output in the tests):
`parse_version`, `parse_line`, `parse_machine_readable`, `progress_step`, `parse_manifest` /
`manifest_builds`, `cross_check`, `error_summary`, and `blame` / `input_refusal` (a refusal of the
user's value). The binary that prints it is `amibuild.bake.packer.Packer`.

Builder names: Packer's machine-readable stream names a build ``<type>.<source name>``
(``amazon-ebs.worker``, the same name ``-only`` takes); its manifest stores ``builder_type`` and
``name`` separately (``amazon-ebs`` and ``worker``). Both parsers key builds by the stream's form,
``amazon-ebs.worker``; the manifest's is rebuilt as ``f"{builder_type}.{name}"``. That holds for
HCL2 templates, the only kind amibuild renders.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from amibuild.errors import PackerError, PackerInputRefused, PackerOutputError

# Artifacts whose id is a list of region:ami pairs. ebsvolume is left out: its ids are volumes.
AMI_BUILDER_IDS = frozenset({"mitchellh.amazonebs", "mitchellh.amazon.ebssurrogate", "mitchellh.amazon.instance",
                             "mitchellh.amazon.chroot", "packer.post-processor.amazon-import"})
AMI_BUILDER_TYPES = frozenset({"amazon-ebs", "amazon-ebssurrogate", "amazon-instance", "amazon-chroot"})


# --------------------------------------------------------------------------------------- version


@dataclass(frozen=True, order=True)
class PackerVersion:
    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @property
    def uses_plugins(self) -> bool:
        """True from 1.7: the template carries `required_plugins` and needs `packer init`.

        1.6.x has the amazon builders built in and refuses a `required_plugins` block.
        """
        return (self.major, self.minor) >= (1, 7)


MIN_VERSION = PackerVersion(1, 6, 0)

_VERSION_PATTERNS = (
    re.compile(r"^\s*Packer v([0-9]+)\.([0-9]+)\.([0-9]+)\b", re.ASCII),  # `packer version`
    re.compile(r"^\s*v?([0-9]+)\.([0-9]+)\.([0-9]+)\b", re.ASCII),  # `packer --version`
)


def parse_version(text: str) -> PackerVersion:
    """The version in the output of `packer version`, `packer --version` or
    `packer -machine-readable version`; any trailing "out of date" notice is ignored."""
    for raw in text.splitlines():
        line = parse_line(raw)
        if line is None:
            match = next(filter(None, (pattern.match(raw) for pattern in _VERSION_PATTERNS)), None)
        elif line.type == "version" and line.data:
            match = _VERSION_PATTERNS[1].match(line.data[0])
        else:
            continue
        if match:
            return PackerVersion(*map(int, match.groups()))
    first = next((raw.strip() for raw in text.splitlines() if raw.strip()), "")
    raise PackerError(f"cannot read a Packer version from {first[:80]!r}")


# ------------------------------------------------------------------------------ machine-readable

_LINE = re.compile(r"^([0-9]+),([^,]*),([a-z][a-z0-9-]*)(?:,(.*))?\Z")
_COMMA = "%!(PACKER_COMMA)"


def _unescape(field_: str) -> str:
    # Packer escapes "," as %!(PACKER_COMMA) and CR/LF as backslash-r/-n, and leaves backslashes
    # alone; a literal backslash-n in a message therefore comes back as a newline.
    return field_.replace("\\n", "\n").replace("\\r", "\r").replace(_COMMA, ",")


def escape_field(text: str) -> str:
    """``text`` as Packer writes it in a machine-readable data field (what `parse_line` undoes)."""
    return text.replace(",", _COMMA).replace("\r", "\\r").replace("\n", "\\n")


@dataclass(frozen=True)
class MachineLine:
    """One `-machine-readable` line: ``timestamp,target,type,data...``, data unescaped."""

    timestamp: int
    target: str
    type: str
    data: tuple[str, ...]


def parse_line(line: str) -> MachineLine | None:
    """Split and unescape one machine-readable line; None for a raw line Packer printed as is."""
    match = _LINE.match(line.rstrip("\r\n"))
    if match is None:
        return None
    timestamp, target, type_, rest = match.groups()
    data = tuple(_unescape(f) for f in rest.split(",")) if rest is not None else ()
    return MachineLine(int(timestamp), target, type_, data)


@dataclass(frozen=True)
class BuildResult:
    """What one `packer build -machine-readable` run reported.

    ``artifacts``: build name (``amazon-ebs.worker``) -> {region: ami_id}, AMI builders only.
    ``errors``: distinct error messages in order, one line each, ``"<build>: <message>"`` where
    Packer names the build. ``build_errors``: build name -> its error from Packer's final summary.
    ``error_count``: Packer's own count, None when it printed none (it prints none on success).
    ``cancelled``: Packer reported a cancel (SIGINT/SIGTERM). ``failed_step``: the step (as
    `progress_step` names it) that was running when the first error or cancel showed up, None
    when there was none. ``unparsed``: non-empty raw lines.
    """

    artifacts: dict[str, dict[str, str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    build_errors: dict[str, str] = field(default_factory=dict)
    error_count: int | None = None
    cancelled: bool = False
    failed_step: str | None = None
    unparsed: list[str] = field(default_factory=list)

    @property
    def first_error(self) -> str | None:
        """Packer's verdict on a failed build when it gave one: a provisioner's stderr comes out as
        ``==> <build>:`` error lines too, before it."""
        verdict = next(iter(self.build_errors.items()), None)
        return f"{verdict[0]}: {verdict[1]}" if verdict else next(iter(self.errors), None)


_BUILD_ERRORED = re.compile(r"^Build '([^']+)' errored after [^:]*: (.*)\Z", re.DOTALL)
_BUILD_FINISHED = re.compile(r"^Build '([^']+)' finished after ")
_TARGETED = re.compile(r"^==> ([A-Za-z0-9_.-]+): ")  # a build's own error line, not Packer's summary (-->)
_ARROW = re.compile(r"^(?:==>|-->) ")
_ARROW_TARGET = re.compile(r"^(?:==>|-->) ([A-Za-z0-9_.-]+): ")
_CANCEL = ("Cancelling build after receiving", "Cleanly cancelled builds after being interrupted")


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def _error_message(text: str, target: str = "") -> str | None:
    """One line for a `ui,error` / `error` message, or None for Packer's summary headers."""
    text = text.strip("\n")
    if not text or text.rstrip().endswith("had errors:") or text.startswith(_CANCEL):
        return None
    errored = _BUILD_ERRORED.match(text)
    if errored:
        return f"{errored.group(1)}: {_one_line(errored.group(2))}"
    lines = text.split("\n")
    arrow = _ARROW_TARGET.match(lines[0])
    if arrow:
        # "==> amazon-ebs.worker: first\n==> amazon-ebs.worker: second": keep the name once
        repeated = f"{arrow.group(1)}: "
        rest = [_ARROW.sub("", line).removeprefix(repeated) for line in lines[1:]]
        return _one_line("\n".join([_ARROW.sub("", lines[0]), *rest]))
    # "Error: ...": an HCL diagnostic (template or variable problem)
    message = error_summary(text) if text.startswith("Error: ") else _one_line(text)
    return f"{target}: {message}" if target else message


def _parse_ami_list(text: str, where: str) -> dict[str, str]:
    """``region:ami,region:ami`` (real commas) -> {region: ami}."""
    amis: dict[str, str] = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        region, sep, ami = pair.partition(":")
        if not sep or not region or not ami.startswith("ami-"):
            raise PackerOutputError(f"{where}: {pair!r} is not region:ami in artifact id {text!r}")
        if amis.get(region, ami) != ami:
            raise PackerOutputError(f"{where}: two AMIs for {region}: {amis[region]} and {ami}")
        amis[region] = ami
    return amis


def parse_machine_readable(lines: Iterable[str]) -> BuildResult:
    """Read a whole `packer build -machine-readable` stream (lines with or without newlines).

    Packer prints an artifact once per post-processor that keeps it (1.6.6 with a manifest
    post-processor prints the same AMIs as artifact 0 and 1); identical copies merge, copies that
    disagree raise `PackerOutputError`.

    A ``==> <build>: ...`` error line is a step's error or a line a provisioner wrote to stderr
    (Packer prints both alike); it counts unless Packer then says that build finished.
    """
    artifact_fields: dict[tuple[str, str], dict[str, str]] = {}
    # in stream order: (error message or None, the build whose "finished" withdraws it, step then)
    events: list[tuple[str | None, str | None, str | None]] = []
    finished: set[str] = set()
    build_errors: dict[str, str] = {}
    error_count: int | None = None
    cancelled = False
    step: str | None = None
    unparsed: list[str] = []

    def add_error(message: str | None, build: str | None = None, at: str | None = None) -> None:
        if message:
            events.append((message, build, at))

    for raw in lines:
        line = parse_line(raw)
        if line is None:
            if raw.strip():
                unparsed.append(raw.rstrip("\r\n"))
            continue
        if line.type == "artifact" and len(line.data) >= 2:
            index, key = line.data[0], line.data[1]
            value = line.data[2] if len(line.data) > 2 else ""
            artifact_fields.setdefault((line.target, index), {})[key] = value
        elif line.type == "error-count" and line.data:
            try:
                error_count = int(line.data[0])
            except ValueError:
                raise PackerOutputError(f"error-count is not a number: {line.data[0]!r}") from None
        elif line.type == "error" and line.target and line.data:
            message = _error_message(line.data[0], line.target)
            if message:
                own = message.removeprefix(f"{line.target}: ")
                earlier = build_errors.get(line.target)
                build_errors[line.target] = f"{earlier}; {own}" if earlier else own
                add_error(message)
        elif line.type == "ui" and len(line.data) >= 2:
            kind, text = line.data[0], line.data[1]
            if text.strip("\n").startswith(_CANCEL):
                cancelled = True
                events.append((None, None, step))
            if kind == "error":
                targeted = _TARGETED.match(text)
                add_error(_error_message(text), targeted.group(1) if targeted else None, step)
            elif kind == "say":
                done = _BUILD_FINISHED.match(text)
                if done:
                    finished.add(done.group(1))
                current = _step(text)
                if current and current.startswith(_STEP_FAILED):
                    events.append((None, None, step))
                step = current or step

    kept = [(message, build, at) for message, build, at in events if build is None or build not in finished]
    errors = list(dict.fromkeys(message for message, _, _ in kept if message))
    # where a provisioner failed or a cancel came, else where a build's step printed Packer's verdict
    # on it, else the first error (a provisioner's stderr before the failure is no failure of its own)
    verdicts = {f"{build}: {message}" for build, message in build_errors.items()}
    failed_step = next((at for message, build, at in kept if at and (message is None or build and message in verdicts)),
                       next((at for _, _, at in kept if at), None))

    artifacts: dict[str, dict[str, str]] = {}
    for (target, index), fields in artifact_fields.items():
        if fields.get("builder-id") not in AMI_BUILDER_IDS or "id" not in fields:
            continue
        amis = _parse_ami_list(fields["id"], f"artifact {index} of {target}")
        merged = artifacts.setdefault(target, {})
        for region, ami in amis.items():
            if merged.get(region, ami) != ami:
                raise PackerOutputError(f"{target} reported two AMIs for {region}: {merged[region]} and {ami}")
            merged[region] = ami
    return BuildResult(artifacts={t: dict(sorted(a.items())) for t, a in artifacts.items()}, errors=errors,
                       build_errors=build_errors, error_count=error_count, cancelled=cancelled,
                       failed_step=failed_step, unparsed=unparsed)


_STEP = re.compile(r"^==> [A-Za-z0-9_.-]+: (.+)\Z", re.DOTALL)
_STEP_REWRITES = (
    (re.compile(r"^Copying/Encrypting AMI .* to other regions"), "Copying AMI to other regions"),
    (re.compile(r"^Creating AMI .* from instance"), "Creating AMI"),
    (re.compile(r"^Authorizing access to port .* temporary security group"),
     "Authorizing access to the temporary security group"),
)
# Said once cleanup starts after a provisioner failed; the failed step is the one before it.
_STEP_FAILED = "Provisioning step had errors"
_PARENS = re.compile(r"\s*\([^)]*\)", re.ASCII)


def _step(text: str) -> str | None:
    match = _STEP.match(text)
    if match is None:
        return None
    step = match.group(1).split("\n", 1)[0]
    for pattern, replacement in _STEP_REWRITES:
        if pattern.match(step):
            return replacement
    # Drop ids and paths so the display is steady: "Waiting for instance (i-0abc) to become
    # ready..." -> "Waiting for instance to become ready"; "Running local shell script: /tmp/x".
    step = _PARENS.sub("", step.split(": ", 1)[0])
    return step.rstrip(". ").strip() or None


def progress_step(line: str) -> str | None:
    """The short current step for a live display, from one raw machine-readable line.

    Only Packer's step announcements (``ui,say,==> <build>: <step>``) count; anything else,
    including step output and errors, gives None.
    """
    parsed = parse_line(line)
    if parsed is None or parsed.type != "ui" or len(parsed.data) < 2 or parsed.data[0] != "say":
        return None
    return _step(parsed.data[1])


# -------------------------------------------------------------------------------------- manifest


@dataclass(frozen=True)
class ManifestBuild:
    """One build of the manifest's last run. ``name`` is ``<builder_type>.<source name>``."""

    name: str
    builder_type: str
    amis: dict[str, str]
    custom_data: dict[str, str]
    run_uuid: str


def manifest_builds(text: str) -> list[ManifestBuild]:
    """The builds of the manifest's last run (the post-processor appends every run to the file).

    ``amis`` is filled for AMI builder types and empty for any other builder.
    """
    try:
        document = json.loads(text)
        runs = document["builds"]
        last = document["last_run_uuid"]
    except (ValueError, TypeError, KeyError) as exc:
        raise PackerOutputError(f"unreadable Packer manifest: {exc}") from exc
    selected: dict[str, ManifestBuild] = {}
    for entry in runs:
        if entry.get("packer_run_uuid") != last:
            continue
        builder_type = str(entry.get("builder_type", ""))
        name = f"{builder_type}.{entry.get('name', '')}"
        amis = (_parse_ami_list(entry.get("artifact_id") or "", f"manifest build {name}")
                if builder_type in AMI_BUILDER_TYPES else {})
        build = ManifestBuild(name, builder_type, amis=dict(sorted(amis.items())),
                              custom_data={str(k): str(v) for k, v in (entry.get("custom_data") or {}).items()},
                              run_uuid=last)
        if name in selected and selected[name].amis != build.amis:
            raise PackerOutputError(f"manifest run {last} lists {name} twice with different AMIs: "
                                    f"{selected[name].amis} and {build.amis}")
        selected[name] = build
    return list(selected.values())


def parse_manifest(text: str) -> dict[str, dict[str, str]]:
    """Build name (``amazon-ebs.worker``) -> {region: ami} for the manifest's last run."""
    return {b.name: b.amis for b in manifest_builds(text) if b.builder_type in AMI_BUILDER_TYPES}


def cross_check(stream: Mapping[str, Mapping[str, str]], manifest: Mapping[str, Mapping[str, str]],
                name: str | None = None) -> dict[str, str]:
    """The {region: ami} of one build once stream and manifest agree on it.

    ``name`` picks the build when there are several; with one build it may be left out.
    Raises `PackerOutputError` (one line, naming the region and both AMIs) otherwise.
    """
    if name is None:
        names = sorted(set(stream) | set(manifest))
        if not names:
            raise PackerOutputError("packer reported no AMI, in its output or in its manifest")
        if len(names) > 1:
            raise PackerOutputError(f"packer reported several builds ({', '.join(names)}); name the one to check")
        name = names[0]
    got, recorded = dict(stream.get(name) or {}), dict(manifest.get(name) or {})
    if not got:
        raise PackerOutputError(f"packer output names no AMI for {name}")
    if not recorded:
        raise PackerOutputError(f"packer manifest's last run has no AMI for {name}")
    for region in sorted(set(got) | set(recorded)):
        if got.get(region) != recorded.get(region):
            raise PackerOutputError(f"packer output and manifest disagree for {name} in {region}: "
                                    f"{got.get(region, 'no AMI')} (output) vs {recorded.get(region, 'no AMI')} "
                                    "(manifest)")
    return dict(sorted(got.items()))


# ------------------------------------------------------------------------------ human output


_LOCATION = re.compile(r"^\s+on (.+?) line ([0-9]+)", re.ASCII)


def error_summary(output: str) -> str:
    """One line for the first error in Packer's human output (HCL diagnostics or a bare line).

    ``Error: Unsupported argument / on a.pkr.hcl line 3: / An argument named "foo" is not
    expected here.`` becomes ``Unsupported argument (a.pkr.hcl line 3): An argument named "foo"
    is not expected here.``; a list of ``* problem`` bullets is joined with ``; ``.
    """
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("Error: ")), None)
    if start is None:
        return next((_one_line(line) for line in lines if line.strip()), "")
    summary = lines[start][len("Error: "):].strip().rstrip(":")
    location, bullets, paragraph = None, [], []
    for line in lines[start + 1:]:
        if line.startswith(("Error: ", "Warning: ")):
            break
        where = _LOCATION.match(line)
        if where:
            location = location or f"{where.group(1)} line {where.group(2)}"
        elif line.startswith("* "):
            bullets.append(line[2:].strip())
        elif not line.strip():
            if paragraph:
                break
        elif not line.startswith(" "):  # indented lines are source excerpts
            paragraph.append(line.strip())
    detail = "; ".join(bullets) if bullets else " ".join(paragraph)
    return summary + (f" ({location})" if location else "") + (f": {detail}" if detail else "")


# Attributes of amazon-ebs (and Packer's wording for them) that our template fills from a setting
# of another name: a refusal naming the attribute is blamed on the setting.
_ATTRIBUTE_SETTING = {
    "ami_name": "ami_name_prefix", "aminame": "ami_name_prefix", "encrypt_boot": "encrypted",
    "launch_block_device_mappings": "volume_size", "source_ami": "source_ami", "snapshot_users": "ami_users",
    # the template sets iops and throughput from the volume type (gp3 only)
    "iops": "volume_type", "throughput": "volume_type",
}


def blame(output: str, origins: Mapping[str, str]) -> tuple[str, str] | None:
    """(setting, where it came from) when Packer's refusal names a value the user set, else None.

    `origins` maps a setting or Packer variable to its origin ("--var instance_type",
    "amibuild.hcl: variant \"ceph\": ..."); settings left at their defaults are amibuild's own and
    a refusal naming them is amibuild's fault. Pure.
    """
    user_set = {name: where for name, where in origins.items() if where and where != "defaults"}
    if not user_set:
        return None
    # only names with an underscore or a known attribute: a plain word ("os", "arch") in Packer's
    # prose must not blame a setting of that name
    for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", output):
        mapped = _ATTRIBUTE_SETTING.get(word.lower(), "")
        if "_" not in word and not mapped:
            continue
        for name in (word, mapped):
            if name in user_set:
                return name, user_set[name]
    return None


def input_refusal(output: str, reason: str, origins: Mapping[str, str]) -> PackerInputRefused | None:
    """Packer's refusal as bad input naming the user's setting (exit 2), when `blame` finds one;
    None when the refusal is of something amibuild wrote (amibuild's fault, exit 1). Pure."""
    culprit = blame(output, origins)
    if culprit is None:
        return None
    name, where = culprit
    return PackerInputRefused(f"{where}: Packer refuses the value of {name} ({reason}); fix it and retry")
