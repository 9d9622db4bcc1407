"""Gateway reads a consumer account makes about images shared with it: its Allowed AMIs settings,
block public access for AMIs, a shared image as it sees it, and whether it may use a KMS key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from amibuild.aws import Aws, mapped_errors
from amibuild.errors import AccessDenied, AwsError, NotFound
from botocore.exceptions import BotoCoreError, ClientError


@dataclass(frozen=True)
class SharedImage:
    """DescribeImages' answer about one image, seen from the calling account."""

    image_id: str
    owner: str
    name: str
    state: str
    creation_date: str = ""
    deprecation_time: str = ""
    kms_key_ids: tuple[str, ...] = ()  # the keys its EBS snapshots are encrypted with, where shown


def allowed_images_settings(aws: Aws, region: str) -> Mapping[str, Any]:
    """GetAllowedImagesSettings as AWS answers it (State, ImageCriteria, ManagedBy)."""
    with mapped_errors("ec2:GetAllowedImagesSettings", region):
        return aws.client("ec2", region).get_allowed_images_settings()


def block_public_access(aws: Aws, region: str) -> str:
    """GetImageBlockPublicAccessState: block-new-sharing or unblocked."""
    with mapped_errors("ec2:GetImageBlockPublicAccessState", region):
        return str(aws.client("ec2", region).get_image_block_public_access_state()["ImageBlockPublicAccessState"])


def shared_image(aws: Aws, region: str, image_id: str) -> SharedImage | None:
    """The image as the calling account sees it; None when it is not there for this account."""
    try:
        with mapped_errors(f"ec2:DescribeImages {image_id}", region):
            raws = aws.client("ec2", region).describe_images(ImageIds=[image_id])["Images"]
    except NotFound:
        return None
    for raw in raws:
        if raw.get("ImageId") == image_id:
            keys = tuple(dict.fromkeys(m["Ebs"]["KmsKeyId"] for m in raw.get("BlockDeviceMappings", [])
                                       if (m.get("Ebs") or {}).get("KmsKeyId")))
            return SharedImage(image_id, str(raw.get("OwnerId", "")), raw.get("Name", ""), raw.get("State", ""),
                               raw.get("CreationDate", ""), raw.get("DeprecationTime") or "", keys)
    return None


def account_root(caller_arn: str) -> str:
    """The account's root principal, in the partition of the caller's ARN (GetCallerIdentity's `Arn`)."""
    _arn, partition, _service, _region, account, _rest = caller_arn.split(":", 5)
    return f"arn:{partition}:iam::{account}:root"


def key_usable(aws: Aws, key_id: str, region: str, grantee: str) -> str:
    """"" when the calling account may describe the key and create grants on it (CreateGrant with
    DryRun, which EC2 needs to launch from an image encrypted with it); else why not."""
    try:
        with mapped_errors(f"kms:DescribeKey {key_id}", region):
            meta = aws.client("kms", region).describe_key(KeyId=key_id)["KeyMetadata"]
    except (AccessDenied, NotFound) as exc:
        return str(exc)
    if meta.get("KeyState") != "Enabled":
        return f"key {key_id} is {meta.get('KeyState')}"

    action = f"kms:CreateGrant {key_id} (DryRun)"
    try:
        aws.client("kms", region).create_grant(KeyId=key_id, GranteePrincipal=grantee,
                                               Operations=["Decrypt", "CreateGrant"], DryRun=True)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "DryRunOperationException":
            return ""  # it would have succeeded
        try:
            with mapped_errors(action, region):
                raise
        except AwsError as mapped:
            return str(mapped)
    except BotoCoreError:  # no answer (no connection, a timeout): an error, as for DescribeKey above
        with mapped_errors(action, region):
            raise
    return ""
