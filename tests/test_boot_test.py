"""Image tests end to end: stage 1 on the build instance, the boot test, results on the image.

The real CLI and the real packer binary against the sandbox emulator over HTTP. The emulator has
no instance to run anything on: the image's stand-in is its variant's real chain rehearsed in a
throwaway copy of this machine (root only), so `rpm -q ceph-common` passes for a variant that
installs it and fails for one whose user script removes it. Ctrl-C is tested by holding the
boot test's first GetCommandInvocation in `tests/faultproxy.py` and signalling at that point.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from amibuild.pipeline import imagetests, load
from conftest import CliResult, run_cli
from faultproxy import FaultProxy

STANDIN_NEEDS = ("packer and root are needed: the image's stand-in is an overlay of / in a private mount "
                 "namespace with a build user, which an unprivileged user namespace cannot give (no overlay "
                 "of / there, one uid mapped)")
ROOT = Path(__file__).resolve().parent.parent
NEEDS = pytest.mark.skipif(shutil.which("packer") is None or os.geteuid() != 0,
                           reason=STANDIN_NEEDS)

PIPELINE = """\
pipeline {
  name    = "bt"
  regions = ["us-west-2"]
  copy_to = ["eu-west-1"]
}

variant "ceph" {
  extra_packages = ["ceph-common"]
  test "rbd-package" {
    command = "rpm -q ceph-common"
    timeout = "30s"
  }
  # the sandbox's stand-in is this machine, not an EKS image: these are not testable here
  test "kubelet" {
    enabled = false
    reason  = "sandbox stand-in"
  }
  test "containerd" {
    enabled = false
    reason  = "sandbox stand-in"
  }
  test "nodeadm" {
    enabled = false
    reason  = "sandbox stand-in"
  }
  test "unpigz" {
    enabled = false
    reason  = "sandbox stand-in"
  }
  test "nodeadm-config" {
    enabled = false
    reason  = "sandbox stand-in"
  }
}

# the EKS image's own checks on again: not testable on the stand-in, so the image is untested
variant "plain" {
  extends = "ceph"
  test "kubelet" {
    enabled = true
  }
}

# its user script removes ceph-common again: stage 1 fails the build, no AMI is made
variant "early" {
  extends = "ceph"
  scripts = ["remove.sh"]
}

