"""The "your own pipeline repository" walkthrough (docs/own-repository.md) runs, its ```sh blocks
exactly as written, one after the other in one shell, in a fresh folder against the sandbox, with
`amibuild` from the test venv on PATH. The sandbox is started by hand there (a ```text block): the
`sandbox` fixture stands in for it, with the variables its `export` lines set."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import boto3

from amibuild import tags

ROOT = Path(__file__).resolve().parent.parent
WALKTHROUGH = ROOT / "docs" / "own-repository.md"
BIN = Path(sys.executable).parent  # the test venv: its amibuild


_SH_BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.S | re.M)


def sh_blocks(page: Path) -> list[str]:
    """The page's ```sh blocks, as written (other fences, ```text and ```hcl, are not run)."""
    return _SH_BLOCK.findall(page.read_text(encoding="utf-8"))


def test_the_walkthrough_has_its_steps() -> None:
    script = "\n".join(sh_blocks(WALKTHROUGH))
    for command in ("amibuild init", "amibuild build-ami", "--boot-test", 'channel "stable"', "amibuild promote",
                    "amibuild nodegroup-deploy", "amibuild rollout", "amibuild fleet"):
        assert command in script, command
    # the sandbox is started by hand in a terminal of its own, so that step is shown, not run
    assert "```text\namibuild sandbox\n```" in WALKTHROUGH.read_text(encoding="utf-8")


def test_the_walkthrough_runs_as_written_against_the_sandbox(sandbox, tmp_path: Path) -> None:
    # what the `export` lines of `amibuild sandbox` set: its env() and the seeded network
    network = sandbox.cluster()
    env = {**os.environ, "AMIBUILD_SANDBOX_CLUSTER": network["cluster"], "AMIBUILD_SANDBOX_VPC_ID": network["vpc"],
           "AMIBUILD_SANDBOX_SUBNETS": ",".join(network["subnets"]),
           "AMIBUILD_SANDBOX_CONTROL_PLANE_SG": network["control_plane_sg"],
           "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")]), "HOME": str(tmp_path)}
    env.pop("PYTHONPATH", None)
    blocks = sh_blocks(WALKTHROUGH)
    script = "set -euo pipefail\n" + "\n".join(
        f"echo '### walkthrough block {number}' >&2\n{block}" for number, block in enumerate(blocks, start=1))
    ran = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, f"exit {ran.returncode}\n--- stdout\n{ran.stdout[-4000:]}\n--- stderr\n{ran.stderr[-4000:]}"
    # what the walkthrough left in AWS, read back: not its wording
    region = "us-west-2"
    ssm, ec2 = boto3.client("ssm", region_name=region), boto3.client("ec2", region_name=region)
    stable = ssm.get_parameter(Name="/amibuild/eks-workers/1.35/ceph-al2023/stable/image_id")["Parameter"]
    assert stable["Version"] == 2                                        # promoted twice
    (image,) = ec2.describe_images(ImageIds=[stable["Value"]])["Images"]
    image_tags = {t["Key"]: t["Value"] for t in image["Tags"]}
    assert image_tags[tags.TEST] == "passed"                             # its boot test passed, so the gate let it in
    assert "htop" in image_tags[tags.EXTRA_PACKAGES]                     # the second image
    (stack,) = boto3.client("cloudformation", region_name=region).describe_stacks(StackName="nodes")["Stacks"]
    assert stack["StackStatus"] == "UPDATE_COMPLETE"                     # deployed, then rolled out
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
    (latest,) = ec2.describe_launch_template_versions(LaunchTemplateId=outputs["NodeLaunchTemplate"],
                                                      Versions=["$Latest"])["LaunchTemplateVersions"]
    assert latest["LaunchTemplateData"]["ImageId"] == stable["Value"]   # the rollout reached the launch template
    assert (tmp_path / "eks-images" / "amibuild.hcl").is_file()         # init, in the folder the page made
    assert len(list((tmp_path / "eks-images" / "build" / "runs").glob("*.json"))) == 3  # three build runs recorded
    assert "fleet" in ran.stdout and "consumer" in ran.stdout            # the fleet printed its consumers
