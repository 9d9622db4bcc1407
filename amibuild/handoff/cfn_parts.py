"""CloudFormation pieces every hand-off path shares: templates in short-form YAML, update policies,
stack states, change sets and stack events.

A template's YAML may use CloudFormation's short-form tags (`!Sub`, `!Ref`, `!GetAtt` ...); cfn-flip's
loader reads each as its long form, so a YAML template gives the dict its JSON twin would.

Stack and node group statuses collapse to a few `StackState`s and an unknown one fails loudly. A
change (rollout or deploy) is an UPDATE change set: `make_change_set` creates it and shows what it
touches, `execute_change_set` runs it and `follow` prints the stack's events until it ends, failing
with the `root_cause` unless it ended ready. Nothing here prints: lines go to `say`.
"""

from __future__ import annotations

import enum
import time
import uuid
from typing import Any, Callable, Mapping, Sequence

import yaml
from cfn_tools.yaml_loader import CfnYamlLoader, multi_constructor

from amibuild.aws import Aws
from amibuild.aws.handoff_results import ChangeSet, StackEvent
from amibuild.errors import AmibuildError, Interrupted, RolloutFailed, TemplateError
from amibuild.poll import until

Say = Callable[[str], None]

CHANGE_SET_TIMEOUT = 600.0
_NO_CHANGES = ("didn't contain changes", "No updates are to be performed")


class _CfnLoader(CfnYamlLoader):
    """cfn-flip's loader (`!Name x` read as its long form, `!GetAtt a.b` as ["a", "b"]), with its maps as
    plain dicts, dates as text and only CloudFormation's short forms."""

    lenient = False


# CloudFormation reads an unquoted 2012-10-17 as text; YAML 1.1 would make it a date (and JSON
# could not write it).
_CfnLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in CfnYamlLoader.yaml_implicit_resolvers.items()
}
# PyYAML's own maps, not cfn-flip's ODict builder, which has no merge keys (<<) and lets an unhashable key
# escape as a TypeError instead of a YAMLError
_CfnLoader.add_constructor("tag:yaml.org,2002:map", yaml.SafeLoader.construct_yaml_map)

_SHORT_FORMS = frozenset((
    "Ref", "Condition", "GetAtt", "And", "Base64", "Cidr", "Equals", "FindInMap", "GetAZs", "If", "ImportValue",
    "Join", "Length", "Not", "Or", "Select", "Split", "Sub", "ToJsonString", "Transform",
))


