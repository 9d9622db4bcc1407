"""Node user data: write it for nodes that join an EKS cluster (behind a proxy if need be), read
back what EC2 or a template holds, and print the cluster-side pieces a proxied node needs.

Everything here is a pure function of its arguments: no AWS calls, no files, no printing.

Writing (`render_userdata`) gives a MIME multi-part document with a fixed boundary, so the same
`NodeConfig` always gives the same text and a launch template only changes when the config does::

    al2     text/cloud-boothook       proxy set-up, only with a proxy (`_boothook`)
            text/x-shellscript        /etc/eks/bootstrap.sh CLUSTER ARGS, then cfn-signal in a stack
    al2023  text/cloud-boothook       proxy set-up, only with a proxy
            application/node.eks.aws  the nodeadm NodeConfig (cluster name, endpoint, CA, service CIDR)
            text/x-shellscript        in a stack: a systemd unit that waits for the kubelet, then
                                      signals the stack (`_al2023_signal_script`)

cloud-init runs the boothook early at every boot, before the container runtime and the kubelet
start. It sets `proxy=` for yum/dnf, the six proxy variables in /etc/environment and systemd
drop-ins for containerd, docker (al2), the kubelet and nodeadm's own units (al2023). On al2 the
bootstrap script reads /etc/environment before it runs bootstrap.sh, whose `aws eks
describe-cluster` and `aws ec2` calls would otherwise go direct. NO_PROXY (`no_proxy_entries`), in
order:

    the VPC's IPv4 CIDRs      read at boot from instance metadata (IMDSv2: token, mac, CIDR blocks)
    the service CIDR          `service_cidr`, else both EKS defaults: 10.100.0.0/16, 172.20.0.0/16
    169.254.169.254 localhost 127.0.0.1 .internal
    the cluster's endpoint    REGION.eks.amazonaws.com and every subdomain (the API servers),
                              only when the cluster has private endpoint access (`private_endpoint`)
    regional AWS endpoints    per service in `bypass` (`ENDPOINTS`; default: all of them)
    `no_proxy`                extra entries

The cluster endpoint bypasses the proxy only with private endpoint access: only then does it
resolve, inside the VPC, to addresses the node reaches directly. A public-only endpoint (what
CreateCluster gives by default, hence `private_endpoint=False`) resolves to public addresses that
a node behind a proxy reaches only through it.

EKS gives a cluster created without a service CIDR 172.20.0.0/16 when its VPC lies in 10.0.0.0/8
and 10.100.0.0/16 otherwise. The node cannot see which, so without `service_cidr` both go into
NO_PROXY: service addresses are only ever reached on the node itself (kube-proxy rules), never
through a proxy, so naming an unused range costs nothing unless that range is a real network
the node must reach through the proxy — then pass the cluster's service CIDR.

The user data carries the proxy URL, and anyone allowed to describe the instance or its launch
template can read it: use a proxy that does not need credentials, or accept that.

Reading user data back (`invoke decode-userdata`) lives in `amibuild.handoff.userdata.decode`.

`k8s_manifests` and `aws_auth_entry` print the cluster side: the proxy ConfigMap with patches that
make aws-node and kube-proxy read it, and the aws-auth mapRoles entry for the node role.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import yaml

from amibuild.errors import SpecError

OSES = ("al2", "al2023")
BOUNDARY = "==AMIBUILD-USERDATA=="
IMDS = "169.254.169.254"
# Kubernetes gives the cluster's service addresses from one of these when EKS chose the range.
DEFAULT_SERVICE_CIDRS = ("10.100.0.0/16", "172.20.0.0/16")
# Always bypassed: metadata, loopback, and EC2's private DNS names (*.ec2.internal,
# *.compute.internal), which is how nodes and the kubelet name each other.
LOCAL_NO_PROXY = (IMDS, "localhost", "127.0.0.1", ".internal")
# Regional endpoints reached without the proxy, per service. Nodes behind a proxy normally sit in
# private subnets whose VPC has endpoints for these services (EKS lists them for private
# clusters); through the proxy the traffic would leave the VPC or be refused. `{dns}` is the
# partition's suffix. Entries carry no leading dot: curl, Go and Python all match such an entry
# and every subdomain, while Go matches only subdomains of a dotted one.
ENDPOINTS: Mapping[str, tuple[str, ...]] = {
    # The EKS API (bootstrap.sh's describe-cluster); the cluster's own API servers are
    # `CLUSTER_ENDPOINT`, bypassed only with private endpoint access.
    "eks": ("eks.{region}.{dns}",),
    "ec2": ("ec2.{region}.{dns}",),
    # ACCOUNT.dkr.ecr.REGION... is the registry of every ECR image, the EKS add-ons' included.
    "ecr": ("api.ecr.{region}.{dns}", "dkr.ecr.{region}.{dns}"),
    # ECR serves image layers from regional S3 buckets (BUCKET.s3.REGION...): through a gateway
    # endpoint only the regional name stays in the VPC, so the global s3.amazonaws.com is left out.
    "s3": ("s3.{region}.{dns}",),
    # IAM roles for service accounts exchange web-identity tokens with regional STS.
    "sts": ("sts.{region}.{dns}",),
}
# The cluster API servers' names (ID.gr7.REGION.eks.amazonaws.com): matched as a suffix.
CLUSTER_ENDPOINT = "{region}.eks.{dns}"
# systemd units the al2023 proxy drop-ins cover: nodeadm's two units call the EKS and EC2 APIs.
NODEADM_UNITS = ("nodeadm-config", "nodeadm-run")
# How long the al2023 signal unit waits for the kubelet before it reports failure: within the
# template's default RollingUpdatePauseTime (PT15M), so the stack hears a failure, not a timeout.
KUBELET_WAIT_SECONDS = 600
CONFIGMAP = "proxy-environment-variables"
# Daemonsets in kube-system that need the proxy, with their container's name.
PROXIED_DAEMONSETS = (("aws-node", "aws-node"), ("kube-proxy", "kube-proxy"))
NODE_GROUPS = ("system:bootstrappers", "system:nodes")
MAX_USERDATA = 16384  # bytes EC2 accepts, before base64
_CLUSTER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}\Z")
_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}\Z")
_STACK = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,127}\Z")
_LOGICAL_ID = re.compile(r"^[A-Za-z0-9]{1,255}\Z")
_NO_PROXY_ENTRY = re.compile(r"^[][A-Za-z0-9._*:/-]+\Z")
_KUBELET_FLAG = re.compile(r"^--[a-z0-9][a-z0-9-]*(=.*)?\Z")
# Characters that could end a value in the shell, /etc/environment or a systemd drop-in.
_URL_UNSAFE = re.compile(r"[\s'\"`\\<>{}|^]", re.ASCII)
_ROLE_ARN = re.compile(
    r"^arn:(?P<partition>aws(?:-[a-z]+)*):iam::(?P<account>[0-9]{12}):role/"
    r"(?P<path>(?:[\x21-\x2e\x30-\x7e]+/)*)(?P<name>[A-Za-z0-9_+=,.@-]{1,64})\Z"
)


# ------------------------------------------------------------------------------- value objects


@dataclass(frozen=True)
class CfnSignal:
    """Tell a CloudFormation stack whether the node joined (its CreationPolicy waits for this)."""

    stack: str
    resource: str
    region: str

    def __post_init__(self) -> None:
        if not _STACK.match(self.stack):
            raise SpecError(
                f"--cfn-stack {self.stack!r}: a stack name is letters, digits and hyphens, starting with a letter"
            )
        if not _LOGICAL_ID.match(self.resource):
            raise SpecError(f"--cfn-resource {self.resource!r}: a logical resource ID is letters and digits")
        _check_region(self.region, "--region")


@dataclass(frozen=True)
class NodeConfig:
    """What a node needs to join its cluster; every value checked when it is made.

    `proxy` serves both http:// and https:// traffic. `bootstrap_args` is one string split like a
    shell would (quotes work, nothing expands) and written back quoted, so it reaches bootstrap.sh
    as the same words. `kubelet_flags` become `--kubelet-extra-args` on al2 and
    `spec.kubelet.flags` on al2023. al2023 needs `api_server_endpoint`, `certificate_authority`
    (base64, as `aws eks describe-cluster` prints it) and `service_cidr`: nodeadm looks nothing up.
    """

    cluster_name: str
    os: str = "al2"
    proxy: str = ""
    no_proxy: tuple[str, ...] = ()
    service_cidr: str | None = None
    region: str = ""
    bypass: tuple[str, ...] = tuple(ENDPOINTS)
    bootstrap_args: str = ""
    kubelet_flags: tuple[str, ...] = ()
    api_server_endpoint: str = ""
    certificate_authority: str = ""
    cfn_signal: CfnSignal | None = None
    private_endpoint: bool = False

    def __post_init__(self) -> None:
        for name in ("no_proxy", "bypass", "kubelet_flags"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        _check_config(self)

    @property
    def service_cidrs(self) -> tuple[str, ...]:
        return (self.service_cidr,) if self.service_cidr else DEFAULT_SERVICE_CIDRS


def _check_config(cfg: NodeConfig) -> None:
    if not cfg.cluster_name:
        raise SpecError("--cluster is required")
    if not _CLUSTER.match(cfg.cluster_name):
        raise SpecError(
            f"--cluster {cfg.cluster_name!r}: 1-100 letters, digits, hyphens and underscores, "
            "starting with a letter or digit"
        )
    if cfg.os not in OSES:
        raise SpecError(f"--os {cfg.os!r}: choose one of {', '.join(OSES)}")
    if cfg.proxy:
        _check_url(cfg.proxy, "--proxy", ("http", "https"))
    for entry in cfg.no_proxy:
        if not _NO_PROXY_ENTRY.match(entry):
            raise SpecError(f"--no-proxy {entry!r}: give host names, .domains, addresses or CIDRs, one per entry")
    if cfg.service_cidr is not None:
        _check_cidr(cfg.service_cidr, "--service-cidr")
    unknown = [name for name in cfg.bypass if name not in ENDPOINTS]
    if unknown:
        raise SpecError(f"--bypass {unknown[0]!r}: choose from {', '.join(ENDPOINTS)} (or none)")
    if cfg.region or (cfg.proxy and (cfg.bypass or cfg.private_endpoint)):
        _check_region(cfg.region, "--region", why=" (the regional AWS endpoints in NO_PROXY depend on it)")
    if cfg.api_server_endpoint:
        _check_url(cfg.api_server_endpoint, "--api-server-endpoint", ("https",))
    if cfg.certificate_authority:
        _check_certificate_authority(cfg.certificate_authority)
    for flag in cfg.kubelet_flags:
        _check_printable(flag, "--kubelet-flag")
        if not _KUBELET_FLAG.match(flag):
            raise SpecError(f"--kubelet-flag {flag!r}: write one kubelet flag as --name=value")
    _check_printable(cfg.bootstrap_args, "--bootstrap-args")
    words = _split_args(cfg.bootstrap_args)
    if cfg.os == "al2023":
        missing = [flag for flag, value in (
            ("--api-server-endpoint", cfg.api_server_endpoint),
            ("--certificate-authority", cfg.certificate_authority),
            ("--service-cidr", cfg.service_cidr),
        ) if not value]
        if missing:
            raise SpecError(
                f"{', '.join(missing)} required for al2023: nodeadm takes the cluster's details from the "
                "user data (aws eks describe-cluster --name CLUSTER shows them)"
            )
        if words:
            raise SpecError("--bootstrap-args is for al2's bootstrap.sh; on al2023 give kubelet flags with --kubelet-flag")
    else:
        if bool(cfg.api_server_endpoint) != bool(cfg.certificate_authority):
            raise SpecError("--api-server-endpoint and --certificate-authority go together (or leave both out)")
        for option in _derived_bootstrap_options(cfg):
            if any(word == option or word.startswith(option + "=") for word in words):
                raise SpecError(
                    f"--bootstrap-args sets {option}, which amibuild already derives from its own flags"
                )


def _check_printable(value: str, flag: str) -> None:
    bad = next((ch for ch in value if not " " <= ch <= "~"), None)
    if bad is not None:
        raise SpecError(f"{flag}: {bad!r} is not a printable ASCII character")


def _check_url(value: str, flag: str, schemes: tuple[str, ...]) -> None:
    shown = redact(value)
    want = " or ".join(f"{scheme}://" for scheme in schemes)
    if not value.isascii() or _URL_UNSAFE.search(value) or not value.isprintable():
        raise SpecError(f"{flag} {shown!r}: an {want} URL without spaces, quotes, backslashes or braces")
    parts = urlsplit(value)
    if parts.scheme not in schemes:
        raise SpecError(f"{flag} {shown!r}: must be an {want} URL")
    try:
        _ = parts.port  # urlsplit checks the port only when asked
    except ValueError:
        raise SpecError(f"{flag} {shown!r}: the port is not a number from 0 to 65535") from None
    if not parts.hostname:
        raise SpecError(f"{flag} {shown!r}: names no host")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise SpecError(f"{flag} {shown!r}: give scheme, host and port only")


def _check_cidr(value: str, flag: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    try:
        return ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        hint = ""
        try:
            hint = f"; did you mean {ipaddress.ip_network(value, strict=False)}?"
        except ValueError:
            pass
        raise SpecError(f"{flag} {value!r}: not a network in CIDR notation ({exc}){hint}") from None


def _check_region(value: str, flag: str, why: str = "") -> None:
    if not value:
        raise SpecError(f"{flag} is required{why}")
    if not _REGION.match(value):
        raise SpecError(f"{flag} {value!r}: not an AWS region name such as eu-west-1")


def _check_certificate_authority(value: str) -> None:
    try:
        pem = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        pem = b""
    if not pem.startswith(b"-----BEGIN CERTIFICATE-----"):
        raise SpecError(
            "--certificate-authority: give the cluster's base64 certificate data "
            "(aws eks describe-cluster --query cluster.certificateAuthority.data)"
        )


def _split_args(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=False, posix=True)
    except ValueError as exc:
        raise SpecError(f"--bootstrap-args {text!r}: {exc}") from None


def redact(url: str) -> str:
    """http://user:secret@host:3128 -> http://***@host:3128, for messages."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@", r"\1***@", url)


