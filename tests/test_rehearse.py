"""Rehearse end to end: real chains run in the overlay copy of this machine, through the CLI too.

These need root (an overlay of / in a private mount namespace), as CI and the development
machines have; elsewhere they are skipped, and `invoke rehearse` itself exits 2 saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from conftest import needs_rehearsal, run_cli

from amibuild import render as render_mod
from amibuild.pipeline import Overrides, load
from amibuild.rehearse import rehearse
from amibuild.rehearse.rehearsal_report import FAILED, OK, STOOD_IN
from amibuild.render import SourceAmi, Target

ROOT = Path(__file__).resolve().parent.parent

CEPH = """\
pipeline {
  name    = "t"
  regions = ["us-west-2"]
}

variant "ceph" {
  os                 = "al2"  # the chain checks AL2's files (/etc/yum.conf)
  kubernetes_version = "1.30"
  extra_packages = ["ceph-common"]
  repo "ceph" {
    baseurl = "https://download.ceph.com/rpm-octopus/el7/$basearch"
    gpgkey  = "https://download.ceph.com/keys/release.asc"
  }
  proxy {
    http     = "http://proxy.example:3128"
    https    = "http://proxy.example:3128"
    no_proxy = ".corp.example"
  }
}
"""


def render(tmp_path: Path, text: str, **overrides):
    (tmp_path / "amibuild.hcl").write_text(text)
    pipeline = load(tmp_path / "amibuild.hcl", Overrides(**overrides))
    from amibuild.render import upstream

    return [render_mod.render_variant(pipeline, v, uses_plugins=True, target=Target(),
                                      sources={r: SourceAmi("lookup") for r in pipeline.regions},
                                      upstream=upstream.load(Path(v.upstream)) if v.base == "upstream" else None)
            for v in pipeline.variants]


@needs_rehearsal
def test_the_ceph_repo_and_proxy_chain_installs_ceph_common_and_writes_the_proxy_files(tmp_path: Path) -> None:
    (rendered,) = render(tmp_path, CEPH)
    report = rehearse(rendered, keep=True)
    try:
        # proxy, repos, packages, the image's checks and inventory (stage 1) and its download, the cache clean-up,
        # the clean-up, its checks
        assert [v.status for v in report.steps] == [OK] * 9, report.steps
        assert report.steps[3].step.name == "amibuild-checks.sh"
        assert ("ceph-common", "") in report.packages
        for path in ("/etc/environment", "/etc/yum.conf", "/etc/yum.repos.d/amibuild-ceph.repo",
                     "/etc/systemd/system/containerd.service.d/http-proxy.conf",
                     "/etc/systemd/system/kubelet.service.d/http-proxy.conf"):
            assert path in report.etc_written
        upper = Path(report.kept) / "upper"
        assert "proxy=http://proxy.example:3128" in (upper / "etc/yum.conf").read_text()
        environment = (upper / "etc/environment").read_text()
        assert "HTTPS_PROXY=http://proxy.example:3128" in environment
        assert ".corp.example" in environment and "169.254.169.254" in environment
        assert "gpgkey=https://download.ceph.com/keys/release.asc" in (
            upper / "etc/yum.repos.d/amibuild-ceph.repo").read_text()
        assert report.ok and not report.findings  # our own scripts are shellcheck-clean
    finally:
        shutil.rmtree(report.kept, ignore_errors=True)


def snapshot(*tops: str, skip: tuple[str, ...] = ()) -> dict[str, tuple[int, int, int]]:
    """Every path under the tops: (mode, size, mtime); what a change to the host would show in."""
    seen = {}
    for top in tops:
        for folder, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if os.path.join(folder, d) not in skip]
            for name in dirs + files:
                path = os.path.join(folder, name)
                try:
                    info = os.lstat(path)
                except FileNotFoundError:
                    continue
                seen[path] = (info.st_mode, info.st_size, info.st_mtime_ns)
    return seen


@needs_rehearsal
def test_the_host_is_unchanged_by_a_chain_that_writes_and_deletes_everywhere(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "vandal.sh").write_text(
        "#!/usr/bin/env bash\nset -euo pipefail\n"
        "echo x > /etc/amibuild-rehearsal-test\n"
        "mkdir -p /usr/local/lib/amibuild-rehearsal-test && echo x > /usr/local/lib/amibuild-rehearsal-test/f\n"
        "echo x > /var/lib/amibuild-rehearsal-test\n"
        "rm -f /etc/hostname\n"
        "echo 1 > /proc/sys/vm/overcommit_memory || echo 'read-only, as meant'\n"
        "systemctl enable amibuild-rehearsal-test\n")
    (rendered,) = render(tmp_path, CEPH.replace('extra_packages = ["ceph-common"]',
                                                'extra_packages = ["ceph-common"]\n  scripts = ["vandal.sh"]'))
    # /var/log, /var/tmp and /var/cache change under other processes of this machine all the time
    skip = ("/var/log", "/var/tmp", "/var/cache", "/var/lib/apt", "/var/lib/systemd")
    overcommit = Path("/proc/sys/vm/overcommit_memory").read_text()
    before = snapshot("/etc", "/usr", "/var", skip=skip)
    # the rehearsal's temp folders go under a folder of this test's own (other rehearsals may run
    # on this machine at the same time), and must all be gone afterwards
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    report = rehearse(rendered)
    after = snapshot("/etc", "/usr", "/var", skip=skip)

    assert all(v.status == OK for v in report.steps), report.steps
    assert "/etc/amibuild-rehearsal-test" in report.etc_written and "/etc/hostname" in report.etc_removed
    assert ("amibuild-rehearsal-test.service", "enabled") in report.units
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    assert changed == []
    assert Path("/proc/sys/vm/overcommit_memory").read_text() == overcommit
    assert list(scratch.iterdir()) == [], "the temp folders are removed"


@needs_rehearsal
def test_an_unset_variable_under_set_u_fails_naming_the_script_and_line(tmp_path: Path) -> None:
    (tmp_path / "agent.sh").write_text(
        "#!/usr/bin/env bash\nset -u\necho \"installing agent for ${CLUSTER_NAME}\"\necho never\n")
    (rendered,) = render(tmp_path, CEPH.replace('extra_packages = ["ceph-common"]',
                                                'extra_packages = ["ceph-common"]\n  scripts = ["agent.sh"]'))
    report = rehearse(rendered)
    assert [v.status for v in report.steps] == [OK, OK, OK, FAILED] + ["not run"] * 6
    failure = report.failure
    assert (failure.script, failure.line) == ("scripts/user-01-agent.sh", 3)
    assert any("CLUSTER_NAME: unbound variable" in line for line in failure.output_tail)
    assert not report.ok


@needs_rehearsal
def test_a_typo_in_the_path_of_an_uploaded_file_fails_naming_the_script_and_line(tmp_path: Path) -> None:
    """A chain that uploads a file (as upstream's does) and a script that mistypes its path."""
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "agent.conf").write_text("endpoint = example\n")
    (tmp_path / "install-agent.sh").write_text(
        "#!/usr/bin/env bash\nset -euo pipefail\n\nsudo mkdir -p /etc/agent\n"
        "sudo install -m 0644 /tmp/uploads/agnet.conf /etc/agent/agent.conf\necho done\n")
    (rendered,) = render(tmp_path, CEPH)
    hcl_text = rendered.files[render_mod.HCL_FILE].replace("  post-processor \"manifest\"", f"""\
  provisioner "shell" {{
    inline = ["mkdir -p /tmp/uploads"]
  }}

  provisioner "file" {{
    source      = "{tmp_path}/files/"
    destination = "/tmp/uploads"
  }}

  provisioner "shell" {{
    script = "{tmp_path}/install-agent.sh"
  }}

  post-processor "manifest\"""", 1)
    from dataclasses import replace

    report = rehearse(replace(rendered, files={**rendered.files, render_mod.HCL_FILE: hcl_text}))
    statuses = {v.step.name: v.status for v in report.steps}
    assert statuses["inline: mkdir -p /tmp/uploads"] == OK
    assert statuses[f"file: .../{tmp_path.name}/files/ -> /tmp/uploads"] == OK
    assert statuses["install-agent.sh"] == FAILED
    assert (report.failure.script, report.failure.line) == (f"{tmp_path}/install-agent.sh", 5)
    assert any("agnet.conf" in line for line in report.failure.output_tail)


