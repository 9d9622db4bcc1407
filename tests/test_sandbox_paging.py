"""The emulator pages DescribeInstances by instance and DescribeImages by image, as AWS does
(amibuild/sandbox/paging.py)."""

from __future__ import annotations

import boto3
import botocore.exceptions
import pytest

from amibuild.sandbox import seed_images


def _subnet(ec2) -> str:
    vpc = ec2.create_vpc(CidrBlock="10.77.0.0/16")["Vpc"]["VpcId"]
    return ec2.create_subnet(VpcId=vpc, CidrBlock="10.77.0.0/24")["Subnet"]["SubnetId"]


def test_describe_instances_max_results_counts_instances_not_reservations(sandbox):
    """12 instances in 2 reservations (7 + 5), MaxResults=5: pages of 5, 5, 2, the 7's reservation
    split over the first two pages; moto 5.2.5 answered both reservations in one page."""
    ec2 = boto3.client("ec2", region_name="eu-central-1")
    subnet = _subnet(ec2)
    image = seed_images()[0].image_id
    tag = [{"ResourceType": "instance", "Tags": [{"Key": "paging-test", "Value": "yes"}]}]
    made = [ec2.run_instances(ImageId=image, MinCount=n, MaxCount=n, InstanceType="m5.large", SubnetId=subnet,
                              TagSpecifications=tag) for n in (7, 5)]
    wanted = {i["InstanceId"] for r in made for i in r["Instances"]}
    scope = [{"Name": "tag:paging-test", "Values": ["yes"]}]

    pages, token = [], None
    while True:
        page = ec2.describe_instances(Filters=scope, MaxResults=5, **({"NextToken": token} if token else {}))
        pages.append(page)
        token = page.get("NextToken")
        if not token:
            break
    sizes = [sum(len(r["Instances"]) for r in page["Reservations"]) for page in pages]
    assert sizes == [5, 5, 2]
    assert [bool(p.get("NextToken")) for p in pages] == [True, True, False]
    seen = [i["InstanceId"] for p in pages for r in p["Reservations"] for i in r["Instances"]]
    assert len(seen) == 12 and set(seen) == wanted
    first_reservation = made[0]["ReservationId"]
    assert [[r["ReservationId"] for r in p["Reservations"]] for p in pages] == [
        [first_reservation], [first_reservation, made[1]["ReservationId"]], [made[1]["ReservationId"]]]

    # botocore's paginator (PageSize is MaxResults) and no MaxResults at all: everything, once
    paged = ec2.get_paginator("describe_instances").paginate(Filters=scope, PaginationConfig={"PageSize": 5})
    assert [sum(len(r["Instances"]) for r in p["Reservations"]) for p in paged] == [5, 5, 2]
    whole = ec2.describe_instances(Filters=scope)
    assert sum(len(r["Instances"]) for r in whole["Reservations"]) == 12 and not whole.get("NextToken")
    # the backend's reservations stay whole
    again = ec2.describe_instances(InstanceIds=[i["InstanceId"] for i in made[0]["Instances"]])
    assert len(again["Reservations"][0]["Instances"]) == 7


@pytest.mark.parametrize(("kwargs", "code"), [
    ({"MaxResults": 4}, "InvalidParameterValue"),
    ({"MaxResults": 1001}, "InvalidParameterValue"),
    ({"MaxResults": 5, "NextToken": "not-a-token"}, "InvalidPaginationToken"),
])
def test_describe_instances_refuses_what_aws_refuses(sandbox, kwargs, code):
    ec2 = boto3.client("ec2", region_name="eu-central-1")
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        ec2.describe_instances(**kwargs)
    assert refused.value.response["Error"]["Code"] == code


def test_describe_images_pages_by_max_results(sandbox):
    ec2 = boto3.client("ec2", region_name="eu-central-1")
    image = seed_images()[0].image_id
    instance = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType="m5.large")["Instances"][0]
    made = {ec2.create_image(InstanceId=instance["InstanceId"], Name=f"paging-{n}",
                             TagSpecifications=[{"ResourceType": "image", "Tags": [
                                 {"Key": "paging-test", "Value": "yes"}]}])["ImageId"] for n in range(7)}
    scope = {"Owners": ["self"], "Filters": [{"Name": "tag:paging-test", "Values": ["yes"]}]}

    pages = list(ec2.get_paginator("describe_images").paginate(**scope, PaginationConfig={"PageSize": 3}))
    assert [len(p["Images"]) for p in pages] == [3, 3, 1]
    assert {i["ImageId"] for p in pages for i in p["Images"]} == made
    whole = ec2.describe_images(**scope)
    assert len(whole["Images"]) == 7 and not whole.get("NextToken")
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        ec2.describe_images(ImageIds=sorted(made), MaxResults=5)
    assert refused.value.response["Error"]["Code"] == "InvalidParameterCombination"
