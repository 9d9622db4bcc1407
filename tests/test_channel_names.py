"""Channels are names you declared, and dry runs write nothing, against the local emulator.

Every task that takes a channel refuses a name that is neither declared (a `channel` block, the
default channel, recommended / candidate / stable) nor there for the variant: exit 2 with the near
miss, nothing written. Every task with --dry-run is walked and shown to write nothing: no write
call reaches the emulator (`faultproxy` log) and its SSM, EC2 and CloudFormation state is the same.
"""

from __future__ import annotations

import inspect
import json
import shutil
from pathlib import Path
from typing import Iterator

import boto3
import pytest

from amibuild.channels import known
from amibuild.pipeline import load
from faultproxy import FaultProxy
from test_rollout import PIPELINE as ROLLOUT_PIPELINE
from test_rollout import REGION, World
from test_rollout import world  # noqa: F401 - the fixture

needs_packer = pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")

GATED = ROLLOUT_PIPELINE + """
channel "stable" {
  from = "recommended"
}
"""
# the wire names of calls that read; anything else that reaches the emulator is a write
READS = ("Describe", "Get", "List", "Search", "Lookup", "Head")
LEFT_BEHIND = "20261201T120000Z-abcdef"  # a crashed run's id


# ------------------------------------------------------------------------------- the decision (pure)


@pytest.mark.parametrize("name, existing, new_channel, answer", [
    ("stable", None, False, known.Known.DECLARED),
    ("recommended", None, False, known.Known.DECLARED),
    ("beta", None, False, known.Known.DECLARED),  # a channel block
    ("alpha", None, False, known.Known.DECLARED),  # named as a block's `from`
    ("stabel", None, False, known.Known.LOOK),  # only AWS can tell
    ("stabel", [], False, known.Known.UNKNOWN),
    ("blue", ["blue"], False, known.Known.EXISTS),
    ("blue", None, True, known.Known.NEW),
])
def test_a_channel_name_is_known_by_the_file_or_by_what_exists(tmp_path: Path, name, existing, new_channel, answer):
    path = tmp_path / "amibuild.hcl"
    path.write_text('channel "beta" {\n  from = "alpha"\n}\nvariant "a" {\n}\n')
    assert known.decide(name, declared=known.declared(load(path)), existing=existing,
                        new_channel=new_channel) is answer


# ------------------------------------------------------------------------------- against the emulator


def state() -> dict:
    """What a write would change: every parameter (name, version), image (state, tags), instance state
    and stack (status, parameters) in the region."""
    ssm = boto3.client("ssm", region_name=REGION)
    parameters = sorted((p["Name"], p["Version"]) for page in ssm.get_paginator("describe_parameters").paginate()
                        for p in page["Parameters"])
    ec2 = boto3.client("ec2", region_name=REGION)
    images = sorted((i["ImageId"], i["State"], tuple(sorted((t["Key"], t["Value"]) for t in i.get("Tags", []))))
                    for i in ec2.describe_images(Owners=["self"])["Images"])
    instances = sorted((i["InstanceId"], i["State"]["Name"]) for r in ec2.describe_instances()["Reservations"]
                       for i in r["Instances"])
    cfn = boto3.client("cloudformation", region_name=REGION)
    stacks = sorted((s["StackName"], s["StackStatus"], tuple(sorted((p["ParameterKey"], p.get("ParameterValue", ""))
                                                                    for p in s.get("Parameters", []))))
                    for s in cfn.describe_stacks()["Stacks"])
    return {"parameters": parameters, "images": images, "instances": instances, "stacks": stacks}


def writes(proxy: FaultProxy) -> list[str]:
    return [seen.op for seen in proxy.log if seen.op and not seen.op.rpartition(".")[2].startswith(READS)]


