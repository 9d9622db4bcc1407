"""The gateway's `find_images` reads many images of a region in one DescribeImages (an image-id
filter, so a deregistered id is left out instead of failing the call), disabled ones included, and
splits the ids into calls of at most `IDS_PER_FILTER`; the channel reads use it, one call per region.
"""

from __future__ import annotations

import boto3

from amibuild.aws import Aws
from amibuild.aws import ec2 as ec2_calls

REGION = "us-east-1"


def counted(aws: Aws, region: str) -> list[dict]:
    calls: list[dict] = []
    aws.client("ec2", region).meta.events.register(
        "provide-client-params.ec2.DescribeImages", lambda params, **_: calls.append(dict(params)))
    return calls


def test_a_region_s_images_come_in_one_call_the_gone_left_out_the_disabled_kept(sandbox) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    kept, gone, disabled = (ec2.register_image(Name=f"find-{n}")["ImageId"] for n in ("kept", "gone", "disabled"))
    ec2.deregister_image(ImageId=gone)
    ec2.disable_image(ImageId=disabled)
    aws = Aws(region=REGION)
    calls = counted(aws, REGION)

    found = aws.find_images(REGION, [kept, gone, disabled])

    assert sorted(found) == sorted([kept, disabled])
    assert found[kept].image_id == kept and found[disabled].image_id == disabled
    assert len(calls) == 1 and calls[0]["IncludeDisabled"] is True
    assert calls[0]["Filters"] == [{"Name": "image-id", "Values": sorted([kept, gone, disabled])}]


def test_more_ids_than_a_filter_takes_are_split_and_every_pair_gets_its_image_or_none(sandbox, monkeypatch) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    amis = [ec2.register_image(Name=f"split-{n}")["ImageId"] for n in range(3)]
    ec2.deregister_image(ImageId=amis[2])
    monkeypatch.setattr(ec2_calls, "IDS_PER_FILTER", 2)
    aws = Aws(region=REGION)
    calls = counted(aws, REGION)

    images = aws.images_at([(REGION, a) for a in amis])

    assert len(calls) == 2
    assert sorted(len(c["Filters"][0]["Values"]) for c in calls) == [1, 2]
    assert images[(REGION, amis[0])].image_id == amis[0] and images[(REGION, amis[1])].image_id == amis[1]
    assert images[(REGION, amis[2])] is None
