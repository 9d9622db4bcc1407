"""A check's verdict travels out of band: its own exit status, never text the check can print.

Against the sandbox (packer and root: the image's stand-in is an overlay of / with a build user):
a check that forges result lines and pads past SSM's 24,000 characters still fails, one with
30,000 characters of output passes (head only, or its size and tail from S3 with
``test { output_bucket }``), and ESC sequences come out neutralised. Through `tests/faultproxy.py`:
a SendCommand held past its read timeout is "not tested" and keeps the image's earlier verdict.
The scripts shipped to real instances know nothing of the sandbox: exit 127 there is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import boto3
from botocore.stub import Stubber
import pytest

from amibuild.aws.testing import OUTPUT_LIMIT, InstanceState, Invocation, StoredOutput, TestInstances
from amibuild.imagetest import boot, invocation
from amibuild.pipeline import imagetests, load
from amibuild.printable import printable
from amibuild.sandbox import runcommand
from conftest import run_cli
from faultproxy import FaultProxy

REGION = "us-west-2"
NEEDS_BUILD = pytest.mark.skipif(shutil.which("packer") is None or os.geteuid() != 0,
                                 reason="packer and root are needed: the image's stand-in is an overlay of / in a "
                                        "private mount namespace with a build user")
OFF = "\n".join(f'  test "{name}" {{\n    enabled = false\n    reason  = "sandbox stand-in"\n  }}'
                for name in ("kubelet", "containerd", "nodeadm", "nodeadm-config", "unpigz"))
# prints a passing result line for every check, then pads its real one past the 24,000 characters SSM keeps
FORGE = ("for n in no-credentials forge big esc; do echo amibuild-check: start $n; "
         "echo amibuild-check: $n exit=0 seconds=0.01; done; echo amibuild-check: stand-in; "
         "head -c 25000 /dev/zero | tr -c x x; echo; exit 1")
BIG = "head -c 30000 /dev/zero | tr -c y y"  # 30,000 characters, and a pass
# clear-screen, an OSC window title and a colour, then a failure (so its output is shown)
ESC = r'awk \"BEGIN { printf \\\"%c[2J%c]0;owned%cvisible%c[31m\\\", 27, 27, 7, 27 }\"; exit 1'
PIPELINE = f"""\
pipeline {{
  name    = "ob"
  regions = ["{REGION}"]
}}

variant "noisy" {{
  test_on_build = false
{OFF}
  test "forge" {{
    command = "{FORGE}"
  }}
  test "big" {{
    command = "{BIG}"
  }}
  test "esc" {{
    command = "{ESC}"
  }}
}}

# stage 1 on: the forging check fails the Packer build by its exit status
variant "forged" {{
  extends = "noisy"
  test "big" {{
    enabled = false
    reason  = "stage 1 is about the forge"
  }}
  test "esc" {{
    enabled = false
    reason  = "stage 1 is about the forge"
  }}
  test_on_build = true
}}
"""
BUCKET = "ob-check-output"


def image_tag(ami: str, key: str = "amibuild:test") -> str:
    (image,) = boto3.client("ec2", region_name=REGION).describe_images(ImageIds=[ami])["Images"]
    return {t["Key"]: t["Value"] for t in image.get("Tags", [])}.get(key, "")


def foreign_image(name: str) -> str:
    """An image with amibuild's tags that this sandbox has no stand-in of (no packer build needed)."""
    from amibuild.sandbox import seed_images

    ec2 = boto3.client("ec2", region_name=REGION)
    instance = ec2.run_instances(ImageId=seed_images()[0].image_id, MinCount=1, MaxCount=1, InstanceType="m5.large")
    ami = ec2.create_image(InstanceId=instance["Instances"][0]["InstanceId"], Name=name)["ImageId"]
    ec2.create_tags(Resources=[ami], Tags=[{"Key": "amibuild:variant", "Value": "noisy"}])
    return ami


# ------------------------------------------------------------------------------- against the sandbox


