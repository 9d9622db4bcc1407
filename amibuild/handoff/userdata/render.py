"""Node user data: write it for nodes that join an EKS cluster (behind a proxy if need be), read
back what EC2 or a template holds, and print the cluster-side pieces a proxied node needs.

Everything here is a pure function of its arguments: no AWS calls, no files, no printing.

Writing (`render_userdata`) gives a MIME multi-part document with a fixed boundary, so the same
`NodeConfig` always gives the same text and a launch template only changes when the config does.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import email.policy
import ipaddress
import re
import shlex
from collections.abc import Sequence
from email.message import EmailMessage
from importlib import resources
from typing import Any

from amibuild.errors import SpecError
from amibuild.handoff.userdata.config import (  # the settings, re-exported: callers import them from here
    BOUNDARY, CfnSignal, DEFAULT_SERVICE_CIDRS, KUBELET_WAIT_SECONDS, LOCAL_NO_PROXY, MAX_USERDATA, NODEADM_UNITS,
    NodeConfig, config_from_flags, no_proxy_entries, service_cidr_for, split_args, check_proxy_url,
)
from amibuild.handoff.userdata.kubelet import nodeconfig_part, proxy_environment
# the cluster-side pieces, importable from here too
from amibuild.handoff.userdata.proxy_manifests import aws_auth_entry, check_role_arn, k8s_manifests
from amibuild.pipeline import proxy_credentials

__all__ = [
    "BOUNDARY",
    "CfnSignal",
    "DEFAULT_SERVICE_CIDRS",
    "LOCAL_NO_PROXY",
    "NodeConfig",
    "aws_auth_entry",
    "bootstrap_argv",
    "check_proxy_url",
    "check_role_arn",
    "config_from_flags",
    "k8s_manifests",
    "multipart",
    "no_proxy_entries",
    "render_userdata",
    "service_cidr_for",
]


def _script(name: str) -> str:
    """A shell script shipped beside this module (package data in scripts/)."""
    return resources.files("amibuild.handoff.userdata").joinpath("scripts", name).read_text(encoding="utf-8")


def render_userdata(cfg: NodeConfig) -> str:
    """The MIME multi-part user data for `cfg`."""
    parts: list[tuple[str, str]] = []
    if cfg.proxy:
        parts.append(("text/cloud-boothook", proxy_boothook(cfg)))
    if cfg.os == "al2":
        parts.append(("text/x-shellscript", _bootstrap_script(cfg)))
    else:
        parts.append(("application/node.eks.aws", _nodeadm_config(cfg)))
        if cfg.cfn_signal:
            parts.append(("text/x-shellscript", _al2023_signal_script(cfg)))
    document = multipart(parts)
    size = len(document.encode())
    if size > MAX_USERDATA:
        raise SpecError(
            f"the user data is {size} bytes; EC2 takes at most {MAX_USERDATA}: "
            "shorten --bootstrap-args or --kubelet-flag"
        )
    return document


def multipart(parts: Sequence[tuple[str, str]]) -> str:
    """A MIME multi-part document of (content type, body) parts, with amibuild's fixed boundary."""
    # the standard library's writer; each part's body goes as written, ending in one newline, with "\n" line
    # ends and no Content-Transfer-Encoding (set_content would pick base64 or quoted-printable for long lines)
    document = EmailMessage(policy=email.policy.default)
    document["MIME-Version"] = "1.0"
    document.make_mixed(boundary=BOUNDARY)
    for content_type, body in parts:
        if BOUNDARY in body:  # the generator writes a given boundary without looking for it in the parts
            raise SpecError(f"a value contains {BOUNDARY!r}, the MIME boundary amibuild uses")
        part = EmailMessage(policy=email.policy.default)
        part["Content-Type"] = content_type
        part.set_payload(body.rstrip("\n") + "\n")
        document.attach(part)
    return document.as_string()


# The boothook as cloud-init runs it (scripts/boothook.sh). @NAME@ marks a value put in shell-quoted by `proxy_boothook`;
# the lines marked #@CREDENTIALS are there only with a proxy credentials parameter (`_credentials_lines`).
# AMIBUILD_ROOT is never set on a node; the tests point it at a scratch directory.
_BOOTHOOK = _script("boothook.sh")


