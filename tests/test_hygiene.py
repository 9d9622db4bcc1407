"""The image clean of its build instance: the clean-up step, its hygiene checks, the upstream-level checks.

Rendered builds run the user's scripts, the stage-1 checks, the clean-up, then its checks, last;
the clean-up's own script is run against a temporary root; rehearsals (root only, an overlay copy of
this machine) show it empties the copy's machine-id and keeps this machine's, and that a step after
it which writes /etc/hostname fails the hygiene checks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from conftest import needs_rehearsal, run_cli

from amibuild import hcl
from amibuild import render as render_mod
from amibuild.pipeline import Overrides, hygiene, imagetests, load
from amibuild.rehearse import overlay, rehearse
from amibuild.rehearse.rehearsal_report import FAILED, OK
from amibuild.rehearse.steps import Step
from amibuild.render import Provisioner, ProvisionerKind, SourceAmi, Target
from amibuild.sandbox import image_standin as standin
from amibuild.sandbox.transform import SandboxTarget, sandboxed

PROVISION = Path(__file__).resolve().parent.parent / "amibuild" / "render" / "provision"

PIPELINE = """\
pipeline {
  name    = "h"
  regions = ["us-west-2"]
}

variant "ceph" {
  os                 = "al2"
  kubernetes_version = "1.30"
  extra_packages     = ["ceph-common"]
  scripts            = ["site.sh"]
}
"""


def variants(tmp_path: Path, text: str = PIPELINE):
    (tmp_path / "amibuild.hcl").write_text(text)
    (tmp_path / "site.sh").write_text("#!/usr/bin/env bash\nset -euo pipefail\necho site\n")
    return load(tmp_path / "amibuild.hcl", Overrides())


def build_of(tmp_path: Path, text: str = PIPELINE) -> render_mod.Build:
    pipeline = variants(tmp_path, text)
    return render_mod.render_build(pipeline, pipeline.variants[0], uses_plugins=True, target=Target(),
                                   sources={r: SourceAmi("lookup") for r in pipeline.regions})


def provisioners(rendered: render_mod.Rendered) -> list[tuple[str, dict]]:
    build = hcl.loads(rendered.files[render_mod.HCL_FILE])["build"][0]
    return [(kind, body) for p in build["provisioner"] for kind, body in p.items()]


def step_name(body: dict) -> str:
    if body.get("direction") == "download":
        return "download " + str(body.get("source", ""))
    return str(body.get("script", "")).rsplit("/", 1)[-1] or "inline"


# ------------------------------------------------------------------------------ render


def test_a_layered_build_runs_the_scripts_then_the_checks_then_the_clean_up_then_its_checks_last(
        tmp_path: Path) -> None:
    rendered = render_mod.finish(build_of(tmp_path))
    names = [step_name(body) for _, body in provisioners(rendered)]
    # stage 1's package list and its download go before the caches' clean-up, which removes /tmp/amibuild-*
    assert names == ["install-packages.sh", "user-01-site.sh", "amibuild-checks.sh", "inventory.sh",
                     "download /tmp/amibuild-inventory.tsv", "inline", "cleanup.sh", "amibuild-hygiene.sh"]
    source = next(iter(hcl.loads(rendered.files[render_mod.HCL_FILE])["source"][0]["amazon-ebs"].values()))
    assert source["ssh_clear_authorized_keys"] is True
    # the clean-up is amibuild's own script, shipped beside the template; the hygiene script holds its checks
    assert rendered.files["scripts/cleanup.sh"] == (PROVISION / "cleanup.sh").read_text()
    hygiene = rendered.files[render_mod.HYGIENE_SCRIPT]
    assert "run_check clean-machine-id " in hygiene and "run_check clean-logs " in hygiene
    assert "run_check kubelet " not in hygiene  # the stage-1 checks stay in their own step
    assert "run_check clean-machine-id " not in rendered.files[render_mod.CHECKS_SCRIPT]


@pytest.mark.skipif(shutil.which("packer") is None, reason="no packer binary on PATH")
def test_the_rendered_layered_build_passes_packer_validate(tmp_path: Path) -> None:
    from amibuild.bake.packer import Packer
    from amibuild.bake.prepare import check_directory

    pipeline = variants(tmp_path)
    packer = Packer()
    rendered = render_mod.render_variant(pipeline, pipeline.variants[0], uses_plugins=packer.version().uses_plugins,
                                         target=Target(), sources={r: SourceAmi("lookup") for r in pipeline.regions})
    directory = tmp_path / "out"
    for name, text in rendered.files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    check_directory(packer, directory)  # python-hcl2, packer validate, packer fmt -check


def test_turning_a_hygiene_check_off_turns_off_both_its_stages_and_all_of_them_off_drops_the_step(
        tmp_path: Path) -> None:
    off = "".join(f'  test "{name}" {{\n    enabled = false\n    reason  = "r"\n  }}\n'
                  for name in ("clean-machine-id",))
    variant = variants(tmp_path, PIPELINE.replace('  scripts            = ["site.sh"]\n', off)).variants[0]
    assert "clean-machine-id" not in [c.name for c in imagetests.check_set(variant, stage="boot").checks]
    assert "clean-machine-id" not in [c.name for c in imagetests.check_set(variant, stage="hygiene").checks]
    assert [d.name for d in imagetests.check_set(variant, stage="all").disabled] == ["clean-machine-id"]
    names = [name for name, _, _ in hygiene.after_cleanup()]
    every = "".join(f'  test "{name}" {{\n    enabled = false\n    reason  = "r"\n  }}\n' for name in names)
    build = build_of(tmp_path, PIPELINE.replace('  scripts            = ["site.sh"]\n', every))
    assert [p.kind for p in build.late][-1] is ProvisionerKind.CLEANUP
    assert render_mod.HYGIENE_SCRIPT not in build.shipped


# ------------------------------------------------------------------------------ amibuild tests


def test_amibuild_tests_lists_the_hygiene_and_upstream_level_checks_per_os_and_flavor(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text(
        'pipeline {\n  name = "h"\n  regions = ["us-west-2"]\n}\n'
        'variant "al2" {\n  os = "al2"\n  kubernetes_version = "1.30"\n}\n'
        'variant "al2-gpu" {\n  os = "al2"\n  kubernetes_version = "1.30"\n  flavor = "gpu"\n}\n'
        'variant "al2023" {\n  os = "al2023"\n}\n'
        'variant "al2023-nvidia" {\n  os = "al2023"\n  flavor = "nvidia"\n}\n')
    done = run_cli(tmp_path, "tests", "--json", binary="amibuild")
    assert done.returncode == 0, done.stderr
    listed = {e["variant"]: {c["name"] + "@" + "+".join(c["stages"]) for c in e["checks"]}
              for e in json.loads(done.stdout)}
    hygiene = {f"clean-{n}@hygiene" for n in ("machine-id", "ssh-host-keys", "authorized-keys", "cloud-init",
                                              "hostname", "dhcp-leases", "package-history", "resolv-conf", "logs",
                                              "tmp", "shell-history")}
    at_boot = {"clean-machine-id@boot", "clean-authorized-keys@boot"}
    every = {"unpigz@build+boot", "disk-free@build+boot", "no-nerdctl0@build+boot", "dkms@build+boot"}
    al2 = {"kernel-pinned@build+boot", "versionlock@build+boot"}
    nvidia = {"nvidia-version@build+boot"}
    for name, want in {"al2": every | al2, "al2-gpu": every | al2 | nvidia, "al2023": every,
                       "al2023-nvidia": every | nvidia}.items():
        assert hygiene | at_boot | want <= listed[name], name
        assert not ((al2 | nvidia) - want) & listed[name], name
    shown = run_cli(tmp_path, "tests", "--variant", "al2-gpu", binary="amibuild").stdout
    assert "3 in the boot test only, 11 of the clean-up (the build's last step)" in shown
    rows = [line.split(None, 3) for line in shown.splitlines() if line.startswith("  ")]
    assert ["kernel-pinned", "built-in", "build+boot", "the running kernel is the one the image pins "
            "(yum versionlock)"] in rows
    assert ["clean-logs", "built-in", "hygiene"] in [r[:3] for r in rows]


# ------------------------------------------------------------------------------ the clean-up's script


def fake_instance(root: Path) -> None:
    """What a build instance leaves: identity, keys, state, logs, /tmp."""
    files = {
        "etc/machine-id": "3d1219c7c4c5404aaa1f6d2a48adfda4\n", "etc/hostname": "ip-10-0-0-1\n",
        "etc/resolv.conf": "nameserver 10.0.0.2\n", "etc/ssh/ssh_host_ed25519_key": "k",
        "etc/ssh/ssh_host_ed25519_key.pub": "k", "etc/ssh/sshd_config": "PermitRootLogin no\n",
        "etc/passwd": "root:x:0:0:root:/root:/bin/bash\nec2-user:x:1000:1000::/home/ec2-user:/bin/bash\n"
                      "builder:x:1001:1001::/home/builder:/bin/bash\n",
        "root/.ssh/authorized_keys": "ssh-ed25519 AAAA packer\n", "root/.bash_history": "ls\n",
        "home/ec2-user/.ssh/authorized_keys": "ssh-ed25519 AAAA packer\n", "home/ec2-user/.bash_history": "ls\n",
        "home/builder/.ssh/authorized_keys": "ssh-ed25519 AAAA packer\n",
        "var/lib/cloud/instance/boot-finished": "", "var/lib/cloud/instances/i-1/x": "", "var/lib/cloud/sem/x": "",
        "var/lib/cloud/data/status.json": "{}", "var/lib/cloud/scripts/keep": "",
        "var/log/cloud-init.log": "x", "var/log/cloud-init-output.log": "x",
        "var/lib/dhclient/dhclient--eth0.lease": "lease", "var/lib/yum/history/history.sqlite": "",
        "var/lib/dnf/history.sqlite": "", "var/log/secure": "Dec  3 08:00:00 sshd\n",
        "var/log/messages": "Dec  3 08:00:00 kernel\n", "var/log/wtmp": "x", "var/log/audit/audit.log": "type=X\n",
        "var/log/audit/audit.log.1": "old\n", "tmp/leftover": "x", "tmp/.hidden": "x",
        "tmp/worker/version-info.json": "{}", "tmp/systemd-private-abc/tmp/x": "",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_the_clean_up_leaves_no_trace_of_the_build_instance_and_an_empty_machine_id(tmp_path: Path) -> None:
    root = tmp_path / "root"
    fake_instance(root)
    bindir = tmp_path / "bin"  # systemctl says nothing runs: no service is touched
    bindir.mkdir()
    (bindir / "systemctl").write_text("#!/bin/sh\nexit 3\n")
    (bindir / "systemctl").chmod(0o755)
    done = subprocess.run(["bash", str(PROVISION / "cleanup.sh")], capture_output=True, text=True, timeout=30,
                          env={"PATH": f"{bindir}:/usr/bin:/bin", "AMIBUILD_ROOT": str(root), "SUDO_USER": "builder",
                               "AMIBUILD_KEEP_TMP": "/tmp/worker"}, check=False)
    assert done.returncode == 0, done.stderr
    assert (root / "etc/machine-id").read_text() == ""  # there, empty: systemd writes a new id at boot
    assert (root / "var/lib/amibuild/build-machine-id.sha256").read_text().strip() == hashlib.sha256(
        b"3d1219c7c4c5404aaa1f6d2a48adfda4\n").hexdigest()
    assert (root / "var/lib/amibuild/cleanup-at").read_text().strip().isdigit()
    left = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert left == ["etc/machine-id", "etc/passwd", "etc/ssh/sshd_config", "tmp/systemd-private-abc/tmp/x",
                    "tmp/worker/version-info.json", "var/lib/amibuild/build-machine-id.sha256",
                    "var/lib/amibuild/cleanup-at", "var/lib/cloud/scripts/keep", "var/log/audit/audit.log"]
    assert (root / "var/log/audit/audit.log").read_text() == ""


# journalctl opens the journal of the local machine only (SD_JOURNAL_LOCAL_ONLY): the folder
# /var/log/journal/<id> whose name is /etc/machine-id's. With that file empty, it vacuums nothing there.
JOURNALCTL = """#!/bin/bash
id=$(cat "$AMIBUILD_ROOT/etc/machine-id")
for arg; do
    case $arg in
        --rotate) mv "$AMIBUILD_ROOT/var/log/journal/$LIVE/system.journal" \\
                     "$AMIBUILD_ROOT/var/log/journal/$LIVE/system@rotated.journal"
                  touch "$AMIBUILD_ROOT/var/log/journal/$LIVE/system.journal" ;;
        --vacuum-size=*) [ -n "$id" ] && rm -f "$AMIBUILD_ROOT/var/log/journal/$id"/*@*.journal ;;
    esac
done
exit 0
"""


def test_the_clean_up_vacuums_the_persistent_journal_before_it_empties_the_machine_id(tmp_path: Path) -> None:
    root, bindir, live = tmp_path / "root", tmp_path / "bin", "3d1219c7c4c5404aaa1f6d2a48adfda4"
    fake_instance(root)
    (root / "var/log/audit/audit.log").unlink()
    journal = root / "var/log/journal" / live
    journal.mkdir(parents=True)
    for name in ("system.journal", "system@0001-0002.journal", "user-1000@0003-0004.journal"):
        (journal / name).write_text("the build's log")
    bindir.mkdir()
    for name, text in (("systemctl", "#!/bin/sh\nexit 0\n"), ("journalctl", JOURNALCTL)):
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755)
    done = subprocess.run(["bash", str(PROVISION / "cleanup.sh")], capture_output=True, text=True, timeout=30,
                          env={"PATH": f"{bindir}:/usr/bin:/bin", "AMIBUILD_ROOT": str(root), "LIVE": live},
                          check=False)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in journal.iterdir()) == ["system.journal"]  # written since the rotation only
    assert (root / "etc/machine-id").read_text() == ""


@pytest.mark.skipif(shutil.which("utmpdump") is None, reason="no util-linux utmpdump")
@pytest.mark.parametrize("zone, after, passes", [("Asia/Tokyo", 60, True), ("America/Los_Angeles", -3600, False)])
def test_the_log_check_reads_wtmps_utc_times_as_utc_in_any_time_zone(tmp_path: Path, zone: str, after: int,
                                                                      passes: bool) -> None:
    (_, command, _), = [c for c in hygiene.after_cleanup() if c[0] == "clean-logs"]
    stamp = 1733213341  # 2024-12-03T08:09:01Z
    (tmp_path / "var/lib/amibuild").mkdir(parents=True)
    (tmp_path / "var/lib/amibuild/cleanup-at").write_text(f"{stamp}\n")
    (tmp_path / "var/log").mkdir(parents=True)
    at = datetime.fromtimestamp(stamp + after, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    line = f"[7] [01234] [ts/0] [ec2-user] [pts/0       ] [10.0.0.1            ] [10.0.0.1       ] [{at},000000+00:00]\n"
    (tmp_path / "var/log/wtmp").write_bytes(subprocess.run(["utmpdump", "-r"], input=line.encode(), capture_output=True,
                                                           check=True).stdout)
    done = subprocess.run(["bash", "-c", command.replace("/var/", f"{tmp_path}/var/")], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "TZ": zone}, timeout=30, check=False)
    assert (done.returncode == 0) is passes, done.stdout + done.stderr


# ------------------------------------------------------------------------------ rehearsals


@needs_rehearsal
def test_the_rehearsal_empties_the_machine_id_in_its_copy_and_keeps_this_machines(tmp_path: Path) -> None:
    mine = Path("/etc/machine-id").read_bytes() if Path("/etc/machine-id").exists() else None
    rendered = render_mod.finish(build_of(tmp_path))
    report = rehearse(rendered, keep=True)
    try:
        assert [(v.step.name, v.status) for v in report.steps][-2:] == [("cleanup.sh", OK),
                                                                       ("amibuild-hygiene.sh", OK)], report.steps
        assert "/etc/machine-id" in report.etc_written
        upper = Path(report.kept) / "upper"
        assert (upper / "etc/machine-id").read_bytes() == b""
        if mine:
            assert (upper / "var/lib/amibuild/build-machine-id.sha256").read_text().strip() == \
                hashlib.sha256(mine).hexdigest()
    finally:
        shutil.rmtree(report.kept, ignore_errors=True)
    assert (Path("/etc/machine-id").read_bytes() if Path("/etc/machine-id").exists() else None) == mine


def with_late_step(build: render_mod.Build) -> render_mod.Build:
    """``build`` with a step before its hygiene checks, after the clean-up, that writes /etc/hostname,
    a log line from before the clean-up and one from after it."""
    late = hcl.Block("provisioner", ("shell",))
    late.attr("inline", ["echo ip-10-0-0-1 | sudo tee /etc/hostname",
                         # a line from before the clean-up fails the log check; one written since does not
                         "echo 'Jan  1 00:00:01 ip-10-0-0-1 sshd[1]: old' | sudo tee /var/log/secure",
                         "sleep 1; date '+%b %e %H:%M:%S ip-10-0-0-1 sudo: new' | sudo tee /var/log/messages"])
    at = next(i for i, p in enumerate(build.late) if p.kind is ProvisionerKind.HYGIENE)
    return dataclasses.replace(build, late=(*build.late[:at], Provisioner(ProvisionerKind.SCRIPT, "late", (), late),
                                            *build.late[at:]))


@needs_rehearsal
def test_a_step_that_writes_etc_hostname_after_the_clean_up_fails_the_rehearsals_hygiene_step(tmp_path: Path) -> None:
    report = rehearse(render_mod.finish(with_late_step(build_of(tmp_path))))
    assert [(v.step.name.split(":")[0], v.status) for v in report.steps][-3:] == [
        ("cleanup.sh", OK), ("inline", OK), ("amibuild-hygiene.sh", FAILED)], report.steps
    assert report.failure is not None and report.failure.step == "amibuild-hygiene.sh"
    assert report.failure.exit_status == 1  # the step's exit status is the verdict


@needs_rehearsal
def test_a_step_that_writes_etc_hostname_or_an_old_log_line_after_the_clean_up_fails_those_hygiene_checks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(standin.STORE_ENV, str(tmp_path / "store"))
    build = with_late_step(build_of(tmp_path))
    where = SandboxTarget("http://127.0.0.1:9", sys.executable, str(tmp_path / "store"))
    rendered = render_mod.finish(sandboxed(build, where=where))
    root = render_mod.write(rendered, tmp_path / "sandbox", rendered.record(variants(tmp_path), "1.6.6"))
    status, lines, record = standin.stage1(root)
    # each check its own step, its verdict its own exit status: only these two failed
    verdicts = {(c["stage"], c["name"]): c["result"] for c in record["checks"]}
    failed = sorted(name for (_, name), result in verdicts.items() if result == "failed")
    assert status == 1 and failed == ["clean-hostname", "clean-logs"], lines
    assert verdicts[("hygiene", "clean-machine-id")] == "passed" and verdicts[("hygiene", "clean-tmp")] == "passed"
    assert {stage for stage, _ in verdicts} == {"build", "hygiene"}
    tails = {c["name"]: c["output_tail"] for c in record["checks"]}
    assert "left on the image by the build instance: /etc/hostname" in tails["clean-hostname"]
    assert tails["clean-logs"].endswith("): /var/log/secure")  # written before the clean-up (...): secure alone
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").iterdir())  # a failed image is not kept


@needs_rehearsal
def test_the_boot_test_fails_an_image_that_kept_the_build_instances_machine_id_and_passes_a_fresh_one(
        tmp_path: Path) -> None:
    if not Path("/etc/machine-id").is_file() or not Path("/etc/machine-id").read_text().strip():
        pytest.skip("this machine has no machine-id for the copy to keep")
    variant = variants(tmp_path).variants[0]
    (check,) = [c for c in imagetests.check_set(variant, stage="boot").checks if c.name == "clean-machine-id"]
    build = tmp_path / "build.sh"  # the build instance's id recorded, as the clean-up does
    build.write_text(f"mkdir -p {hygiene.STATE_DIR}\nsha256sum </etc/machine-id | cut -d' ' -f1 >"
                     f"{hygiene.BUILD_MACHINE_ID}\n")
    boot = tmp_path / "boot.sh"  # emptied by the clean-up, then a first boot's own
    boot.write_text("truncate -s 0 /etc/machine-id\ntr -d '-' </proc/sys/kernel/random/uuid >/etc/machine-id\n")
    (tmp_path / "check.sh").write_text(check.command + "\n")

    def steps(*scripts: Path) -> list[Step]:
        return [Step(number=i, provisioner=i, kind="shell", name=s.name, script=str(s),
                     command=f"sudo -S bash '/tmp/{s.name}'", remote_path=f"/tmp/{s.name}")
                for i, s in enumerate(scripts, start=1)]

    kept = overlay.run_steps(steps(build, tmp_path / "check.sh"), arch="x86_64", os_name="al2023")
    fresh = overlay.run_steps(steps(build, boot, tmp_path / "check.sh"), arch="x86_64", os_name="al2023")
    assert kept.results[-1].exit_status == 1
    assert "is the build instance's" in kept.results[-1].stdout
    assert fresh.results[-1].exit_status == 0, fresh.results[-1].stdout + fresh.results[-1].stderr


@needs_rehearsal
def test_the_boot_test_fails_an_image_that_kept_a_key_in_authorized_keys_and_passes_one_without(
        tmp_path: Path) -> None:
    variant = variants(tmp_path).variants[0]
    (check,) = [c for c in imagetests.check_set(variant, stage="boot").checks if c.name == "clean-authorized-keys"]
    (tmp_path / "check.sh").write_text(check.command + "\n")
    kept = tmp_path / "kept.sh"  # what Packer's temporary key looks like when nothing removed it
    kept.write_text("mkdir -p /root/.ssh\nprintf '# managed\\nssh-ed25519 AAAA packer_1234\\n' >/root/.ssh/authorized_keys\n")
    cleared = tmp_path / "cleared.sh"  # a comment is no key
    cleared.write_text("mkdir -p /root/.ssh\nprintf '# no keys here\\n\\n' >/root/.ssh/authorized_keys\n")

    def last(script: Path) -> tuple[int | None, str]:
        steps = [Step(number=i, provisioner=i, kind="shell", name=s.name, script=str(s),
                      command=f"sudo -S bash '/tmp/{s.name}'", remote_path=f"/tmp/{s.name}")
                 for i, s in enumerate((script, tmp_path / "check.sh"), start=1)]
        done = overlay.run_steps(steps, arch="x86_64", os_name="al2023").results[-1]
        return done.exit_status, done.stdout + done.stderr

    status, output = last(kept)
    assert status == 1 and "/root/.ssh/authorized_keys" in output, output
    assert last(cleared)[0] == 0
