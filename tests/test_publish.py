"""Publishing AMI ids to SSM channels, against the local emulator over real HTTP.

Images are made the way a build leaves them: an instance from a seeded EKS image, `create_image`,
then amibuild's tags. Faults (throttling, a failing region, a held write) come from
`tests/faultproxy.py` in front of the emulator.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path
from typing import Iterator

import boto3
import pytest
from botocore.exceptions import ClientError

from amibuild.channels import read as channel_status
from amibuild.channels import publish
from amibuild.pipeline import Pipeline, Variant, load
from amibuild.aws import Aws, Image
from amibuild.errors import PublishConflict, PublishFailed, PublishRefused, SpecError
from amibuild.sandbox import Sandbox, seed_images
from faultproxy import FaultProxy

REGIONS = ("us-west-2", "eu-west-1")
NAME = "/amibuild/eks-workers/1.35/ceph/{channel}/image_id"
PIPELINE = """
pipeline {
  name       = "eks-workers"
  ssm_prefix = "/amibuild"
  regions    = ["us-west-2"]
  copy_to    = ["eu-west-1"]
}
variant "ceph" {
  extra_packages = ["ceph-common"]
}
variant "plain" {
  arch = "arm64"
}
"""


@pytest.fixture
def pipeline_file(tmp_path: Path) -> Path:
    path = tmp_path / "amibuild.hcl"
    path.write_text(PIPELINE)
    return path


@pytest.fixture
def pipeline(pipeline_file: Path) -> Pipeline:
    return load(pipeline_file)


@pytest.fixture
def ceph(pipeline: Pipeline) -> Variant:
    return next(v for v in pipeline.variants if v.name == "ceph")


@pytest.fixture
def proxy(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    """The fault proxy in front of the emulator; every client made afterwards goes through it."""
    with FaultProxy(sandbox.endpoint, seed=9) as faults:
        monkeypatch.setenv("AWS_ENDPOINT_URL", faults.endpoint)
        yield faults


def build(fingerprint: str, *, variant: str = "ceph", regions=REGIONS, tagged: bool = True) -> dict[str, str]:
    """An image per region as a build leaves it; {region: ami}."""
    amis = {}
    source = seed_images()[0].image_id
    for region in regions:
        ec2 = boto3.client("ec2", region_name=region)
        instance = ec2.run_instances(ImageId=source, MinCount=1, MaxCount=1, InstanceType="m5.large")
        ami = ec2.create_image(InstanceId=instance["Instances"][0]["InstanceId"],
                               Name=f"amibuild-{variant}-{uuid.uuid4().hex[:8]}")["ImageId"]
        if tagged:
            ec2.create_tags(Resources=[ami], Tags=[{"Key": "amibuild:variant", "Value": variant},
                                                   {"Key": "amibuild:fingerprint", "Value": fingerprint},
                                                   {"Key": "amibuild:run-id", "Value": f"run-{fingerprint}"}])
        amis[region] = ami
    return amis


def values(channel: str, region: str) -> list[str]:
    """The channel's history in one region, oldest first, as AMI ids."""
    ssm = boto3.client("ssm", region_name=region)
    return [p["Value"] for p in ssm.get_parameter_history(Name=NAME.format(channel=channel))["Parameters"]]


def written(region: str) -> list[str]:
    """Every parameter name under the pipeline's prefix in one region."""
    ssm = boto3.client("ssm", region_name=region)
    return [p["Name"] for p in ssm.get_parameters_by_path(Path="/amibuild", Recursive=True)["Parameters"]]


def current(channel: str, region: str) -> str:
    return boto3.client("ssm", region_name=region).get_parameter(Name=NAME.format(channel=channel))["Parameter"]["Value"]


_GATEWAYS: dict[str, Aws] = {}


def gateway() -> Aws:
    """One `Aws` per endpoint (the emulator's, or a test's own proxy): a cold boto3 session loads
    the service models again, which costs more than most tests here."""
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    if endpoint not in _GATEWAYS:
        _GATEWAYS[endpoint] = Aws(region="us-west-2")
    return _GATEWAYS[endpoint]


