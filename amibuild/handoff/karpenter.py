"""The Karpenter hand-off: an EC2NodeClass (``karpenter.k8s.aws/v1``) that follows a channel.

Karpenter (v1.4 and later) reads an ``amiSelectorTerms`` entry ``ssmParameter: NAME`` itself and
caches custom parameters for 5 minutes: after `amibuild promote` writes a new AMI into the channel,
the node class's AMI changes, Karpenter sees its nodes as drifted and replaces them, as fast as the
node pools' disruption budgets allow. So the hand-off is a manifest, not an API call: it goes to
``kubectl apply -f -`` or a GitOps repository, once; promotes do the rest.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from amibuild import tags
from amibuild.errors import SpecError
from amibuild.handoff.userdata import render
from amibuild.handoff.userdata.config import vpc_cidrs
from amibuild.handoff.userdata.kubelet import nodeconfig_part, proxy_environment
from amibuild.pipeline import iam_names, proxy_credentials
from amibuild.pipeline.imagetests import check_cluster

API_VERSION = "karpenter.k8s.aws/v1"
DISCOVERY_TAG = "karpenter.sh/discovery"
FAMILIES = {"al2023": "AL2023", "al2": "AL2"}


@dataclass(frozen=True)
class NodeSettings:
    """What amibuild manages on a node beyond the image: a proxy, extra kubelet flags."""

    proxy: str = ""
    no_proxy: tuple[str, ...] = ()
    kubelet_flags: tuple[str, ...] = ()
    vpc_cidrs: tuple[str, ...] = ()  # for NO_PROXY: a node under Karpenter reads nothing at boot first
    service_cidr: str | None = None
    region: str = ""
    # An SSM SecureString (user:password) the nodes' boothook reads at boot; Karpenter's node role must
    # be allowed to read it (`credentials_note`).
    proxy_credentials_parameter: str = ""


def credentials_note(parameter: str) -> str:
    """What the node role needs for a credentials parameter, in the words of the node group stack's policy."""
    return (f"the node role must be allowed ssm:GetParameter on SSM parameter {parameter} (and kms:Decrypt "
            f"through SSM for its key): the statements {proxy_credentials.STATEMENT_SID} and "
            f"{proxy_credentials.STATEMENT_SID}Decrypt of the policy {proxy_credentials.POLICY_NAME} that "
            "`amibuild nodegroup-deploy` gives its node role")


def node_userdata(os_family: str, cluster: str, settings: NodeSettings) -> str | None:
    """The user data Karpenter merges for `os_family`, carrying `settings`; None when there is nothing."""
    cidrs = vpc_cidrs(settings.vpc_cidrs)
    # amibuild's checked node configuration (proxy URL, NO_PROXY entries, kubelet flags)
    cfg = render.NodeConfig(cluster_name=cluster, os="al2", proxy=settings.proxy, no_proxy=settings.no_proxy,
                            kubelet_flags=settings.kubelet_flags, service_cidr=settings.service_cidr,
                            region=settings.region, proxy_credentials_parameter=settings.proxy_credentials_parameter)
    if os_family == "al2":
        if settings.kubelet_flags:
            raise SpecError("--kubelet-flag: Karpenter writes the bootstrap.sh call of AL2 nodes itself; set kubelet "
                            "settings in the EC2NodeClass's spec.kubelet, or use an al2023 variant")
        return render.multipart([("text/cloud-boothook", render.proxy_boothook(cfg))]) if settings.proxy else None
    # the NodeConfig pieces amibuild's own AL2023 user data is made of (kubelet settings, proxy
    # environment), without the cluster part Karpenter writes itself
    parts: list[tuple[str, str]] = []
    spec: dict[str, Any] = {}
    if settings.proxy_credentials_parameter:
        # the proxy needs credentials only the boothook reads at boot: it writes the drop-ins nodeadm's
        # units and the services read, and the NodeConfig carries no proxy of its own
        parts.append(("text/cloud-boothook", render.proxy_boothook(cfg, node_os="al2023")))
    elif settings.proxy:
        entries = render.no_proxy_entries(cfg, cidrs)
        spec["instance"] = {"environment": proxy_environment(settings.proxy, entries)}
    if cfg.kubelet:
        spec["kubelet"] = cfg.kubelet.nodeadm_kubelet()
    if spec:
        parts.append(("application/node.eks.aws", nodeconfig_part(spec)))
    return render.multipart(parts) if parts else None


