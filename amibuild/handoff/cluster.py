"""What a node group needs to know about its EKS cluster, read from DescribeCluster.

`cluster_facts` turns the DescribeCluster answer into `ClusterFacts` (pure); `read_cluster`
asks the AWS gateway. The facts feed the nodes' user data (al2023's NodeConfig needs the API
endpoint, CA and service CIDR; the proxy's NO_PROXY needs to know whether the endpoint is private)
and say how nodes get access: `node_access` reads the cluster's authentication mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

# EKS access entry type for the IAM role of self-managed Linux nodes (EKS adds the node groups).
NODE_ACCESS_ENTRY_TYPE = "EC2_LINUX"


@dataclass(frozen=True)
class ClusterFacts:
    name: str
    endpoint: str
    certificate_authority: str
    service_cidr: str
    private_endpoint: bool
    authentication_mode: str  # "" when DescribeCluster does not say (clusters before access entries)


def cluster_facts(raw: Mapping[str, Any]) -> ClusterFacts:
    """DescribeCluster's ``cluster`` as `ClusterFacts`; absent fields as AWS's defaults."""
    vpc = raw.get("resourcesVpcConfig") or {}
    network = raw.get("kubernetesNetworkConfig") or {}
    return ClusterFacts(
        name=str(raw.get("name", "")),
        endpoint=str(raw.get("endpoint") or "").rstrip("/"),
        certificate_authority=str((raw.get("certificateAuthority") or {}).get("data") or ""),
        service_cidr=str(network.get("serviceIpv4Cidr") or ""),
        # CreateCluster's default is a public endpoint only.
        private_endpoint=bool(vpc.get("endpointPrivateAccess", False)),
        authentication_mode=str((raw.get("accessConfig") or {}).get("authenticationMode") or ""),
    )


def read_cluster(aws: Any, name: str, region: str) -> ClusterFacts | None:
    """The cluster's facts, or None when it does not exist in `region`."""
    raw = aws.describe_cluster(name, region)
    return cluster_facts(raw) if raw is not None else None


@dataclass(frozen=True)
class NodeConfigFacts:
    """The cluster details al2023 user data needs: the flags given, filled in from DescribeCluster."""

    endpoint: str
    certificate_authority: str
    service_cidr: str
    private_endpoint: bool
    note: str = ""  # why DescribeCluster was not used ("" when it was, or was not needed)


def node_access(cluster: str, mode: str, *, stack: str) -> str:
    """What gives the nodes of `stack` access to `cluster` under its authentication mode: one line with the command."""
    entry = f"amibuild aws-auth --stack {stack} --access-entry --cluster {cluster}"
    config_map = f"amibuild aws-auth --stack {stack}"
    if mode == "API":
        return f"{entry}   (cluster {cluster} authenticates with access entries only: API mode)"
    if mode == "API_AND_CONFIG_MAP":
        return (f"{entry}   (cluster {cluster} takes access entries or aws-auth; access entries are the current "
                f"way; `{config_map}` prints the aws-auth entry instead)")
    if mode == "CONFIG_MAP":
        return f"{config_map}   (cluster {cluster} reads only the aws-auth ConfigMap: CONFIG_MAP mode)"
    return (f"{config_map}   (the mapRoles entry; if cluster {cluster} uses access entries, add "
            f"--access-entry --cluster {cluster} instead)")
