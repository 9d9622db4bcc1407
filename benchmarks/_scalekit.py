"""What the organisation-scale benchmarks share: an emulator behind the token-bucket proxy, a
pipeline of many variants, tagged images made straight on the emulator, and a timed run of
amibuild's work in a child process, set beside its lower bound (`_ratebound.bound_rows`).

The work runs in a child (spawned: a fresh interpreter, as a user's `invoke` is) so that the proxy,
a Python forwarder standing in for AWS's servers, does not share amibuild's interpreter lock; on
AWS the throttling is done on other machines. The child reports its own wall, from just before the
work to just after (its imports and the gateway's clients made untimed, `warm`, their time
printed), and the gateway's throttled retries.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from benchmarks._ratebound import bound_rows
from benchmarks.common import Row

START_TIMEOUT = 300.0  # seconds
ROOT = Path(__file__).resolve().parent.parent
PIPELINE = """
pipeline {{
  name       = "scale"
  ssm_prefix = "/amibuild"
  regions    = ["{first}"]
  copy_to    = [{copies}]
}}
{variants}
"""


@dataclass
class Scale:
    sandbox: Any
    proxy: Any
    path: Path  # the pipeline file
    regions: tuple[str, ...]


@contextlib.contextmanager
def rate_limited(regions: Sequence[str], variants: Sequence[str]) -> Iterator[Scale]:
    """An emulator, the proxy before it (not yet limiting) and a pipeline file of `variants`
    building in regions[0] and copying to the rest; the environment put back afterwards."""
    from amibuild.sandbox import Sandbox

    sys.path.insert(0, str(ROOT / "tests"))
    from faultproxy import FaultProxy

    saved = dict(os.environ)
    # a generous start: on the shared machine at load 20 the emulator took over a minute to come up
    sandbox = Sandbox().start(timeout=START_TIMEOUT)
    with contextlib.closing(_Stopping(sandbox)), FaultProxy(sandbox.endpoint) as proxy, \
            tempfile.TemporaryDirectory(prefix="amibuild-bench-") as scratch:
        try:
            os.environ.update(sandbox.env())
            path = Path(scratch, "amibuild.hcl")
            path.write_text(PIPELINE.format(first=regions[0], copies=", ".join(f'"{r}"' for r in regions[1:]),
                                            variants="\n".join(f'variant "{n}" {{}}' for n in variants)))
            yield Scale(sandbox, proxy, path, tuple(regions))
        finally:
            os.environ.clear()
            os.environ.update(saved)


def make_images(scale: Scale, wanted: Callable[[int, str], Iterable[tuple[str, str, dict[str, str]]]]
                ) -> dict[str, dict[str, str]]:
    """Per region, the images `wanted(index, region)` names as (key, image name, tags), made from
    one instance straight on the emulator, a thread per region; region -> key -> image id."""
    import boto3

    from amibuild.sandbox import seed_images

    source = seed_images()[0].image_id

    def region_images(index: int) -> dict[str, str]:
        region = scale.regions[index]
        ec2 = boto3.client("ec2", region_name=region, endpoint_url=scale.sandbox.endpoint)
        instance = ec2.run_instances(ImageId=source, MinCount=1, MaxCount=1, InstanceType="m5.large")
        made = {}
        for key, name, tags in wanted(index, region):
            made[key] = ec2.create_image(
                InstanceId=instance["Instances"][0]["InstanceId"], Name=name,
                TagSpecifications=[{"ResourceType": "image",
                                    "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}])["ImageId"]
        return made

    with ThreadPoolExecutor(max_workers=len(scale.regions)) as pool:
        return dict(zip(scale.regions, pool.map(region_images, range(len(scale.regions))), strict=True))


def timed(label: str, scale: Scale, work: Callable[..., tuple[float, float, list[str], int, list[str]]],
          args: tuple, cells: int, cell: str) -> tuple[list[Row], list[str]]:
    """Run `work(*args)` in a spawned child through the rate-limiting proxy; its rows beside the
    bound, and its notes. `work` is a module-level function returning (start, wall, failures,
    throttled retries, notes), `start` on the machine's monotonic clock."""
    scale.proxy.record()
    mark = len(scale.proxy.log)
    environment = dict(os.environ, AWS_ENDPOINT_URL=scale.proxy.endpoint)
    with _environment(environment), multiprocessing.get_context("spawn").Pool(1) as pool:
        start, wall, failures, retried, notes = pool.apply(work, args)
    rows = bound_rows(label, wall, scale.proxy, mark, retried, failures, cells, scale.sandbox.endpoint, start, cell)
    return rows, [f"{label}: {n}" for n in notes + failures[:3]]


class _Stopping:
    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox

    def close(self) -> None:
        self.sandbox.stop()


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def warm(aws: Any, services: Sequence[str], regions: Sequence[str]) -> str:
    """Make the gateway's clients before the clock starts (botocore parses each service's model
    once per process, seconds on this loaded machine); a note saying what that took."""
    start = time.monotonic()
    for service in services:
        for region in regions:
            aws.client(service, region)
    return f"gateway start-up (clients for {', '.join(services)} in {len(regions)} regions): " \
           f"{time.monotonic() - start:.1f} s, before the timed work"
