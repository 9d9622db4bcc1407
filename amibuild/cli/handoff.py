"""Node group hand-off from the command line: task flags → typed calls of `amibuild.handoff`
(rollout: flags → `handoff.job.RolloutSettings`; nodegroup-deploy: flags → `handoff.job.DeploySettings`;
aws-auth: --role-arn or --stack, and --access-entry --cluster).

Flags are known here only; `amibuild.handoff` takes stacks, regions and parameter names.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Iterable, Mapping

from amibuild.aws import Aws
from amibuild.channels import known, publish
from amibuild import values
from amibuild.errors import SpecError
from amibuild.handoff import handoff_jobs as job
from amibuild.handoff import node_settings
from amibuild.handoff.cluster import NODE_ACCESS_ENTRY_TYPE
from amibuild.handoff.nodegroup import NODE_OSES, parse_parameters
from amibuild.handoff.rollout import DEFAULT_TIMEOUT
from amibuild.handoff.userdata.bootstrap_sh import check_bootstrap_words
from amibuild.handoff.userdata.render import aws_auth_entry, check_proxy_url, check_role_arn
from amibuild.pipeline.options import load_pipeline


def channel_parameter(options: Any, variant: str | None, channel: str | None) -> str | None:
    """The SSM parameter of a variant's channel (default recommended); None without --variant."""
    if not variant:
        if channel:
            raise SpecError(f"--channel {channel} needs --variant: the parameter name comes from both")
        return None
    pipeline = load_pipeline(options)
    if channel:  # a typo would roll the nodes onto a channel nobody gates
        known.require(Aws(profile=options.profile, region=pipeline.build_region), pipeline, pipeline.variants[:1],
                      known.Asked(channel))
    return publish.parameter_name(pipeline, pipeline.variants[0], channel or publish.DEFAULT_CHANNEL)


def seconds(value: Any) -> float:
    """--timeout as seconds (default `DEFAULT_TIMEOUT`)."""
    return values.optional_duration(value, "--timeout", example="3600, 30m or 2h") or DEFAULT_TIMEOUT


def rollout_settings(options: Any, *, stack: str | None, nodegroup: str | None, variant: str | None,
                     channel: str | None, region: str | None, dry_run: bool = False, wait: bool = True,
                     timeout: float | None = None) -> job.RolloutSettings:
    """`amibuild rollout`'s flags (--stack NAME or --nodegroup CLUSTER/NAME) as settings; bad input refused."""
    if bool(stack) == bool(nodegroup):
        raise SpecError("rollout: give --stack NAME or --nodegroup CLUSTER/NAME (one of them)")
    wait_for = seconds(timeout)
    cluster, _, name = (nodegroup or "").partition("/")
    if nodegroup and (not cluster or not name or "/" in name):
        raise SpecError(f"--nodegroup {nodegroup!r}: write CLUSTER/NAME, e.g. prod/ng-managed")
    parameter = channel_parameter(options, variant, channel)  # after the pure checks: it may ask AWS
    if not stack and not parameter:
        raise SpecError("--nodegroup needs --variant (and --channel): a managed node group follows no parameter")
    rolled = {"stack": stack} if stack else {"nodegroup": (cluster, name)}
    return job.RolloutSettings(options.profile, region, **rolled, channel_parameter=parameter, dry_run=dry_run,
                               wait=wait, timeout=wait_for)


