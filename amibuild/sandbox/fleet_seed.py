"""A fleet in the sandbox: node group stacks, managed node groups, launch templates and instances.

`amibuild fleet` needs consumers to show. `seed_fleet` makes them in a running sandbox, through
the emulator's own API (as a user's tools would): stacks following a channel's parameter (a
launch template and an Auto Scaling group, as amibuild's node group template has them), EKS
managed node groups in the sandbox cluster launching from a launch template, launch templates
nobody uses, and instances, some tagged as Karpenter tags the nodes it launches
(``karpenter.sh/nodepool``, ``karpenter.k8s.aws/ec2nodeclass``). `demo_seed` is the demo's:
two stacks, a managed node group and instances of three images, two of them Karpenter's.

Parent side: plain boto3 against the sandbox endpoint, like `amibuild.sandbox.eks_cluster.sandbox_cluster`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import boto3

from amibuild.aws import models
from amibuild.sandbox.eks_cluster import SANDBOX_CLUSTER

KARPENTER_NODEPOOL = "karpenter.sh/nodepool"
KARPENTER_NODECLASS = "karpenter.k8s.aws/ec2nodeclass"
RUN_BATCH = 100  # instances per RunInstances call


def karpenter_tags(nodepool: str, nodeclass: str) -> dict[str, str]:
    """The tags Karpenter puts on the instances it launches for a node pool and EC2NodeClass."""
    return {KARPENTER_NODEPOOL: nodepool, KARPENTER_NODECLASS: nodeclass, "karpenter.sh/managed-by": SANDBOX_CLUSTER}


@dataclass(frozen=True)
class FleetSeed:
    stacks: tuple[tuple[str, str], ...] = ()  # (stack name, the channel parameter it follows)
    nodegroups: tuple[tuple[str, str], ...] = ()  # (managed node group name, image id of its launch template)
    launch_templates: tuple[tuple[str, str], ...] = ()  # (name, image id): templates nothing launches from
    instances: tuple[tuple[str, int, Mapping[str, str]], ...] = ()  # (image id, how many, tags)
    stack_capacity: int = 1  # instances each stack's group runs


@dataclass(frozen=True)
class Seeded:
    stacks: tuple[str, ...] = ()
    nodegroups: tuple[str, ...] = ()
    launch_templates: tuple[str, ...] = ()
    instances: tuple[str, ...] = ()
    images: Mapping[str, str] = field(default_factory=dict)  # what the demo seeded from: role -> image id


def _template(parameter: str, capacity: int, subnets: Sequence[str]) -> str:
    """A node group stack reduced to what a rollout reads: NodeImageIdSSMParam, a launch template, a group."""
    return json.dumps({
        "Parameters": {"NodeImageIdSSMParam": {
            "Type": "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>", "Default": parameter}},
        "Resources": {
            "NodeLaunchTemplate": {"Type": "AWS::EC2::LaunchTemplate", "Properties": {"LaunchTemplateData": {
                "ImageId": {"Ref": "NodeImageIdSSMParam"}, "InstanceType": "m6i.large"}}},
            "NodeGroup": {"Type": "AWS::AutoScaling::AutoScalingGroup", "Properties": {
                "MinSize": str(capacity), "MaxSize": str(max(capacity, 1) * 2), "DesiredCapacity": str(capacity),
                "VPCZoneIdentifier": list(subnets),
                "LaunchTemplate": {"LaunchTemplateId": {"Ref": "NodeLaunchTemplate"},
                                   "Version": {"Fn::GetAtt": ["NodeLaunchTemplate", "LatestVersionNumber"]}}}},
        },
    })


def _clients(endpoint: str, region: str) -> dict[str, Any]:
    session = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=region)
    models.share_loader(session)  # the process's parsed service models, as the gateway's sessions use
    return {name: session.client(name, endpoint_url=endpoint) for name in ("ec2", "cloudformation", "eks")}


def seed_fleet(endpoint: str, region: str, seed: FleetSeed) -> Seeded:
    """Make the consumers `seed` describes in one region of the running sandbox at `endpoint`."""
    clients = _clients(endpoint, region)
    ec2, cfn, eks = clients["ec2"], clients["cloudformation"], clients["eks"]
    vpc = eks.describe_cluster(name=SANDBOX_CLUSTER)["cluster"]["resourcesVpcConfig"]
    subnets = sorted(vpc["subnetIds"])
    for name, parameter in seed.stacks:
        cfn.create_stack(StackName=name, TemplateBody=_template(parameter, seed.stack_capacity, subnets))
    templates = []
    for name, image in seed.launch_templates:
        templates.append(ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={
            "ImageId": image, "InstanceType": "m6i.large"})["LaunchTemplate"]["LaunchTemplateId"])
    for name, image in seed.nodegroups:
        template = ec2.create_launch_template(LaunchTemplateName=f"{name}-nodes", LaunchTemplateData={
            "ImageId": image, "InstanceType": "m6i.large"})["LaunchTemplate"]["LaunchTemplateId"]
        eks.create_nodegroup(clusterName=SANDBOX_CLUSTER, nodegroupName=name, subnets=subnets,
                             nodeRole=f"arn:aws:iam::123456789012:role/{name}-node",
                             launchTemplate={"id": template, "version": "1"})
    launched: list[str] = []
    for image, count, tags in seed.instances:
        spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}] if tags else []
        left = count
        while left > 0:
            batch = min(left, RUN_BATCH)
            raw = ec2.run_instances(ImageId=image, MinCount=batch, MaxCount=batch, InstanceType="m6i.large",
                                    SubnetId=subnets[0], **({"TagSpecifications": spec} if spec else {}))
            launched += [i["InstanceId"] for i in raw["Instances"]]
            left -= batch
    return Seeded(tuple(n for n, _ in seed.stacks), tuple(n for n, _ in seed.nodegroups), tuple(templates),
                  tuple(launched))


def demo_seed(endpoint: str, region: str, *, stable: str, recommended: str, other: str) -> Seeded:
    """The demo's fleet beside its own stack: `stable`, `recommended` (ceph's) and `other` (another
    variant's recommended) are parameter names. Before the rollout: a second stack on ceph's
    `recommended`, a managed node group and two Karpenter nodes on the image `stable` held first,
    an instance of the other variant's image."""
    ssm = boto3.client("ssm", region_name=region, endpoint_url=endpoint,
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    history = [p["Value"] for page in ssm.get_paginator("get_parameter_history").paginate(Name=stable)
               for p in page["Parameters"]]
    first = history[0]
    other_image = ssm.get_parameter(Name=other)["Parameter"]["Value"]
    seed = FleetSeed(stacks=(("ng-demo-recommended", recommended),), nodegroups=(("mng-demo", first),),
                     instances=((first, 2, karpenter_tags("default", "ceph-stable")), (other_image, 1, {})))
    seeded = seed_fleet(endpoint, region, seed)
    return Seeded(seeded.stacks, seeded.nodegroups, seeded.launch_templates, seeded.instances,
                  {"stable first": first, "other": other_image})