@pytest.fixture
def channels(world: World, sandbox,  # noqa: F811 - test_rollout's fixture, asked for by name
             monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[World, FaultProxy, dict]]:
    """A gated stable, recommended published twice (so rollback and rollout have work), a node group
    stack on recommended; then the fault proxy in front of the emulator, recording every call."""
    (world.workdir / "amibuild.hcl").write_text(GATED)
    world.pipeline = load(world.workdir / "amibuild.hcl")
    first, second = world.build(), world.build()
    world.publish(first)
    world.deploy("ng-ceph")
    world.publish(second)
    # what a crashed run left behind: an instance carrying its run id, for clean-run to find
    ec2 = boto3.client("ec2", region_name=REGION)
    ec2.run_instances(ImageId=first, MinCount=1, MaxCount=1, InstanceType="m5.large", TagSpecifications=[
        {"ResourceType": "instance", "Tags": [{"Key": "amibuild:run-id", "Value": LEFT_BEHIND}]}])
    with FaultProxy(sandbox.endpoint) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
        yield world, proxy, {"first": first, "second": second}


def typo_cases(here: World, amis: dict) -> dict[str, list[str]]:
    """Every task that takes a channel, each given the typo `stabel` where a channel goes."""
    return {
        "publish": ["publish", "--variant", "ceph", "--channel", "stabel", "--ami", f"{REGION}={amis['first']}"],
        "promote --to": ["promote", "--variant", "ceph", "--from", "recommended", "--to", "stabel"],
        "promote --from": ["promote", "--variant", "ceph", "--from", "stabel", "--to", "stable"],
        "build-ami": ["build-ami", "--channel", "stabel"],
        "rollback": ["rollback", "--variant", "ceph", "--channel", "stabel"],
        "rollout": ["rollout", "--stack", "ng-ceph", "--variant", "ceph", "--channel", "stabel"],
        "nodegroup-deploy": [*here.deploy_flags("ng-new", channel="stabel")],
        "history": ["history", "--variant", "ceph", "--channel", "stabel"],
        "fleet": ["fleet", "--channel", "stabel"],
        "karpenter": ["karpenter", "--variant", "ceph", "--channel", "stabel"],
        "doctor": ["doctor", "--consumer", "--channel", "stabel"],
        "verify": ["verify", "--variant", "ceph", "--channel", "stabel"],
        "sbom": ["sbom", "--variant", "ceph", "--channel", "stabel"],
        "scan": ["scan", "--variant", "ceph", "--channel", "stabel"],
        "test-ami": ["test-ami", "--variant", "ceph", "--channel", "stabel"],
        "diff --from": ["diff", "--variant", "ceph", "--from", "stabel", "--to", "recommended"],
        "diff --to": ["diff", "--variant", "ceph", "--from", "recommended", "--to", "stabel"],
    }


# the parameters through which a task is given a channel's name
CHANNEL_PARAMETERS = {"channel", "from_", "to"}


@needs_packer
def test_the_typo_stabel_is_refused_by_every_task_that_takes_a_channel(channels) -> None:
    from amibuild.cli.tasks import ns

    here, proxy, amis = channels
    cases = typo_cases(here, amis)
    taking = {name for name in ns.task_names
              if CHANNEL_PARAMETERS & set(inspect.signature(ns[name].body).parameters)}
    assert taking <= {args[0] for args in cases.values()}, ("a task takes a channel that this walk leaves out",
                                                            taking - {args[0] for args in cases.values()})
    before = state()
    for case, args in cases.items():
        proxy.log.clear()
        result = here.invoke(*args)
        assert result.returncode == 2, (case, result.returncode, result.stdout, result.stderr)
        assert "did you mean 'stable'" in result.stderr, (case, result.stderr)
        assert result.stderr.count("\n") == 1, (case, result.stderr)  # one line
        assert writes(proxy) == [], (case, writes(proxy))
    assert state() == before


def test_a_dry_run_with_the_typo_is_refused_too(channels) -> None:
    here, proxy, amis = channels
    result = here.invoke("promote", "--variant", "ceph", "--from", "recommended", "--to", "stabel", "--dry-run")
    assert result.returncode == 2 and "did you mean 'stable'" in result.stderr, result.stderr
    assert "--new-channel" in result.stderr and 'channel "stabel" { } block' in result.stderr