def config_from_flags(
    *,
    cluster: str,
    os: str = "al2",
    proxy: str = "",
    no_proxy: Sequence[str] = (),
    service_cidr: str = "",
    cluster_ip: str = "",
    region: str = "",
    bypass: Sequence[str] = (),
    bootstrap_args: str = "",
    kubelet_flags: Sequence[str] = (),
    api_server_endpoint: str = "",
    certificate_authority: str = "",
    cfn_stack: str = "",
    cfn_resource: str = "",
    private_endpoint: bool = False,
) -> NodeConfig:
    """Task flags → `NodeConfig`: comma lists split, `--bypass none`, `--cluster-ip`, cfn-signal."""
    if service_cidr and cluster_ip:
        raise SpecError("give --service-cidr or --cluster-ip, not both")
    if bool(cfn_stack) != bool(cfn_resource):
        raise SpecError("--cfn-stack and --cfn-resource go together (the stack and its node group's logical ID)")
    chosen = [name for value in bypass for name in value.split(",") if name]
    if chosen == ["none"]:
        services: tuple[str, ...] = ()
    elif chosen:
        services = tuple(dict.fromkeys(chosen))
    else:
        services = tuple(ENDPOINTS)
    return NodeConfig(
        cluster_name=cluster,
        os=os or "al2",
        proxy=proxy or "",
        no_proxy=tuple(entry for value in no_proxy for entry in value.split(",") if entry),
        service_cidr=service_cidr or (service_cidr_for(cluster_ip) if cluster_ip else None),
        region=region or "",
        bypass=services,
        bootstrap_args=bootstrap_args or "",
        kubelet_flags=tuple(kubelet_flags),
        api_server_endpoint=api_server_endpoint or "",
        certificate_authority=certificate_authority or "",
        cfn_signal=CfnSignal(cfn_stack, cfn_resource, region or "") if cfn_stack else None,
        private_endpoint=bool(private_endpoint),
    )


