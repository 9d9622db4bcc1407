"""Roll node groups to a channel's AMI: a node group stack (CloudFormation) or an EKS managed node group.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping, Sequence

from amibuild.aws import Aws
from amibuild.aws.handoff_results import (AutoScalingGroup, LaunchTemplateRef, LaunchTemplateVersion, Stack,
                                          StackParameter, StackResource)
from amibuild.errors import AmibuildError, Interrupted, NotFound, RolloutBlocked, RolloutFailed, RolloutRefused
from amibuild.handoff.cfn_parts import (Say, StackState, execute_change_set, make_change_set, nodegroup_state,
                                  parse_template, stack_state, update_policy_line)
from amibuild.poll import until

SSM_PARAMETER = "NodeImageIdSSMParam"
IMAGE_ID = "NodeImageId"
GROUP_TYPE = "AWS::AutoScaling::AutoScalingGroup"
STACK_POLL, NODEGROUP_POLL = 5.0, 15.0  # seconds between reads while waiting
DEFAULT_TIMEOUT = 7200.0  # a rolling update waits up to PauseTime per batch of nodes


class RolloutAction(enum.StrEnum):
    ALREADY_CURRENT = "already current"
    UPDATE_PARAMETER = "update parameter"  # NodeImageIdSSMParam := the channel's parameter name
    UPDATE_IMAGE_ID = "update image id"  # NodeImageId := the AMI (managed: a new launch template version)
    REFUSED = "refused"
    BLOCKED = "blocked"


@dataclass(frozen=True)
class LaunchTemplateUse:
    """The launch template version a group launches from, and its image."""

    template_id: str
    version: str  # as the group names it: a number, $Latest or $Default
    number: int | None  # what it resolves to; None when that version does not exist
    image: str | None

    def __str__(self) -> str:
        return f"launch template {self.template_id} version {self.number if self.number is not None else self.version}"


@dataclass(frozen=True)
class StackView:
    """What `assess` needs to know about a node group stack."""

    name: str
    region: str
    status: str
    parameters: Mapping[str, StackParameter]
    capabilities: tuple[str, ...] = ()
    group: tuple[str, str] | None = None  # (logical id, name) of its Auto Scaling group
    launch: LaunchTemplateUse | None = None
    instances: Mapping[str, int] = field(default_factory=dict)  # launch template version -> instances
    problem: str = ""  # why no group or launch template could be read

    @property
    def state(self) -> StackState:
        return stack_state(self.status)

    @property
    def pinned(self) -> bool:
        """True when the stack names an image id rather than following an SSM parameter."""
        image = self.parameters.get(IMAGE_ID)
        return bool(image and image.value) or SSM_PARAMETER not in self.parameters


@dataclass(frozen=True)
class NodegroupView:
    cluster: str
    name: str
    region: str
    status: str
    launch: LaunchTemplateUse | None
    ami_type: str = ""


@dataclass(frozen=True)
class Channel:
    """A channel's SSM parameter in one region, its AMI and that image's state."""

    parameter: str
    region: str
    ami: str | None  # None: the parameter does not exist there
    image_state: str | None = None  # None: no such image


@dataclass(frozen=True)
class RolloutDecision:
    """What a rollout must do, decided from gathered facts (`assess`, `assess_nodegroup`)."""

    action: RolloutAction
    reason: str
    parameter: str | None = None  # the stack parameter to set
    value: str | None = None
    # the UPDATE change set's parameters: `parameter` := `value`, every other one kept as it is
    send: tuple[Mapping[str, Any], ...] = ()


# ------------------------------------------------------------------------------ assessing


def channel_problem(channel: Channel) -> str:
    if channel.ami is None:
        return f"channel parameter {channel.parameter} has no value in {channel.region}: publish or promote to it first"
    if channel.image_state != "available":
        state = f"is {channel.image_state}" if channel.image_state else "does not exist"
        return f"{channel.parameter} holds {channel.ami}, which {state} in {channel.region}"
    return ""


def channel_to_read(stack: StackView, given: str | None) -> str | None:
    """The channel parameter a stack rolls to: the one given, else the one it follows (None when it
    pins an image id and none was given). Pure."""
    return given or (None if stack.pinned else stack.parameters[SSM_PARAMETER].value)


def assess(stack: StackView, channel: Channel | None) -> RolloutDecision:
    """What to do to bring the stack's nodes to the channel's AMI, and which parameters to send. Pure."""
    where = f"stack {stack.name} in {stack.region}"
    if stack.state is StackState.GONE:
        return RolloutDecision(RolloutAction.REFUSED, f"{where} does not exist ({stack.status})")
    if stack.state in (StackState.BUSY, StackState.FAILED):
        hint = "wait until it ends" if stack.state is StackState.BUSY else "repair or delete it first (see its events)"
        return RolloutDecision(RolloutAction.BLOCKED, f"{where} is {stack.status}: {hint}")
    if SSM_PARAMETER not in stack.parameters and IMAGE_ID not in stack.parameters:
        return RolloutDecision(RolloutAction.REFUSED,
                               f"{where} has neither a {SSM_PARAMETER} nor a {IMAGE_ID} parameter: amibuild rolls"
                               " stacks made from its amibuild/handoff/templates/nodegroup.yaml or the classic EKS node group template")
    if stack.problem or stack.launch is None:
        return RolloutDecision(RolloutAction.REFUSED, f"{where}: {stack.problem or 'no launch template found'}")
    if channel is None:
        return RolloutDecision(RolloutAction.REFUSED, f"{where} pins {IMAGE_ID}: name the image to roll to with --variant and --channel")
    problem = channel_problem(channel)
    if problem:
        return RolloutDecision(RolloutAction.REFUSED, problem)
    ami, launch = channel.ami, stack.launch
    name, value, action = ((IMAGE_ID, ami, RolloutAction.UPDATE_IMAGE_ID) if stack.pinned
                           else (SSM_PARAMETER, channel.parameter, RolloutAction.UPDATE_PARAMETER))
    points = stack.parameters.get(name, StackParameter("")).value == value  # the stack names that value already
    if launch.image == ami and points:
        return RolloutDecision(RolloutAction.ALREADY_CURRENT, f"{launch} has {ami}, the AMI of {channel.parameter}")
    if launch.image == ami:
        reason = f"{launch} has {ami} already; {name} := {value} (no node is replaced)"
    elif points and not stack.pinned:
        reason = (f"{SSM_PARAMETER} names {value} already, whose value moved to {ami} while {launch} has "
                  f"{launch.image}: the update makes CloudFormation resolve it again")
    else:
        reason = f"{launch} has {launch.image}; {name} := {value} ({ami})"
    send = tuple({"ParameterKey": key, "ParameterValue": value} if key == name
                 else {"ParameterKey": key, "UsePreviousValue": True} for key in stack.parameters)
    return RolloutDecision(action, reason, name, value, send)


def nothing_to_update(stack: StackView, channel: Channel, decision: RolloutDecision) -> RolloutDecision:
    """CloudFormation found nothing to change: already current when the group launches the channel's
    image anyway (only the parameter's name would have changed), else `RolloutFailed`. Pure."""
    assert stack.launch is not None
    if stack.launch.image == channel.ami:
        return replace(decision, action=RolloutAction.ALREADY_CURRENT, reason=f"{decision.reason}; CloudFormation "
                       f"found nothing to update, so {decision.parameter} keeps its value", send=())
    raise RolloutFailed(f"CloudFormation found nothing to update in stack {stack.name}, so nothing changed: the Auto "
                        f"Scaling group still launches from {stack.launch} with {stack.launch.image}, not "
                        f"{channel.ami} from {channel.parameter}")


def assess_nodegroup(group: NodegroupView, channel: Channel) -> RolloutDecision:
    """The same question for an EKS managed node group. Pure."""
    where = f"node group {group.cluster}/{group.name} in {group.region}"
    state = nodegroup_state(group.status)
    if state is not StackState.READY:
        return RolloutDecision(RolloutAction.BLOCKED, f"{where} is {group.status}: " + (
            "wait until it ends" if state is StackState.BUSY else "repair or delete it first"))
    if group.launch is None:
        return RolloutDecision(RolloutAction.REFUSED, f"{where} uses no launch template (EKS picks its AMI, {group.ami_type}): "
                               "amibuild's AMIs need a node group whose launch template names the image")
    if group.launch.number is None:
        return RolloutDecision(RolloutAction.REFUSED, f"{where}: {group.launch} does not exist")
    if group.launch.image is None:
        return RolloutDecision(RolloutAction.REFUSED, f"{where}: {group.launch} sets no ImageId, so EKS picks the AMI "
                               f"({group.ami_type}); a node group cannot switch to a custom AMI in place")
    problem = channel_problem(channel)
    if problem:
        return RolloutDecision(RolloutAction.REFUSED, problem)
    if group.launch.image == channel.ami:
        return RolloutDecision(RolloutAction.ALREADY_CURRENT, f"{group.launch} has {channel.ami}, the AMI of {channel.parameter}")
    return RolloutDecision(RolloutAction.UPDATE_IMAGE_ID, f"{group.launch} has {group.launch.image}; a new version gets "
                           f"{channel.ami}", "ImageId", channel.ami)


def _raise_for(decision: RolloutDecision) -> None:
    if decision.action is RolloutAction.REFUSED:
        raise RolloutRefused(decision.reason)
    if decision.action is RolloutAction.BLOCKED:
        raise RolloutBlocked(decision.reason)


# -------------------------------------------------------------------------------- reading


def read_channel(aws: Aws, parameter: str, region: str) -> Channel:
    try:
        ami = aws.get_parameter(parameter, region)
    except NotFound:
        return Channel(parameter, region, None)
    image = aws.find_image(region, ami)
    return Channel(parameter, region, ami, image.state if image else None)


def _launch_use(ref: LaunchTemplateRef, version: LaunchTemplateVersion | None) -> LaunchTemplateUse:
    return LaunchTemplateUse(ref.template_id, ref.version, version.number if version else None,
                             version.image_id if version else None)


@dataclass(frozen=True)
class StackFacts:
    """The gateway's answers about a node group stack, as read: what `stack_view` decides from.

    Each later answer is read only when the earlier ones call for it (`gather_stack`): resources
    once the stack can change, the group once there is exactly one (None then: it does not
    exist), the launch template version once the group names one (None then: it does not exist).
    """

    name: str
    region: str
    stack: Stack
    resources: tuple[StackResource, ...] | None = None
    group: AutoScalingGroup | None = None
    launch_version: LaunchTemplateVersion | None = None


def _groups(resources: Sequence[StackResource]) -> list[tuple[str, str]]:
    return [(r.logical_id, r.physical_id) for r in resources if r.type == GROUP_TYPE]


def stack_view(facts: StackFacts) -> StackView:
    """The stack and what its Auto Scaling group launches, from the answers read so far. Pure."""
    view = StackView(name=facts.name, region=facts.region, status=facts.stack.status,
                     parameters=facts.stack.parameters, capabilities=facts.stack.capabilities)
    if view.state not in (StackState.READY, StackState.ROLLED_BACK) or facts.resources is None:
        return view
    groups = _groups(facts.resources)
    if len(groups) != 1:
        return replace(view, problem=f"it has {len(groups) or 'no'} Auto Scaling groups; amibuild rolls stacks with one")
    group = facts.group
    if group is None or group.launch_template is None:
        why = "does not exist" if group is None else "uses a launch configuration, not a launch template"
        return replace(view, group=groups[0], problem=f"its Auto Scaling group {groups[0][1]} {why}")
    launch = _launch_use(group.launch_template, facts.launch_version)
    problem = "" if launch.number is not None else f"{launch} does not exist"
    return replace(view, group=groups[0], launch=launch, instances=dict(Counter(group.instance_versions)),
                   problem=problem)


def gather_stack(aws: Aws, name: str, region: str) -> StackFacts | None:
    """Read what `stack_view` needs, no more; None when the stack does not exist."""
    stack = aws.describe_stack(name, region)
    if stack is None:
        return None
    facts = StackFacts(name, region, stack)
    if stack_view(facts).state not in (StackState.READY, StackState.ROLLED_BACK):
        return facts
    facts = replace(facts, resources=tuple(aws.stack_resources(name, region)))
    groups = _groups(facts.resources or ())
    if len(groups) != 1:
        return facts
    facts = replace(facts, group=aws.auto_scaling_group(groups[0][1], region))
    ref = facts.group.launch_template if facts.group else None
    if ref is None:
        return facts
    return replace(facts, launch_version=aws.launch_template_version(ref.template_id, ref.version, region))


def read_stack(aws: Aws, name: str, region: str) -> StackView | None:
    """The stack and what its Auto Scaling group launches; None when the stack does not exist."""
    facts = gather_stack(aws, name, region)
    return None if facts is None else stack_view(facts)


def read_nodegroup(aws: Aws, cluster: str, name: str, region: str) -> NodegroupView | None:
    group = aws.describe_nodegroup(cluster, name, region)
    if group is None:
        return None
    ref = group.launch_template
    launch = _launch_use(ref, aws.launch_template_version(ref.template_id, ref.version, region)) if ref else None
    return NodegroupView(cluster, name, region, group.status, launch, group.ami_type)


# ------------------------------------------------------------------------------- rolling out


@dataclass(frozen=True)
class RolloutResult:
    target: str  # "stack ng-ceph" or "node group prod/ng-managed"
    region: str
    action: RolloutAction
    reason: str
    channel: str
    ami: str
    previous_image: str | None
    dry_run: bool = False
    started: bool = False
    verified: bool = False
    status: str = ""
    changes: tuple[str, ...] = ()
    launch_template: str = ""
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "action": str(self.action)}

    def lines(self) -> list[str]:
        head = f"{self.target} ({self.region}):"
        if self.action is RolloutAction.ALREADY_CURRENT:
            return [f"{head} already current: {self.reason}"]
        if self.dry_run:
            return [f"{head} dry run, nothing changed: {self.reason}", *(f"  would: {c}" for c in self.changes)]
        if not self.verified:
            return [f"{head} update started ({self.status}): {self.reason}",
                    "  not waited for: run the same command again later; it says `already current` once rolled"]
        return [f"{head} rolled out to {self.ami} from {self.channel}: {self.launch_template} ({self.status})",
                *([f"  {self.note}"] if self.note else [])]


