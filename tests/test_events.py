"""amibuild's events (`events { bus | sns_topic }`), read back from the emulator over real HTTP:
an EventBridge rule on the default bus and an SNS subscription, each with an SQS queue as target.

One event per publish, promote, rollback, gate refusal and prune deregistration, each checked against
the documented schema (docs/events.md); a failed send warns and the job still exits 0; a dry run
sends nothing; a bad block exits 2 naming the field before any AWS work.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import boto3
import pytest

from amibuild import notify
from amibuild.lifecycle import iam
from amibuild.pipeline import load
from amibuild.sandbox import Sandbox, seed_images
from conftest import run_cli
from faultproxy import FaultProxy

REGION = "us-west-2"
ACCOUNT = "123456789012"
PIPELINE = """
pipeline {{
  name       = "eks-workers"
  ssm_prefix = "/amibuild"
  regions    = ["us-west-2"]
  events {{ {events} }}
}}
variant "ceph" {{
  extra_packages = ["ceph-common"]
}}
channel "stable" {{
  from = "recommended"
}}
"""
# what every event's detail carries (docs/events.md)
COMMON = {"schema", "event", "amibuild_version", "pipeline", "variant", "channel", "regions", "amis", "versions", "run_id"}


def write_pipeline(folder: Path, events: str) -> Path:
    path = folder / "amibuild.hcl"
    path.write_text(PIPELINE.format(events=events))
    return path


def queue() -> tuple[str, str]:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName=f"events-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def bus_to_queue() -> str:
    """A rule on the default bus sending amibuild's events to a new queue; the queue's URL."""
    url, arn = queue()
    events = boto3.client("events", region_name=REGION)
    events.put_rule(Name="amibuild-events", EventPattern=json.dumps({"source": ["amibuild"]}))
    events.put_targets(Rule="amibuild-events", Targets=[{"Id": "queue", "Arn": arn}])
    return url


def topic_to_queue() -> tuple[str, str]:
    """A topic with a raw-delivery SQS subscription; (topic ARN, queue URL)."""
    url, arn = queue()
    sns = boto3.client("sns", region_name=REGION)
    topic = sns.create_topic(Name="amibuild-events")["TopicArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"})
    return topic, url


def received(url: str) -> list[dict]:
    """Every message in the queue, as JSON (an EventBridge event, or the SNS message amibuild sent)."""
    sqs = boto3.client("sqs", region_name=REGION)
    found = []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not got:
            return found
        for message in got:
            found.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def image(fingerprint: str = "fp1") -> str:
    """An image as a build leaves it, in REGION."""
    ec2 = boto3.client("ec2", region_name=REGION)
    instance = ec2.run_instances(ImageId=seed_images()[0].image_id, MinCount=1, MaxCount=1, InstanceType="m5.large")
    ami = ec2.create_image(InstanceId=instance["Instances"][0]["InstanceId"],
                           Name=f"eks-workers-ceph-{uuid.uuid4().hex[:8]}")["ImageId"]
    ec2.create_tags(Resources=[ami], Tags=[{"Key": "amibuild:variant", "Value": "ceph"},
                                           {"Key": "amibuild:fingerprint", "Value": fingerprint},
                                           {"Key": "amibuild:run-id", "Value": f"run-{fingerprint}"},
                                           {"Key": "amibuild:pipeline", "Value": "eks-workers"}])
    return ami


def check_schema(event: dict, detail_type: str, kind: str) -> dict:
    assert event["source"] == "amibuild"
    assert event["detail-type"] == detail_type == notify.DETAIL_TYPES[kind]
    detail = event["detail"]
    assert COMMON <= set(detail), COMMON - set(detail)
    assert detail["schema"] == 1 and detail["event"] == kind
    assert detail["pipeline"] == "eks-workers" and detail["variant"] == "ceph"
    assert detail["regions"] == sorted(detail["amis"])
    return detail


def test_publish_promote_rollback_and_a_gate_refusal_each_send_one_event_to_the_bus(sandbox: Sandbox, tmp_path: Path):
    write_pipeline(tmp_path, 'bus = "default"')
    url = bus_to_queue()
    first, second = image("fp1"), image("fp2")

    assert run_cli(tmp_path, "publish", "--variant", "ceph", "--ami", f"{REGION}={first}", "--run-id", "r-1").returncode == 0
    [published] = received(url)
    detail = check_schema(published, "amibuild Channel Published", "published")
    assert detail["channel"] == "recommended" and detail["amis"] == {REGION: first} and detail["run_id"] == "r-1"
    assert detail["versions"] == {REGION: {"before": {"ami": None, "version": None}, "after": {"ami": first, "version": 1}}}
    assert published["resources"] == [first]

    refused = run_cli(tmp_path, "publish", "--variant", "ceph", "--ami", f"{REGION}={first}", "--channel", "stable")
    assert refused.returncode == 1 and "gated" in refused.stderr
    [gate] = received(url)
    detail = check_schema(gate, "amibuild Gate Refused", "gate-refused")
    assert detail["channel"] == "stable" and detail["amis"] == {REGION: first} and detail["gate"] == "from recommended"
    assert detail["missing"] and "gated" in detail["reason"]

    assert run_cli(tmp_path, "promote", "--variant", "ceph", "--from", "recommended", "--to", "stable").returncode == 0
    [promoted] = received(url)
    detail = check_schema(promoted, "amibuild Channel Promoted", "promoted")
    assert detail["channel"] == "stable" and detail["from"] == "recommended" and detail["amis"] == {REGION: first}

    assert run_cli(tmp_path, "publish", "--variant", "ceph", "--ami", f"{REGION}={second}").returncode == 0
    assert run_cli(tmp_path, "rollback", "--variant", "ceph").returncode == 0
    published, rolled = received(url)
    assert check_schema(published, "amibuild Channel Published", "published")["versions"][REGION] == {
        "before": {"ami": first, "version": 1}, "after": {"ami": second, "version": 2}}
    detail = check_schema(rolled, "amibuild Channel Rolled Back", "rolled-back")
    assert detail["versions"][REGION]["before"]["ami"] == second and detail["amis"] == {REGION: first}


def test_a_publish_sends_its_event_to_the_sns_topic(sandbox: Sandbox, tmp_path: Path):
    topic, url = topic_to_queue()
    write_pipeline(tmp_path, f'sns_topic = "{topic}"')
    ami = image()
    assert run_cli(tmp_path, "publish", "--variant", "ceph", "--ami", f"{REGION}={ami}").returncode == 0
    [message] = received(url)
    detail = check_schema(message, "amibuild Channel Published", "published")
    assert detail["amis"] == {REGION: ami}


def test_a_dry_run_sends_nothing(sandbox: Sandbox, tmp_path: Path):
    write_pipeline(tmp_path, 'bus = "default"')
    url = bus_to_queue()
    ami = image()
    assert run_cli(tmp_path, "publish", "--variant", "ceph", "--ami", f"{REGION}={ami}", "--dry-run").returncode == 0
    refused = run_cli(tmp_path, "publish", "--variant", "ceph", "--ami", f"{REGION}={ami}", "--channel", "stable",
                      "--dry-run")
    assert refused.returncode == 1
    assert received(url) == []


def test_a_topic_that_does_not_exist_is_a_warning_and_the_publish_exits_0(sandbox: Sandbox, tmp_path: Path):
    write_pipeline(tmp_path, f'sns_topic = "arn:aws:sns:{REGION}:{ACCOUNT}:nowhere"')
    ami = image()
    done = run_cli(tmp_path, "publish", "--variant", "ceph", "--ami", f"{REGION}={ami}")
    assert done.returncode == 0, done.stderr
    assert "warning: amibuild Channel Published event not sent to SNS topic" in done.stderr
    ssm = boto3.client("ssm", region_name=REGION)
    assert ssm.get_parameter(Name="/amibuild/eks-workers/1.35/ceph/recommended/image_id")["Parameter"]["Value"] == ami


def test_a_put_events_call_failing_at_the_fault_proxy_is_a_warning_and_the_publish_exits_0(
        sandbox: Sandbox, tmp_path: Path):
    write_pipeline(tmp_path, 'bus = "default"')
    url = bus_to_queue()
    ami = image()
    with FaultProxy(sandbox.endpoint, seed=3) as faults:
        faults.fail(REGION, ["AWSEvents.PutEvents"])  # an explicit deny, as a service control policy gives
        done = run_cli(tmp_path, "publish", "--variant", "ceph", "--ami", f"{REGION}={ami}",
                       env={"AWS_ENDPOINT_URL": faults.endpoint})
    assert done.returncode == 0, done.stderr
    assert "warning: amibuild Channel Published event not sent to EventBridge bus default" in done.stderr
    assert received(url) == []


def test_an_entry_put_events_did_not_take_for_throttling_is_sent_again_and_a_refused_one_is_a_warning(
        sandbox: Sandbox, tmp_path: Path):
    """PutEvents answers 200 with FailedEntryCount for an entry it did not take; botocore retries only
    a call that failed as a whole, so a throttled entry would be lost without amibuild's retry."""
    write_pipeline(tmp_path, 'bus = "default"')
    url = bus_to_queue()
    refused = {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "ThrottlingException", "ErrorMessage": "Rate exceeded"}]}
    with FaultProxy(sandbox.endpoint) as faults:
        faults.answer(REGION, ["AWSEvents.PutEvents"], refused, times=2)
        done = run_cli(tmp_path, "publish", "--variant", "ceph", "--ami", f"{REGION}={image()}",
                       env={"AWS_ENDPOINT_URL": faults.endpoint})
        assert faults.count("AWSEvents.PutEvents", "forwarded") == 1  # the third attempt
        refused["Entries"][0].update(ErrorCode="MalformedDetail", ErrorMessage="Detail is malformed.")
        faults.answer(REGION, ["AWSEvents.PutEvents"], refused, times=1)
        again = run_cli(tmp_path, "publish", "--variant", "ceph", "--ami", f"{REGION}={image('fp2')}",
                        env={"AWS_ENDPOINT_URL": faults.endpoint})
        assert faults.count("AWSEvents.PutEvents", "forwarded") == 1  # not sent again
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    assert again.returncode == 0, again.stderr
    assert "event not sent to EventBridge bus default: events:PutEvents default in us-west-2: entry refused " \
           "(MalformedDetail: Detail is malformed.)" in again.stderr
    assert [e["detail-type"] for e in received(url)] == ["amibuild Channel Published"]


