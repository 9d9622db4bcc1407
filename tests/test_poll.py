"""amibuild.poll.until: the one polling loop, on a fake clock whose sleep moves it (nothing really sleeps);
and `settled`, the main thread's wait for a worker, which must let a signal's handler run."""

from __future__ import annotations

import signal
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from amibuild.aws import beside, fan_out
from amibuild.jobs.signals import Signals
from amibuild.poll import Waited, settled, until


class FakeTime:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def answers(*values):
    """A check that gives `values` one call after another (the last one again and again), and counts its calls."""
    calls = []

    def check():
        calls.append(len(calls))
        return values[min(len(calls) - 1, len(values) - 1)]

    return check, calls


def test_the_first_done_answer_ends_the_wait_and_is_handed_back() -> None:
    t = FakeTime()
    check, calls = answers(None, None, "ready")
    waited = until(check, done=lambda v: v is not None, timeout=30, interval=2, clock=t.clock, sleep=t.sleep)
    assert waited == Waited("ready", done=True)
    assert waited.done and not waited.cancelled and not waited.timed_out
    assert len(calls) == 3 and t.slept == [2, 2] and t.now == 104


def test_done_is_a_truthy_answer_by_default() -> None:
    t = FakeTime()
    check, calls = answers([], [], ["busy"])
    assert until(check, timeout=10, interval=1, clock=t.clock, sleep=t.sleep).value == ["busy"]
    assert len(calls) == 3


def test_past_the_deadline_it_gives_the_last_answer_and_the_last_sleep_stops_at_the_deadline() -> None:
    t = FakeTime(0.0)
    check, calls = answers(1, 2, 3, 4, 5)
    waited = until(check, done=lambda v: v > 100, timeout=5, interval=2, clock=t.clock, sleep=t.sleep)
    assert waited.timed_out and not waited.done and not waited.cancelled
    assert waited.value == 4  # asked at 0, 2, 4 and 5: the last look is at the deadline, not past it
    assert len(calls) == 4 and t.slept == [2, 2, 1] and t.now == 5


def test_no_time_left_still_asks_once_and_never_sleeps() -> None:
    t = FakeTime()
    check, calls = answers("no")
    waited = until(check, done=lambda v: v == "yes", timeout=0, interval=0.5, clock=t.clock, sleep=t.sleep)
    assert waited == Waited("no") and waited.timed_out
    assert len(calls) == 1 and t.slept == []


def test_a_shared_deadline_is_a_time_on_the_clock() -> None:
    t = FakeTime(50.0)
    first, _ = answers(False)
    assert until(first, deadline=53.0, interval=1, clock=t.clock, sleep=t.sleep).timed_out
    assert t.now == 53.0
    second, calls = answers(False)  # the next wait on the same deadline: one look, no sleep
    assert until(second, deadline=53.0, interval=1, clock=t.clock, sleep=t.sleep).timed_out
    assert len(calls) == 1 and t.slept == [1, 1, 1]


def test_cancelled_is_asked_after_each_answer_that_is_not_done_and_before_the_deadline() -> None:
    t = FakeTime()
    asked = []

    def cancelled() -> bool:
        asked.append(t.now)
        return len(asked) == 3

    check, calls = answers("a", "b", "c", "d")
    waited = until(check, done=lambda v: v == "d", timeout=60, interval=5, cancelled=cancelled,
                   clock=t.clock, sleep=t.sleep)
    assert waited == Waited("c", cancelled=True) and not waited.timed_out
    assert len(calls) == 3 and asked == [100, 105, 110] and t.slept == [5, 5]


def test_cancelled_wins_over_the_deadline_and_is_not_asked_once_done() -> None:
    t = FakeTime()
    check, _ = answers("x")
    assert until(check, done=lambda v: False, timeout=0, interval=1, cancelled=lambda: True,
                 clock=t.clock, sleep=t.sleep).cancelled

    def never() -> bool:
        raise AssertionError("cancelled asked after a done answer")

    assert until(lambda: "ok", timeout=0, interval=1, cancelled=never, clock=t.clock, sleep=t.sleep).done


