"""Channel gates (`channel "stable" { from, requires, soak }`): the pure decision, and publish /
promote / `promote --due` refusing or promoting against the local emulator over real HTTP.

The soak is measured on AWS's clock, never slept: the emulator stamps each parameter version and
each answer's Date header with its own clock, and the tests move that clock an hour or four days
on (`Sandbox.advance_clock`). `--now` is for a dry run's what-if plan only; a write with it exits 2.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import boto3
import pytest

from amibuild.aws import Aws, Image, Parameter
from amibuild.channels import due, gates, publish
from amibuild.channels.gates import Evidence
from amibuild.errors import GateRefused, PublishFailed, SpecError
from amibuild.pipeline import imagetests, load
from amibuild.sandbox import Sandbox
from tests import statements

ROOT = Path(__file__).resolve().parent.parent
REGIONS = ("us-west-2", "eu-west-1")
PIPELINE = """
pipeline {
  name    = "eks-workers"
  regions = ["us-west-2"]
  copy_to = ["eu-west-1"]
}
channel "stable" {
  from     = "recommended"
  requires = ["tested"]
  soak     = "72h"
}
channel "candidate" {
  requires = ["tested"]
}
variant "ceph" {
  extra_packages = ["ceph-common"]
}
variant "plain" {
}
"""
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
STABLE = imagetests.Gate("stable", "recommended", ("tested",), 72 * 3600.0)


def image(tag: str | None = None, region: str = "us-west-2", ami: str = "ami-0123456789abcdef0") -> Image:
    """An image as DescribeImages shows it; ``tag``: a hand-set amibuild:test tag (it decides nothing)."""
    tags = {"amibuild:test": tag} if tag else {}
    return Image(ami, region, "x", "available", tags, "")


def proof(test: str | None, provenance: str = "") -> Evidence:
    """What the signed statements prove: a test verdict (None: no valid test statement), provenance "" valid."""
    return Evidence(provenance=provenance, test=test or "", test_problem="" if test else "no signed test statement")


def version(value: str, n: int, at: datetime, note: str = "") -> Parameter:
    return Parameter("/p", "us-west-2", value, n, "aws:ec2:image", at, note)


# ------------------------------------------------------------------------------- the decision (pure)

ONE = [version("ami-0123456789abcdef0", 1, T0)]
FOREIGN = "no provenance statement names it: this pipeline did not build it (a foreign image)"


@pytest.mark.parametrize("case, proofs, came_from, history, now, missing", [
    ("met", {"us-west-2": proof("passed")}, "recommended", ONE, T0 + timedelta(hours=73), []),
    ("direct publish", {"us-west-2": proof("passed")}, None, [], T0, ["images enter only from channel recommended"]),
    ("from elsewhere", {"us-west-2": proof("passed")}, "beta", [], T0, ["images enter only from channel recommended"]),
    ("untested", {"us-west-2": proof(None)}, "recommended", ONE, T0 + timedelta(days=9),
     ["requires tested", "us-west-2: ami-0123456789abcdef0: no signed test statement"]),
    ("failed", {"us-west-2": proof("failed")}, "recommended", ONE, T0 + timedelta(days=9),
     ["requires tested", "us-west-2: ami-0123456789abcdef0: its signed test statement says failed"]),
    ("one region untested", {"us-west-2": proof("passed"), "eu-west-1": proof(None)}, "recommended", ONE,
     T0 + timedelta(days=9), ["eu-west-1: ami-0123456789abcdef0: no signed test statement"]),
    ("foreign", {"us-west-2": proof("passed", provenance=FOREIGN)}, "recommended", ONE, T0 + timedelta(days=9),
     ["has no valid provenance from this pipeline (no provenance statement", "foreign image"]),
    ("unsigned", {"us-west-2": proof(None, provenance="unsigned: the statement carries no signature")},
     "recommended", ONE, T0 + timedelta(days=9), ["no valid provenance from this pipeline (unsigned"]),
    ("statements never read", {"us-west-2": None}, "recommended", ONE, T0 + timedelta(days=9),
     ["no signed statements were read"]),
    ("not soaked", {"us-west-2": proof("passed")}, "recommended", ONE, T0 + timedelta(hours=1),
     ["soak 3d", "due at 2026-12-04 12:00 UTC"]),
    ("rolled back and forward again: the soak starts again", {"us-west-2": proof("passed")}, "recommended",
     [version("ami-0123456789abcdef0", 1, T0), version("ami-0fffffffffffffff0", 2, T0 + timedelta(hours=1)),
      version("ami-0123456789abcdef0", 3, T0 + timedelta(hours=2), "rolled back to version 1")],
     T0 + timedelta(hours=73), ["soak 3d", "due at 2026-12-04 14:00 UTC"]),
    ("no longer in from", {"us-west-2": proof("passed")}, "recommended",
     [version("ami-0123456789abcdef0", 1, T0), version("ami-0fffffffffffffff0", 2, T0 + timedelta(hours=1))],
     T0 + timedelta(days=9), ["is not in recommended now"]),
])
def test_the_gate_decision_names_what_is_missing(case, proofs, came_from, history, now, missing):
    images = {r: image("passed", r) for r in proofs}  # every image hand-tagged passed: the tag decides nothing
    decision = gates.decide(STABLE, images=images, came_from=came_from, evidence=proofs,
                            source_history={r: history for r in images}, now=now)
    text = "; ".join(decision.missing)
    assert decision.met == (not missing), (case, text)
    for part in missing:
        assert part in text, (case, text)


def test_a_hand_set_tag_alone_is_named_as_deciding_nothing():
    decision = gates.decide(STABLE, images={"us-west-2": image("passed")}, came_from="recommended",
                            evidence={"us-west-2": proof(None)}, source_history={"us-west-2": ONE},
                            now=T0 + timedelta(days=9))
    assert "its amibuild:test tag says passed, but a tag decides nothing" in decision.missing[0]


def test_without_aws_time_the_soak_is_not_judged_met():
    decision = gates.decide(STABLE, images={"us-west-2": image()}, came_from="recommended",
                            evidence={"us-west-2": proof("passed")}, source_history={"us-west-2": ONE}, now=None)
    assert not decision.met and "no Date header" in decision.missing[0]
    assert gates.aws_time([None, T0 + timedelta(seconds=2), T0]) == T0  # the earliest answer: never early
    assert gates.aws_time([None]) is None


def test_only_a_soak_left_says_when_it_is_due():
    soaking = gates.decide(STABLE, images={"us-west-2": image()}, came_from="recommended",
                           evidence={"us-west-2": proof("passed")}, source_history={"us-west-2": ONE},
                           now=T0 + timedelta(hours=1))
    assert soaking.due_at == T0 + timedelta(hours=72)
    untested = gates.decide(STABLE, images={"us-west-2": image()}, came_from="recommended",
                            evidence={"us-west-2": proof(None)}, source_history={"us-west-2": ONE},
                            now=T0 + timedelta(hours=1))
    assert untested.due_at is None  # a test result does not come by waiting


def test_the_soak_says_its_times_in_utc_whatever_zone_the_history_dates_come_in():
    # botocore gives LastModifiedDate in the machine's local zone (tzlocal); the same instants here at UTC+2
    local = timezone(timedelta(hours=2))
    soaking = gates.decide(STABLE, images={"us-west-2": image()}, came_from="recommended",
                           evidence={"us-west-2": proof("passed")},
                           source_history={"us-west-2": [version("ami-0123456789abcdef0", 1, T0.astimezone(local))]},
                           now=T0 + timedelta(hours=1))
    assert "(since 2026-12-01 12:00 UTC); due at 2026-12-04 12:00 UTC, in 2d 23h" in soaking.missing[0]
    assert soaking.due_at == T0 + timedelta(hours=72) and soaking.due_at.utcoffset() == timedelta(0)


def test_the_gateway_gives_a_parameters_date_in_utc_whatever_zone_botocore_dated_it_in():
    # every reader of a channel's dates (gates, fleet, history, the CI summary) gets the same instant in UTC
    from amibuild.aws.ssm import _parameter

    local = T0.astimezone(timezone(timedelta(hours=2)))
    read = _parameter({"Name": "/p", "Value": "ami-1", "Version": 1, "LastModifiedDate": local}, "us-west-2")
    assert read.last_modified == T0 and read.last_modified.utcoffset() == timedelta(0)


def test_an_override_passes_an_unmet_gate_and_says_why_in_the_history_note():
    decision = gates.decide(STABLE, images={"us-west-2": image()}, came_from=None, now=T0, override="CVE fix",
                            evidence={"us-west-2": proof(None)})
    assert not decision.met and decision.passes
    assert decision.note() == "gate overridden: CVE fix"
    assert gates.decide(STABLE, images={"us-west-2": image()}, came_from="recommended",
                        evidence={"us-west-2": proof("passed")}, source_history={"us-west-2": ONE},
                        now=T0 + timedelta(days=4), override="x").note() == ""  # a met gate is not an override


@pytest.mark.parametrize("override, reason, complaint", [
    (True, None, "--override-gate needs --reason"),
    (True, "  ", "--override-gate needs --reason"),
    (False, "because", "--reason is for --override-gate"),
    (True, "two\nlines", "one line"),
    (True, "x" * 201, "at most 200"),
])
def test_override_reasons_are_checked_as_bad_input(override, reason, complaint):
    with pytest.raises(SpecError, match=complaint):
        gates.check_reason(override, reason)


@pytest.mark.parametrize("block, complaint", [
    ('channel "stable" {\n  from = "stable"\n}', "names the channel itself"),
    ('channel "stable" {\n  requires = ["soaked"]\n}', "requires 'soaked' is not known"),
    ('channel "stable" {\n  soak = "72h"\n}', "set from too"),
    ('channel "stable" {\n  from = "recommended"\n  soak = "three days"\n}', "is not a duration"),
    ('channel "stable" {\n  form = "recommended"\n}', "unknown field `form` (did you mean 'from'?)"),
])
def test_a_bad_gate_is_refused_at_load_naming_the_block(tmp_path: Path, block: str, complaint: str):
    path = tmp_path / "amibuild.hcl"
    path.write_text(f'{block}\nvariant "a" {{\n}}\n')
    with pytest.raises(SpecError, match="channel \"stable\"") as caught:
        load(path)
    assert complaint in str(caught.value)


# ------------------------------------------------------------------------------- against the emulator


@pytest.fixture
def pipeline(tmp_path: Path):
    path = tmp_path / "amibuild.hcl"
    path.write_text(PIPELINE)
    return load(path)


def build(variant: str, test: str | None = "passed", **how) -> dict[str, str]:
    """An image per region as a build leaves it: its signed provenance and, with ``test``, the boot
    test's signed verdict (`tests/statements.py`)."""
    return statements.build("eks-workers", variant, REGIONS, test, **how)


