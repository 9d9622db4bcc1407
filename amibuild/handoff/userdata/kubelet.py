"""Kubelet settings a node gets, and the nodeadm NodeConfig that carries them on AL2023. Pure.

`KubeletSettings` holds what `--kubelet-flag`, `--node-label KEY=VALUE`, `--taint
KEY=VALUE:EFFECT`, `--max-pods N` and `--max-pods-expression EXPR` ask for, each value checked when
it is made. It gives:

    nodeadm_kubelet()  AL2023: NodeConfig `spec.kubelet` (`flags`, `config.maxPods`, `maxPodsExpression`)
    kubelet_args()     AL2: the words of bootstrap.sh's --kubelet-extra-args
    to_parameters()    the node group stack parameters that remember them (`from_parameters` back)

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from amibuild.errors import SpecError
from amibuild.handoff.userdata.maxpods import check_expression

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
MAX_PODS_LIMIT = 1000  # well above what any instance type's IP addresses allow
# Flags the dedicated options write; given with --kubelet-flag too they would be given twice.
_OWNED = {"--node-labels": "--node-label", "--register-with-taints": "--taint", "--max-pods": "--max-pods"}
# Characters a kubelet flag may not hold: systemd splits at whitespace, expands $ and %, and the AL2
# drop-in is single-quoted.
_UNSAFE = re.compile(r"[\s'\"`\\$%]", re.ASCII)
_FLAG = re.compile(r"--[a-z0-9][a-z0-9-]*(=[!-~]*)?")
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_PREFIX = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
# The kubelet refuses to start with a kubernetes.io / k8s.io label outside these (NodeRestriction;
# k8s.io/kubelet's well_known_labels.go, the deprecated beta ones included).
_ALLOWED_K8S_LABELS = frozenset({
    "kubernetes.io/hostname", "kubernetes.io/arch", "kubernetes.io/os",
    "topology.kubernetes.io/region", "topology.kubernetes.io/zone", "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
})
_ALLOWED_K8S_PREFIXES = ("kubelet.kubernetes.io", "node.kubernetes.io")


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}"


@dataclass(frozen=True)
class KubeletSettings:
    """Kubelet flags, node labels, taints and max pods; `parse` checks each as the user wrote it."""

    flags: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[Taint, ...] = ()
    max_pods: int | None = None
    max_pods_expression: str = ""  # AL2023 only: nodeadm's CEL expression for maxPods (`maxpods`)

    def __bool__(self) -> bool:
        return bool(self.flags or self.labels or self.taints or self.max_pods or self.max_pods_expression)

    @classmethod
    def parse(cls, *, flags: Iterable[str] = (), labels: Iterable[str] = (), taints: Iterable[str] = (),
              max_pods: str | int | None = None, max_pods_expression: str | None = None) -> KubeletSettings:
        checked = tuple(_check_flag(flag) for flag in flags)
        names = [flag.partition("=")[0] for flag in checked]
        twice = next((name for name in names if names.count(name) > 1), None)
        if twice:
            raise SpecError(f"--kubelet-flag {twice} is given twice: give each kubelet flag once")
        pairs = tuple(_check_label(label) for label in labels)
        keys = [key for key, _ in pairs]
        dup = next((key for key in keys if keys.count(key) > 1), None)
        if dup:
            raise SpecError(f"--node-label {dup} is given twice")
        parsed_taints = tuple(_check_taint(taint) for taint in taints)
        pairs_of = [(t.key, t.effect) for t in parsed_taints]
        same = next((pair for pair in pairs_of if pairs_of.count(pair) > 1), None)
        if same:  # the API server refuses to register a node with two such taints
            raise SpecError(f"--taint {same[0]} with {same[1]} is given twice: one taint per key and effect")
        pods = _check_max_pods(max_pods)
        expression = check_expression(max_pods_expression) if max_pods_expression else ""
        if expression and pods is not None:
            raise SpecError("--max-pods and --max-pods-expression both set max pods, and nodeadm lets the fixed "
                            "value win: give one")
        if expression and "--max-pods" in names:
            raise SpecError("--kubelet-flag --max-pods and --max-pods-expression both set max pods, and the kubelet "
                            "lets the flag win: give one")
        given = {"--node-labels": bool(pairs), "--register-with-taints": bool(parsed_taints),
                 "--max-pods": pods is not None}
        for name in names:
            if name in _OWNED and given[name]:
                raise SpecError(f"--kubelet-flag {name} and {_OWNED[name]} both set it: give it one way")
        return cls(checked, pairs, parsed_taints, pods, expression)

    def with_flags(self, flags: Iterable[str]) -> KubeletSettings:
        """These settings with ``flags`` as their kubelet flags, all checked together as `parse` checks them."""
        return KubeletSettings.parse(flags=flags, labels=[f"{k}={v}" for k, v in self.labels],
                                     taints=[str(t) for t in self.taints], max_pods=self.max_pods,
                                     max_pods_expression=self.max_pods_expression or None)

    def nodeadm_kubelet(self) -> dict[str, Any]:
        """NodeConfig `spec.kubelet`: labels and taints as kubelet flags, max pods in the config."""
        out: dict[str, Any] = {}
        flags = self._flags()
        if self.max_pods is not None:
            out["config"] = {"maxPods": self.max_pods}
        if self.max_pods_expression:
            out["maxPodsExpression"] = self.max_pods_expression
        if flags:
            out["flags"] = flags
        return out

    def kubelet_args(self) -> list[str]:
        """Every kubelet flag, for bootstrap.sh's --kubelet-extra-args (AL2)."""
        return self._flags() + ([f"--max-pods={self.max_pods}"] if self.max_pods is not None else [])

    def _flags(self) -> list[str]:
        """The flags given, then the labels and the taints as kubelet flags."""
        out = list(self.flags)
        if self.labels:
            out.append("--node-labels=" + ",".join(f"{k}={v}" for k, v in self.labels))
        if self.taints:
            out.append("--register-with-taints=" + ",".join(str(t) for t in self.taints))
        return out

    def to_parameters(self) -> dict[str, str]:
        """The stack parameters that remember these settings (see `PARAMETERS`)."""
        return {
            "KubeletFlags": " ".join(self.flags),
            "NodeLabels": ",".join(f"{k}={v}" for k, v in self.labels),
            "NodeTaints": ",".join(str(t) for t in self.taints),
            "MaxPods": "" if self.max_pods is None else str(self.max_pods),
            "MaxPodsExpression": self.max_pods_expression,
        }

    @classmethod
    def from_parameters(cls, values: Mapping[str, str]) -> KubeletSettings:
        """`to_parameters` read back (a stack's parameters), checked again."""
        return cls.parse(
            flags=_words(values.get("KubeletFlags", ""), " "),
            labels=_words(values.get("NodeLabels", ""), ","),
            taints=_words(values.get("NodeTaints", ""), ","),
            max_pods=values.get("MaxPods") or None,
            max_pods_expression=values.get("MaxPodsExpression") or None,
        )


