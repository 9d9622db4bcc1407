"""SSM Parameter Store calls of the gateway: channel parameters (typed `Parameter`) and the lease primitives."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Mapping, Sequence

from amibuild.errors import NotFound
from amibuild.aws import deadline
from amibuild.aws.session import CONNECT_TIMEOUT, fan_out
from amibuild.aws.error_map import mapped_errors
from botocore.exceptions import ClientError
from botocore.config import Config


_FILTER_VALUES = 50  # values one DescribeParameters filter takes, and the most results a page holds


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
    labels: tuple[str, ...] = ()  # only in history


@dataclass(frozen=True)
class History:
    """A parameter's versions, oldest first, and the time AWS answered with (the response's ``Date``
    header; None when it gave none): the clock a channel's soak is measured on, never the local one."""

    versions: tuple[Parameter, ...]
    answered_at: datetime | None


def answered_at(response: Mapping[str, Any] | None) -> datetime | None:
    """The time in an AWS response's ``Date`` header (UTC), or None."""
    headers = ((response or {}).get("ResponseMetadata") or {}).get("HTTPHeaders") or {}
    try:
        when = parsedate_to_datetime(headers["date"])
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _parameter(raw: Mapping[str, Any], region: str) -> Parameter:
    modified = raw.get("LastModifiedDate")  # botocore dates it in this machine's zone: amibuild says UTC
    return Parameter(
        name=raw["Name"],
        region=region,
        value=raw.get("Value", ""),
        version=int(raw.get("Version", 0)),
        data_type=raw.get("DataType", "text"),
        last_modified=modified.astimezone(timezone.utc) if isinstance(modified, datetime) and modified.tzinfo else modified,
        description=raw.get("Description", "") or "",
        user=raw.get("LastModifiedUser", "") or "",
        labels=tuple(raw.get("Labels") or ()),
    )


