"""The gateway's calls for a boot test: one instance, its status, SSM Run Command and its S3 output,
the image's tags.

Typed results, errors mapped at this boundary like every other call of `amibuild.aws.Aws`; the
boot test itself (`amibuild.imagetest.boot`) decides what to do with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from amibuild.aws import Aws, mapped_errors
from amibuild.aws.ec2 import instances
from amibuild.errors import AwsError
from botocore.exceptions import ClientError
from botocore.config import Config

# SSM keeps the first 24,000 characters of a command's stdout and 8,000 of its stderr (GetCommandInvocation), and no size.
OUTPUT_LIMIT = 24000
ERROR_LIMIT = 8000
# where the agent writes AWS-RunShellScript's whole output with OutputS3BucketName, below the key prefix
# and <command id>/<instance id>/
OUTPUT_FOLDER = "awsrunShellScript/0.awsrunShellScript"
TAIL_BYTES = 16384  # what is read of a whole output in S3: its end
COMMAND_DONE = frozenset({"Success", "Failed", "Cancelled", "TimedOut", "DeliveryTimedOut", "ExecutionTimedOut",
                          "Undeliverable", "Terminated", "InvalidPlatform", "AccessDenied"})


@dataclass(frozen=True)
class InstanceState:
    instance_id: str
    state: str  # pending | running | shutting-down | terminated | stopping | stopped
    system_status: str = ""  # ok | impaired | initializing | insufficient-data | not-applicable | ""
    instance_status: str = ""
    private_dns: str = ""  # what an EKS node of this instance is named


@dataclass(frozen=True)
class Invocation:
    command_id: str
    instance_id: str
    status: str  # Pending | InProgress | Delayed | Success | Cancelled | TimedOut | Failed | Cancelling
    response_code: int  # the command's exit status; -1 when it never gave one
    stdout: str  # the first OUTPUT_LIMIT characters
    stderr: str  # the first ERROR_LIMIT characters
    status_details: str = ""  # ... | DeliveryTimedOut | ExecutionTimedOut | Undeliverable | Terminated

    @property
    def done(self) -> bool:
        return self.status in COMMAND_DONE


@dataclass(frozen=True)
class StoredOutput:
    """One stream of a command's output as the agent wrote it to S3: its size and its end."""

    size: int  # bytes
    tail: str  # the last TAIL_BYTES of it, decoded