def test_new_channel_lets_a_new_name_in_and_then_it_is_known(channels) -> None:
    here, proxy, amis = channels
    refused = here.invoke("promote", "--variant", "ceph", "--from", "recommended", "--to", "blue")
    assert refused.returncode == 2, refused.stderr
    assert "--to blue: no such channel" in refused.stderr and "nothing was written" in refused.stderr
    made = here.invoke("promote", "--variant", "ceph", "--from", "recommended", "--to", "blue", "--new-channel")
    assert made.returncode == 0, made.stderr
    ssm = boto3.client("ssm", region_name=REGION)
    assert ssm.get_parameter(Name="/amibuild/eks-workers/1.30/ceph/blue/image_id")["Parameter"]["Value"] == amis["second"]
    # it exists now: every task takes it without --new-channel
    for args in (["history", "--variant", "ceph", "--channel", "blue"],
                 ["rollout", "--stack", "ng-ceph", "--variant", "ceph", "--channel", "blue", "--dry-run"],
                 ["publish", "--variant", "ceph", "--channel", "blue", "--ami", f"{REGION}={amis['first']}"]):
        result = here.invoke(*args)
        assert result.returncode == 0, (args, result.stderr)
    # a near miss of an existing channel is suggested from what exists
    near = here.invoke("history", "--variant", "ceph", "--channel", "bleu")
    assert near.returncode == 2 and "did you mean 'blue'" in near.stderr, near.stderr


def test_a_channel_block_declares_a_new_name(channels) -> None:
    here, proxy, amis = channels
    (here.workdir / "amibuild.hcl").write_text(GATED + 'channel "canary" {\n}\n')
    result = here.invoke("publish", "--variant", "ceph", "--channel", "canary", "--ami", f"{REGION}={amis['first']}")
    assert result.returncode == 0, result.stderr
    # declared but not there yet: a read says what is missing in its own words, not "no such channel"
    fleet = here.invoke("history", "--variant", "ceph", "--channel", "candidate")
    assert fleet.returncode == 0 and "no such channel" not in fleet.stderr, fleet.stderr