def _instances_note(stack: StackView) -> str:
    assert stack.launch is not None
    total = sum(stack.instances.values())
    current = sum(n for version, n in stack.instances.items() if version in (stack.launch.version, str(stack.launch.number)))
    if current == total:
        return f"{total} of {total} instances launched from it"
    return (f"{total - current} of {total} instances still run an older launch template version: check the Auto "
            "Scaling group's activity (its UpdatePolicy decides whether CloudFormation replaces them)")


def rollout_stack(aws: Aws, name: str, region: str, *, channel_parameter: str | None, say: Say,
                  dry_run: bool = False, wait: bool = True, poll: float = STACK_POLL,
                  timeout: float = DEFAULT_TIMEOUT) -> RolloutResult:
    """Point stack `name` at the channel and roll its nodes; verify."""
    stack = read_stack(aws, name, region)
    if stack is None:
        raise RolloutRefused(f"stack {name} does not exist in {region}")
    parameter = channel_to_read(stack, channel_parameter)
    channel = read_channel(aws, parameter, region) if parameter else None
    decision = assess(stack, channel)
    _raise_for(decision)
    assert channel is not None and channel.ami and stack.launch is not None and stack.group is not None
    result = RolloutResult(f"stack {name}", region, decision.action, decision.reason, channel.parameter, channel.ami,
                           stack.launch.image, launch_template=str(stack.launch))
    if decision.action is RolloutAction.ALREADY_CURRENT:
        return result
    say(f"stack {name}: {decision.reason}")
    try:  # how CloudFormation will replace the nodes: worth seeing before it starts
        template = parse_template(aws.stack_template(name, region), f"stack {name}'s template")
        say("  " + update_policy_line(template, stack.group[0], {k: p.value for k, p in stack.parameters.items()}))
    except AmibuildError as exc:
        say(f"  (update policy not shown: {exc})")
    made = make_change_set(aws, name, region, decision.send, stack.capabilities, say, poll=poll)
    if made is None:
        current = nothing_to_update(stack, channel, decision)
        return replace(result, action=current.action, reason=current.reason)
    change_set, changes = made
    if dry_run:
        aws.delete_change_set(name, region, change_set)
        return replace(result, dry_run=True, changes=(f"{decision.parameter} := {decision.value}", *changes))
    status = execute_change_set(aws, name, region, change_set, say, wait=wait, poll=poll, timeout=timeout)
    if not wait:
        return replace(result, started=True, status=status, changes=changes)
    after = read_stack(aws, name, region)
    if after is None or after.launch is None or after.launch.image != channel.ami:
        found = f"{after.launch} with {after.launch.image}" if after and after.launch else (after and after.problem)
        raise RolloutFailed(f"stack {name} is {status}, but its Auto Scaling group launches from {found}, "
                            f"not {channel.ami}")
    return replace(result, started=True, verified=True, status=status, changes=changes,
                   launch_template=str(after.launch), note=_instances_note(after))


