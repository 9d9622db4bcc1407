"""The sandbox cluster's Kubernetes API: just the Nodes, for `test-ami --cluster` (runs in the emulator's process).

No kubelet runs in the emulator, so the sandbox plays the node registration: every running EC2
instance whose user data joins the sandbox cluster (`SANDBOX_CLUSTER`, as amibuild's user data
names it: the NodeConfig's ``spec.cluster.name`` on AL2023, bootstrap.sh's first word on AL2) is a
Node named by its private DNS name, with ``spec.providerID`` ``aws:///AZ/INSTANCE_ID``, the taints of
its kubelet's ``--register-with-taints`` and a Ready condition. A terminated instance's Node stays
(NotReady, as a real one does until someone deletes it) until it is deleted.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any, Callable, Iterable

from amibuild.sandbox.eks_cluster import SANDBOX_CLUSTER, SANDBOX_CLUSTER_VERSION
from amibuild.sandbox.seed import ACCOUNT_ID, API_PREFIX, SEED_REGIONS

PREFIX = f"{API_PREFIX}/k8s"
CONTROL = f"{API_PREFIX}/k8s-nodes"
NOT_READY = ("KubeletNotReady", "container runtime network not ready: NetworkReady=false "
             "reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized")
_TAINTS = re.compile(r"--register-with-taints=([^\s'\"\\]+)")
_BOOTSTRAP = re.compile(r"/etc/eks/bootstrap\.sh\s+'?([A-Za-z0-9][A-Za-z0-9_-]*)")


def kubeconfig(endpoint: str) -> str:
    """A kubeconfig whose one context is the sandbox cluster's API (JSON, which is YAML)."""
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": SANDBOX_CLUSTER,
        "clusters": [{"name": SANDBOX_CLUSTER, "cluster": {"server": f"{endpoint}{PREFIX}"}}],
        "users": [{"name": SANDBOX_CLUSTER, "user": {"token": "sandbox"}}],
        "contexts": [{"name": SANDBOX_CLUSTER, "context": {"cluster": SANDBOX_CLUSTER, "user": SANDBOX_CLUSTER}}],
    }, indent=2) + "\n"


def joins(user_data: str) -> tuple[str, tuple[str, ...]]:
    """(the cluster the user data joins, the kubelet's taints) of amibuild's user data; ("", ()) otherwise."""
    import yaml

    from amibuild.handoff.userdata import decode  # deferred: a node is only looked at when asked for

    try:
        parts = decode.decode(user_data.encode(), "instance user data")
    except Exception:  # user data amibuild did not write: no node
        return "", ()
    cluster, taints = "", []
    for part in parts:
        text = part.body
        if part.content_type == "application/node.eks.aws":
            for doc in yaml.safe_load_all(text):
                spec = (doc or {}).get("spec") or {}
                cluster = str((spec.get("cluster") or {}).get("name") or cluster)
        elif (found := _BOOTSTRAP.search(text)) is not None:
            cluster = found.group(1)
        for match in _TAINTS.findall(text):
            taints += match.split(",")
    return cluster, tuple(taints)


def _taint(text: str) -> dict[str, str]:
    head, _, effect = text.rpartition(":")
    key, _, value = head.partition("=")
    return {"key": key, "value": value, "effect": effect} if value else {"key": key, "effect": effect}