def test_prune_sends_one_event_per_deregistered_image(sandbox: Sandbox, tmp_path: Path):
    write_pipeline(tmp_path, 'bus = "default"')
    url = bus_to_queue()
    made = {image("fp-1"), image("fp-2")}
    assert run_cli(tmp_path, "prune", "--keep", "1", "--dry-run").returncode == 0
    assert received(url) == []  # a dry run sends nothing
    done = run_cli(tmp_path, "prune", "--keep", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    events = received(url)
    left = {i["ImageId"] for i in boto3.client("ec2", region_name=REGION).describe_images(
        ImageIds=list(made))["Images"]}
    assert [e["detail"]["amis"] for e in events] == [{REGION: ami} for ami in made - left] and len(left) == 1
    detail = check_schema(events[0], "amibuild Image Deregistered", "deregistered")
    assert detail["channel"] == "" and isinstance(detail["snapshots_deleted"], list)


def test_prune_sends_the_event_of_an_image_it_deregistered_whose_snapshot_it_could_not_delete(
        sandbox: Sandbox, tmp_path: Path):
    write_pipeline(tmp_path, 'bus = "default"')
    url = bus_to_queue()
    ec2 = boto3.client("ec2", region_name=REGION)
    made = [image(f"fp-{n}") for n in (1, 2)]
    for n, ami in enumerate(made, 1):  # the Recycle Bin keeps image and snapshots: prune deletes the snapshots too
        snapshot = ec2.describe_images(ImageIds=[ami])["Images"][0]["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"]
        ec2.create_tags(Resources=[snapshot], Tags=[{"Key": "amibuild:fingerprint", "Value": f"fp-{n}"},
                                                    {"Key": "amibuild:pipeline", "Value": "eks-workers"}])
    for kind in ("EC2_IMAGE", "EBS_SNAPSHOT"):
        boto3.client("rbin", region_name=REGION).create_rule(
            ResourceType=kind, RetentionPeriod={"RetentionPeriodValue": 7, "RetentionPeriodUnit": "DAYS"})
    with FaultProxy(sandbox.endpoint) as faults:
        faults.fail(REGION, ["DeleteSnapshot"], code="IncorrectState", message="injected by FaultProxy")
        done = run_cli(tmp_path, "prune", "--keep", "1", env={"AWS_ENDPOINT_URL": faults.endpoint})
    assert done.returncode == 1 and "deregistered, but snapshot" in done.stderr, done.stdout + done.stderr
    left = {i["ImageId"] for i in ec2.describe_images(Filters=[{"Name": "image-id", "Values": made}])["Images"]}
    events = received(url)
    assert [e["detail"]["amis"] for e in events] == [{REGION: ami} for ami in made if ami not in left] and len(left) == 1
    assert check_schema(events[0], "amibuild Image Deregistered", "deregistered")["snapshots_deleted"] == []


@pytest.mark.parametrize("body, complaint", [
    ('bus = "default"\n sns_topic = "arn:aws:sns:us-west-2:123456789012:t"', "give bus or sns_topic, not both"),
    ("", "give bus or sns_topic, not neither"),
    ('topic = "x"', "unknown field `topic` (did you mean 'sns_topic'?)"),
    ('sns_topic = "arn:aws:sqs:us-west-2:123456789012:t"', "pipeline.events.sns_topic"),
    ('bus = "arn:aws:events:us-west-2:1234:event-bus/x"', "pipeline.events.bus"),
    ('sns_topic = "arn:aws:sns:us-wset-2:123456789012:t"', "unknown region 'us-wset-2'"),
])
def test_a_bad_events_block_exits_2_naming_the_field_before_any_aws_work(tmp_path: Path, body: str, complaint: str):
    write_pipeline(tmp_path, body)
    done = run_cli(tmp_path, "publish", "--variant", "ceph", "--ami", f"{REGION}=ami-0123456789abcdef0",
                   env={"AWS_ENDPOINT_URL": "http://127.0.0.1:9"})  # nothing may be called: the tripwire
    assert done.returncode == 2, done.stderr
    assert complaint in done.stderr and "pipeline.events" in done.stderr


def test_an_event_masks_url_credentials_and_is_a_pure_function_of_the_result():
    class Region:
        region, ami, previous_ami, previous_version, version = REGION, "ami-1", None, 0, 1

    class Result:
        operation, parameter, variant, channel, regions, changed = "publish", "/p", "ceph", "recommended", [Region()], True

    event = notify.schema.gate_refused(pipeline="p", variant="ceph", channel="stable", operation="publish",
                                       reason="repo https://user:hunter2@repo.example/x refused")
    assert "hunter2" not in event.detail_json()
    first = notify.schema.channel_written("published", Result(), pipeline="p", run_id="r")
    assert first == notify.schema.channel_written("published", Result(), pipeline="p", run_id="r")
    assert first.resources == ("ami-1",)


def test_iam_policy_allows_sending_to_the_pipelines_bus_or_topic(tmp_path: Path):
    bus = load(write_pipeline(tmp_path, 'bus = "default"'))
    assert "events:PutEvents" in iam.actions(iam.policy("publish", bus))
    assert "events:PutEvents" in iam.actions(iam.policy("prune", bus))
    assert "events:PutEvents" not in iam.actions(iam.policy("rollout", bus, stacks=["s"],
                                                            node_role_arn=f"arn:aws:iam::{ACCOUNT}:role/n"))
    topic = load(write_pipeline(tmp_path, f'sns_topic = "arn:aws:sns:{REGION}:{ACCOUNT}:t"'))
    [statement] = [s for s in iam.policy("test", topic)["Statement"] if s["Sid"] == "SendEvents"]
    assert statement["Action"] == ["sns:Publish"] and statement["Resource"] == [f"arn:aws:sns:{REGION}:{ACCOUNT}:t"]


def test_test_ami_sends_its_result_as_one_event(sandbox: Sandbox, tmp_path: Path):
    write_pipeline(tmp_path, 'bus = "default"')
    url = bus_to_queue()
    ami = image()
    done = run_cli(tmp_path, "test-ami", "--variant", "ceph", "--ami", ami, "--json", binary="amibuild")
    tested = json.loads(done.stdout)
    [event] = received(url)
    detail = check_schema(event, "amibuild Image Test Result", "test-result")
    assert detail["amis"] == {REGION: ami} and detail["test"] == "boot"
    assert detail["result"] == tested["result"] and detail["run_id"] == tested["run_id"]
    assert [c["name"] for c in detail["checks"]] == [c["name"] for c in tested["checks"]]


@pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")
def test_build_ami_sends_its_boot_test_result_and_one_published_event_per_variant_it_writes(sandbox: Sandbox, tmp_path: Path):
    write_pipeline(tmp_path, 'bus = "default"')
    url = bus_to_queue()
    done = run_cli(tmp_path, "build-ami", "--json", "--variant", "ceph", "--boot-test")
    assert done.returncode == 0, done.stderr
    built = json.loads(done.stdout)
    [variant] = built["variants"]
    tested, event = received(url)  # the boot test's result, then the publish
    assert check_schema(tested, "amibuild Image Test Result", "test-result")["amis"] == {REGION: variant["amis"][REGION]}
    detail = check_schema(event, "amibuild Channel Published", "published")
    assert detail["amis"] == variant["amis"] and detail["channel"] == "recommended"
    assert detail["run_id"] == built["run_id"]


def test_promote_due_sends_a_promoted_event_and_its_dry_run_sends_none(sandbox: Sandbox, tmp_path: Path):
    write_pipeline(tmp_path, 'bus = "default"')
    url = bus_to_queue()
    ami = image()
    assert run_cli(tmp_path, "publish", "--variant", "ceph", "--ami", f"{REGION}={ami}").returncode == 0
    received(url)  # the publish's own event
    assert run_cli(tmp_path, "promote", "--due", "--dry-run").returncode == 0
    assert received(url) == []
    done = run_cli(tmp_path, "promote", "--due")
    assert done.returncode == 0, done.stderr
    [event] = received(url)
    detail = check_schema(event, "amibuild Channel Promoted", "promoted")
    assert detail["channel"] == "stable" and detail["from"] == "recommended" and detail["amis"] == {REGION: ami}