def node_class(*, name: str, parameter: str, region: str, os_family: str, cluster: str, pipeline: str, variant: str,
               channel: str, role: str = "", instance_profile: str = "", discovery: str = "",
               settings: NodeSettings = NodeSettings()) -> dict[str, Any]:
    """The EC2NodeClass that follows `parameter` (the channel's SSM parameter in `region`). Pure."""
    if os_family not in FAMILIES:
        raise SpecError(f"variant {variant!r}: Karpenter node classes are for al2023 and al2 variants, not {os_family!r}")
    if role and instance_profile:
        raise SpecError("--role and --instance-profile: give one of them (Karpenter takes one)")
    check_cluster(cluster, "--cluster")  # it reaches the role, the selectors and the user data
    if role:
        iam_names.role(role, "--role")
    elif instance_profile:
        iam_names.instance_profile(instance_profile, "--instance-profile")
    else:
        role = iam_names.role(f"KarpenterNodeRole-{cluster}", f"--cluster {cluster}: the default role")
    discovery = iam_names.discovery(discovery or cluster,
                                    "--discovery" if discovery else f"--cluster {cluster}: the default --discovery value")
    spec: dict[str, Any] = {
        "amiFamily": FAMILIES[os_family],
        "amiSelectorTerms": [{"ssmParameter": parameter}],
        **({"role": role} if role else {"instanceProfile": instance_profile}),
        "subnetSelectorTerms": [{"tags": {DISCOVERY_TAG: discovery}}],
        "securityGroupSelectorTerms": [{"tags": {DISCOVERY_TAG: discovery}}],
        "metadataOptions": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled",
                            "httpPutResponseHopLimit": 1, "httpTokens": "required"},
        "tags": {tags.PIPELINE: pipeline, tags.VARIANT: variant, tags.CHANNEL: channel},
    }
    userdata = node_userdata(os_family, cluster, settings)
    if userdata is not None:
        spec["userData"] = userdata
    notes = {"amibuild/proxy-credentials": credentials_note(settings.proxy_credentials_parameter)} \
        if settings.proxy_credentials_parameter else {}
    return {
        "apiVersion": API_VERSION,
        "kind": "EC2NodeClass",
        "metadata": {"name": name, "annotations": {
            "amibuild/channel-parameter": parameter, "amibuild/region": region,
            "amibuild/note": "follows the channel: a promote is drift, and Karpenter replaces the nodes", **notes}},
        "spec": spec,
    }


def cluster_default_note(manifest: dict[str, Any], *, role: bool, discovery: bool) -> str:
    """The line that says which cluster a node class without --cluster took (the pipeline's name) and what it set."""
    cluster = manifest["spec"]["tags"][tags.PIPELINE]
    what = [*([] if role else [f"the role {manifest['spec']['role']}"]),
            *([] if discovery else [f"the {DISCOVERY_TAG} selectors {cluster}"])]
    return (f"karpenter: no --cluster: took the pipeline's name, {cluster}, as the cluster"
            + (f" ({' and '.join(what)})" if what else "") + "; give --cluster NAME if yours is another")


def to_yaml(manifest: dict[str, Any]) -> str:
    """The manifest as YAML for ``kubectl apply -f -``; multi-line user data as a literal block."""

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True  # the two selectors hold equal terms: write both out, no &anchor / *alias

    def text(dumper: yaml.SafeDumper, value: str) -> Any:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return yaml.dump(manifest, Dumper=Dumper, sort_keys=False, default_flow_style=False, width=1 << 16)


def check_name(name: str) -> str:
    """A Kubernetes object name (RFC 1123 subdomain), as the manifest's metadata.name."""
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", name or ""):
        raise SpecError(f"--name {name!r}: lower-case letters, digits, '-' and '.', starting and ending with a "
                        "letter or digit, e.g. ceph-stable")
    return name


def max_pods_expression_refused() -> SpecError:
    """Why `karpenter --max-pods-expression` is refused: Karpenter's own fixed maxPods would win over it."""
    return SpecError("--max-pods-expression: Karpenter's own NodeConfig sets kubelet maxPods (the capacity it "
                     "schedules by), and nodeadm lets that fixed value win over the expression, so it would never "
                     "apply; set the EC2NodeClass's spec.kubelet.maxPods or podsPerCore instead")
