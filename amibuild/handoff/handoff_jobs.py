"""The hand-off jobs, each one call taking one frozen settings value made by `amibuild.jobs.node_commands`
from the flags (every flag checked there, before any AWS call):

* `rollout(RolloutSettings)`: a stack or a managed node group to a channel's AMI;
* `deploy(DeploySettings)`: `nodegroup-deploy`, a node group stack created or updated from
  amibuild's template: reads the stack and the cluster, decides the nodes' OS and settings, writes
  the user data, sends the create or change set (or, dry run, shows it), and returns a frozen
  `DeployResult` whose `raise_for_status()` says whether the stack ended well;
* `stack_user_data` (`decode-userdata --stack`) and `userdata_cluster` (`userdata --cluster`): the
  user data a stack's template gives its nodes, and the cluster facts the flags left out;
* `node_role` and `create_node_access_entry` (`aws-auth`): a stack's node role, and its access entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping

from amibuild import redact, secrets
from amibuild.aws import Aws
from amibuild.errors import AccessDenied, AmibuildError, SpecError
from amibuild.handoff import node_settings
from amibuild.handoff.cfn_parts import Say
from amibuild.handoff.consumer import deploy_note
from amibuild.handoff.cluster import NODE_ACCESS_ENTRY_TYPE, ClusterFacts, NodeConfigFacts, node_access, read_cluster
from amibuild.handoff.nodegroup import (NEEDS_IMAGE, NODE_GROUP, PROXY_CREDENTIALS, DeployResult, check_ours, node_role_arn,
                                        stack_parameters, template_json)
from amibuild.handoff.nodegroup import deploy as deploy_stack
from amibuild.handoff.rollout import DEFAULT_TIMEOUT, RolloutRefused, RolloutResult, rollout_nodegroup, rollout_stack
from amibuild.handoff.userdata import decode as ud
from amibuild.handoff.userdata.render import check_role_arn, config_from_flags, render_userdata
from amibuild.pipeline.options import default_region
from amibuild.pipeline import proxy_credentials
from amibuild.pipeline.proxy_credentials import POLICY_NAME as PROXY_CREDENTIALS_POLICY


def gateway(profile: str | None, region: str | None) -> tuple[Aws, str]:
    """(Aws, region): `region`, else AWS_REGION / the profile's region, as the AWS CLI picks it."""
    region = region or default_region(profile)
    return Aws(profile=profile, region=region), region


@dataclass(frozen=True)
class RolloutSettings:
    """One rollout: a stack, or a managed node group (cluster, name), to a channel's parameter."""

    profile: str | None
    region: str | None
    stack: str | None = None
    nodegroup: tuple[str, str] | None = None
    channel_parameter: str | None = None  # None (a stack only): the parameter the stack names now
    dry_run: bool = False
    wait: bool = True
    timeout: float = DEFAULT_TIMEOUT


def rollout(settings: RolloutSettings, say: Say = lambda _: None) -> RolloutResult:
    aws, region = gateway(settings.profile, settings.region)
    how = {"channel_parameter": settings.channel_parameter, "say": say, "timeout": settings.timeout,
           "dry_run": settings.dry_run, "wait": settings.wait}
    if settings.stack:
        return rollout_stack(aws, settings.stack, region, **how)
    assert settings.nodegroup is not None and settings.channel_parameter
    cluster, name = settings.nodegroup
    return rollout_nodegroup(aws, cluster, name, region, **how)


# ------------------------------------------------------------------------------- nodegroup-deploy

DEFAULT_NODE_OS = "al2023"  # without --os, --variant or an existing stack: what EKS publishes today


@dataclass(frozen=True)
class DeploySettings:
    """One `nodegroup-deploy`, its flags checked: the stack, the parameters given (by their own flags
    and --parameter), the node settings asked for (`node_settings.Asked`), the cluster facts given
    instead of read, and the nodes' OS as the flags and the variant say it."""

    profile: str | None
    region: str | None
    stack: str
    given: Mapping[str, str] = field(default_factory=dict)  # template parameter -> value
    asked: node_settings.Asked = field(default_factory=node_settings.Asked)
    channel_parameter: str | None = None  # the variant's channel: NodeImageIdSSMParam
    os: str = ""  # --os ("" : not given)
    variant_os: str = ""  # the OS of --variant ("" : no variant)
    variant_credentials_parameter: str = ""  # the variant's proxy { credentials_parameter } ("" : none)
    private_endpoint: bool = False
    api_server_endpoint: str = ""
    certificate_authority: str = ""
    service_cidr: str = ""
    wait: bool = True
    timeout: float = DEFAULT_TIMEOUT
    dry_run: bool = False


