"""The one polling loop: ask until the answer is done, the deadline passes or a signal says stop;
`settled`, the main thread's wait for work in another thread; and `stop_signals`, the signals a run
stops on.

`until` calls ``check`` and hands its answer to ``done``; while not done it asks ``cancelled``, then
looks at the deadline, then sleeps ``interval`` seconds (no further than the deadline) and asks
again. It never raises on its own: the `Waited` it returns carries the last answer and why the
waiting ended, and the caller words its own error from them. The clock and the sleep are
injectable (tests move a fake clock instead of sleeping).

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import signal
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Waited(Generic[T]):
    """How a wait ended: the check's last answer, and whether it was done or a cancel stopped it
    (neither: the deadline passed)."""

    value: T
    done: bool = False
    cancelled: bool = False

    @property
    def timed_out(self) -> bool:
        return not self.done and not self.cancelled


def until(check: Callable[[], T], *, interval: float, timeout: float | None = None, deadline: float | None = None,
          done: Callable[[T], object] = bool, cancelled: Callable[[], bool] | None = None,
          clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], object] = time.sleep) -> Waited[T]:
    """Call ``check`` until ``done(answer)`` (by default: the answer is truthy), every ``interval``
    seconds, for ``timeout`` seconds from now or until ``deadline`` (a time on ``clock``: one
    deadline shared by several waits); exactly one of the two is given. ``check`` is always called
    at least once, also with no time left."""
    if (timeout is None) == (deadline is None):
        raise TypeError("until: give a timeout or a deadline, not both nor neither")
    end = clock() + timeout if deadline is None else deadline
    while True:
        value = check()
        if done(value):
            return Waited(value, done=True)
        if cancelled is not None and cancelled():
            return Waited(value, cancelled=True)
        left = end - clock()
        if left <= 0:
            return Waited(value)
        sleep(min(interval, left))


def settled(future: Future[T]) -> T:
    """``future.result()``, waking every half second: CPython runs signal handlers in the main thread
    only, and a signal the kernel hands to a worker thread would leave a main thread asleep on the
    future until the work ends (a Ctrl-C unheard for a whole channel write or boot test)."""
    while True:
        try:
            return future.result(timeout=0.5)
        except TimeoutError:
            if future.done():  # the work's own TimeoutError
                raise


def stop_signals() -> tuple[int, ...]:
    """SIGINT, SIGTERM and SIGHUP, the signals a run stops on, to be handled now; SIGHUP not when it is
    ignored: that is `nohup`, a user asking the run to outlive a hang-up (an ignored SIGINT is only a
    shell's background job, and `kill -INT` still asks to stop)."""
    return tuple(s for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
                 if s != signal.SIGHUP or signal.getsignal(s) is not signal.SIG_IGN)