def channel_values(variant: str, channel: str, region: str = "us-west-2") -> list[tuple[str, str]]:
    ssm = boto3.client("ssm", region_name=region)
    name = f"/amibuild/eks-workers/1.35/{variant}/{channel}/image_id"
    try:
        history = ssm.get_parameter_history(Name=name)["Parameters"]
    except ssm.exceptions.ParameterNotFound:
        return []
    return [(p["Value"], p.get("Description", "")) for p in history]


def variant_of(pipeline, name):
    return next(v for v in pipeline.variants if v.name == name)


HOUR, FOUR_DAYS = 3600 + 30, 4 * 86400  # the Date header has whole seconds: a margin over the hour


def later() -> datetime:
    return datetime.now(timezone.utc) + timedelta(days=4)


def test_a_direct_publish_to_a_gated_channel_is_refused_naming_the_gate(sandbox: Sandbox, pipeline):
    aws, ceph = Aws(region="us-west-2"), variant_of(pipeline, "ceph")
    amis = build("ceph", "passed")
    with pytest.raises(GateRefused, match=r"channel stable is gated \(from recommended, tested, soak 3d\): "
                                          r"images enter only from channel recommended"):
        publish.publish_variant(aws, pipeline=pipeline, variant=ceph, amis=amis, channel="stable")
    assert channel_values("ceph", "stable") == []