# the same, with stage 1 turned off: the image is made, and the boot test fails it
variant "late" {
  extends       = "early"
  test_on_build = false
}
"""
REMOVE = "#!/bin/bash\nset -e\nsudo yum remove -y ceph-common\n"


def amibuild(cwd: Path, *args: str, env: dict | None = None) -> CliResult:
    """The `amibuild` command, in process (`conftest.run_cli`): a real process only where the test
    signals or kills one."""
    return run_cli(cwd, *args, env=env, binary="amibuild")


def images_of(variant: str, region: str = "us-west-2") -> list[dict]:
    ec2 = boto3.client("ec2", region_name=region)
    return ec2.describe_images(Owners=["self"], Filters=[{"Name": "tag:amibuild:variant", "Values": [variant]}])["Images"]


def tag(image: dict, key: str) -> str:
    return {t["Key"]: t["Value"] for t in image.get("Tags", [])}.get(key, "")


def channel(variant: str, region: str = "us-west-2") -> str | None:
    ssm = boto3.client("ssm", region_name=region)
    try:
        return ssm.get_parameter(Name=f"/amibuild/bt/1.35/{variant}/recommended/image_id")["Parameter"]["Value"]
    except ssm.exceptions.ParameterNotFound:
        return None


@pytest.fixture
def workdir(tmp_path: Path, sandbox, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    (tmp_path / "remove.sh").write_text(REMOVE)
    return tmp_path


# ------------------------------------------------------------------------------- pure parts


def variant(tmp_path: Path, body: str, name: str = "v"):
    (tmp_path / "amibuild.hcl").write_text(f'variant "{name}" {{\n{body}\n}}\n')
    return load(tmp_path / "amibuild.hcl").variants[0]


def test_built_in_checks_follow_the_os_the_flavor_and_what_the_variant_adds(tmp_path: Path):
    al2023 = variant(tmp_path, 'extra_packages = ["ceph-common"]\nrepo "ceph" {\n baseurl = "https://x.example/el9"\n gpgkey = "https://x.example/key.asc"\n}\n'
                               'proxy {\n http = "http://proxy.example:3128"\n}')
    names = [c.name for c in imagetests.check_set(al2023).checks]
    upstream_level = ["unpigz", "disk-free", "no-nerdctl0", "dkms"]  # upstream's validate.sh, on every image
    assert names == ["kubelet", "containerd", "nodeadm", "package-ceph-common", "repo-ceph", "proxy", "no-credentials",
                     *upstream_level]
    al2 = variant(tmp_path, 'os = "al2"\nkubernetes_version = "1.30"\nflavor = "gpu"')
    checks = {c.name: c for c in imagetests.check_set(al2).checks}
    assert set(checks) == {"kubelet", "containerd", "bootstrap", "no-credentials", "nvidia-driver", *upstream_level,
                           "nvidia-version", "kernel-pinned", "versionlock"}
    assert "v1.30." in checks["kubelet"].command
    neuron = variant(tmp_path, 'flavor = "neuron"')
    assert "neuron-driver" in [c.name for c in imagetests.check_set(neuron).checks]


def test_a_proxy_url_with_credentials_is_baked_on_purpose_and_not_flagged(tmp_path: Path):
    plain = {c.name: c for c in imagetests.check_set(variant(tmp_path, "")).checks}["no-credentials"]
    with_user = {c.name: c for c in imagetests.check_set(
        variant(tmp_path, 'proxy {\n http = "http://user:pw@proxy.example:3128"\n}')).checks}["no-credentials"]
    assert "://" in plain.command and "://" not in with_user.command
    assert "baked on purpose" in with_user.what


@pytest.mark.parametrize("body, complaint", [
    ('test "containerd" {\n enabled = false\n}', "needs a reason"),
    ('test "mine" {\n timeout = "10s"\n}', "command is missing"),
    ('test "kubelet" {\n command = "true"\n}', "is a built-in check; give your own check another name"),
    ('test "x" {\n command = "true"\n timeout = "soon"\n}', "is not a duration"),
    ('test "x" {\n command = "true"\n retries = 3\n}', "unknown field `retries`"),
    ('test "Bad Name" {\n command = "true"\n}', "test names are lowercase"),
])
def test_a_bad_test_block_is_refused_at_load_naming_it(tmp_path: Path, body: str, complaint: str):
    from amibuild.errors import SpecError

    with pytest.raises(SpecError) as caught:
        variant(tmp_path, body)
    assert complaint in str(caught.value) and 'variant "v"' in str(caught.value)


def test_a_disabled_built_in_keeps_its_reason_and_a_child_variant_inherits_tests(tmp_path: Path):
    (tmp_path / "amibuild.hcl").write_text(
        'variant "base" {\n test "containerd" {\n  enabled = false\n  reason = "docker image"\n }\n'
        ' test "mine" {\n  command = "true"\n }\n}\n'
        'variant "child" {\n extends = "base"\n test "mine" {\n  command = "false"\n }\n}\n')
    child = next(v for v in load(tmp_path / "amibuild.hcl").variants if v.name == "child")
    checks = imagetests.check_set(child)
    assert [d.reason for d in checks.disabled] == ["docker image"]
    assert {c.name: c.command for c in checks.checks}["mine"] == "false"
    assert "containerd" not in [c.name for c in checks.checks]


def test_the_checks_script_exits_by_the_checks_exit_statuses_and_each_boot_command_by_its_own(tmp_path: Path):
    """Rewritten (issue 26): the script's output is no longer parsed; its exit status, and in the boot
    test each check's own command's, is the verdict (see tests/test_check_verdicts.py)."""
    checks = [imagetests.Check("ok", "echo fine", builtin=False),
              imagetests.Check("bad", "echo broken >&2; exit 3", builtin=False),
              imagetests.Check("slow", "sleep 30", timeout=1, builtin=False),
              imagetests.Check("tricky", "cat <<'AMIBUILD_CHECK_4_END'\nhi\nAMIBUILD_CHECK_4_END\n", builtin=False),
              imagetests.Check("missing", "no-such-command-here", builtin=False)]
    script = tmp_path / "checks.sh"
    script.write_text(imagetests.checks_script(checks))
    done = subprocess.run(["bash", "-eu", str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "broken" in done.stdout and "hi" in done.stdout  # under bash -e, every check ran
    for check, code, said in zip(checks, (0, 3, 124, 0, 127), ("fine", "", "", "hi", ""), strict=True):
        (tmp_path / "one.sh").write_text(imagetests.check_command(check))
        ran = subprocess.run(["sh", str(tmp_path / "one.sh")], capture_output=True, text=True, timeout=60)
        assert ran.returncode == code and said in ran.stdout, check.name
        # off the stand-in, a command that is not there is a failure like any other
        assert imagetests.verdict(ran.returncode) == ("passed" if code == 0 else "failed")


def test_nothing_proven_is_never_a_pass():
    untestable = imagetests.CheckResult("a", "boot", imagetests.Verdict.UNTESTABLE, 127, 0.1)
    passed = imagetests.CheckResult("b", "boot", imagetests.Verdict.PASSED, 0, 0.1)
    failed = imagetests.CheckResult("c", "boot", imagetests.Verdict.FAILED, 1, 0.1)
    not_tested = imagetests.CheckResult("d", "boot", imagetests.Verdict.NOT_TESTED, None, 0.1, reason="agent gone")
    # passed only when every check passed: one without a result makes the image untested, never passed
    assert imagetests.overall([passed]) == imagetests.Verdict.PASSED
    assert imagetests.overall([untestable]) == imagetests.Verdict.UNTESTABLE
    assert imagetests.overall([untestable, passed]) == imagetests.Verdict.UNTESTABLE
    assert imagetests.overall([not_tested, passed]) == imagetests.Verdict.NOT_TESTED
    assert imagetests.overall([untestable, not_tested, passed, failed]) == imagetests.Verdict.FAILED
    assert imagetests.overall([]) == imagetests.Verdict.UNTESTABLE  # nothing proven
    assert [imagetests.TAG_VALUES[v] for v in (imagetests.Verdict.PASSED, imagetests.Verdict.UNTESTABLE,
                                                imagetests.Verdict.FAILED)] == ["passed", "untested", "failed"]
    assert [r.name for r in imagetests.untestable([untestable, passed, failed, not_tested])] == ["a", "d"]
    assert not_tested.shown == "not tested: agent gone"


def test_a_timeout_below_a_second_or_between_seconds_is_rounded_up_never_to_no_timeout(tmp_path: Path):
    # GNU timeout takes 0 as "no timeout": a check of 0.5s must not run forever
    mine = {c.name: c for c in imagetests.check_set(variant(
        tmp_path, ' test "quick" {\n  command = "true"\n  timeout = "0.5s"\n }\n'
                  ' test "slow" {\n  command = "true"\n  timeout = "1.5s"\n }')).checks}
    script = imagetests.checks_script([mine["quick"], mine["slow"]])
    assert "run_check quick 1 " in script and "run_check slow 2 " in script
    assert "timeout --kill-after=5 1 bash" in imagetests.check_command(mine["quick"])


def test_turning_off_a_check_the_variant_does_not_have_says_it_turns_nothing_off(tmp_path: Path):
    # a typo (kubelett), or another OS's check (nodeadm on AL2, from defaults): listed, and the note says so
    (tmp_path / "amibuild.hcl").write_text(
        'defaults {\n test "nodeadm" {\n  enabled = false\n  reason = "al2023 only"\n }\n}\n'
        'variant "ceph" {\n test "kubelett" {\n  enabled = false\n  reason = "no kubelet here"\n }\n'
        ' test "mine" {\n  command = "true"\n  enabled = false\n }\n}\n'
        'variant "old" {\n os = "al2"\n kubernetes_version = "1.30"\n}\n')
    pipeline = load(tmp_path / "amibuild.hcl")
    ceph, old = (imagetests.check_set(v) for v in pipeline.variants)
    assert "kubelet" in [c.name for c in ceph.checks]  # still on
    notes = {d.name: d.note for d in (*ceph.disabled, *old.disabled)}
    assert notes["kubelett"] == "variant ceph has no check of that name, so this turns nothing off (did you mean 'kubelet'?)"
    assert notes["nodeadm"] == "variant old has no check of that name, so this turns nothing off"
    assert notes["mine"] == ""  # the variant's own check, turned off: it is there to turn off
    shown = amibuild(tmp_path, "tests", "--variant", "ceph")
    assert shown.returncode == 0, shown.stderr
    assert ('  kubelett ' in shown.stdout and "; warning: variant ceph has no check of that name, so this turns nothing "
            "off (did you mean 'kubelet'?)" in shown.stdout)
    rendered = amibuild(tmp_path, "render", "--variant", "ceph")
    assert rendered.returncode == 0, rendered.stderr
    assert ("note: test 'kubelett' (amibuild.hcl: variant \"ceph\": test \"kubelett\"): variant ceph has no check of "
            "that name, so this turns nothing off (did you mean 'kubelet'?)") in rendered.stdout + rendered.stderr


def test_amibuild_tests_lists_what_will_run_and_what_is_turned_off(tmp_path: Path):
    (tmp_path / "amibuild.hcl").write_text(
        'variant "ceph" {\n extra_packages = ["ceph-common"]\n test "containerd" {\n  enabled = false\n'
        '  reason = "not used"\n }\n test "rbd-package" {\n  command = "rpm -q ceph-common"\n }\n}\n'
        'variant "old" {\n os = "al2"\n kubernetes_version = "1.30"\n}\n')
    shown = amibuild(tmp_path, "tests", "--variant", "ceph")
    assert shown.returncode == 0, shown.stderr
    assert "ceph (al2023 standard, Kubernetes 1.35): 9 check(s) on the build instance and in the boot test, " \
           "3 in the boot test only, 11 of the clean-up (the build's last step)" in shown.stdout
    rows = [line.split(None, 3) for line in shown.stdout.splitlines() if line.startswith("  ")]
    assert ["package-ceph-common", "built-in", "build+boot"] in [r[:3] for r in rows]
    assert ["rbd-package", "pipeline", "file"] in [r[:3] for r in rows]
    assert ["nodeadm-config", "built-in", "boot", "nodeadm accepts the instance's user data (nodeadm config check; "
            "boot test only)"] in rows
    assert ["containerd", "turned", "off", "not used (amibuild.hcl: variant \"ceph\": test \"containerd\")"] in rows
    listed = {e["variant"]: e for e in json.loads(amibuild(tmp_path, "tests", "--json").stdout)}
    assert list(listed) == ["ceph", "old"]
    boot_only = {v: [c["name"] for c in e["checks"] if c["stages"] == ["boot"]] for v, e in listed.items()}
    assert boot_only == {"ceph": ["nodeadm-config", "clean-machine-id", "clean-authorized-keys"],
                         "old": ["bootstrap-options", "clean-machine-id", "clean-authorized-keys"]}


# ------------------------------------------------------------------------------- against the emulator


@NEEDS
def test_stage_1_and_the_boot_test_let_only_the_working_image_reach_its_channel(workdir: Path):
    run = amibuild(workdir, "build-ami", "--boot-test", "--json")
    assert run.returncode == 1, run.stderr
    summary = {v["name"]: v for v in json.loads(run.stdout)["variants"]}

    # ceph: passes stage 1 (its build log says so) and the boot test; tagged passed and published
    ceph = summary["ceph"]
    assert ceph["status"] == "built" and not ceph["publish_error"]
    assert "stage 1 checks passed for variant ceph" in (workdir / ceph["log"]).read_text()
    assert ceph["boot_test"]["result"] == "passed" and ceph["boot_test"]["terminated"]
    results = {c["name"]: c["result"] for c in ceph["boot_test"]["checks"]}
    assert results == {"package-ceph-common": "passed", "no-credentials": "passed", "rbd-package": "passed",
                       "disk-free": "passed", "no-nerdctl0": "passed", "dkms": "passed",
                       # of the clean-up: a machine-id of its own after the (stand-in's) first boot, no key
                       "clean-machine-id": "passed", "clean-authorized-keys": "passed"}
    for region, ami in ceph["amis"].items():
        (image,) = [i for i in images_of("ceph", region) if i["ImageId"] == ami]
        assert tag(image, "amibuild:test") == "passed" and tag(image, "amibuild:test-run") == json.loads(run.stdout)["run_id"]
        assert channel("ceph", region) == ami

    # plain: the kubelet check is not testable on the stand-in (this machine is no EKS image): the
    # emulator's agent answers it as a command it could not deliver, which reads "not tested": never a
    # pass, so the image is tagged untested (no gate here: published), and the report says which and why
    plain = summary["plain"]
    assert "stage 1 checks not testable here for variant plain" in (workdir / plain["log"]).read_text()
    assert plain["boot_test"]["result"] == "not tested" and plain["boot_test"]["tag"] == "untested"
    assert plain["boot_test"]["untestable"] == ["kubelet"] and not plain["publish_error"]
    (kubelet,) = [c for c in plain["boot_test"]["checks"] if c["name"] == "kubelet"]
    assert kubelet["exit_status"] is None and "Undeliverable" in kubelet["reason"] and "kubelet" in kubelet["reason"]
    assert "not tested: 1 check(s) gave no result (kubelet)" in " ".join(plain["boot_test"]["notes"])
    for region, ami in plain["amis"].items():
        (image,) = [i for i in images_of("plain", region) if i["ImageId"] == ami]
        assert tag(image, "amibuild:test") == "untested"

    # early: stage 1 fails the Packer build; no AMI is made
    assert summary["early"]["status"] == "failed" and summary["early"]["amis"] == {}
    assert images_of("early") == [] and images_of("early", "eu-west-1") == []
    assert "package-ceph-common: failed" in (workdir / summary["early"]["log"]).read_text()

    # late: stage 1 off, so the image is made; the boot test fails it: tagged failed, not published
    late = summary["late"]
    assert late["status"] == "built" and late["boot_test"]["result"] == "failed"
    assert "boot test failed" in late["publish_error"]
    failed = {c["name"]: c for c in late["boot_test"]["checks"]}
    assert failed["package-ceph-common"]["result"] == "failed"
    assert "not installed" in failed["package-ceph-common"]["output_tail"]
    for region, ami in late["amis"].items():
        (image,) = [i for i in images_of("late", region) if i["ImageId"] == ami]
        assert tag(image, "amibuild:test") == "failed"
    assert channel("late") is None and channel("late", "eu-west-1") is None

    # every boot-test instance is gone, read back from the emulator
    ec2 = boto3.client("ec2", region_name="us-west-2")
    tested = [i for r in ec2.describe_instances(Filters=[{"Name": "tag:amibuild:purpose", "Values": ["boot-test"]}])
              ["Reservations"] for i in r["Instances"]]
    assert len(tested) == 3 and {i["State"]["Name"] for i in tested} == {"terminated"}

    # the run record keeps every result
    record = json.loads((workdir / json.loads(run.stdout)["record"]).read_text())
    assert {v["name"]: v.get("boot_test", {}).get("result") for v in record["variants"]} == {
        "ceph": "passed", "plain": "not tested", "early": None, "late": "failed"}


@NEEDS
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_or_sigterm_during_a_boot_test_terminates_its_instance(workdir: Path, sandbox, signum):
    (workdir / "amibuild.hcl").write_text(PIPELINE.split("# its user script")[0])
    built = amibuild(workdir, "build-ami", "--no-publish", "--json")
    assert built.returncode == 0, built.stderr
    ami = json.loads(built.stdout)["variants"][0]["amis"]["us-west-2"]
    with FaultProxy(sandbox.endpoint) as proxy:
        held = proxy.gate({"AmazonSSM.GetCommandInvocation"}, count=1)
        proc = subprocess.Popen([sys.executable, "-m", "amibuild", "test-ami", "--variant", "ceph", "--ami", ami],
                                cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "AWS_ENDPOINT_URL": proxy.endpoint})
        try:
            assert held.wait_held(timeout=60), "the boot test never asked for its command's result"
            ec2 = boto3.client("ec2", region_name="us-west-2")
            (instance,) = [i for r in ec2.describe_instances(
                Filters=[{"Name": "tag:amibuild:purpose", "Values": ["boot-test"]}])["Reservations"]
                for i in r["Instances"]]
            assert instance["State"]["Name"] == "running"
            proc.send_signal(signum)
        finally:
            held.release()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err  # 130 for SIGINT, 143 for SIGTERM
    name = signal.Signals(signum).name
    assert f"amibuild: {name}: stopping the boot test; terminating its instance" in err
    assert "interrupted" in err and "terminated" in err
    state = ec2.describe_instances(InstanceIds=[instance["InstanceId"]])["Reservations"][0]["Instances"][0]["State"]
    assert state["Name"] in ("shutting-down", "terminated")
    assert {t["Key"]: t["Value"] for t in instance["Tags"]}["amibuild:run-id"]  # clean-run finds it by this tag
    (image,) = [i for i in images_of("ceph") if i["ImageId"] == ami]
    assert tag(image, "amibuild:test") == ""  # an interrupted test says nothing about the image


@NEEDS
def test_a_boot_test_killed_outright_leaves_an_instance_clean_run_finds_by_its_run_id(workdir: Path, sandbox):
    (workdir / "amibuild.hcl").write_text(PIPELINE.split("# its user script")[0])
    built = amibuild(workdir, "build-ami", "--no-publish", "--json")
    assert built.returncode == 0, built.stderr
    ami = json.loads(built.stdout)["variants"][0]["amis"]["us-west-2"]
    ec2 = boto3.client("ec2", region_name="us-west-2")
    with FaultProxy(sandbox.endpoint) as proxy:
        held = proxy.gate({"AmazonSSM.GetCommandInvocation"}, count=1)
        proc = subprocess.Popen([sys.executable, "-m", "amibuild", "test-ami", "--variant", "ceph", "--ami", ami],
                                cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={**os.environ, "AWS_ENDPOINT_URL": proxy.endpoint})
        try:
            assert held.wait_held(timeout=60), "the boot test never asked for its command's result"
            proc.kill()  # no handler runs: the instance stays
            proc.wait(timeout=30)
        finally:
            held.release()
    (instance,) = [i for r in ec2.describe_instances(
        Filters=[{"Name": "tag:amibuild:purpose", "Values": ["boot-test"]}])["Reservations"] for i in r["Instances"]]
    assert instance["State"]["Name"] == "running"
    run_id = {t["Key"]: t["Value"] for t in instance["Tags"]}["amibuild:run-id"]
    cleaned = amibuild(workdir, "clean-run", "--run-id", run_id, "--json")
    assert cleaned.returncode == 0, cleaned.stderr
    state = ec2.describe_instances(InstanceIds=[instance["InstanceId"]])["Reservations"][0]["Instances"][0]["State"]
    assert state["Name"] in ("shutting-down", "terminated")
    assert images_of("ceph")[0]["State"] == "available"  # the image itself is not the test run's to remove


def test_a_boot_test_that_cannot_launch_fails_without_tagging_the_image(workdir: Path, sandbox):
    from amibuild.sandbox import seed_images

    ec2 = boto3.client("ec2", region_name="us-west-2")
    instance = ec2.run_instances(ImageId=seed_images()[0].image_id, MinCount=1, MaxCount=1, InstanceType="m5.large")
    ami = ec2.create_image(InstanceId=instance["Instances"][0]["InstanceId"], Name="bt-ceph-launch")["ImageId"]
    ec2.create_tags(Resources=[ami], Tags=[{"Key": "amibuild:variant", "Value": "ceph"}])
    failed = amibuild(workdir, "test-ami", "--variant", "ceph", "--ami", ami, "--subnet", "subnet-0123456789abcdef0",
                      "--json")
    assert failed.returncode == 1
    result = json.loads(failed.stdout)
    assert "InvalidSubnetID.NotFound" in result["error"] and result["instance_id"] is None
    # an AWS refusal says nothing of the image: not tested (rewritten from "not run", issue 26)
    assert result["result"] == "not tested" and {c["result"] for c in result["checks"]} == {"not tested"}
    assert result["tagged"] == [] and "not tagged" in " ".join(result["notes"])
    (image,) = ec2.describe_images(ImageIds=[ami])["Images"]
    assert tag(image, "amibuild:test") == ""