def do_publish(pipeline, variant, amis, **kwargs) -> publish.PublishResult:
    return publish.publish_variant(gateway(), pipeline=pipeline, variant=variant, amis=amis, **kwargs)


# ------------------------------------------------------------------------------- naming (pure)


def test_default_parameter_name_has_the_shape_of_the_aws_eks_parameters(pipeline, ceph):
    name = publish.parameter_name(pipeline, ceph, "recommended")
    assert name == "/amibuild/eks-workers/1.35/ceph/recommended/image_id"
    # /aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/standard/recommended/image_id:
    # k8s, kind, channel, leaf
    assert name.split("/")[-4:] == ["1.35", "ceph", "recommended", "image_id"]


@pytest.mark.parametrize("template, complaint", [
    ("{prefix}/{pipeline}/{variant}/image_id", "{channel}"),
    ("{prefix}/{variant}/{channel}/{flavour}", "unknown field {flavour}"),
    ("amibuild/{variant}/{channel}", "must start with"),
])
def test_parameter_name_template_refuses_templates_that_cannot_name_every_channel(pipeline, ceph, template, complaint):
    with pytest.raises(SpecError, match=complaint.replace("{", r"\{").replace("}", r"\}")):
        publish.parameter_name(pipeline, ceph, "stable", template)


@pytest.mark.parametrize("argument, complaint", [
    ("us-west-2", "write REGION=AMI_ID"),
    ("us-west-2=ami-xyz", "not an AMI id"),
    ("us-wst-2=ami-0123456789abcdef0", "unknown region"),
    ("us-west-2=ami-0123456789abcdef0,us-west-2=ami-0fedcba9876543210", "given twice"),
    ("", "give REGION=AMI_ID"),
])
def test_parse_amis_refuses_malformed_ami_argument(argument, complaint):
    with pytest.raises(SpecError, match=complaint):
        publish.parse_amis(argument)


def test_parse_amis_reads_region_ami_pairs():
    assert publish.parse_amis(["us-west-2=ami-0123456789abcdef0, eu-west-1=ami-0fedcba9876543210"]) == {
        "us-west-2": "ami-0123456789abcdef0", "eu-west-1": "ami-0fedcba9876543210"}


def test_decide_refuses_a_pending_image_and_writes_nothing():
    tags = {"amibuild:fingerprint": "f1", "amibuild:variant": "ceph"}
    images = {"us-west-2": Image("ami-0123456789abcdef0", "us-west-2", "n", "available", tags, ""),
              "eu-west-1": Image("ami-0fedcba9876543210", "eu-west-1", "n", "pending", tags, "")}
    plan = publish.decide(
        operation="publish", parameter="/p", variant="ceph", channel="recommended", required_regions=REGIONS,
        amis={r: i.image_id for r, i in images.items()}, current={"us-west-2": None, "eu-west-1": None},
        images=images, provenance={},
    )
    assert plan.refusals == ("eu-west-1: ami-0fedcba9876543210 is pending, not available",)
    with pytest.raises(PublishRefused, match="refused, nothing written: eu-west-1: .* is pending"):
        publish.execute_publish(None, plan)  # refused before any AWS call: no gateway needed


def test_description_records_run_id_and_fingerprint_that_history_reads_back():
    text = publish.description("ceph", "stable", publish.Provenance("r1", "f1"), "promoted from recommended")
    assert text == "ceph stable AMI, written by amibuild 0.1.0 (run r1, fingerprint f1, promoted from recommended)"
    assert publish.provenance_of(text) == publish.Provenance("r1", "f1")
    assert publish.provenance_of("set by hand") == publish.Provenance()


# ------------------------------------------------------------------------------- publish