# Stack parameters `to_parameters` writes, each with what it holds.
PARAMETERS: Mapping[str, str] = {
    "KubeletFlags": "kubelet flags amibuild gave the nodes (--kubelet-flag), space-separated",
    "NodeLabels": "node labels amibuild gave the nodes (--node-label), KEY=VALUE comma-separated",
    "NodeTaints": "taints amibuild gave the nodes (--taint), KEY=VALUE:EFFECT comma-separated",
    "MaxPods": "max pods amibuild gave the kubelet (--max-pods); empty: the AMI's default",
    "MaxPodsExpression": "nodeadm's CEL expression for max pods (--max-pods-expression, al2023); empty: none",
}


def _words(text: str, sep: str) -> list[str]:
    return [word for word in text.split(sep) if word]


def _check_flag(flag: str) -> str:
    if _UNSAFE.search(flag) or not flag.isascii() or not flag.isprintable():
        bad = next(ch for ch in flag if _UNSAFE.match(ch) or not (ch.isascii() and ch.isprintable()))
        raise SpecError(
            f"--kubelet-flag {flag!r}: holds {bad!r}, and the kubelet would get it split or changed "
            "(systemd splits its arguments at whitespace): give one flag per --kubelet-flag, without "
            "spaces, quotes, backslashes, $ or %")
    if not _FLAG.fullmatch(flag):
        raise SpecError(f"--kubelet-flag {flag!r}: write one kubelet flag as --name=value")
    return flag