# ------------------------------------------------------------------------------------ NO_PROXY


def _dns(region: str) -> str:
    return "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"


def endpoint_hosts(region: str, services: Sequence[str]) -> tuple[str, ...]:
    """The regional endpoint names that bypass the proxy for `services` (keys of `ENDPOINTS`)."""
    return tuple(host.format(region=region, dns=_dns(region)) for name in services for host in ENDPOINTS[name])


def no_proxy_entries(cfg: NodeConfig, vpc_cidrs: Sequence[str] = ()) -> tuple[str, ...]:
    """NO_PROXY in order, duplicates dropped; the node's user data adds the VPC CIDRs at boot."""
    entries = [
        *vpc_cidrs,
        *cfg.service_cidrs,
        *LOCAL_NO_PROXY,
        *([CLUSTER_ENDPOINT.format(region=cfg.region, dns=_dns(cfg.region))] if cfg.private_endpoint else []),
        *endpoint_hosts(cfg.region, cfg.bypass),
        *cfg.no_proxy,
    ]
    return tuple(dict.fromkeys(entries))


def service_cidr_for(cluster_ip: str) -> str:
    """The service CIDR EKS chose, from the ClusterIP of the `kubernetes` service in `default`."""
    try:
        address = ipaddress.ip_address(cluster_ip)
    except ValueError:
        raise SpecError(f"--cluster-ip {cluster_ip!r}: not an IP address") from None
    for cidr in DEFAULT_SERVICE_CIDRS:
        if address in ipaddress.ip_network(cidr):
            return cidr
    raise SpecError(
        f"--cluster-ip {cluster_ip}: in neither EKS default range ({', '.join(DEFAULT_SERVICE_CIDRS)}); "
        "give --service-cidr (aws eks describe-cluster --query cluster.kubernetesNetworkConfig.serviceIpv4Cidr)"
    )