def deploy(settings: DeploySettings, say: Say = lambda _: None) -> DeployResult:
    """`amibuild nodegroup-deploy`: the stack's parameters are the ones given over the stack's own.
    The nodes' OS is --os, else the variant's, else the stack's, else al2023. The node settings
    (proxy, kubelet flags, labels, taints, max pods) are the stack's, changed by the flags given
    (`node_settings`); al2023 nodes and al2 nodes with any setting get user data from `amibuild
    userdata`'s code, with the cluster's endpoint, CA, service CIDR and endpoint access read with
    DescribeCluster (the settings' values when it cannot be read)."""
    stack, given = settings.stack, dict(settings.given)
    aws, region = gateway(settings.profile, settings.region)
    found = aws.describe_stack(stack, region)
    origin = check_ours(aws, stack, region) if found is not None else None
    if found is None:  # what a create lacks, said before DescribeCluster and the user data
        stack_parameters({"NodeGroupName": stack, **given}, None)
        if not settings.channel_parameter and not given.get("NodeImageId"):
            raise SpecError(NEEDS_IMAGE)
    previous = {key: p.value for key, p in found.parameters.items()} if found else {}
    node_os = settings.os or settings.variant_os or str((origin or {}).get("os") or "") or DEFAULT_NODE_OS
    if origin is not None and origin.get("os") and origin.get("os") != node_os:
        say(f"stack {stack}: nodes move from {origin.get('os')} to {node_os} (the rolling update replaces them)")
    nodes = settings.asked.merge(previous)
    # the variant's proxy { credentials_parameter }, for a proxy without user:password of its own (unless the
    # flag removed the stack's: `--proxy-credentials-parameter none`)
    if settings.asked.proxy_credentials_parameter is None:
        nodes = replace(nodes, proxy_credentials_parameter=proxy_credentials.for_proxy(
            nodes.proxy, nodes.proxy_credentials_parameter, settings.variant_credentials_parameter))
    if nodes.proxy_credentials_parameter and secrets.credentials(nodes.proxy):
        raise SpecError(f"--proxy-credentials-parameter {nodes.proxy_credentials_parameter}: the nodes' proxy "
                        f"{secrets.mask(nodes.proxy)} carries credentials already; give --proxy without "
                        "user:password@ (the nodes read them from the parameter)")
    stack_proxy, proxy_in_data, hidden = proxy_credentials_parameter(nodes.proxy, say)
    nodes = replace(nodes, proxy=stack_proxy)  # HttpProxy holds the URL masked
    if settings.private_endpoint and not nodes.proxy:
        raise SpecError("--private-endpoint goes with --proxy (the stack has no proxy)")
    bootstrap_args = given.get(node_settings.BOOTSTRAP, previous.get(node_settings.BOOTSTRAP, ""))
    if node_os == "al2023":
        if given.get(node_settings.BOOTSTRAP):  # the flags did not say al2023: the stack or the default did
            raise bootstrap_on_al2023()
        # bootstrap.sh's arguments mean nothing to nodeadm: the update says it drops them.
        given[node_settings.BOOTSTRAP] = ""
        bootstrap_args = ""
    given.update(nodes.to_parameters())
    cluster = given.get("ClusterName") or previous.get("ClusterName", "")
    facts, unread = _cluster_facts(aws, cluster, region) if cluster else (None, "")
    user_data = None
    if node_os == "al2023" or nodes.proxy or nodes.kubelet:
        al2023 = node_os == "al2023"
        endpoint = settings.api_server_endpoint or (facts.endpoint if facts and al2023 else "")
        ca = settings.certificate_authority or (facts.certificate_authority if facts and al2023 else "")
        cidr = settings.service_cidr or (facts.service_cidr if facts else "")
        if al2023 and not (endpoint and ca and cidr):
            raise SpecError(
                f"al2023 nodes need cluster {cluster or '(--cluster)'}'s endpoint, CA and service CIDR, and "
                f"DescribeCluster in {region} gave none: give --api-server-endpoint, --certificate-authority "
                "and --service-cidr")
        if unread:
            say(f"{unread}; going by the flags")
        cfg = config_from_flags(
            cluster=cluster, os=node_os, proxy=proxy_in_data, no_proxy=nodes.no_proxy, service_cidr=cidr,
            region=region, api_server_endpoint=endpoint, certificate_authority=ca,
            # An update that does not give BootstrapArguments keeps the stack's: the user data too.
            bootstrap_args=bootstrap_args, cfn_stack=stack, cfn_resource=NODE_GROUP,
            private_endpoint=settings.private_endpoint or bool(facts and facts.private_endpoint),
            kubelet=nodes.kubelet, proxy_credentials_parameter=nodes.proxy_credentials_parameter,
        )
        user_data = render_userdata(cfg).replace(_CREDENTIALS_MARK, "${" + PROXY_CREDENTIALS + "}")
    elif settings.service_cidr or settings.api_server_endpoint or settings.certificate_authority:
        raise SpecError("--service-cidr, --api-server-endpoint and --certificate-authority go with al2023 nodes, "
                        "--proxy or kubelet settings")
    note = deploy_note(aws, region, given.get("NodeImageId", ""), settings.channel_parameter or "")
    if note:  # a warning, never a refusal: the account's settings may change before the nodes launch
        say(note)
    result = deploy_stack(aws, stack, region, given={**given, **hidden},
                          template_body=template_json(user_data, node_os=node_os, hidden=hidden,
                                                      proxy_credentials_parameter=nodes.proxy_credentials_parameter),
                          channel_parameter=settings.channel_parameter, say=say, wait=settings.wait,
                          timeout=settings.timeout, dry_run=settings.dry_run)
    if nodes.proxy_credentials_parameter:
        say(f"proxy {nodes.proxy}: the nodes {'would read' if settings.dry_run else 'read'} its credentials at boot "
            f"from SSM parameter {nodes.proxy_credentials_parameter} (a SecureString holding user:password); the node "
            f"role's policy {PROXY_CREDENTIALS_POLICY} allows ssm:GetParameter on it and kms:Decrypt through SSM")
    if settings.dry_run or result.error:  # nothing sent, or the stack did not end well: no access to set up
        return result
    return replace(result, notes=(node_access(cluster, facts.authentication_mode if facts else "", stack=stack),))