def _check_label(text: str) -> tuple[str, str]:
    key, eq, value = text.partition("=")
    if not eq:
        raise SpecError(f"--node-label {text!r}: write KEY=VALUE, e.g. team=data")
    _check_key_value(key, value, f"--node-label {text!r}", "label")
    prefix, slash, _ = key.rpartition("/")
    if slash and any(prefix == ns or prefix.endswith("." + ns) for ns in ("kubernetes.io", "k8s.io")):
        allowed = key in _ALLOWED_K8S_LABELS or any(
            prefix == p or prefix.endswith("." + p) for p in _ALLOWED_K8S_PREFIXES)
        if not allowed:
            raise SpecError(f"--node-label {text!r}: the kubelet refuses to start with a {prefix} label "
                            "(only kubelet.kubernetes.io/ and node.kubernetes.io/ ones); use your own prefix")
    return key, value


def _check_key_value(key: str, value: str, what: str, kind: str) -> None:
    prefix, slash, name = key.rpartition("/")
    ok = bool(name) and len(name) <= 63 and _NAME.fullmatch(name) is not None
    if slash:
        ok = ok and len(prefix) <= 253 and _PREFIX.fullmatch(prefix) is not None
    if not ok:
        raise SpecError(f"{what}: the key must be NAME or PREFIX/NAME: NAME at most 63 letters, digits, "
                        "'-', '_' or '.', PREFIX a DNS name")
    if len(value) > 63 or not _VALUE.fullmatch(value):
        raise SpecError(f"{what}: a {kind} value is at most 63 letters, digits, '-', '_' or '.', "
                        "starting and ending with a letter or digit (or empty)")


def _check_taint(text: str) -> Taint:
    head, colon, effect = text.rpartition(":")
    if not colon or effect not in TAINT_EFFECTS:
        raise SpecError(f"--taint {text!r}: write KEY=VALUE:EFFECT (or KEY:EFFECT), EFFECT one of "
                        f"{', '.join(TAINT_EFFECTS)}")
    key, _, value = head.partition("=")
    _check_key_value(key, value, f"--taint {text!r}", "taint")
    return Taint(key, value, effect)


def _check_max_pods(value: str | int | None) -> int | None:
    if value is None or value == "":
        return None
    text = str(value)
    if not re.fullmatch(r"[0-9]{1,4}", text) or not 1 <= int(text) <= MAX_PODS_LIMIT:
        raise SpecError(f"--max-pods {text!r}: give a whole number from 1 to {MAX_PODS_LIMIT}")
    return int(text)


# ------------------------------------------------------------------------------- the NodeConfig


def nodeconfig_part(spec: Mapping[str, Any]) -> str:
    """The nodeadm NodeConfig document with `spec` (the body of an `application/node.eks.aws` part)."""
    document = {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}
    return "---\n" + yaml_text(document)


def yaml_text(data: Any) -> str:
    """`data` as block YAML, keys in their order and no line folded: how the user data writes YAML."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=1 << 16)


def proxy_environment(proxy: str, no_proxy: Sequence[str]) -> dict[str, dict[str, str]]:
    """`spec.instance.environment` for a proxy: both spellings of the three variables, every service."""
    joined = ",".join(no_proxy)
    return {"default": {"HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "NO_PROXY": joined,
                        "http_proxy": proxy, "https_proxy": proxy, "no_proxy": joined}}
