"""The AWS regions amibuild accepts: botocore's endpoints data (amibuild.aws.regions)."""

from __future__ import annotations


def test_the_region_list_comes_from_botocores_endpoints_data() -> None:
    import gzip
    import json
    from pathlib import Path

    import botocore

    from amibuild.aws import regions

    data = Path(botocore.__file__).parent / "data" / "endpoints.json"
    raw = data.read_bytes() if data.exists() else gzip.decompress(data.with_suffix(".json.gz").read_bytes())
    expected = {r for partition in json.loads(raw)["partitions"] for r in partition["regions"]}
    assert regions.known() == expected and {"us-west-2", "eu-west-1", "cn-north-1"} <= expected
    assert regions.problem("us-west-2") is None
    assert regions.problem("us-wset-2") == "'us-wset-2' is not an AWS region (did you mean 'us-west-2'?)"
