"""The self-managed node group template amibuild ships, and the JSON it sends to CloudFormation.

`amibuild/handoff/templates/nodegroup.yaml` is written by hand in CloudFormation's YAML (short-form tags such
as ``!Sub``). This module reads it into the long form (``{"Fn::Sub": ...}``), the same dict a JSON
template would give, and writes that dict as JSON: JSON is what amibuild sends (the local emulator's
YAML reader also trips over ``!Base64`` followed by a mapping).

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import enum
import json
from importlib import resources
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from amibuild.errors import RolloutFailed, SpecError, TemplateError
from amibuild.handoff import cfn_parts as cfn
from amibuild.handoff import rollout as ro
from amibuild.handoff.cfn_parts import parse_template
from amibuild.handoff.userdata.config import STACK_NAME
from amibuild.pipeline import proxy_credentials

TEMPLATE_PATH = Path(str(resources.files("amibuild.handoff") / "templates" / "nodegroup.yaml"))

# Every parameter of the template (a test checks this against the file), for validating the
# parameters of a stack made from it before amibuild updates it.
PARAMETERS: frozenset[str] = frozenset({
    "ClusterName",
    "ClusterControlPlaneSecurityGroup",
    "NodeGroupName",
    "NodeAutoScalingGroupMinSize",
    "NodeAutoScalingGroupDesiredCapacity",
    "NodeAutoScalingGroupMaxSize",
    "NodeInstanceType",
    "NodeImageIdSSMParam",
    "NodeImageId",
    "NodeVolumeSize",
    "NodeVolumeType",
    "KeyName",
    "BootstrapArguments",
    "HttpProxy",
    "ProxyCredentialsParameter",
    "NoProxy",
    "KubeletFlags",
    "NodeLabels",
    "NodeTaints",
    "MaxPods",
    "MaxPodsExpression",
    "DisableIMDSv1",
    "RollingUpdateMaxBatchSize",
    "RollingUpdateMinInstancesInService",
    "RollingUpdatePauseTime",
    "VpcId",
    "Subnets",
})
# Added to the template only when the nodes' proxy URL holds user:password@: the user data says
# ${ProxyCredentials} where they go, and the value travels as a NoEcho parameter, so neither the
# template body (GetTemplate) nor DescribeStacks shows it. The launch template's user data, resolved,
# still carries it (anyone allowed ec2:DescribeLaunchTemplateVersions can read it).
PROXY_CREDENTIALS = "ProxyCredentials"
HIDDEN_PARAMETERS = frozenset({PROXY_CREDENTIALS})
PSEUDO_PARAMETERS: frozenset[str] = frozenset({
    "AWS::AccountId", "AWS::NotificationARNs", "AWS::NoValue", "AWS::Partition", "AWS::Region",
    "AWS::StackId", "AWS::StackName", "AWS::URLSuffix",
})
NODE_GROUP = "NodeGroup"  # the Auto Scaling group's logical id: what cfn-signal --resource names
LAUNCH_TEMPLATE = "NodeLaunchTemplate"
NODE_ROLE = "NodeInstanceRole"  # the nodes' IAM role resource (a credentials parameter adds its policy)
ROLE_OUTPUT = "NodeInstanceRole"  # the output naming the nodes' IAM role (for aws-auth)
OWN_METADATA = "amibuild"  # Metadata key that marks a template as ours (`check_ours` reads it)
OWN_TEMPLATE = "nodegroup"
NODE_OSES = ("al2", "al2023")
_OWN_DESCRIPTION = "amibuild: a self-managed Amazon EKS node group"
MAX_TEMPLATE_BODY = 51_200  # bytes CloudFormation takes as TemplateBody (more must go through S3)
# Parameters without a Default, with the `amibuild nodegroup-deploy` flag that sets each.
REQUIRED_ON_CREATE = {
    "ClusterName": "--cluster",
    "ClusterControlPlaneSecurityGroup": "--control-plane-sg",
    "NodeGroupName": "--nodegroup-name",
    "VpcId": "--vpc-id",
    "Subnets": "--subnet",
}

# "${" and, when it closes before another "$", "{" or "}", the name it holds: in ${a:-${b}} the
# outer "${" is matched alone, so every "${" is seen once whatever the nesting.
_PLACEHOLDER = re.compile(r"\$\{(?:([^${}]*)\})?")
# How user data tells the stack it is up: cfn-signal on the node, or the API call it wraps.
_SIGNALS = ("cfn-signal", "signal-resource")


def load_template(path: Path = TEMPLATE_PATH) -> dict[str, Any]:
    """The template as a long-form dict (what the same template in JSON would give)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TemplateError(f"{path}: cannot read the node group template: {exc.strerror}") from exc
    return parse_template(text, str(path))


