"""Build progress on stderr: a live line per variant on a terminal, timestamped lines otherwise.

The build executor calls `Progress.update` from its worker threads as each variant moves through
queued → building (current Packer step) → copying → done / skipped / failed / interrupted.

* Live mode (a terminal, not CI, not TERM=dumb): a `rich.live.Live` redraws one row per variant
  about four times a second, so elapsed times tick; the last frame stays on screen after `close()`.
* Plain mode (CI, piped, or a dumb terminal): one line per change of phase, flushed at once, so
  a CI log shows what happened and when; with ``verbose`` a line per Packer step too (the steps
  are always in each variant's packer.log)::

      2026-11-30T01:02:03Z ceph        building    Launching a source AWS instance (12s)

Stdout is never touched: it is reserved for `--json`.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import TYPE_CHECKING, Callable, Sequence, TextIO

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.live import Live
    from rich.spinner import Spinner


class State(str, Enum):
    QUEUED = "queued"
    BUILDING = "building"
    COPYING = "copying"
    DONE = "done"
    SKIPPED = "skipped"
    FAILED = "failed"
    INTERRUPTED = "interrupted"

    @property
    def final(self) -> bool:
        return self in (State.DONE, State.SKIPPED, State.FAILED, State.INTERRUPTED)


_STATE_WIDTH = max(len(s.value) for s in State)

# Live mode: (symbol, style) per state; BUILDING and COPYING get a spinner instead of a symbol.
_LOOK = {
    State.QUEUED: ("·", "dim"),
    State.BUILDING: ("", "yellow"),
    State.COPYING: ("", "cyan"),
    State.DONE: ("✔", "green"),
    State.SKIPPED: ("–", "dim"),
    State.FAILED: ("✘", "bold red"),
    State.INTERRUPTED: ("!", "magenta"),
}


def format_elapsed(seconds: float) -> str:
    """`12s`, `3m05s`, `1h02m03s` (whole seconds, rounded down)."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{s:02d}s"


def wants_live(stream: TextIO) -> bool:
    """A live display only where someone watches a capable terminal: a TTY, not CI, not dumb."""
    try:
        tty = bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        tty = False
    ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")  # CI=false: a user saying not CI
    return tty and not ci and os.environ.get("TERM") != "dumb"


@dataclass
class _Row:
    state: State = State.QUEUED
    detail: str = ""
    started: float | None = None  # first BUILDING update
    ended: float | None = None  # first final state after that; freezes elapsed
    printed: tuple[State, str] | None = None  # plain mode: last (state, detail) written

    def elapsed(self, now: float) -> float:
        if self.started is None:
            return 0.0
        return (self.ended if self.ended is not None else now) - self.started


