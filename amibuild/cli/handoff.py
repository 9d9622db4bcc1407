"""Node group hand-off from the command line: task flags → typed calls of `amibuild.handoff`.

Flags are known here only; `amibuild.handoff` takes stacks, regions and parameter names.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from amibuild.aws import Aws, default_region
from amibuild.channels import publish
from amibuild.cli.commands import load_pipeline
from amibuild.errors import SpecError
from amibuild.handoff.nodegroup import (NODE_GROUP, DeployResult, deploy, node_role_arn, parse_parameters,
                                        template_json)
from amibuild.handoff.rollout import DEFAULT_TIMEOUT, RolloutResult, Say, rollout_nodegroup, rollout_stack


def gateway(options: Any, region: str | None) -> tuple[Aws, str]:
    """(Aws, region): `region`, else AWS_REGION / the profile's region, as the AWS CLI picks it."""
    region = region or default_region(options.profile)
    return Aws(profile=options.profile, region=region), region


def channel_parameter(options: Any, variant: str | None, channel: str | None) -> str | None:
    """The SSM parameter of a variant's channel (default recommended); None without --variant."""
    if not variant:
        if channel:
            raise SpecError(f"--channel {channel} needs --variant: the parameter name comes from both")
        return None
    pipeline = load_pipeline(options)
    return publish.parameter_name(pipeline, pipeline.variants[0], channel or publish.DEFAULT_CHANNEL)


def seconds(value: Any) -> float:
    """--timeout as seconds (default `DEFAULT_TIMEOUT`)."""
    from amibuild.cli import values

    return values.optional_duration(value, "--timeout", example="3600, 30m or 2h") or DEFAULT_TIMEOUT


def rollout(options: Any, *, stack: str | None, nodegroup: str | None, variant: str | None, channel: str | None,
        region: str | None, say: Say, dry_run: bool = False, wait: bool = True,
        timeout: float | None = None) -> RolloutResult:
    """`invoke rollout`: --stack NAME or --nodegroup CLUSTER/NAME."""
    if bool(stack) == bool(nodegroup):
        raise SpecError("rollout: give --stack NAME or --nodegroup CLUSTER/NAME (one of them)")
    parameter = channel_parameter(options, variant, channel)
    limits = {"timeout": seconds(timeout), "dry_run": dry_run, "wait": wait}
    if stack:
        aws, region = gateway(options, region)
        return rollout_stack(aws, stack, region, channel_parameter=parameter, say=say, **limits)
    cluster, _, name = (nodegroup or "").partition("/")
    if not cluster or not name or "/" in name:
        raise SpecError(f"--nodegroup {nodegroup!r}: write CLUSTER/NAME, e.g. prod/ng-managed")
    if not parameter:
        raise SpecError("--nodegroup needs --variant (and --channel): a managed node group follows no parameter")
    aws, region = gateway(options, region)
    return rollout_nodegroup(aws, cluster, name, region, channel_parameter=parameter, say=say, **limits)


def deploy_from_flags(options: Any, *, stack: str, region: str | None, variant: str | None, channel: str | None,
                      flags: Mapping[str, str], subnets: Iterable[str], parameters: Iterable[str],
                      proxy: str, no_proxy: Iterable[str], service_cidr: str, say: Callable[[str], None],
                      wait: bool = True, timeout: float | None = None) -> DeployResult:
    """`invoke nodegroup-deploy`: flags (parameter name -> value) and --parameter KEY=VALUE become the
    stack's parameters; --proxy makes the nodes' user data from `invoke userdata`'s code."""
    if not stack:
        raise SpecError("nodegroup-deploy: --stack NAME is required")
    given = parse_parameters(parameters)
    named = {**{key: value for key, value in flags.items() if value},
             "Subnets": ",".join(s for value in subnets for s in value.split(",") if s)}
    for key, value in named.items():
        if value and key in given:
            raise SpecError(f"{key} is set twice: by its own flag and by --parameter")
    given.update({key: value for key, value in named.items() if value})
    aws, region = gateway(options, region)
    user_data = None
    if proxy:
        from amibuild.handoff.userdata.render import config_from_flags, render_userdata

        user_data = render_userdata(config_from_flags(
            cluster=given.get("ClusterName", ""), proxy=proxy, no_proxy=tuple(no_proxy), service_cidr=service_cidr,
            region=region, bootstrap_args=given.get("BootstrapArguments", ""), cfn_stack=stack,
            cfn_resource=NODE_GROUP,
        ))
    elif tuple(no_proxy) or service_cidr:
        raise SpecError("--no-proxy and --service-cidr go with --proxy")
    return deploy(aws, stack, region, given=given, template_body=template_json(user_data),
                  channel_parameter=channel_parameter(options, variant, channel), say=say, wait=wait,
                  timeout=seconds(timeout))


def node_role(options: Any, *, role_arn: str, stack: str, region: str | None) -> str:
    """`invoke aws-auth`: the role ARN given, or the NodeInstanceRole output of `stack`."""
    if bool(role_arn) == bool(stack):
        raise SpecError("aws-auth: give --role-arn ARN or --stack NAME (one of them)")
    if role_arn:
        return role_arn
    aws, region = gateway(options, region)
    return node_role_arn(aws, stack, region)
