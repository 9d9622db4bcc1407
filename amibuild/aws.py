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
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

from .errors import AccessDenied, AwsError, EndpointUnreachable, ExpiredToken, NoCredentials, NotFound

_EXPIRED = {"ExpiredToken", "ExpiredTokenException", "RequestExpired", "TokenRefreshRequired"}
_DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedAccess",
           "AuthFailure", "InvalidClientTokenId", "UnrecognizedClientException", "SignatureDoesNotMatch"}
_NOT_FOUND = {"ParameterNotFound", "InvalidAMIID.NotFound", "InvalidAMIID.Unavailable",
              "InvalidAMIID.Malformed", "ValidationError", "ResourceNotFoundException",
              "ParameterVersionNotFound", "InvalidSnapshot.NotFound"}


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


class Aws:
    """Session, clients and typed calls. Thread-safe: builds and publishes fan out over regions."""

    def __init__(self, *, profile: str | None = None, region: str | None = None, max_attempts: int = 3) -> None:
        import boto3  # heavy: imported only when AWS is actually used
        from botocore.config import Config

        self._session = boto3.session.Session(profile_name=profile, region_name=region)
        self._config = Config(
            connect_timeout=3,
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
                client.meta.events.register("before-call", self._count)
                self._clients[key] = client
            return self._clients[key]

    def _count(self, model: Any, context: Mapping[str, Any], **_: Any) -> None:
        self.calls.append((model.service_model.service_name, model.name, context.get("client_region", "")))

    # ---------------------------------------------------------------------------- SSM

    def get_parameter(self, name: str, region: str) -> str:
        with _mapped(f"ssm:GetParameter {name}", region):
            return self.client("ssm", region).get_parameter(Name=name)["Parameter"]["Value"]

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
