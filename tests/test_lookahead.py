"""build-ami looks up the images of the last runs' fingerprints while it renders (amibuild.bake.lookahead).

The pure parts as tables; the guess read from run records; and the command against the emulator,
its DescribeImages counted on the wire by tests/recorder.py: one per region when nothing changed,
one more (for the new fingerprints only) when something did, and a failed early lookup asked
again rather than reported.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from amibuild.aws import Image
from amibuild.bake import lookahead
from amibuild.bake import record as records
from conftest import run_cli
from recorder import Recorder
import test_build_e2e
from test_build_e2e import PIPELINE

workdir = test_build_e2e.workdir  # the fixture: a pipeline folder and a packer wrapper that logs its calls

REGIONS = ("us-west-2", "eu-west-1")


def image(image_id: str, fingerprint: str) -> Image:
    return Image(image_id=image_id, region="us-west-2", name=image_id, state="available",
                 creation_date="2026-01-01T00:00:00.000Z", tags={"amibuild:fingerprint": fingerprint})


@pytest.mark.parametrize(("needed", "asked", "left"), [
    (["a", "b"], ["a", "b"], []),  # nothing changed: nothing more to ask
    (["a", "c"], ["a", "b"], ["c"]),  # one variant changed: only its new fingerprint
    (["b", "a", "a"], [], ["a", "b"]),  # no guess: all of them, each once, sorted
    ([], ["a"], []),
])
def test_unasked_is_what_the_early_lookup_did_not_ask_for(needed, asked, left) -> None:
    assert lookahead.unasked(needed, asked) == left


def test_joined_keeps_each_image_once_per_region() -> None:
    a, b, c = image("ami-a", "fa"), image("ami-b", "fb"), image("ami-c", "fc")
    assert lookahead.joined({"us-west-2": [a, b]}, {"us-west-2": [b, c], "eu-west-1": [c]}, {}) == {
        "us-west-2": [a, b, c], "eu-west-1": [c]}
    assert lookahead.joined() == {}


def write_run(build_dir: Path, run_id: str, variants: dict[str, str]) -> None:
    records.write_record(records.record_path(build_dir, run_id), {
        "run_id": run_id, "state": "finished",
        "variants": [{"name": name, "fingerprint": fp} for name, fp in variants.items()]})


def test_the_guess_is_each_variants_newest_fingerprint_in_the_newest_records(tmp_path: Path) -> None:
    assert lookahead.recent_fingerprints(tmp_path / "nothing-here", ["ceph"]) == ()
    write_run(tmp_path, "20260101T000000Z-aaaaaa", {"ceph": "old-ceph", "arm": "old-arm", "gone": "x"})
    write_run(tmp_path, "20260102T000000Z-bbbbbb", {"ceph": "new-ceph"})  # a run of one variant
    (records.runs_folder(tmp_path) / "20260103T000000Z-cccccc.json").write_text("{not json")
    assert lookahead.recent_fingerprints(tmp_path, ["ceph", "arm"]) == ("new-ceph", "old-arm")
    assert lookahead.recent_fingerprints(tmp_path, ["other"]) == ()  # names of another pipeline: no guess


def test_records_past_the_newest_few_are_not_read(tmp_path: Path) -> None:
    write_run(tmp_path, "20260101T000000Z-aaaaaa", {"arm": "oldest"})
    for day in range(2, 2 + lookahead.RECORDS_READ):
        write_run(tmp_path, f"202601{day:02d}T000000Z-bbbbbb", {"ceph": f"ceph-{day}"})
    assert lookahead.recent_fingerprints(tmp_path, ["ceph", "arm"]) == (f"ceph-{1 + lookahead.RECORDS_READ}",)


# ------------------------------------------------------------------------------- against the emulator

pytestmark_packer = pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")


def plan(folder: Path, recorder: Recorder) -> dict[str, str]:
    """`build-ami --dry-run --json` through the recorder: {variant: decision}."""
    result = run_cli(folder, "build-ami", "--dry-run", "--json", env={"AWS_ENDPOINT_URL": recorder.endpoint})
    assert result.returncode == 0, result.stderr
    return {v["name"]: v["decision"] for v in json.loads(result.stdout)["variants"]}


def describes(recorder: Recorder) -> dict[str, int]:
    return {region: sum(1 for c in recorder.calls if c.operation == "DescribeImages" and c.region == region)
            for region in REGIONS}


@pytestmark_packer
def test_describe_images_once_per_region_unless_a_fingerprint_changed(workdir: Path, sandbox) -> None:
    with Recorder(sandbox.endpoint) as recorder:
        assert plan(workdir, recorder) == {"ceph": "build", "arm": "build"}
        assert describes(recorder) == {"us-west-2": 1, "eu-west-1": 1}  # no run record: no guess, one lookup

        built = run_cli(workdir, "build-ami", "--json", "--no-publish", env={"AWS_ENDPOINT_URL": recorder.endpoint})
        assert built.returncode == 0, built.stderr

        recorder.forget()
        assert plan(workdir, recorder) == {"ceph": "skip", "arm": "skip"}
        assert describes(recorder) == {"us-west-2": 1, "eu-west-1": 1}  # the guess was right: nothing more asked

        (workdir / "amibuild.hcl").write_text(PIPELINE.replace('arch = "arm64"', 'arch = "arm64"\n  extra_packages = ["jq"]'))
        recorder.forget()
        assert plan(workdir, recorder) == {"ceph": "skip", "arm": "build"}  # the old arm image is not taken
        assert describes(recorder) == {"us-west-2": 2, "eu-west-1": 2}  # the guess, then arm's new fingerprint


@pytestmark_packer
def test_a_failed_early_lookup_is_asked_again_and_a_lasting_failure_is_reported(workdir: Path, sandbox) -> None:
    with Recorder(sandbox.endpoint) as recorder:
        built = run_cli(workdir, "build-ami", "--json", "--no-publish", env={"AWS_ENDPOINT_URL": recorder.endpoint})
        assert built.returncode == 0, built.stderr

        recorder.forget()
        recorder.refuse("DescribeImages", "eu-west-1", code="UnauthorizedOperation", message="not now", times=1)
        assert plan(workdir, recorder) == {"ceph": "skip", "arm": "skip"}
        assert describes(recorder) == {"us-west-2": 2, "eu-west-1": 2}  # all of them asked again, after the render

        recorder.refuse("DescribeImages", "eu-west-1", code="UnauthorizedOperation", message="not allowed")
        runs = sorted(os.listdir(records.runs_folder(workdir / "build")))
        failed = run_cli(workdir, "build-ami", "--dry-run", env={"AWS_ENDPOINT_URL": recorder.endpoint})
        assert failed.returncode == 1
        assert failed.stderr.strip().splitlines()[-1] == (
            "amibuild: error: ec2:DescribeImages in eu-west-1: access denied (UnauthorizedOperation); the credentials "
            "need permission for ec2:DescribeImages"), failed.stderr
        assert sorted(os.listdir(records.runs_folder(workdir / "build"))) == runs  # refused before any record