# ------------------------------------------------------------------------------------- the CLI


@needs_rehearsal
def test_invoke_rehearse_prints_a_line_per_step_and_json(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text(CEPH)
    result = run_cli(tmp_path, "rehearse", "--json")
    assert result.returncode == 0, result.stderr
    (got,) = json.loads(result.stdout)
    assert got["ok"] and got["complete"] and got["variant"] == "ceph"
    # proxy, repos, packages, checks, inventory, its download, the cache clean-up, the clean-up and its checks
    assert [s["status"] for s in got["steps"]] == ["ok"] * 9
    assert {"name": "ceph-common", "version": None} in got["packages"]
    text = run_cli(tmp_path, "rehearse")
    assert text.returncode == 0, text.stderr
    assert "would install: ceph-common" in text.stdout and "rehearsal passed" in text.stdout


@needs_rehearsal
def test_invoke_rehearse_exits_1_when_a_package_install_fails(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text(CEPH)
    result = run_cli(tmp_path, "rehearse", env={"AMIBUILD_REHEARSE_REFUSE": "ceph-common"})
    assert result.returncode == 1
    assert "install-packages.sh" in result.stdout and "FAILED" in result.stdout
    assert "amibuild: error: rehearsal failed for ceph" in result.stderr


def test_invoke_rehearse_refuses_bad_input_with_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text(CEPH.replace('extra_packages = ["ceph-common"]', 'scripts = ["gone.sh"]'))
    result = run_cli(tmp_path, "rehearse")
    assert result.returncode == 2
    assert result.stderr.startswith("amibuild: error: ") and "gone.sh" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "build").exists()


def test_invoke_rehearse_without_root_exits_2_saying_why(tmp_path: Path, monkeypatch) -> None:
    """The refusal itself, in process: whoever runs the suite, amibuild sees an unprivileged user."""
    (tmp_path / "amibuild.hcl").write_text(CEPH)
    monkeypatch.setattr(os, "geteuid", lambda: 65534)
    result = run_cli(tmp_path, "rehearse")
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("amibuild: error: rehearse needs root"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_rehearse_as_an_unprivileged_process_exits_2_saying_why(tmp_path: Path) -> None:
    """The same refusal in a real process whose user is not root, wherever the checkout sits.

    As root, the command runs in a new user namespace with no mapping (`unshare --user`): its
    effective uid is the overflow uid (65534) and it holds no privileges, yet the kernel still
    checks its file access as root's, so a checkout (and .venv) inside a folder only root can
    enter (`mktemp -d`) stays readable. Dropping to nobody with setpriv could not read them."""
    (tmp_path / "amibuild.hcl").write_text(CEPH)
    argv = [sys.executable, "-m", "amibuild", "rehearse"]
    if os.geteuid() == 0:
        if shutil.which("unshare") is None:
            pytest.skip("needs util-linux's unshare to run a command without root")
        argv = ["unshare", "--user", *argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("AMIBUILD_DEBUG", None)
    result = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("amibuild: error: rehearse needs root"), result.stderr
    assert not (tmp_path / "build").exists()


# ------------------------------------------------------------------------------------- upstream


def shared() -> Path:
    candidates = [Path(os.environ["AMIBUILD_SHARED"])] if os.environ.get("AMIBUILD_SHARED") else []
    candidates += [ROOT.parent / "shared", ROOT.parent.parent / "shared"]
    found = next((c for c in candidates if (c / "upstream" / "amazon-eks-ami").is_dir()), None)
    if found is None:
        pytest.skip("no upstream snapshots (../shared/upstream/amazon-eks-ami) next to this checkout")
    return found / "upstream" / "amazon-eks-ami"


# (snapshot, os, the pins upstream's Makefile would resolve from S3 for `make k8s=1.N`: not reachable here)
SNAPSHOTS = {
    "v20201117": ("al2", "1.29.0", ()),
    "v20240117": ("al2", "1.29.0", ()),
    "v20240615": ("al2", "1.29.0", ("user_data_file=/dev/null",)),
    "81fec2e8": ("al2023", "1.33.0", ()),
}
# Every chain of the snapshots, AL2 and AL2023 where the snapshot has both: ref or ref:os.
CHAINS = {**SNAPSHOTS, "v20240615:al2023": ("al2023", "1.30.0", ())}
BUILD_DATE = ("kubernetes_build_date=2024-01-04",)


def upstream_render(tmp_path: Path, ref: str):
    from amibuild.render import upstream

    os_family, version, extra = CHAINS[ref]
    archive = shared() / f"amazon-eks-ami-{ref.split(':')[0]}.tar.gz"
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "src", filter="data")
    (checkout,) = (tmp_path / "src").iterdir()
    if os_family == "al2023" and not (checkout / "nodeadm").is_dir():
        # The snapshot holds no nodeadm/ sources (its README says so); the AL2023 template uploads
        # them and builds them in a container, which the rehearsal stands in for anyway.
        (checkout / "nodeadm" / "cmd" / "nodeadm").mkdir(parents=True)
        (checkout / "nodeadm" / "Makefile").write_text("build:\n\tgo build -o _bin/ ./cmd/...\n")
    (tmp_path / "amibuild.hcl").write_text(
        'pipeline {\n  name = "t"\n  regions = ["us-west-2"]\n}\n'
        'variant "up" {\n  base = "upstream"\n  extra_packages = ["ceph-common"]\n}\n')
    pipeline = load(tmp_path / "amibuild.hcl", Overrides(
        upstream=str(checkout), os=os_family, kubernetes_version=version, variables=BUILD_DATE + extra))
    (variant,) = pipeline.variants
    template = upstream.load(Path(variant.upstream), os_family=os_family, k8s=version)
    return render_mod.render_variant(pipeline, variant, uses_plugins=True, target=Target(),
                                     sources={r: SourceAmi("lookup") for r in pipeline.regions}, upstream=template)


@needs_rehearsal
@pytest.mark.parametrize("ref", sorted(CHAINS))
def test_upstream_chain_rehearses_to_its_end_with_ceph_common_installed(tmp_path: Path, ref: str) -> None:
    """Every chain of the snapshots runs through: past install-worker.sh's credential check
    (`set -o nounset` over AWS_ACCESS_KEY_ID & co., kept as empty entries), and on AL2023 past the
    nodeadm build in a Go container (stood in: a stand-in nodeadm where `make build` leaves it),
    so the extra packages at the end are rehearsed too."""
    rendered = upstream_render(tmp_path, ref)
    assert '"AWS_ACCESS_KEY_ID="' in rendered.files[render_mod.HCL_FILE]

    report = rehearse(rendered)

    steps = "\n".join(f"{v.step.number}. {v.step.name}: {v.status} {v.reason}" for v in report.steps)
    assert report.ok and report.complete and not report.incomplete, steps
    assert all(v.status in (OK, STOOD_IN, "skipped") for v in report.steps), steps
    assert ("ceph-common", "") in report.packages, report.packages
    names = [v.step.name for v in report.steps]
    worker = next(n for n in names if "install-worker" in n)
    assert names.index("install-packages.sh") > names.index(worker)
    if CHAINS[ref][0] == "al2023":
        nodeadm = next(v for v in report.steps if v.step.name == "install-nodeadm.sh")
        assert nodeadm.status == STOOD_IN and "nodeadm stood in at /tmp/worker/nodeadm/_bin/" in nodeadm.reason, steps
        assert "make build" in nodeadm.reason
        assert ("nodeadm-config.service", "enabled") in report.units
    else:
        assert "/etc/eks/bootstrap.sh" in report.etc_written
        assert not any(v.status == STOOD_IN for v in report.steps)
    assert not report.own_findings  # upstream's shellcheck findings are only warnings


STAND_IN_EFFECTS = """\
#!/usr/bin/env bash
set -euo pipefail
# what upstream's chains of 2019 and 2025 do right after installing docker / on a fresh instance
sudo yum install -y docker
sudo usermod -aG docker "$USER"
sudo touch /etc/udev/rules.d/90-agent.rules
sudo install -d /etc/security/limits.d
"""


@needs_rehearsal
@pytest.mark.parametrize("os_family", ["al2", "al2023"])
def test_stand_ins_leave_what_chains_rely_on_the_docker_group_and_amazon_linux_folders(tmp_path: Path,
                                                                                      os_family: str) -> None:
    (tmp_path / "effects.sh").write_text(STAND_IN_EFFECTS)
    (rendered,) = render(tmp_path, CEPH.replace('extra_packages = ["ceph-common"]',
                                                'extra_packages = ["ceph-common"]\n  scripts = ["effects.sh"]'),
                         os=os_family)

    report = rehearse(rendered)

    steps = "\n".join(f"{v.step.name}: {v.status} {v.reason}" for v in report.steps)
    assert report.ok and report.complete, steps
    assert "/etc/udev/rules.d/90-agent.rules" in report.etc_written
    assert ("docker", "") in report.packages


def test_the_folder_list_beside_the_stand_ins_names_absolute_folders_udev_rules_among_them() -> None:
    from amibuild.rehearse.overlay import amazon_linux_folders

    folders = amazon_linux_folders()
    assert "etc/udev/rules.d" in folders and "etc/sysconfig" in folders
    assert all(not folder.startswith("/") and ".." not in folder for folder in folders)


INCOMPLETE = """\
#!/usr/bin/env bash
set -euo pipefail
# a call no stand-in can answer: the rehearsal cannot say what it would do
aws ec2 describe-instances --filters Name=tag:role,Values=agent
"""


@needs_rehearsal
def test_a_chain_that_stops_at_a_step_it_cannot_rehearse_exits_3_naming_it_unless_allowed(tmp_path: Path) -> None:
    (tmp_path / "lookup.sh").write_text(INCOMPLETE)
    (tmp_path / "amibuild.hcl").write_text(CEPH.replace(
        'extra_packages = ["ceph-common"]', 'extra_packages = ["ceph-common"]\n  scripts = ["lookup.sh"]'))

    stopped = run_cli(tmp_path, "rehearse")
    allowed = run_cli(tmp_path, "rehearse", "--allow-incomplete", "--json")

    assert stopped.returncode == 3, stopped.stderr
    last = stopped.stderr.strip().splitlines()[-1]
    assert last.startswith("amibuild: error: ceph: rehearsal incomplete: step "), last
    assert "(user-01-lookup.sh) cannot be rehearsed" in last and "aws ec2 describe-instances" in last
    # the image's checks and inventory (stage 1), its download, the cache clean-up, the clean-up and its checks
    assert "6 later steps did not run" in last
    assert "rehearsal incomplete in" in stopped.stdout
    assert allowed.returncode == 0, allowed.stderr
    (got,) = json.loads(allowed.stdout)
    assert got["ok"] and not got["complete"]


# ------------------------------------------------------------------------------- build-ami --rehearse

TWO_VARIANTS = """\
pipeline {
  name    = "e2e"
  regions = ["us-west-2"]
}

variant "ceph" {
  extra_packages = ["ceph-common"]
}

variant "agent" {
  extra_packages = ["vendor-agent"]
}
"""


@needs_rehearsal
@pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")
def test_build_ami_rehearse_stops_only_the_variant_whose_install_fails(tmp_path: Path, sandbox) -> None:
    (tmp_path / "amibuild.hcl").write_text(TWO_VARIANTS)
    wrapper = tmp_path / "packer-wrapper"
    wrapper.write_text(f'#!/bin/sh\necho "$1 $(basename "$PWD")" >> "{tmp_path}/packer-calls"\n'
                       f'exec {shutil.which("packer")} "$@"\n')
    wrapper.chmod(0o755)
    result = run_cli(tmp_path, "build-ami", "--rehearse", "--json", "--no-publish",
                    env={"INVOKE_AMIBUILD_PACKER": str(wrapper), "AMIBUILD_REHEARSE_REFUSE": "vendor-agent"})
    assert result.returncode == 1, result.stderr
    outcomes = {v["name"]: v for v in json.loads(result.stdout)["variants"]}
    assert outcomes["ceph"]["status"] == "built" and outcomes["ceph"]["amis"]
    assert outcomes["agent"]["status"] == "failed"
    assert "rehearsal failed, Packer not started" in outcomes["agent"]["error"]
    assert "install-packages.sh" in outcomes["agent"]["error"]
    builds = [line.split()[1] for line in (tmp_path / "packer-calls").read_text().splitlines()
              if line.startswith("build ")]
    assert builds == ["ceph"]
    (record,) = (tmp_path / "build" / "runs").glob("*/agent/rehearsal.json")  # the run's own folder
    report = json.loads(record.read_text())
    assert report["failure"]["script"] == "scripts/install-packages.sh"
    assert any("vendor-agent" in line for line in report["failure"]["output_tail"])


@needs_rehearsal
@pytest.mark.skipif(shutil.which("packer") is None, reason="packer is installed by .ci/run")
def test_build_ami_rehearse_stops_an_incomplete_rehearsal_unless_allowed(tmp_path: Path, sandbox) -> None:
    (tmp_path / "lookup.sh").write_text(INCOMPLETE)
    (tmp_path / "amibuild.hcl").write_text(
        'pipeline {\n  name = "inc"\n  regions = ["us-west-2"]\n}\n'
        'variant "lookup" {\n  scripts = ["lookup.sh"]\n}\n')
    wrapper = tmp_path / "packer-wrapper"
    wrapper.write_text(f'#!/bin/sh\necho "$1 $(basename "$PWD")" >> "{tmp_path}/packer-calls"\n'
                       f'exec {shutil.which("packer")} "$@"\n')
    wrapper.chmod(0o755)
    env = {"INVOKE_AMIBUILD_PACKER": str(wrapper)}

    stopped = run_cli(tmp_path, "build-ami", "--rehearse", "--json", "--no-publish", env=env)

    assert stopped.returncode == 1, stopped.stderr
    (outcome,) = json.loads(stopped.stdout)["variants"]
    assert outcome["status"] == "failed"
    assert "rehearsal incomplete: step " in outcome["error"] and "Packer not started" in outcome["error"]
    assert "later step" in outcome["error"]
    calls = (tmp_path / "packer-calls").read_text().splitlines() if (tmp_path / "packer-calls").exists() else []
    assert not [line for line in calls if line.startswith("build ")]

    allowed = run_cli(tmp_path, "build-ami", "--rehearse", "--allow-incomplete", "--json", "--no-publish", env=env)

    assert allowed.returncode == 0, allowed.stderr
    (outcome,) = json.loads(allowed.stdout)["variants"]
    assert outcome["status"] == "built"
    assert "(--allow-incomplete: building anyway)" in allowed.stderr


@needs_rehearsal
def test_a_step_that_never_ends_fails_at_the_timeout_and_leaves_nothing_running(tmp_path: Path) -> None:
    # the spinning process carries a name of this test's own: rehearsals of other tests running at
    # the same time (other xdist workers) run their own /tmp/script_1.sh
    marker = f"amibuild-spin-{os.getpid()}-{time.monotonic_ns()}"
    (tmp_path / "spin.sh").write_text(f"#!/bin/bash\nexec -a {marker} bash -c 'while :; do :; done'\n")
    (rendered,) = render(tmp_path, 'variant "spin" {\n  scripts = ["spin.sh"]\n}\n')
    report = rehearse(rendered, timeout=3)
    # the checks, the inventory and its download, the cache clean-up, the clean-up and its checks
    assert [v.status for v in report.steps] == [FAILED] + ["not run"] * 6
    assert report.steps[0].reason == "timed out" and not report.ok
    assert report.failure.exit_status is None and report.failure.script == "scripts/user-01-spin.sh"
    leftover = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    assert leftover.stdout == "", "the copy's processes died with it"


# ------------------------------------------------------------------------------- CI summary

def summary_rows(markdown: str) -> list[list[str]]:
    """The body rows of the table under `### amibuild rehearse` (the last one in `markdown`)."""
    lines = markdown.rsplit("### amibuild rehearse", 1)[1].splitlines()
    rows = [line for line in lines if line.startswith("|")][2:]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in rows]


@needs_rehearsal
def test_rehearse_appends_a_row_per_variant_to_the_step_summary_and_markdown_prints_it(tmp_path: Path) -> None:
    (tmp_path / "amibuild.hcl").write_text(TWO_VARIANTS)
    step_summary = tmp_path / "step-summary.md"
    step_summary.write_text("earlier step\n")
    env = {"GITHUB_STEP_SUMMARY": str(step_summary), "AMIBUILD_REHEARSE_REFUSE": "vendor-agent"}

    result = run_cli(tmp_path, "rehearse", env=env, binary="amibuild")

    assert result.returncode == 1, result.stderr
    assert "amibuild: error: rehearsal failed for agent" in result.stderr
    text = step_summary.read_text()
    assert text.startswith("earlier step\n")  # appended, not overwritten
    rows = summary_rows(text)
    assert [(r[0], r[1]) for r in rows] == [("ceph", "passed"), ("agent", "failed")]
    ceph, agent = rows
    assert int(ceph[2]) == int(agent[2]) > 0 and ceph[3].endswith("s")  # steps, duration
    assert agent[4] == "step install-packages.sh: scripts/install-packages.sh exit 1", agent
    assert "### amibuild rehearse" not in result.stdout  # stdout keeps its report lines
    assert "rehearsal passed" in result.stdout and "rehearsal FAILED" in result.stdout

    shown = run_cli(tmp_path, "rehearse", "--markdown", env={**env, "GITHUB_STEP_SUMMARY": None}, binary="amibuild")
    assert shown.returncode == 1, shown.stderr
    assert shown.stdout.startswith("### amibuild rehearse\n") and "rehearsal of" not in shown.stdout
    # the same table (durations aside: a second run)
    assert [(r[0], r[1], r[4]) for r in summary_rows(shown.stdout)] == [(r[0], r[1], r[4]) for r in rows]
    assert step_summary.read_text() == text  # not set: nothing appended


@needs_rehearsal
def test_rehearse_summary_says_incomplete_and_names_the_step_it_could_not_rehearse(tmp_path: Path) -> None:
    (tmp_path / "lookup.sh").write_text(INCOMPLETE)
    (tmp_path / "amibuild.hcl").write_text(CEPH.replace(
        'extra_packages = ["ceph-common"]', 'extra_packages = ["ceph-common"]\n  scripts = ["lookup.sh"]'))
    step_summary = tmp_path / "step-summary.md"

    result = run_cli(tmp_path, "rehearse", env={"GITHUB_STEP_SUMMARY": str(step_summary)}, binary="amibuild")

    assert result.returncode == 3, result.stderr
    ((variant, verdict, _, _, note),) = summary_rows(step_summary.read_text())
    assert (variant, verdict) == ("ceph", "incomplete")
    assert note.startswith("rehearsal incomplete: step ") and "(user-01-lookup.sh) cannot be rehearsed" in note
