"""Image tests: the checks every image must pass, and the gates a channel holds images to. Pure.

A variant's checks are the built-in ones (`builtin_checks`: what every EKS worker needs, per OS and
flavor, and what the variant adds: its packages, repositories, proxy) and its own
``test "NAME" { command = "...", timeout = "60s" }`` blocks. A block named like a built-in with
``enabled = false`` and a ``reason`` turns that built-in off; the reason is kept in the record.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import enum
import math
import re
import shlex
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from amibuild.errors import SpecError
from amibuild.inventory.scan import ScanPolicy, scan_policy
from amibuild.pipeline import attestation, value_checks as checks, hygiene, iam_names, naming
from amibuild.printable import printable
from amibuild.suggest import check_fields, one_block, suggest

DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 3600.0
MAX_CHECKS = 100
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhdw]?)")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
TEST_KEYS = ("command", "timeout", "enabled", "reason")
BOOT_TEST_KEYS = ("subnet_id", "security_group_id", "instance_profile", "role", "instance_type", "timeout", "cluster",
                  "output_bucket")
# An EKS cluster name (CreateCluster's rule): what a boot test's node joins (test { cluster }, --cluster)
_CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}", re.ASCII)
GATE_KEYS = ("from", "requires", "soak", "scan")
REQUIREMENTS = ("tested", "scanned")
HYGIENE = "hygiene"  # the stage of the checks of the clean-up: the build instance's last step


@dataclass(frozen=True)
class TestBlock:
    """One ``test "NAME" { ... }`` block as the pipeline file wrote it (merged across `extends`)."""

    name: str
    command: str = ""
    timeout: float = DEFAULT_TIMEOUT
    enabled: bool = True
    reason: str = ""
    where: str = ""


@dataclass(frozen=True)
class Check:
    """One check that will run on the image."""

    name: str
    command: str
    timeout: float = DEFAULT_TIMEOUT
    builtin: bool = True
    what: str = ""  # one line for `amibuild tests`
    boot_only: bool = False  # a check of the boot test's user data (`boot_checks`), not run on the build instance
    # a check of the clean-up (`hygiene_checks`): only on the build instance, as its last step
    after_cleanup: bool = False

    @property
    def stages(self) -> list[str]:
        return ["boot"] if self.boot_only else [HYGIENE] if self.after_cleanup else ["build", "boot"]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "command": self.command, "timeout": self.timeout,
                "origin": "built-in" if self.builtin else "pipeline file", "what": self.what,
                "stages": self.stages}


@dataclass(frozen=True)
class Disabled:
    """A built-in check turned off with `enabled = false`, and why."""

    name: str
    reason: str
    where: str
    note: str = ""  # a block that turns off a check this variant does not have (a typo, or another OS's)

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "reason": self.reason, "where": self.where, **({"note": self.note} if self.note else {})}


@dataclass(frozen=True)
class CheckSet:
    """What runs on a variant's image, and what was turned off."""

    checks: tuple[Check, ...]
    disabled: tuple[Disabled, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"checks": [c.to_dict() for c in self.checks], "disabled": [d.to_dict() for d in self.disabled]}


@dataclass(frozen=True)
class BootTestSettings:
    """The pipeline's ``test { ... }`` block: where a boot test's instance runs."""

    subnet_id: str = ""
    security_group_id: str = ""
    instance_profile: str = ""
    instance_type: str = ""
    timeout: float = 900.0
    role: str = ""  # the IAM role in instance_profile (iam-policy's PassRole); "" = a role named like the profile
    cluster: str = ""  # the EKS cluster the test node joins, tainted ("" = none: the user data is only checked)
    output_bucket: str = ""  # SSM writes each check's whole output here (OutputS3BucketName): its tail and size


@dataclass(frozen=True)
class Gate:
    """``channel "NAME" { from = ..., requires = [...], soak = "72h" }``: what an image needs to enter it."""

    channel: str
    source: str = ""  # `from`: promote only from this channel ("" = any road in)
    requires: tuple[str, ...] = ()
    soak: float = 0.0  # seconds the image must have been in `source` without a rollback
    where: str = ""
    scan: ScanPolicy = ScanPolicy()  # `scan { max_severity, ignore }`: what `requires = ["scanned"]` refuses

    def describe(self) -> str:
        parts = [f"from {self.source}"] if self.source else []
        parts += list(self.requires)
        if self.soak:
            parts.append(f"soak {format_seconds(self.soak)}")
        return ", ".join(parts) or "no conditions"


