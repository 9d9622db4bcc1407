"""test-ami boots the build region's image and names the other regions' images in its signed test
statement and tags only where the booted image's signed provenance names them as they are today:
a channel whose second region holds another build, and an image with a hand-copied
``amibuild:fingerprint`` tag, are left out (and said), while the build's own copy is still named.
Signed builds are made with `tests.statements` against the emulator (no Packer)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import boto3

from amibuild.attest import store
from conftest import run_cli

PIPELINE = """\
pipeline {
  name    = "tap"
  regions = ["us-west-2", "eu-west-1", "us-east-1"]
}

variant "ceph" {}
"""


def _test_tag(region: str, ami: str) -> str | None:
    found = boto3.client("ec2", region_name=region).describe_images(ImageIds=[ami])["Images"][0].get("Tags", [])
    return next((t["Value"] for t in found if t["Key"] == "amibuild:test"), None)


def _record(tmp_path: Path) -> dict:
    return json.loads(next((tmp_path / "build" / "tests").glob("*/ceph.json")).read_text())


def test_a_channel_holding_another_build_in_a_second_region_gets_no_test_statement_there(tmp_path: Path, sandbox):
    """The channel holds one build in us-west-2 and us-east-1 and another build in eu-west-1: only the
    booted build's images are named (its copy in us-east-1 too), and the left-out region is said."""
    from tests import statements

    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    first = statements.build("tap", "ceph", ["us-west-2", "us-east-1"], test=None)
    other = statements.build("tap", "ceph", ["eu-west-1"], test=None)
    held = {**first, **other}
    for region, ami in held.items():
        boto3.client("ssm", region_name=region).put_parameter(
            Name="/amibuild/tap/1.35/ceph/recommended/image_id", Value=ami, Type="String", DataType="aws:ec2:image")

    done = run_cli(tmp_path, "test-ami", "--variant", "ceph", "--channel", "recommended", "--json", binary="amibuild")

    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["image_id"] == first["us-west-2"]
    assert sorted(out["tagged"]) == sorted(f"{r}:{a}" for r, a in first.items())
    assert _test_tag("eu-west-1", other["eu-west-1"]) is None
    keys = _record(tmp_path)["statement"]["keys"]
    assert sorted(keys) == sorted(store.statement_key("tap", a, "test", out["run_id"]) for a in first.values())
    left = [n for n in out["notes"] if other["eu-west-1"] in n]
    assert len(left) == 1 and "eu-west-1" in left[0] and "not named by the signed provenance" in left[0], out["notes"]


def test_an_image_with_a_hand_copied_fingerprint_tag_is_not_named(tmp_path: Path, sandbox):
    """--ami finds copies by their amibuild:fingerprint tag; one that carries the tag but that the
    booted image's signed provenance does not name gets neither the tag nor the statement."""
    from tests import statements

    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    fingerprint = uuid.uuid4().hex
    built = statements.images("ceph", ["us-west-2"], fingerprint=fingerprint, pipeline="tap")
    statements.provenance("tap", "ceph", built, fingerprint=fingerprint)
    copied = statements.images("ceph", ["eu-west-1"], fingerprint=fingerprint, pipeline="tap")  # the tag set by hand

    done = run_cli(tmp_path, "test-ami", "--variant", "ceph", "--ami", built["us-west-2"], binary="amibuild")

    assert done.returncode == 0, done.stderr
    record = _record(tmp_path)
    assert record["tagged"] == [f"us-west-2:{built['us-west-2']}"]
    assert _test_tag("eu-west-1", copied["eu-west-1"]) is None
    assert record["statement"]["keys"] == [store.statement_key("tap", built["us-west-2"], "test", record["run_id"])]
    said = [line for line in done.stdout.splitlines() if copied["eu-west-1"] in line]
    assert len(said) == 1 and "eu-west-1" in said[0] and "not named by the signed provenance" in said[0], done.stdout


def test_the_build_s_own_copy_in_another_region_is_still_named(tmp_path: Path, sandbox):
    from tests import statements

    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    built = statements.build("tap", "ceph", ["us-west-2", "eu-west-1"], test=None)

    done = run_cli(tmp_path, "test-ami", "--variant", "ceph", "--ami", built["us-west-2"], "--json", binary="amibuild")

    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert sorted(out["tagged"]) == sorted(f"{r}:{a}" for r, a in built.items())
    assert all(_test_tag(r, a) == out["tag"] for r, a in built.items())
    keys = _record(tmp_path)["statement"]["keys"]
    assert sorted(keys) == sorted(store.statement_key("tap", a, "test", out["run_id"]) for a in built.values())
    assert not any("not named" in n or "provenance" in n for n in out["notes"]), out["notes"]