# stands for the proxy's user:password while the user data is written; letters and digits only, so
# every quoting the user data applies (shell, systemd, YAML) leaves it as it is
_CREDENTIALS_MARK = "AMIBUILDPROXYCREDENTIALS7f3a"


def proxy_credentials_parameter(proxy: str, say: Say) -> tuple[str, str, dict[str, str | None]]:
    """(the proxy URL for the stack's HttpProxy parameter, the URL for the user data, {NoEcho
    parameter: value}) — credentials in the proxy URL go to the stack as its NoEcho
    `PROXY_CREDENTIALS` parameter, never into the template body or another parameter. HttpProxy
    keeps the URL masked (user:***@), which tells the next deploy that the stack holds them: it
    then keeps the parameter's value (None: UsePreviousValue), which it cannot read back."""
    credentials = secrets.credentials(proxy)
    if not credentials:
        return proxy, proxy, {}
    in_data = proxy.replace(credentials + "@", _CREDENTIALS_MARK + "@", 1)
    kept = credentials.endswith(secrets.MASK)  # the stack's own HttpProxy, as a previous deploy masked it
    if not kept:
        if "%" in credentials:
            # the systemd drop-ins double every '%' of the URL; one parameter cannot hold both forms
            raise SpecError(f"--proxy {secrets.mask(proxy)}: percent-encoded credentials cannot be passed to the "
                            "stack; give the proxy a password of letters, digits and - . _ ~ ! $ & * + , ; =")
        for word in secrets.words(proxy):
            redact.add_secret(word, min_length=secrets.MIN_WORD)  # --debug logs the CreateStack request
    say(f"proxy {secrets.mask(proxy)}: its credentials go to the stack as the NoEcho parameter "
        f"{PROXY_CREDENTIALS}{' (kept as it is)' if kept else ''}, not in the template; the nodes' user data still "
        "carries them (anyone allowed ec2:DescribeLaunchTemplateVersions or ec2:DescribeInstanceAttribute can read "
        "them): prefer a proxy that authenticates the nodes without a password")
    return secrets.mask(proxy), in_data, {PROXY_CREDENTIALS: None if kept else credentials}