def test_promote_due_dry_run_writes_nothing_and_its_flags_are_honoured_or_refused(channels) -> None:
    here, proxy, amis = channels
    before = state()
    result = here.invoke("promote", "--due", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "dry run: nothing written" in result.stdout
    assert f"ceph recommended -> stable: promote {amis['second']}" in result.stdout, result.stdout
    assert writes(proxy) == [] and state() == before
    for flags, words in ((["--reason", "x"], "--reason"), (["--override-gate", "--reason", "x"], "--override-gate"),
                         (["--new-channel"], "--new-channel"), (["--to", "stable"], "--to")):
        refused = here.invoke("promote", "--due", *flags)
        assert refused.returncode == 2 and words in refused.stderr, (flags, refused.stderr)
    assert writes(proxy) == [] and state() == before
    done = here.invoke("promote", "--due", "--force", "--json")
    assert done.returncode == 0, done.stderr
    assert [(i["channel"], i["action"]) for i in json.loads(done.stdout)] == [("stable", "promoted")]


def dry_runs(here: World, amis: dict) -> dict[str, list[str]]:
    """One --dry-run of every task that takes the flag, each with work to plan."""
    return {
        "build-ami": ["build-ami", "--dry-run"],
        "publish": ["publish", "--variant", "ceph", "--ami", f"{REGION}={amis['first']}", "--dry-run"],
        "promote": ["promote", "--variant", "ceph", "--from", "recommended", "--to", "stable", "--dry-run"],
        "promote --due": ["promote", "--due", "--dry-run"],
        "rollback": ["rollback", "--variant", "ceph", "--dry-run"],
        "rollout": ["rollout", "--stack", "ng-ceph", "--variant", "ceph", "--dry-run"],
        "nodegroup-deploy": ["nodegroup-deploy", "--stack", "ng-ceph", "--parameter", "NodeInstanceType=m6i.large",
                             "--dry-run"],
        "nodegroup-deploy (create)": [*here.deploy_flags("ng-new"), "--dry-run"],
        "clean-run": ["clean-run", "--run-id", LEFT_BEHIND, "--dry-run"],
        "prune": ["prune", "--keep", "1", "--keep-versions", "0", "--dry-run"],
    }


# a rollout's dry run makes a change set to show the change, and deletes it (the stack is untouched)
CHANGE_SET_CALLS = {"CreateChangeSet", "DeleteChangeSet"}


@needs_packer
def test_every_task_with_dry_run_writes_nothing(channels) -> None:
    from amibuild.cli.tasks import ns

    here, proxy, amis = channels
    cases = dry_runs(here, amis)
    taking = {name for name in ns.task_names if "dry_run" in inspect.signature(ns[name].body).parameters}
    assert taking == {args[0] for args in cases.values()}, "a task takes --dry-run that this walk leaves out"
    before = state()
    for case, args in cases.items():
        proxy.log.clear()
        result = here.invoke(*args)
        assert result.returncode == 0, (case, result.stdout, result.stderr)
        allowed = CHANGE_SET_CALLS if case == "rollout" else set()
        assert [op for op in writes(proxy) if op not in allowed] == [], (case, writes(proxy))
        assert state() == before, case
        if case == "clean-run":
            assert "found  instance" in result.stdout, result.stdout


# ------------------------------------------------------------------------------- build-ami's publish plan

E2E = """\
pipeline {
  name    = "e2e"
  regions = ["us-west-2"]
  copy_to = ["eu-west-1"]
}

variant "ceph" {
  extra_packages = ["ceph-common"]
}
"""


@needs_packer
def test_build_ami_dry_run_after_a_one_off_build_shows_the_publish_and_flags_the_older_build(sandbox, tmp_path):
    from conftest import run_cli

    (tmp_path / "amibuild.hcl").write_text(E2E)
    first = run_cli(tmp_path, "build-ami", "--json")
    assert first.returncode == 0, first.stderr
    regular = json.loads(first.stdout)["variants"][0]["amis"]
    one_off = run_cli(tmp_path, "build-ami", "--json", "--extra-pkg", "htop")
    assert one_off.returncode == 0, one_off.stderr
    newer = json.loads(one_off.stdout)["variants"][0]["amis"]
    parameter = "/amibuild/e2e/1.35/ceph/recommended/image_id"

    plan = run_cli(tmp_path, "build-ami", "--dry-run", "--json")
    assert plan.returncode == 0, plan.stderr
    (move,) = json.loads(plan.stdout)["publish"]
    assert (move["variant"], move["channel"], move["parameter"]) == ("ceph", "recommended", parameter)
    assert {r["region"]: (r["previous"], r["new"], r["version"], r["older"]) for r in move["regions"]} == {
        region: (newer[region], regular[region], 3, True) for region in ("us-west-2", "eu-west-1")}
    assert move["older"] == ["us-west-2", "eu-west-1"]
    text = run_cli(tmp_path, "build-ami", "--dry-run")
    assert text.returncode == 0, text.stderr
    assert f"us-west-2: {newer['us-west-2']} -> {regular['us-west-2']}  version 3  OLDER BUILD" in text.stdout, text.stdout
    for region in ("us-west-2", "eu-west-1"):  # the dry runs wrote nothing
        assert boto3.client("ssm", region_name=region).get_parameter(Name=parameter)["Parameter"]["Version"] == 2

    real = run_cli(tmp_path, "build-ami")
    assert real.returncode == 0, real.stderr
    assert "OLDER BUILD  recommended moved back to an image built before the one it held, in eu-west-1, us-west-2" \
        in real.stdout, real.stdout
    assert "moved to an OLDER build than it held" in real.stderr
    again = run_cli(tmp_path, "build-ami", "--json")  # now unchanged: nothing older said
    published = json.loads(again.stdout)["variants"][0]["published"]
    assert "older" not in published and set(published["regions"].values()) == {"unchanged"}


def test_build_ami_dry_run_shows_every_step_its_flags_ask_for_and_refuses_a_flag_without_its_partner(
        sandbox, tmp_path):
    from conftest import run_cli

    (tmp_path / "amibuild.hcl").write_text(E2E)
    plain = json.loads(run_cli(tmp_path, "build-ami", "--dry-run", "--json").stdout)["steps"]
    # the writes beside Packer's are in the plan: the statements, and the safeguards before the channel write
    assert plain == ["packer build, up to 8 at a time",
                     "store each built image's SBOM and provenance statement in the attestation bucket "
                     "(amibuild-attestations-ACCOUNT), signed with alias/amibuild",
                     "before each write to channel recommended: deregistration protection on for the image it will hold"]
    (tmp_path / "amibuild.hcl").write_text(
        E2E.replace('variant "ceph" {\n', 'variant "ceph" {\n  deprecate_after = "180d"\n').replace(
            '  copy_to = ["eu-west-1"]\n', '  copy_to = ["eu-west-1"]\n  protection {\n    cooldown = true\n  }\n'
            '  attestation {\n    bucket  = "my-statements"\n    kms_key = ""\n  }\n'))
    guarded = json.loads(run_cli(tmp_path, "build-ami", "--dry-run", "--json", "--channel", "candidate",
                                 "--new-channel").stdout)["steps"]
    assert guarded[1:] == [
        "store each built image's SBOM and provenance statement in s3://my-statements, unsigned (the attestation "
        "block names no kms_key)",
        "before each write to channel candidate: deregistration protection on for the image it will hold (with "
        "cooldown), and its deprecation time moved to deprecate_after from now (ceph)"]
    (tmp_path / "amibuild.hcl").write_text(E2E)
    flagged = run_cli(tmp_path, "build-ami", "--dry-run", "--json", "--rehearse", "--allow-incomplete", "--no-wait",
                      "--parallel", "2", "--timeout", "90m", "--boot-test")
    assert flagged.returncode == 0, flagged.stderr
    steps = json.loads(flagged.stdout)["steps"]
    assert steps[0].startswith("rehearse each variant") and "--allow-incomplete" in steps[0]
    assert steps[1] == ("packer build, up to 2 at a time, each within 5400 s; "
                        "a variant another run is building fails at once (--no-wait)")
    assert steps[3].startswith("boot test each built image before it is published")
    text = run_cli(tmp_path, "build-ami", "--dry-run", "--boot-test")
    assert "  step  boot test each built image" in text.stdout, text.stdout
    # a flag that only means something beside another is refused alone, not dropped
    alone = run_cli(tmp_path, "build-ami", "--dry-run", "--allow-incomplete")
    assert alone.returncode == 2 and "--allow-incomplete goes with --rehearse" in alone.stderr, alone.stderr
    assert alone.stdout == ""


def test_build_ami_dry_run_to_a_channel_gated_from_another_says_refused_and_exits_as_the_build_would(
        sandbox, tmp_path):
    from conftest import run_cli

    (tmp_path / "amibuild.hcl").write_text(E2E + 'channel "stable" {\n  from = "recommended"\n}\n')
    text = run_cli(tmp_path, "build-ami", "--channel", "stable", "--dry-run")
    assert text.returncode == 1, text.stderr
    assert ("publish to stable (/amibuild/e2e/1.35/ceph/stable/image_id): REFUSED: channel stable is gated "
            "(from recommended): images enter only from channel recommended") in text.stdout, text.stdout
    assert "would not be published" in text.stderr
    plan = json.loads(run_cli(tmp_path, "build-ami", "--channel", "stable", "--dry-run", "--json").stdout)
    assert plan["publish"][0]["refused"].startswith("channel stable is gated (from recommended)")
    # build-ami has no --override-gate: the advice names the command that has
    assert plan["publish"][0]["refused"].endswith(
        'meet the gate, or publish the images afterwards with `amibuild publish --override-gate --reason "..."`')


@needs_packer
def test_build_ami_dry_run_to_a_channel_requiring_tested_says_refused_unless_the_run_boot_tests(sandbox, tmp_path):
    from conftest import run_cli

    (tmp_path / "amibuild.hcl").write_text(E2E + 'channel "candidate" {\n  requires = ["tested"]\n}\n')
    planned = run_cli(tmp_path, "build-ami", "--channel", "candidate", "--dry-run")
    assert planned.returncode == 1, planned.stderr
    assert "REFUSED: channel candidate is gated (tested): requires tested: eu-west-1: the image: no signed test " \
           "statement (run `amibuild test-ami` or build with --boot-test)" in planned.stdout, planned.stdout
    tested = run_cli(tmp_path, "build-ami", "--channel", "candidate", "--boot-test", "--dry-run")
    assert tested.returncode == 0 and "REFUSED" not in tested.stdout, tested.stdout + tested.stderr
    built = run_cli(tmp_path, "build-ami", "--channel", "candidate")
    assert built.returncode == 1 and "NOT published: channel candidate is gated (tested): requires tested" in built.stdout
    assert "publish the images afterwards with `amibuild publish --override-gate" in built.stdout, built.stdout
    assert "meet the gate or pass --override-gate" not in built.stdout + built.stderr
