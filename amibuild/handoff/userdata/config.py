"""Node user data settings: the `NodeConfig` the user data is rendered from, its checks (bad input is a
SpecError naming the flag), `config_from_flags`, and the NO_PROXY list (`no_proxy_entries`).

Pure functions of their arguments: no AWS calls, no files, no printing.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import ipaddress
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from amibuild.errors import SpecError
from amibuild.handoff.userdata.bootstrap_sh import check_bootstrap_words
from amibuild.handoff.userdata.kubelet import KubeletSettings
from amibuild.pipeline import proxy_credentials
from amibuild.pipeline.validation import partition_dns_suffixes, region_partitions

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
_REGION = re.compile(r"^[a-z]{2,4}(-[a-z]+)+-[0-9]{1,2}\Z")  # eu-west-1, us-isob-east-1, eusc-de-east-1
# a CloudFormation stack name, as CreateStack takes it
STACK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,127}\Z")
_LOGICAL_ID = re.compile(r"^[A-Za-z0-9]{1,255}\Z")
_NO_PROXY_ENTRY = re.compile(r"^[][A-Za-z0-9._*:/-]+\Z")
# Characters that could end a value in the shell, /etc/environment or a systemd drop-in.
_URL_UNSAFE = re.compile(r"[\s'\"`\\<>{}|^]", re.ASCII)
ROLE_ARN = re.compile(
    r"^arn:(?P<partition>aws(?:-[a-z]+)*):iam::(?P<account>[0-9]{12}):role/"
    r"(?P<path>(?:[\x21-\x2e\x30-\x7e]+/)*)(?P<name>[A-Za-z0-9_+=,.@-]{1,64})\Z"
)


@dataclass(frozen=True)
class CfnSignal:
    """Tell a CloudFormation stack whether the node joined (its CreationPolicy waits for this)."""

    stack: str
    resource: str
    region: str

    def __post_init__(self) -> None:
        if not STACK_NAME.match(self.stack):
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
    # Labels, taints, max pods and the flags (`kubelet_flags` is the older way to give flags only).
    kubelet: KubeletSettings = KubeletSettings()
    # An SSM SecureString (user:password) the boothook reads at boot with the instance role and puts
    # into `proxy`, which then carries no credentials of its own (amibuild.pipeline.proxy_credentials).
    proxy_credentials_parameter: str = ""

    def __post_init__(self) -> None:
        for name in ("no_proxy", "bypass", "kubelet_flags"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if self.kubelet_flags and self.kubelet.flags and self.kubelet_flags != self.kubelet.flags:
            raise SpecError("give kubelet flags once: as kubelet_flags or in kubelet")
        if self.kubelet_flags and not self.kubelet.flags:
            object.__setattr__(self, "kubelet", self.kubelet.with_flags(self.kubelet_flags))
        object.__setattr__(self, "kubelet_flags", self.kubelet.flags)
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
    proxy_credentials.check_with_proxy(cfg.proxy_credentials_parameter, (cfg.proxy,),
                                       "--proxy-credentials-parameter", "--proxy")
    if cfg.no_proxy and not cfg.proxy:
        raise SpecError("--no-proxy: lists what bypasses the proxy, but there is no proxy: give --proxy")
    for entry in cfg.no_proxy:
        if not _NO_PROXY_ENTRY.match(entry):
            raise SpecError(f"--no-proxy {entry!r}: give host names, .domains, addresses or CIDRs, one per entry")
    if cfg.service_cidr is not None:
        service = check_cidr(cfg.service_cidr, "--service-cidr")
        # EKS takes /12 to /24; the cluster DNS address (the tenth) is outside anything smaller
        if service.version == 4 and not 12 <= service.prefixlen <= 24:
            raise SpecError(f"--service-cidr {cfg.service_cidr!r}: an EKS service range is /12 to /24 "
                            "(aws eks describe-cluster --query cluster.kubernetesNetworkConfig.serviceIpv4Cidr)")
    unknown = [name for name in cfg.bypass if name not in ENDPOINTS]
    if unknown:
        raise SpecError(f"--bypass {unknown[0]!r}: choose from {', '.join(ENDPOINTS)} (or none)")
    if cfg.region or (cfg.proxy and (cfg.bypass or cfg.private_endpoint)):
        _check_region(cfg.region, "--region", why=" (the regional AWS endpoints in NO_PROXY depend on it)")
    if cfg.api_server_endpoint:
        _check_url(cfg.api_server_endpoint, "--api-server-endpoint", ("https",))
    if cfg.certificate_authority:
        _check_certificate_authority(cfg.certificate_authority)
    bad = next((ch for ch in cfg.bootstrap_args if not " " <= ch <= "~"), None)
    if bad is not None:
        raise SpecError(f"--bootstrap-args: {bad!r} is not a printable ASCII character")
    words = split_args(cfg.bootstrap_args)
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
            raise SpecError("--bootstrap-args is for al2's bootstrap.sh; on al2023 give --kubelet-flag, "
                            "--node-label, --taint or --max-pods")
    else:
        if cfg.kubelet.max_pods_expression:
            raise SpecError("--max-pods-expression is nodeadm's (al2023); al2's bootstrap.sh takes a fixed "
                            "--max-pods N")
        if bool(cfg.api_server_endpoint) != bool(cfg.certificate_authority):
            raise SpecError("--api-server-endpoint and --certificate-authority go together (or leave both out)")
        options = check_bootstrap_words(words)
        for option in _derived_bootstrap_options(cfg):
            if option in options:
                raise SpecError(
                    f"--bootstrap-args sets {option}, which amibuild already derives from its own flags"
                )


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


def check_proxy_url(value: str) -> str:
    """`value` if it is a proxy URL the user data can carry, else SpecError naming --proxy."""
    _check_url(value, "--proxy", ("http", "https"))
    return value


def check_cidr(value: str, flag: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    try:
        return ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        hint = ""
        with contextlib.suppress(ValueError):
            hint = f"; did you mean {ipaddress.ip_network(value, strict=False)}?"
        raise SpecError(f"{flag} {value!r}: not a network in CIDR notation ({exc}){hint}") from None


def vpc_cidrs(given: str | Sequence[str]) -> list[str]:
    """--vpc-cidr's values (repeated, comma-separated, or both), each checked as a CIDR."""
    raw = given.split(",") if isinstance(given, str) else [part for value in given for part in value.split(",")]
    cidrs = [entry.strip() for entry in raw if entry.strip()]
    for cidr in cidrs:
        check_cidr(cidr, "--vpc-cidr")
    return cidrs


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


