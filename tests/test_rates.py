"""The gateway's rate limits: AWS's default rates as buckets (pure), the throttling answers of the
fault proxy's token-bucket mode, and publishing to 17 regions through it with nothing failing."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Iterator

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from amibuild.aws import Aws, deadline, fan_out, rates
from amibuild.channels import publish
from amibuild.errors import AwsError
from amibuild.pipeline import load
from amibuild.sandbox import Sandbox, seed_images
from faultproxy import FaultProxy

SEVENTEEN = ("us-west-2", "us-east-1", "us-east-2", "us-west-1", "ca-central-1", "sa-east-1", "eu-west-1",
             "eu-west-2", "eu-west-3", "eu-central-1", "eu-north-1", "ap-south-1", "ap-northeast-1",
             "ap-northeast-2", "ap-northeast-3", "ap-southeast-1", "ap-southeast-2")


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


# ------------------------------------------------------------------------------- the table (pure)

def test_each_call_draws_from_its_apis_bucket_at_awss_default_rate():
    assert rates.bucket("ec2", "DescribeImages") == ("DescribeImages", rates.Rate(100, 20))
    assert rates.bucket("ec2", "DescribeRegions", narrowed=False) == ("DescribeRegions", rates.Rate(50, 10))
    assert rates.bucket("ec2", "CopyImage") == ("CopyImage", rates.Rate(50, 5))
    assert rates.bucket("ec2", "RunInstances") == ("RunInstances", rates.Rate(50, 5))
    # SSM's GetParameter family shares one budget; PutParameter has its own, much smaller one
    assert {rates.bucket("ssm", op) for op in ("GetParameter", "GetParameters", "GetParametersByPath")} == {
        ("ssm-get", rates.Rate(40, 40))}
    assert rates.bucket("ssm", "PutParameter") == ("PutParameter", rates.Rate(3, 3))
    assert rates.bucket("kms", "GenerateMac")[0] == "kms-crypto"
    assert rates.bucket("s3", "ListObjectsV2") is None


def test_a_read_with_a_filter_ids_or_a_page_size_counts_as_narrowed():
    assert rates.narrowed({"Filters": [{"Name": "tag:x", "Values": ["y"]}]})
    assert rates.narrowed({"ImageIds": ["ami-1"]}) and rates.narrowed({"MaxResults": 5})
    assert rates.narrowed({"Filter.1.Name": ["tag:x"]})  # the query wire's names, as the proxy sees them
    assert not rates.narrowed({}) and not rates.narrowed({"Filters": []})


def test_the_bucket_gives_its_burst_at_once_then_tokens_at_its_rate_in_order():
    clock = FakeClock()
    bucket = rates.TokenBucket(rates.Rate(3, 3), clock=clock, sleep=clock.sleep)
    assert [bucket.acquire() for _ in range(3)] == [0, 0, 0]
    # reserved in order: the 4th caller waits 1/3 s, and a 5th arriving at once 2/3 s
    assert bucket.reserve() == pytest.approx(1 / 3)
    assert bucket.reserve() == pytest.approx(2 / 3)
    clock.now += 10  # refilled, never above the burst
    assert [bucket.reserve() for _ in range(3)] == [0, 0, 0]
    assert bucket.reserve() > 0


def test_threads_share_one_bucket_and_keep_within_its_rate():
    limiter = rates.Limiter(lambda service, op, narrowed=True: ("b", rates.Rate(2, 20)))
    stamps: list[float] = []
    lock = threading.Lock()

    def call(_: int) -> None:
        limiter.acquire("ssm", "acct", "us-west-2", "PutParameter")
        with lock:
            stamps.append(time.monotonic())

    start = time.monotonic()
    fan_out(range(12), call)
    # 2 at once, then 10 more at 20 a second: at least 0.5 s, whatever the thread count
    assert max(stamps) - start >= 0.45
    assert limiter.bucket_for("ssm", "acct", "us-west-2", "X") is limiter.bucket_for("ssm", "acct", "us-west-2", "Y")
    assert limiter.bucket_for("ssm", "acct", "eu-west-1", "X") is not limiter.bucket_for("ssm", "acct", "us-west-2", "X")


def test_throttling_is_retried_while_the_deadline_allows_and_not_after():
    clock = FakeClock()
    bounded = deadline.Deadline(5, clock=clock)
    with deadline.bound(bounded):
        bounded._busy(+1)  # a call is on the wire, as inside `Deadline.run`
        assert rates.throttle_delay(3, started=0, rng=lambda: 1.0) == pytest.approx(2.0)
        clock.now += 4  # 1 s left: a 2 s back-off would pass the deadline
        assert rates.throttle_delay(3, started=0, rng=lambda: 1.0) is None
        bounded._busy(-1)
    # no deadline: a call keeps retrying for `patience` seconds after its first attempt
    now = time.monotonic()
    assert rates.throttle_delay(1, started=now - 10, now=now, patience=60, rng=lambda: 1.0) == pytest.approx(0.5)
    assert rates.throttle_delay(1, started=now - 60, now=now, patience=60, rng=lambda: 1.0) is None


def test_a_channel_operations_deadline_stands_still_while_queued_and_bounds_throttle_retries():
    """The channel deadline (amibuild/aws/deadline.py) counts only time on the wire: a call queued
    at an empty bucket does not use it, and a throttled call is not retried past what it has left."""
    clock = FakeClock()
    limiter = rates.Limiter(lambda service, op, narrowed=True: ("b", rates.Rate(1, 1)))
    bounded = deadline.Deadline(30, clock=clock)
    slow = rates.TokenBucket(rates.Rate(1, 1), clock=clock, sleep=lambda s: setattr(clock, "now", clock.now + s))
    limiter._buckets[("ssm", "acct", "us-west-2", "b")] = slow
    with deadline.bound(bounded):
        bounded._busy(+1)  # a call is on the wire, as inside `Deadline.run`
        limiter.acquire("ssm", "acct", "us-west-2", "PutParameter")
        limiter.acquire("ssm", "acct", "us-west-2", "PutParameter")  # waits 1 s (FakeClock) queued
        assert bounded.remaining() == pytest.approx(30)  # the queued second did not count
        clock.now += 29
        assert bounded.remaining() == pytest.approx(1)
        # a 2 s back-off would pass the deadline: not retried
        assert rates.throttle_delay(3, started=0, now=clock.now, rng=lambda: 1.0) is None
        assert rates.throttle_delay(0, started=0, now=clock.now, rng=lambda: 1.0) == pytest.approx(0.25)
        bounded._busy(-1)


def test_fan_out_threads_work_under_the_callers_deadline_and_queue_on_its_clock():
    clock = FakeClock()
    bounded = deadline.Deadline(30, clock=clock)
    limiter = rates.Limiter(lambda service, op, narrowed=True: ("b", rates.Rate(1, 1)))
    limiter._buckets[("sts", "acct-fan", "us-west-2", "b")] = rates.TokenBucket(
        rates.Rate(1, 1), clock=clock, sleep=lambda s: None)
    with deadline.bound(bounded):
        bounded._busy(+1)  # the operation is on the wire
        seen = fan_out(range(5), lambda _: (deadline.current(), limiter.acquire("sts", "acct-fan", "us-west-2", "X")))
        assert {d for d, _ in seen.values()} == {bounded}
        assert sorted(w for _, w in seen.values()) == pytest.approx([0, 1, 2, 3, 4])  # queued in turn
        assert bounded._wire == 1  # each thread's queued wait stood the clock still and gave it back
        bounded._busy(-1)


# ------------------------------------------------------------------------------- the proxy's answers

@pytest.fixture
def proxy(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    with FaultProxy(sandbox.endpoint, seed=29) as faults:
        monkeypatch.setenv("AWS_ENDPOINT_URL", faults.endpoint)
        yield faults


def test_the_proxy_throttles_each_service_with_its_own_error(proxy):
    proxy.rate_limit(rates={("ec2", "DescribeImages"): (0, 0), ("ssm", "ssm-get"): (0, 0),
                            ("sts", "GetCallerIdentity"): (0, 0)})
    once = Config(retries={"mode": "standard", "total_max_attempts": 1})
    with pytest.raises(ClientError) as ec2:
        boto3.client("ec2", region_name="us-west-2", config=once).describe_images(Owners=["self"])
    with pytest.raises(ClientError) as ssm:
        boto3.client("ssm", region_name="us-west-2", config=once).get_parameter(Name="/x")
    with pytest.raises(ClientError) as sts:
        boto3.client("sts", region_name="us-west-2", config=once).get_caller_identity()
    seen = [(e.value.response["Error"]["Code"], e.value.response["ResponseMetadata"]["HTTPStatusCode"])
            for e in (ec2, ssm, sts)]
    assert seen == [("RequestLimitExceeded", 503), ("ThrottlingException", 400), ("Throttling", 400)]
    assert proxy.count(outcome="throttled") == 3
    # a bucket not limited to zero answers as AWS would: the first call goes through
    boto3.client("ec2", region_name="us-west-2", config=once).describe_regions()


def test_throttling_past_the_deadline_fails_naming_it(proxy):
    proxy.rate_limit(rates={("ssm", "ssm-get"): (0, 0)})  # every GetParameter throttled
    aws = Aws(region="us-west-2")
    start = time.monotonic()
    with deadline.bound(deadline.Deadline(1.5)), pytest.raises(AwsError) as failed:
        aws.get_parameter("/amibuild/x", "us-west-2")
    assert str(failed.value) == ("ssm:GetParameter /amibuild/x in us-west-2: no answer from AWS within 1.5 s, the "
                                 "deadline of this channel operation; amibuild gave up waiting")
    assert time.monotonic() - start < 10
    assert len(aws.throttled) >= 1  # throttled answers came, each retried while the deadline allowed
    assert proxy.count("AmazonSSM.GetParameter", "forwarded") == 0


# ------------------------------------------------------------------------------- 17 regions

PIPELINE = """
pipeline {{
  name       = "eks-workers"
  ssm_prefix = "/amibuild"
  regions    = ["{first}"]
  copy_to    = [{copies}]
}}
variant "ceph" {{}}
"""


def test_publishing_to_17_regions_through_awss_throttling_fails_nothing(proxy, sandbox, tmp_path: Path):
    path = tmp_path / "amibuild.hcl"
    path.write_text(PIPELINE.format(first=SEVENTEEN[0], copies=", ".join(f'"{r}"' for r in SEVENTEEN[1:])))
    pipeline = load(path)
    source = seed_images()[0].image_id
    amis = {}
    for region in SEVENTEEN:  # straight to the emulator: the proxy only sees the publish
        ec2 = boto3.client("ec2", region_name=region, endpoint_url=sandbox.endpoint)
        instance = ec2.run_instances(ImageId=source, MinCount=1, MaxCount=1, InstanceType="m5.large")
        amis[region] = ec2.create_image(InstanceId=instance["Instances"][0]["InstanceId"],
                                        Name=f"ceph-{uuid.uuid4().hex[:8]}")["ImageId"]
        ec2.create_tags(Resources=[amis[region]], Tags=[{"Key": "amibuild:variant", "Value": "ceph"},
                                                        {"Key": "amibuild:fingerprint", "Value": "fp1"}])
    # AWS's rates, less what another tool in the account takes: the gateway's own buckets are at the
    # documented defaults, so it is throttled, in every region, and must retry
    proxy.rate_limit(scale=0.5, rates={("ssm", "PutParameter"): (1, 1), ("ec2", "DescribeImages"): (1, 1)})
    aws = Aws(region=SEVENTEEN[0])
    result = publish.publish_variant(aws, pipeline=pipeline, variant=pipeline.variants[0], amis=amis)

    assert {r.region for r in result.regions if r.action is publish.PublishAction.WRITE} == set(SEVENTEEN)
    name = "/amibuild/eks-workers/1.35/ceph/recommended/image_id"
    for region in SEVENTEEN:
        assert boto3.client("ssm", region_name=region).get_parameter(Name=name)["Parameter"]["Value"] == amis[region]
    throttled = proxy.count(outcome="throttled")
    assert throttled >= 17  # PutParameter at 1 a second: throttled in every region at least once
    assert proxy.count("DescribeImages", "throttled") >= 1  # EC2's 503 RequestLimitExceeded, retried too
    # every throttled answer was retried by the gateway (none was an error), and each channel
    # version was written once: no duplicate from a retry
    assert len(aws.throttled) == throttled
    assert proxy.count("AmazonSSM.PutParameter", "forwarded", name="/image_id") == 17


def test_eight_variants_at_once_to_17_regions_keep_within_awss_rates(proxy, sandbox, tmp_path: Path):
    """The scale case: variants published side by side share each region's PutParameter budget
    (3 a second); without a shared client-side bucket they burst past it, and botocore's retries
    run out."""
    variants = [f"v{i}" for i in range(8)]
    path = tmp_path / "amibuild.hcl"
    path.write_text(PIPELINE.format(first=SEVENTEEN[0], copies=", ".join(f'"{r}"' for r in SEVENTEEN[1:]))
                    .replace('variant "ceph" {}', "\n".join(f'variant "{v}" {{}}' for v in variants)))
    pipeline = load(path)
    source = seed_images()[0].image_id
    amis: dict[str, dict[str, str]] = {v: {} for v in variants}
    for region in SEVENTEEN:
        ec2 = boto3.client("ec2", region_name=region, endpoint_url=sandbox.endpoint)
        instance = ec2.run_instances(ImageId=source, MinCount=1, MaxCount=1, InstanceType="m5.large")
        for v in variants:
            ami = ec2.create_image(InstanceId=instance["Instances"][0]["InstanceId"], Name=f"{v}-{region}")["ImageId"]
            ec2.create_tags(Resources=[ami], Tags=[{"Key": "amibuild:variant", "Value": v},
                                                   {"Key": "amibuild:fingerprint", "Value": "fp1"}])
            amis[v][region] = ami
    proxy.rate_limit()  # AWS's default rates, as the table documents them
    aws = Aws(region=SEVENTEEN[0])
    by_name = {v.name: v for v in pipeline.variants}
    results = fan_out(variants, lambda v: publish.publish_variant(aws, pipeline=pipeline, variant=by_name[v],
                                                                  amis=amis[v]))
    for v in variants:
        assert {r.region for r in results[v].regions if r.action is publish.PublishAction.WRITE} == set(SEVENTEEN)
    assert proxy.count("AmazonSSM.PutParameter", "forwarded", name="/image_id") == 8 * 17
    # within the rates: at most a rare throttle from arrival jitter (2%), and each one retried
    throttled, puts = proxy.count(outcome="throttled"), proxy.count("AmazonSSM.PutParameter")
    assert throttled <= puts // 50, (throttled, puts, aws.throttled)
    assert len(aws.throttled) == throttled
