"""prune --dry-run, fleet and clean-run --dry-run through AWS's throttling (issue 29): each fan-out
draws from the gateway's rate limiter, and a throttled answer is retried, never fatal.

Through the CLI in process against the emulator behind tests/faultproxy.py in token-bucket mode
at a twentieth of AWS's default rates (another tool in the account takes the rest): the gateway's
own buckets are at the documented defaults, so it is throttled and must retry. Each test asserts
the proxy throttled some calls, the command failed nothing, and its answer is the one it gives
unthrottled. (A scaled bucket holds at least one request: tests/faultproxy.py's `rate_limit`.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import boto3
import pytest

from amibuild.aws import rates
from amibuild.sandbox.fleet_seed import FleetSeed, seed_fleet
from conftest import run_cli
from faultproxy import FaultProxy
from test_cleanup import OTHER, PIPELINE, REGIONS, RUN, ami_flag, bake

SCALE = 0.05  # EC2 reads: 5 at once, 1 a second per API and region; SSM reads 2 / 2; the others 1 / 0.5


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    return tmp_path


@pytest.fixture
def proxy(sandbox, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    with FaultProxy(sandbox.endpoint, seed=29) as faults:
        monkeypatch.setenv("AWS_ENDPOINT_URL", faults.endpoint)
        rates.LIMITER.reset()  # a full budget at the gateway, as a fresh process has
        yield faults
        faults.clear()


@pytest.fixture
def published(sandbox, workdir: Path) -> dict[str, dict[str, str]]:
    """Three runs of ceph in both regions: two published in turn to recommended, one never."""
    made = {"old": bake(OTHER, fingerprint="fp0"), "new": bake(RUN), "spare": bake("20261201T110000Z-aaa111",
                                                                                  fingerprint="fp2")}
    for key in ("old", "new"):
        done = run_cli(workdir, "publish", "--variant", "ceph", "--ami", ami_flag(made[key]))
        assert done.returncode == 0, done.stderr
    for region in REGIONS:  # consumers, so fleet and the in-use check have launchers to read one by one
        seed_fleet(boto3.client("ec2").meta.endpoint_url, region, FleetSeed(
            launch_templates=tuple((f"lt-{n}", made["old" if n % 2 else "new"][region]) for n in range(8)),
            instances=((made["old"][region], 3, {}),)))
    return made


def throttled_through(proxy: FaultProxy, workdir: Path, *args: str):
    """`args` unthrottled, then again through the throttling proxy: both results, and the throttled count."""
    calm = run_cli(workdir, *args)
    assert calm.returncode == 0, calm.stderr
    mark = len(proxy.log)
    rates.LIMITER.reset()
    proxy.rate_limit(scale=SCALE)
    tight = run_cli(workdir, *args)
    proxy.clear()
    seen = proxy.log[mark:]
    throttled = [s for s in seen if s.outcome == "throttled"]
    return calm, tight, throttled, seen


def test_prune_fleet_and_clean_run_dry_runs_through_throttling_retry_and_fail_nothing(proxy, workdir, published):
    # one set-up for the three (seeding and publishing are most of the time)
    calm, tight, throttled, seen = throttled_through(proxy, workdir, "prune", "--keep", "1", "--keep-versions", "0",
                                                     "--dry-run", "--json")
    assert tight.returncode == 0, tight.stderr
    assert throttled, sorted({s.op for s in seen})
    assert {**json.loads(tight.stdout), "now": ""} == {**json.loads(calm.stdout), "now": ""}

    calm, tight, throttled, seen = throttled_through(proxy, workdir, "fleet", "--json")
    assert tight.returncode == 0, tight.stderr
    assert {"DescribeLaunchTemplateVersions"} & {s.op for s in throttled}, sorted({s.op for s in throttled})
    calm_view, tight_view = json.loads(calm.stdout), json.loads(tight.stdout)
    assert tight_view["consumers"] == calm_view["consumers"]
    assert len(tight_view["consumers"]) >= 2 * 8

    calm, tight, throttled, seen = throttled_through(proxy, workdir, "clean-run", "--run-id",
                                                     "20261201T110000Z-aaa111", "--dry-run", "--json")
    assert tight.returncode == 0, tight.stderr
    assert throttled, sorted({s.op for s in seen})
    assert json.loads(tight.stdout) == json.loads(calm.stdout)