class KubeApi:
    """WSGI routes of the sandbox cluster's API over the emulator's EC2 instances."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.deleted: set[str] = set()
        self.removed: list[dict[str, Any]] = []  # the deleted Nodes as they were, in order
        self.unschedulable: set[str] = set()  # cordoned
        self.ready = True
        self.reason = ""
        self.seen: dict[str, dict[str, Any]] = {}  # nodes of instances no longer running, kept until deleted

    def control(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            if "ready" in body:  # {} only asks
                self.ready = bool(body["ready"])
                self.reason = str(body.get("reason") or "")
            return {"ready": self.ready, "deleted": json.loads(json.dumps(self.removed))}

    def nodes(self) -> list[dict[str, Any]]:
        from moto.ec2.models import ec2_backends

        with self.lock:
            live: dict[str, dict[str, Any]] = {}
            for region in SEED_REGIONS:
                for instance in _instances(ec2_backends[ACCOUNT_ID][region]):
                    node = self._node(instance)
                    if node is not None and node["metadata"]["name"] not in self.deleted:
                        live[node["metadata"]["name"]] = node
            for name, node in list(self.seen.items()):
                if name not in live and name not in self.deleted:  # its instance is gone: NotReady, kept
                    live[name] = _not_ready(node, "NodeStatusUnknown", "Kubelet stopped posting node status.")
            for name in self.unschedulable & set(live):
                live[name]["spec"]["unschedulable"] = True
            self.seen = dict(live)
            return [live[name] for name in sorted(live)]

    def _node(self, instance: Any) -> dict[str, Any] | None:
        if instance.state != "running":
            return None
        raw = instance.user_data
        raw = raw[0] if isinstance(raw, (list, tuple)) and raw else raw
        if not raw:
            return None
        cluster, taints = joins(raw.decode() if isinstance(raw, bytes) else str(raw))  # base64: decode peels it
        if cluster != SANDBOX_CLUSTER:
            return None
        name = instance.private_dns_name
        zone = instance.availability_zone
        ready = {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "message": "kubelet is posting ready status"}
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                      "node.kubernetes.io/instance-type": instance.instance_type,
                                                      "topology.kubernetes.io/zone": zone}},
                "spec": {"providerID": f"aws:///{zone}/{instance.id}",
                         "taints": [_taint(t) for t in taints]},
                "status": {"conditions": [ready],
                           "nodeInfo": {"kubeletVersion": f"v{SANDBOX_CLUSTER_VERSION}.0-eks-sandbox"}}}
        if not self.ready:
            node = _not_ready(node, NOT_READY[0], self.reason or NOT_READY[1])
        return node

    def __call__(self, method: str, path: str, answer: Callable[[str, dict[str, Any]], Iterable[bytes]],
                 body: Callable[[], Any] = dict) -> Iterable[bytes]:
        rest = path[len(PREFIX):].rstrip("/")
        if rest == "/api/v1/nodes" and method == "GET":
            return answer("200 OK", {"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": self.nodes()})
        if rest.startswith("/api/v1/nodes/") and method in ("GET", "DELETE", "PATCH"):
            name = rest.rsplit("/", 1)[1]
            node = next((n for n in self.nodes() if n["metadata"]["name"] == name), None)
            if node is None:
                return answer("404 Not Found", _status(404, "NotFound", f'nodes "{name}" not found'))
            if method == "PATCH":
                wanted = ((body() or {}).get("spec") or {}).get("unschedulable")
                if not isinstance(wanted, bool):
                    return answer("422 Unprocessable Entity", _status(
                        422, "Invalid", "the sandbox cluster patches only spec.unschedulable (true or false)"))
                with self.lock:
                    (self.unschedulable.add if wanted else self.unschedulable.discard)(name)
                node["spec"]["unschedulable"] = wanted
            if method == "DELETE":
                with self.lock:
                    self.deleted.add(name)
                    self.seen.pop(name, None)
                    self.unschedulable.discard(name)
                    self.removed.append(node)
            return answer("200 OK", node)
        return answer("404 Not Found", _status(404, "NotFound", f"the sandbox cluster does not serve {method} {rest}"))


def _instances(backend: Any) -> list[Any]:
    return [i for reservation in backend.reservations.values() for i in reservation.instances]


def _not_ready(node: dict[str, Any], reason: str, message: str) -> dict[str, Any]:
    out = json.loads(json.dumps(node))
    out["status"]["conditions"] = [{"type": "Ready", "status": "False" if reason == NOT_READY[0] else "Unknown",
                                    "reason": reason, "message": message}]
    return out


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": code, "reason": reason,
            "message": message}
