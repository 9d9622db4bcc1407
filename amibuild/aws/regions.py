"""The AWS regions botocore knows, read straight from its endpoints data.

A region that is not among them is bad input (exit 2), refused before the first call: with an
endpoint override (the sandbox, a proxy) a typo such as `us-wset-2` would otherwise reach the
endpoint, which answers with an HTML error page botocore cannot parse.
"""

from __future__ import annotations

import gzip
import json
from functools import lru_cache
from pathlib import Path

from amibuild.suggest import suggest


@lru_cache(maxsize=1)
def known() -> frozenset[str]:
    """Every region of every partition (a tenth of the time a botocore session takes to answer)."""
    import botocore

    data = Path(botocore.__file__).parent / "data" / "endpoints.json"
    raw = data.read_bytes() if data.exists() else gzip.decompress(data.with_suffix(".json.gz").read_bytes())
    return frozenset(region for partition in json.loads(raw)["partitions"] for region in partition["regions"])


def problem(region: str) -> str | None:
    """Why `region` is no AWS region (a sentence), or None when it is one."""
    if region in known():
        return None
    return f"{region!r} is not an AWS region{suggest(region, known())}"