# ----------------------------------------------------------------------------------- rendering


def render_userdata(cfg: NodeConfig) -> str:
    """The MIME multi-part user data for `cfg` (see the module docstring for its parts)."""
    parts: list[tuple[str, str]] = []
    if cfg.proxy:
        parts.append(("text/cloud-boothook", _boothook(cfg)))
    if cfg.os == "al2":
        parts.append(("text/x-shellscript", _bootstrap_script(cfg)))
    else:
        parts.append(("application/node.eks.aws", _nodeadm_config(cfg)))
        if cfg.cfn_signal:
            parts.append(("text/x-shellscript", _al2023_signal_script(cfg)))
    document = _mime(parts)
    size = len(document.encode())
    if size > MAX_USERDATA:
        raise SpecError(
            f"the user data is {size} bytes; EC2 takes at most {MAX_USERDATA}: "
            "shorten --bootstrap-args or --kubelet-flag"
        )
    return document


def _mime(parts: Sequence[tuple[str, str]]) -> str:
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"', ""]
    for content_type, body in parts:
        if BOUNDARY in body:
            raise SpecError(f"a value contains {BOUNDARY!r}, the MIME boundary amibuild uses")
        lines += [f"--{BOUNDARY}", f"Content-Type: {content_type}", "", body.rstrip("\n"), ""]
    lines.append(f"--{BOUNDARY}--")
    return "\n".join(lines) + "\n"