def bootstrap_on_al2023() -> SpecError:
    return SpecError("--parameter BootstrapArguments is for al2's bootstrap.sh; al2023 nodes (nodeadm) do not read "
                     "it: give --kubelet-flag, --node-label, --taint or --max-pods")


def _cluster_facts(aws: Aws, cluster: str, region: str) -> tuple[ClusterFacts | None, str]:
    """(DescribeCluster's facts, "") or (None, why) when the cluster is not there or may not be read."""
    try:
        facts = read_cluster(aws, cluster, region)
    except AccessDenied as exc:
        return None, f"cluster {cluster}: cannot read it ({exc})"
    return facts, "" if facts is not None else f"cluster {cluster}: not found in {region}"


# ------------------------------------------------------------------------------- user data


def stack_user_data(profile: str | None, *, stack: str, region: str | None, budget: ud.Budget | None = None) -> list:
    """`amibuild decode-userdata --stack`: the user data of the stack's template, its references
    filled in with the stack's parameters and pseudo parameters."""
    aws, region = gateway(profile, region)
    found = aws.describe_stack(stack, region)
    if found is None:
        raise RolloutRefused(f"stack {stack} does not exist in {region}")
    references = ud.stack_references({key: p.value for key, p in found.parameters.items()}, stack=stack,
                                     region=region)
    return ud.decode(aws.stack_template(stack, region).encode(), f"stack {stack}", references, budget)


def userdata_cluster(*, cluster: str, os_: str, region: str, api_server_endpoint: str, certificate_authority: str,
                     service_cidr: str, private_endpoint: bool, k8s_manifests: bool = False) -> NodeConfigFacts:
    """`amibuild userdata --cluster C`: al2023's endpoint, CA and service CIDR as given, the
    missing ones read with DescribeCluster, as nodegroup-deploy reads them; when the cluster cannot
    be read (no credentials, no answer, no right), the flags alone and a note why."""
    given = NodeConfigFacts(api_server_endpoint, certificate_authority, service_cidr, private_endpoint)
    # (an endpoint without a CA, or the other way round: config_from_flags names the pair)
    if not cluster or os_ != "al2023" or k8s_manifests or bool(api_server_endpoint) != bool(certificate_authority):
        return given
    if api_server_endpoint and certificate_authority and service_cidr:  # nothing to read
        return given
    try:
        aws, where = gateway(None, region or None)
        facts = read_cluster(aws, cluster, where)
    except AmibuildError as exc:
        return replace(given, note=f"cluster {cluster}: not read with DescribeCluster ({exc})")
    if facts is None:
        return replace(given, note=f"cluster {cluster}: DescribeCluster found no such cluster in {where}")
    return NodeConfigFacts(api_server_endpoint or facts.endpoint, certificate_authority or facts.certificate_authority,
                           service_cidr or facts.service_cidr, private_endpoint or facts.private_endpoint)


def node_role(profile: str | None, stack: str, region: str | None) -> str:
    """The nodes' role: the NodeInstanceRole output of `stack`."""
    aws, region = gateway(profile, region)
    return node_role_arn(aws, stack, region)


def create_node_access_entry(profile: str | None, *, role_arn: str, stack: str, region: str | None,
                             cluster: str) -> str:
    """The nodes' EKS access entry in `cluster` (for `role_arn`, else `stack`'s node role) created if it
    is not there: the line that says which."""
    aws, region = gateway(profile, region)
    arn = check_role_arn(role_arn or node_role_arn(aws, stack, region))
    there = aws.create_access_entry(cluster, arn, region, entry_type=NODE_ACCESS_ENTRY_TYPE)
    if there and there != NODE_ACCESS_ENTRY_TYPE:  # EKS cannot change an entry's type
        raise RolloutRefused(f"cluster {cluster} ({region}) has an access entry for {arn} of type {there}, not "
                             f"{NODE_ACCESS_ENTRY_TYPE}: nodes cannot join with it. Delete it (aws eks delete-access-entry "
                             f"--cluster-name {cluster} --principal-arn {arn} --region {region}) and run this again")
    what = "already there" if there else "created"
    return f"access entry for {arn} in cluster {cluster} ({region}): {what} (type {NODE_ACCESS_ENTRY_TYPE})\n"