def test_publish_writes_the_ami_in_every_region_with_image_data_type_and_tags(sandbox, pipeline, ceph):
    amis = build("fp1")
    result = do_publish(pipeline, ceph, amis, run_id="run-42")
    assert result.parameter == NAME.format(channel="recommended")
    assert {r.region: (r.ami, r.version) for r in result.regions} == {r: (amis[r], 1) for r in REGIONS}
    for region in REGIONS:
        ssm = boto3.client("ssm", region_name=region)
        got = ssm.get_parameter(Name=result.parameter)["Parameter"]
        assert (got["Value"], got["Type"], got["DataType"]) == (amis[region], "String", "aws:ec2:image")
        meta = ssm.describe_parameters(ParameterFilters=[{"Key": "Name", "Values": [result.parameter]}])["Parameters"][0]
        assert meta["Tier"] == "Standard"
        # the transaction's token tells its own versions from any other writer's (a retried put too)
        assert re.fullmatch(r"ceph recommended AMI, written by amibuild 0\.1\.0 \(run run-42, fingerprint fp1, "
                            r"write [0-9a-f]{12}\)", meta["Description"]), meta["Description"]
        tags = {t["Key"]: t["Value"] for t in ssm.list_tags_for_resource(
            ResourceType="Parameter", ResourceId=result.parameter)["TagList"]}
        assert tags == {"amibuild:fingerprint": "fp1", "amibuild:run-id": "run-42", "amibuild:pipeline": "eks-workers",
                        "amibuild:variant": "ceph", "amibuild:channel": "recommended",
                        # every region of the channel: a later write of fewer regions is refused
                        "amibuild:channel-regions": "eu-west-1 us-west-2",
                        # where every writer of the channel takes its lease (the first region, in name order)
                        "amibuild:lease-home": "eu-west-1"}
    # the channel's lease was given back: only the channel's own parameter is left
    assert written("us-west-2") == [result.parameter]


def test_republishing_the_same_ami_makes_no_new_version(sandbox, pipeline, ceph):
    amis = build("fp1")
    do_publish(pipeline, ceph, amis)
    again = do_publish(pipeline, ceph, amis)
    assert not again.changed
    assert [r.action for r in again.regions] == [publish.PublishAction.UNCHANGED] * 2
    assert values("recommended", "us-west-2") == [amis["us-west-2"]]
    assert values("recommended", "eu-west-1") == [amis["eu-west-1"]]


def test_publish_refuses_unavailable_image(sandbox, pipeline, ceph):
    amis = build("fp1")
    boto3.client("ec2", region_name="eu-west-1").disable_image(ImageId=amis["eu-west-1"])
    with pytest.raises(PublishRefused, match=f"eu-west-1: {amis['eu-west-1']} is disabled, not available"):
        do_publish(pipeline, ceph, amis)
    assert written("us-west-2") == []


def test_publish_refuses_image_missing_in_one_region(sandbox, pipeline, ceph):
    amis = build("fp1", regions=("us-west-2",))
    with pytest.raises(PublishRefused, match="eu-west-1: no image for this region"):
        do_publish(pipeline, ceph, amis)
    # the us-west-2 id does not exist in eu-west-1
    with pytest.raises(PublishRefused, match=f"eu-west-1: {amis['us-west-2']} does not exist there"):
        do_publish(pipeline, ceph, {**amis, "eu-west-1": amis["us-west-2"]})
    assert written("us-west-2") == []


def test_publish_refuses_foreign_image_without_allow_foreign(sandbox, pipeline, ceph):
    amis = build("fp1", tagged=False)
    with pytest.raises(PublishRefused, match="has no amibuild:fingerprint tag.*--allow-foreign"):
        do_publish(pipeline, ceph, amis)
    result = do_publish(pipeline, ceph, amis, allow_foreign=True)
    assert [current("recommended", r) for r in REGIONS] == [amis[r] for r in REGIONS]
    assert result.changed


def test_publish_refuses_an_image_built_for_another_variant(sandbox, pipeline, ceph):
    amis = build("fp1", variant="plain")
    with pytest.raises(PublishRefused, match="built for variant plain, not ceph"):
        do_publish(pipeline, ceph, amis)