def _units(cfg: NodeConfig) -> tuple[str, ...]:
    """Services restarted when already running (the drop-ins also go to `_dropin_units`)."""
    return ("containerd", "docker", "kubelet") if cfg.os == "al2" else ("containerd", "kubelet")


def _dropin_units(cfg: NodeConfig) -> tuple[str, ...]:
    # nodeadm's units are one-shot steps of the boot that have not run yet when the boothook
    # does: they get the environment, and restarting one would run that step again.
    return _units(cfg) + (NODEADM_UNITS if cfg.os == "al2023" else ())


# The boothook as cloud-init runs it. @NAME@ marks a value put in shell-quoted by `_boothook`.
# AMIBUILD_ROOT is never set on a node; the tests point it at a scratch directory.
_BOOTHOOK = r"""#cloud-boothook
#!/bin/bash
# Written by amibuild: send yum/dnf, login shells, @UNIT_LIST@ through an HTTP proxy.
# cloud-init runs boothooks early at every boot, before the container runtime and the kubelet
# start. Each file is rewritten whole, so a reboot or a changed proxy leaves no stale line.
set -euo pipefail

proxy=@PROXY@
# systemd expands %-specifiers in Environment= values, so a literal % is doubled there.
proxy_unit=@PROXY_UNIT@
no_proxy_rest=@NO_PROXY_REST@
units=(@UNITS@)
dropin_units=(@DROPIN_UNITS@)
root=${AMIBUILD_ROOT:-}

# The VPC's IPv4 CIDRs from instance metadata (IMDSv2), never through a proxy, retried while
# the network settles.
imds_curl() {
    curl --silent --show-error --fail --noproxy '*' --connect-timeout 2 \
        --retry 10 --retry-delay 1 --retry-connrefused "$@"
}
token=$(imds_curl -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' \
    http://169.254.169.254/latest/api/token)
imds() {
    imds_curl -H "X-aws-ec2-metadata-token: ${token}" "http://169.254.169.254/latest/meta-data/$1"
}
mac=$(imds mac)
vpc_cidrs=$(imds "network/interfaces/macs/${mac}/vpc-ipv4-cidr-blocks" | paste -s -d , -)
if [[ -z $vpc_cidrs ]]; then
    echo "amibuild: error: instance metadata gave no VPC CIDR for ${mac}" >&2
    exit 1
fi
no_proxy="${vpc_cidrs},${no_proxy_rest}"

# yum (al2) and dnf (al2023): proxy= straight after the [main] header, older proxy= lines in
# [main] dropped. Writing through the path keeps yum.conf a link to dnf.conf where it is one.
for conf in "${root}/etc/yum.conf" "${root}/etc/dnf/dnf.conf"; do
    [[ -f $conf ]] || continue
    updated=$(awk -v setting="proxy=${proxy}" '
        /^[[:space:]]*\[/ {
            in_main = ($0 ~ /^[[:space:]]*\[main\][[:space:]]*$/)
            print
            if (in_main && !placed) { print setting; placed = 1 }
            next
        }
        in_main && /^[[:space:]]*proxy[[:space:]]*=/ { next }
        { print }
        END { if (!placed) { print "[main]"; print setting } }
    ' "$conf")
    printf '%s\n' "$updated" >"$conf"
done

# /etc/environment (login shells, PAM): the six variables replace any earlier lines for them.
env_file="${root}/etc/environment"
mkdir -p "${root}/etc"
kept=""
if [[ -f $env_file ]]; then
    kept=$(grep -v -E '^[[:space:]]*(export[[:space:]]+)?(HTTPS?_PROXY|NO_PROXY|https?_proxy|no_proxy)=' \
        "$env_file" || [[ $? -eq 1 ]])
fi
{
    if [[ -n $kept ]]; then
        printf '%s\n' "$kept"
    fi
    printf '%s\n' "HTTP_PROXY=${proxy}" "HTTPS_PROXY=${proxy}" "NO_PROXY=${no_proxy}" \
        "http_proxy=${proxy}" "https_proxy=${proxy}" "no_proxy=${no_proxy}"
} >"$env_file"

for unit in "${dropin_units[@]}"; do
    dir="${root}/etc/systemd/system/${unit}.service.d"
    mkdir -p "$dir"
    cat >"${dir}/http-proxy.conf" <<EOF
[Service]
Environment="HTTP_PROXY=${proxy_unit}"
Environment="HTTPS_PROXY=${proxy_unit}"
Environment="NO_PROXY=${no_proxy}"
Environment="http_proxy=${proxy_unit}"
Environment="https_proxy=${proxy_unit}"
Environment="no_proxy=${no_proxy}"
EOF
done

# Units already running keep their old environment: reload, then restart them without waiting,
# since this hook runs in the middle of boot.
systemctl daemon-reload
for unit in "${units[@]}"; do
    if systemctl is-active --quiet "${unit}.service"; then
        systemctl --no-block restart "${unit}.service"
    fi
done
"""