# ------------------------------------------------------------------------------- parsing


def seconds(value: Any, where: str, *, zero: bool = False) -> float:
    """Seconds from `90`, `90s`, `10m`, `2h`, `3d`, `1w`."""
    match = _DURATION.fullmatch(str(value).strip())
    if isinstance(value, bool) or not match:
        raise SpecError(f"{where}: {value!r} is not a duration; write seconds or a number and s, m, h, d or w, e.g. \"60s\"")
    result = float(match.group(1)) * _UNITS[match.group(2)]
    if result <= 0 and not zero:
        raise SpecError(f"{where}: {value!r} must be more than zero")
    return result


def format_seconds(value: float) -> str:
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if value >= size and value % size == 0:
            return f"{int(value // size)}{unit}"
    return f"{value:g}s"


def test_blocks(value: Any, where: str) -> list[TestBlock]:
    """The ``test "NAME" { ... }`` blocks of one variant block, checked."""
    out: list[TestBlock] = []
    for entry in value if isinstance(value, list) else [value]:
        if not isinstance(entry, dict) or len(entry) != 1 or not isinstance(next(iter(entry.values())), dict):
            raise SpecError(f'{where}: write test "NAME" {{ command = "...", timeout = "60s" }}')
        (name, body), = entry.items()
        at = f'{where}: test "{name}"'
        if not _NAME.fullmatch(str(name)):
            raise SpecError(f"{at}: test names are lowercase letters, digits, '-' and '_', at most 63 characters")
        check_fields(body, TEST_KEYS, at, f"a test has {', '.join(TEST_KEYS)}")
        enabled = body.get("enabled", True)
        if not isinstance(enabled, bool):
            raise SpecError(f"{at}: enabled must be true or false")
        command = body.get("command", "")
        if not isinstance(command, str):
            raise SpecError(f"{at}: command must be a string (a shell command run as root on the image)")
        if "\0" in command:
            raise SpecError(f"{at}: command holds a NUL character")
        reason = body.get("reason", "")
        if not isinstance(reason, str) or "\n" in reason:
            raise SpecError(f"{at}: reason must be one line of text")
        timeout = seconds(body.get("timeout", DEFAULT_TIMEOUT), f"{at}: timeout")
        if timeout > MAX_TIMEOUT:
            raise SpecError(f"{at}: timeout {body['timeout']!r}: at most {format_seconds(MAX_TIMEOUT)}")
        if any(t.name == name for t in out):
            raise SpecError(f'{at}: defined twice in one block; merge them')
        out.append(TestBlock(str(name), command, timeout, enabled, reason, at))
    return out


def boot_test_settings(value: Any, where: str) -> BootTestSettings:
    body = one_block(value, where, "test { subnet_id = ..., security_group_id = ..., instance_profile = ... }")
    check_fields(body, BOOT_TEST_KEYS, where)
    for key in ("subnet_id", "security_group_id", "instance_type", "instance_profile", "role", "cluster"):
        if not isinstance(body.get(key, ""), str):  # `cluster = true` would name a cluster "True"
            raise SpecError(f"{where}.{key}: expected a name in quotes, got {body[key]!r}")
    values = {k: checks.pattern(str(body.get(k, "")), f"{where}.{k}", k) for k in ("subnet_id", "security_group_id", "instance_type")}
    profile = str(body.get("instance_profile", ""))
    if profile:
        iam_names.instance_profile(profile, f"{where}.instance_profile")
    timeout = seconds(body.get("timeout", 900), f"{where}.timeout")
    role = str(body.get("role", ""))
    if role:  # the name of the IAM role in the instance profile, not its ARN
        iam_names.role(role, f"{where}.role")
    if role and not profile:
        raise SpecError(f"{where}.role goes with instance_profile: it names the role that profile holds")
    cluster = check_cluster(str(body.get("cluster", "")), f"{where}.cluster")
    bucket = body.get("output_bucket", "")
    if not isinstance(bucket, str) or (bucket and (not attestation.BUCKET.fullmatch(bucket) or ".." in bucket)):
        raise SpecError(f"{where}.output_bucket {bucket!r}: the name of an S3 bucket (3-63 lowercase letters, digits, "
                        "'.' and '-'), not an s3:// URL; SSM writes each check's whole output there")
    return BootTestSettings(instance_profile=profile, timeout=timeout, role=role, cluster=cluster,
                            output_bucket=bucket, **values)


