"""The cluster-side pieces a proxied node group needs, printed for the user to apply: the proxy ConfigMap
and DaemonSet patches for aws-node and kube-proxy (`k8s_manifests`), and the aws-auth mapRoles entry."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence

from amibuild.errors import SpecError
from amibuild.handoff.userdata.config import (CONFIGMAP, NODE_GROUPS, PROXIED_DAEMONSETS, NodeConfig, ROLE_ARN,
                                             no_proxy_entries, vpc_cidrs)
from amibuild.handoff.userdata.kubelet import yaml_text


def k8s_manifests(cfg: NodeConfig, vpc_cidr: str | Sequence[str]) -> str:
    """The proxy ConfigMap for kube-system and the patches that make aws-node and kube-proxy use it.

    `vpc_cidr` is the cluster VPC's CIDR (or several, as a list or comma-separated): pods cannot
    ask instance metadata the way the node's boothook does.
    """
    if not cfg.proxy:
        raise SpecError("--k8s-manifests needs --proxy: the manifests carry the proxy settings")
    cidrs = vpc_cidrs(vpc_cidr)
    if not cidrs:
        raise SpecError("--vpc-cidr is required with --k8s-manifests (aws ec2 describe-vpcs --vpc-ids VPC)")
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIGMAP, "namespace": "kube-system"},
        "data": {
            "HTTP_PROXY": cfg.proxy,
            "HTTPS_PROXY": cfg.proxy,
            "NO_PROXY": ",".join(no_proxy_entries(cfg, cidrs)),
        },
    }
    out = [
        f"# Proxy settings for kube-system, matching the nodes of cluster {cfg.cluster_name}.",
        "# Save this first document to a file and `kubectl apply -f` it; each DaemonSet document after",
        "# it is a strategic-merge patch: run the kubectl command above it (or list it under a",
        "# kustomization's `patches:`). Patching the pod template rolls the daemonset's pods.",
        "# With aws-node or kube-proxy managed as EKS add-ons, an add-on update can undo the patch.",
        "# Pods read a ConfigMap's values only when they start: after changing this ConfigMap later,",
        "# restart both daemonsets so every pod picks it up:",
        "#   kubectl -n kube-system rollout restart daemonset "
        + " ".join(name for name, _ in PROXIED_DAEMONSETS),
        "#   kubectl -n kube-system rollout status daemonset " + PROXIED_DAEMONSETS[0][0],
        "---",
        yaml_text(configmap).rstrip("\n"),
    ]
    for daemonset, container in PROXIED_DAEMONSETS:
        patch = {"spec": {"template": {"spec": {"containers": [
            {"name": container, "envFrom": [{"configMapRef": {"name": CONFIGMAP}}]}
        ]}}}}
        inline = json.dumps(patch, separators=(",", ":"))
        document = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": daemonset, "namespace": "kube-system"},
            **patch,
        }
        out += [
            "---",
            f"# kubectl -n kube-system patch daemonset {daemonset} --type strategic --patch {shlex.quote(inline)}",
            yaml_text(document).rstrip("\n"),
        ]
    return "\n".join(out) + "\n"


def _role_match(role_arn: str) -> re.Match[str]:
    match = ROLE_ARN.match(role_arn)
    if not match:
        hint = "arn:aws:iam::ACCOUNT:role/NAME"
        if ":instance-profile/" in role_arn:
            hint += " (the role, not its instance profile)"
        elif ":assumed-role/" in role_arn:
            hint += " (the IAM role, not a session of it)"
        raise SpecError(f"--role-arn {role_arn!r}: give an IAM role ARN, {hint}")
    return match


def check_role_arn(role_arn: str) -> str:
    """`role_arn` unchanged if it is an IAM role ARN (an access entry keeps its path), else SpecError."""
    _role_match(role_arn)
    return role_arn


def aws_auth_entry(role_arn: str) -> str:
    """The aws-auth `mapRoles` entry that lets nodes with `role_arn` join, as YAML to merge."""
    match = _role_match(role_arn)
    # aws-auth compares the ARN of the role the node assumed, which carries no path.
    bare = f"arn:{match['partition']}:iam::{match['account']}:role/{match['name']}"
    head = [
        "# mapRoles entry for the nodes' role: merge it into the mapRoles list of the aws-auth",
        "# ConfigMap in kube-system (kubectl -n kube-system edit configmap aws-auth).",
    ]
    if match["path"]:
        head.append(f"# The role's path /{match['path']} is left out: aws-auth matches roles without it.")
    entry = [{"rolearn": bare, "username": "system:node:{{EC2PrivateDNSName}}", "groups": list(NODE_GROUPS)}]
    return "\n".join(head) + "\n" + yaml_text(entry)