def test_promote_refuses_an_untested_or_failed_image_and_one_not_soaked(sandbox: Sandbox, pipeline):
    aws = Aws(region="us-west-2")
    for name, test in (("ceph", None), ("plain", "failed")):
        variant = variant_of(pipeline, name)
        publish.publish_variant(aws, pipeline=pipeline, variant=variant, amis=build(name, test), channel="recommended")
        with pytest.raises(GateRefused, match="requires tested") as caught:
            publish.promote(aws, pipeline=pipeline, variant=variant, source="recommended", target="stable")
        assert ("no signed test statement" if test is None else "its signed test statement says failed") \
            in str(caught.value)
        assert channel_values(name, "stable", "eu-west-1") == []
    ceph = variant_of(pipeline, "ceph")
    amis = build("ceph", "passed")
    publish.publish_variant(aws, pipeline=pipeline, variant=ceph, amis=amis, channel="recommended")
    sandbox.advance_clock(HOUR)  # AWS's clock, not --now
    with pytest.raises(GateRefused, match=r"soak 3d: .* has been in recommended for 1h"):
        publish.promote(aws, pipeline=pipeline, variant=ceph, source="recommended", target="stable")
    assert channel_values("ceph", "stable") == []
    sandbox.advance_clock(FOUR_DAYS)
    publish.promote(aws, pipeline=pipeline, variant=ceph, source="recommended", target="stable")
    assert [v for v, _ in channel_values("ceph", "stable", "eu-west-1")] == [amis["eu-west-1"]]