def check_cluster(name: str, label: str) -> str:
    """``name`` when it is an EKS cluster name ("" too: none), else SpecError naming ``label``."""
    if name and not _CLUSTER_NAME.fullmatch(name):
        raise SpecError(f"{label} {name!r}: an EKS cluster name is 1-100 letters, digits, '-' and '_', starting with a "
                        "letter or digit")
    return name


def gates(value: Any, where: str) -> Mapping[str, Gate]:
    """The top-level ``channel "NAME" { ... }`` blocks, read-only."""
    out: dict[str, Gate] = {}
    for entry in value if isinstance(value, list) else [value]:
        if not isinstance(entry, dict) or len(entry) != 1 or not isinstance(next(iter(entry.values())), dict):
            raise SpecError(f'{where}: write channel "NAME" {{ from = "recommended", requires = ["tested"], soak = "72h" }}')
        (name, body), = entry.items()
        at = f'{where}: channel "{name}"'
        naming.check_channel(name, at)
        if name in out:
            raise SpecError(f"{at}: defined twice")
        check_fields(body, GATE_KEYS, at, f"a channel gate has {', '.join(GATE_KEYS)}")
        source = body.get("from", "")
        if not isinstance(source, str):
            raise SpecError(f"{at}: from must be a channel name in quotes")
        if source:
            naming.check_channel(source, f"{at}: from")
            if source == name:
                raise SpecError(f"{at}: from names the channel itself; name the channel images come from")
        requires = body.get("requires", [])
        if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
            raise SpecError(f"{at}: requires must be a list, e.g. requires = [\"tested\"]")
        for item in requires:
            if item not in REQUIREMENTS:
                raise SpecError(f"{at}: requires {item!r} is not known; use one of {', '.join(REQUIREMENTS)}"
                                f"{suggest(item, REQUIREMENTS)}")
        soak = seconds(body["soak"], f"{at}: soak", zero=True) if "soak" in body else 0.0
        if soak and not source:
            raise SpecError(f"{at}: soak counts the time an image spent in the `from` channel; set from too")
        policy = scan_policy(body["scan"], f"{at}.scan") if "scan" in body else ScanPolicy()
        if "scan" in body and "scanned" not in requires:
            raise SpecError(f'{at}: a scan block sets what `requires = ["scanned"]` refuses; add "scanned" to requires')
        out[name] = Gate(name, source, tuple(dict.fromkeys(requires)), soak, at, policy)
    return MappingProxyType(out)


def merge_blocks(layers: Iterable[Iterable[TestBlock]]) -> tuple[TestBlock, ...]:
    """The test blocks of a variant's lineage, oldest first: a later block of a name replaces it."""
    return tuple({block.name: block for layer in layers for block in layer}.values())


# ------------------------------------------------------------------------------- built-in checks


_ENVIRONMENT_SECRETS = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID")


def builtin_checks(variant: Any) -> list[Check]:
    """What every image of this variant must have, per OS and flavor, and for what it adds.

    ``variant`` is an `amibuild.pipeline.Variant` (typed loosely to keep this module free of it)."""
    minor = variant.kubernetes_version.split(".")[1] if "." in variant.kubernetes_version else ""
    out = [
        Check("kubelet", f"v=$(kubelet --version) || exit $?; case $v in *' v1.{minor}.'*) ;; "
                         f"*) echo \"kubelet is $v, not 1.{minor}\"; exit 1 ;; esac",
              what=f"the kubelet is installed and is Kubernetes 1.{minor}"),
        Check("containerd", "containerd --version", what="containerd is installed"),
    ]
    if variant.os == "al2023":
        out.append(Check("nodeadm", "nodeadm --help >/dev/null", what="nodeadm is installed (AL2023 node bootstrap)"))
    else:
        out.append(Check("bootstrap", "test -e /etc/eks/bootstrap.sh || exit 127; test -x /etc/eks/bootstrap.sh",
                         what="/etc/eks/bootstrap.sh is present and executable (AL2 node bootstrap)"))
    out += [Check(f"package-{_slug(package)}", f"rpm -q {shlex.quote(package)}", what=f"extra package {package} is installed")
            for package in variant.extra_packages]
    for repo in variant.repos:
        path = f"/etc/yum.repos.d/amibuild-{repo.name}.repo"
        out.append(Check(f"repo-{_slug(repo.name)}", f"test -s {shlex.quote(path)}",
                         what=f"repository file {path} is present"))
    if variant.proxy:
        out.append(Check("proxy", "grep -qE '^(HTTPS?_PROXY|https?_proxy)=' /etc/environment",
                         what="the proxy settings are in /etc/environment"))
    userinfo = any("@" in (url.split("://", 1)[-1].split("/", 1)[0]) for url in (variant.proxy.http, variant.proxy.https))
    pattern = f"^({'|'.join(_ENVIRONMENT_SECRETS)})=" + ("" if userinfo else "|://[^/@ ]+:[^/@ ]+@")
    out.append(Check("no-credentials", f"test ! -e /etc/environment || ! grep -qE {shlex.quote(pattern)} /etc/environment",
                     what="no AWS key or URL password in /etc/environment"
                          + (" (the proxy URL's own credentials are baked on purpose)" if userinfo else "")))
    if variant.flavor in ("nvidia", "gpu"):
        out.append(Check("nvidia-driver", "nvidia-smi --help >/dev/null", what="the NVIDIA driver's nvidia-smi is present"))
    elif variant.flavor == "neuron":
        out.append(Check("neuron-driver", "command -v neuron-ls >/dev/null || exit 127",
                         what="the Neuron tools (neuron-ls) are present"))
    out += [Check(name, command, what=what) for name, command, what in hygiene.upstream_level(variant.os, variant.flavor)]
    return out