def _boothook(cfg: NodeConfig) -> str:
    units = _units(cfg)
    values = {
        "UNIT_LIST": ", ".join(_dropin_units(cfg)),
        "PROXY": shlex.quote(cfg.proxy),
        "PROXY_UNIT": shlex.quote(cfg.proxy.replace("%", "%%")),
        "NO_PROXY_REST": shlex.quote(",".join(no_proxy_entries(cfg))),
        "UNITS": " ".join(units),
        "DROPIN_UNITS": " ".join(_dropin_units(cfg)),
    }
    return re.sub(r"@([A-Z_]+)@", lambda m: values[m.group(1)], _BOOTHOOK)


def _derived_bootstrap_options(cfg: NodeConfig) -> list[str]:
    """bootstrap.sh options amibuild writes from its own flags (so --bootstrap-args may not)."""
    options = []
    if cfg.api_server_endpoint:
        options += ["--apiserver-endpoint", "--b64-cluster-ca"]
    if cfg.service_cidr and ipaddress.ip_network(cfg.service_cidr).version == 4:
        options.append("--dns-cluster-ip")
    if cfg.kubelet_flags:
        options.append("--kubelet-extra-args")
    return options


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
    if cfg.kubelet_flags:
        argv += ["--kubelet-extra-args", " ".join(cfg.kubelet_flags)]
    return argv + _split_args(cfg.bootstrap_args)


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
        head += [
            "# Export the proxy settings the boothook wrote to bootstrap.sh and the AWS CLI it runs.",
            "set -a",
            "# shellcheck source=/dev/null",
            "source /etc/environment",
            "set +a",
            "",
        ]
    if not cfg.cfn_signal:
        return "\n".join([*head, bootstrap]) + "\n"
    signal = cfg.cfn_signal
    argv = ["/opt/aws/bin/cfn-signal", "--exit-code", "STATUS", "--stack", signal.stack,
            "--resource", signal.resource, "--region", signal.region]
    if cfg.proxy:
        argv += ["--https-proxy", cfg.proxy]
    cfn = _shell_command(argv).replace("STATUS", '"$status"', 1)
    return "\n".join([
        *head,
        "status=0",
        bootstrap + " || status=$?",
        "# Report the outcome to the stack, whose creation or update waits for it.",
        cfn,
        'exit "$status"',
    ]) + "\n"