# ------------------------------------------------------------------------------------- writing

def sub_text(text: str, names: frozenset[str] = PARAMETERS) -> str:
    """`text` for ``Fn::Sub``: ``${Name}`` for a parameter in `names` or a pseudo parameter stays a
    reference; every other ``${`` becomes ``${!``, which CloudFormation turns back into ``${``.

    A nested expansion such as ``${a:-${b}}`` becomes ``${!a:-${!b}}``: this relies on
    CloudFormation turning every ``${!`` into ``${`` (documented for one ``${!Literal}``).
    """

    def escape(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is not None and (name in names or name in PSEUDO_PARAMETERS):
            return match.group(0)
        return "${!" + match.group(0)[2:]

    return _PLACEHOLDER.sub(escape, text)


def template_json(user_data: str | None = None, *, node_os: str = "al2", hidden: Iterable[str] = (),
                  proxy_credentials_parameter: str = "") -> str:
    """The template as compact JSON; with `user_data`, that text (see `sub_text`) is the nodes'.

    `node_os` goes into ``Metadata.amibuild.os``; without `user_data` the template's own (al2)
    user data stays, so al2023 needs user data (nodeadm's NodeConfig).

    The user data must signal the stack (cfn-signal for `NODE_GROUP`): creation and every rolling
    update wait for each new node's signal, and without one they fail after the pause time.
    """
    if node_os not in NODE_OSES:
        raise SpecError(f"--os {node_os!r}: choose one of {', '.join(NODE_OSES)}")
    if node_os != "al2" and user_data is None:
        raise SpecError(f"{node_os} nodes need user data with a nodeadm NodeConfig; the template's own is al2's")
    template = load_template()
    template.setdefault("Metadata", {})[OWN_METADATA] = {"template": OWN_TEMPLATE, "os": node_os}
    if proxy_credentials_parameter:
        # the nodes' boothook reads the proxy's user:password from this SecureString at boot
        role = template["Resources"][NODE_ROLE]["Properties"]
        role.setdefault("Policies", []).append({
            "PolicyName": proxy_credentials.POLICY_NAME,
            "PolicyDocument": {"Version": "2012-10-17",
                               "Statement": proxy_credentials.node_role_statements(proxy_credentials_parameter)}})
    if user_data is not None:
        if not user_data.strip():
            raise SpecError("the node user data is empty: the nodes would never join or signal the stack")
        if not any(word in user_data for word in _SIGNALS):
            raise SpecError(
                f"the node user data never runs cfn-signal for {NODE_GROUP}: the stack waits for every "
                "new node's signal and would roll back; write it with the stack and resource to signal"
            )
        for name in hidden:  # HIDDEN_PARAMETERS the user data refers to
            template.setdefault("Parameters", {})[name] = {
                "Type": "String", "NoEcho": True,
                "Description": "Credentials of the nodes' proxy (user:password), set by amibuild; never shown"}
        names = frozenset(template.get("Parameters", {}))
        data = template["Resources"][LAUNCH_TEMPLATE]["Properties"]["LaunchTemplateData"]
        # Text that names no parameter goes as it is: Fn::Sub would have nothing to fill in
        # (cfn-lint W1020) and every shell ${ would need escaping.
        references = any(m.group(1) in names or m.group(1) in PSEUDO_PARAMETERS
                         for m in _PLACEHOLDER.finditer(user_data) if m.group(1) is not None)
        data["UserData"] = {"Fn::Base64": {"Fn::Sub": sub_text(user_data, names)} if references else user_data}
    body = json.dumps(template, separators=(",", ":"), ensure_ascii=False)
    size = len(body.encode())
    if size > MAX_TEMPLATE_BODY:
        raise SpecError(
            f"the node group template is {size} bytes with this user data; CloudFormation takes at "
            f"most {MAX_TEMPLATE_BODY} inline: shorten the user data"
        )
    return body


# ------------------------------------------------------------------------------------- deploying


def check_stack_name(name: str) -> str:
    """``name`` when CloudFormation can create a stack of that name, else SpecError naming --stack."""
    if not STACK_NAME.match(name):
        raise SpecError(f"--stack {name!r}: a stack name is 1-128 letters, digits and hyphens, starting with a letter")
    return name


def parse_parameters(pairs: Iterable[str]) -> dict[str, str]:
    """``KEY=VALUE`` flags → {KEY: VALUE}, each KEY one of the template's `PARAMETERS`."""
    values: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in PARAMETERS:
            raise SpecError(
                f"--parameter {pair!r}: write KEY=VALUE with KEY a parameter of the node group template, "
                f"one of {', '.join(sorted(PARAMETERS))}"
            )
        if key in values:
            raise SpecError(f"--parameter {key} is given twice")
        values[key] = value
    return values


def stack_parameters(given: Mapping[str, str], previous: Iterable[str] | None) -> list[dict[str, Any]]:
    """CloudFormation ``Parameters`` for a deploy.

    `previous` None is a create: the given values, which must include every `REQUIRED_ON_CREATE`.
    Otherwise an update: the given values, and ``UsePreviousValue`` for every other parameter the
    stack has (a parameter the template no longer has is left out).
    """
    unknown = sorted(set(given) - PARAMETERS - HIDDEN_PARAMETERS)
    if unknown:
        raise SpecError(f"{unknown[0]} is not a parameter of the node group template")
    # None: keep the stack's value (a NoEcho parameter, whose value DescribeStacks does not give back)
    out = [{"ParameterKey": key, "UsePreviousValue": True} if value is None else
           {"ParameterKey": key, "ParameterValue": value} for key, value in sorted(given.items())]
    if previous is None:
        missing = [flag for key, flag in REQUIRED_ON_CREATE.items() if not given.get(key)]
        if missing:
            raise SpecError(f"creating the node group stack needs {', '.join(missing)}")
        return out
    kept = sorted(key for key in set(previous) & PARAMETERS if key not in given)
    return out + [{"ParameterKey": key, "UsePreviousValue": True} for key in kept]


class DeployAction(enum.StrEnum):
    """What `deploy` did to the stack; the value is what --json says."""

    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"  # CloudFormation found nothing to change
    STARTED = "started"  # --no-wait: created or updated, not followed
    WOULD_CREATE = "would create"  # --dry-run: nothing was sent
    WOULD_UPDATE = "would update"  # --dry-run: nothing was sent (no change set either)
    FAILED = "failed"  # sent, and the stack did not end well (rolled back, failed, still busy at the timeout)


def parameter_changes(given: Mapping[str, str], previous: Mapping[str, str]) -> list[str]:
    """One line per given parameter whose value differs from the stack's (pure)."""
    # A parameter the stack does not have yet, given empty, changes nothing the nodes see.
    return [f"{key}: (hidden, NoEcho)" if key in HIDDEN_PARAMETERS else
            f"{key}: {'(not set)' if previous.get(key) is None else repr(previous[key])} -> {given[key]!r}"
            for key in sorted(given) if given[key] is not None and previous.get(key, "") != given[key]]


def check_ours(aws: Any, name: str, region: str) -> Mapping[str, Any]:
    """The stack template's ``Metadata.amibuild`` when amibuild's node group template made it, else
    `RolloutRefused` naming `amibuild rollout`."""
    return own_mark(read_template(aws, name, region), name, region)


def read_template(aws: Any, name: str, region: str) -> Mapping[str, Any]:
    """The stack's template, parsed ({} when it is not one amibuild can read)."""
    try:
        return parse_template(aws.stack_template(name, region), f"stack {name}'s template")
    except TemplateError:
        return {}


def own_mark(template: Mapping[str, Any], name: str, region: str) -> Mapping[str, Any]:
    """`check_ours` over a template already read. Pure."""
    mark = template.get("Metadata", {}).get(OWN_METADATA) if isinstance(template.get("Metadata"), dict) else None
    if isinstance(mark, dict) and mark.get("template") == OWN_TEMPLATE:
        return mark
    # Stacks amibuild made before the template carried its mark: its own description, al2 nodes.
    if str(template.get("Description", "")).startswith(_OWN_DESCRIPTION):
        return {"template": OWN_TEMPLATE, "os": "al2"}
    raise ro.RolloutRefused(
        f"stack {name} in {region} was not made from amibuild's node group template (no Metadata.{OWN_METADATA}); "
        f"nodegroup-deploy would replace its template and its resources: to move its nodes to a channel's AMI "
        f"use `amibuild rollout --stack {name} --variant V --channel C`, which keeps the stack's own template"
    )


@dataclass(frozen=True)
class DeployResult:
    stack: str
    region: str
    action: DeployAction
    status: str
    outputs: Mapping[str, str] = field(default_factory=dict)
    changed: tuple[str, ...] = ()  # "Key: 'old' -> 'new'" per parameter an update changed
    notes: tuple[str, ...] = ()  # what to do next (node access), added by the caller
    kept: tuple[str, ...] = ()  # --dry-run of an update: the parameters that keep their values
    error: str = ""  # FAILED: why (the failing resource and its reason, as CloudFormation's events say)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "action": str(self.action)}

    def raise_for_status(self) -> None:
        """`RolloutFailed` (exit 1) when the create or update was sent and the stack did not end well."""
        if self.action is DeployAction.FAILED:
            raise RolloutFailed(self.error)

    def lines(self) -> list[str]:
        out = [f"stack {self.stack} ({self.region}): {self.action} ({self.status})"]
        dry = self.action in (DeployAction.WOULD_CREATE, DeployAction.WOULD_UPDATE)
        out += [f"  {'would set' if dry else 'changed'} {line}" for line in self.changed]
        if self.kept:
            out.append(f"  keeping {', '.join(self.kept)} as they are")
        if dry or self.action is DeployAction.FAILED:  # the error itself is the task's error line
            return out
        out += [f"  {key}: {value}" for key, value in sorted(self.outputs.items())]
        if self.notes:
            out += [f"  next: {note}" for note in self.notes]
        elif ROLE_OUTPUT in self.outputs:
            out.append(f"  next: amibuild aws-auth --stack {self.stack}   (the mapRoles entry that lets these nodes join)")
        return out


# what a new stack lacks without an image to run
NEEDS_IMAGE = ("creating a node group stack needs --channel (with --variant when the pipeline has more than one), "
               "or --parameter NodeImageId=AMI")


def deploy(aws: Any, name: str, region: str, *, given: Mapping[str, str], template_body: str,
           channel_parameter: str | None, say: cfn.Say, wait: bool = True,
           poll: float = 5.0, timeout: float = 7200.0, dry_run: bool = False) -> DeployResult:
    """Create stack `name` from this template, or update it with a change set; follow its events.

    An existing stack must carry this template's mark (`check_ours`); its parameters not in
    `given` keep their values, and the ones that change are said and returned. ``dry_run``: every
    check and read as for the deploy, then the create or update that would be sent, sending nothing.
    Once the create or update is sent, a stack that does not end well is a `DeployAction.FAILED`
    result (its `raise_for_status` raises), not an exception: what was sent is in the result.
    """
    channel = ro.read_channel(aws, channel_parameter, region) if channel_parameter else None
    if channel is not None:
        problem = ro.channel_problem(channel)
        if problem:
            raise ro.RolloutRefused(problem)
        given = {**given, "NodeImageIdSSMParam": channel_parameter}
    found = aws.describe_stack(name, region)
    if found is None:
        if not given.get("NodeImageIdSSMParam") and not given.get("NodeImageId"):
            raise SpecError(NEEDS_IMAGE)
        parameters = stack_parameters({"NodeGroupName": name, **given}, None)
        if dry_run:
            return DeployResult(name, region, DeployAction.WOULD_CREATE, "dry run: nothing sent", changed=tuple(
                f"{p['ParameterKey']}: (hidden, NoEcho)" if p["ParameterKey"] in HIDDEN_PARAMETERS else
                f"{p['ParameterKey']}: (new) -> {p['ParameterValue']!r}" for p in parameters))
        say(f"stack {name}: creating in {region}")
        aws.create_stack(name, region, template_body=template_body, parameters=parameters,
                         capabilities=("CAPABILITY_IAM",), token=cfn.token("create"))
        action, status, changed = DeployAction.CREATED, "CREATE_IN_PROGRESS", ()
        if wait:
            try:
                status = cfn.follow(aws, name, region, since=None, say=say, poll=poll, timeout=timeout)
            except RolloutFailed as exc:
                return _failed(aws, name, region, exc)
    else:
        state = cfn.stack_state(found.status)
        if state not in (cfn.StackState.READY, cfn.StackState.ROLLED_BACK):
            raise ro.RolloutBlocked(f"stack {name} in {region} is {found.status}: wait until it ends, or "
                                    "repair or delete it")
        current = read_template(aws, name, region)
        own_mark(current, name, region)
        previous = {key: p.value for key, p in found.parameters.items()}
        if channel_parameter and previous.get("NodeImageId") and "NodeImageId" not in given:
            # a pinned image overrides the channel's parameter (the template's rule): following the channel clears it
            given = {**given, "NodeImageId": ""}
        parameters = stack_parameters(given, list(previous))
        changed = tuple(parameter_changes(given, previous))
        ssm = found.parameters.get("NodeImageIdSSMParam")
        if (channel and ssm and ssm.value == channel.parameter and ssm.resolved not in (None, channel.ami)
                and not given.get("NodeImageId")):  # (a pinned image overrides the parameter)
            # the same parameter name, a new value: the update resolves it again (the nodes are replaced)
            changed += (f"NodeImageIdSSMParam: {channel.parameter} moved from {ssm.resolved} to {channel.ami} "
                        "(CloudFormation resolves it again)",)
        kept = sorted(key for key in set(previous) & PARAMETERS if given.get(key, previous[key]) == previous[key])
        if dry_run:  # CloudFormation updates nothing when neither a parameter nor the template changes
            same = current == json.loads(template_body)
            action = DeployAction.UNCHANGED if same and not changed else DeployAction.WOULD_UPDATE
            return DeployResult(name, region, action, f"{found.status}; dry run: nothing sent", kept=tuple(kept),
                                changed=changed if same else (*changed, "the template: the stack's -> this deploy's"))
        for line in changed:
            say(f"stack {name}: changing {line}")
        if kept:
            say(f"stack {name}: keeping {', '.join(kept)} as they are")
        made = cfn.make_change_set(aws, name, region, parameters, ("CAPABILITY_IAM",), say, poll=poll,
                                   template_body=template_body)
        if made is None:
            return DeployResult(name, region, DeployAction.UNCHANGED, found.status, dict(found.outputs))
        action = DeployAction.UPDATED
        try:
            status = cfn.execute_change_set(aws, name, region, made[0], say, wait=wait, poll=poll, timeout=timeout)
        except RolloutFailed as exc:
            return _failed(aws, name, region, exc, changed=changed)
    if not wait:
        return DeployResult(name, region, DeployAction.STARTED, status, changed=changed)
    after = aws.describe_stack(name, region)
    return DeployResult(name, region, action, status, dict(after.outputs) if after else {}, changed=changed)


def _failed(aws: Any, name: str, region: str, exc: RolloutFailed, changed: tuple[str, ...] = ()) -> DeployResult:
    """The result of a create or update that was sent and did not end well: the stack as it is now."""
    after = aws.describe_stack(name, region)
    return DeployResult(name, region, DeployAction.FAILED, after.status if after else "gone", changed=changed,
                        error=str(exc))


def node_role_arn(aws: Any, stack: str, region: str) -> str:
    """The NodeInstanceRole output of a node group stack (for `amibuild aws-auth --stack`)."""
    found = aws.describe_stack(stack, region)
    if found is None:
        raise ro.RolloutRefused(f"stack {stack} does not exist in {region}")
    role = found.outputs.get(ROLE_OUTPUT)
    if not role:
        raise ro.RolloutRefused(f"stack {stack} has no {ROLE_OUTPUT} output; give the role with --role-arn")
    return role
