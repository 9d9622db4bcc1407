"""clean-run removes only leftovers: through the CLI against the emulator, and `decide` as a table.

A run's images are made the way a build leaves them (an instance from a seeded EKS image,
`create_image` named ``...-<run id>``, amibuild's tags; copies untagged while Packer is still
copying); the end state of every region is read back with boto3 after each command.
"""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest

from amibuild import tags
from amibuild.aws import Image
from amibuild.bake.leftovers import Leftover
from amibuild.bake.packer import temp_prefix
from amibuild.lease import Holder
from amibuild.lifecycle import cleanup
from amibuild.lifecycle.prune import ChannelFact, LaunchFacts, Uses
from amibuild.sandbox import seed_images
from conftest import run_cli

RUN = "20261201T100000Z-abc123"
OTHER = "20261201T090000Z-def456"
REGIONS = ("us-west-2", "eu-west-1")
PIPELINE = """
pipeline {
  name    = "e2e"
  regions = ["us-west-2"]
  copy_to = ["eu-west-1"]
}
variant "ceph" {}
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    return tmp_path


def bake(run: str, *, tagged: bool = True, fingerprint: str = "fp1") -> dict[str, str]:
    """The images one run of variant ceph made, {region: ami}; `tagged` False: Packer stopped while
    copying (the copy has no tags yet)."""
    west = boto3.client("ec2", region_name="us-west-2")
    instance = west.run_instances(ImageId=seed_images()[0].image_id, MinCount=1, MaxCount=1)["Instances"][0]
    name = f"e2e-ceph-1.35-x86_64-1796000000-{run}"
    image = west.create_image(InstanceId=instance["InstanceId"], Name=name)["ImageId"]
    west.terminate_instances(InstanceIds=[instance["InstanceId"]])
    copy = boto3.client("ec2", region_name="eu-west-1").copy_image(SourceImageId=image, SourceRegion="us-west-2",
                                                                    Name=name)["ImageId"]
    made = {"us-west-2": image, "eu-west-1": copy}
    for region, ami in made.items():
        if tagged or region == "us-west-2":
            boto3.client("ec2", region_name=region).create_tags(Resources=[ami], Tags=[
                {"Key": tags.PIPELINE, "Value": "e2e"}, {"Key": tags.VARIANT, "Value": "ceph"},
                {"Key": tags.FINGERPRINT, "Value": fingerprint}, {"Key": tags.RUN_ID, "Value": run}])
    return made


def registered(amis: dict[str, str]) -> dict[str, bool]:
    return {region: bool(boto3.client("ec2", region_name=region).describe_images(
        Filters=[{"Name": "image-id", "Values": [ami]}])["Images"]) for region, ami in amis.items()}


def ami_flag(amis: dict[str, str]) -> str:
    return ",".join(f"{r}={a}" for r, a in amis.items())


# ------------------------------------------------------------------------------- through the CLI


def test_clean_run_of_a_run_that_published_keeps_every_image_and_snapshot_and_says_why(sandbox, workdir) -> None:
    made = bake(RUN)
    for channel in ("recommended", "stable", "candidate"):
        done = run_cli(workdir, "publish", "--variant", "ceph", "--channel", channel, "--ami", ami_flag(made))
        assert done.returncode == 0, done.stderr
    snapshots = {r: boto3.client("ec2", region_name=r).describe_images(ImageIds=[a])["Images"][0]
                 ["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"] for r, a in made.items()}

    result = run_cli(workdir, "clean-run", "--run-id", RUN)
    assert result.returncode == 0, result.stderr
    for region, ami in made.items():
        assert f"kept  image {ami} in {region}: in use: channel recommended of ceph current in {region}" in result.stdout
        assert f"kept  snapshot {snapshots[region]} in {region}: backs the kept image {ami}" in result.stdout
    assert "removed  image" not in result.stdout and "removed  snapshot" not in result.stdout
    assert registered(made) == {r: True for r in REGIONS}
    for region, snapshot in snapshots.items():
        assert boto3.client("ec2", region_name=region).describe_snapshots(SnapshotIds=[snapshot])["Snapshots"]


def test_clean_run_keeps_an_image_a_launch_template_uses_and_of_a_published_run_all_images(sandbox, workdir) -> None:
    made = bake(RUN)
    ec2 = boto3.client("ec2", region_name="eu-west-1")
    ec2.create_launch_template(LaunchTemplateName="nodes", LaunchTemplateData={"ImageId": made["eu-west-1"]})
    listed = run_cli(workdir, "clean-run", "--run-id", RUN, "--dry-run", "--json")
    assert listed.returncode == 0, listed.stderr
    kept = {k["id"]: k["why"] for k in json.loads(listed.stdout)["kept"]}
    assert "launch template" in kept[made["eu-west-1"]] and "nodes" in kept[made["eu-west-1"]]
    # the us-west-2 image is complete (tagged, available): a finished build's, prune's to judge
    assert "complete image" in kept[made["us-west-2"]]
    assert registered(made) == {r: True for r in REGIONS}


def test_clean_run_removes_a_partial_copy_of_an_unfinished_run_and_keeps_the_complete_image(sandbox, workdir) -> None:
    made = bake(RUN, tagged=False)  # stopped while copying to eu-west-1: the copy is untagged
    other = bake(OTHER)
    result = run_cli(workdir, "clean-run", "--run-id", RUN)
    assert result.returncode == 0, result.stderr
    assert f"removed  image {made['eu-west-1']} in eu-west-1" in result.stdout
    assert f"kept  image {made['us-west-2']} in us-west-2: a complete image" in result.stdout
    assert registered(made) == {"us-west-2": True, "eu-west-1": False}
    assert registered(other) == {r: True for r in REGIONS}  # another run: untouched


def test_clean_run_dry_run_lists_the_protection_it_would_turn_off_before_the_deregister(sandbox, workdir) -> None:
    made = bake(RUN, tagged=False)
    ec2 = boto3.client("ec2", region_name="eu-west-1")
    ec2.enable_image_deregistration_protection(ImageId=made["eu-west-1"])
    listed = run_cli(workdir, "clean-run", "--run-id", RUN, "--dry-run")
    assert listed.returncode == 0, listed.stderr
    assert (f"would turn deregistration protection off  image {made['eu-west-1']} in eu-west-1  (aws ec2 "
            f"disable-image-deregistration-protection --image-id {made['eu-west-1']} --region eu-west-1)") in listed.stdout
    as_data = json.loads(run_cli(workdir, "clean-run", "--run-id", RUN, "--dry-run", "--json").stdout)
    assert as_data["unprotect"] == [{"kind": "image", "region": "eu-west-1", "id": made["eu-west-1"]}]
    assert ec2.describe_images(ImageIds=[made["eu-west-1"]])["Images"][0]["DeregistrationProtection"] == "enabled"
    done = run_cli(workdir, "clean-run", "--run-id", RUN)
    assert done.returncode == 0, done.stderr
    assert registered(made) == {"us-west-2": True, "eu-west-1": False}


def test_clean_run_of_an_unknown_run_id_exits_2_and_touches_nothing(sandbox, workdir) -> None:
    other = bake(OTHER)
    result = run_cli(workdir, "clean-run", "--run-id", RUN)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"amibuild: error: --run-id: no run {RUN} is known: no record of it under build/runs/, and nothing in AWS "
        "carries its id; `amibuild runs` lists the runs")
    assert registered(other) == {r: True for r in REGIONS}


def test_clean_run_removes_the_runs_expired_build_lease_and_leaves_other_runs_leases(sandbox, workdir) -> None:
    ssm = boto3.client("ssm", region_name="us-west-2")
    mine, theirs = "/amibuild/e2e/_leases/build/ceph/" + "ab" * 16, "/amibuild/e2e/_leases/build/ceph/" + "cd" * 16
    ssm.put_parameter(Name=mine, Type="String", Value=Holder("ci@gone pid 1", RUN, 1.0).to_value())
    ssm.put_parameter(Name=theirs, Type="String", Value=Holder("ci@busy pid 2", OTHER, 4.0e9).to_value())
    result = run_cli(workdir, "clean-run", "--run-id", RUN)
    assert result.returncode == 0, result.stderr
    assert f"removed  lease {mine} in us-west-2" in result.stdout
    names = [p["Name"] for p in ssm.get_parameters_by_path(Path="/amibuild/e2e", Recursive=True)["Parameters"]]
    assert names == [theirs]


# ------------------------------------------------------------------------------- decide (pure)


def _image(ami: str, region: str, *, state: str = "available", fingerprint: str | None = "fp1",
           snapshot: str = "") -> Image:
    found = {tags.FINGERPRINT: fingerprint} if fingerprint else {}
    return Image(ami, region, f"e2e-ceph-{RUN}", state, found, "2026-12-01T10:00:00.000Z",
                 (snapshot,) if snapshot else ())


@pytest.mark.parametrize("case, image, uses, record_published, remove, why", [
    ("channel current", _image("ami-1", "us-west-2"),
     Uses((ChannelFact("us-west-2", "/c", "channel stable of ceph", ((1, "ami-1"),)),)), False, False,
     "in use: channel stable of ceph current in us-west-2"),
    ("rollback window", _image("ami-1", "us-west-2"),
     Uses((ChannelFact("us-west-2", "/c", "channel stable of ceph", ((1, "ami-1"), (2, "ami-9"))),)), False, False,
     "in use: channel stable of ceph version 1 in us-west-2 (rollback window)"),
    ("published long ago", _image("ami-1", "us-west-2", fingerprint=None),
     Uses((ChannelFact("us-west-2", "/c", "channel stable of ceph", ((1, "ami-1"),) + tuple((v, f"ami-{v}") for v in range(2, 9))),)),
     False, False, "run 20261201T100000Z-abc123 published"),
    ("record says published", _image("ami-1", "us-west-2", fingerprint=None), Uses(), True, False,
     "run 20261201T100000Z-abc123 published"),
    ("instance", _image("ami-1", "us-west-2", fingerprint=None),
     Uses((), (LaunchFacts("us-west-2", instances=(("i-1", "running", "ami-1"),)),)), False, False,
     "in use: instance i-1 running"),
    ("complete", _image("ami-1", "us-west-2"), Uses(), False, False, "a complete image"),
    ("untagged copy", _image("ami-1", "eu-west-1", fingerprint=None), Uses(), False, True, ""),
    ("failed", _image("ami-1", "eu-west-1", state="failed"), Uses(), False, True, ""),
    ("pending", _image("ami-1", "eu-west-1", state="pending"), Uses(), False, True, ""),
])
def test_decide_keeps_images_in_use_or_of_published_or_finished_runs(case, image, uses, record_published, remove,
                                                                     why) -> None:
    found = (Leftover("image", image.region, image.image_id),)
    facts = cleanup.RunFacts(RUN, found, {image.image_id: image}, uses, record_published=record_published)
    (verdict,) = cleanup.decide(facts)
    assert verdict.remove is remove, case
    assert verdict.why.startswith(why), (case, verdict.why)


def test_decide_keeps_the_snapshot_of_a_kept_image_and_removes_the_scaffolding() -> None:
    kept = _image("ami-1", "us-west-2", snapshot="snap-1")
    partial = _image("ami-2", "eu-west-1", fingerprint=None, snapshot="snap-2")
    found = (Leftover("image", "us-west-2", "ami-1"), Leftover("image", "eu-west-1", "ami-2"),
             Leftover("snapshot", "us-west-2", "snap-1"), Leftover("snapshot", "eu-west-1", "snap-2"),
             Leftover("instance", "us-west-2", "i-1"), Leftover("key-pair", "us-west-2", f"amibuild-{RUN}-ceph"),
             Leftover("security-group", "us-west-2", "sg-1"), Leftover("volume", "us-west-2", "vol-1"))
    verdicts = cleanup.decide(cleanup.RunFacts(RUN, found, {"ami-1": kept, "ami-2": partial}, Uses()))
    assert {(v.item.id, v.remove) for v in verdicts} == {
        ("ami-1", False), ("snap-1", False), ("ami-2", True), ("snap-2", True),
        ("i-1", True), (f"amibuild-{RUN}-ceph", True), ("sg-1", True), ("vol-1", True)}
    assert next(v for v in verdicts if v.item.id == "snap-1").why == "backs the kept image ami-1"


def test_clean_run_removes_the_runs_packer_temp_folder_left_on_this_machine(sandbox, workdir) -> None:
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix=temp_prefix(RUN)))
    (folder / "packer-log123456").write_text("a killed Packer's log\n")
    other = Path(tempfile.mkdtemp(prefix=temp_prefix(OTHER)))
    try:
        listed = run_cli(workdir, "clean-run", "--run-id", RUN, "--dry-run")
        assert listed.returncode == 0, listed.stderr
        assert f"found  temp folder {folder}  (rm -rf {folder})" in listed.stdout and folder.exists()
        done = run_cli(workdir, "clean-run", "--run-id", RUN)
        assert done.returncode == 0, done.stderr
        assert f"removed  temp folder {folder}" in done.stdout
        assert not folder.exists() and other.exists()
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(other, ignore_errors=True)


def test_clean_run_keeps_a_disabled_complete_image_and_its_run_tagged_snapshot(sandbox, workdir) -> None:
    # A disabled image is still registered but hidden from DescribeImages without IncludeDisabled: its
    # snapshot (tagged with the run id as Packer's snapshot_tags do) was found alone and targeted, and
    # AWS refuses to delete a registered image's snapshot.
    made = bake(RUN)
    west = boto3.client("ec2", region_name="us-west-2")
    snapshot = west.describe_images(ImageIds=[made["us-west-2"]])["Images"][0]["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"]
    west.create_tags(Resources=[snapshot], Tags=[{"Key": tags.RUN_ID, "Value": RUN}, {"Key": tags.VARIANT, "Value": "ceph"}])
    west.disable_image(ImageId=made["us-west-2"])
    result = run_cli(workdir, "clean-run", "--run-id", RUN)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"kept  image {made['us-west-2']} in us-west-2: a complete image (disabled" in result.stdout
    assert f"kept  snapshot {snapshot} in us-west-2: backs the kept image {made['us-west-2']}" in result.stdout
    assert west.describe_snapshots(SnapshotIds=[snapshot])["Snapshots"]
    assert west.describe_images(ImageIds=[made["us-west-2"]], IncludeDisabled=True)["Images"][0]["State"] == "disabled"


def test_clean_run_removes_a_disabled_partial_copy_and_then_its_snapshot(sandbox, workdir) -> None:
    made = bake(RUN, tagged=False)  # the eu-west-1 copy is untagged: partial
    europe = boto3.client("ec2", region_name="eu-west-1")
    snapshot = europe.describe_images(ImageIds=[made["eu-west-1"]])["Images"][0]["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"]
    europe.disable_image(ImageId=made["eu-west-1"])
    result = run_cli(workdir, "clean-run", "--run-id", RUN)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"removed  image {made['eu-west-1']} in eu-west-1" in result.stdout
    assert f"removed  snapshot {snapshot} in eu-west-1" in result.stdout
    assert not europe.describe_images(ImageIds=[made["eu-west-1"]], IncludeDisabled=True)["Images"]


def test_decide_keeps_a_disabled_complete_image_and_says_it_is_disabled() -> None:
    image = _image("ami-1", "us-west-2", state="disabled", snapshot="snap-1")
    found = (Leftover("image", "us-west-2", "ami-1"), Leftover("snapshot", "us-west-2", "snap-1"))
    verdicts = cleanup.decide(cleanup.RunFacts(RUN, found, {"ami-1": image}, Uses()))
    assert [(v.item.id, v.remove) for v in verdicts] == [("ami-1", False), ("snap-1", False)]
    assert verdicts[0].why.startswith("a complete image (disabled, tagged with its fingerprint)")


def test_clean_run_says_a_snapshot_another_image_uses_was_left_behind_not_removed(sandbox, workdir) -> None:
    import os

    from faultproxy import FaultProxy

    made = bake(RUN, tagged=False)  # the eu-west-1 copy is partial: it and its snapshot go
    europe = boto3.client("ec2", region_name="eu-west-1")
    snapshot = europe.describe_images(ImageIds=[made["eu-west-1"]])["Images"][0]["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"]
    with FaultProxy(sandbox.endpoint) as proxy:  # an image registered from it elsewhere: EC2 keeps it
        proxy.fail("eu-west-1", ["DeleteSnapshot"], code="InvalidSnapshot.InUse",
                   message=f"The snapshot {snapshot} is currently in use by ami-0123456789abcdef0")
        result = run_cli(workdir, "clean-run", "--run-id", RUN, env={**os.environ, "AWS_ENDPOINT_URL": proxy.endpoint})
    assert europe.describe_snapshots(SnapshotIds=[snapshot])["Snapshots"]
    assert f"removed  snapshot {snapshot}" not in result.stdout
    assert f"snapshot {snapshot} in eu-west-1" in result.stdout and "InvalidSnapshot.InUse" in result.stdout


def test_clean_run_says_it_kept_a_lease_another_run_took_over_meanwhile(sandbox, workdir) -> None:
    import os

    from faultproxy import FaultProxy
    from test_channel_races import Cli

    ssm = boto3.client("ssm", region_name="us-west-2")
    name = "/amibuild/e2e/_leases/build/ceph/" + "ab" * 16
    ssm.put_parameter(Name=name, Type="String", Value=Holder("ci@gone pid 1", RUN, 1.0).to_value())
    with FaultProxy(sandbox.endpoint) as proxy:  # clean-run's last look before its delete
        gate = proxy.gate(["AmazonSSM.GetParameter"], name=name)
        os.environ["AWS_ENDPOINT_URL"] = proxy.endpoint
        try:
            cleaning = Cli(workdir, "clean-run", "--run-id", RUN)
        finally:
            os.environ["AWS_ENDPOINT_URL"] = sandbox.endpoint
        assert gate.wait_held(1), cleaning.lines
        ssm.put_parameter(Name=name, Type="String", Overwrite=True, Value=Holder("ci@busy pid 2", OTHER, 4.0e9).to_value())
        gate.release()
        code, out, err = cleaning.finish()
    assert code == 0, err
    assert f"kept  lease {name} in us-west-2: " in out, out
    assert OTHER in ssm.get_parameter(Name=name)["Parameter"]["Value"]


def test_clean_run_says_the_protection_it_turned_off_when_the_deregister_then_fails(sandbox, workdir) -> None:
    from faultproxy import FaultProxy

    made = bake(RUN, tagged=False)
    boto3.client("ec2", region_name="eu-west-1").enable_image_deregistration_protection(ImageId=made["eu-west-1"])
    with FaultProxy(sandbox.endpoint) as proxy:
        proxy.fail("eu-west-1", ["DeregisterImage"], code="UnauthorizedOperation", message="injected by FaultProxy")
        done = run_cli(workdir, "clean-run", "--run-id", RUN, env={"AWS_ENDPOINT_URL": proxy.endpoint})
    assert done.returncode == 1
    assert (f"its deregistration protection is off now (aws ec2 enable-image-deregistration-protection --image-id "
            f"{made['eu-west-1']} --region eu-west-1 puts it back)") in done.stdout + done.stderr