def test_a_tested_image_without_signed_provenance_names_only_itself_and_says_why(tmp_path: Path, sandbox):
    from tests import statements

    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    built = statements.build("tap", "ceph", ["us-west-2", "eu-west-1"], test=None, signed_provenance=False)

    done = run_cli(tmp_path, "test-ami", "--variant", "ceph", "--ami", built["us-west-2"], "--json", binary="amibuild")

    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["tagged"] == [f"us-west-2:{built['us-west-2']}"]
    assert _test_tag("eu-west-1", built["eu-west-1"]) is None
    left = [n for n in out["notes"] if built["eu-west-1"] in n]
    assert len(left) == 1 and "eu-west-1" in left[0] and "no provenance statement names it" in left[0], out["notes"]


def test_a_pipeline_that_does_not_sign_still_tags_the_copies_its_tags_find(tmp_path: Path, sandbox):
    """No key: nothing signed vouches for any image and no gate takes a tag, so the copies are found
    by their fingerprint tag as before, and no provenance is read."""
    from tests import statements

    (tmp_path / "amibuild.hcl").write_text(PIPELINE.replace('"us-east-1"]\n', '"us-east-1"]\n  attestation {\n'
                                                            '    kms_key = ""\n  }\n'))
    built = statements.images("ceph", ["us-west-2", "eu-west-1"], pipeline="tap")

    done = run_cli(tmp_path, "test-ami", "--variant", "ceph", "--ami", built["us-west-2"], "--json", binary="amibuild")

    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert "statements are unsigned" in done.stderr, done.stderr
    assert sorted(out["tagged"]) == sorted(f"{r}:{a}" for r, a in built.items())
    assert not any("left out" in n for n in out["notes"]), out["notes"]


def test_the_choice_of_images_is_a_pure_function_of_the_signed_provenance_and_the_images_today():
    from amibuild.attest.statement import ImageFacts
    from amibuild.aws import Image
    from amibuild.jobs.ami_test import named_by_provenance

    def image(ami: str, region: str, snapshot: str) -> Image:
        return Image(ami, region, "n", "available", {}, "", (snapshot,))

    account = "123456789012"
    today = {"us-west-2": image("ami-1", "us-west-2", "snap-1"), "eu-west-1": image("ami-2", "eu-west-1", "snap-2"),
             "us-east-1": image("ami-3", "us-east-1", "snap-3b"), "ap-southeast-2": None}
    signed = [ImageFacts("ami-1", "us-west-2", ("snap-1",)), ImageFacts("ami-2", "eu-west-1", ("snap-2",)),
              ImageFacts("ami-3", "us-east-1", ("snap-3",))]  # ami-3's snapshot was replaced since it was signed
    built = {f.arn(account): f.digest for f in signed}
    amis = {"us-west-2": "ami-1", "eu-west-1": "ami-2", "us-east-1": "ami-3", "ap-southeast-2": "ami-4"}

    kept, left = named_by_provenance(amis, "us-west-2", built=built, why="", images=today, account=account)

    assert kept == {"us-west-2": "ami-1", "eu-west-1": "ami-2"}
    assert left == ("ami-4 in ap-southeast-2 left out (not tagged, not in the test statement): it does not exist",
                    "ami-3 in us-east-1 left out (not tagged, not in the test statement): not named by the signed "
                    "provenance of the tested image ami-1 (another build, or changed since it was signed)")
    kept, left = named_by_provenance(amis, "us-west-2", built=None, why="unsigned", images=today, account=account)
    assert kept == {"us-west-2": "ami-1"} and len(left) == 3
    assert all("the tested image ami-1 has no valid signed provenance: unsigned" in line for line in left)


def test_run_id_names_no_image_that_only_carries_the_run_s_tags(tmp_path: Path, sandbox):
    """--run-id finds the run's images by their run-id and variant tags; one with the tags copied by
    hand, that the booted image's signed provenance does not name, is left out."""
    from tests import statements

    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    fingerprint = uuid.uuid4().hex
    built = statements.images("ceph", ["us-west-2", "us-east-1"], fingerprint=fingerprint, pipeline="tap")
    statements.provenance("tap", "ceph", built, fingerprint=fingerprint)
    copied = statements.images("ceph", ["eu-west-1"], fingerprint=fingerprint, pipeline="tap")  # the run's tags, by hand

    done = run_cli(tmp_path, "test-ami", "--variant", "ceph", "--run-id", f"run-{fingerprint[:6]}", "--json",
                   binary="amibuild")

    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert sorted(out["tagged"]) == sorted(f"{r}:{a}" for r, a in built.items())
    assert _test_tag("eu-west-1", copied["eu-west-1"]) is None
    left = [n for n in out["notes"] if copied["eu-west-1"] in n]
    assert len(left) == 1 and "eu-west-1" in left[0] and "not named by the signed provenance" in left[0], out["notes"]
