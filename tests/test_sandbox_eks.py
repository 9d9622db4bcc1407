"""The emulator's EKS access entries and node group version updates (amibuild/sandbox/eks_api.py):
AWS's answers and error codes, through boto3 over HTTP."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError

from amibuild.sandbox.eks_cluster import SANDBOX_CLUSTER

REGION = "us-west-2"
ROLE = "arn:aws:iam::123456789012:role/platform/eks-nodes"
ADMIN = "arn:aws:iam::123456789012:role/admins"
VIEW = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"


def code(caught: pytest.ExceptionInfo) -> tuple[str, int]:
    error = caught.value.response
    return error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]


def test_access_entries_are_created_described_listed_and_deleted(sandbox) -> None:
    eks = boto3.client("eks", region_name=REGION)
    made = eks.create_access_entry(clusterName=SANDBOX_CLUSTER, principalArn=ROLE, type="EC2_LINUX")["accessEntry"]
    assert (made["type"], made["username"], made["kubernetesGroups"]) == (
        "EC2_LINUX", "system:node:{{EC2PrivateDNSName}}", [])
    assert made["accessEntryArn"].startswith(f"arn:aws:eks:{REGION}:123456789012:access-entry/{SANDBOX_CLUSTER}/role/")
    assert eks.describe_access_entry(clusterName=SANDBOX_CLUSTER, principalArn=ROLE)["accessEntry"] == made
    assert eks.list_access_entries(clusterName=SANDBOX_CLUSTER)["accessEntries"] == [ROLE]

    with pytest.raises(ClientError) as again:
        eks.create_access_entry(clusterName=SANDBOX_CLUSTER, principalArn=ROLE, type="EC2_LINUX")
    assert code(again) == ("ResourceInUseException", 409)
    with pytest.raises(ClientError) as groups:  # non-STANDARD entries take no groups or username
        eks.create_access_entry(clusterName=SANDBOX_CLUSTER, principalArn=ADMIN, type="EC2_LINUX",
                                kubernetesGroups=["x"])
    assert code(groups) == ("InvalidParameterException", 400)
    with pytest.raises(ClientError) as bad:
        eks.create_access_entry(clusterName=SANDBOX_CLUSTER, principalArn="arn:aws:iam::123456789012:instance-profile/x")
    assert code(bad) == ("InvalidParameterException", 400)
    with pytest.raises(ClientError) as policy:  # policies are for STANDARD entries only
        eks.associate_access_policy(clusterName=SANDBOX_CLUSTER, principalArn=ROLE, policyArn=VIEW,
                                    accessScope={"type": "cluster"})
    assert code(policy) == ("InvalidRequestException", 400)

    eks.create_access_entry(clusterName=SANDBOX_CLUSTER, principalArn=ADMIN)
    associated = eks.associate_access_policy(clusterName=SANDBOX_CLUSTER, principalArn=ADMIN, policyArn=VIEW,
                                             accessScope={"type": "namespace", "namespaces": ["ops"]})
    assert associated["associatedAccessPolicy"]["accessScope"] == {"type": "namespace", "namespaces": ["ops"]}
    assert eks.list_access_entries(clusterName=SANDBOX_CLUSTER, associatedPolicyArn=VIEW)["accessEntries"] == [ADMIN]
    assert eks.describe_access_entry(clusterName=SANDBOX_CLUSTER, principalArn=ADMIN)["accessEntry"]["username"] == ADMIN

    eks.delete_access_entry(clusterName=SANDBOX_CLUSTER, principalArn=ROLE)
    with pytest.raises(ClientError) as gone:
        eks.describe_access_entry(clusterName=SANDBOX_CLUSTER, principalArn=ROLE)
    assert code(gone) == ("ResourceNotFoundException", 404)
    with pytest.raises(ClientError) as no_cluster:
        eks.list_access_entries(clusterName="nope")
    assert code(no_cluster) == ("ResourceNotFoundException", 404)

    sandbox.reset()  # the entries live on the cluster: a reset drops them with it
    assert eks.list_access_entries(clusterName=SANDBOX_CLUSTER)["accessEntries"] == []


def test_a_config_map_cluster_refuses_access_entries(sandbox) -> None:
    eks = boto3.client("eks", region_name=REGION)
    subnets = eks.describe_cluster(name=SANDBOX_CLUSTER)["cluster"]["resourcesVpcConfig"]["subnetIds"]
    eks.create_cluster(name="old", roleArn="arn:aws:iam::123456789012:role/c", resourcesVpcConfig={"subnetIds": subnets})
    with pytest.raises(ClientError) as caught:
        eks.create_access_entry(clusterName="old", principalArn=ROLE, type="EC2_LINUX")
    assert code(caught) == ("InvalidRequestException", 400)
    assert "authentication mode" in str(caught.value)


def nodegroup_with_template(eks, ec2) -> str:
    subnets = eks.describe_cluster(name=SANDBOX_CLUSTER)["cluster"]["resourcesVpcConfig"]["subnetIds"]
    image = ec2.describe_images(Owners=["602401143452"])["Images"][0]["ImageId"]
    template = ec2.create_launch_template(LaunchTemplateName="mng", LaunchTemplateData={
        "ImageId": image, "InstanceType": "m6i.large"})["LaunchTemplate"]["LaunchTemplateId"]
    eks.create_nodegroup(clusterName=SANDBOX_CLUSTER, nodegroupName="mng", subnets=subnets,
                         nodeRole="arn:aws:iam::123456789012:role/n", launchTemplate={"id": template, "version": "1"})
    ec2.create_launch_template_version(LaunchTemplateId=template, SourceVersion="1", LaunchTemplateData={
        "ImageId": image})
    return template


def test_update_nodegroup_version_starts_in_progress_and_completes_at_the_next_read(sandbox) -> None:
    eks, ec2 = boto3.client("eks", region_name=REGION), boto3.client("ec2", region_name=REGION)
    template = nodegroup_with_template(eks, ec2)

    update = eks.update_nodegroup_version(clusterName=SANDBOX_CLUSTER, nodegroupName="mng",
                                          launchTemplate={"id": template, "version": "2"})["update"]
    assert (update["status"], update["type"]) == ("InProgress", "VersionUpdate")
    assert {"type": "LaunchTemplateVersion", "value": "2"} in update["params"]
    with pytest.raises(ClientError) as busy:  # one update at a time: the second is refused until it is done
        eks.update_nodegroup_version(clusterName=SANDBOX_CLUSTER, nodegroupName="mng",
                                     launchTemplate={"id": template, "version": "2"})
    assert code(busy) == ("ResourceInUseException", 409)

    described = eks.describe_update(name=SANDBOX_CLUSTER, nodegroupName="mng", updateId=update["id"])["update"]
    assert described["status"] == "Successful"
    group = eks.describe_nodegroup(clusterName=SANDBOX_CLUSTER, nodegroupName="mng")["nodegroup"]
    assert (group["status"], group["launchTemplate"]["version"]) == ("ACTIVE", "2")
    assert eks.list_updates(name=SANDBOX_CLUSTER, nodegroupName="mng")["updateIds"] == [update["id"]]

    for template_ref, words in [({"id": "lt-0123456789abcdef0", "version": "1"}, "must be the one the node group uses"),
                                ({"id": template, "version": "9"}, "has no version 9")]:
        with pytest.raises(ClientError) as refused:
            eks.update_nodegroup_version(clusterName=SANDBOX_CLUSTER, nodegroupName="mng", launchTemplate=template_ref)
        assert code(refused) == ("InvalidParameterException", 400) and words in str(refused.value)
    with pytest.raises(ClientError) as custom:
        eks.update_nodegroup_version(clusterName=SANDBOX_CLUSTER, nodegroupName="mng", version="1.35",
                                     launchTemplate={"id": template, "version": "2"})
    assert code(custom) == ("InvalidParameterException", 400)
    with pytest.raises(ClientError) as missing:
        eks.describe_update(name=SANDBOX_CLUSTER, nodegroupName="mng", updateId="nope")
    assert code(missing) == ("ResourceNotFoundException", 404)
    with pytest.raises(ClientError) as no_group:
        eks.update_nodegroup_version(clusterName=SANDBOX_CLUSTER, nodegroupName="nope")
    assert code(no_group) == ("ResourceNotFoundException", 404)