def test_a_gate_without_from_takes_a_tested_image_published_directly(sandbox: Sandbox, pipeline):
    aws, ceph = Aws(region="us-west-2"), variant_of(pipeline, "ceph")
    with pytest.raises(GateRefused, match="requires tested"):
        publish.publish_variant(aws, pipeline=pipeline, variant=ceph, amis=build("ceph", None), channel="candidate")
    amis = build("ceph", "passed")
    publish.publish_variant(aws, pipeline=pipeline, variant=ceph, amis=amis, channel="candidate")
    assert [v for v, _ in channel_values("ceph", "candidate")] == [amis["us-west-2"]]


def test_override_gate_writes_and_keeps_its_reason_in_the_channel_history(sandbox: Sandbox, pipeline):
    aws, ceph = Aws(region="us-west-2"), variant_of(pipeline, "ceph")
    amis = build("ceph", None)
    publish.publish_variant(aws, pipeline=pipeline, variant=ceph, amis=amis, channel="recommended")
    publish.promote(aws, pipeline=pipeline, variant=ceph, source="recommended", target="stable",
                    override_gate="hotfix for CVE-2026-1234")
    for region in REGIONS:
        ((value, description),) = channel_values("ceph", "stable", region)
        assert value == amis[region]
        assert "gate overridden: hotfix for CVE-2026-1234" in description
        assert "promoted from recommended" in description


def test_promote_due_promotes_exactly_the_channels_that_are_due(sandbox: Sandbox, pipeline):
    aws = Aws(region="us-west-2")
    ready, untested = build("ceph", "passed"), build("plain", None)
    publish.publish_variant(aws, pipeline=pipeline, variant=variant_of(pipeline, "ceph"), amis=ready)
    publish.publish_variant(aws, pipeline=pipeline, variant=variant_of(pipeline, "plain"), amis=untested)

    sandbox.advance_clock(HOUR)
    early = due.promote_due(aws, pipeline)
    assert [(i.variant, i.channel, i.action) for i in early] == [("ceph", "stable", due.DueAction.WAIT),
                                                                ("plain", "stable", due.DueAction.WAIT)]
    assert early[0].due_at is not None and early[1].due_at is None
    assert channel_values("ceph", "stable") == [] and channel_values("plain", "stable") == []

    sandbox.advance_clock(FOUR_DAYS)
    done = due.promote_due(aws, pipeline)
    assert [(i.variant, i.action) for i in done] == [("ceph", due.DueAction.PROMOTED), ("plain", due.DueAction.WAIT)]
    assert [v for v, _ in channel_values("ceph", "stable", "eu-west-1")] == [ready["eu-west-1"]]
    assert channel_values("plain", "stable") == []
    again = due.promote_due(aws, pipeline)
    assert [i.action for i in again] == [due.DueAction.CURRENT, due.DueAction.WAIT]


