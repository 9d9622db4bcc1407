"""The one AWS gateway: every boto3 call amibuild makes goes through `Aws`.

It owns the boto3 session (standard credential chain, profile, region), caches one client per
service and region, sets botocore's retry mode and short connect timeouts (an unreachable endpoint
is reported in seconds, not after minutes of retries), honours endpoint overrides
(`AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_<SERVICE>`; botocore reads them itself), and turns botocore's
errors into amibuild's at this boundary (`_mapped`). Callers get typed methods, not raw clients.
"""

from __future__ import annotations

import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar

from amibuild.errors import AccessDenied, AwsError, UsageError, EndpointUnreachable, ExpiredToken, NoCredentials, NotFound
from amibuild.aws import handoff_results as results

_EXPIRED = {"ExpiredToken", "ExpiredTokenException", "RequestExpired", "TokenRefreshRequired"}
_DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedAccess",
           "AuthFailure", "InvalidClientTokenId", "UnrecognizedClientException", "SignatureDoesNotMatch"}
_NOT_FOUND = {"ParameterNotFound", "InvalidAMIID.NotFound", "InvalidAMIID.Unavailable",
              "InvalidAMIID.Malformed", "ValidationError", "ResourceNotFoundException",
              "ParameterVersionNotFound", "InvalidSnapshot.NotFound", "NoSuchBucket"}


@contextlib.contextmanager
def _mapped(action: str, region: str | None = None) -> Iterator[None]:
    """Translate botocore exceptions raised inside into amibuild's, naming the action."""
    from botocore import exceptions as bx

    where = f" in {region}" if region else ""
    try:
        yield
    except bx.NoCredentialsError as exc:
        raise NoCredentials(
            f"{action}{where}: no AWS credentials found; set AWS_PROFILE or AWS_ACCESS_KEY_ID/"
            "AWS_SECRET_ACCESS_KEY, or run `invoke sandbox` for the local emulator"
        ) from exc
    except (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ProxyConnectionError,
            bx.ReadTimeoutError, bx.ConnectionClosedError) as exc:
        endpoint = getattr(exc, "kwargs", {}).get("endpoint_url") or os.environ.get("AWS_ENDPOINT_URL") or "AWS"
        raise EndpointUnreachable(
            f"{action}{where}: cannot reach {endpoint} ({exc.__class__.__name__}); check the network, "
            "AWS_ENDPOINT_URL, or that the sandbox is running"
        ) from exc
    except bx.ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        message = str(error.get("Message", "")).strip().splitlines()[0] if error.get("Message") else code
        if code in _EXPIRED:
            raise ExpiredToken(f"{action}{where}: the AWS credentials have expired; refresh them (e.g. `aws sso login`)") from exc
        if code in _DENIED:
            raise AccessDenied(f"{action}{where}: access denied ({code}); the credentials need permission for {action}") from exc
        if code in _NOT_FOUND:
            raise NotFound(f"{action}{where}: {message}") from exc
        raise AwsError(f"{action}{where}: {code}: {message}") from exc
    except bx.BotoCoreError as exc:
        raise AwsError(f"{action}{where}: {exc}") from exc


@dataclass(frozen=True)
class Image:
    """The parts of an EC2 image amibuild uses."""

    image_id: str
    region: str
    name: str
    state: str
    tags: Mapping[str, str]
    creation_date: str
    snapshot_ids: tuple[str, ...] = ()


# An endpoint that does not answer is reported within seconds: a short connect timeout and
# CONNECT_ATTEMPTS tries for connection errors only. Throttling and 5xx answers keep botocore's
# adaptive retries (max_attempts), since those mean AWS is there and asks us to slow down.
CONNECT_TIMEOUT = 2
CONNECT_ATTEMPTS = 2


def _give_up_on_dead_endpoint(attempts: int = 0, caught_exception: BaseException | None = None, **_: Any) -> None:
    """botocore `needs-retry` hook, run before the retry handler: stop retrying a connection error
    after CONNECT_ATTEMPTS by raising it (returning None would let the next handler retry)."""
    from botocore import exceptions as bx

    if isinstance(caught_exception, (bx.EndpointConnectionError, bx.ConnectTimeoutError,
                                     bx.ProxyConnectionError)) and attempts >= CONNECT_ATTEMPTS:
        raise caught_exception


