"""botocore's service models are parsed once per process (amibuild.aws.models): gateways share the
loader of the same search paths, and `preload` parses ahead without sending a request."""

from __future__ import annotations

import pytest

from amibuild.aws import Aws
from amibuild.aws import models
from amibuild.errors import UsageError
from faultproxy import FaultProxy

REGION = "us-west-2"


def _loader(aws: Aws):
    return aws._session._session.get_component("data_loader")


def _parsed(loader, service: str) -> bool:
    return any(key[:2] == ("load_service_model", service) for key in loader._cache)


def test_two_gateways_share_one_loader_and_one_parsed_model() -> None:
    first, second = Aws(), Aws()
    assert _loader(first) is _loader(second)
    a = first.client("ec2", REGION).meta.service_model
    b = second.client("ec2", "eu-west-1").meta.service_model
    assert a._service_description is b._service_description  # parsed once, not per gateway


def test_other_search_paths_get_a_loader_of_their_own(tmp_path, monkeypatch) -> None:
    plain = Aws()
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))  # botocore then searches this folder too
    other = Aws()
    assert _loader(other) is not _loader(plain)
    assert str(tmp_path) in _loader(other).search_paths
    assert Aws()._session._session.get_component("data_loader") is _loader(other)


def test_preload_parses_the_models_and_sends_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))  # search paths of this test's own: a loader nothing filled yet
    loader = _loader(Aws())
    assert not _parsed(loader, "ssm") and not _parsed(loader, "cloudformation")
    with FaultProxy("http://127.0.0.1:9") as proxy:  # would record any request, and it goes nowhere
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        models.preload(None, [("ssm", REGION), ("cloudformation", REGION)])
        models.wait_for_preload()
        assert _parsed(loader, "ssm") and _parsed(loader, "cloudformation")
        assert proxy.log == []


def test_a_preload_with_a_bad_profile_leaves_the_error_to_the_gateway() -> None:
    models.preload("no-such-profile", [("ec2", REGION)])
    models.wait_for_preload()  # the preload's own failure is not raised
    with pytest.raises(UsageError, match="no-such-profile"):
        Aws(profile="no-such-profile")


def test_the_shared_loader_reads_the_same_models_as_botocores_own(tmp_path, monkeypatch) -> None:
    from botocore.loaders import Loader

    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))  # a loader of this test's own
    ours = _loader(Aws())
    assert isinstance(ours.file_loader, models.PlainJsonFileLoader)
    theirs = Loader(extra_search_paths=ours.search_paths[:1])  # botocore's JSON loader (OrderedDicts)
    for service in ("ec2", "ssm"):
        assert ours.load_service_model(service, "service-2") == theirs.load_service_model(service, "service-2")
    assert ours.load_data("endpoints") == theirs.load_data("endpoints")


def test_the_plain_loader_reads_json_and_gzip_and_says_none_for_neither(tmp_path) -> None:
    import gzip
    import json

    plain = models.PlainJsonFileLoader()
    (tmp_path / "a.json").write_text(json.dumps({"z": 1, "a": [1, {"b": None}]}))
    (tmp_path / "b.json.gz").write_bytes(gzip.compress(json.dumps({"k": "v"}).encode()))
    assert list(plain.load_file(str(tmp_path / "a")).items()) == [("z", 1), ("a", [1, {"b": None}])]  # order kept
    assert plain.load_file(str(tmp_path / "b")) == {"k": "v"}
    assert plain.load_file(str(tmp_path / "c")) is None
    assert plain.exists(str(tmp_path / "a")) and plain.exists(str(tmp_path / "b")) and not plain.exists(str(tmp_path / "c"))


def test_a_parsed_model_is_kept_out_of_the_collectors_walks(tmp_path) -> None:
    import gc
    import json

    (tmp_path / "big.json").write_text(json.dumps({f"shape{i}": {"members": {"a": {"shape": "b"}}} for i in range(2000)}))
    enabled, frozen = gc.isenabled(), gc.get_freeze_count()
    loaded = models.PlainJsonFileLoader().load_file(str(tmp_path / "big"))
    assert gc.get_freeze_count() >= frozen + 2000  # in the permanent generation: never walked again
    assert gc.isenabled() == enabled  # the collector is back as it was
    assert loaded["shape1999"]["members"]["a"]["shape"] == "b"


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