def proxy_boothook(cfg: NodeConfig, node_os: str = "") -> str:
    """The proxy boothook; `node_os` for the units of an OS other than `cfg`'s (Karpenter's al2023 nodes,
    whose cluster details Karpenter writes, so `cfg` is an al2 one without them)."""
    node_os = node_os or cfg.os
    # services restarted when already running
    units = ("containerd", "docker", "kubelet") if node_os == "al2" else ("containerd", "kubelet")
    # nodeadm's units, and AL2's sandbox-image (the kubelet requires it; its `aws ecr
    # get-login-password` needs the proxy), are one-shot steps of the boot that have not run yet
    # when the boothook does: they get the environment, and restarting one would run that step again.
    dropin_units = units + (NODEADM_UNITS if node_os == "al2023" else ("sandbox-image",))
    values = {
        "UNIT_LIST": ", ".join(dropin_units),
        "PROXY": shlex.quote(cfg.proxy),
        "PROXY_UNIT": shlex.quote(cfg.proxy.replace("%", "%%")),
        "NO_PROXY_REST": shlex.quote(",".join(no_proxy_entries(cfg))),
        "UNITS": " ".join(units),
        "DROPIN_UNITS": " ".join(dropin_units),
        "CREDENTIALS_PARAMETER": shlex.quote(cfg.proxy_credentials_parameter) or "''",
        "CREDENTIALS_PATTERN": shlex.quote(proxy_credentials.VALUE_PATTERN),
    }
    return re.sub(r"@([A-Z_]+)@", lambda m: values[m.group(1)], _credentials_lines(_BOOTHOOK, cfg))


def _credentials_lines(script: str, cfg: NodeConfig) -> str:
    """The boothook with its credentials parameter lines (between ``#@CREDENTIALS{`` and ``#@CREDENTIALS}``,
    and each line ending ``#@CREDENTIALS``) when `cfg` names one, else without them."""
    keep = bool(cfg.proxy_credentials_parameter)
    out, inside = [], False
    for line in script.splitlines(keepends=True):
        if line.startswith("#@CREDENTIALS{"):
            inside = True
        elif line.startswith("#@CREDENTIALS}"):
            inside = False
        elif line.rstrip().endswith("#@CREDENTIALS"):
            if keep:
                out.append(line.rstrip()[:-len("#@CREDENTIALS")].rstrip() + "\n")
        elif keep or not inside:
            out.append(line)
    return "".join(out)


def bootstrap_argv(cfg: NodeConfig) -> list[str]:
    """The words after /etc/eks/bootstrap.sh (al2)."""
    argv = [cfg.cluster_name]
    if cfg.api_server_endpoint:
        argv += ["--apiserver-endpoint", cfg.api_server_endpoint, "--b64-cluster-ca", cfg.certificate_authority]
    if cfg.service_cidr:
        network = ipaddress.ip_network(cfg.service_cidr)
        # CoreDNS takes the tenth address of the service range. bootstrap.sh would guess it from
        # the VPC CIDR, which is only right for the EKS default ranges. IPv6 clusters pass their
        # own --ip-family / --service-ipv6-cidr in --bootstrap-args.
        if network.version == 4:
            argv += ["--dns-cluster-ip", str(network[10])]
    if cfg.kubelet:
        argv += ["--kubelet-extra-args", " ".join(cfg.kubelet.kubelet_args())]
    if cfg.kubelet.max_pods is not None:
        # Else bootstrap.sh writes its own maxPods (from the instance type) into the kubelet config.
        argv += ["--use-max-pods", "false"]
    return argv + split_args(cfg.bootstrap_args)


def _shell_command(argv: Sequence[str]) -> str:
    """argv quoted for bash, one option (with its value) per continued line when it gets long."""
    words = [shlex.quote(word) for word in argv]
    line = " ".join(words)
    if len(line) <= 100:
        return line
    lines = [words[0]]
    for word in words[1:]:
        if word.startswith("--") or len(lines[-1]) + len(word) > 100:
            lines.append("    " + word)
        else:
            lines[-1] += " " + word
    return " \\\n".join(lines)