class Aws:
    """Session, clients and typed calls. Thread-safe: builds and publishes fan out over regions."""

    def __init__(self, *, profile: str | None = None, region: str | None = None, max_attempts: int = 3) -> None:
        import boto3  # heavy: imported only when AWS is actually used
        from botocore.config import Config

        from botocore.exceptions import ProfileNotFound

        try:
            self._session = boto3.session.Session(profile_name=profile, region_name=region)
        except ProfileNotFound as exc:
            raise UsageError(f"AWS profile {profile or os.environ.get('AWS_PROFILE')!r} not found in "
                             "~/.aws/config; check --profile / AWS_PROFILE") from exc
        self._config = Config(
            connect_timeout=CONNECT_TIMEOUT,
            read_timeout=30,
            retries={"mode": "adaptive", "max_attempts": max_attempts},
        )
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self.calls: list[tuple[str, str, str]] = []  # (service, operation, region), for reports and tests

    @property
    def region(self) -> str | None:
        return self._session.region_name

    def has_credentials(self) -> bool:
        """True when the credential chain finds something, without calling AWS."""
        try:
            return self._session.get_credentials() is not None
        except Exception:  # a broken profile counts as none here; calls will say why
            return False

    def client(self, service: str, region: str) -> Any:
        key = (service, region)
        with self._lock:
            if key not in self._clients:
                client = self._session.client(service, region_name=region, config=self._config)
                self._prepare(client)
                self._clients[key] = client
            return self._clients[key]

    def _prepare(self, client: Any) -> None:
        client.meta.events.register("before-call", self._count)
        client.meta.events.register_first("needs-retry", _give_up_on_dead_endpoint)
        from amibuild.aws import redact

        credentials = self._session.get_credentials()
        if credentials is not None:  # so --debug logs never show them, whatever their source
            redact.add_secret(credentials.secret_key)
            redact.add_secret(credentials.token)

    def _count(self, model: Any, context: Mapping[str, Any], **_: Any) -> None:
        self.calls.append((model.service_model.service_name, model.name, context.get("client_region", "")))

    # ---------------------------------------------------------------------------- STS

    def caller_identity(self, region: str) -> dict[str, str]:
        """Account and ARN of the credentials in use (sts:GetCallerIdentity)."""
        with _mapped("sts:GetCallerIdentity", region):
            raw = self.client("sts", region).get_caller_identity()
        return {"account": raw["Account"], "arn": raw["Arn"]}

    # ---------------------------------------------------------------------------- SSM

    def get_parameter(self, name: str, region: str) -> str:
        with _mapped(f"ssm:GetParameter {name}", region):
            return self.client("ssm", region).get_parameter(Name=name)["Parameter"]["Value"]

    # PutParameter is limited to a few calls per second per account and region; a throttled call
    # is retried by botocore's adaptive mode (client-side rate limiting) with more attempts than
    # other calls get, so a burst of ThrottlingException does not fail a publish. The channel
    # methods below (reads included: one client per region) use this client.
    #
    # Its timeouts and attempts are bounded so that one call, retries included, cannot outlive a
    # channel lease: `request_bound` is how long it can last at most, and a writer checks before
    # each write that its lease is good for longer than that (`amibuild.lease.ChannelLease.check`).
    ssm_write_attempts = 5
    ssm_read_timeout = 10.0  # seconds; a PutParameter answers in well under a second
    _BACKOFF_CAP = 20.0  # botocore's longest wait between two attempts

    def request_bound(self) -> float:
        """The longest one channel-client call can last, every retry and back-off included."""
        attempts = self.ssm_write_attempts
        return attempts * (CONNECT_TIMEOUT + self.ssm_read_timeout) + (attempts - 1) * self._BACKOFF_CAP

    def _ssm_channels(self, region: str) -> Any:
        key = ("ssm:channels", region)
        with self._lock:
            if key not in self._clients:
                from botocore.config import Config

                config = self._config.merge(
                    Config(read_timeout=self.ssm_read_timeout,
                           retries={"mode": "adaptive", "max_attempts": self.ssm_write_attempts})
                )
                client = self._session.client("ssm", region_name=region, config=config)
                self._prepare(client)
                self._clients[key] = client
            return self._clients[key]

    def find_parameter(self, name: str, region: str, *, version: int | None = None) -> Parameter | None:
        """The parameter (its latest version, or `version`), or None when it does not exist."""
        selector = f"{name}:{version}" if version is not None else name
        try:
            with _mapped(f"ssm:GetParameter {selector}", region):
                raw = self._ssm_channels(region).get_parameter(Name=selector)["Parameter"]
        except NotFound:
            return None
        return _parameter(raw, region)

    def parameter_history(self, name: str, region: str) -> list[Parameter]:
        """Every version of a parameter, oldest first; [] when it does not exist."""
        try:
            with _mapped(f"ssm:GetParameterHistory {name}", region):
                pages = self._ssm_channels(region).get_paginator("get_parameter_history").paginate(Name=name)
                raws = [raw for page in pages for raw in page.get("Parameters", [])]
        except NotFound:
            return []
        return sorted((_parameter(raw, region) for raw in raws), key=lambda p: p.version)

    def parameters_under(self, path: str, region: str) -> list[Parameter]:
        """Every parameter below `path` (recursive), latest versions."""
        with _mapped(f"ssm:GetParametersByPath {path}", region):
            pages = self._ssm_channels(region).get_paginator("get_parameters_by_path").paginate(
                Path=path, Recursive=True
            )
            return [_parameter(raw, region) for page in pages for raw in page.get("Parameters", [])]

    def put_image_parameter(self, name: str, image_id: str, region: str, *, description: str) -> int:
        """Write an AMI id as a new version (``aws:ec2:image``, standard tier); the new version number.

        ``DataType`` is always passed: an overwrite without it silently resets the type to ``text``.
        """
        with _mapped(f"ssm:PutParameter {name}", region):
            response = self._ssm_channels(region).put_parameter(
                Name=name,
                Value=image_id,
                Type="String",
                DataType="aws:ec2:image",
                Tier="Standard",
                Description=description,
                Overwrite=True,
            )
        return int(response["Version"])

    def delete_parameter(self, name: str, region: str) -> None:
        with _mapped(f"ssm:DeleteParameter {name}", region):
            self._ssm_channels(region).delete_parameter(Name=name)

    def tag_parameter(self, name: str, region: str, tags: Mapping[str, str]) -> None:
        """Add or overwrite tags on a parameter (PutParameter cannot tag when overwriting)."""
        with _mapped(f"ssm:AddTagsToResource {name}", region):
            self._ssm_channels(region).add_tags_to_resource(
                ResourceType="Parameter", ResourceId=name,
                Tags=[{"Key": k, "Value": v} for k, v in tags.items()],
            )

    def parameter_tags(self, name: str, region: str) -> dict[str, str]:
        with _mapped(f"ssm:ListTagsForResource {name}", region):
            raw = self._ssm_channels(region).list_tags_for_resource(ResourceType="Parameter", ResourceId=name)
        return {t["Key"]: t["Value"] for t in raw.get("TagList", [])}

    # -- parameter tags (amibuild/lifecycle/prune.py) ----------------------------------------------

    def parameters_tagged(self, region: str, tags: Mapping[str, Sequence[str]]) -> list[str]:
        """Names of the parameters carrying every tag in `tags` with one of its values (DescribeParameters
        with ``tag:KEY`` filters): found whatever path or template named them."""
        filters = [{"Key": f"tag:{key}", "Values": list(values)} for key, values in tags.items()]
        with _mapped("ssm:DescribeParameters", region):
            pages = self._ssm_channels(region).get_paginator("describe_parameters").paginate(
                ParameterFilters=filters
            )
            return [raw["Name"] for page in pages for raw in page.get("Parameters", [])]

    def get_parameters(self, names: Sequence[str], region: str) -> dict[str, str]:
        """Values of several parameters (GetParameters, ten names a call); missing names are left out."""
        values: dict[str, str] = {}
        unique = sorted(set(names))
        for start in range(0, len(unique), 10):
            batch = unique[start:start + 10]
            with _mapped(f"ssm:GetParameters {', '.join(batch)}", region):
                answer = self.client("ssm", region).get_parameters(Names=batch)
            values.update({p["Name"]: p["Value"] for p in answer.get("Parameters", [])})
        return values

    # ---------------------------------------------------------------------------- S3

    def _s3(self, region: str) -> Any:
        key = ("s3:listing", region)
        with self._lock:
            if key not in self._clients:
                from botocore.config import Config

                config = self._config
                if os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"):
                    # a local endpoint (the emulator on 127.0.0.1) has no per-bucket host names
                    config = config.merge(Config(s3={"addressing_style": "path"}))
                client = self._session.client("s3", region_name=region, config=config)
                client.meta.events.register("before-call", self._count)
                self._clients[key] = client
            return self._clients[key]

    def list_eks_binaries(self, bucket: str, region: str, prefix: str) -> list[str]:
        """The "folders" right below ``prefix`` in ``bucket`` (ListObjectsV2 with a "/" delimiter),
        without the prefix's folder part or the trailing "/": "1.30." gives ["1.30.0", "1.30.4", ...],
        "1.30.4/" gives ["2024-09-11", ...]. The EKS binaries bucket keeps ``<1.N.P>/<date>/bin/...``.
        """
        head = prefix.rsplit("/", 1)[0] + "/" if "/" in prefix else ""
        with _mapped(f"s3:ListObjectsV2 s3://{bucket}/{prefix}", region):
            pages = self._s3(region).get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix, Delimiter="/"
            )
            found = [p["Prefix"] for page in pages for p in page.get("CommonPrefixes", [])]
        return sorted({p[len(head):].rstrip("/") for p in found})

    # ---------------------------------------------------------------------------- EC2

    def describe_images(self, region: str, *, image_ids: Sequence[str] = (), owners: Sequence[str] = (),
                        filters: Mapping[str, Sequence[str]] | None = None) -> list[Image]:
        kwargs: dict[str, Any] = {}
        if image_ids:
            kwargs["ImageIds"] = list(image_ids)
        if owners:
            kwargs["Owners"] = list(owners)
        if filters:
            kwargs["Filters"] = [{"Name": k, "Values": list(v)} for k, v in filters.items()]
        with _mapped("ec2:DescribeImages", region):
            pages = self.client("ec2", region).get_paginator("describe_images").paginate(**kwargs)
            return [_image(raw, region) for page in pages for raw in page.get("Images", [])]

    # -- EC2 reads for publishing (amibuild/publish.py) -----------------------------------

    def find_image(self, region: str, image_id: str) -> Image | None:
        """One image by id, disabled ones included; None when it does not exist (or was deregistered)."""
        try:
            with _mapped(f"ec2:DescribeImages {image_id}", region):
                raws = self.client("ec2", region).describe_images(ImageIds=[image_id], IncludeDisabled=True)["Images"]
        except NotFound:
            return None
        found = [_image(raw, region) for raw in raws if raw.get("ImageId") == image_id]
        return found[0] if found else None

    def image_launch_users(self, region: str, image_id: str) -> frozenset[str]:
        """Account ids allowed to launch the image (its launch permission)."""
        with _mapped(f"ec2:DescribeImageAttribute {image_id}", region):
            raw = self.client("ec2", region).describe_image_attribute(ImageId=image_id, Attribute="launchPermission")
        return frozenset(p["UserId"] for p in raw.get("LaunchPermissions", []) if p.get("UserId"))

    def snapshot_volume_users(self, region: str, snapshot_id: str) -> frozenset[str]:
        """Account ids allowed to create volumes from the snapshot (its createVolumePermission)."""
        with _mapped(f"ec2:DescribeSnapshotAttribute {snapshot_id}", region):
            raw = self.client("ec2", region).describe_snapshot_attribute(
                SnapshotId=snapshot_id, Attribute="createVolumePermission"
            )
        return frozenset(p["UserId"] for p in raw.get("CreateVolumePermissions", []) if p.get("UserId"))

    # ---------------------------------------------------------------------------- EC2 lifecycle (prune)

    # What `amibuild.lifecycle.prune` needs to know before it may delete an image (which snapshots are ours,
    # which launch templates, Auto Scaling groups and instances still use an image), and the three
    # changes it makes. Plain tuples keep the gateway's surface small; prune.py names the fields.

    def own_images(self, region: str, filters: Mapping[str, Sequence[str]]) -> list[tuple[Image, str]]:
        """(image, its DeprecationTime or "") of this account's images matching `filters`.

        An owner's DescribeImages lists its deprecated images too, whatever IncludeDeprecated says.
        """
        with _mapped("ec2:DescribeImages", region):
            pages = self.client("ec2", region).get_paginator("describe_images").paginate(
                Owners=["self"], Filters=[{"Name": k, "Values": list(v)} for k, v in filters.items()]
            )
            return [(_image(raw, region), raw.get("DeprecationTime", "") or "")
                    for page in pages for raw in page.get("Images", [])]

    def snapshot_tags(self, region: str, snapshot_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """Tags of this account's snapshots among `snapshot_ids`, by id; ids that do not exist are left out.

        A ``snapshot-id`` filter instead of ``SnapshotIds``: one missing id must not fail the whole call.
        """
        ids = sorted(set(snapshot_ids))
        found: dict[str, dict[str, str]] = {}
        for start in range(0, len(ids), 200):
            with _mapped("ec2:DescribeSnapshots", region):
                pages = self.client("ec2", region).get_paginator("describe_snapshots").paginate(
                    OwnerIds=["self"], Filters=[{"Name": "snapshot-id", "Values": ids[start:start + 200]}]
                )
                for page in pages:
                    for raw in page.get("Snapshots", []):
                        found[raw["SnapshotId"]] = {t["Key"]: t["Value"] for t in raw.get("Tags", [])}
        return found

    def launch_templates(self, region: str) -> list[tuple[str, str, int, int]]:
        """(id, name, default version, latest version) of every launch template in the region."""
        with _mapped("ec2:DescribeLaunchTemplates", region):
            pages = self.client("ec2", region).get_paginator("describe_launch_templates").paginate()
            return [
                (raw["LaunchTemplateId"], raw.get("LaunchTemplateName", ""), int(raw.get("DefaultVersionNumber", 0)),
                 int(raw.get("LatestVersionNumber", 0)))
                for page in pages for raw in page.get("LaunchTemplates", [])
            ]

    def launch_template_image_ids(self, region: str, template_id: str, versions: Sequence[str]) -> dict[int, str]:
        """Version number -> ImageId for `versions` ("$Default", "$Latest" or numbers) of one template.

        ``ResolveAlias`` makes EC2 answer the AMI id behind an ``resolve:ssm:...`` ImageId; a version
        without an ImageId is left out.
        """
        with _mapped(f"ec2:DescribeLaunchTemplateVersions {template_id}", region):
            raws = self.client("ec2", region).describe_launch_template_versions(
                LaunchTemplateId=template_id, Versions=list(dict.fromkeys(versions)), ResolveAlias=True
            ).get("LaunchTemplateVersions", [])
        return {int(raw["VersionNumber"]): raw["LaunchTemplateData"]["ImageId"]
                for raw in raws if raw.get("LaunchTemplateData", {}).get("ImageId")}

    def auto_scaling_template_refs(self, region: str) -> list[tuple[str, str, str, str]]:
        """(group name, template id, template name, version) for every launch template an Auto Scaling
        group names: its own, its mixed instances policy's, and those of the policy's overrides."""
        refs: list[tuple[str, str, str, str]] = []
        with _mapped("autoscaling:DescribeAutoScalingGroups", region):
            pages = self.client("autoscaling", region).get_paginator("describe_auto_scaling_groups").paginate()
            for page in pages:
                for group in page.get("AutoScalingGroups", []):
                    mixed = group.get("MixedInstancesPolicy", {}).get("LaunchTemplate", {})
                    specs = [group.get("LaunchTemplate"), mixed.get("LaunchTemplateSpecification"),
                             *(o.get("LaunchTemplateSpecification") for o in mixed.get("Overrides", []))]
                    refs += [(group["AutoScalingGroupName"], s.get("LaunchTemplateId", ""),
                              s.get("LaunchTemplateName", ""), str(s.get("Version") or "$Default"))
                             for s in specs if s]
        return refs

    def launch_configuration_images(self, region: str) -> dict[str, str]:
        """Launch configuration name -> ImageId (the older, immutable way an Auto Scaling group launches)."""
        with _mapped("autoscaling:DescribeLaunchConfigurations", region):
            pages = self.client("autoscaling", region).get_paginator("describe_launch_configurations").paginate()
            return {raw["LaunchConfigurationName"]: raw.get("ImageId", "")
                    for page in pages for raw in page.get("LaunchConfigurations", [])}

    def instance_images(self, region: str,
                        states: Sequence[str] = ("pending", "running", "stopping", "stopped")) -> list[tuple[str, str, str]]:
        """(instance id, state, image id) of every instance in one of `states`."""
        with _mapped("ec2:DescribeInstances", region):
            pages = self.client("ec2", region).get_paginator("describe_instances").paginate(
                Filters=[{"Name": "instance-state-name", "Values": list(states)}]
            )
            return [(raw["InstanceId"], raw.get("State", {}).get("Name", ""), raw.get("ImageId", ""))
                    for page in pages for reservation in page.get("Reservations", [])
                    for raw in reservation.get("Instances", [])]

    def deregister_image(self, region: str, image_id: str) -> None:
        with _mapped(f"ec2:DeregisterImage {image_id}", region):
            self.client("ec2", region).deregister_image(ImageId=image_id)

    def delete_snapshot(self, region: str, snapshot_id: str) -> None:
        with _mapped(f"ec2:DeleteSnapshot {snapshot_id}", region):
            self.client("ec2", region).delete_snapshot(SnapshotId=snapshot_id)

    def deprecate_image(self, region: str, image_id: str, at: datetime) -> None:
        """Set the image's deprecation time (EC2 refuses a time in the past and rounds to the minute)."""
        with _mapped(f"ec2:EnableImageDeprecation {image_id}", region):
            self.client("ec2", region).enable_image_deprecation(ImageId=image_id, DeprecateAt=at)

    # ---------------------------------------------------------------------------- leases (SSM) and build leftovers (EC2)

    def put_parameter_if_absent(self, name: str, value: str, region: str, *, description: str = "") -> int | None:
        """Create a String parameter only when none exists (``Overwrite=False``): its version (1), or
        None when one exists already.

        SSM refuses the second of two concurrent creates with ParameterAlreadyExists, which makes this
        the "take it if free" a lease (amibuild/lease.py) needs.
        """
        from botocore.exceptions import ClientError

        with _mapped(f"ssm:PutParameter {name}", region):
            try:
                response = self._ssm_channels(region).put_parameter(
                    Name=name, Value=value, Type="String", Tier="Standard", Overwrite=False,
                    **({"Description": description} if description else {}),
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "ParameterAlreadyExists":
                    return None
                raise
        return int(response["Version"])

    def overwrite_parameter(self, name: str, value: str, region: str, *, description: str = "") -> int:
        """Replace a String parameter's value (a lease renewal or take-over); the new version number,
        which tells a taker whether its put directly followed the version it read."""
        with _mapped(f"ssm:PutParameter {name}", region):
            response = self._ssm_channels(region).put_parameter(
                Name=name, Value=value, Type="String", Tier="Standard", Overwrite=True,
                **({"Description": description} if description else {}),
            )
        return int(response["Version"])

    def delete_parameter_if_value(self, name: str, value: str, region: str) -> bool:
        """Delete the parameter when it still holds `value`; False when it is gone or holds another.

        SSM has no conditional delete: the read and the delete are two calls, so a writer slipping in
        between them loses its value. Leases keep that window small and say so.
        """
        current = self.find_parameter(name, region)
        if current is None or current.value != value:
            return False
        try:
            with _mapped(f"ssm:DeleteParameter {name}", region):
                self._ssm_channels(region).delete_parameter(Name=name)
        except NotFound:
            return False
        return True

    def ec2_reachable(self, region: str) -> str | None:
        """None when the EC2 endpoint answers one cheap call at once, else why not (no retries)."""
        key = ("ec2:probe", region)
        with self._lock:
            if key not in self._clients:
                from botocore.config import Config

                config = self._config.merge(Config(connect_timeout=3, read_timeout=5,
                                                   retries={"mode": "standard", "total_max_attempts": 1}))
                self._clients[key] = self._session.client("ec2", region_name=region, config=config)
            client = self._clients[key]
        try:
            with _mapped("ec2:DescribeInstances", region):
                client.describe_instances(MaxResults=5)
        except EndpointUnreachable as exc:
            return str(exc)
        except AwsError:
            return None  # it answered, even if with a refusal
        return None

    def instances_tagged(self, region: str, tags: Mapping[str, str],
                         states: Sequence[str] = ("pending", "running", "stopping", "stopped")) -> list[str]:
        """Ids of instances carrying every tag in `tags`, in one of `states`."""
        filters = [{"Name": f"tag:{k}", "Values": [v]} for k, v in tags.items()]
        filters.append({"Name": "instance-state-name", "Values": list(states)})
        with _mapped("ec2:DescribeInstances", region):
            pages = self.client("ec2", region).get_paginator("describe_instances").paginate(Filters=filters)
            return sorted(raw["InstanceId"] for page in pages for reservation in page.get("Reservations", [])
                          for raw in reservation.get("Instances", []))

    def instance_security_groups(self, region: str, instance_ids: Sequence[str]) -> dict[str, str]:
        """Group id -> name of the security groups these instances use."""
        if not instance_ids:
            return {}
        with _mapped("ec2:DescribeInstances", region):
            pages = self.client("ec2", region).get_paginator("describe_instances").paginate(
                Filters=[{"Name": "instance-id", "Values": list(instance_ids)}])
            return {g["GroupId"]: g.get("GroupName", "") for page in pages
                    for reservation in page.get("Reservations", []) for raw in reservation.get("Instances", [])
                    for g in raw.get("SecurityGroups", [])}

    def terminate_instances(self, region: str, instance_ids: Sequence[str]) -> None:
        with _mapped(f"ec2:TerminateInstances {' '.join(instance_ids)}", region):
            self.client("ec2", region).terminate_instances(InstanceIds=list(instance_ids))

    def key_pairs_named(self, region: str, names: Sequence[str]) -> list[str]:
        """Which of these key pair names exist (a filter, so a missing name does not fail the call)."""
        if not names:
            return []
        with _mapped("ec2:DescribeKeyPairs", region):
            raw = self.client("ec2", region).describe_key_pairs(Filters=[{"Name": "key-name", "Values": list(names)}])
        return sorted(k["KeyName"] for k in raw.get("KeyPairs", []))

    def delete_key_pair(self, region: str, name: str) -> None:
        with _mapped(f"ec2:DeleteKeyPair {name}", region):
            self.client("ec2", region).delete_key_pair(KeyName=name)

    def security_groups_named(self, region: str, names: Sequence[str]) -> dict[str, str]:
        """Group name -> id for those of `names` that exist."""
        if not names:
            return {}
        with _mapped("ec2:DescribeSecurityGroups", region):
            raw = self.client("ec2", region).describe_security_groups(
                Filters=[{"Name": "group-name", "Values": list(names)}])
        return {g["GroupName"]: g["GroupId"] for g in raw.get("SecurityGroups", [])}

    def delete_security_group(self, region: str, group_id: str) -> None:
        with _mapped(f"ec2:DeleteSecurityGroup {group_id}", region):
            self.client("ec2", region).delete_security_group(GroupId=group_id)

    def volumes_tagged(self, region: str, tags: Mapping[str, str]) -> list[str]:
        """Ids of volumes not attached to anything that carry every tag in `tags`."""
        filters = [{"Name": f"tag:{k}", "Values": [v]} for k, v in tags.items()]
        filters.append({"Name": "status", "Values": ["available"]})
        with _mapped("ec2:DescribeVolumes", region):
            pages = self.client("ec2", region).get_paginator("describe_volumes").paginate(Filters=filters)
            return sorted(v["VolumeId"] for page in pages for v in page.get("Volumes", []))

    def delete_volume(self, region: str, volume_id: str) -> None:
        with _mapped(f"ec2:DeleteVolume {volume_id}", region):
            self.client("ec2", region).delete_volume(VolumeId=volume_id)

    def snapshots_tagged(self, region: str, tags: Mapping[str, str]) -> list[str]:
        """Ids of this account's snapshots carrying every tag in `tags`."""
        filters = [{"Name": f"tag:{k}", "Values": [v]} for k, v in tags.items()]
        with _mapped("ec2:DescribeSnapshots", region):
            pages = self.client("ec2", region).get_paginator("describe_snapshots").paginate(
                OwnerIds=["self"], Filters=filters)
            return sorted(s["SnapshotId"] for page in pages for s in page.get("Snapshots", []))

    # ---------------------------------------------------------------------------- CloudFormation, Auto Scaling, EKS (rollout)
    # Typed results, parsed here by the pure functions of amibuild/aws/handoff_results.py.

    @staticmethod
    def _no_updates(exc: Any) -> bool:
        """CloudFormation's refusal of an update that changes nothing (a ValidationError)."""
        error = exc.response.get("Error", {})
        return error.get("Code") == "ValidationError" and "No updates are to be performed" in str(error.get("Message"))

    def describe_stack(self, name: str, region: str) -> results.Stack | None:
        """The stack (status, parameters, outputs, capabilities); None when it does not exist."""
        try:
            with _mapped(f"cloudformation:DescribeStacks {name}", region):
                stacks = self.client("cloudformation", region).describe_stacks(StackName=name)["Stacks"]
        except NotFound:  # "Stack with id NAME does not exist" is a ValidationError
            return None
        return results.parse_stack(stacks[0]) if stacks else None

    def stack_resources(self, name: str, region: str) -> list[results.StackResource]:
        with _mapped(f"cloudformation:ListStackResources {name}", region):
            pages = self.client("cloudformation", region).get_paginator("list_stack_resources").paginate(StackName=name)
            return [results.parse_stack_resource(raw) for page in pages for raw in page.get("StackResourceSummaries", [])]

    def stack_template(self, name: str, region: str) -> str:
        """The stack's template as submitted, as text (botocore hands JSON bodies back parsed)."""
        import json

        with _mapped(f"cloudformation:GetTemplate {name}", region):
            body = self.client("cloudformation", region).get_template(StackName=name, TemplateStage="Original")
        text = body.get("TemplateBody", "")
        return text if isinstance(text, str) else json.dumps(text)

    def create_stack(self, name: str, region: str, *, template_body: str, parameters: Sequence[Mapping[str, Any]],
                     capabilities: Sequence[str], token: str) -> str:
        with _mapped(f"cloudformation:CreateStack {name}", region):
            return self.client("cloudformation", region).create_stack(
                StackName=name, TemplateBody=template_body, Parameters=list(parameters),
                Capabilities=list(capabilities), ClientRequestToken=token,
            )["StackId"]

    def create_change_set(self, stack: str, region: str, *, name: str, parameters: Sequence[Mapping[str, Any]],
                          capabilities: Sequence[str], description: str,
                          template_body: str | None = None) -> str | None:
        """Start an UPDATE change set (the stack's own template unless `template_body`); its id.

        None when CloudFormation refuses it at once for changing nothing; AWS itself usually
        accepts it and marks the change set FAILED instead (see `describe_change_set`).
        """
        from botocore.exceptions import ClientError

        template: dict[str, Any] = {"TemplateBody": template_body} if template_body else {"UsePreviousTemplate": True}
        with _mapped(f"cloudformation:CreateChangeSet {stack}", region):
            try:
                return self.client("cloudformation", region).create_change_set(
                    StackName=stack, ChangeSetName=name, ChangeSetType="UPDATE", Parameters=list(parameters),
                    Capabilities=list(capabilities), Description=description, **template,
                )["Id"]
            except ClientError as exc:
                if self._no_updates(exc):
                    return None
                raise

    def describe_change_set(self, stack: str, region: str, change_set: str) -> results.ChangeSet:
        """Status, reason and every change of a change set (all pages)."""
        client = self.client("cloudformation", region)
        with _mapped(f"cloudformation:DescribeChangeSet {change_set}", region):
            first = page = client.describe_change_set(StackName=stack, ChangeSetName=change_set)
            changes = list(page.get("Changes", []))
            while page.get("NextToken"):
                page = client.describe_change_set(StackName=stack, ChangeSetName=change_set, NextToken=page["NextToken"])
                changes += page.get("Changes", [])
        return results.parse_change_set({**first, "Changes": changes})

    def execute_change_set(self, stack: str, region: str, change_set: str, *, token: str) -> None:
        with _mapped(f"cloudformation:ExecuteChangeSet {change_set}", region):
            self.client("cloudformation", region).execute_change_set(
                StackName=stack, ChangeSetName=change_set, ClientRequestToken=token
            )

    def delete_change_set(self, stack: str, region: str, change_set: str) -> None:
        with _mapped(f"cloudformation:DeleteChangeSet {change_set}", region):
            self.client("cloudformation", region).delete_change_set(StackName=stack, ChangeSetName=change_set)

    def latest_stack_event(self, name: str, region: str) -> results.StackEvent | None:
        """The stack's newest event (one page read), or None."""
        with _mapped(f"cloudformation:DescribeStackEvents {name}", region):
            events = self.client("cloudformation", region).describe_stack_events(StackName=name).get("StackEvents", [])
        return results.parse_stack_event(events[0]) if events else None

    def stack_events_since(self, name: str, region: str, event_id: str | None) -> list[results.StackEvent]:
        """The stack's events newer than `event_id` (all when None), newest first; paging stops there."""
        found: list[results.StackEvent] = []
        with _mapped(f"cloudformation:DescribeStackEvents {name}", region):
            pages = self.client("cloudformation", region).get_paginator("describe_stack_events").paginate(StackName=name)
            for page in pages:
                for event in page.get("StackEvents", []):
                    if event_id is not None and event.get("EventId") == event_id:
                        return found
                    found.append(results.parse_stack_event(event))
        return found

    def auto_scaling_group(self, name: str, region: str) -> results.AutoScalingGroup | None:
        with _mapped(f"autoscaling:DescribeAutoScalingGroups {name}", region):
            groups = self.client("autoscaling", region).describe_auto_scaling_groups(
                AutoScalingGroupNames=[name]
            ).get("AutoScalingGroups", [])
        return results.parse_auto_scaling_group(groups[0]) if groups else None

    def launch_template_version(self, template_id: str, version: str, region: str) -> results.LaunchTemplateVersion | None:
        """One version of a launch template (a number, ``$Latest`` or ``$Default``); None when missing."""
        try:
            with _mapped(f"ec2:DescribeLaunchTemplateVersions {template_id} {version}", region):
                versions = self.client("ec2", region).describe_launch_template_versions(
                    LaunchTemplateId=template_id, Versions=[str(version)]
                ).get("LaunchTemplateVersions", [])
        except NotFound:
            return None
        return results.parse_launch_template_version(versions[0]) if versions else None

    def create_launch_template_version(self, template_id: str, region: str, *, source_version: str, image_id: str,
                                       description: str) -> int:
        """A new version copied from `source_version` with another ImageId; its number."""
        with _mapped(f"ec2:CreateLaunchTemplateVersion {template_id}", region):
            raw = self.client("ec2", region).create_launch_template_version(
                LaunchTemplateId=template_id, SourceVersion=str(source_version), VersionDescription=description,
                LaunchTemplateData={"ImageId": image_id},
            )
        return int(raw["LaunchTemplateVersion"]["VersionNumber"])

    def describe_nodegroup(self, cluster: str, name: str, region: str) -> results.Nodegroup | None:
        try:
            with _mapped(f"eks:DescribeNodegroup {cluster}/{name}", region):
                raw = self.client("eks", region).describe_nodegroup(clusterName=cluster, nodegroupName=name)["nodegroup"]
        except NotFound:
            return None
        return results.parse_nodegroup(raw)

    def update_nodegroup_version(self, cluster: str, name: str, region: str, *, template_id: str,
                                 version: str) -> results.NodegroupUpdate:
        """Roll a managed node group to a launch template version; the update (id, status)."""
        with _mapped(f"eks:UpdateNodegroupVersion {cluster}/{name}", region):
            return results.parse_nodegroup_update(self.client("eks", region).update_nodegroup_version(
                clusterName=cluster, nodegroupName=name, launchTemplate={"id": template_id, "version": str(version)},
            )["update"])

    def describe_nodegroup_update(self, cluster: str, name: str, update_id: str, region: str) -> results.NodegroupUpdate:
        with _mapped(f"eks:DescribeUpdate {update_id}", region):
            return results.parse_nodegroup_update(self.client("eks", region).describe_update(
                name=cluster, nodegroupName=name, updateId=update_id
            )["update"])

    def describe_cluster(self, name: str, region: str) -> dict[str, Any] | None:
        """The EKS cluster (endpoint, CA, network, access config); None when it does not exist."""
        try:
            with _mapped(f"eks:DescribeCluster {name}", region):
                return self.client("eks", region).describe_cluster(name=name)["cluster"]
        except NotFound:
            return None

    def create_access_entry(self, cluster: str, principal_arn: str, region: str, *, entry_type: str) -> bool:
        """Create an EKS access entry for `principal_arn`; False when one already exists."""
        client = self.client("eks", region)
        with _mapped(f"eks:CreateAccessEntry {cluster}", region):
            try:
                client.create_access_entry(clusterName=cluster, principalArn=principal_arn, type=entry_type)
            except client.exceptions.ResourceInUseException:
                return False
        return True


K = TypeVar("K")
V = TypeVar("V")
MAX_WORKERS = 32


def fan_out(keys: Sequence[K], work: Callable[[K], V]) -> dict[K, V]:
    """Run `work` for every key (a region, usually) in threads, up to MAX_WORKERS; the first error wins.

    The gateway is thread-safe, and AWS calls spend their time waiting on the network.
    """
    keys = list(keys)
    if len(keys) <= 1:
        return {k: work(k) for k in keys}
    with ThreadPoolExecutor(max_workers=min(MAX_WORKERS, len(keys)), thread_name_prefix="amibuild-aws") as pool:
        futures = {k: pool.submit(work, k) for k in keys}
        return {k: futures[k].result() for k in keys}


def _image(raw: Mapping[str, Any], region: str) -> Image:
    return Image(
        image_id=raw["ImageId"],
        region=region,
        name=raw.get("Name", ""),
        state=raw.get("State", "unknown"),
        tags={t["Key"]: t["Value"] for t in raw.get("Tags", [])},
        creation_date=raw.get("CreationDate", ""),
        snapshot_ids=tuple(
            m["Ebs"]["SnapshotId"] for m in raw.get("BlockDeviceMappings", []) if m.get("Ebs", {}).get("SnapshotId")
        ),
    )


@dataclass(frozen=True)
class Parameter:
    """One version of an SSM parameter, as GetParameter / GetParameterHistory return it."""

    name: str
    region: str
    value: str
    version: int
    data_type: str
    last_modified: datetime | None = None
    description: str = ""  # only in history (GetParameter does not return it)
    user: str = ""  # LastModifiedUser, only in history


def _parameter(raw: Mapping[str, Any], region: str) -> Parameter:
    return Parameter(
        name=raw["Name"],
        region=region,
        value=raw.get("Value", ""),
        version=int(raw.get("Version", 0)),
        data_type=raw.get("DataType", "text"),
        last_modified=raw.get("LastModifiedDate"),
        description=raw.get("Description", "") or "",
        user=raw.get("LastModifiedUser", "") or "",
    )


def default_region(profile: str | None = None) -> str:
    """The build region when neither the pipeline file nor --region names one: AWS_REGION,
    AWS_DEFAULT_REGION, the profile's region in ~/.aws/config, else us-west-2."""
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        return region
    import botocore.session  # only when the environment names no region

    try:
        return botocore.session.Session(profile=profile).get_config_variable("region") or "us-west-2"
    except Exception:  # a broken or missing profile: the AWS calls later say what is wrong
        return "us-west-2"