def hygiene_checks(variant: Any) -> list[Check]:
    """The checks of amibuild's clean-up: on the build instance after it (its last step), and the two
    only a booted instance shows (a fresh machine-id, no key from Packer) in the boot test. Named
    once for both stages: ``test "clean-machine-id" { enabled = false, reason = "..." }`` turns off both."""
    return ([Check(name, command, what=what, after_cleanup=True) for name, command, what in hygiene.after_cleanup()]
            + [Check(name, command, what=what, boot_only=True) for name, command, what in hygiene.at_boot()])


# The bootstrap.sh options amibuild's AL2 user data passes (amibuild.handoff.userdata.render.bootstrap_argv).
BOOTSTRAP_OPTIONS = ("--apiserver-endpoint", "--b64-cluster-ca", "--dns-cluster-ip", "--kubelet-extra-args",
                     "--use-max-pods")


def boot_checks(variant: Any) -> list[Check]:
    """Checks of the test instance's user data, run only in the boot test (the build instance has none):
    AL2023's ``nodeadm config check`` reads it from instance metadata as the node did at boot; AL2's
    bootstrap.sh is asked (its --help) for every option amibuild's user data gives it. A built-in
    check: ``test "NAME" { enabled = false, reason = "..." }`` turns it off like the others."""
    if variant.os == "al2023":
        return [Check("nodeadm-config", "command -v nodeadm >/dev/null || exit 127\nnodeadm config check",
                      boot_only=True, what="nodeadm accepts the instance's user data (nodeadm config check; boot test only)")]
    return [Check("bootstrap-options",
                  "test -x /etc/eks/bootstrap.sh || exit 127\n"
                  "usage=$(/etc/eks/bootstrap.sh --help 2>&1)\n"
                  "missing=''\n"
                  f"for option in {' '.join(BOOTSTRAP_OPTIONS)}; do\n"
                  "    case $usage in *\"$option \"*) ;; *) missing=\"$missing $option\" ;; esac\n"
                  "done\n"
                  "if [ -n \"$missing\" ]; then echo \"bootstrap.sh does not take:$missing\"; exit 1; fi",
                  boot_only=True, what="bootstrap.sh takes every option amibuild's user data passes (its --help; boot test only)")]


STAGES = ("build", "boot", HYGIENE, "all")


