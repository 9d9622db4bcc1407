"""The boot test's node in its cluster: the Kubernetes API through the `kubernetes` client (the
``amibuild[cluster]`` extra) and the caller's kubeconfig.

`node_facts` reads a Node object (JSON, as the API gives it) and `node_of` finds the test
instance's Node among them: ``spec.providerID`` ending in ``/INSTANCE_ID`` (``aws:///AZ/i-...``), or
the name equal to the instance's private DNS name (what EKS nodes are called). `judge` says whether
that Node is there, Ready, and carries the test taint. All three are pure. `Nodes` is the thin
gateway: list the nodes, cordon one and delete it (after the instance is terminated, so nothing
keeps a NotReady Node of it around).

The context is the kubeconfig's context named like the cluster (``C``, or ``...:cluster/C`` as
``aws eks update-kubeconfig`` names them), else its current context (`pick_context`).
"""

from __future__ import annotations

import enum
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from amibuild.errors import AmibuildError, MissingExtra, SpecError
from amibuild.printable import printable

EXTRA = "cluster"  # pip install 'amibuild[cluster]'
REQUIREMENT = "kubernetes>=31,<37"
# The test node's taint: it joins the cluster, and no workload is scheduled on it.
TEST_TAINT = "amibuild.io/test=true:NoSchedule"
# What `kubectl cordon` sends: the Node takes no new pod while it is being removed.
CORDON = {"spec": {"unschedulable": True}}


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    @classmethod
    def parse(cls, text: str) -> "Taint":
        """``KEY=VALUE:EFFECT`` (or ``KEY:EFFECT``), as the kubelet's --register-with-taints takes it."""
        head, _, effect = text.rpartition(":")
        key, _, value = head.partition("=")
        return cls(key, value, effect)

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True)
class NodeFacts:
    name: str
    provider_id: str
    ready: str  # the Ready condition's status: "True" | "False" | "Unknown" | "" (none yet)
    reason: str  # its reason and message, e.g. "KubeletNotReady: container runtime network not ready"
    taints: tuple[Taint, ...] = ()