def rollout_nodegroup(aws: Aws, cluster: str, name: str, region: str, *, channel_parameter: str, say: Say,
                      dry_run: bool = False, wait: bool = True, poll: float = NODEGROUP_POLL,
                      timeout: float = DEFAULT_TIMEOUT) -> RolloutResult:
    """New launch template version with the channel's AMI, UpdateNodegroupVersion, wait, verify."""
    group = read_nodegroup(aws, cluster, name, region)
    if group is None:
        raise RolloutRefused(f"node group {cluster}/{name} does not exist in {region}")
    channel = read_channel(aws, channel_parameter, region)
    decision = assess_nodegroup(group, channel)
    _raise_for(decision)
    launch = group.launch
    assert launch is not None and channel.ami
    result = RolloutResult(f"node group {cluster}/{name}", region, decision.action, decision.reason,
                           channel.parameter, channel.ami, launch.image, launch_template=str(launch))
    if decision.action is RolloutAction.ALREADY_CURRENT:
        return result
    if dry_run:
        return replace(result, dry_run=True, changes=(
            f"launch template {launch.template_id}: a new version from version {launch.number} with ImageId {channel.ami}",
            f"UpdateNodegroupVersion {cluster}/{name} to that version"))
    version = aws.create_launch_template_version(launch.template_id, region, source_version=str(launch.number),
                                                 image_id=channel.ami, description=f"amibuild: {channel.parameter}")
    say(f"node group {cluster}/{name}: launch template {launch.template_id} version {version} has {channel.ami}")
    try:
        update = aws.update_nodegroup_version(cluster, name, region, template_id=launch.template_id, version=str(version))
    except AmibuildError as exc:
        raise type(exc)(f"{exc} (launch template {launch.template_id} version {version} was created and is unused)") from exc
    say(f"node group {cluster}/{name}: update {update.id} {update.status}")
    if not wait:
        return replace(result, started=True, status=update.status)
    status = _follow_update(aws, cluster, name, region, update.id, say, poll=poll, timeout=timeout)
    after = read_nodegroup(aws, cluster, name, region)
    if after is None or after.launch is None or after.launch.number != version or after.launch.image != channel.ami:
        found = f"{after.launch} with {after.launch.image}" if after and after.launch else "no launch template"
        raise RolloutFailed(f"node group {cluster}/{name}: update {status}, but it uses {found}, not version {version} "
                            f"with {channel.ami}")
    return replace(result, started=True, verified=True, status=status, launch_template=str(after.launch))