def test_write_failing_in_second_region_puts_first_region_back(proxy, pipeline, ceph):
    old, new = build("fp1"), build("fp2")
    do_publish(pipeline, ceph, old)
    proxy.fail("eu-west-1", name="/image_id")
    with pytest.raises(PublishFailed) as caught:
        do_publish(pipeline, ceph, new)
    message = str(caught.value)
    assert "eu-west-1" in message and "AccessDenied" in message
    assert "failed, nothing is left half moved" in message
    assert f"us-west-2: back to {old['us-west-2']} (version 3)" in message
    assert values("recommended", "us-west-2") == [old["us-west-2"], new["us-west-2"], old["us-west-2"]]
    assert values("recommended", "eu-west-1") == [old["eu-west-1"]]


def test_write_failing_in_second_region_deletes_a_parameter_the_run_created(proxy, pipeline, ceph):
    proxy.fail("eu-west-1", name="/image_id")
    with pytest.raises(PublishFailed, match="us-west-2: deleted again"):
        do_publish(pipeline, ceph, build("fp1"))
    assert written("us-west-2") == []


def test_a_writer_moving_the_channel_between_read_and_write_is_a_conflict_naming_both_amis(sandbox, pipeline, ceph):
    first, ours, theirs = build("fp1"), build("fp2"), build("fp3")
    do_publish(pipeline, ceph, first)
    aws = gateway()
    plan = publish.plan_publish(aws, pipeline=pipeline, variant=ceph, amis=ours)
    boto3.client("ssm", region_name="us-west-2").put_parameter(
        Name=NAME.format(channel="recommended"), Value=theirs["us-west-2"], Type="String",
        DataType="aws:ec2:image", Overwrite=True)
    with pytest.raises(PublishConflict) as caught:
        publish.execute_publish(aws, plan)
    assert ours["us-west-2"] in str(caught.value) and theirs["us-west-2"] in str(caught.value)
    assert values("recommended", "us-west-2") == [first["us-west-2"], theirs["us-west-2"], ours["us-west-2"],
                                                  theirs["us-west-2"]]
    # every region is written at once (writers that take the lease never meet here): the other
    # region's write was put back, and the message says so
    assert values("recommended", "eu-west-1") == [first["eu-west-1"], ours["eu-west-1"], first["eu-west-1"]]
    assert f"eu-west-1: back to {first['eu-west-1']}" in str(caught.value)
    # --force: the same stale plan overwrites
    forced = publish.execute_publish(aws, plan, force=True)
    assert [current("recommended", r) for r in REGIONS] == [ours[r] for r in REGIONS]
    assert forced.changed


def test_a_region_that_already_held_the_image_is_checked_again_and_a_move_there_undoes_the_write(
        sandbox, pipeline, ceph):
    old, new, theirs = build("fp1"), build("fp2"), build("fp3")
    do_publish(pipeline, ceph, {"us-west-2": old["us-west-2"], "eu-west-1": new["eu-west-1"]}, allow_foreign=True)
    aws = gateway()
    plan = publish.plan_publish(aws, pipeline=pipeline, variant=ceph, amis=new)
    assert [(r.region, r.action) for r in plan.regions] == [("us-west-2", publish.PublishAction.WRITE),
                                                            ("eu-west-1", publish.PublishAction.UNCHANGED)]
    # someone outside amibuild moves the region amibuild will not write
    boto3.client("ssm", region_name="eu-west-1").put_parameter(
        Name=NAME.format(channel="recommended"), Value=theirs["eu-west-1"], Type="String",
        DataType="aws:ec2:image", Overwrite=True)
    with pytest.raises(PublishConflict) as caught:
        publish.execute_publish(aws, plan)
    message = str(caught.value)
    assert f"eu-west-1 holds {theirs['eu-west-1']} (version 2), not {new['eu-west-1']}" in message
    assert f"us-west-2: back to {old['us-west-2']}" in message
    assert "the channel is SPLIT across regions" in message  # someone else moved eu-west-1: not whole
    # us-west-2 is not left on an image the other region does not have
    assert values("recommended", "us-west-2") == [old["us-west-2"], new["us-west-2"], old["us-west-2"]]