def check_set(variant: Any, *, stage: str = "build") -> CheckSet:
    """The built-in checks, minus the ones turned off, plus the variant's own, in that order; for
    ``stage="boot"`` (the boot test) with the checks of its user data (`boot_checks`) and of the
    clean-up only a booted instance shows after the built-ins; for ``stage="hygiene"`` the checks of the
    clean-up alone (the build's last step); ``stage="all"`` lists every stage's (`amibuild tests`)."""
    if stage not in STAGES:
        raise ValueError(f"stage {stage!r}: one of {', '.join(STAGES)}")
    blocks = {b.name: b for b in variant.tests}
    builtins = builtin_checks(variant) + boot_checks(variant) + hygiene_checks(variant)
    builtin_names = {c.name for c in builtins}
    checks: list[Check] = []
    disabled: list[Disabled] = []
    for check in builtins:
        block = blocks.get(check.name)
        if block is None:
            checks.append(check)
        elif not block.enabled:
            if not block.reason:
                raise SpecError(f"{block.where}: turning off a built-in check needs a reason (reason = \"...\"), "
                                "kept in the run record")
            if all(d.name != check.name for d in disabled):  # one name for two stages: said once
                disabled.append(Disabled(check.name, block.reason, block.where))
        elif block.command:
            raise SpecError(f"{block.where}: {check.name} is a built-in check; give your own check another name")
        else:
            checks.append(check)  # `enabled = true` on a built-in: no change
    for block in variant.tests:
        if block.name in builtin_names:
            continue
        if not block.enabled:
            note = "" if block.command.strip() else (f"variant {variant.name} has no check of that name, so this turns "
                                                     f"nothing off{suggest(block.name, builtin_names)}")
            disabled.append(Disabled(block.name, block.reason or "turned off in the pipeline file", block.where, note))
            continue
        if not block.command.strip():
            known = ", ".join(sorted(builtin_names))
            raise SpecError(f"{block.where}: command is missing (a shell command run as root; exit 0 is a pass); "
                            f"the built-in checks are {known}")
        checks.append(Check(block.name, block.command, block.timeout, builtin=False, what=f"your check: {block.command}"))
    if stage != "all":
        checks = [c for c in checks if stage in c.stages]
        if len(checks) > MAX_CHECKS:
            raise SpecError(f"variant {variant.name}: {len(checks)} checks; at most {MAX_CHECKS}")
    return CheckSet(tuple(checks), tuple(disabled))


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-")[:50] or "x"


# ------------------------------------------------------------------------------- the scripts and the verdicts

_PATH = "export LC_ALL=C PATH=\"${PATH:-/usr/bin:/bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\""


def _heredoc(path: str, command: str, tag: str) -> list[str]:
    delimiter = tag
    while delimiter in command:
        delimiter += "_"
    return [f"cat >{path} <<'{delimiter}'", command, delimiter]


def checks_script(checks: Iterable[Check]) -> str:
    """Stage 1: one bash script that runs every check as root, each in its own bash with its
    timeout. Its own exit status is the verdict: 1 when any check exited non-zero, else 0 (the
    build fails on 1). What it prints around each check is for the build log only: nothing reads
    it back, so nothing a check prints can change the outcome."""
    lines = [
        "#!/usr/bin/env bash",
        "# Generated by amibuild: the image's checks, stage 1 on the build instance (exit 0 is a pass).",
        "set -u +e  # a failing check must not end the script (the build runs it under bash -e)",
        _PATH,
        "failed=0",
        'work=$(mktemp -d /tmp/amibuild-checks.XXXXXX) || exit 1',
        "trap 'rm -rf \"$work\"' EXIT",
        "run_check() {  # name timeout file",
        "    local status",
        "    printf '==> amibuild check %s\\n' \"$1\"",
        "    if command -v timeout >/dev/null 2>&1; then",
        "        timeout --kill-after=5 \"$2\" bash \"$3\" </dev/null 2>&1; status=$?",
        "    else",
        "        bash \"$3\" </dev/null 2>&1; status=$?",
        "    fi",
        "    printf '\\n==> amibuild check %s: exit %s\\n' \"$1\" \"$status\"",
        "    if [ \"$status\" -ne 0 ]; then failed=1; fi",
        "}",
    ]
    for index, check in enumerate(checks, start=1):  # whole seconds, rounded up: `timeout 0` would never time out
        lines += _heredoc(f"\"$work/{index}\"", check.command, f"AMIBUILD_CHECK_{index}_END")
        lines.append(f"run_check {shlex.quote(check.name)} {math.ceil(check.timeout)} \"$work/{index}\"")
    lines += ['exit "$failed"', ""]
    return "\n".join(lines)


