"""doctor's check of shared images' keys: each region's key read through the gateway (DescribeKey,
GetKeyPolicy, ListGrants), the verdict left to `keyshare.decide`."""

from __future__ import annotations

from typing import Any

from amibuild.errors import AwsError
from amibuild.lifecycle.keyshare import Finding, KeyFacts, SharedKey, decide, shared_keys


def gather(aws: Any, shared: SharedKey) -> KeyFacts:
    """What KMS says about one key; `problem` names the call that failed."""
    try:
        info = aws.describe_key(shared.key, shared.region)
        if info.manager == "AWS":
            return KeyFacts(info.manager, info.state)
        return KeyFacts(info.manager, info.state, aws.key_policy(info.arn, shared.region), aws.grants(info.arn, shared.region))
    except AwsError as exc:
        return KeyFacts(problem=str(exc))


def check(aws: Any, pipeline: Any) -> list[Finding]:
    """One finding per shared key and consumer account (none when the pipeline shares nothing encrypted)."""
    return [finding for shared in shared_keys(pipeline) for finding in decide(shared, gather(aws, shared))]
