"""EKS calls of the gateway: managed node groups, clusters and access entries."""

from __future__ import annotations

from typing import Any

from amibuild.errors import NotFound
from amibuild.aws import handoff_results as results
from amibuild.aws.error_map import mapped_errors


class EksCalls:
    """EKS calls; mixed into `amibuild.aws.Aws` (needs `Session`'s clients)."""

    def describe_nodegroup(self, cluster: str, name: str, region: str) -> results.Nodegroup | None:
        try:
            with mapped_errors(f"eks:DescribeNodegroup {cluster}/{name}", region):
                raw = self.client("eks", region).describe_nodegroup(clusterName=cluster, nodegroupName=name)["nodegroup"]
        except NotFound:
            return None
        return results.parse_nodegroup(raw)

    def update_nodegroup_version(self, cluster: str, name: str, region: str, *, template_id: str,
                                 version: str) -> results.NodegroupUpdate:
        """Roll a managed node group to a launch template version; the update (id, status)."""
        with mapped_errors(f"eks:UpdateNodegroupVersion {cluster}/{name}", region):
            return results.parse_nodegroup_update(self.client("eks", region).update_nodegroup_version(
                clusterName=cluster, nodegroupName=name, launchTemplate={"id": template_id, "version": str(version)},
            )["update"])

    def describe_nodegroup_update(self, cluster: str, name: str, update_id: str, region: str) -> results.NodegroupUpdate:
        with mapped_errors(f"eks:DescribeUpdate {update_id}", region):
            return results.parse_nodegroup_update(self.client("eks", region).describe_update(
                name=cluster, nodegroupName=name, updateId=update_id
            )["update"])

    def describe_cluster(self, name: str, region: str) -> dict[str, Any] | None:
        """The EKS cluster (endpoint, CA, network, access config); None when it does not exist."""
        try:
            with mapped_errors(f"eks:DescribeCluster {name}", region):
                return self.client("eks", region).describe_cluster(name=name)["cluster"]
        except NotFound:
            return None

    def create_access_entry(self, cluster: str, principal_arn: str, region: str, *, entry_type: str) -> str:
        """Create an EKS access entry for `principal_arn`: "" when created, else the type of the one there."""
        client = self.client("eks", region)
        with mapped_errors(f"eks:CreateAccessEntry {cluster}", region):
            try:
                client.create_access_entry(clusterName=cluster, principalArn=principal_arn, type=entry_type)
                return ""
            except client.exceptions.ResourceInUseException:
                pass
        with mapped_errors(f"eks:DescribeAccessEntry {cluster}", region):
            return client.describe_access_entry(clusterName=cluster, principalArn=principal_arn)["accessEntry"]["type"]
