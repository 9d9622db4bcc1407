"""Progress display: exact plain lines with a fake clock, mode choice, the live frame, threads."""

from __future__ import annotations

import io
import re
import threading
from datetime import datetime, timedelta, timezone

import pytest

from amibuild.bake.progress import Progress, State, format_elapsed

T0 = datetime(2026, 11, 30, 1, 2, 3, tzinfo=timezone.utc)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class FakeTime:
    """A monotonic clock and a wall clock that move together, only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def clock(self) -> float:
        return self.now

    def wall(self) -> datetime:
        return T0 + timedelta(seconds=self.now - 1000.0)

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


@pytest.fixture
def no_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")


def plain(names, fake_time, stream=None, verbose=True) -> tuple[Progress, io.StringIO]:
    stream = stream if stream is not None else io.StringIO()
    return Progress(names, stream=stream, live=False, clock=fake_time.clock, wall=fake_time.wall,
                    verbose=verbose), stream


def test_plain_mode_is_quiet_by_default_a_line_per_phase_not_per_packer_step(fake_time):
    progress, out = plain(["ceph"], fake_time, verbose=False)
    with progress:
        progress.update("ceph", State.BUILDING, "starting packer")
        for step in ("Launching a source AWS instance", "Provisioning with shell script", "Creating AMI"):
            fake_time.advance(4)
            progress.update("ceph", State.BUILDING, step)
        progress.update("ceph", State.COPYING, "eu-west-1")
        progress.update("ceph", State.COPYING, "Modifying attributes on AMI")
        progress.update("ceph", State.FAILED, "copy to eu-west-1 failed")
        progress.update("ceph", State.FAILED, "copy to eu-west-1 failed (see packer.log)")  # a final detail: said
    assert out.getvalue().splitlines() == [
        "2026-11-30T01:02:03Z ceph building    starting packer",
        "2026-11-30T01:02:15Z ceph copying     eu-west-1 (12s)",
        "2026-11-30T01:02:15Z ceph failed      copy to eu-west-1 failed (12s)",
        "2026-11-30T01:02:15Z ceph failed      copy to eu-west-1 failed (see packer.log) (12s)",
    ]


def test_plain_mode_verbose_writes_one_timestamped_line_per_change(fake_time):
    progress, out = plain(["ceph", "gpu-al2023"], fake_time)
    with progress:
        progress.update("ceph", State.QUEUED)
        progress.update("gpu-al2023", State.SKIPPED, "up to date (ami-0123)")
        progress.update("ceph", State.BUILDING, "Launching a source AWS instance")
        fake_time.advance(12)
        progress.update("ceph", State.BUILDING, "Provisioning with shell script")
        fake_time.advance(3)
        progress.update("ceph", State.COPYING, "eu-west-1")
        fake_time.advance(5)
        progress.update("ceph", State.DONE, "ami-0abc")
    assert out.getvalue().splitlines() == [
        "2026-11-30T01:02:03Z ceph       queued",
        "2026-11-30T01:02:03Z gpu-al2023 skipped     up to date (ami-0123)",
        "2026-11-30T01:02:03Z ceph       building    Launching a source AWS instance",
        "2026-11-30T01:02:15Z ceph       building    Provisioning with shell script (12s)",
        "2026-11-30T01:02:18Z ceph       copying     eu-west-1 (15s)",
        "2026-11-30T01:02:23Z ceph       done        ami-0abc (20s)",
    ]


def test_plain_mode_ignores_repeated_identical_updates(fake_time):
    progress, out = plain(["ceph"], fake_time)
    progress.update("ceph", State.BUILDING, "Waiting for SSH")
    fake_time.advance(30)
    progress.update("ceph", State.BUILDING, "Waiting for SSH")
    progress.update("ceph", State.BUILDING, "  Waiting   for SSH\n")  # same once whitespace is folded
    progress.close()
    assert out.getvalue().splitlines() == ["2026-11-30T01:02:03Z ceph building    Waiting for SSH"]


def test_plain_mode_freezes_elapsed_once_a_variant_is_final(fake_time):
    progress, out = plain(["ceph"], fake_time)
    progress.update("ceph", State.BUILDING)
    fake_time.advance(7)
    progress.update("ceph", State.FAILED, "see build/ceph/packer.log")
    fake_time.advance(100)
    progress.update("ceph", State.FAILED, "see build/ceph/packer.log (exit 1)")
    progress.close()
    assert out.getvalue().splitlines()[-2:] == [
        "2026-11-30T01:02:10Z ceph failed      see build/ceph/packer.log (7s)",
        "2026-11-30T01:03:50Z ceph failed      see build/ceph/packer.log (exit 1) (7s)",
    ]


def test_plain_mode_formats_minutes_and_hours(fake_time):
    progress, out = plain(["ceph"], fake_time)
    progress.update("ceph", State.BUILDING, "a")
    fake_time.advance(185)
    progress.update("ceph", State.BUILDING, "b")
    fake_time.advance(3600)
    progress.update("ceph", State.DONE)
    progress.close()
    lines = out.getvalue().splitlines()
    assert lines[1].endswith("building    b (3m05s)")
    assert lines[2].endswith("done        (1h03m05s)")
    assert [format_elapsed(s) for s in (0, 59.9, 60, 3599, 3600)] == ["0s", "59s", "1m00s", "59m59s", "1h00m00s"]


def test_elapsed_starts_at_building_not_at_queued(fake_time):
    progress, out = plain(["ceph"], fake_time)
    progress.update("ceph", State.QUEUED)
    fake_time.advance(60)
    progress.update("ceph", State.BUILDING)
    fake_time.advance(2)
    progress.update("ceph", State.DONE)
    progress.close()
    assert out.getvalue().splitlines()[-1].endswith("done        (2s)")


def test_update_refuses_an_unknown_variant(fake_time):
    progress, _ = plain(["ceph"], fake_time)
    with pytest.raises(ValueError, match="unknown variant 'cepth'"):
        progress.update("cepth", State.BUILDING)


def test_default_mode_is_plain_on_a_non_terminal_stream(no_ci):
    progress = Progress(["ceph"], stream=io.StringIO())
    progress.close()
    assert not progress.live


def test_default_mode_is_plain_in_ci_even_on_a_terminal(monkeypatch):
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("TERM", "xterm-256color")
    out = FakeTty()
    with Progress(["ceph"], stream=out) as progress:
        progress.update("ceph", State.BUILDING, "step")
    assert not progress.live
    assert out.getvalue().endswith(" ceph building    step\n")


def test_default_mode_is_plain_on_a_dumb_terminal(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "dumb")
    with Progress(["ceph"], stream=FakeTty()) as progress:
        assert not progress.live


def test_default_mode_is_live_on_a_terminal_outside_ci(no_ci, monkeypatch):
    with Progress(["ceph"], stream=FakeTty()) as progress:
        assert progress.live
    monkeypatch.setenv("CI", "false")  # said outright: not CI
    with Progress(["ceph"], stream=FakeTty()) as progress:
        assert progress.live


def test_live_mode_leaves_a_final_frame_with_every_variant_and_state(no_ci, fake_time):
    names = ["ceph", "gpu", "base", "fips", "arm"]
    out = FakeTty()
    progress = Progress(names, stream=out, clock=fake_time.clock, wall=fake_time.wall)
    progress.update("ceph", State.BUILDING, "Launching a source AWS instance")
    progress.update("gpu", State.SKIPPED, "up to date (ami-0123)")
    progress.update("base", State.COPYING, "eu-west-1")
    fake_time.advance(185)
    progress.update("ceph", State.DONE, "ami-0abc")
    progress.update("fips", State.FAILED, "see build/fips/packer.log")
    progress.close()
    progress.close()  # idempotent
    text = ANSI.sub("", out.getvalue())
    final = text[text.rindex("ceph"):]  # the last frame drawn
    for name, state in [("ceph", "done"), ("gpu", "skipped"), ("base", "copying"),
                        ("fips", "failed"), ("arm", "queued")]:
        assert re.search(rf"{name}\s+{state}\b", final), final
    assert "ami-0abc" in final and "3m05s" in final


def test_live_mode_truncates_long_details_to_the_terminal_width(no_ci, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    out = FakeTty()
    with Progress(["ceph"], stream=out) as progress:
        progress.update("ceph", State.BUILDING, "x" * 200)
    lines = [ln for ln in ANSI.sub("", out.getvalue()).splitlines() if "ceph" in ln]
    assert lines and all(len(ln.rstrip()) <= 60 for ln in lines)
    assert "…" in lines[-1]


def test_live_mode_shows_packer_brackets_literally(no_ci):
    out = FakeTty()
    with Progress(["ceph"], stream=out) as progress:
        progress.update("ceph", State.BUILDING, "[bold]amazon-ebs.eks[/bold]: step")
    assert "[bold]amazon-ebs.eks[/bold]: step" in ANSI.sub("", out.getvalue())


@pytest.mark.parametrize("live", [False, True], ids=["plain", "live"])
def test_concurrent_updates_from_many_threads_all_land(no_ci, live):
    names = [f"variant-{i}" for i in range(8)]
    finals = [State.DONE, State.SKIPPED, State.FAILED, State.INTERRUPTED] * 2
    out = FakeTty()
    errors: list[BaseException] = []
    start = threading.Barrier(len(names))

    with Progress(names, stream=out, live=live, verbose=True) as progress:
        def work(name: str, final: State) -> None:
            try:
                start.wait()
                for step in range(50):
                    progress.update(name, State.BUILDING, f"step {step}")
                progress.update(name, State.COPYING, "us-east-1")
                progress.update(name, final, "end")
            except BaseException as exc:  # surfaced below, not lost in the thread
                errors.append(exc)

        threads = [threading.Thread(target=work, args=a) for a in zip(names, finals, strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    assert errors == []
    text = ANSI.sub("", out.getvalue())
    for name, final in zip(names, finals, strict=True):
        assert re.search(rf"{name}\s+{final.value}\s+(\S+s\s+)?end", text), name
    if not live:
        assert len(text.splitlines()) == len(names) * 52