def _bootstrap_script(cfg: NodeConfig) -> str:
    bootstrap = _shell_command(["/etc/eks/bootstrap.sh", *bootstrap_argv(cfg)])
    head = [
        "#!/bin/bash",
        f"# Written by amibuild: join EKS cluster {cfg.cluster_name} with the EKS-optimized AMI's bootstrap script.",
        "set -euo pipefail",
        "",
    ]
    if cfg.proxy:
        # bootstrap.sh runs `aws eks describe-cluster` and `aws ec2 ...`: without the proxy
        # environment the boothook wrote, those calls would go direct and fail behind a proxy.
        # Read as data, never run: a password in the URL may hold $, & or ; (which `source` would expand
        # or run). With a credentials parameter the boothook may have written nothing: the guard below says so.
        read_env = ["while IFS= read -r line || [[ -n $line ]]; do",
                    "    case ${line%%=*} in HTTP_PROXY|HTTPS_PROXY|NO_PROXY|http_proxy|https_proxy|no_proxy) "
                    "export \"${line?}\" ;; esac",
                    "done </etc/environment"]
        head += [
            "# Export the proxy settings the boothook wrote to bootstrap.sh and the AWS CLI it runs.",
            *(read_env if not cfg.proxy_credentials_parameter else
              ["if [[ -f /etc/environment ]]; then", *("    " + line for line in read_env), "fi"]),
            "",
        ]
    # With a credentials parameter, no proxy in /etc/environment means the boothook could not read them:
    # bootstrap.sh does not run without it (fail closed), and the stack hears FAILURE.
    missing = "echo \"amibuild: error: no proxy: the boothook could not read its credentials (see cloud-init's log)\" >&2"
    needs_proxy = bool(cfg.proxy and cfg.proxy_credentials_parameter)
    if not cfg.cfn_signal:
        guard = ["if [[ -z ${HTTPS_PROXY:-} ]]; then", f"    {missing}", "    exit 1", "fi"] if needs_proxy else []
        return "\n".join([*head, *guard, bootstrap]) + "\n"
    signal = cfg.cfn_signal
    argv = ["/opt/aws/bin/cfn-signal", "--exit-code", "STATUS", "--stack", signal.stack,
            "--resource", signal.resource, "--region", signal.region]
    if cfg.proxy:
        # with a credentials parameter, the proxy with its credentials exists only in what the boothook wrote
        argv += ["--https-proxy", "PROXYENV" if cfg.proxy_credentials_parameter else cfg.proxy]
    cfn = _shell_command(argv).replace("STATUS", '"$status"', 1).replace("PROXYENV", '"${HTTPS_PROXY:-}"', 1)
    run = ["if [[ -z ${HTTPS_PROXY:-} ]]; then", f"    {missing}", "    status=1", "else",
           bootstrap + " || status=$?", "fi"] if needs_proxy else [bootstrap + " || status=$?"]
    return "\n".join([
        *head,
        "status=0",
        *run,
        "# Report the outcome to the stack, whose creation or update waits for it.",
        cfn,
        'exit "$status"',
    ]) + "\n"


# The al2023 part that reports to the stack (scripts/al2023-cfn-signal.sh). @NAME@ marks a value put in shell-quoted by
# `_al2023_signal_script`; AMIBUILD_ROOT is never set on a node, the tests point it at a scratch root.
_AL2023_SIGNAL = _script("al2023-cfn-signal.sh")


def _al2023_signal_script(cfg: NodeConfig) -> str:
    """The al2023 part that signals the stack with the node's real outcome (see `_AL2023_SIGNAL`)."""
    assert cfg.cfn_signal is not None
    signal = cfg.cfn_signal
    values = {
        "STACK_TEXT": signal.stack,
        "STACK": shlex.quote(signal.stack),
        "RESOURCE": shlex.quote(signal.resource),
        "REGION": shlex.quote(signal.region),
        # with a credentials parameter: the proxy the boothook composed, from the unit's EnvironmentFile
        "PROXY": "${HTTPS_PROXY:-}" if cfg.proxy_credentials_parameter else shlex.quote(cfg.proxy) if cfg.proxy else "''",
        "WAIT": str(KUBELET_WAIT_SECONDS),
    }
    return re.sub(r"@([A-Z_]+)@", lambda m: values[m.group(1)], _credentials_lines(_AL2023_SIGNAL, cfg))


def _nodeadm_config(cfg: NodeConfig) -> str:
    # nodeadm-config.service runs before cloud-init, so before the boothook: the proxy must also
    # be in the NodeConfig (nodeadm since v20251007) and in the image (configure-proxy.sh). The
    # VPC CIDR is not known here; the boothook's drop-ins, read at boot, add it for each service.
    # With a credentials parameter the proxy needs credentials only the boothook reads at boot: the
    # NodeConfig carries no proxy then (nodeadm-config goes without it, or by the image's drop-ins).
    spec: dict[str, Any] = {
        "cluster": {
            "name": cfg.cluster_name,
            "apiServerEndpoint": cfg.api_server_endpoint,
            "certificateAuthority": cfg.certificate_authority,
            "cidr": cfg.service_cidr or "",
        }
    }
    if cfg.proxy and not cfg.proxy_credentials_parameter:
        spec["instance"] = {"environment": proxy_environment(cfg.proxy, no_proxy_entries(cfg))}
    if cfg.kubelet:
        spec["kubelet"] = cfg.kubelet.nodeadm_kubelet()
    return nodeconfig_part(spec)
