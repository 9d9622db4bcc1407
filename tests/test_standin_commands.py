"""Commands on a sandbox image's stand-in run on the kept result of the image's chain.

The first command on an image rehearses its chain once and keeps the result (the overlay's upper
layer and what the stand-ins recorded); every command after it starts from a copy of that result, so
it sees what the chain wrote, removed and installed, and nothing an earlier command did. A chain that
fails keeps nothing. Two first commands at once run the chain once. A run on a kept result reports
only its own changes under /etc. Root only: each run is a rehearsal in an overlay copy of this machine.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from amibuild import render as render_mod
from amibuild.pipeline import Overrides, load
from amibuild.rehearse import overlay
from amibuild.rehearse.steps import Step
from amibuild.render import SourceAmi, Target
from amibuild.sandbox import image_standin as standin
from amibuild.sandbox.transform import SandboxTarget, sandboxed
from conftest import needs_rehearsal

pytestmark = needs_rehearsal

PIPELINE = """\
pipeline {
  name    = "s"
  regions = ["us-west-2"]
}

variant "ceph" {
  extra_packages = ["ceph-common"]
  scripts        = ["site.sh"]
}
"""
# what the chain does that a command must see: a file written, one of this machine's removed
SITE = "#!/usr/bin/env bash\nset -euo pipefail\necho site-marker | sudo tee /etc/amibuild-site >/dev/null\nsudo rm -f /etc/issue\n"
# the first command looks at the chain's result and leaves a file behind; the second must not see it
FIRST = ("set -e\ncat /etc/amibuild-site\ntest ! -e /etc/issue && echo issue-gone\nrpm -q ceph-common >/dev/null && "
         "echo ceph-installed\necho leftover >/etc/amibuild-leftover\n")
SECOND = "test ! -e /etc/amibuild-leftover && echo clean-copy\ncat /etc/amibuild-site\n"


def stand_in(tmp_path: Path, site: str = SITE) -> Path:
    """A sandbox build's folder for the variant above, as the sandbox keeps it for its image."""
    (tmp_path / "amibuild.hcl").write_text(PIPELINE)
    (tmp_path / "site.sh").write_text(site)
    pipeline = load(tmp_path / "amibuild.hcl", Overrides())
    build = render_mod.render_build(pipeline, pipeline.variants[0], uses_plugins=True, target=Target(),
                                    sources={r: SourceAmi("lookup") for r in pipeline.regions})
    where = SandboxTarget("http://127.0.0.1:9", sys.executable, str(tmp_path / "store"))
    rendered = render_mod.finish(sandboxed(build, where=where))
    return render_mod.write(rendered, tmp_path / "image", rendered.record(pipeline, "1.6.6"))


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Every rehearsal the stand-in starts: its step names, whether it is kept and whether it has a base."""
    seen: list[dict] = []
    real = overlay.run_steps

    def run_steps(steps, **kwargs):
        seen.append({"steps": [s.name for s in steps], "keep": kwargs.get("keep", False),
                     "base": kwargs.get("base")})
        return real(steps, **kwargs)

    monkeypatch.setattr(overlay, "run_steps", run_steps)
    return seen


def test_the_first_command_keeps_the_chains_result_and_each_command_starts_from_a_copy_of_it(
        tmp_path: Path, runs: list[dict]) -> None:
    root = stand_in(tmp_path)
    first = standin.run_command(root, FIRST)
    assert first.chain_ok and first.exit_status == 0, first
    assert first.output.split() == ["site-marker", "issue-gone", "ceph-installed"]
    # the chain ran once, kept, with its checks steps gone; then the command on its result
    chain, command = runs
    assert chain["keep"] and chain["base"] is None and len(chain["steps"]) > 2
    assert not any("check" in name for name in chain["steps"])
    assert command["steps"] == ["first boot (stand-in)", "script 1"] and command["base"] == root / standin.BOOTED
    assert (root / standin.BOOTED / "upper" / "etc" / "amibuild-site").read_text() == "site-marker\n"
    assert "ceph-common" in (root / standin.BOOTED / "state" / "packages").read_text()
    assert not [p for p in root.iterdir() if p.name.startswith((".booted", "amibuild-rehearse-"))]  # nothing half made

    second = standin.run_command(root, SECOND)
    assert second.chain_ok and second.exit_status == 0, second
    assert second.output.split() == ["clean-copy", "site-marker"]  # not what the first command left
    assert len(runs) == 3 and runs[2]["steps"] == ["first boot (stand-in)", "script 1"]  # the chain did not run again
    assert not (root / standin.BOOTED / "upper" / "etc" / "amibuild-leftover").exists()


def test_a_command_on_a_kept_chain_answers_as_one_on_a_fresh_copy_does(tmp_path: Path, runs: list[dict]) -> None:
    root = stand_in(tmp_path)
    check = "rpm -q ceph-common; test -s /etc/machine-id && echo has-id; test -e /etc/issue; echo issue=$?\n"
    fresh = standin.run(root, [check])  # the whole chain, then the command, in one copy (as before kept chains)
    first, again = standin.run_command(root, check), standin.run_command(root, check)
    assert (fresh.exit_status, fresh.output) == (first.exit_status, first.output) == (again.exit_status, again.output)
    assert "has-id" in fresh.output and "issue=1" in fresh.output  # a first boot's machine-id; the chain's removal
    assert [r["base"] is not None for r in runs] == [False, False, True, True]


def test_a_chain_that_fails_keeps_nothing_and_every_command_says_so(tmp_path: Path, runs: list[dict]) -> None:
    root = stand_in(tmp_path, site="#!/usr/bin/env bash\necho broken >&2\nexit 3\n")
    for _ in range(2):
        done = standin.run_command(root, "echo never\n")
        assert not done.chain_ok and "exit 3: broken" in done.failed_step, done
        assert done.exit_status is None and not done.scripts
    assert not (root / standin.BOOTED).exists()
    assert [r["keep"] for r in runs] == [True, True]  # each command tried the chain: nothing was kept
    assert not [p for p in root.iterdir() if p.name.startswith((".booted", "amibuild-rehearse-"))]


def test_two_first_commands_at_once_run_the_chain_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = stand_in(tmp_path)
    real = overlay.run_steps
    chains, entered, release = [], threading.Event(), threading.Event()

    def run_steps(steps, **kwargs):
        if kwargs.get("keep"):
            chains.append(threading.current_thread().name)
            entered.set()
            assert release.wait(60)
        return real(steps, **kwargs)

    monkeypatch.setattr(overlay, "run_steps", run_steps)
    got: dict[str, standin.StandinRun] = {}
    threads = {who: threading.Thread(target=lambda who=who: got.__setitem__(who, standin.run_command(root, "echo up\n")),
                                     name=who) for who in ("a", "b")}
    lock_line = next(n for n, line in enumerate(Path(standin.__file__).read_text().splitlines(), start=1)
                     if line.strip() == "with _lock(root):")

    def waiting(thread: threading.Thread) -> bool:
        frame = sys._current_frames().get(thread.ident)
        return frame is not None and frame.f_code.co_name == "_booted" and frame.f_lineno == lock_line

    threads["a"].start()
    assert entered.wait(60)  # the first command is running the chain
    threads["b"].start()
    deadline = time.monotonic() + 60
    while not waiting(threads["b"]):  # until the second waits for the first's chain
        assert threads["b"].is_alive() and time.monotonic() < deadline, "the second command did not wait"
        time.sleep(0.01)
    release.set()
    for thread in threads.values():
        thread.join(120)
    assert chains == ["a"]
    assert {who: (r.exit_status, r.output) for who, r in got.items()} == {"a": (0, "up\n"), "b": (0, "up\n")}


def test_a_run_on_a_base_reports_only_its_own_writes_and_removals_under_etc(tmp_path: Path) -> None:
    def step(number: int, script: str) -> Step:
        path = tmp_path / f"step{number}.sh"
        path.write_text(script)
        return Step(number=number, provisioner=number, kind="shell", name=path.name, script=str(path),
                    command=f"sudo -S bash '/tmp/{path.name}'", remote_path=f"/tmp/{path.name}")

    chain = overlay.run_steps([step(1, "echo chain >/etc/amibuild-chain\nrm -f /etc/issue\n")], arch="x86_64",
                              os_name="al2023", keep=True, temp_dir=str(tmp_path))
    assert chain.kept is not None and "/etc/amibuild-chain" in chain.etc_written and "/etc/issue" in chain.etc_removed
    assert overlay.keep_as_base(chain.kept, tmp_path / "base")
    assert not chain.kept.exists() and sorted(p.name for p in (tmp_path / "base").iterdir()) == ["state", "upper"]
    run = overlay.run_steps([step(1, "echo mine >/etc/amibuild-command\nrm -f /etc/hostname\ncat /etc/amibuild-chain\n"
                                     "test ! -e /etc/issue\n")],
                            arch="x86_64", os_name="al2023", base=tmp_path / "base")
    assert run.results[0].exit_status == 0 and run.results[0].stdout == "chain\n", run.results[0]
    assert run.etc_written == ["/etc/amibuild-command"]  # not the chain's file, nor the build user's files
    assert run.etc_removed == ["/etc/hostname"]  # not the chain's /etc/issue
    again = overlay.run_steps([step(1, "echo other >/etc/amibuild-chain\n")], arch="x86_64", os_name="al2023",
                              keep=True, temp_dir=str(tmp_path))
    assert again.kept is not None
    assert not overlay.keep_as_base(again.kept, tmp_path / "base")  # the place is taken: the first base stays
    assert (tmp_path / "base" / "upper" / "etc" / "amibuild-chain").read_text() == "chain\n"
    assert not again.kept.exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".base")] == []