def deploy_settings(options: Any, *, stack: str | None, region: str | None, variant: str | None,
                    channel: str | None, flags: Mapping[str, str | None], subnets: Iterable[str],
                    parameters: Iterable[str], proxy: str, no_proxy: Iterable[str], service_cidr: str,
                    wait: bool = True, timeout: float | None = None, os_: str = "", private_endpoint: bool = False,
                    api_server_endpoint: str = "", certificate_authority: str = "",
                    kubelet_flags: Iterable[str] = (), node_labels: Iterable[str] = (), taints: Iterable[str] = (),
                    max_pods: str | None = None, dry_run: bool = False,
                    credentials_parameter: str = "", max_pods_expression: str = "") -> job.DeploySettings:
    """`amibuild nodegroup-deploy`'s flags as settings, every flag checked before any AWS call: flags
    (parameter name -> value) and --parameter KEY=VALUE become the stack's parameters, the node
    setting flags `node_settings.Asked`, --variant its channel's parameter and its OS."""
    if not stack:
        raise SpecError("nodegroup-deploy: --stack NAME is required")
    wait_for = seconds(timeout)
    if os_ and os_ not in NODE_OSES:
        raise SpecError(f"--os {os_!r}: choose one of {', '.join(NODE_OSES)}")
    given = parse_parameters(parameters)
    own = sorted(set(given) & set(node_settings.PARAMETERS))
    if own:
        raise SpecError(f"--parameter {own[0]}: set it with {node_settings.PARAMETERS[own[0]]} (amibuild writes "
                        "the user data from it)")
    named = {**{key: value for key, value in flags.items() if value},
             "Subnets": ",".join(s for value in subnets for s in value.split(",") if s)}
    for key, value in named.items():
        if value and key in given:
            raise SpecError(f"{key} is set twice: by its own flag and by --parameter")
    given.update({key: value for key, value in named.items() if value})
    asked = node_settings.Asked.parse(proxy=proxy, no_proxy=no_proxy, kubelet_flags=kubelet_flags,
                                      labels=node_labels, taints=taints, max_pods=max_pods,
                                      proxy_credentials_parameter=credentials_parameter,
                                      max_pods_expression=max_pods_expression)
    if asked.proxy:
        check_proxy_url(asked.proxy)
    if private_endpoint and not (asked.proxy or asked.proxy is None):
        raise SpecError("--private-endpoint goes with --proxy")
    parameter = channel_parameter(options, variant, channel)
    chosen = load_pipeline(options).variants[0] if variant else None
    # --os wins over the variant's, as a flag does over the pipeline file everywhere else.
    variant_os = chosen.os if chosen else ""
    # the variant's proxy { credentials_parameter }: where its nodes read the proxy's user:password
    variant_parameter = chosen.proxy.credentials_parameter if chosen else ""
    if asked.max_pods_expression and (os_ or variant_os) == "al2":
        raise SpecError("--max-pods-expression is nodeadm's (al2023); al2's bootstrap.sh takes a fixed --max-pods N")
    if given.get(node_settings.BOOTSTRAP) and (os_ or variant_os) == "al2023":
        raise job.bootstrap_on_al2023()
    if given.get(node_settings.BOOTSTRAP) and (os_ or variant_os) != "al2023":
        check_bootstrap_words(job.bootstrap_words(given[node_settings.BOOTSTRAP]), "--parameter BootstrapArguments")
    return job.DeploySettings(
        options.profile, region, stack, given=MappingProxyType(given), asked=asked, channel_parameter=parameter,
        os=os_, variant_os=variant_os, private_endpoint=private_endpoint, api_server_endpoint=api_server_endpoint,
        certificate_authority=certificate_authority, service_cidr=service_cidr, wait=wait, timeout=wait_for,
        dry_run=dry_run, variant_credentials_parameter=variant_parameter)


def node_access_from_flags(options: Any, *, role_arn: str, stack: str, region: str | None, access_entry: bool,
                           cluster: str) -> str:
    """`amibuild aws-auth`: the aws-auth mapRoles entry, and the access entry that does the same
    today (printed as a command; created with --access-entry --cluster)."""
    if bool(role_arn) == bool(stack):
        raise SpecError("aws-auth: give --role-arn ARN or --stack NAME (one of them)")
    if cluster and not access_entry:
        raise SpecError("--cluster goes with --access-entry")
    if access_entry and not cluster:
        raise SpecError("--access-entry needs --cluster NAME: the cluster to create the entry in")
    if role_arn:
        check_role_arn(role_arn)  # refuse a bad ARN before any AWS call
    if access_entry:
        return job.create_node_access_entry(options.profile, role_arn=role_arn, stack=stack, region=region,
                                            cluster=cluster)
    role = role_arn or job.node_role(options.profile, stack, region)
    entry, arn = aws_auth_entry(role), check_role_arn(role)
    return entry + (  # the access-entry way, as comment lines after the aws-auth entry
        "# Clusters with access entries (authentication mode API or API_AND_CONFIG_MAP) need no aws-auth\n"
        f"# entry: `amibuild aws-auth --role-arn {arn} --access-entry --cluster CLUSTER` creates one, as does\n"
        f"# aws eks create-access-entry --cluster-name CLUSTER --principal-arn {arn} --type {NODE_ACCESS_ENTRY_TYPE}\n")