# The al2023 part that reports to the stack. @NAME@ marks a value put in shell-quoted by
# `_al2023_signal_script`; AMIBUILD_ROOT is never set on a node, the tests point it at a scratch root.
_AL2023_SIGNAL = r"""#!/bin/bash
# Written by amibuild: tell stack @STACK_TEXT@ whether this node joined its cluster. nodeadm starts
# the kubelet after cloud-init has run this part, so waiting here would hold up the very boot it
# waits for: the wait goes to a systemd unit, started without blocking.
set -euo pipefail
root=${AMIBUILD_ROOT:-}
mkdir -p "${root}/etc/amibuild" "${root}/etc/systemd/system"
cat >"${root}/etc/amibuild/cfn-signal.sh" <<'AMIBUILD_SIGNAL'
#!/bin/bash
# Report the node's outcome: SUCCESS once the kubelet runs, FAILURE if nodeadm failed or the
# kubelet is not running after @WAIT@ seconds.
set -uo pipefail
root=${AMIBUILD_ROOT:-}
stack=@STACK@
resource=@RESOURCE@
region=@REGION@
proxy=@PROXY@
status=FAILURE
deadline=$((SECONDS + @WAIT@))
while ((SECONDS < deadline)); do
    if systemctl is-failed --quiet nodeadm-run.service; then
        break
    fi
    if systemctl is-active --quiet kubelet.service; then
        status=SUCCESS
        break
    fi
    sleep 5
done
code=1
if [[ $status == SUCCESS ]]; then
    code=0
fi
if [[ -x "${root}/opt/aws/bin/cfn-signal" ]]; then
    extra=()
    if [[ -n $proxy ]]; then
        extra=(--https-proxy "$proxy")
    fi
    exec "${root}/opt/aws/bin/cfn-signal" --exit-code "$code" --stack "$stack" --resource "$resource" \
        --region "$region" "${extra[@]}"
fi
# Without cfn-signal (not on every AL2023 image), the AWS CLI signals with the node role, which
# the node group template allows cloudformation:SignalResource on its own stack.
imds_curl() {
    curl --silent --show-error --fail --noproxy '*' --connect-timeout 2 --retry 5 --retry-connrefused "$@"
}
token=$(imds_curl -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' http://169.254.169.254/latest/api/token)
instance=$(imds_curl -H "X-aws-ec2-metadata-token: ${token}" http://169.254.169.254/latest/meta-data/instance-id)
exec aws cloudformation signal-resource --stack-name "$stack" --logical-resource-id "$resource" \
    --unique-id "$instance" --status "$status" --region "$region"
AMIBUILD_SIGNAL
cat >"${root}/etc/systemd/system/amibuild-cfn-signal.service" <<'AMIBUILD_UNIT'
[Unit]
Description=amibuild: tell CloudFormation whether this node joined its cluster
After=nodeadm-run.service

[Service]
Type=oneshot
# The proxy settings the boothook wrote, for the AWS CLI.
EnvironmentFile=-/etc/environment
ExecStart=/bin/bash /etc/amibuild/cfn-signal.sh
AMIBUILD_UNIT
systemctl daemon-reload
systemctl --no-block start amibuild-cfn-signal.service
"""