def test_the_cli_soak_follows_aws_clock_and_now_only_plans(sandbox: Sandbox, pipeline, tmp_path: Path, cli):
    aws = Aws(region="us-west-2")
    ready = build("ceph", "passed")
    publish.publish_variant(aws, pipeline=pipeline, variant=variant_of(pipeline, "ceph"), amis=ready)
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    sandbox.advance_clock(HOUR)

    refused = cli(tmp_path, "promote", "--variant", "ceph", "--from", "recommended", "--to", "stable")
    assert refused.returncode == 1, refused.stderr
    assert "channel stable is gated" in refused.stderr and "soak 3d" in refused.stderr
    waits = cli(tmp_path, "promote", "--due")
    assert waits.returncode == 0, waits.stderr
    assert "ceph recommended -> stable: waits (due " in waits.stdout
    step_summary = tmp_path / "summary.md"
    what_if = cli(tmp_path, "promote", "--due", "--dry-run", "--json", "--now", later().isoformat(),
                  env={"GITHUB_STEP_SUMMARY": str(step_summary)})
    assert what_if.returncode == 0, what_if.stderr
    # CI's summary of a dry run says so: its "promote" rows were not written
    assert step_summary.read_text().startswith("### amibuild promote --due (dry run: nothing written)\n")
    assert {(i["variant"], i["action"]) for i in json.loads(what_if.stdout)} == {("ceph", "promote"), ("plain", "waits")}
    assert channel_values("ceph", "stable") == []  # a what-if plan writes nothing

    sandbox.advance_clock(FOUR_DAYS)
    promoted = cli(tmp_path, "promote", "--due", "--json")
    assert promoted.returncode == 0, promoted.stderr
    got = {(i["variant"], i["action"]) for i in json.loads(promoted.stdout)}
    assert got == {("ceph", "promoted"), ("plain", "waits")}
    assert [v for v, _ in channel_values("ceph", "stable")] == [ready["us-west-2"]]
    bad = cli(tmp_path, "promote", "--due", "--dry-run", "--now", "next tuesday")
    assert bad.returncode == 2 and "--now 'next tuesday': an ISO 8601 time" in bad.stderr


CHAIN = """
pipeline {
  name    = "eks-workers"
  regions = ["us-west-2"]
  copy_to = ["eu-west-1"]
}
channel "recommended" {
  from     = "candidate"
  requires = ["tested"]
}
channel "stable" {
  from     = "recommended"
  requires = ["tested"]
  soak     = "72h"
}
variant "ceph" {
}
"""


def test_a_due_dry_run_judges_a_channel_after_the_promotion_into_its_source_as_the_real_run_does(
        sandbox: Sandbox, tmp_path: Path):
    (tmp_path / "amibuild.hcl").write_text(CHAIN)
    chain, aws = load(tmp_path / "amibuild.hcl"), Aws(region="us-west-2")
    ceph = chain.variants[0]
    publish.publish_variant(aws, pipeline=chain, variant=ceph, amis=build("ceph"), channel="candidate")
    publish.promote(aws, pipeline=chain, variant=ceph, source="candidate", target="recommended")
    sandbox.advance_clock(FOUR_DAYS)  # recommended's image has soaked: stable may take it...
    publish.publish_variant(aws, pipeline=chain, variant=ceph, amis=build("ceph"), channel="candidate")

    planned = due.promote_due(aws, chain, dry_run=True)
    done = due.promote_due(aws, chain)  # ...but recommended takes the new one first: stable's soak starts again

    assert [(i.channel, i.action) for i in done] == [("recommended", due.DueAction.PROMOTED),
                                                    ("stable", due.DueAction.WAIT)]
    assert [(i.channel, i.action, i.ami) for i in planned] == [
        ("recommended", due.DueAction.PROMOTE, done[0].ami), ("stable", due.DueAction.WAIT, done[1].ami)]
    assert planned[1].due_at is not None and abs(planned[1].due_at - done[1].due_at) < timedelta(minutes=5)


def test_a_due_dry_run_says_a_promotion_from_a_split_channel_fails_as_the_real_run_does(sandbox: Sandbox, tmp_path: Path):
    (tmp_path / "amibuild.hcl").write_text(CHAIN)
    chain, aws = load(tmp_path / "amibuild.hcl"), Aws(region="us-west-2")
    ceph = chain.variants[0]
    publish.publish_variant(aws, pipeline=chain, variant=ceph, amis=build("ceph"), channel="candidate")
    other = build("ceph")  # another build, put into one region of candidate by hand: the channel is split
    boto3.client("ssm", region_name="eu-west-1").put_parameter(
        Name="/amibuild/eks-workers/1.35/ceph/candidate/image_id", Value=other["eu-west-1"], Type="String",
        DataType="aws:ec2:image", Overwrite=True)

    planned = due.promote_due(aws, chain, dry_run=True)
    done = due.promote_due(aws, chain)

    assert [(i.channel, i.action) for i in done] == [("recommended", due.DueAction.FAILED), ("stable", due.DueAction.WAIT)]
    assert "channel candidate is split across regions" in done[0].detail
    assert [(i.channel, i.action, i.detail) for i in planned] == [(i.channel, i.action, i.detail) for i in done]
    assert channel_values("ceph", "recommended") == []