def test_a_channel_parameter_of_another_data_type_is_refused_before_anything_is_written(sandbox, pipeline, ceph):
    """SSM cannot change a parameter to aws:ec2:image: the dry run and the write both refuse, naming the
    region, where the write used to fail at its put and unwind the regions it had written."""
    old, new = build("fp1"), build("fp2")
    do_publish(pipeline, ceph, old)
    ssm = boto3.client("ssm", region_name="eu-west-1")
    ssm.delete_parameter(Name=NAME.format(channel="recommended"))  # someone made it a text parameter there
    ssm.put_parameter(Name=NAME.format(channel="recommended"), Value=old["eu-west-1"], Type="String", DataType="text")
    refused = "eu-west-1: the parameter has data type text.*delete it there"
    with pytest.raises(PublishRefused, match=refused):
        do_publish(pipeline, ceph, new, dry_run=True).raise_for_status()
    with pytest.raises(PublishRefused, match=refused):
        do_publish(pipeline, ceph, new)
    assert (values("recommended", "us-west-2"), values("recommended", "eu-west-1")) == (
        [old["us-west-2"]], [old["eu-west-1"]])


def test_a_channel_whose_oldest_kept_version_has_a_label_is_refused_before_anything_is_written(sandbox, pipeline, ceph):
    """SSM keeps 100 versions and refuses a put that would delete a labelled oldest one
    (ParameterMaxVersionLimitExceeded): the write moved the other region and back, the dry run said it would write."""
    old, new = build("fp1"), build("fp2")
    do_publish(pipeline, ceph, old)
    ssm, name = boto3.client("ssm", region_name="eu-west-1"), NAME.format(channel="recommended")
    ssm.label_parameter_version(Name=name, ParameterVersion=1, Labels=["known-good"])
    for _ in range(99):
        ssm.put_parameter(Name=name, Value=old["eu-west-1"], Type="String", DataType="aws:ec2:image", Overwrite=True)
    refused = r"eu-west-1: the parameter keeps SSM's 100 versions, and its oldest \(version 1\) has the label known-good"
    with pytest.raises(PublishRefused, match=refused):
        do_publish(pipeline, ceph, new, dry_run=True).raise_for_status()
    with pytest.raises(PublishRefused, match=refused):
        do_publish(pipeline, ceph, new)
    assert values("recommended", "us-west-2") == [old["us-west-2"]]


# ------------------------------------------------------------------------------- promote, rollback, history


def test_promote_copies_each_regions_exact_ami_to_the_target_channel(sandbox, pipeline, ceph):
    amis = build("fp1")
    do_publish(pipeline, ceph, amis, run_id="run-7")
    result = publish.promote(gateway(), pipeline=pipeline, variant=ceph,
                             source="recommended", target="stable")
    assert result.parameter == NAME.format(channel="stable")
    assert [current("stable", r) for r in REGIONS] == [amis[r] for r in REGIONS]
    entries = channel_status.history(gateway(), pipeline=pipeline, variant=ceph, channel="stable")
    assert {(e.region, e.ami, e.fingerprint, e.run_id) for e in entries} == {
        (r, amis[r], "fp1", "run-7") for r in REGIONS}
    assert all("promoted from recommended" in e.description for e in entries)


def force_deregister(region, ami):
    """Deregister a channel image behind amibuild's back: refused while it is protected (issue 28), so
    the protection is turned off first, as someone determined to delete it would."""
    ec2 = boto3.client("ec2", region_name=region)
    with pytest.raises(ClientError, match="OperationNotPermitted"):
        ec2.deregister_image(ImageId=ami)
    ec2.disable_image_deregistration_protection(ImageId=ami)
    ec2.deregister_image(ImageId=ami)


def test_promote_refuses_source_pointing_at_a_deregistered_image(sandbox, pipeline, ceph):
    amis = build("fp1")
    do_publish(pipeline, ceph, amis)
    force_deregister("eu-west-1", amis["eu-west-1"])
    with pytest.raises(PublishRefused, match=f"eu-west-1: {amis['eu-west-1']} does not exist there"):
        publish.promote(gateway(), pipeline=pipeline, variant=ceph, source="recommended", target="stable")
    assert boto3.client("ssm", region_name="us-west-2").get_parameters(
        Names=[NAME.format(channel="stable")])["InvalidParameters"] == [NAME.format(channel="stable")]


