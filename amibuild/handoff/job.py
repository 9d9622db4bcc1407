"""The hand-off jobs: `rollout` (a stack or a managed node group to a channel's AMI) and `deploy`
(create or update a node group stack from amibuild's template). Each takes one frozen settings
value, made by `amibuild.cli.handoff` from the flags (every flag checked before any AWS call).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Mapping

from amibuild.aws import Aws, default_region
from amibuild.errors import AccessDenied, SpecError
from amibuild.handoff.cluster import ClusterFacts, node_access, read_cluster
from amibuild.handoff.nodegroup import (NODE_GROUP, DeployResult, check_ours, deploy as deploy_stack,
                                        stack_parameters, template_json)
from amibuild.handoff.rollout import DEFAULT_TIMEOUT, RolloutResult, rollout_nodegroup, rollout_stack
from amibuild.handoff.userdata.render import config_from_flags, render_userdata

Say = Callable[[str], None]

DEFAULT_NODE_OS = "al2023"  # without --os, --variant or an existing stack: what EKS publishes today


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
    limits = {"timeout": settings.timeout, "dry_run": settings.dry_run, "wait": settings.wait}
    if settings.stack:
        return rollout_stack(aws, settings.stack, region, channel_parameter=settings.channel_parameter, say=say,
                             **limits)
    assert settings.nodegroup is not None and settings.channel_parameter
    cluster, name = settings.nodegroup
    return rollout_nodegroup(aws, cluster, name, region, channel_parameter=settings.channel_parameter, say=say,
                             **limits)


@dataclass(frozen=True)
class DeploySettings:
    """One nodegroup-deploy: the stack's parameters as given, and what the nodes' user data needs."""

    profile: str | None
    region: str | None
    stack: str
    given: Mapping[str, str] = field(default_factory=dict)  # template parameter -> value
    channel_parameter: str | None = None
    node_os: str = ""  # --os ("": the variant's, else the stack's, else al2023)
    variant_os: str = ""
    proxy: str = ""
    no_proxy: tuple[str, ...] = ()
    service_cidr: str = ""
    private_endpoint: bool = False
    api_server_endpoint: str = ""
    certificate_authority: str = ""
    wait: bool = True
    timeout: float = DEFAULT_TIMEOUT
    dry_run: bool = False


def deploy(settings: DeploySettings, say: Say = lambda _: None) -> DeployResult:
    """Create or update the stack. The nodes' OS is --os, else the variant's, else the stack's,
    else al2023. al2023 nodes and --proxy get user data from `amibuild userdata`'s code, with the
    cluster's endpoint, CA, service CIDR and endpoint access read with DescribeCluster (flags when
    it cannot be read)."""
    s = settings
    given, stack = dict(s.given), s.stack
    aws, region = gateway(s.profile, s.region)
    found = aws.describe_stack(stack, region)
    origin = check_ours(aws, stack, region) if found is not None else None
    if found is None:  # what a create lacks, said before DescribeCluster and the user data
        stack_parameters({"NodeGroupName": stack, **given}, None)
        if not s.channel_parameter and not given.get("NodeImageId"):
            raise SpecError("creating a node group stack needs --variant (and --channel), or --parameter NodeImageId=AMI")
    previous = {key: p.value for key, p in found.parameters.items()} if found else {}
    # --os wins over the variant's, as a flag does over the pipeline file everywhere else.
    node_os = s.node_os or s.variant_os or str((origin or {}).get("os") or "") or DEFAULT_NODE_OS
    if origin is not None and origin.get("os") and origin.get("os") != node_os:
        say(f"stack {stack}: nodes move from {origin.get('os')} to {node_os} (the rolling update replaces them)")
    cluster = given.get("ClusterName") or previous.get("ClusterName", "")
    facts, unread = _cluster_facts(aws, cluster, region) if cluster else (None, "")
    user_data = None
    if node_os == "al2023" or s.proxy:
        al2023 = node_os == "al2023"
        endpoint = s.api_server_endpoint or (facts.endpoint if facts and al2023 else "")
        ca = s.certificate_authority or (facts.certificate_authority if facts and al2023 else "")
        cidr = s.service_cidr or (facts.service_cidr if facts else "")
        if al2023 and not (endpoint and ca and cidr):
            raise SpecError(
                f"al2023 nodes need cluster {cluster or '(--cluster)'}'s endpoint, CA and service CIDR, and "
                f"DescribeCluster in {region} gave none: give --api-server-endpoint, --certificate-authority "
                "and --service-cidr")
        if unread:
            say(f"{unread}; going by the flags")
        user_data = render_userdata(config_from_flags(
            cluster=cluster, os=node_os, proxy=s.proxy, no_proxy=s.no_proxy, service_cidr=cidr,
            region=region, api_server_endpoint=endpoint, certificate_authority=ca,
            # An update that does not give BootstrapArguments keeps the stack's: the user data too.
            bootstrap_args="" if al2023 else given.get("BootstrapArguments", previous.get("BootstrapArguments", "")),
            cfn_stack=stack, cfn_resource=NODE_GROUP,
            private_endpoint=s.private_endpoint or bool(facts and facts.private_endpoint),
        ))
    elif s.service_cidr or s.api_server_endpoint or s.certificate_authority:
        raise SpecError("--service-cidr, --api-server-endpoint and --certificate-authority go with al2023 nodes "
                        "or --proxy")
    result = deploy_stack(aws, stack, region, given=given, template_body=template_json(user_data, node_os=node_os),
                          channel_parameter=s.channel_parameter, say=say, wait=s.wait, timeout=s.timeout,
                          dry_run=s.dry_run)
    if s.dry_run:
        return result
    mode = facts.authentication_mode if facts else ""
    return replace(result, notes=(node_access(cluster, mode, stack=stack),))


def _cluster_facts(aws: Aws, cluster: str, region: str) -> tuple[ClusterFacts | None, str]:
    """(DescribeCluster's facts, "") or (None, why) when the cluster is not there or may not be read."""
    try:
        facts = read_cluster(aws, cluster, region)
    except AccessDenied as exc:
        return None, f"cluster {cluster}: cannot read it ({exc})"
    return facts, "" if facts is not None else f"cluster {cluster}: not found in {region}"
