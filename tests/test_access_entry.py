"""Node access the current way: EKS access entries beside the aws-auth ConfigMap entry.

The request amibuild sends and its handling of EKS's answers (refusals included) are checked here with
botocore's Stubber on the gateway's own client; the sandbox serves access entries too
(tests/test_sandbox_eks.py, and `aws-auth --access-entry` end to end in tests/test_first_hour.py).
"""

from __future__ import annotations

import pytest
import yaml
from botocore.stub import Stubber

from amibuild.aws import Aws
from amibuild.errors import SpecError
from amibuild.handoff.cluster import cluster_facts, node_access
from amibuild.jobs.env import Env
from amibuild.jobs.node_commands import aws_auth
from amibuild.jobs.requests_nodes import AwsAuthRequest

ROLE = "arn:aws:iam::111122223333:role/platform/eks-nodes"
REGION = "eu-west-1"


@pytest.fixture
def aws(monkeypatch) -> Aws:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    return Aws(region=REGION)


def test_create_access_entry_sends_an_ec2_linux_entry_for_the_role_with_its_path(aws: Aws) -> None:
    with Stubber(aws.client("eks", REGION)) as stub:
        stub.add_response("create_access_entry", {"accessEntry": {"principalArn": ROLE, "type": "EC2_LINUX"}},
                          {"clusterName": "prod", "principalArn": ROLE, "type": "EC2_LINUX"})
        assert aws.create_access_entry("prod", ROLE, REGION, entry_type="EC2_LINUX") == ""
        stub.assert_no_pending_responses()


def test_create_access_entry_is_idempotent_when_the_entry_exists(aws: Aws) -> None:
    with Stubber(aws.client("eks", REGION)) as stub:
        stub.add_client_error("create_access_entry", service_error_code="ResourceInUseException",
                              service_message="The specified access entry resource is already in use on this cluster.",
                              http_status_code=409)
        stub.add_response("describe_access_entry", {"accessEntry": {"principalArn": ROLE, "type": "EC2_LINUX"}},
                          {"clusterName": "prod", "principalArn": ROLE})
        assert aws.create_access_entry("prod", ROLE, REGION, entry_type="EC2_LINUX") == "EC2_LINUX"


def test_create_access_entry_refused_names_the_action(aws: Aws) -> None:
    from amibuild.errors import AccessDenied

    with Stubber(aws.client("eks", REGION)) as stub:
        stub.add_client_error("create_access_entry", service_error_code="AccessDeniedException",
                              service_message="not authorized", http_status_code=403)
        with pytest.raises(AccessDenied, match="eks:CreateAccessEntry prod in eu-west-1"):
            aws.create_access_entry("prod", ROLE, REGION, entry_type="EC2_LINUX")


def test_aws_auth_prints_the_configmap_entry_and_offers_the_access_entry() -> None:
    text = aws_auth(AwsAuthRequest(role_arn=ROLE, stack="", region=REGION, access_entry=False, cluster=""), Env()).text

    entry = yaml.safe_load(text)
    assert entry == [{"rolearn": "arn:aws:iam::111122223333:role/eks-nodes",
                      "username": "system:node:{{EC2PrivateDNSName}}",
                      "groups": ["system:bootstrappers", "system:nodes"]}]
    # The access entry keeps the role's path (aws-auth cannot).
    assert f"amibuild aws-auth --role-arn {ROLE} --access-entry --cluster CLUSTER" in text
    assert f"--principal-arn {ROLE} --type EC2_LINUX" in text


@pytest.mark.parametrize("kwargs, words", [
    ({"access_entry": True, "cluster": ""}, "--access-entry needs --cluster"),
    ({"access_entry": False, "cluster": "prod"}, "--cluster goes with --access-entry"),
    ({"access_entry": True, "cluster": "prod", "role_arn": "arn:aws:iam::111122223333:instance-profile/n"},
     "not its instance profile"),
])
def test_aws_auth_access_entry_flags_are_refused_before_any_aws_call(kwargs, words) -> None:
    args = {"role_arn": ROLE, "stack": "", "region": REGION, **kwargs}
    with pytest.raises(SpecError, match=words):
        aws_auth(AwsAuthRequest(**args), Env())


@pytest.mark.parametrize("mode, first", [
    ("API", "--access-entry --cluster prod"),
    ("API_AND_CONFIG_MAP", "--access-entry --cluster prod"),
    ("CONFIG_MAP", "amibuild aws-auth --stack ng   (cluster prod reads only the aws-auth ConfigMap"),
    ("", "amibuild aws-auth --stack ng   (the mapRoles entry; if cluster prod uses access entries"),
])
def test_node_access_follows_the_clusters_authentication_mode(mode: str, first: str) -> None:
    assert first in node_access("prod", mode, stack="ng")


def test_cluster_facts_read_describe_cluster_with_aws_defaults_for_what_is_missing() -> None:
    facts = cluster_facts({"name": "prod", "endpoint": "https://ABC.gr7.eu-west-1.eks.amazonaws.com/",
                           "certificateAuthority": {"data": "Q0E="},
                           "kubernetesNetworkConfig": {"serviceIpv4Cidr": "10.100.0.0/16"},
                           "resourcesVpcConfig": {"endpointPublicAccess": True}})

    assert facts.endpoint == "https://ABC.gr7.eu-west-1.eks.amazonaws.com"
    assert facts.service_cidr == "10.100.0.0/16"
    assert facts.private_endpoint is False  # CreateCluster's default: public only
    assert facts.authentication_mode == ""
    assert cluster_facts({"resourcesVpcConfig": {"endpointPrivateAccess": True},
                          "accessConfig": {"authenticationMode": "API"}}).authentication_mode == "API"


def test_an_existing_entry_of_another_type_is_not_taken_for_the_nodes_entry(sandbox) -> None:
    import boto3

    from amibuild.errors import RolloutRefused
    from amibuild.sandbox.eks_cluster import SANDBOX_CLUSTER

    role, region = "arn:aws:iam::123456789012:role/eks-nodes", "us-west-2"
    request = AwsAuthRequest(role_arn=role, stack="", region=region, access_entry=True, cluster=SANDBOX_CLUSTER)
    eks = boto3.client("eks", region_name=region)
    eks.create_access_entry(clusterName=SANDBOX_CLUSTER, principalArn=role, type="STANDARD")  # no node groups
    # EKS cannot change an entry's type: nodes of this role would never join through it
    with pytest.raises(RolloutRefused, match="type STANDARD, not EC2_LINUX.*delete-access-entry"):
        aws_auth(request, Env())
    eks.delete_access_entry(clusterName=SANDBOX_CLUSTER, principalArn=role)
    eks.create_access_entry(clusterName=SANDBOX_CLUSTER, principalArn=role, type="EC2_LINUX")
    assert "already there (type EC2_LINUX)" in aws_auth(request, Env()).text
