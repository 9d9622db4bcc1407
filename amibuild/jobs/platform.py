"""Where the work runs: real AWS by default, or whatever the CLI was told to use in its place.

A `Platform` is the one seam through which another target hands in what differs from AWS: the
render target (the endpoint Packer reaches), the rewrite applied to each real build before it is
written, and how often the boot test polls Run Command. The CLI picks one, once, and passes it in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from amibuild.render import Target, Transform

AWS = "aws"
POLL_SECONDS = 5.0  # between Run Command polls on real AWS: a command takes seconds to minutes


@dataclass(frozen=True)
class Platform:
    """What a render is for (`target`), the rewrite applied to each real build (`transform`, none on
    AWS) and the seconds between Run Command polls of a boot test."""

    name: str = AWS
    target: Target = Target()
    transform: Transform | None = None
    poll_seconds: float = POLL_SECONDS


def endpoint_of(env: Mapping[str, str]) -> str | None:
    """The EC2 endpoint the environment points boto3 at (AWS_ENDPOINT_URL_EC2, else AWS_ENDPOINT_URL)."""
    return env.get("AWS_ENDPOINT_URL_EC2") or env.get("AWS_ENDPOINT_URL") or None


def aws(env: Mapping[str, str]) -> Platform:
    """Real AWS, through the endpoint override the environment gives, if any."""
    return Platform(target=Target(endpoint_of(env)))