def test_a_due_dry_run_says_a_promotion_whose_write_is_refused_fails_as_the_real_run_does(sandbox: Sandbox, tmp_path: Path):
    (tmp_path / "amibuild.hcl").write_text(CHAIN)
    chain, aws = load(tmp_path / "amibuild.hcl"), Aws(region="us-west-2")
    amis = build("ceph")
    publish.publish_variant(aws, pipeline=chain, variant=chain.variants[0], amis=amis, channel="candidate")
    boto3.client("ssm", region_name="eu-west-1").put_parameter(  # made by hand as text: SSM cannot make it an image
        Name="/amibuild/eks-workers/1.35/ceph/recommended/image_id", Value=amis["eu-west-1"], Type="String")

    planned = due.promote_due(aws, chain, dry_run=True)
    done = due.promote_due(aws, chain)

    assert [(i.channel, i.action) for i in done] == [("recommended", due.DueAction.FAILED), ("stable", due.DueAction.WAIT)]
    assert "eu-west-1: the parameter has data type text" in done[0].detail
    assert [(i.channel, i.action, i.detail) for i in planned] == [(i.channel, i.action, i.detail) for i in done]
    with pytest.raises(PublishFailed):
        planned.raise_for_status()  # the dry run's exit status is the real run's


def test_a_due_dry_run_lists_each_regions_write_and_safeguard_of_the_promotion(sandbox: Sandbox, tmp_path: Path, cli):
    (tmp_path / "amibuild.hcl").write_text(CHAIN)
    chain, aws = load(tmp_path / "amibuild.hcl"), Aws(region="us-west-2")
    amis = build("ceph")
    publish.publish_variant(aws, pipeline=chain, variant=chain.variants[0], amis=amis, channel="candidate")
    for region, ami in amis.items():  # protection turned off by hand: the promotion turns it on again
        boto3.client("ec2", region_name=region).disable_image_deregistration_protection(ImageId=ami)

    planned = cli(tmp_path, "promote", "--due", "--dry-run")
    as_data = json.loads(cli(tmp_path, "promote", "--due", "--dry-run", "--json").stdout)

    assert planned.returncode == 0, planned.stderr
    for region, ami in amis.items():
        assert f"  {region}: (new) -> {ami}  would write version 1" in planned.stdout, planned.stdout
        assert f"would safeguard {region}: protect {ami}" in planned.stdout
    assert {g["region"] for g in as_data[0]["plan"]["guards"]} == set(REGIONS)
    assert channel_values("ceph", "recommended") == []
    done = cli(tmp_path, "promote", "--due")
    assert done.returncode == 0 and all(s in done.stdout for s in ("recommended: promoted", "stable: waits"))


WRITES_WITH_NOW = [
    ("promote", "--variant", "ceph", "--from", "recommended", "--to", "stable"),
    ("promote", "--due"),
    ("publish", "--variant", "ceph", "--channel", "candidate", "--ami", "us-west-2=ami-0123456789abcdef0"),
]


@pytest.mark.parametrize("args", WRITES_WITH_NOW, ids=lambda a: " ".join(a[:2]))
@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_future_now_on_a_write_is_refused_before_any_aws_call(args, how, isolated_env, tmp_path: Path, cli):
    """Before, ``promote --now 2030-01-01T00:00:00Z`` skipped a 72h soak and wrote. The endpoint
    here is the tripwire (nothing listens): the refusal comes before any AWS call."""
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    if how == "env":
        got = cli(tmp_path, *args, env={**env, "AMIBUILD_NOW": "2030-01-01T00:00:00Z"})
        flag = "AMIBUILD_NOW"
    else:
        got = cli(tmp_path, *args, "--now", "2030-01-01T00:00:00Z", env=env)
        flag = "--now"
    assert got.returncode == 2, got.stderr
    line = got.stderr.strip().splitlines()[-1]
    assert f"{flag} is for what-if plans only: drop it, or add --dry-run" in line
    assert "127.0.0.1:9" not in got.stderr


