"""Signals while channels are written: note them, let the channel transaction end, then stop.

A channel write is one transaction over all its regions (`amibuild.channels.publish.transact`).
Dying in the middle of one would leave regions on different images, so while channels are
written SIGINT, SIGTERM and SIGHUP (each, and again) only set a flag here.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType
from typing import Any, Callable, TypeVar

from amibuild.errors import AmibuildError, ExitCode, Interrupted
from amibuild.poll import stop_signals

T = TypeVar("T")


CHANNEL_WRITE = ("finishing the channel write in progress (it completes or is put back), starting no other; "
                 "then stopping",
                 "still finishing the channel write in progress, so that no channel is left half moved")


class Signals:
    """Context manager: while active, the signals in `stop_signals` are recorded instead of acted on.

    ``says``: (the line after the first signal, the line after each later one), each shown after
    "amibuild: SIGNAME: " / "amibuild: SIGNAME again: "; a channel write's by default."""

    def __init__(self, says: tuple[str, str] = CHANNEL_WRITE) -> None:
        self.received: list[int] = []
        self._previous: dict[int, Any] = {}
        self._first, self._again = says

    def __enter__(self) -> Signals:
        if threading.current_thread() is threading.main_thread():
            for signum in stop_signals():
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    @staticmethod
    def _say(line: str) -> None:
        # straight to the file descriptor: the handler may run while the main thread is inside a
        # buffered write to stderr, and re-entering that writer raises RuntimeError
        try:
            os.write(2, (line + "\n").encode())
        except OSError:
            pass

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        first = not self.received
        self.received.append(signum)
        name = signal.Signals(signum).name
        self._say(f"amibuild: {name}: {self._first}" if first else f"amibuild: {name} again: {self._again}")

    def requested(self) -> bool:
        """True once a signal came (the `Guard.cancelled` callback)."""
        return bool(self.received)

    @property
    def name(self) -> str:
        return signal.Signals(self.received[0]).name if self.received else ""

    @property
    def exit_code(self) -> int:
        """128 + the first signal's number: 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP."""
        return ExitCode.for_signal(self.received[0]) if self.received else ExitCode.OK


PRUNING = ("finishing each image under way (deregistered with its snapshots), starting no other; then stopping",
           "still finishing the images under way, so that no snapshot is left without its image")


def held(body: Callable[[Signals], T], says: tuple[str, str] = CHANNEL_WRITE) -> tuple[T, Signals]:
    """Run ``body(signals)`` with SIGINT / SIGTERM / SIGHUP held off: (its result, the `Signals` seen).
    An error after a signal is an interruption by that signal (exit 128 + its number)."""
    with Signals(says) as signals:
        try:
            return body(signals), signals
        except AmibuildError as exc:
            if not signals.requested():
                raise
            raise Interrupted(f"interrupted by {signals.name}: {exc}", signals.exit_code, summary=True) from exc


def finish_channel(result: Any, signals: Signals | None) -> None:
    """After a channel write that completed: exit 128 + signal, saying what moved, if a signal came."""
    if signals is None or not signals.requested():
        return
    if result.changed:
        moved = ", ".join(f"{r.region}={r.ami}" for r in result.regions)
        what = f"channel {result.channel} of {result.variant} moved in every region ({moved})"
    else:
        what = f"channel {result.channel} of {result.variant} already held these images: nothing moved"
    raise Interrupted(f"interrupted by {signals.name} after the channel write finished: {what}", signals.exit_code,
                      summary=True)