def _al2023_signal_script(cfg: NodeConfig) -> str:
    """The al2023 part that signals the stack with the node's real outcome (see `_AL2023_SIGNAL`)."""
    assert cfg.cfn_signal is not None
    signal = cfg.cfn_signal
    values = {
        "STACK_TEXT": signal.stack,
        "STACK": shlex.quote(signal.stack),
        "RESOURCE": shlex.quote(signal.resource),
        "REGION": shlex.quote(signal.region),
        "PROXY": shlex.quote(cfg.proxy) if cfg.proxy else "''",
        "WAIT": str(KUBELET_WAIT_SECONDS),
    }
    return re.sub(r"@([A-Z_]+)@", lambda m: values[m.group(1)], _AL2023_SIGNAL)


def _nodeadm_config(cfg: NodeConfig) -> str:
    spec: dict[str, Any] = {
        "cluster": {
            "name": cfg.cluster_name,
            "apiServerEndpoint": cfg.api_server_endpoint,
            "certificateAuthority": cfg.certificate_authority,
            "cidr": cfg.service_cidr,
        }
    }
    if cfg.kubelet_flags:
        spec["kubelet"] = {"flags": list(cfg.kubelet_flags)}
    document = {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}
    return "---\n" + _yaml(document)


def _yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=1 << 16)


# ------------------------------------------------------------------------------- cluster side


def k8s_manifests(cfg: NodeConfig, vpc_cidr: str | Sequence[str]) -> str:
    """The proxy ConfigMap for kube-system and the patches that make aws-node and kube-proxy use it.

    `vpc_cidr` is the cluster VPC's CIDR (or several, as a list or comma-separated): pods cannot
    ask instance metadata the way the node's boothook does.
    """
    if not cfg.proxy:
        raise SpecError("--k8s-manifests needs --proxy: the manifests carry the proxy settings")
    raw = vpc_cidr.split(",") if isinstance(vpc_cidr, str) else list(vpc_cidr)
    cidrs = [entry.strip() for entry in raw if entry.strip()]
    if not cidrs:
        raise SpecError("--vpc-cidr is required with --k8s-manifests (aws ec2 describe-vpcs --vpc-ids VPC)")
    for cidr in cidrs:
        _check_cidr(cidr, "--vpc-cidr")
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
        _yaml(configmap).rstrip("\n"),
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
            _yaml(document).rstrip("\n"),
        ]
    return "\n".join(out) + "\n"


def _role_match(role_arn: str) -> re.Match[str]:
    match = _ROLE_ARN.match(role_arn)
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
    return "\n".join(head) + "\n" + _yaml(entry)
