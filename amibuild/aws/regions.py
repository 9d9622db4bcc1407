"""The AWS regions botocore knows, read straight from its endpoints data.

A region that is not among them is bad input (exit 2), refused before the first call: with an
endpoint override (an emulator, a proxy) a typo such as `us-wset-2` would otherwise reach the
endpoint, which answers with an HTML error page botocore cannot parse.
"""

from __future__ import annotations

from functools import lru_cache

from amibuild.aws import models
from amibuild.suggest import suggest


@lru_cache(maxsize=1)
def known() -> frozenset[str]:
    """Every region of every partition, from botocore's endpoints data as the process's loader
    holds it (parsed once: a client made before has parsed it already)."""
    endpoints = models.loader_data("endpoints")
    return frozenset(region for partition in endpoints["partitions"] for region in partition["regions"])


def problem(region: str) -> str | None:
    """Why `region` is no AWS region (a sentence), or None when it is one."""
    if region in known():
        return None
    return f"{region!r} is not an AWS region{suggest(region, known())}"