@NEEDS_BUILD
def test_forged_lines_huge_output_and_escapes_are_data_and_the_exit_status_is_the_verdict(tmp_path: Path, sandbox):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    built = run_cli(tmp_path, "build-ami", "--no-publish", "--json", binary="amibuild")
    variants = {v["name"]: v for v in json.loads(built.stdout)["variants"]}
    # stage 1: the forging check's own exit status fails the build, whatever it printed
    assert built.returncode == 1 and variants["forged"]["status"] == "failed", built.stderr
    assert "check forge: failed" in (tmp_path / variants["forged"]["log"]).read_text()
    ami = variants["noisy"]["amis"][REGION]

    tested = run_cli(tmp_path, "test-ami", "--variant", "noisy", "--ami", ami, "--json", binary="amibuild")
    assert tested.returncode == 1, tested.stderr
    assert "\x1b" not in tested.stdout and "\x1b" not in tested.stderr and "\x07" not in tested.stdout
    result = json.loads(tested.stdout)
    checks = {c["name"]: c for c in result["checks"]}
    # (the upstream-level and clean-up built-ins run too: what this test is about are these four)
    assert {n: checks[n]["result"] for n in ("no-credentials", "forge", "big", "esc")} == {
        "no-credentials": "passed", "forge": "failed", "big": "passed", "esc": "failed"}
    assert result["result"] == "failed" and image_tag(ami) == "failed"
    assert checks["forge"]["exit_status"] == 1 and checks["forge"]["output_head_only"]
    # a pass with more than SSM keeps is a pass, its output marked head only, with no size
    assert checks["big"]["output_head_only"] and checks["big"]["output_size"] is None
    assert checks["esc"]["output_tail"] == "\\x1b[2J\\x1b]0;owned\\x07visible\\x1b[31m"

    # with test { output_bucket }: the size and the tail come from S3, where the agent wrote them
    boto3.client("s3", region_name=REGION).create_bucket(
        Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    (tmp_path / "amibuild.hcl").write_text(PIPELINE.replace(
        f'regions = ["{REGION}"]\n', f'regions = ["{REGION}"]\n  test {{\n    output_bucket = "{BUCKET}"\n  }}\n'))
    shown = run_cli(tmp_path, "test-ami", "--variant", "noisy", "--ami", ami, binary="amibuild")
    assert shown.returncode == 1, shown.stderr
    text = shown.stdout + shown.stderr
    assert "\x1b" not in text and "\\x1b[2J\\x1b]0;owned\\x07visible" in text
    (line,) = [x for x in text.splitlines() if x.strip().startswith("big ")]
    assert "passed" in line and "output 30000 bytes" in line
    record = max((tmp_path / "build" / "tests").rglob("noisy.json"), key=lambda p: p.stat().st_mtime_ns)
    checks = {c["name"]: c for c in json.loads(record.read_text())["checks"]}
    assert checks["big"]["output_size"] == 30000 and not checks["big"]["output_head_only"]
    assert checks["forge"]["output_size"] > OUTPUT_LIMIT and checks["forge"]["output_tail"].endswith("x" * 50)
    assert checks["forge"]["result"] == "failed"
    keys = [o["Key"] for o in boto3.client("s3", region_name=REGION).list_objects_v2(Bucket=BUCKET)["Contents"]]
    instance = json.loads(record.read_text())["instance_id"]
    big = [k for k in keys if k.startswith("amibuild/boot-test/") and "/big/" in k]
    assert len(big) == 1 and big[0].endswith(f"/{instance}/awsrunShellScript/0.awsrunShellScript/stdout")


def test_a_send_command_held_past_its_timeout_is_not_tested_and_keeps_the_earlier_passed_tag(tmp_path: Path,
                                                                                                sandbox):
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    ami = foreign_image("ob-noisy-held")
    ec2 = boto3.client("ec2", region_name=REGION)
    ec2.create_tags(Resources=[ami], Tags=[{"Key": "amibuild:test", "Value": "passed"},
                                           {"Key": "amibuild:test-run", "Value": "an-earlier-run"}])
    with FaultProxy(sandbox.endpoint) as proxy:
        proxy.pause({"AmazonSSM.SendCommand"})
        try:
            done = run_cli(tmp_path, "test-ami", "--variant", "noisy", "--ami", ami, "--json", binary="amibuild",
                           env={"AWS_ENDPOINT_URL": proxy.endpoint, "AMIBUILD_READ_TIMEOUT": "1"})
        finally:
            proxy.resume(drop=True)
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["result"] == "not tested" and result["error"].startswith("not tested: ssm:SendCommand")
    assert {c["result"] for c in result["checks"]} == {"not tested"} and result["terminated"]
    assert all(c["reason"] for c in result["checks"])
    # never failed, and the earlier verdict stands
    assert image_tag(ami) == "passed" and image_tag(ami, "amibuild:test-run") == "an-earlier-run"
    assert result["tagged"] == [] and f"{ami} in {REGION} keeps amibuild:test=passed" in " ".join(result["notes"])


# ------------------------------------------------------------------------------- the shipped scripts


def test_the_shipped_scripts_know_nothing_of_the_sandbox_and_exit_127_there_is_a_failure(tmp_path: Path):
    liar = imagetests.Check("missing", "echo amibuild-check: stand-in; no-such-tool-here --version", builtin=False)
    plain = [imagetests.Check("ok", "true", builtin=False)]
    for script in (imagetests.checks_script(plain), imagetests.check_command(plain[0])):
        assert ".amibuild-rehearse" not in script and "stand-in" not in script
    # stage 2 as a real instance's agent runs it (sh): the exit status is the check's, and the verdict
    (tmp_path / "check.sh").write_text(imagetests.check_command(liar))
    ran = subprocess.run(["sh", str(tmp_path / "check.sh")], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 127
    status = "Success" if ran.returncode == 0 else "Failed"
    result = invocation.judge("missing", Invocation("c", "i", status, ran.returncode, ran.stdout, ran.stderr, status),
                              invocation.Output(ran.stdout, ran.stderr), 0.1)
    assert result.verdict == imagetests.Verdict.FAILED and result.exit_status == 127
    # stage 1 on the build instance: the script's own exit status fails the build (run under bash -e)
    checks = [imagetests.Check("ok", "echo fine", builtin=False), liar,
              imagetests.Check("slow", "sleep 30", timeout=1, builtin=False),
              imagetests.Check("tricky", "cat <<'AMIBUILD_CHECK_4_END'\nhi\nAMIBUILD_CHECK_4_END\n", builtin=False)]
    (tmp_path / "checks.sh").write_text(imagetests.checks_script(checks))
    stage1 = subprocess.run(["bash", "-eu", str(tmp_path / "checks.sh")], capture_output=True, text=True, timeout=60)
    assert stage1.returncode == 1 and "hi" in stage1.stdout  # every check ran, under bash -e too
    (tmp_path / "pass.sh").write_text(imagetests.checks_script([checks[0], checks[3]]))
    assert subprocess.run(["bash", "-eu", str(tmp_path / "pass.sh")], capture_output=True, timeout=60).returncode == 0
    for check, code in ((checks[0], 0), (checks[2], 124), (checks[3], 0)):
        (tmp_path / "one.sh").write_text(imagetests.check_command(check))
        assert subprocess.run(["sh", str(tmp_path / "one.sh")], capture_output=True, timeout=60).returncode == code


def test_a_check_exiting_194_fails_and_never_asks_the_ssm_agent_to_reboot(tmp_path: Path):
    """SSM's agent takes exit 194 from AWS-RunShellScript as "reboot the instance and run it again":
    a failing check must not reboot the test instance into a loop that ends "not tested"."""
    (tmp_path / "one.sh").write_text(imagetests.check_command(imagetests.Check("r", "echo down; exit 194", builtin=False)))
    ran = subprocess.run(["sh", str(tmp_path / "one.sh")], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 1 and "down" in ran.stdout and "194" in ran.stderr


def test_an_instance_ec2_does_not_show_yet_right_after_run_instances_is_pending_not_an_error():
    """EC2 is eventually consistent: DescribeInstances may answer InvalidInstanceID.NotFound for an
    instance RunInstances just launched (botocore's instance_running waiter retries on it)."""
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url="http://127.0.0.1:9", aws_access_key_id="x",
                       aws_secret_access_key="x")
    with Stubber(ec2) as stub:
        stub.add_client_error("describe_instances", "InvalidInstanceID.NotFound", "The instance ID 'i-1' does not exist")
        assert TestInstances(SimpleNamespace(client=lambda *_: ec2)).state(REGION, "i-1").state == "pending"


def ssm(status: str, code: int, details: str = "", stdout: str = "", stderr: str = "") -> Invocation:
    return Invocation("c-1", "i-1", status, code, stdout, stderr, details or status)


@pytest.mark.parametrize("answer, verdict", [
    (ssm("Success", 0), "passed"),
    (ssm("Failed", 3), "failed"),
    (ssm("Failed", 127), "failed"),
    (ssm("TimedOut", -1, "ExecutionTimedOut"), "failed"),  # ran past its own timeout: the check's fault
    (ssm("TimedOut", -1, "DeliveryTimedOut"), "not tested"),  # the agent never took it
    (ssm("Failed", -1, "Undeliverable", stderr="agent gone"), "not tested"),
    (ssm("Failed", -1, "Terminated"), "not tested"),  # the instance went away
    (ssm("Cancelled", -1, "Cancelled"), "not tested"),
    (ssm("Failed", -1), "not tested"),  # no exit status at all
    # the output never decides: a pass that prints failure and a failure that prints passes
    (ssm("Success", 0, stdout="amibuild-check: x exit=1 seconds=0\nFAILED"), "passed"),
    (ssm("Failed", 1, stdout="amibuild-check: x exit=0 seconds=0\n" + "x" * OUTPUT_LIMIT), "failed"),
])
def test_an_invocation_is_judged_by_its_status_and_response_code_only(answer: Invocation, verdict: str):
    result = invocation.judge("x", answer, invocation.Output(answer.stdout, answer.stderr), 0.5)
    assert result.verdict == verdict
    if verdict == "not tested":
        assert result.reason.startswith("SSM command c-1: ") and result.exit_status is None
        assert result.shown.startswith("not tested: SSM command c-1")


def test_the_output_is_head_only_without_s3_and_sized_with_it():
    head = "y" * OUTPUT_LIMIT
    without = invocation.judge("big", ssm("Success", 0, stdout=head), invocation.Output(head, ""), 1.0)
    assert without.verdict == "passed" and without.head_only and without.output_size is None
    assert without.to_dict()["output_head_only"] is True
    stored = invocation.Output(head, "", StoredOutput(30000, "y" * 100 + "END"), None, from_s3=True)
    sized = invocation.judge("big", ssm("Success", 0, stdout=head), stored, 1.0)
    assert sized.output_size == 30000 and not sized.head_only and sized.output.endswith("END")
    assert invocation.judge("short", ssm("Success", 0, stdout="ok"), invocation.Output("ok", ""), 1.0).head_only is False


def test_stderr_is_cut_at_8000_characters_by_ssm_and_by_the_emulator(monkeypatch):
    """GetCommandInvocation keeps the first 24,000 characters of stdout but 8,000 of stderr."""
    cut = "e" * 8000
    assert invocation.judge("err", ssm("Failed", 1, stderr=cut), invocation.Output("", cut), 1.0).head_only
    monkeypatch.setattr(runcommand, "run_on_standin", lambda *_: runcommand.Answer("Failed", "Failed", 1, "o", "e" * 9000))
    ec2 = SimpleNamespace(get_instance=lambda _: SimpleNamespace(image_id="ami-1"), tags={})
    sent = {"InstanceId": "i-1", "Status": "InProgress"}
    runcommand._run(ec2, SimpleNamespace(output_s3_bucket_name="", invocations=[sent], status=""), sent, "exit 1")
    assert len(sent["StandardErrorContent"]) == 8000 and sent["StandardOutputContent"] == "o"


def test_overall_passes_only_when_every_check_passed_and_not_tested_never_tags_failed():
    def r(verdict: imagetests.Verdict) -> imagetests.CheckResult:
        return imagetests.CheckResult("c", "boot", verdict, None, 0.1)

    passed, failed, untested = r(imagetests.Verdict.PASSED), r(imagetests.Verdict.FAILED), r(imagetests.Verdict.NOT_TESTED)
    assert imagetests.overall([passed]) == imagetests.Verdict.PASSED
    assert imagetests.overall([passed, untested]) == imagetests.Verdict.NOT_TESTED
    assert imagetests.overall([passed, untested, failed]) == imagetests.Verdict.FAILED
    assert imagetests.overall([]) == imagetests.Verdict.UNTESTABLE  # nothing proven
    assert imagetests.TAG_VALUES[imagetests.Verdict.NOT_TESTED] == "untested"
    assert imagetests.verdict(127) == imagetests.Verdict.FAILED and imagetests.verdict(0) == imagetests.Verdict.PASSED


@pytest.mark.parametrize("raw, shown", [
    ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),  # clear screen, cursor home
    ("\x1b]0;owned\x07", "\\x1b]0;owned\\x07"),  # OSC: the window title
    ("ok\rFAKE", "ok\\rFAKE"),  # a carriage return that would overwrite the line
    ("\x9b31m", "\\x9b31m"),  # the C1 CSI
    ("abc\u202edcba", "abc\\u202edcba"),  # a bidi override
    ("line one\n\tline two", "line one\n\tline two"),  # newline and tab stay
])
def test_control_characters_are_shown_as_escapes(raw: str, shown: str):
    assert printable(raw) == shown
    result = imagetests.CheckResult("c", "boot", imagetests.Verdict.FAILED, 1, 0.1, raw)
    assert result.to_dict()["output_tail"] == shown.rstrip("\n")


@NEEDS_BUILD
def test_build_ami_boot_test_takes_the_configured_read_timeout_and_a_held_send_command_is_not_tested(
        tmp_path: Path, sandbox):
    """build-ami --boot-test bounds SendCommand by config `amibuild.read_timeout` as test-ami does: a
    held SendCommand ends as "not tested" (never `failed`, nothing published) within that timeout."""
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    with FaultProxy(sandbox.endpoint) as proxy:
        proxy.pause({"AmazonSSM.SendCommand"})
        try:
            done = run_cli(tmp_path, "build-ami", "--variant", "noisy", "--boot-test", "--json", binary="amibuild",
                           env={"AWS_ENDPOINT_URL": proxy.endpoint, "AMIBUILD_READ_TIMEOUT": "1"})
        finally:
            proxy.resume(drop=True)
    assert done.returncode == 1, done.stderr
    (variant,) = json.loads(done.stdout)["variants"]
    tested = variant["boot_test"]
    assert tested["result"] == "not tested" and "ReadTimeoutError" in tested["error"], tested
    assert {c["result"] for c in tested["checks"]} == {"not tested"} and tested["terminated"]
    # bounded by the configured 1 s: the gateway's own 30 s would have held the checks longer than this
    assert tested["phases"]["checks"] < 30, tested["phases"]
    assert variant["publish_error"].startswith("boot test: not tested: ssm:SendCommand"), variant["publish_error"]
    assert "failed" not in variant["publish_error"].split(":")[0]
    assert not variant.get("published"), variant
    assert image_tag(variant["amis"][REGION]) == "untested"  # a fresh image: no earlier verdict to keep
    assert tested["statement"]["signed"]  # the signed test statement says "not tested", too


class _Impaired:
    """The boot test's calls, of an instance whose EC2 status checks say ``system`` / ``instance``."""

    def __init__(self, aws, read_timeout: float = 0.0, *, system: str = "ok", instance: str = "ok",
                 later: str = "running"):
        self.aws, self.system, self.instance, self.tagged = self, system, instance, {}
        self.looks, self.later = 0, later  # `later`: its state from the second look on

    def run_instance(self, region, **_):
        return "i-1"

    def state(self, region, instance_id):
        self.looks += 1
        if self.looks > 1 and self.later != "running":  # no status checks for an instance not running
            return InstanceState(instance_id, self.later)
        return InstanceState(instance_id, "running", self.system, self.instance)

    def terminate_instances(self, region, ids):
        self.system = self.instance = ""

    def image_tag(self, region, ami, key):
        return "passed"  # an earlier verdict

    def tag_image(self, region, ami, values):
        self.tagged[ami] = values


@pytest.mark.parametrize("system, instance, verdict", [
    ("impaired", "impaired", "not tested"),  # AWS's host (system status): says nothing of the image
    ("impaired", "ok", "not tested"),
    ("ok", "impaired", "failed"),  # the instance's own software (instance status): the image's fault
])
def test_an_impaired_system_status_is_aws_s_host_not_the_image(tmp_path: Path, monkeypatch, system, instance, verdict):
    (tmp_path / "amibuild.hcl").write_text('variant "v" {\n}\n')
    variant = load(tmp_path / "amibuild.hcl").variants[0]
    api = _Impaired(None, system=system, instance=instance)
    monkeypatch.setattr(boot, "TestInstances", lambda aws, read_timeout=0.0: api)
    result = boot.boot_test(None, variant=variant, amis={REGION: "ami-1"}, region=REGION, run_id="r",
                            settings=boot.BootTestSettings(poll=0.0), sleep=lambda _: None)
    assert result.verdict == verdict, result.error
    assert api.tagged == ({} if verdict == "not tested" else {"ami-1": api.tagged["ami-1"]})  # keeps its passed tag


def test_an_instance_that_stops_during_its_status_checks_ends_the_test_at_once(tmp_path: Path, monkeypatch):
    """Stopped or terminated while EC2's status checks were awaited: its checks never come; the test ends
    at the next look, as it does before `running`, instead of waiting out its whole timeout."""
    (tmp_path / "amibuild.hcl").write_text('variant "v" {\n}\n')
    variant = load(tmp_path / "amibuild.hcl").variants[0]
    api = _Impaired(None, system="initializing", instance="initializing", later="stopped")
    monkeypatch.setattr(boot, "TestInstances", lambda aws, read_timeout=0.0: api)
    result = boot.boot_test(None, variant=variant, amis={REGION: "ami-1"}, region=REGION, run_id="r",
                            settings=boot.BootTestSettings(poll=0.0, timeout=3600), sleep=lambda _: None,
                            clock=iter(range(0, 10**6, 60)).__next__)
    assert result.verdict == "not tested", result.error
    assert "is stopped during its status checks" in result.error and api.looks < 5  # not 60 looks to the timeout
