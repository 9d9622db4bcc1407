"""The sandbox's EKS cluster, and the two emulator gaps a node group hand-off runs into.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

SANDBOX_CLUSTER = "amibuild-sandbox"
SANDBOX_CLUSTER_VERSION = "1.35"
SANDBOX_SERVICE_CIDR = "172.20.0.0/16"  # what EKS picks for a VPC in 10.0.0.0/8, as the sandbox's is
AUTHENTICATION_MODE = "API_AND_CONFIG_MAP"


def create_cluster(ec2: Any, region: str, *, account: str, vpc_cidr: str) -> None:
    """The sandbox's EKS cluster in the sandbox VPC (`vpc_cidr`), with its control plane security group."""
    from moto.eks.models import eks_backends

    vpc = next(v for v in ec2.vpcs.values() if v.cidr_block == vpc_cidr)
    subnets = sorted(s.id for s in ec2.describe_subnets(filters={"vpc-id": [vpc.id]}))
    group = ec2.create_security_group(name=f"eks-cluster-sg-{SANDBOX_CLUSTER}",
                                      description=f"EKS control plane of {SANDBOX_CLUSTER}", vpc_id=vpc.id)
    cluster = eks_backends[account][region].create_cluster(
        name=SANDBOX_CLUSTER, role_arn=f"arn:aws:iam::{account}:role/{SANDBOX_CLUSTER}-cluster",
        version=SANDBOX_CLUSTER_VERSION,
        resources_vpc_config={"vpcId": vpc.id, "subnetIds": subnets, "securityGroupIds": [group.id],
                              "clusterSecurityGroupId": group.id,
                              "endpointPublicAccess": True, "endpointPrivateAccess": True},
        kubernetes_network_config={"serviceIpv4Cidr": SANDBOX_SERVICE_CIDR, "ipFamily": "ipv4"},
    )
    cluster.access_config = {"authenticationMode": AUTHENTICATION_MODE}


def fake_certificate_authority(name: str) -> str:
    """Base64 of a PEM block, as DescribeCluster gives it (moto gives random letters)."""
    body = base64.b64encode(hashlib.sha256(f"sandbox CA of {name}".encode()).digest() * 8).decode()
    pem = "-----BEGIN CERTIFICATE-----\n" + "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
    return base64.b64encode((pem + "\n-----END CERTIFICATE-----\n").encode()).decode()


def model_eks_clusters() -> None:
    """Clusters with a PEM CA and the ``accessConfig`` they were created with (see the module docstring)."""
    from moto.eks.models import Cluster
    from moto.eks.responses import EKSResponse

    original_init = Cluster.__init__

    def init(cluster: Any, *args: Any, **kwargs: Any) -> None:
        original_init(cluster, *args, **kwargs)
        cluster.certificate_authority = {"data": fake_certificate_authority(cluster.name)}

    original_create = EKSResponse.create_cluster

    def create(response: Any) -> Any:
        result = original_create(response)
        access = response._get_param("accessConfig") or {}
        if access.get("authenticationMode"):
            cluster = response.eks_backend.clusters[response._get_param("name")]
            cluster.access_config = {"authenticationMode": access["authenticationMode"]}
        return result

    Cluster.__init__ = init
    EKSResponse.create_cluster = create


def read_short_form_yaml() -> None:
    """YAML templates through amibuild's short-form loader (see the module docstring)."""
    from moto.cloudformation.models import ChangeSet, Stack

    # deferred with moto's own: this runs inside the emulator process only
    from amibuild.errors import TemplateError
    from amibuild.handoff.cfn_parts import parse_template

    original_parse = Stack.parse_template

    def parse(template: str) -> dict[str, Any]:
        if template.lstrip().startswith("{"):
            return original_parse(template)
        try:
            return parse_template(template)
        except TemplateError:
            return original_parse(template)

    original_change_set = ChangeSet._parse_template

    def parse_change_set(change_set: Any) -> None:
        if change_set.template.lstrip().startswith("{"):
            original_change_set(change_set)
        else:
            change_set.template_dict = parse(change_set.template)

    Stack.parse_template = staticmethod(parse)
    ChangeSet._parse_template = parse_change_set


def sandbox_cluster(endpoint: str, region: str) -> dict[str, Any]:
    """The seeded cluster as DescribeCluster shows it: name, VPC, subnets, control plane group."""
    import boto3

    eks = boto3.client("eks", region_name=region, endpoint_url=endpoint,
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    vpc = eks.describe_cluster(name=SANDBOX_CLUSTER)["cluster"]["resourcesVpcConfig"]
    return {"cluster": SANDBOX_CLUSTER, "vpc": vpc["vpcId"], "subnets": sorted(vpc["subnetIds"]),
            "control_plane_sg": vpc["securityGroupIds"][0]}
