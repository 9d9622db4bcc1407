"""Consumer-account guardrails against the emulator: a consumer account (STS AssumeRole into another
account id) sees the shared image, applies `allowed-amis`' criteria, and `doctor --consumer`,
`nodegroup-deploy` and `karpenter` report what its settings refuse."""

from __future__ import annotations

import json
import os
from pathlib import Path

import boto3
import pytest

from conftest import run_cli
from amibuild.sandbox.seed import seed_images

REGION = "us-west-2"
BUILD = "123456789012"
CONSUMER = "210987654321"
PIPELINE = """
pipeline {
  name       = "acct"
  ssm_prefix = "/amibuild"
  regions    = ["us-west-2"]
}
variant "ceph" {
  os                 = "al2023"
  kubernetes_version = "1.33"
}
"""


def amibuild(*args: str, env: dict | None = None):
    return run_cli(os.getcwd(), *args, binary="amibuild", env=env)


@pytest.fixture
def shared(tmp_path: Path, sandbox, monkeypatch: pytest.MonkeyPatch) -> dict:
    """A channel image of the build account shared with the consumer, and a credentials file with
    both accounts' profiles (build: the sandbox's keys; consumer: an assumed role of CONSUMER)."""
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    monkeypatch.chdir(tmp_path)
    ec2 = boto3.client("ec2", region_name=REGION)
    instance = ec2.run_instances(ImageId=seed_images()[0].image_id, MinCount=1, MaxCount=1,
                                 InstanceType="m5.large")["Instances"][0]["InstanceId"]
    ami = ec2.create_image(InstanceId=instance, Name="acct-ceph-1.33-x86_64-1767225600")["ImageId"]
    ec2.terminate_instances(InstanceIds=[instance])
    tags = {"amibuild:fingerprint": "fp-ceph-1", "amibuild:variant": "ceph", "amibuild:pipeline": "acct",
            "amibuild:kubernetes-version": "1.33", "amibuild:created": "2026-01-01T12:00:00Z"}
    ec2.create_tags(Resources=[ami], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
    ec2.modify_image_attribute(ImageId=ami, LaunchPermission={"Add": [{"UserId": CONSUMER}]})
    done = amibuild("publish", "--variant", "ceph", "--ami", f"{REGION}={ami}")
    assert done.returncode == 0, done.stderr
    keys = boto3.client("sts", region_name=REGION).assume_role(
        RoleArn=f"arn:aws:iam::{CONSUMER}:role/platform", RoleSessionName="consumer")["Credentials"]
    credentials = tmp_path / "credentials"
    credentials.write_text(
        f"[build]\naws_access_key_id = {os.environ['AWS_ACCESS_KEY_ID']}\n"
        f"aws_secret_access_key = {os.environ['AWS_SECRET_ACCESS_KEY']}\n"
        f"[consumer]\naws_access_key_id = {keys['AccessKeyId']}\naws_secret_access_key = {keys['SecretAccessKey']}\n"
        f"aws_session_token = {keys['SessionToken']}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    consumer = boto3.Session(profile_name="consumer", region_name=REGION).client("ec2")
    return {"ami": ami, "ec2": consumer}


def test_a_shared_image_is_describable_and_launchable_from_the_consumer_account(shared) -> None:
    consumer = shared["ec2"]
    (image,) = consumer.describe_images(ImageIds=[shared["ami"]])["Images"]
    assert image["OwnerId"] == BUILD and "ImageAllowed" not in image  # Allowed AMIs disabled: no verdict
    assert consumer.run_instances(ImageId=shared["ami"], MinCount=1, MaxCount=1)["Instances"][0]["ImageId"] == \
        shared["ami"]


def test_allowed_amis_output_applied_in_the_consumer_admits_the_images_and_doctor_passes(shared) -> None:
    done = amibuild("allowed-amis", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["ImageCriteria"] == [{"ImageProviders": [BUILD], "ImageNames": ["acct-ceph-1.33-x86_64-*"]}]
    assert any("replace-image-criteria-in-allowed-images-settings" in c for c in out["commands"])
    consumer = shared["ec2"]
    consumer.replace_image_criteria_in_allowed_images_settings(ImageCriteria=out["ImageCriteria"])
    consumer.enable_allowed_images_settings(AllowedImagesSettingsState="enabled")
    consumer.enable_image_block_public_access(ImageBlockPublicAccessState="block-new-sharing")
    (image,) = consumer.describe_images(ImageIds=[shared["ami"]])["Images"]
    assert image["ImageAllowed"] is True

    done = amibuild("doctor", "--consumer", "--profile", "consumer", "--build-profile", "build")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"consumer account {CONSUMER}" in done.stdout
    assert f"ok   allowed-amis {REGION}: enabled: admits {shared['ami']}" in done.stdout


def test_criteria_without_the_build_account_are_reported_by_doctor_and_warned_about_by_nodegroup_deploy(
        shared) -> None:
    consumer = shared["ec2"]
    consumer.replace_image_criteria_in_allowed_images_settings(
        ImageCriteria=[{"ImageProviders": ["111111111111"], "ImageNames": ["acct-*"]}])
    consumer.enable_allowed_images_settings(AllowedImagesSettingsState="enabled")
    assert consumer.describe_images(ImageIds=[shared["ami"]])["Images"] == []  # enabled: hidden from the consumer

    done = amibuild("doctor", "--consumer", "--profile", "consumer", "--build-profile", "build")
    assert done.returncode == 1
    assert f"FAIL allowed-amis {REGION}: enabled: {shared['ami']}" in done.stdout
    assert f"ImageProviders 111111111111 do not name the provider account {BUILD}" in done.stdout
    # block public access was never turned on in the consumer: reported too
    assert f"FAIL block-public-access {REGION}: unblocked" in done.stdout
    assert "allowed-amis us-west-2" in done.stderr and "block-public-access us-west-2" in done.stderr

    done = amibuild("nodegroup-deploy", "--stack", "consumer-nodes", "--os", "al2", "--cluster", "prod",
                    "--vpc-id", "vpc-1", "--subnet", "subnet-1", "--control-plane-sg", "sg-1",
                    "--parameter", f"NodeImageId={shared['ami']}", "--region", REGION, "--profile", "consumer",
                    "--dry-run")
    assert f"warning: {shared['ami']} is not visible in account {CONSUMER} in {REGION}" in done.stderr, \
        done.stdout + done.stderr


def test_audit_mode_names_the_criterion_the_image_misses_in_nodegroup_deploys_warning(shared) -> None:
    consumer = shared["ec2"]
    consumer.replace_image_criteria_in_allowed_images_settings(ImageCriteria=[{"ImageProviders": ["111111111111"]}])
    consumer.enable_allowed_images_settings(AllowedImagesSettingsState="audit-mode")
    done = amibuild("nodegroup-deploy", "--stack", "consumer-nodes", "--os", "al2", "--cluster", "prod",
                    "--vpc-id", "vpc-1", "--subnet", "subnet-1", "--control-plane-sg", "sg-1",
                    "--parameter", f"NodeImageId={shared['ami']}", "--region", REGION, "--profile", "consumer",
                    "--dry-run")
    assert "would refuse once enabled (audit-mode now)" in done.stderr, done.stdout + done.stderr
    assert f"ImageProviders 111111111111 do not name the provider account {BUILD}" in done.stderr


def test_nodegroup_deploy_says_nothing_when_the_settings_are_disabled(shared) -> None:
    # the build account, whose own images are always allowed, with Allowed AMIs disabled: no warning at all
    done = amibuild("nodegroup-deploy", "--stack", "own-nodes", "--os", "al2", "--cluster", "prod",
                    "--vpc-id", "vpc-1", "--subnet", "subnet-1", "--control-plane-sg", "sg-1",
                    "--parameter", f"NodeImageId={shared['ami']}", "--region", REGION, "--dry-run")
    assert "Allowed AMIs" not in done.stderr and "warning:" not in done.stderr


def _with_key(tmp_path: Path, allow_consumer: bool) -> str:
    kms = boto3.client("kms", region_name=REGION)
    key = kms.create_key()["KeyMetadata"]["Arn"]
    statements = [{"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{BUILD}:root"}, "Action": "kms:*",
                   "Resource": "*"}]
    if allow_consumer:
        statements.append({"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{CONSUMER}:root"},
                           "Action": ["kms:DescribeKey", "kms:CreateGrant", "kms:Decrypt", "kms:ReEncrypt*",
                                      "kms:GenerateDataKey*"], "Resource": "*"})
    kms.put_key_policy(KeyId=key, PolicyName="default",
                       Policy=json.dumps({"Version": "2012-10-17", "Statement": statements}))
    text = PIPELINE.replace('kubernetes_version = "1.33"',
                            f'kubernetes_version = "1.33"\n  encrypted = true\n  kms_key_id = "{key}"')
    (tmp_path / "amibuild.hcl").write_text(text)
    return key


@pytest.mark.parametrize("allow_consumer", [True, False])
def test_doctor_consumer_checks_the_images_key_from_the_consumer_account(shared, tmp_path: Path,
                                                                         allow_consumer: bool) -> None:
    key = _with_key(tmp_path, allow_consumer)
    done = amibuild("doctor", "--consumer", "--profile", "consumer", "--build-profile", "build", "--json")
    rows = {r["name"]: r for r in json.loads(done.stdout)["checks"]}
    assert rows[f"key {REGION}"]["ok"] is allow_consumer, rows
    assert key in rows[f"key {REGION}"]["message"]
    if not allow_consumer:
        assert "AccessDenied" in rows[f"key {REGION}"]["message"] or "access denied" in rows[f"key {REGION}"]["message"]
        assert done.returncode == 1


def test_karpenter_warns_when_the_clusters_account_would_refuse_the_channels_image(shared) -> None:
    # the consumer keeps the channel's parameter in its own account, where Karpenter resolves it
    parameter = "/amibuild/acct/1.33/ceph/recommended/image_id"
    boto3.Session(profile_name="consumer", region_name=REGION).client("ssm").put_parameter(
        Name=parameter, Value=shared["ami"], Type="String", DataType="aws:ec2:image")
    consumer = shared["ec2"]
    consumer.replace_image_criteria_in_allowed_images_settings(ImageCriteria=[{"ImageProviders": ["amazon"]}])
    consumer.enable_allowed_images_settings(AllowedImagesSettingsState="enabled")
    done = amibuild("karpenter", "--variant", "ceph", "--channel", "recommended", "--cluster", "prod",
                    "--profile", "consumer")
    assert done.returncode == 0, done.stderr
    assert f"karpenter: warning: {shared['ami']} is not visible in account {CONSUMER}" in done.stderr


def test_the_emulator_refuses_criteria_beyond_awss_limits_and_keys_the_policy_does_not_share(shared) -> None:
    from botocore.exceptions import ClientError

    consumer = shared["ec2"]
    for criteria in ([{"ImageProviders": [BUILD]}] * 11, [{"ImageProviders": ["none", BUILD]}],
                     [{"ImageProviders": ["someone"]}], [{"ImageNames": ["a?"]}]):
        with pytest.raises(ClientError) as refused:
            consumer.replace_image_criteria_in_allowed_images_settings(ImageCriteria=criteria)
        assert refused.value.response["Error"]["Code"] == "InvalidParameterValue"
    with pytest.raises(ClientError) as refused:
        consumer.enable_allowed_images_settings(AllowedImagesSettingsState="on")
    assert refused.value.response["Error"]["Code"] == "InvalidParameterValue"
    key = boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["Arn"]
    with pytest.raises(ClientError) as refused:
        boto3.Session(profile_name="consumer", region_name=REGION).client("kms").describe_key(KeyId=key)
    assert refused.value.response["Error"]["Code"] == "AccessDeniedException"
    other = boto3.client("ec2", region_name=REGION).register_image(Name="private", RootDeviceName="/dev/xvda")["ImageId"]
    with pytest.raises(ClientError) as refused:
        consumer.run_instances(ImageId=other, MinCount=1, MaxCount=1)
    assert refused.value.response["Error"]["Code"] == "AuthFailure"


def test_doctor_consumer_passes_an_image_shared_publicly_rather_than_by_account(shared) -> None:
    build = boto3.client("ec2", region_name=REGION)
    build.modify_image_attribute(ImageId=shared["ami"], LaunchPermission={
        "Remove": [{"UserId": CONSUMER}], "Add": [{"Group": "all"}]})
    shared["ec2"].enable_image_block_public_access(ImageBlockPublicAccessState="block-new-sharing")
    assert shared["ec2"].describe_images(ImageIds=[shared["ami"]])["Images"]  # the consumer sees it
    done = amibuild("doctor", "--consumer", "--profile", "consumer", "--build-profile", "build", "--json")
    rows = {r["name"]: r for r in json.loads(done.stdout)["checks"]}
    assert rows[f"image ceph/recommended {REGION}"] == {
        "name": f"image ceph/recommended {REGION}", "ok": True, "message": f"{shared['ami']} visible (available)",
        "warn": False}, rows
    assert done.returncode == 0, done.stdout + done.stderr