def check_command(check: Check) -> str:
    """Stage 2: the one command an SSM invocation (AWS-RunShellScript) runs for ``check``: the check
    in its own bash, with its timeout, stdin closed. The command's exit status is the check's (194, the
    agent's reboot request, becomes 1), and that (SSM's ResponseCode) is the verdict; its output is
    data. POSIX sh, as the agent runs it."""
    return "\n".join([
        f"# amibuild check {check.name}: exit 0 is a pass",
        _PATH,
        'work=$(mktemp -d /tmp/amibuild-check.XXXXXX) || exit 1',
        "trap 'rm -rf \"$work\"' EXIT",
        *_heredoc('"$work/check"', check.command, "AMIBUILD_CHECK_END"),
        "if command -v timeout >/dev/null 2>&1; then",
        f"    timeout --kill-after=5 {math.ceil(check.timeout)} bash \"$work/check\" </dev/null",
        "else",
        "    bash \"$work/check\" </dev/null",
        "fi",
        'status=$?',
        # SSM's agent takes 194 as "reboot the instance and run the command again": a failure here
        'if [ "$status" -eq 194 ]; then echo "amibuild: the check exited 194 (the SSM agent\'s reboot code): exit 1" >&2; status=1; fi',
        'exit "$status"',
        "",
    ])


TAIL_CHARACTERS = 4000  # what a report and the record keep of a check's output


class Verdict(enum.StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    UNTESTABLE = "not testable here"  # what the place the checks ran on could not answer (said by it, never by a check)
    NOT_RUN = "not run"
    NOT_TESTED = "not tested"  # the check never gave a result: an infrastructure failure, with its reason


@dataclass(frozen=True)
class CheckResult:
    name: str
    stage: str  # "build" (stage 1) | "boot" (stage 2)
    verdict: Verdict
    exit_status: int | None
    seconds: float
    output: str = ""  # what was read of the output: data, never the verdict
    reason: str = ""  # why it is not tested (an infrastructure failure), or how it failed besides its exit
    output_size: int | None = None  # bytes of stdout and stderr, when known (from S3)
    head_only: bool = False  # `output` is the head SSM kept (24,000 characters of stdout, 8,000 of stderr), not the whole

    @property
    def tail(self) -> str:
        """The output's last 10 lines (at most TAIL_CHARACTERS of them), control characters shown."""
        lines = self.output.rstrip("\n").split("\n")  # not splitlines: a CR or a \x1c is no line break here
        return printable("\n".join(lines[-10:])[-TAIL_CHARACTERS:])

    @property
    def shown(self) -> str:
        """The verdict as a report says it: "not tested: <reason>" for an infrastructure failure."""
        return f"{self.verdict}: {printable(self.reason)}" if self.reason and self.verdict == Verdict.NOT_TESTED \
            else str(self.verdict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "stage": self.stage, "result": str(self.verdict), "exit_status": self.exit_status,
                "seconds": round(self.seconds, 2),
                "output_tail": self.tail if self.verdict != Verdict.PASSED else "",
                "reason": printable(self.reason) or None, "output_size": self.output_size,
                "output_head_only": self.head_only}


def verdict(exit_status: int) -> Verdict:
    """What a check's exit status means: 0 passes, anything else fails (127, "not there", included)."""
    return Verdict.PASSED if exit_status == 0 else Verdict.FAILED


def overall(results: Iterable[CheckResult]) -> Verdict:
    """failed when a check failed or did not run; else "not tested" when any check gave no result (an
    infrastructure failure), "not testable here" when one could not be answered where it ran (or none
    ran at all); passed only when every check passed: nothing proven is never a pass."""
    results = list(results)
    if any(r.verdict in (Verdict.FAILED, Verdict.NOT_RUN) for r in results):
        return Verdict.FAILED
    if any(r.verdict == Verdict.NOT_TESTED for r in results):
        return Verdict.NOT_TESTED
    if not results or any(r.verdict == Verdict.UNTESTABLE for r in results):
        return Verdict.UNTESTABLE
    return Verdict.PASSED


# The image's `amibuild:test` tag for each overall verdict: `untested` does not meet ``requires = ["tested"]``.
# "not tested" never replaces an earlier verdict on the image (`amibuild.imagetest.boot`): it tags only an untagged one.
TAG_VALUES: Mapping[Verdict, str] = {Verdict.PASSED: "passed", Verdict.UNTESTABLE: "untested",
                                     Verdict.FAILED: "failed", Verdict.NOT_RUN: "failed", Verdict.NOT_TESTED: "untested"}


def untestable(results: Iterable[CheckResult]) -> list[CheckResult]:
    """The checks that gave no result, "not tested" or "not testable here" (the report names them and why)."""
    return [r for r in results if r.verdict in (Verdict.UNTESTABLE, Verdict.NOT_TESTED)]
