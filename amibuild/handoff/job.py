"""The rollout job: a stack or a managed node group to a channel's AMI, one call taking one frozen
`RolloutSettings`, made by `amibuild.cli.handoff` from the flags (every flag checked before any AWS
call). (nodegroup-deploy is still carried out by `amibuild.cli.handoff.deploy_from_flags`.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from amibuild.aws import Aws, default_region
from amibuild.handoff.rollout import DEFAULT_TIMEOUT, RolloutResult, rollout_nodegroup, rollout_stack

Say = Callable[[str], None]

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
