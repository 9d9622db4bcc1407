"""Gateway reads of what consumes images: stacks, managed node groups, Auto Scaling groups, instances.

`amibuild.lifecycle.consumers` gathers these once for both `prune` (what must not be deleted) and
`fleet` (who runs which image). Each call is paginated and bulk: the number of calls grows with
pages (and with clusters and node groups, which EKS only describes one by one), never with
instances. Instances are read filtered by the image ids asked about, in pages of `INSTANCE_PAGE`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from amibuild.aws import Aws, mapped_errors, fan_out
from amibuild.aws.ec2 import IDS_PER_FILTER, INSTANCE_PAGE, LIVE_STATES, filter_list

KARPENTER_NODEPOOL = "karpenter.sh/nodepool"
KARPENTER_NODECLASS = "karpenter.k8s.aws/ec2nodeclass"
ASG_NAME = "aws:autoscaling:groupName"
EKS_NODEGROUP = "eks:nodegroup-name"
EKS_CLUSTER = "eks:cluster-name"
STACK_NAME = "aws:cloudformation:stack-name"  # CloudFormation's tag on what a stack made
# the instance tags the fleet groups by; the rest are not read into the facts
GROUPING_TAGS = (KARPENTER_NODEPOOL, KARPENTER_NODECLASS, ASG_NAME, EKS_NODEGROUP, EKS_CLUSTER)


@dataclass(frozen=True)
class StackImage:
    """A stack's image parameters as DescribeStacks shows them."""

    name: str
    region: str
    status: str
    ssm_parameter: str = ""  # NodeImageIdSSMParam's value: the parameter name it follows
    resolved: str = ""  # what that parameter resolved to at the stack's last create or update
    image_id: str = ""  # NodeImageId, when the stack pins an image


@dataclass(frozen=True)
class NodegroupTemplate:
    """An EKS managed node group and the launch template version it launches from."""

    cluster: str
    name: str
    region: str
    status: str
    template_id: str
    version: str


@dataclass(frozen=True)
class InstanceImage:
    instance_id: str
    state: str
    image_id: str
    tags: Mapping[str, str] = field(default_factory=dict)  # only GROUPING_TAGS


@dataclass(frozen=True)
class AutoScalingGroups:
    """What DescribeAutoScalingGroups says of every group in a region: the launch templates each names
    (its own, its mixed instances policy's, and those of the policy's overrides) as (group, template
    id, template name, version), and the stack that made each group (CloudFormation's
    ``aws:cloudformation:stack-name`` tag)."""

    refs: tuple[tuple[str, str, str, str], ...] = ()
    stacks: Mapping[str, str] = field(default_factory=dict)  # group name -> stack name


def auto_scaling_groups(aws: Aws, region: str) -> AutoScalingGroups:
    """Every Auto Scaling group's launch templates and stack, from DescribeAutoScalingGroups' pages."""
    refs: list[tuple[str, str, str, str]] = []
    stacks: dict[str, str] = {}
    with mapped_errors("autoscaling:DescribeAutoScalingGroups", region):
        pages = aws.client("autoscaling", region).get_paginator("describe_auto_scaling_groups").paginate()
        for page in pages:
            for group in page.get("AutoScalingGroups", []):
                name = group["AutoScalingGroupName"]
                mixed = group.get("MixedInstancesPolicy", {}).get("LaunchTemplate", {})
                specs = [group.get("LaunchTemplate"), mixed.get("LaunchTemplateSpecification"),
                         *(o.get("LaunchTemplateSpecification") for o in mixed.get("Overrides", []))]
                refs += [(name, s.get("LaunchTemplateId", ""), s.get("LaunchTemplateName", ""),
                          str(s.get("Version") or "$Default")) for s in specs if s]
                stack = next((t.get("Value", "") for t in group.get("Tags", []) if t.get("Key") == STACK_NAME), "")
                if stack:
                    stacks[name] = stack
    return AutoScalingGroups(tuple(refs), stacks)


def stack_images(aws: Aws, region: str) -> list[StackImage]:
    """Every stack that names an image parameter (NodeImageIdSSMParam or NodeImageId), from DescribeStacks' pages."""
    ssm_key, image_key = "NodeImageIdSSMParam", "NodeImageId"
    found = []
    with mapped_errors("cloudformation:DescribeStacks", region):
        for page in aws.client("cloudformation", region).get_paginator("describe_stacks").paginate():
            for raw in page.get("Stacks", []):
                params = {p["ParameterKey"]: p for p in raw.get("Parameters", [])}
                if ssm_key not in params and image_key not in params:
                    continue
                ssm = params.get(ssm_key, {})
                found.append(StackImage(raw["StackName"], region, raw.get("StackStatus", ""),
                                        ssm.get("ParameterValue", "") or "", ssm.get("ResolvedValue", "") or "",
                                        params.get(image_key, {}).get("ParameterValue", "") or ""))
    return found


def nodegroup_templates(aws: Aws, region: str) -> list[NodegroupTemplate]:
    """Managed node groups that launch from a launch template (the only ones that can run a custom AMI)."""
    eks = aws.client("eks", region)
    found = []
    with mapped_errors("eks:ListClusters", region):
        clusters = [c for page in eks.get_paginator("list_clusters").paginate() for c in page.get("clusters", [])]
    gone = contextlib.suppress(eks.exceptions.ResourceNotFoundException)  # deleted since listed: launches nothing

    def listed(cluster: str) -> list[tuple[str, str]]:
        with mapped_errors(f"eks:ListNodegroups {cluster}", region), gone:
            return [(cluster, n) for page in eks.get_paginator("list_nodegroups").paginate(clusterName=cluster)
                    for n in page.get("nodegroups", [])]
        return []

    def described(group: tuple[str, str]) -> dict:
        with mapped_errors(f"eks:DescribeNodegroup {group[0]}/{group[1]}", region), gone:
            return eks.describe_nodegroup(clusterName=group[0], nodegroupName=group[1])["nodegroup"]
        return {}

    # EKS describes node groups one by one: those calls go out at once
    names = [group for groups in fan_out(clusters, listed).values() for group in groups]
    raws = fan_out(names, described)
    for cluster, name in names:
        raw = raws[(cluster, name)]
        template = raw.get("launchTemplate") or {}
        if template.get("id") or template.get("name"):
            found.append(NodegroupTemplate(cluster, name, region, raw.get("status", ""),
                                           template.get("id", ""), str(template.get("version") or "$Default")))
    return found


def instances_of(aws: Aws, region: str, image_ids: Sequence[str]) -> list[InstanceImage]:
    """Instances not yet terminated (`LIVE_STATES`) running one of `image_ids`, filtered by AWS, pages of INSTANCE_PAGE."""
    ids = sorted(set(filter(None, image_ids)))
    found = []
    for start in range(0, len(ids), IDS_PER_FILTER):
        filters = filter_list({"image-id": ids[start:start + IDS_PER_FILTER], "instance-state-name": LIVE_STATES})
        for raw in aws.instances_where(region, Filters=filters, PaginationConfig={"PageSize": INSTANCE_PAGE}):
            tags = {t["Key"]: t["Value"] for t in raw.get("Tags", []) if t["Key"] in GROUPING_TAGS}
            found.append(InstanceImage(raw["InstanceId"], raw.get("State", {}).get("Name", ""), raw.get("ImageId", ""), tags))
    return found