def _tag(loader: _CfnLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    if suffix not in _SHORT_FORMS and not loader.lenient:
        return loader.construct_undefined(node)  # PyYAML's own refusal of an unknown tag
    if suffix == "GetAtt" and not isinstance(node, yaml.ScalarNode):
        # cfn-flip reads a list's raw node values (`!GetAtt [Db, !Ref A]` would lose the Ref) and fails on a map
        if isinstance(node, yaml.SequenceNode):
            return {"Fn::GetAtt": loader.construct_sequence(node, deep=True)}
        raise yaml.constructor.ConstructorError(
            None, None, "!GetAtt takes Resource.Attribute or [Resource, Attribute]", node.start_mark)
    return dict(multi_constructor(loader, suffix, node))  # its one-key ODict as a plain dict


_CfnLoader.add_multi_constructor("!", _tag)


class _LenientLoader(_CfnLoader):
    """_CfnLoader that also reads a tag it does not know, ``!Foo x``, as ``{"Fn::Foo": x}`` (as cfn-flip does)."""

    lenient = True


def load_yaml(text: str, *, lenient: bool = False) -> Any:
    """Any YAML or JSON document, CloudFormation's short-form tags read as their long forms.

    `yaml.YAMLError` when it does not parse. ``lenient``: a tag that is no CloudFormation short
    form (``!Foo``) is read as ``{"Fn::Foo": ...}`` instead of refused, for a caller that only
    searches the document (decode-userdata looking for UserData).
    """
    # SafeLoader subclasses: no arbitrary objects
    return yaml.load(text, Loader=_LenientLoader if lenient else _CfnLoader)


def parse_template(text: str, source: str = "template") -> dict[str, Any]:
    """A CloudFormation template in YAML (short-form tags allowed) or JSON, as a long-form dict."""
    try:
        template = load_yaml(text)
    except yaml.YAMLError as exc:
        raise TemplateError(f"{source}: not a CloudFormation template: {exc}") from exc
    if not isinstance(template, dict) or not isinstance(template.get("Resources"), dict):
        raise TemplateError(f"{source}: not a CloudFormation template (no Resources mapping)")
    return template


def _resolve(expr: Any, template: Mapping[str, Any], params: Mapping[str, str]) -> Any:
    """A Ref / Fn::If / condition expression against the stack's parameters ("?" when it cannot say)."""
    if not isinstance(expr, dict) or len(expr) != 1:
        return expr
    (key, arg), = expr.items()
    if key == "Ref":
        return params.get(arg, "?")
    if key == "Condition":
        return _resolve(template.get("Conditions", {}).get(arg), template, params)
    if key == "Fn::If":
        return _resolve(arg[1] if _resolve({"Condition": arg[0]}, template, params) is True else arg[2], template, params)
    if key == "Fn::Equals":
        return str(_resolve(arg[0], template, params)) == str(_resolve(arg[1], template, params))
    if key == "Fn::Not":
        return not _resolve(arg[0], template, params)
    if key in ("Fn::And", "Fn::Or"):
        values = [_resolve(a, template, params) is True for a in arg]
        return all(values) if key == "Fn::And" else any(values)
    return "?"


def update_policy_line(template: Mapping[str, Any], logical_id: str, params: Mapping[str, str]) -> str:
    """How CloudFormation replaces the group's nodes on this update (its UpdatePolicy). Pure."""
    policy = template.get("Resources", {}).get(logical_id, {}).get("UpdatePolicy", {})
    if _resolve(policy.get("AutoScalingReplacingUpdate", {}).get("WillReplace"), template, params) in (True, "true"):
        return f"{logical_id}: replacing update (a new Auto Scaling group, then the old one is deleted)"
    roll = policy.get("AutoScalingRollingUpdate")
    if roll is None:
        return (f"{logical_id}: no rolling update policy; the group launches new nodes from the new version, "
                "running nodes are not replaced")
    def text(value: Any) -> str:
        return str(value).lower() if isinstance(value, bool) else str(value)

    shown = ", ".join(f"{key} {text(_resolve(roll[key], template, params))}" for key in (
        "MaxBatchSize", "MinInstancesInService", "PauseTime", "WaitOnResourceSignals") if key in roll)
    return f"{logical_id}: rolling update ({shown})"


# ---------------------------------------------------------------------------------- states


class StackState(enum.Enum):
    READY = "ready"
    ROLLED_BACK = "rolled back"  # the last update was undone; the stack can be updated again
    BUSY = "in progress"
    FAILED = "failed"  # cannot be updated until someone repairs or deletes it
    GONE = "gone"


_STACK_STATES = {
    **dict.fromkeys(("CREATE_COMPLETE", "UPDATE_COMPLETE", "IMPORT_COMPLETE"), StackState.READY),
    **dict.fromkeys(("UPDATE_ROLLBACK_COMPLETE", "IMPORT_ROLLBACK_COMPLETE"), StackState.ROLLED_BACK),
    **dict.fromkeys((
        "CREATE_IN_PROGRESS", "ROLLBACK_IN_PROGRESS", "DELETE_IN_PROGRESS", "UPDATE_IN_PROGRESS",
        "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS", "UPDATE_ROLLBACK_IN_PROGRESS",
        "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS", "IMPORT_IN_PROGRESS", "IMPORT_ROLLBACK_IN_PROGRESS",
    ), StackState.BUSY),
    **dict.fromkeys((
        "CREATE_FAILED", "ROLLBACK_COMPLETE", "ROLLBACK_FAILED", "UPDATE_FAILED", "UPDATE_ROLLBACK_FAILED",
        "DELETE_FAILED", "IMPORT_ROLLBACK_FAILED",
    ), StackState.FAILED),
    # REVIEW_IN_PROGRESS: only a CREATE change set exists, no resource.
    **dict.fromkeys(("DELETE_COMPLETE", "REVIEW_IN_PROGRESS"), StackState.GONE),
}
_NODEGROUP_STATES = {
    "ACTIVE": StackState.READY, "DEGRADED": StackState.READY,
    "CREATING": StackState.BUSY, "UPDATING": StackState.BUSY, "DELETING": StackState.BUSY,
    "CREATE_FAILED": StackState.FAILED, "DELETE_FAILED": StackState.FAILED,
}


def stack_state(status: str) -> StackState:
    """A CloudFormation stack status collapsed; an unknown one is an error, not a guess."""
    return _collapse(_STACK_STATES, status, "CloudFormation stack")


def nodegroup_state(status: str) -> StackState:
    return _collapse(_NODEGROUP_STATES, status, "EKS node group")


def _collapse(table: Mapping[str, StackState], status: str, kind: str) -> StackState:
    if status not in table:
        raise AmibuildError(f"unknown {kind} status {status!r}; amibuild does not know what it means")
    return table[status]


# --------------------------------------------------------------------- change set, events


def token(kind: str) -> str:
    return f"amibuild-{kind}-{time.strftime('%Y%m%d%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:6]}"


def change_lines(change_set: ChangeSet) -> tuple[str, ...]:
    """One line per resource a change set touches. Pure."""
    replaced = {"True": ", replaced", "Conditional": ", maybe replaced"}
    lines = tuple(f"{rc.action} {rc.logical_id} ({rc.resource_type}){replaced.get(rc.replacement, '')}"
                  + (f": {', '.join(rc.targets)}" if rc.targets else "") for rc in change_set.changes)
    return lines or ("CloudFormation lists no resource change",)


def make_change_set(aws: Aws, stack: str, region: str, parameters: Sequence[Mapping[str, Any]],
                    capabilities: Sequence[str], say: Say, *, poll: float,
                    template_body: str | None = None) -> tuple[str, tuple[str, ...]] | None:
    """Create an UPDATE change set and print what it changes: (name, change lines), or None
    (nothing deleted, nothing left) when CloudFormation finds nothing to change."""
    name = token("rollout")
    created = aws.create_change_set(stack, region, name=name, parameters=parameters, template_body=template_body,
                                    capabilities=capabilities or ("CAPABILITY_IAM",), description="amibuild")
    if created is None:
        say(f"stack {stack}: CloudFormation reports no updates to perform")
        return None
    try:
        waited = until(lambda: aws.describe_change_set(stack, region, name), timeout=CHANGE_SET_TIMEOUT,
                       interval=poll, done=lambda described: described.status not in ("CREATE_PENDING",
                                                                                      "CREATE_IN_PROGRESS"))
    except AmibuildError as exc:
        raise RolloutFailed(f"stack {stack}: change set {name} could not be read: {exc}; "
                            + _given_up(aws, stack, region, name)) from exc
    except KeyboardInterrupt:  # Ctrl-C
        raise Interrupted(f"interrupted: stack {stack}'s change set {name} was not executed; "
                          + _given_up(aws, stack, region, name), summary=True) from None
    described = waited.value
    if waited.timed_out:
        raise RolloutFailed(f"stack {stack}: change set {name} still {described.status} after "
                            f"{CHANGE_SET_TIMEOUT:.0f} s; " + _given_up(aws, stack, region, name))
    if described.status != "CREATE_COMPLETE":
        reason = described.reason or described.status
        aws.delete_change_set(stack, region, name)
        if any(words in str(reason) for words in _NO_CHANGES):
            say(f"stack {stack}: CloudFormation reports no changes ({reason})")
            return None
        raise RolloutFailed(f"stack {stack}: change set {name} failed: {reason}")
    if described.execution_status not in ("", "AVAILABLE"):  # the stack was updated meanwhile, or is being
        aws.delete_change_set(stack, region, name)
        raise RolloutFailed(f"stack {stack}: change set {name} cannot be executed (ExecutionStatus "
                            f"{described.execution_status}): another update of the stack came first; it was "
                            "deleted: run the same command again once the stack is ready")
    lines = change_lines(described)
    say(f"stack {stack}: change set {name}:")
    for line in lines:
        say(f"  {line}")
    return name, lines


def _given_up(aws: Aws, stack: str, region: str, name: str) -> str:
    """Delete a change set amibuild gives up on (it changed nothing yet); what became of it, in words."""
    try:
        aws.delete_change_set(stack, region, name)
    except AmibuildError as exc:
        return (f"it is left behind ({exc}): aws cloudformation delete-change-set --stack-name {stack} "
                f"--change-set-name {name} --region {region}")
    return "it was deleted, the stack is unchanged"


def event_line(event: StackEvent) -> str:
    clock = event.timestamp.strftime("%H:%M:%S") if event.timestamp else ""
    return (f"  {clock}  {event.logical_id} ({event.resource_type})  {event.status}"
            + (f"  {event.reason}" if event.reason else ""))


def follow(aws: Aws, stack: str, region: str, *, since: str | None, say: Say, poll: float, timeout: float) -> str:
    """Print each new stack event until the stack reaches a final state: that status, or `RolloutFailed`
    naming the root cause when it is not ready."""
    seen: list[StackEvent] = []

    def status() -> str:
        """The stack's status, once its new events are said."""
        nonlocal since, seen
        found = aws.describe_stack(stack, region)
        if found is None:
            raise RolloutFailed(f"stack {stack} disappeared while amibuild was following it")
        new = list(reversed(aws.stack_events_since(stack, region, since)))
        for event in new:
            say(event_line(event))
        since, seen = (new[-1].event_id if new else since), seen + new
        return found.status

    goes_on = "CloudFormation goes on without amibuild: run the same command again later to check the result"
    try:
        waited = until(status, done=lambda status: stack_state(status) is not StackState.BUSY, timeout=timeout,
                       interval=poll)
    except KeyboardInterrupt:  # Ctrl-C
        raise Interrupted(f"interrupted while following stack {stack}; {goes_on}", summary=True) from None
    if waited.timed_out:
        raise RolloutFailed(f"stack {stack} is still {waited.value} after {timeout:.0f} s; {goes_on}")
    state = stack_state(waited.value)
    if state is not StackState.READY:
        cause = root_cause(seen) or "no failed resource among its events"
        undone = "; CloudFormation rolled the change back" if state is StackState.ROLLED_BACK else ""
        raise RolloutFailed(f"stack {stack} ended {waited.value}: {cause}{undone}")
    return waited.value


def root_cause(events: Sequence[StackEvent]) -> str:
    """The first resource that failed, and why (cancellations are consequences, not causes). Pure."""
    failed = [e for e in events if e.status.endswith("_FAILED")]
    causes = [e for e in failed if "cancelled" not in e.reason.lower()] or failed
    if not causes:
        return ""
    e = causes[0]
    return f"{e.logical_id} ({e.resource_type}) {e.status}: {e.reason or 'no reason given'}"


def execute_change_set(aws: Aws, stack: str, region: str, change_set: str, say: Say, *, wait: bool, poll: float,
                       timeout: float) -> str:
    """Execute a change set made by `make_change_set`; with ``wait``, follow the events to a final state
    and raise `RolloutFailed` (naming the root cause) unless the stack ended ready."""
    latest = aws.latest_stack_event(stack, region)
    aws.execute_change_set(stack, region, change_set, token=token("execute"))
    say(f"stack {stack}: executing change set {change_set}")
    if not wait:
        return "UPDATE_IN_PROGRESS"
    return follow(aws, stack, region, since=latest.event_id if latest else None, say=say, poll=poll, timeout=timeout)