def _follow_update(aws: Aws, cluster: str, name: str, region: str, update_id: str, say: Say, *, poll: float,
                   timeout: float) -> str:
    said = ""

    def current() -> str:
        """The update's status, said when it changes; a failed or cancelled update raises."""
        nonlocal said
        update = aws.describe_nodegroup_update(cluster, name, update_id, region)
        if update.status != said:
            say(f"node group {cluster}/{name}: update {update_id} {update.status}")
            said = update.status
        if update.status in ("Failed", "Cancelled"):
            errors = "; ".join(update.errors)
            raise RolloutFailed(f"node group {cluster}/{name}: update {update_id} {update.status}: "
                                f"{errors or 'no error given'}")
        return update.status

    goes_on = "EKS goes on without amibuild: run the same command again later to check"
    try:
        waited = until(current, done=lambda status: status == "Successful", timeout=timeout, interval=poll)
    except KeyboardInterrupt:  # Ctrl-C
        raise Interrupted(f"interrupted while following node group {cluster}/{name}'s update {update_id}; {goes_on}",
                          summary=True) from None
    if waited.timed_out:
        raise RolloutFailed(f"node group {cluster}/{name}: update {update_id} still {waited.value} after {timeout:.0f} s; "
                            + goes_on)
    return waited.value