def test_rollback_goes_back_to_the_previous_distinct_ami_then_to_a_chosen_version(sandbox, pipeline, ceph):
    a, b = build("fp1"), build("fp2")
    do_publish(pipeline, ceph, a)
    do_publish(pipeline, ceph, b)
    aws = gateway()
    back = publish.rollback(aws, pipeline=pipeline, variant=ceph, channel="recommended")
    assert [current("recommended", r) for r in REGIONS] == [a[r] for r in REGIONS]
    assert {r.region: (r.previous_ami, r.version) for r in back.regions} == {r: (b[r], 3) for r in REGIONS}
    publish.rollback(aws, pipeline=pipeline, variant=ceph, channel="recommended", to_version=2)
    assert values("recommended", "eu-west-1") == [a["eu-west-1"], b["eu-west-1"], a["eu-west-1"], b["eu-west-1"]]
    with pytest.raises(SpecError, match="--to-version 9: .* has versions 1..4"):
        publish.rollback(aws, pipeline=pipeline, variant=ceph, channel="recommended", to_version=9)


def test_rollback_refuses_a_version_whose_image_was_deregistered(sandbox, pipeline, ceph):
    a, b = build("fp1"), build("fp2")
    do_publish(pipeline, ceph, a)
    do_publish(pipeline, ceph, b)
    force_deregister("us-west-2", a["us-west-2"])  # the channel's previous image: still protected
    with pytest.raises(PublishRefused, match=f"us-west-2: {a['us-west-2']} does not exist there"):
        publish.rollback(gateway(), pipeline=pipeline, variant=ceph, channel="recommended")
    assert values("recommended", "us-west-2") == [a["us-west-2"], b["us-west-2"]]


def test_history_lists_every_version_with_ami_fingerprint_run_id_and_writer(sandbox, pipeline, ceph):
    a, b = build("fp1"), build("fp2")
    do_publish(pipeline, ceph, a, run_id="run-1")
    do_publish(pipeline, ceph, b, run_id="run-2")
    publish.promote(gateway(), pipeline=pipeline, variant=ceph, source="recommended", target="stable")
    entries = channel_status.history(gateway(), pipeline=pipeline, variant=ceph, region="eu-west-1")
    rows = [(e.channel, e.version, e.ami, e.fingerprint, e.run_id) for e in entries]
    assert rows == [("recommended", 1, a["eu-west-1"], "fp1", "run-1"),
                    ("recommended", 2, b["eu-west-1"], "fp2", "run-2"),
                    ("stable", 1, b["eu-west-1"], "fp2", "run-2")]
    assert all(e.modified is not None and e.user for e in entries)  # the emulator's LastModifiedUser is "N/A"
    assert entries[0].to_dict()["modified"].startswith("20")


def test_history_of_every_channel_lists_them_when_the_name_template_has_no_k8s(sandbox, tmp_path: Path):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE.replace(
        'copy_to    = ["eu-west-1"]', 'copy_to    = ["eu-west-1"]\n  parameter_template = "{prefix}/{pipeline}/{variant}/{channel}"'))
    pipeline = load(tmp_path / "amibuild.hcl")
    ceph = next(v for v in pipeline.variants if v.name == "ceph")
    amis = build("fp1")
    do_publish(pipeline, ceph, amis, run_id="run-1")
    publish.promote(gateway(), pipeline=pipeline, variant=ceph, source="recommended", target="stable")
    entries = channel_status.history(gateway(), pipeline=pipeline, variant=ceph, region="us-west-2")
    assert [(e.channel, e.parameter, e.version, e.ami) for e in entries] == [
        ("recommended", "/amibuild/eks-workers/ceph/recommended", 1, amis["us-west-2"]),
        ("stable", "/amibuild/eks-workers/ceph/stable", 1, amis["us-west-2"])]


