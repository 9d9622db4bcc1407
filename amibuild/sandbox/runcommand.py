"""The emulator's SSM agent: DescribeInstanceInformation and Run Command on an image's stand-in.

moto answers SendCommand with "Success" and no output for any command, and has no
DescribeInstanceInformation. For the boot test the sandbox plays the instance's SSM agent.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import threading
from typing import Any

OUTPUT_LIMIT, ERROR_LIMIT = 24000, 8000  # what GetCommandInvocation keeps of stdout, of stderr
FINGERPRINT_TAG = "amibuild:fingerprint"
PLUGIN_FOLDER = "awsrunShellScript/0.awsrunShellScript"  # the agent's folder of AWS-RunShellScript's one step


def install() -> None:
    """Patch moto's SSM backend and responses (called once in the emulator's process)."""
    from moto.core.responses import ActionResult
    from moto.ec2.models import ec2_backends
    from moto.ssm.models import SimpleSystemManagerBackend
    from moto.ssm.responses import SimpleSystemManagerResponse

    original = SimpleSystemManagerBackend.send_command

    def send_command(self: Any, **kwargs: Any) -> Any:
        requested = list(kwargs.get("instance_ids") or [])
        command = original(self, **kwargs)
        if not kwargs.get("targets"):
            # moto adds every instance of the region when no Targets are given (an empty filter matches
            # all, terminated ones too); SSM sends the command to the InstanceIds named, no others
            command.instance_ids = [i for i in command.instance_ids if i in requested]
            command.invocations = [i for i in command.invocations if i["InstanceId"] in requested]
        if command.document_name == "AWS-RunShellScript":
            script = "\n".join(command.parameters.get("commands", []))
            ec2 = ec2_backends[self.account_id][self.region_name]
            command.status = "InProgress"
            for invocation in command.invocations:
                invocation.update(Status="InProgress", StatusDetails="InProgress", ResponseCode=-1)
                threading.Thread(target=_run, args=(ec2, command, invocation, script), daemon=True,
                                 name=f"ssm-{command.command_id[:8]}").start()
        return command

    def describe_instance_information(self: Any) -> Any:
        wanted: set[str] = set()
        for item in self._get_param("Filters", []) or []:
            if item.get("Key") == "InstanceIds":
                wanted.update(item.get("Values", []))
        for item in self._get_param("InstanceInformationFilterList", []) or []:
            if item.get("key") == "InstanceIds":
                wanted.update(item.get("valueSet", []))
        ec2 = ec2_backends[self.current_account][self.region]
        listed = []
        for instance in ec2.all_running_instances():
            if wanted and instance.id not in wanted:
                continue
            listed.append({"InstanceId": instance.id, "PingStatus": "Online", "PlatformType": "Linux",
                           "PlatformName": "Amazon Linux", "AgentVersion": "3.3.0.0", "ResourceType": "EC2Instance",
                           "IsLatestVersion": True})
        return ActionResult({"InstanceInformationList": listed})

    SimpleSystemManagerBackend.send_command = send_command
    SimpleSystemManagerResponse.describe_instance_information = describe_instance_information


def _run(ec2: Any, command: Any, invocation: dict[str, Any], script: str) -> None:
    answer = Answer("Failed", "Failed", 1)
    try:
        instance = ec2.get_instance(invocation["InstanceId"])
        fingerprint = ec2.tags.get(instance.image_id, {}).get(FINGERPRINT_TAG, "")
        answer = run_on_standin(fingerprint, instance.image_id, script)
    except Exception as exc:  # the agent reports, it does not crash the emulator
        answer = undeliverable(f"the command could not run: {exc.__class__.__name__}: {exc}")
    urls = {}
    if answer.ran and command.output_s3_bucket_name:
        urls = write_output(ec2.account_id, command.output_s3_bucket_name, output_key_prefix(command, invocation),
                            answer.stdout, answer.stderr)
    invocation.update(Status=answer.status, StatusDetails=answer.details, ResponseCode=answer.code,
                      StandardOutputContent=answer.stdout[:OUTPUT_LIMIT],
                      StandardErrorContent=answer.stderr[:ERROR_LIMIT],
                      StandardOutputUrl=urls.get("stdout", ""), StandardErrorUrl=urls.get("stderr", ""))
    if all(i["Status"] != "InProgress" for i in command.invocations):
        command.status = "Success" if all(i["Status"] == "Success" for i in command.invocations) else "Failed"


class Answer:
    """What the agent reports for one invocation."""

    def __init__(self, status: str, details: str, code: int, stdout: str = "", stderr: str = "", *,
                 ran: bool = False) -> None:
        self.status, self.details, self.code = status, details, code
        self.stdout, self.stderr, self.ran = stdout, stderr, ran


def undeliverable(reason: str) -> Answer:
    """The stand-in cannot answer: as SSM reports a command it could not deliver, with the reason."""
    return Answer("Failed", "Undeliverable", -1, "", f"amibuild sandbox: not testable here: {reason}\n")


def run_on_standin(fingerprint: str, image_id: str, script: str) -> Answer:
    """The agent's answer for ``script`` run on the image's stand-in."""
    # deferred: the emulator loads this patch at start-up; the stand-in machinery only once a command runs
    from amibuild.errors import AmibuildError
    from amibuild.sandbox import image_standin as standin

    root = standin.store() / fingerprint if fingerprint else None
    if root is None or not (root / standin.STANDIN_DIR).is_dir():
        return undeliverable(f"{image_id} has no stand-in here (not built by amibuild in this sandbox, or its "
                             "stand-in was removed): nothing can run on it")
    try:
        done = standin.run_command(root, script)
    except AmibuildError as exc:  # e.g. not root: no copy of this machine can be made
        return undeliverable(str(exc))
    if done.untestable:
        return undeliverable(done.untestable)
    if not done.chain_ok:
        return Answer("Failed", "Failed", 1, "", f"amibuild sandbox: the image's chain failed on the stand-in: "
                                                 f"{done.failed_step}\n", ran=True)
    (ran,) = done.scripts
    if ran.exit_status is None:
        return undeliverable("the command did not run on the stand-in" + (f" ({'; '.join(done.notes)})"
                                                                            if done.notes else ""))
    if ran.cannot_answer:
        return undeliverable(f"the image's stand-in cannot answer this command: {ran.cannot_answer}")
    code = ran.exit_status
    return Answer("Success" if code == 0 else "Failed", "Success" if code == 0 else "Failed", code,
                  ran.stdout, ran.stderr, ran=True)


def output_key_prefix(command: Any, invocation: dict[str, Any]) -> str:
    """Where the agent puts an invocation's output in the bucket: the command's key prefix, then
    ``<command id>/<instance id>/awsrunShellScript/0.awsrunShellScript``."""
    prefix = (command.output_s3_key_prefix or "").strip("/")
    return "/".join(p for p in (prefix, command.command_id, invocation["InstanceId"], PLUGIN_FOLDER) if p)


def write_output(account_id: str, bucket: str, prefix: str, stdout: str, stderr: str) -> dict[str, str]:
    """Write the whole stdout (and stderr, when there is any) as the agent does: {stream: its URL}."""
    from moto.s3.models import s3_backends

    s3 = s3_backends[account_id]["aws"]
    if bucket not in s3.buckets:
        return {}  # the agent's upload fails; the invocation's own answer stands
    region = s3.buckets[bucket].region_name
    urls = {}
    for name, text in (("stdout", stdout), ("stderr", stderr)):
        if name == "stderr" and not text:
            continue
        s3.put_object(bucket, f"{prefix}/{name}", text.encode("utf-8"))
        urls[name] = f"https://s3.{region}.amazonaws.com/{bucket}/{prefix}/{name}"
    return urls