def test_what_the_check_raises_goes_through() -> None:
    t = FakeTime()

    def check():
        if t.slept:
            raise RuntimeError("gone")
        return None

    with pytest.raises(RuntimeError, match="gone"):
        until(check, timeout=10, interval=1, clock=t.clock, sleep=t.sleep)
    assert t.slept == [1]


@pytest.mark.parametrize("limits", [{}, {"timeout": 1, "deadline": 2}])
def test_exactly_one_of_timeout_and_deadline(limits) -> None:
    with pytest.raises(TypeError):
        until(lambda: True, interval=1, **limits)


def _main_thread_waits() -> bool:
    """The main thread waits on a future's result: asleep on it (or about to be)."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    return (frame is not None and frame.f_code.co_name == "wait" and frame.f_back is not None
            and frame.f_back.f_code.co_name == "result")


def _signal_a_worker(signals: Signals) -> bool:
    """In a worker thread, once the main thread waits for it: SIGINT to this thread, as the kernel may
    hand a process's signal to any of its threads; True once the handler (which runs in the main thread
    only) has recorded it."""
    assert until(_main_thread_waits, interval=0.01, timeout=20).done
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)
    return until(signals.requested, interval=0.02, timeout=20).done


@pytest.mark.parametrize("wait", ["fan_out", "beside", "settled"])
def test_a_signal_delivered_to_a_worker_is_heard_while_the_main_thread_waits_for_it(wait, capfd) -> None:
    # before: the main thread slept on the future until the worker gave up (a Ctrl-C unheard for a
    # whole channel write in about 1 run in 30 of the real process)
    assert threading.current_thread() is threading.main_thread()
    with Signals() as signals:
        if wait == "fan_out":
            heard = fan_out(["worker", "other"], lambda k: _signal_a_worker(signals) if k == "worker" else True)["worker"]
        elif wait == "beside":
            with beside(lambda: _signal_a_worker(signals)) as answer:
                heard = answer()
        else:
            with ThreadPoolExecutor(1) as pool:
                heard = settled(pool.submit(_signal_a_worker, signals))
    assert heard and signals.name == "SIGINT"
    assert "amibuild: SIGINT: finishing the channel write in progress" in capfd.readouterr().err


def test_settled_gives_the_work_s_answer_and_its_own_timeout_error() -> None:
    done: Future[int] = Future()
    done.set_result(7)
    assert settled(done) == 7
    failed: Future[int] = Future()
    failed.set_exception(TimeoutError("the work's own"))
    with pytest.raises(TimeoutError, match="the work's own"):
        settled(failed)


def test_a_hang_up_nohup_ignores_stays_ignored_while_channels_are_written_and_images_built() -> None:
    """`nohup amibuild build-ami &`: logging out must not stop its builds nor its channel writes;
    without nohup a hang-up stops them as SIGINT and SIGTERM do (the builds cancelled, cleaned up)."""
    from amibuild.bake.executor import Executor

    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        builds = Executor(None, None, None, provenance=None, progress=None, parallel=1)
        with Signals() as signals:
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            signal.raise_signal(signal.SIGHUP)
        restore = builds._install_signal_handlers()
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        restore()
        assert not signals.requested() and not builds.state.interrupted
        outside: list[int] = []  # not ignored: a handler of its own (a regression fails here, not the worker)
        signal.signal(signal.SIGHUP, lambda signum, frame: outside.append(signum))
        with Signals() as signals:
            signal.raise_signal(signal.SIGHUP)
        assert signals.name == "SIGHUP"
        restore = builds._install_signal_handlers()
        signal.raise_signal(signal.SIGHUP)
        restore()
        assert builds.state.interrupted and builds.state.signum == signal.SIGHUP and outside == []
    finally:
        signal.signal(signal.SIGHUP, before)