def test_channels_lists_every_variant_channel_and_region(sandbox, pipeline, ceph):
    amis = build("fp1")
    do_publish(pipeline, ceph, amis)
    publish.promote(gateway(), pipeline=pipeline, variant=ceph, source="recommended", target="stable")
    rows = channel_status.channels(gateway(), pipeline=pipeline)
    assert {(e.variant, e.k8s, e.channel, e.region, e.ami, e.version) for e in rows} == {
        ("ceph", "1.35", "recommended", "us-west-2", amis["us-west-2"], 1),
        ("ceph", "1.35", "recommended", "eu-west-1", amis["eu-west-1"], 1),
        ("ceph", "1.35", "stable", "us-west-2", amis["us-west-2"], 1),
        ("ceph", "1.35", "stable", "eu-west-1", amis["eu-west-1"], 1),
        ("plain", "1.35", "recommended", "us-west-2", None, 0),  # a variant never published
        ("plain", "1.35", "recommended", "eu-west-1", None, 0),
    }


# ------------------------------------------------------------------------------- concurrency, throttling

def test_a_too_many_updates_answer_is_retried_as_a_throttled_one(proxy, pipeline, ceph):
    """SSM answers TooManyUpdates while another update of the parameter is under way (nothing written), and
    botocore does not retry it: the channel's put failed the write (put back elsewhere), the lease's its writer."""
    amis = build("fp1")
    proxy.fail("eu-west-1", code="TooManyUpdates", message="", times=1, name="/image_id")
    proxy.fail("us-west-2", code="TooManyUpdates", message="", times=1, name="_leases/channel")
    do_publish(pipeline, ceph, amis)
    assert [values("recommended", r) for r in REGIONS] == [[amis[r]] for r in REGIONS]
    assert proxy.count("AmazonSSM.PutParameter", "failed") == 2


def test_publishing_through_30_percent_throttling_writes_everything_once(proxy, pipeline, ceph):
    a, b = build("fp1"), build("fp2")
    proxy.throttle(0.3)
    aws = gateway()
    do_publish(pipeline, ceph, a)
    do_publish(pipeline, ceph, b)
    publish.promote(aws, pipeline=pipeline, variant=ceph, source="recommended", target="stable")
    for region in REGIONS:
        assert values("recommended", region) == [a[region], b[region]]
        assert values("stable", region) == [b[region]]
    put = "AmazonSSM.PutParameter"
    # the proxy throttled some channel and lease writes; each was retried until it went through
    assert proxy.count(put, "throttled") >= 2
    # one PutParameter per version: no duplicate versions
    assert proxy.count(put, "forwarded", name="/image_id") == 6
    # three transactions, four leases (promote holds both channels'), each created and deleted once;
    # every write holds its channel lease in both regions it writes (where a prune of other regions
    # meets it), and nothing under any other folder
    assert proxy.count(put, "forwarded", name="_leases/channel") == 8
    assert proxy.count("AmazonSSM.DeleteParameter", "forwarded", name="_leases/channel") == 8
    assert proxy.count(put, "forwarded", name="amibuild-lease") == 0


# ------------------------------------------------------------------------------- sharing


def test_sharing_check_names_the_missing_launch_and_snapshot_permissions(sandbox):
    amis = build("fp1")
    us = boto3.client("ec2", region_name="us-west-2")
    us.modify_image_attribute(ImageId=amis["us-west-2"], LaunchPermission={"Add": [{"UserId": "111122223333"}]})
    snapshot = us.describe_images(ImageIds=[amis["us-west-2"]])["Images"][0]["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"]
    us.modify_snapshot_attribute(SnapshotId=snapshot, Attribute="createVolumePermission", OperationType="add",
                                 UserIds=["111122223333", "444455556666"])
    report = channel_status.check_sharing(gateway(), amis=amis, users=["111122223333", "444455556666"])
    assert not report.ok
    problems = report.problems()
    assert f"us-west-2: {amis['us-west-2']} launch permission missing for 444455556666" in problems
    assert not any(f"snapshot {snapshot}" in line for line in problems)  # both may read that snapshot
    assert any(line.startswith(f"eu-west-1: {amis['eu-west-1']} launch permission missing for 111122223333, "
                               "444455556666") for line in problems)
    assert any(line.startswith(f"eu-west-1: {amis['eu-west-1']} snapshot snap-") for line in problems)