def node_facts(raw: Mapping[str, Any]) -> NodeFacts:
    spec = raw.get("spec") or {}
    ready = next((c for c in (raw.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), {})
    # written by the kubelet of the image under test, and said in the boot test's error line: shown escaped
    reason = printable(": ".join(p for p in (str(ready.get("reason") or ""), str(ready.get("message") or "")) if p))
    return NodeFacts(name=str((raw.get("metadata") or {}).get("name", "")), provider_id=str(spec.get("providerID") or ""),
                     ready=str(ready.get("status") or ""), reason=reason,
                     taints=tuple(Taint(str(t.get("key", "")), str(t.get("value") or ""), str(t.get("effect", "")))
                                  for t in spec.get("taints") or []))


def node_of(nodes: Iterable[NodeFacts], instance_id: str, private_dns: str = "") -> NodeFacts | None:
    """The Node of ``instance_id``: by provider id, else by the instance's private DNS name."""
    nodes = list(nodes)
    by_id = next((n for n in nodes if instance_id and n.provider_id.endswith(f"/{instance_id}")), None)
    return by_id or next((n for n in nodes if private_dns and n.name == private_dns), None)


class NodeState(enum.StrEnum):
    ABSENT = "not registered"
    NOT_READY = "not ready"
    UNTAINTED = "ready without the test taint"
    READY = "ready"


def judge(node: NodeFacts | None, taint: Taint) -> NodeState:
    if node is None:
        return NodeState.ABSENT
    if node.ready != "True":
        return NodeState.NOT_READY
    return NodeState.READY if taint in node.taints else NodeState.UNTAINTED


def pick_context(contexts: Sequence[Mapping[str, Any]], current: str, cluster: str) -> str:
    """The kubeconfig context for ``cluster``: one named like it or pointing at a cluster entry named
    like it (``C`` or ``...:cluster/C`` / ``.../C``), else the current context ("" when there is none)."""
    def named(text: str) -> bool:
        return text == cluster or text.endswith((f":cluster/{cluster}", f"/{cluster}"))

    for context in contexts:
        if named(str(context.get("name", ""))) or named(str((context.get("context") or {}).get("cluster", ""))):
            return str(context["name"])
    return current


def missing_client_hint(prefix: str | None = None) -> str:
    """How to add the Kubernetes client to this amibuild (pipx or pip)."""
    root = Path(prefix if prefix is not None else sys.prefix)
    if (root / "pipx_metadata.json").is_file() or ("pipx" in root.parts and "venvs" in root.parts):
        return f"pipx inject amibuild '{REQUIREMENT}' (or: pipx install --force 'amibuild[{EXTRA}]')"
    return f"pip install 'amibuild[{EXTRA}]'"


def require_client() -> Any:
    """The `kubernetes` package; MissingExtra (exit 2, before any AWS work) naming the install when
    the client is missing."""
    try:
        import kubernetes  # deferred: the optional `cluster` extra, only for --cluster
    except ImportError:
        raise MissingExtra(f"--cluster needs the Kubernetes client (the node is watched through the cluster's API): "
                        f"{missing_client_hint()}") from None
    return kubernetes


class ClusterUnreachable(AmibuildError):
    """The cluster's Kubernetes API could not be read (kubeconfig, credentials, network)."""


class Nodes:
    """The cluster's nodes through the caller's kubeconfig (``$KUBECONFIG`` or ~/.kube/config)."""

    def __init__(self, cluster: str, kubeconfig: str | None = None) -> None:
        kubernetes = require_client()
        client, config = kubernetes.client, kubernetes.config
        self._api_exception = kubernetes.client.ApiException
        # read now: the client takes $KUBECONFIG's default once, when it is first imported
        kubeconfig = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        try:
            contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
        except config.ConfigException as exc:
            raise SpecError(f"--cluster {cluster}: no kubeconfig to reach its API ({exc}); "
                            f"run `aws eks update-kubeconfig --name {cluster}`") from None
        self.context = pick_context(contexts or [], (active or {}).get("name", ""), cluster)
        try:
            api_client = config.new_client_from_config(config_file=kubeconfig, context=self.context or None)
        except config.ConfigException as exc:
            raise SpecError(f"--cluster {cluster}: kubeconfig context {self.context!r}: {exc}") from None
        self._api = client.CoreV1Api(api_client)
        self.server = api_client.configuration.host

    def list(self) -> list[NodeFacts]:
        try:
            answer = self._api.list_node(_preload_content=False, _request_timeout=30)
            return [node_facts(item) for item in json.loads(answer.data).get("items", [])]
        except Exception as exc:  # the client raises ApiException, urllib3's and socket errors
            raise ClusterUnreachable(f"listing the nodes at {self.server}: {_short(exc)}") from exc

    def cordon(self, name: str) -> bool:
        """Mark the Node unschedulable (``kubectl cordon``: a strategic merge patch of
        ``spec.unschedulable``); False when it is already gone."""
        return self._on_node("cordoning", name, lambda: self._api.patch_node(
            name, CORDON, _content_type="application/strategic-merge-patch+json", _preload_content=False,
            _request_timeout=30))

    def delete(self, name: str) -> bool:
        """Delete the Node object; False when it is already gone."""
        return self._on_node("deleting", name, lambda: self._api.delete_node(
            name, _preload_content=False, _request_timeout=30))

    def _on_node(self, doing: str, name: str, call) -> bool:
        """One call on a Node: True once made, False when the Node is already gone (404); any other
        failure is `ClusterUnreachable`, naming what was being done to which node where."""
        try:
            call()
        except Exception as exc:
            if isinstance(exc, self._api_exception) and exc.status == 404:
                return False
            raise ClusterUnreachable(f"{doing} node {name} at {self.server}: {_short(exc)}") from exc
        return True


def _short(exc: BaseException) -> str:
    status = getattr(exc, "status", None)
    if status is not None:
        return f"HTTP {status} {getattr(exc, 'reason', None) or ''}".strip()
    return f"{exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