def test_the_library_refuses_a_what_if_time_on_a_write(sandbox: Sandbox, pipeline):
    aws, ceph = Aws(region="us-west-2"), variant_of(pipeline, "ceph")
    with pytest.raises(SpecError, match="what-if time is for dry runs only"):
        publish.promote(aws, pipeline=pipeline, variant=ceph, source="recommended", target="stable", now=later())
    with pytest.raises(SpecError, match="what-if time is for dry runs only"):
        due.promote_due(aws, pipeline, now=later())


def test_a_dry_run_promote_judges_the_soak_at_the_what_if_time(sandbox: Sandbox, pipeline):
    aws, ceph = Aws(region="us-west-2"), variant_of(pipeline, "ceph")
    amis = build("ceph", "passed")
    publish.publish_variant(aws, pipeline=pipeline, variant=ceph, amis=amis)
    with pytest.raises(GateRefused, match="soak 3d"):
        publish.promote(aws, pipeline=pipeline, variant=ceph, source="recommended", target="stable", dry_run=True)
    plan = publish.promote(aws, pipeline=pipeline, variant=ceph, source="recommended", target="stable", dry_run=True,
                           now=later())
    assert [r.action for r in plan.regions] == [publish.PublishAction.WRITE] * 2
    assert channel_values("ceph", "stable") == []


# ------------------------------------------------------------------------------- signed statements decide, tags do not


def promote_after_soak(sandbox: Sandbox, pipeline, name: str, amis: dict[str, str], *, allow_foreign=False) -> None:
    aws = Aws(region="us-west-2")
    publish.publish_variant(aws, pipeline=pipeline, variant=variant_of(pipeline, name), amis=amis,
                            allow_foreign=allow_foreign)
    sandbox.advance_clock(FOUR_DAYS)  # the soak is met: only the statements can refuse


def test_a_failed_image_hand_tagged_passed_is_refused(sandbox: Sandbox, pipeline, tmp_path: Path, cli):
    """Before, a hand-set amibuild:test = passed let a failed image into a gated channel."""
    amis = build("ceph", "failed", tag="passed")
    promote_after_soak(sandbox, pipeline, "ceph", amis)
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    got = cli(tmp_path, "promote", "--variant", "ceph", "--from", "recommended", "--to", "stable")
    assert got.returncode == 1, got.stderr
    assert "channel stable is gated" in got.stderr
    assert f"us-west-2: {amis['us-west-2']}: its signed test statement says failed" in got.stderr
    assert channel_values("ceph", "stable") == []


def test_a_foreign_image_hand_tagged_passed_is_refused(sandbox: Sandbox, pipeline, tmp_path: Path, cli):
    """Before, `publish --allow-foreign` and a hand-set tag took an image amibuild never built into a gated channel."""
    amis = statements.images("ceph", REGIONS, tag="passed")  # no statement at all: amibuild never built it
    promote_after_soak(sandbox, pipeline, "ceph", amis, allow_foreign=True)
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    got = cli(tmp_path, "promote", "--variant", "ceph", "--from", "recommended", "--to", "stable")
    assert got.returncode == 1, got.stderr
    assert "has no valid provenance from this pipeline" in got.stderr and "a foreign image" in got.stderr
    assert channel_values("ceph", "stable") == []
    direct = cli(tmp_path, "publish", "--variant", "ceph", "--channel", "candidate", "--allow-foreign",
                 "--ami", ",".join(f"{r}={a}" for r, a in amis.items()))
    assert direct.returncode == 1 and "a foreign image" in direct.stderr, direct.stderr
    assert channel_values("ceph", "candidate") == []