class Progress:
    """Thread-safe progress display for a fixed set of variants; see the module docstring."""

    def __init__(self, names: Sequence[str], *, stream: TextIO | None = None, live: bool | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime] = lambda: datetime.now(timezone.utc), verbose: bool = False) -> None:
        # Resolved at call time rather than as a default argument, so a replaced sys.stderr
        # (pytest's capture, rich's own redirection) is honoured.
        self._stream = stream if stream is not None else sys.stderr
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self._rows = {name: _Row() for name in names}
        self._width = max((len(n) for n in self._rows), default=0)
        self._closed = False
        self._verbose = verbose  # plain mode: a line per Packer step, not only per phase
        self._live: Live | None = None
        self._spinners: dict[str, Spinner] = {}
        self._plain = not (live if live is not None else wants_live(self._stream))
        if not self._plain:
            self._start_live()

    @property
    def live(self) -> bool:
        """True when this is the live display rather than plain lines."""
        return not self._plain

    def update(self, name: str, state: State, detail: str = "") -> None:
        """Record that `name` is now in `state`; `detail` is e.g. the current Packer step."""
        state = State(state)
        detail = " ".join(detail.split())  # one line, whatever Packer sent
        with self._lock:
            row = self._rows.get(name)
            if row is None:
                raise ValueError(f"unknown variant {name!r}; expected one of {', '.join(self._rows)}")
            now = self._clock()
            state_changed = row.state is not state
            if state is State.BUILDING and row.started is None:
                row.started = now
            if state.final:
                if row.ended is None and row.started is not None:
                    row.ended = now
            else:
                row.ended = None  # back in progress (a retry): the clock runs again
            row.state, row.detail = state, detail
            if self._plain and row.printed != (state, detail) and (
                    self._verbose or state.final or row.printed is None or row.printed[0] is not state):
                row.printed = (state, detail)
                self._write_line(name, row, now)
            live = self._live
        # A new state is drawn at once; a new detail (Packer steps, many a minute) waits for the
        # next tick. Outside our lock: Live.refresh takes its own lock and then calls _render,
        # which takes ours; taking them the other way round would deadlock with its thread.
        if live is not None and state_changed:
            live.refresh()

    def close(self) -> None:
        """Stop the live display, leaving its final frame on screen. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            live, self._live = self._live, None
        if live is not None:
            live.stop()
        else:
            self._stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # plain mode

    def _write_line(self, name: str, row: _Row, now: float) -> None:
        stamp = self._wall()
        if stamp.tzinfo is None:  # a naive datetime is taken to be UTC already
            stamp = stamp.replace(tzinfo=timezone.utc)
        stamp_text = stamp.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        tail = [row.detail] if row.detail else []
        elapsed = row.elapsed(now)
        if int(elapsed) > 0:
            tail.append(f"({format_elapsed(elapsed)})")
        line = f"{stamp_text} {name:<{self._width}} {row.state.value:<{_STATE_WIDTH}} {' '.join(tail)}"
        self._stream.write(line.rstrip() + "\n")
        self._stream.flush()

    # live mode

    def _start_live(self) -> None:
        # deferred: rich (~0.06 s) only for a live display on a terminal; CI's plain lines never load it
        from rich import console as rich_console, live as rich_live

        # force_terminal: we have already decided this stream is worth a live display (or the
        # caller said so); rich's own detection would turn a forced live=True into a no-op.
        console = rich_console.Console(file=self._stream, force_terminal=True, highlight=False)
        self._live = rich_live.Live(
            console=console,
            transient=False,
            refresh_per_second=4,
            # Stdout carries --json; stderr is redirected above the display only when the
            # display is on the real stderr, so stray log lines do not tear it.
            redirect_stdout=False,
            redirect_stderr=self._stream is sys.stderr,
            get_renderable=self._render,
        )
        self._live.start(refresh=True)

    def _render(self) -> RenderableType:
        # deferred: as in `_start_live`, which runs first
        from rich import spinner as rich_spinner, table as rich_table, text as rich_text

        Spinner, Table, Text = rich_spinner.Spinner, rich_table.Table, rich_text.Text
        # Fixed-width columns first and the detail last, so nothing jumps sideways as elapsed
        # times grow and the detail alone is cut (with an ellipsis) to the terminal width.
        table = Table.grid(padding=(0, 1), expand=True)
        table.add_column(width=1, no_wrap=True)
        table.add_column(no_wrap=True, min_width=self._width)
        table.add_column(no_wrap=True, min_width=_STATE_WIDTH)
        table.add_column(no_wrap=True, justify="right", min_width=6)
        table.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
        with self._lock:
            now = self._clock()
            for name, row in self._rows.items():
                symbol, style = _LOOK[row.state]
                if row.state in (State.BUILDING, State.COPYING):
                    # One spinner per variant, kept across frames so it animates.
                    mark: RenderableType = self._spinners.setdefault(name, Spinner("dots", style=style))
                else:
                    mark = Text(symbol, style=style)
                elapsed = row.elapsed(now)
                table.add_row(
                    mark,
                    Text(name, style="bold"),
                    Text(row.state.value, style=style),
                    Text(format_elapsed(elapsed) if int(elapsed) > 0 else "", style="dim"),
                    # Text, not markup: Packer's messages may contain [brackets].
                    Text(row.detail),
                )
        return table
