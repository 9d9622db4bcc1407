"""Finding and removing what a failed build run left in AWS (parser on recorded output, the rest on the emulator)."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from amibuild import tags
from amibuild.aws import Aws
from amibuild.bake import leftovers
from amibuild.bake.leftovers import Leftover, Scope
from conftest import run_cli

DATA = Path(__file__).parent / "data" / "packer"
RUN = "20261130T170000Z-abc123"
SCOPE = Scope(RUN, "ceph", "e2e-ceph-1.30-x86_64", ("us-west-2",), ("us-west-2", "eu-west-1"))


def test_stream_resources_reads_what_packer_announced() -> None:
    seen = leftovers.stream_resources((DATA / "build-multi-region.out").read_text().splitlines())
    assert seen.instances == {"amazon-ebs.worker": ["i-0140ee7ffdfb34cf1"]}
    assert seen.key_pairs == {"amazon-ebs.worker": ["packer_6b0cc916-a342-8ee3-56ce-fea5d9a97f31"]}
    assert seen.security_groups == {"amazon-ebs.worker": ["packer_6b0cc916-6007-e3a8-119d-6c1bade180a7"]}
    assert seen.amis == {"amazon-ebs.worker": ["ami-c304e3a6c4c8f13c8"]}


def test_each_leftover_names_the_command_that_removes_it() -> None:
    assert Leftover("instance", "us-west-2", "i-1").command() == \
        "aws ec2 terminate-instances --instance-ids i-1 --region us-west-2"
    assert Leftover("image", "eu-west-1", "ami-1").command() == "aws ec2 deregister-image --image-id ami-1 --region eu-west-1"
    assert Leftover("security-group", "us-west-2", "sg-1").command().startswith("aws ec2 delete-security-group --group-id sg-1")
    assert leftovers.key_pair_name(RUN, "ceph", "us-west-2") == f"amibuild-{RUN}-ceph-us-west-2"


@pytest.mark.parametrize("look, unreachable, why", [
    (False, False, "stopped waiting (second interrupt)"),
    (True, True, "the endpoint stopped answering during the build"),
], ids=["second-interrupt", "endpoint-gone"])
def test_clean_up_that_cannot_ask_aws_lists_what_packer_announced_each_with_its_command(look, unreachable, why) -> None:
    seen = leftovers.stream_resources((DATA / "build-multi-region.out").read_text().splitlines())
    done = leftovers.clean_up(None, SCOPE, seen, look=look, unreachable=unreachable)  # no gateway: nothing asks AWS
    assert done.removed is None  # the outcome keeps what it holds
    assert done.unreachable is unreachable
    assert [(x["kind"], x["region"], x["id"]) for x in done.left_behind] == [
        ("instance", "us-west-2", "i-0140ee7ffdfb34cf1"),
        ("key-pair", "us-west-2", "packer_6b0cc916-a342-8ee3-56ce-fea5d9a97f31"),
        ("image", "us-west-2", "ami-c304e3a6c4c8f13c8"),
        ("security-group", "us-west-2", "packer_6b0cc916-6007-e3a8-119d-6c1bade180a7"),
    ]
    assert {x["why"] for x in done.left_behind} == {f"not checked: {why}"}
    assert done.left_behind[0]["command"] == "aws ec2 terminate-instances --instance-ids i-0140ee7ffdfb34cf1 --region us-west-2"
    assert done.text.startswith(f"could not look for leftovers ({why}); find them by tag {tags.RUN_ID}={RUN} and AMI "
                                f"name e2e-ceph-1.30-x86_64-*-{RUN} in us-west-2, eu-west-1 and remove instance "
                                "i-0140ee7ffdfb34cf1 in us-west-2; ")


def _leave_behind(run: str, variant: str, prefix: str) -> dict[str, str]:
    """What an interrupted Packer leaves: a tagged instance, its key pair and group, an untagged copy."""
    west = boto3.client("ec2", region_name="us-west-2")
    source = west.describe_images(Owners=["602401143452"])["Images"][0]["ImageId"]
    group = west.create_security_group(GroupName=f"packer_{run}_{variant}", Description="Temporary group for Packer")["GroupId"]
    west.create_key_pair(KeyName=leftovers.key_pair_name(run, variant, "us-west-2"))
    instance = west.run_instances(
        ImageId=source, MinCount=1, MaxCount=1, SecurityGroupIds=[group],
        TagSpecifications=[{"ResourceType": "instance",
                            "Tags": [{"Key": tags.RUN_ID, "Value": run}, {"Key": tags.VARIANT, "Value": variant}]}],
    )["Instances"][0]["InstanceId"]
    image = west.create_image(InstanceId=instance, Name=f"{prefix}-1796000000-{run}")["ImageId"]
    copy = boto3.client("ec2", region_name="eu-west-1").copy_image(
        SourceImageId=image, SourceRegion="us-west-2", Name=f"{prefix}-1796000000-{run}")["ImageId"]
    return {"group": group, "instance": instance, "image": image, "copy": copy}


def test_find_and_remove_clear_a_runs_leftovers_in_every_region_and_nothing_else(sandbox) -> None:
    mine = _leave_behind(RUN, "ceph", SCOPE.ami_name_prefix)
    other = _leave_behind("20261130T170000Z-999999", "ceph", SCOPE.ami_name_prefix)  # another run: untouched
    aws = Aws(region="us-west-2")
    seen = leftovers.stream_resources([
        f"1,,ui,say,==> amazon-ebs.us-west-2: Creating temporary security group for this instance: packer_{RUN}_ceph",
        f"1,,ui,message,    amazon-ebs.us-west-2: Instance ID: {mine['instance']}",
    ])
    found = leftovers.find(aws, SCOPE, seen)
    kinds = {(x.kind, x.region, x.id) for x in found}
    assert ("instance", "us-west-2", mine["instance"]) in kinds
    assert ("key-pair", "us-west-2", leftovers.key_pair_name(RUN, "ceph", "us-west-2")) in kinds
    assert ("security-group", "us-west-2", mine["group"]) in kinds
    assert ("image", "us-west-2", mine["image"]) in kinds
    assert ("image", "eu-west-1", mine["copy"]) in kinds  # untagged copy, found by name
    assert sum(1 for k in kinds if k[0] == "snapshot") == 2
    assert not {other[k] for k in other} & {x.id for x in found}

    removed, failed = leftovers.remove(aws, found, settle=10)
    assert failed == []
    assert set(removed) == set(found)
    assert leftovers.find(aws, SCOPE, seen) == []
    europe = boto3.client("ec2", region_name="eu-west-1")
    assert europe.describe_images(ImageIds=[other["copy"]])["Images"], "another run's copy was removed"


def test_remove_lists_what_it_could_not_remove_once_the_endpoint_is_gone(sandbox, monkeypatch) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    items = [Leftover("instance", "us-west-2", "i-0abc"), Leftover("image", "eu-west-1", "ami-0abc")]
    removed, failed = leftovers.remove(Aws(region="us-west-2", max_attempts=1), items)
    assert removed == []
    assert [x for x, _ in failed] == items
    assert all("cannot reach" in why for _, why in failed)


def test_clean_run_removes_a_dead_runs_leftovers_of_every_variant(sandbox, tmp_path: Path) -> None:
    import json

    (tmp_path / "amibuild.hcl").write_text('pipeline {\n  name = "e2e"\n  regions = ["us-west-2"]\n'
                                           '  copy_to = ["eu-west-1"]\n}\nvariant "ceph" {}\nvariant "arm" {}\n')
    ceph = _leave_behind(RUN, "ceph", "e2e-ceph-1.30-x86_64")
    arm = _leave_behind(RUN, "arm", "e2e-arm-1.30-arm64")
    other = _leave_behind("20261130T170000Z-999999", "ceph", "e2e-ceph-1.30-x86_64")
    (tmp_path / "build" / "runs" / RUN).mkdir(parents=True)  # the dead run's folder (its logs are gone)

    listed = run_cli(tmp_path, "clean-run", "--run-id", RUN, "--dry-run", "--json")
    assert listed.returncode == 0, listed.stderr
    ids = {x["id"] for x in json.loads(listed.stdout)["found"]}
    assert {ceph["instance"], ceph["copy"], arm["instance"], arm["copy"], arm["image"]} <= ids
    assert not ids & set(other.values())

    done = run_cli(tmp_path, "clean-run", "--run-id", RUN)
    assert done.returncode == 0, done.stderr
    assert f"removed  image {arm['copy']} in eu-west-1" in done.stdout
    # no Packer log left: the temporary groups are found on the run's instances
    assert f"removed  security-group {ceph['group']} in us-west-2" in done.stdout
    again = run_cli(tmp_path, "clean-run", "--run-id", RUN)
    assert again.stdout.strip() == f"run {RUN}: nothing left behind"
    assert boto3.client("ec2", region_name="eu-west-1").describe_images(ImageIds=[other["copy"]])["Images"]


@pytest.mark.parametrize("run_id", ["*", "", "20261130T170000Z"])
def test_clean_run_refuses_anything_but_a_run_id(sandbox, tmp_path: Path, run_id: str) -> None:
    result = run_cli(tmp_path, "clean-run", "--run-id", run_id)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("amibuild: error: --run-id: ")


def test_clean_run_refuses_a_run_that_still_holds_its_build_lease(sandbox, tmp_path: Path) -> None:
    from amibuild.lease import Lease, build_lease_name

    (tmp_path / "amibuild.hcl").write_text('pipeline {\n  name = "e2e"\n  regions = ["us-west-2"]\n}\nvariant "ceph" {}\n')
    live = Lease(Aws(region="us-west-2"), build_lease_name("/amibuild", "e2e", "ceph", "ab" * 32), "us-west-2",
                 run_id=RUN, owner="builder@elsewhere pid 1")
    assert live.try_acquire() is None
    result = run_cli(tmp_path, "clean-run", "--run-id", RUN)
    assert result.returncode == 2
    assert f"run {RUN} is still building" in result.stderr


def test_a_killed_packers_group_is_found_on_its_terminated_instance_when_its_log_is_gone(sandbox) -> None:
    # Packer killed while it waited for its instance to terminate: the instance is shutting down (or
    # terminated), its temporary group and key pair are still there, and the run's logs are gone
    mine = _leave_behind(RUN, "ceph", SCOPE.ami_name_prefix)
    boto3.client("ec2", region_name="us-west-2").terminate_instances(InstanceIds=[mine["instance"]])
    found = leftovers.find(Aws(region="us-west-2"), SCOPE, leftovers.stream_resources([]))
    assert Leftover("security-group", "us-west-2", mine["group"]) in found
    assert Leftover("instance", "us-west-2", mine["instance"]) not in found  # on its way already
