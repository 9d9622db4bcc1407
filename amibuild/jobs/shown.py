"""What a command prints, as its job returns it: `Shown`, a result with how it reads to people.

The cli prints it (`amibuild.cli.run.show`): with --json its data, else its lines (or text), then
its Markdown summary, then the notes after it; then it exits as `raise_for_status` says.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable


@dataclasses.dataclass(frozen=True)
class Shown:
    """``result`` and how it reads: ``data`` (for --json; default its `to_dict()`), ``lines`` (default its
    `lines()`) or ``text`` (printed as it is), a Markdown ``summary`` (or None), the ``notes`` said on
    stderr after it, and its verdict (``status``; default its `raise_for_status()`, if it has one)."""

    result: Any
    data: Callable[[Any], Any] | None = None
    lines: Callable[[Any], Any] | None = None
    text: str | None = None
    summary: Callable[[Any], str] | None = None
    notes: tuple[str, ...] = ()
    status: Callable[[], None] | None = None

    def to_dict(self) -> Any:
        return self.data(self.result) if self.data else self.result.to_dict()

    def report_lines(self) -> list[str]:
        return list(self.lines(self.result) if self.lines else self.result.lines())

    def markdown(self) -> str | None:
        return self.summary(self.result) if self.summary else None

    def raise_for_status(self) -> None:
        if self.status:
            self.status()
        elif hasattr(self.result, "raise_for_status"):
            self.result.raise_for_status()
