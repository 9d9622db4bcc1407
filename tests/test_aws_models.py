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
