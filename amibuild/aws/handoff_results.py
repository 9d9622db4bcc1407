"""Typed results of the hand-off calls (CloudFormation, Auto Scaling, launch templates, EKS), and
the pure functions that make them from AWS's answers.

The gateway (`amibuild.aws.Aws`) parses every answer here, at the boundary, so the rollout and
deploy code reads named fields rather than response dicts; the parsers are plain functions, fed
recorded answers in the tests. Each value keeps only what amibuild uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping


# ---------------------------------------------------------------------------------- stacks


@dataclass(frozen=True)
class StackParameter:
    value: str
    resolved: str | None = None  # ResolvedValue, for an SSM-typed parameter


@dataclass(frozen=True)
class Stack:
    """A CloudFormation stack as DescribeStacks shows it."""

    name: str
    status: str
    parameters: Mapping[str, StackParameter]  # in the stack's own order
    outputs: Mapping[str, str] = field(default_factory=dict)
    capabilities: tuple[str, ...] = ()


def parse_stack(raw: Mapping[str, Any]) -> Stack:
    return Stack(
        name=raw.get("StackName", ""),
        status=raw["StackStatus"],
        parameters={p["ParameterKey"]: StackParameter(p.get("ParameterValue", ""), p.get("ResolvedValue"))
                    for p in raw.get("Parameters", [])},
        outputs={o["OutputKey"]: o.get("OutputValue", "") for o in raw.get("Outputs", [])},
        capabilities=tuple(raw.get("Capabilities") or ()),
    )


@dataclass(frozen=True)
class StackResource:
    logical_id: str
    physical_id: str
    type: str


def parse_stack_resource(raw: Mapping[str, Any]) -> StackResource:
    return StackResource(raw["LogicalResourceId"], raw.get("PhysicalResourceId", ""), raw.get("ResourceType", ""))


@dataclass(frozen=True)
class StackEvent:
    event_id: str
    timestamp: datetime | None
    logical_id: str
    resource_type: str
    status: str
    reason: str = ""


def parse_stack_event(raw: Mapping[str, Any]) -> StackEvent:
    when = raw.get("Timestamp")
    return StackEvent(
        event_id=raw.get("EventId", ""),
        timestamp=when if isinstance(when, datetime) else None,
        logical_id=raw.get("LogicalResourceId", "?"),
        resource_type=raw.get("ResourceType", "?"),
        status=raw.get("ResourceStatus", "?"),
        reason=raw.get("ResourceStatusReason") or "",
    )


@dataclass(frozen=True)
class ResourceChange:
    """One resource a change set touches."""

    action: str  # Add, Modify, Remove, ...
    logical_id: str
    resource_type: str
    replacement: str = ""  # True, False, Conditional ("" when not a Modify)
    targets: tuple[str, ...] = ()  # the properties or attributes that change, sorted


@dataclass(frozen=True)
class ChangeSet:
    name: str
    status: str  # CREATE_PENDING, CREATE_IN_PROGRESS, CREATE_COMPLETE, FAILED, ...
    reason: str
    changes: tuple[ResourceChange, ...] = ()
    execution_status: str = ""  # AVAILABLE once it can be executed; UNAVAILABLE, OBSOLETE, EXECUTE_* otherwise


def parse_change_set(raw: Mapping[str, Any]) -> ChangeSet:
    """DescribeChangeSet, its changes of every page gathered under ``Changes``."""
    changes = []
    for change in raw.get("Changes", []):
        rc = change.get("ResourceChange", {})
        targets = sorted({d.get("Target", {}).get("Name", "") for d in rc.get("Details", [])} - {""})
        changes.append(ResourceChange(rc.get("Action", "?"), rc.get("LogicalResourceId", "?"),
                                      rc.get("ResourceType", "?"), rc.get("Replacement", ""), tuple(targets)))
    return ChangeSet(raw.get("ChangeSetName", ""), raw.get("Status", ""), raw.get("StatusReason") or "",
                     tuple(changes), raw.get("ExecutionStatus", ""))


# ------------------------------------------------------------------- groups and templates


@dataclass(frozen=True)
class LaunchTemplateRef:
    """A launch template as a group names it."""

    template_id: str  # its id, or its name when only that is given
    version: str  # as named: a number, $Latest or $Default


def _launch_template_ref(spec: Mapping[str, Any] | None) -> LaunchTemplateRef | None:
    if not spec:
        return None
    template_id = spec.get("LaunchTemplateId") or spec.get("id") or spec.get("LaunchTemplateName") or spec.get("name")
    return LaunchTemplateRef(str(template_id), str(spec.get("Version") or spec.get("version") or "$Default"))


@dataclass(frozen=True)
class AutoScalingGroup:
    name: str
    launch_template: LaunchTemplateRef | None  # None: a launch configuration
    instance_versions: tuple[str, ...] = ()  # the launch template version each instance runs ("?" unknown)


def parse_auto_scaling_group(raw: Mapping[str, Any]) -> AutoScalingGroup:
    # the launch template it names, directly or in its mixed instances policy
    spec = raw.get("LaunchTemplate") or raw.get("MixedInstancesPolicy", {}).get(
        "LaunchTemplate", {}).get("LaunchTemplateSpecification")
    return AutoScalingGroup(
        name=raw.get("AutoScalingGroupName", ""),
        launch_template=_launch_template_ref(spec),
        instance_versions=tuple(str(i.get("LaunchTemplate", {}).get("Version", "?")) for i in raw.get("Instances", [])),
    )


@dataclass(frozen=True)
class LaunchTemplateVersion:
    template_id: str
    number: int
    image_id: str | None  # None: the version sets no ImageId


def parse_launch_template_version(raw: Mapping[str, Any]) -> LaunchTemplateVersion:
    return LaunchTemplateVersion(raw.get("LaunchTemplateId", ""), int(raw["VersionNumber"]),
                                 raw.get("LaunchTemplateData", {}).get("ImageId"))


# ------------------------------------------------------------------------------------- EKS


@dataclass(frozen=True)
class Nodegroup:
    cluster: str
    name: str
    status: str
    launch_template: LaunchTemplateRef | None  # None: EKS picks the AMI (ami_type)
    ami_type: str = ""


def parse_nodegroup(raw: Mapping[str, Any]) -> Nodegroup:
    return Nodegroup(raw.get("clusterName", ""), raw.get("nodegroupName", ""), raw.get("status", ""),
                     _launch_template_ref(raw.get("launchTemplate")), raw.get("amiType", ""))


@dataclass(frozen=True)
class NodegroupUpdate:
    id: str
    status: str  # InProgress, Successful, Failed, Cancelled
    errors: tuple[str, ...] = ()  # "code: message (resource, ...)" each


def parse_nodegroup_update(raw: Mapping[str, Any]) -> NodegroupUpdate:
    errors = tuple(f"{e.get('errorCode')}: {e.get('errorMessage')}" + (
        f" ({', '.join(e['resourceIds'])})" if e.get("resourceIds") else "") for e in raw.get("errors", []))
    return NodegroupUpdate(raw["id"], raw.get("status", ""), errors)