class TestInstances:
    """Boot-test calls over one `Aws` gateway."""

    __test__ = False  # not a pytest class

    def __init__(self, aws: Aws, *, read_timeout: float = 0.0) -> None:
        self.aws = aws
        self.read_timeout = read_timeout  # seconds SendCommand / GetCommandInvocation wait (0: the gateway's)
        self._ssm: dict[str, Any] = {}

    def _commands(self, region: str) -> Any:
        """The SSM client of Run Command: the gateway's, or one with this test's read timeout."""
        if not self.read_timeout:
            return self.aws.client("ssm", region)
        if region not in self._ssm:
            self._ssm[region] = self.aws._new_client("ssm", region_name=region, config=self.aws._config.merge(
                Config(read_timeout=self.read_timeout)))
        return self._ssm[region]

    def run_instance(self, region: str, *, image_id: str, instance_type: str, tags: Mapping[str, str],
                     subnet_id: str = "", security_group_id: str = "", instance_profile: str = "",
                     user_data: str = "") -> str:
        """Launch one instance from ``image_id``, tagged from launch (instance and volumes); its id."""
        spec: dict[str, Any] = {
            "ImageId": image_id, "InstanceType": instance_type, "MinCount": 1, "MaxCount": 1,
            "TagSpecifications": [{"ResourceType": kind, "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
                                  for kind in ("instance", "volume")],
            "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
            "InstanceInitiatedShutdownBehavior": "terminate",
        }
        optional = {"SubnetId": subnet_id, "SecurityGroupIds": security_group_id and [security_group_id],
                    "IamInstanceProfile": instance_profile and {"Name": instance_profile}, "UserData": user_data}
        spec.update((key, value) for key, value in optional.items() if value)
        with mapped_errors(f"ec2:RunInstances {image_id}", region):
            raw = self.aws.client("ec2", region).run_instances(**spec)
        return raw["Instances"][0]["InstanceId"]

    def state(self, region: str, instance_id: str) -> InstanceState:
        client = self.aws.client("ec2", region)
        with mapped_errors(f"ec2:DescribeInstances {instance_id}", region):
            try:
                found = list(instances([client.describe_instances(InstanceIds=[instance_id])]))
            except ClientError as exc:  # EC2 is eventually consistent: one just launched may not show yet
                if exc.response.get("Error", {}).get("Code") != "InvalidInstanceID.NotFound":
                    raise
                return InstanceState(instance_id, "pending")
        state = found[0]["State"]["Name"] if found else "terminated"
        private_dns = str(found[0].get("PrivateDnsName") or "") if found else ""
        system = instance = ""
        if state == "running":
            with mapped_errors(f"ec2:DescribeInstanceStatus {instance_id}", region):
                statuses = client.describe_instance_status(InstanceIds=[instance_id]).get("InstanceStatuses", [])
            if statuses:
                system = statuses[0].get("SystemStatus", {}).get("Status", "")
                instance = statuses[0].get("InstanceStatus", {}).get("Status", "")
        return InstanceState(instance_id, state, system, instance, private_dns)

    def ssm_online(self, region: str, instance_id: str) -> bool:
        """True when the instance's SSM agent has registered and answers (PingStatus Online)."""
        with mapped_errors(f"ssm:DescribeInstanceInformation {instance_id}", region):
            raw = self.aws.client("ssm", region).describe_instance_information(
                Filters=[{"Key": "InstanceIds", "Values": [instance_id]}])
        return any(i.get("InstanceId") == instance_id and i.get("PingStatus") == "Online"
                   for i in raw.get("InstanceInformationList", []))

    def send_shell_script(self, region: str, instance_id: str, script: str, *, timeout: int, comment: str,
                          output_bucket: str = "", output_prefix: str = "") -> str:
        """AWS-RunShellScript with ``script`` as its one command; the command id. With ``output_bucket``
        the agent writes the whole output there, below ``output_prefix`` (`output_key`)."""
        spec: dict[str, Any] = dict(
            InstanceIds=[instance_id], DocumentName="AWS-RunShellScript", Comment=comment[:100],
            TimeoutSeconds=max(30, timeout), Parameters={"commands": [script], "executionTimeout": [str(timeout)]})
        if output_bucket:
            spec.update(OutputS3BucketName=output_bucket, OutputS3KeyPrefix=output_prefix)
        with mapped_errors(f"ssm:SendCommand AWS-RunShellScript {instance_id}", region):
            raw = self._commands(region).send_command(**spec)
        return raw["Command"]["CommandId"]

    def invocation(self, region: str, command_id: str, instance_id: str) -> Invocation | None:
        try:
            with mapped_errors(f"ssm:GetCommandInvocation {command_id}", region):
                raw = self._commands(region).get_command_invocation(CommandId=command_id, InstanceId=instance_id)
        except AwsError as exc:
            if "InvocationDoesNotExist" in str(exc):  # not delivered yet
                return None
            raise
        return Invocation(command_id, instance_id, raw.get("Status", ""), int(raw.get("ResponseCode", -1)),
                          raw.get("StandardOutputContent", ""), raw.get("StandardErrorContent", ""),
                          raw.get("StatusDetails", ""))

    @staticmethod
    def output_key(prefix: str, command_id: str, instance_id: str, stream: str) -> str:
        """The S3 key the agent writes ``stream`` (stdout | stderr) of AWS-RunShellScript to."""
        return "/".join(p for p in (prefix.strip("/"), command_id, instance_id, OUTPUT_FOLDER, stream) if p)

    def stored_output(self, region: str, bucket: str, key: str) -> StoredOutput | None:
        """The size and the end of one output object (None: the agent wrote none, e.g. no stderr)."""
        client = self.aws._s3(region)
        with mapped_errors(f"s3:HeadObject s3://{bucket}/{key}", region):
            try:
                size = int(client.head_object(Bucket=bucket, Key=key)["ContentLength"])
            except ClientError as exc:
                if str(exc.response.get("Error", {}).get("Code", "")) in ("404", "NoSuchKey", "NotFound"):
                    return None  # HeadObject's 404 has no body, so no AWS error code to map
                raise
        if size == 0:
            return StoredOutput(0, "")
        with mapped_errors(f"s3:GetObject s3://{bucket}/{key}", region):
            body = client.get_object(Bucket=bucket, Key=key, Range=f"bytes=-{min(size, TAIL_BYTES)}")["Body"].read()
        return StoredOutput(size, body.decode("utf-8", errors="replace"))

    def image_tag(self, region: str, image_id: str, key: str) -> str:
        """The image's tag ``key`` ("" when it has none)."""
        with mapped_errors(f"ec2:DescribeImages {image_id}", region):
            images = self.aws.client("ec2", region).describe_images(ImageIds=[image_id]).get("Images", [])
        return next((t.get("Value", "") for i in images for t in i.get("Tags", []) if t.get("Key") == key), "")

    def tag_image(self, region: str, image_id: str, tags: Mapping[str, str]) -> None:
        with mapped_errors(f"ec2:CreateTags {image_id}", region):
            self.aws.client("ec2", region).create_tags(
                Resources=[image_id], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