class SsmCalls:
    """SSM calls; mixed into `amibuild.aws.Aws` (needs `Session`'s clients)."""

    def get_parameter(self, name: str, region: str) -> str:
        with mapped_errors(f"ssm:GetParameter {name}", region):
            return self.client("ssm", region).get_parameter(Name=name)["Parameter"]["Value"]

    # The channel methods below (reads included) use one client per region (`_ssm_channels`): PutParameter
    # allows a few calls a second per account and region, so botocore's adaptive mode retries throttling
    # with more attempts than other calls get. Its timeouts and attempts are bounded so one call cannot
    # outlive a channel lease (`request_bound`, checked before each write: `amibuild.lease.ChannelLease.check`).
    ssm_write_attempts = 5
    ssm_read_timeout = 10.0  # seconds; a PutParameter answers in well under a second
    _BACKOFF_CAP = 20.0  # botocore's longest wait between two attempts

    def request_bound(self) -> float:
        """The longest one channel-client call can last, every retry and back-off included."""
        attempts = self.ssm_write_attempts
        return attempts * (CONNECT_TIMEOUT + self.ssm_read_timeout) + (attempts - 1) * self._BACKOFF_CAP

    def _ssm_channels(self, region: str) -> Any:
        client = self._own_client("ssm:channels", region, lambda: self._config.merge(Config(
            read_timeout=self.ssm_read_timeout, retries={"mode": "adaptive", "max_attempts": self.ssm_write_attempts})))
        return deadline.wrap(client)  # bounded inside a channel operation (`aws.deadline`)

    def find_parameter(self, name: str, region: str, *, version: int | None = None) -> Parameter | None:
        """The parameter (its latest version, or `version`), or None when it does not exist."""
        selector = f"{name}:{version}" if version is not None else name
        try:
            with mapped_errors(f"ssm:GetParameter {selector}", region):
                raw = self._ssm_channels(region).get_parameter(Name=selector)["Parameter"]
        except NotFound:
            return None
        return _parameter(raw, region)

    def parameter_history(self, name: str, region: str) -> list[Parameter]:
        """Every version of a parameter, oldest first; [] when it does not exist."""
        return list(self.dated_history(name, region).versions)

    def dated_history(self, name: str, region: str) -> History:
        """Every version of a parameter (none when it does not exist), with the time AWS answered."""
        try:
            with mapped_errors(f"ssm:GetParameterHistory {name}", region):
                pages = list(self._ssm_channels(region).get_paginator("get_parameter_history").paginate(Name=name))
        except NotFound as exc:
            return History((), answered_at(getattr(exc.__cause__, "response", None)))
        raws = [raw for page in pages for raw in page.get("Parameters", [])]
        versions = sorted((_parameter(raw, region) for raw in raws), key=lambda p: p.version)
        return History(tuple(versions), answered_at(pages[-1] if pages else None))

    def parameters_under(self, path: str, region: str) -> list[Parameter]:
        """Every parameter below `path` (recursive), latest versions."""
        with mapped_errors(f"ssm:GetParametersByPath {path}", region):
            pages = self._ssm_channels(region).get_paginator("get_parameters_by_path").paginate(
                Path=path, Recursive=True
            )
            return [_parameter(raw, region) for page in pages for raw in page.get("Parameters", [])]

    def put_image_parameter(self, name: str, image_id: str, region: str, *, description: str) -> int:
        """Write an AMI id as a new version (``aws:ec2:image``, standard tier); the new version number.

        ``DataType`` is always passed: an overwrite without it silently resets the type to ``text``.
        """
        with mapped_errors(f"ssm:PutParameter {name}", region):
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
        with mapped_errors(f"ssm:DeleteParameter {name}", region):
            self._ssm_channels(region).delete_parameter(Name=name)

    def tag_parameter(self, name: str, region: str, tags: Mapping[str, str]) -> None:
        """Add or overwrite tags on a parameter (PutParameter cannot tag when overwriting)."""
        with mapped_errors(f"ssm:AddTagsToResource {name}", region):
            self._ssm_channels(region).add_tags_to_resource(
                ResourceType="Parameter", ResourceId=name,
                Tags=[{"Key": k, "Value": v} for k, v in tags.items()],
            )

    def parameter_tags(self, name: str, region: str) -> dict[str, str]:
        with mapped_errors(f"ssm:ListTagsForResource {name}", region):
            raw = self._ssm_channels(region).list_tags_for_resource(ResourceType="Parameter", ResourceId=name)
        return {t["Key"]: t["Value"] for t in raw.get("TagList", [])}

    def parameters_tagged(self, region: str, tags: Mapping[str, Sequence[str]],
                          prefixes: Mapping[str, Sequence[str]] | None = None) -> list[str]:
        """Names of the parameters carrying every tag in `tags` with one of its values, and every tag
        in `prefixes` with a value beginning with one of its prefixes (DescribeParameters with
        ``tag:KEY`` filters, Equals and BeginsWith): found whatever path or template named them.
        A filter takes at most 50 values: more are asked in several calls, their answers joined."""
        keys = [(key, "Equals", list(values)) for key, values in tags.items()]
        keys += [(key, "BeginsWith", list(values)) for key, values in (prefixes or {}).items()]
        chunked = [[(key, option, values[i:i + _FILTER_VALUES]) for i in range(0, len(values), _FILTER_VALUES)]
                   for key, option, values in keys]
        names: dict[str, None] = {}
        for combination in itertools.product(*chunked):
            filters = [{"Key": f"tag:{key}", "Option": option, "Values": values} for key, option, values in combination]
            with mapped_errors("ssm:DescribeParameters", region):
                pages = self._ssm_channels(region).get_paginator("describe_parameters").paginate(
                    ParameterFilters=filters, PaginationConfig={"PageSize": _FILTER_VALUES}  # 10 by default
                )
                names.update((raw["Name"], None) for page in pages for raw in page.get("Parameters", []))
        return list(names)

    def get_parameters(self, names: Sequence[str], region: str) -> dict[str, str]:
        """Values of several parameters (GetParameters, ten names a call, the calls at once); missing
        names are left out."""
        unique = sorted(set(names))

        def read(start: int) -> dict[str, str]:
            batch = unique[start:start + 10]
            with mapped_errors(f"ssm:GetParameters {', '.join(batch)}", region):
                answer = self.client("ssm", region).get_parameters(Names=batch)
            return {p["Name"]: p["Value"] for p in answer.get("Parameters", [])}

        return {name: value for batch in fan_out(range(0, len(unique), 10), read).values()
                for name, value in batch.items()}

    # leases

    def put_parameter_if_absent(self, name: str, value: str, region: str, *, description: str = "") -> int | None:
        """Create a String parameter only when none exists (``Overwrite=False``): its version (1), or
        None when one exists already.

        SSM refuses the second of two concurrent creates with ParameterAlreadyExists, which makes this
        the "take it if free" a lease (amibuild/lease.py) needs.
        """
        with mapped_errors(f"ssm:PutParameter {name}", region):
            try:
                return self._put_string(name, value, region, description, overwrite=False)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "ParameterAlreadyExists":
                    return None
                raise

    def overwrite_parameter(self, name: str, value: str, region: str, *, description: str = "") -> int:
        """Replace a String parameter's value (a lease renewal or take-over); the new version number,
        which tells a taker whether its put directly followed the version it read."""
        with mapped_errors(f"ssm:PutParameter {name}", region):
            return self._put_string(name, value, region, description, overwrite=True)

    def _put_string(self, name: str, value: str, region: str, description: str, *, overwrite: bool) -> int:
        """PutParameter of a standard String (a lease's value); the version it made."""
        response = self._ssm_channels(region).put_parameter(Name=name, Value=value, Type="String", Tier="Standard",
                                                            Overwrite=overwrite, **({"Description": description} if description else {}))
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
            self.delete_parameter(name, region)
        except NotFound:
            return False
        return True