def test_an_unsigned_image_and_one_with_only_a_tag_are_refused_naming_which(sandbox: Sandbox, pipeline):
    aws = Aws(region="us-west-2")
    unsigned = build("ceph", "passed", kms_key="alias/no-such-key")  # stored, but nobody signed them
    tag_only = build("plain", None, tag="passed")
    promote_after_soak(sandbox, pipeline, "ceph", unsigned)
    publish.publish_variant(aws, pipeline=pipeline, variant=variant_of(pipeline, "plain"), amis=tag_only)
    sandbox.advance_clock(FOUR_DAYS)
    with pytest.raises(GateRefused, match=r"no valid provenance from this pipeline \(unsigned"):
        publish.promote(aws, pipeline=pipeline, variant=variant_of(pipeline, "ceph"), source="recommended",
                        target="stable")
    with pytest.raises(GateRefused, match="no signed test statement; its amibuild:test tag says passed, "
                                          "but a tag decides nothing"):
        publish.promote(aws, pipeline=pipeline, variant=variant_of(pipeline, "plain"), source="recommended",
                        target="stable")
    assert channel_values("ceph", "stable") == [] and channel_values("plain", "stable") == []


def test_an_image_changed_since_its_test_statement_is_refused(sandbox: Sandbox, pipeline):
    """The statement is about this very image: one signed about another image does not count."""
    aws = Aws(region="us-west-2")
    amis = build("ceph", None)
    other = build("plain", "passed")
    # a test statement about other images, copied under this image's key: its subjects do not name it
    s3 = boto3.client("s3", region_name="us-west-2")
    listed = s3.list_objects_v2(Bucket=statements.BUCKET, Prefix=f"amibuild/eks-workers/images/{other['us-west-2']}/test/")
    key = listed["Contents"][0]["Key"]
    body = s3.get_object(Bucket=statements.BUCKET, Key=key)["Body"].read()
    s3.put_object(Bucket=statements.BUCKET, Key=key.replace(other["us-west-2"], amis["us-west-2"]), Body=body)
    promote_after_soak(sandbox, pipeline, "ceph", amis)
    with pytest.raises(GateRefused, match="is not a subject of the statement"):
        publish.promote(aws, pipeline=pipeline, variant=variant_of(pipeline, "ceph"), source="recommended",
                        target="stable")


def test_an_override_with_a_reason_passes_a_foreign_image_and_keeps_the_reason(sandbox: Sandbox, pipeline):
    aws = Aws(region="us-west-2")
    amis = statements.images("ceph", REGIONS)
    promote_after_soak(sandbox, pipeline, "ceph", amis, allow_foreign=True)
    publish.promote(aws, pipeline=pipeline, variant=variant_of(pipeline, "ceph"), source="recommended",
                    target="stable", override_gate="vendor image, checked by hand")
    ((value, description),) = channel_values("ceph", "stable")
    assert value == amis["us-west-2"] and "gate overridden: vendor image, checked by hand" in description


SCANNED = PIPELINE + """
channel "scanned" {
  requires = ["scanned"]
  scan {
    max_severity = "high"
    ignore = [{ id = "CVE-2024-1234", reason = "not reachable on nodes", until = "2099-01-01" }]
  }
}
"""


def test_a_direct_publish_into_a_scanned_gate_judges_an_ignore_on_aws_clock(sandbox: Sandbox, tmp_path: Path):
    """Before, a publish (or build-ami's) had no time to judge an ignore's `until` by, and refused every
    image with an ignored finding: `AWS gave no time with its answers`."""
    (tmp_path / "amibuild.hcl").write_text(SCANNED)
    pipeline = load(tmp_path / "amibuild.hcl")
    aws, ceph = Aws(region="us-west-2"), variant_of(pipeline, "ceph")
    amis = build("ceph", None)
    statements.sign_scan("eks-workers", amis, [{"id": "CVE-2024-1234", "severity": "high", "score": 7.5,
                                                "package": "pkg:rpm/amazon/htop@1.0.0-1.amzn2", "fixed_in": None}])
    publish.publish_variant(aws, pipeline=pipeline, variant=ceph, amis=amis, channel="scanned")
    assert [v for v, _ in channel_values("ceph", "scanned", "eu-west-1")] == [amis["eu-west-1"]]
    other = build("plain", None)
    statements.sign_scan("eks-workers", other, [{"id": "CVE-2024-9999", "severity": "critical", "score": 9.8,
                                                 "package": "pkg:rpm/amazon/x@1-1", "fixed_in": None}])
    with pytest.raises(GateRefused, match="CVE-2024-9999 \\(critical 9.8\\)"):
        publish.publish_variant(aws, pipeline=pipeline, variant=variant_of(pipeline, "plain"), amis=other,
                                channel="scanned")
