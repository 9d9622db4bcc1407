"""The emulator's SSM agent: DescribeInstanceInformation and Run Command on an image's stand-in.

moto answers SendCommand with "Success" and no output for any command, and has no
DescribeInstanceInformation. For the boot test the sandbox plays the instance's SSM agent:

- every running instance is registered (PingStatus Online, Linux), as an instance with the agent
  and a role that allows it is a few seconds after boot;
- ``AWS-RunShellScript`` runs its commands, as root, on the stand-in of the instance's image
  (`amibuild.imagetest.standin`: the variant's real chain rehearsed in a throwaway copy of this
  machine, found by the image's ``amibuild:fingerprint`` tag), in a thread: the invocation is
  ``InProgress`` until it ends, then ``Success`` or ``Failed`` with the exit code and the first
  24,000 characters of the output, as SSM keeps them. Where nothing can run (an image without a
  stand-in, one this sandbox did not build; no root for the copy) every check of the script is
  answered "cannot answer" with the reason (`untestable`): not testable here, never a pass.

EC2's status checks need no patch: moto reports ``ok`` for a running instance.
"""

from __future__ import annotations

import threading
from typing import Any

OUTPUT_LIMIT = 24000
FINGERPRINT_TAG = "amibuild:fingerprint"


def install() -> None:
    """Patch moto's SSM backend and responses (called once in the emulator's process)."""
    from moto.core.responses import ActionResult
    from moto.ec2.models import ec2_backends
    from moto.ssm.models import SimpleSystemManagerBackend
    from moto.ssm.responses import SimpleSystemManagerResponse

    original = SimpleSystemManagerBackend.send_command

    def send_command(self: Any, **kwargs: Any) -> Any:
        command = original(self, **kwargs)
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
    status, code, out, err = "Failed", 1, "", ""
    try:
        instance = ec2.get_instance(invocation["InstanceId"])
        fingerprint = ec2.tags.get(instance.image_id, {}).get(FINGERPRINT_TAG, "")
        status, code, out, err = run_on_standin(fingerprint, instance.image_id, script)
    except Exception as exc:  # the agent reports, it does not crash the emulator
        err = f"amibuild sandbox: the command could not run: {exc.__class__.__name__}: {exc}"
    invocation.update(Status=status, StatusDetails=status, ResponseCode=code,
                      StandardOutputContent=out[:OUTPUT_LIMIT], StandardErrorContent=err[:OUTPUT_LIMIT])
    if all(i["Status"] != "InProgress" for i in command.invocations):
        command.status = "Success" if all(i["Status"] == "Success" for i in command.invocations) else "Failed"


def run_on_standin(fingerprint: str, image_id: str, script: str) -> tuple[str, int, str, str]:
    """(status, response code, stdout, stderr) of ``script`` run on the image's stand-in."""
    # deferred: the emulator loads this patch at start-up; the stand-in machinery only once a command runs
    from amibuild.errors import AmibuildError
    from amibuild.imagetest import standin

    root = standin.store() / fingerprint if fingerprint else None
    if root is None or not (root / standin.STANDIN_DIR).is_dir():
        return untestable(script, f"{image_id} has no stand-in here (not built by amibuild in this sandbox, or its "
                                  "stand-in was removed): nothing can run on it")
    try:
        done = standin.run(root, script)
    except AmibuildError as exc:  # e.g. not root: no copy of this machine can be made
        return untestable(script, str(exc))
    if done.untestable:
        return untestable(script, done.untestable)
    if not done.chain_ok:
        return "Failed", 1, "", f"amibuild sandbox: the image's chain failed on the stand-in: {done.failed_step}"
    code = done.exit_status if done.exit_status is not None else 1
    return ("Success" if code == 0 else "Failed"), code, done.output, ""


def untestable(script: str, reason: str) -> tuple[str, int, str, str]:
    """What the agent answers when nothing of ``script`` can run here: each of its checks (amibuild's checks
    script) reported with the stand-in's "cannot answer" status and the reason, so the boot test reads
    them as not testable here, never as a pass nor as a failure of the image."""
    import re

    from amibuild.pipeline import imagetests  # deferred, as above

    message = f"amibuild sandbox: not testable here: {reason}"
    names = re.findall(r"^run_check '?([a-z0-9_-]+)'? ", script, flags=re.M)
    if not names:
        return "Failed", 1, "", message
    lines = [f"{imagetests.MARK} stand-in"]
    for name in names:
        lines += [f"{imagetests.MARK} start {name}", message,
                  f"{imagetests.MARK} {name} exit={imagetests.STANDIN_GAP} seconds=0.00"]
    return "Failed", 1, "\n".join(lines) + "\n", message