def split_args(text: str, flag: str = "--bootstrap-args") -> list[str]:
    """bootstrap.sh's arguments as the words it gets (split as a shell would, nothing expanded)."""
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise SpecError(f"{flag} {text!r}: {exc}") from None


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
    node_labels: Sequence[str] = (),
    taints: Sequence[str] = (),
    max_pods: str | int | None = None,
    max_pods_expression: str | None = None,
    kubelet: KubeletSettings | None = None,
    proxy_credentials_parameter: str = "",
) -> NodeConfig:
    """Task flags → `NodeConfig`: comma lists split, `--bypass none`, `--cluster-ip`, cfn-signal."""
    if service_cidr and cluster_ip:
        raise SpecError("give --service-cidr or --cluster-ip, not both")
    if bool(cfn_stack) != bool(cfn_resource):
        raise SpecError("--cfn-stack and --cfn-resource go together (the stack and its node group's logical ID)")
    chosen = [name for value in bypass for name in value.split(",") if name]
    services = () if chosen == ["none"] else tuple(dict.fromkeys(chosen or ENDPOINTS))
    return NodeConfig(
        cluster_name=cluster,
        os=os or "al2",
        proxy=proxy or "",
        no_proxy=tuple(entry for value in no_proxy for entry in value.split(",") if entry),
        service_cidr=service_cidr or (service_cidr_for(cluster_ip) if cluster_ip else None),
        region=region or "",
        bypass=services,
        bootstrap_args=bootstrap_args or "",
        kubelet=kubelet if kubelet is not None else KubeletSettings.parse(
            flags=kubelet_flags, labels=node_labels, taints=taints, max_pods=max_pods,
            max_pods_expression=max_pods_expression),
        api_server_endpoint=api_server_endpoint or "",
        certificate_authority=certificate_authority or "",
        cfn_signal=CfnSignal(cfn_stack, cfn_resource, region or "") if cfn_stack else None,
        private_endpoint=bool(private_endpoint),
        proxy_credentials_parameter=proxy_credentials_parameter or "",
    )


# ------------------------------------------------------------------------------------ NO_PROXY


def no_proxy_entries(cfg: NodeConfig, vpc_cidrs: Sequence[str] = ()) -> tuple[str, ...]:
    """NO_PROXY in order, duplicates dropped; the node's user data adds the VPC CIDRs at boot."""
    partition = region_partitions().get(cfg.region, "aws-cn" if cfg.region.startswith("cn-") else "aws")
    dns = partition_dns_suffixes().get(partition, "amazonaws.com")  # c2s.ic.gov in us-iso-east-1, ...
    entries = [
        *vpc_cidrs,
        *cfg.service_cidrs,
        *LOCAL_NO_PROXY,
        *([CLUSTER_ENDPOINT.format(region=cfg.region, dns=dns)] if cfg.private_endpoint else []),
        *(host.format(region=cfg.region, dns=dns) for name in cfg.bypass for host in ENDPOINTS[name]),
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


def _derived_bootstrap_options(cfg: NodeConfig) -> list[str]:
    """bootstrap.sh options amibuild writes from its own flags (so --bootstrap-args may not)."""
    options = []
    if cfg.api_server_endpoint:
        options += ["--apiserver-endpoint", "--b64-cluster-ca"]
    if cfg.service_cidr and ipaddress.ip_network(cfg.service_cidr).version == 4:
        options.append("--dns-cluster-ip")
    if cfg.kubelet:
        options.append("--kubelet-extra-args")
    if cfg.kubelet.max_pods is not None:
        options.append("--use-max-pods")
    return options
