"""The emulator's clock: the time AWS answers with (runs in the emulator's process).

AWS stamps every answer with its own time (the HTTP ``Date`` header) and every SSM parameter
version with it (``LastModifiedDate``); amibuild measures a channel's soak between the two. The
sandbox takes both from one clock, the real one plus an offset a test moves forward, so a soak
test writes at "four days later" without `--now`::

    GET  {CONTROL}   {"now": ISO 8601, "offset": seconds}
    POST {CONTROL}   {"advance": seconds} or {"set": ISO 8601}: move it forward (never back: AWS's
                     clock does not run back); answers as GET does. A reset puts it back to real time.
"""

from __future__ import annotations

import math
import threading
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from typing import Any, Callable

from amibuild.sandbox import SandboxError
from amibuild.sandbox.seed import API_PREFIX

CONTROL = f"{API_PREFIX}/clock"


class Clock:
    """The real time plus an offset that only grows (thread-safe: the server is threaded)."""

    def __init__(self, real: Callable[[], datetime] = lambda: datetime.now(timezone.utc)) -> None:
        self._real = real
        self._lock = threading.Lock()
        self._offset = 0.0

    def now(self) -> datetime:
        with self._lock:
            offset = self._offset
        return self._real() + timedelta(seconds=offset)

    def reset(self) -> None:
        with self._lock:
            self._offset = 0.0

    def control(self, body: dict[str, Any]) -> dict[str, Any]:
        """Move the clock as ``body`` says (nothing: just read it); the time it shows then."""
        if set(body) - {"advance", "set"} or len(body) > 1:
            raise SandboxError('clock wants {"advance": seconds} or {"set": "ISO 8601"}, one of them')
        if "advance" in body:
            seconds = body["advance"]
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) \
                    or seconds < 0:
                raise SandboxError(f"clock advance {seconds!r}: a number of seconds, 0 or more (it never runs back)")
            with self._lock:
                self._offset += float(seconds)
        elif "set" in body:
            try:
                when = datetime.fromisoformat(str(body["set"]).replace("Z", "+00:00"))
            except ValueError:
                raise SandboxError(f"clock set {body['set']!r}: an ISO 8601 time, e.g. 2030-01-01T00:00:00Z") from None
            when = when if when.tzinfo else when.replace(tzinfo=timezone.utc)
            with self._lock:
                real = self._real()
                if when < real + timedelta(seconds=self._offset):
                    raise SandboxError(f"clock set {body['set']!r}: that is before the emulator's time now "
                                       "(it never runs back; a reset puts it back to the real time)")
                self._offset = (when - real).total_seconds()
        now = self.now()
        with self._lock:
            offset = self._offset
        return {"now": now.isoformat(), "offset": offset}

    def naive_utcnow(self) -> datetime:
        """As moto's ``utcnow``: a naive UTC datetime."""
        return self.now().replace(tzinfo=None)

    def http_date(self) -> str:
        return format_datetime(self.now().astimezone(timezone.utc), usegmt=True)


def dated_handler(base: type, clock: Clock) -> type:
    """The server's request handler with its ``Date`` header from ``clock`` (http.server writes the
    header itself, in `send_response`, from `date_time_string`)."""

    class Dated(base):  # type: ignore[misc, valid-type]
        def date_time_string(self, timestamp: float | None = None) -> str:
            return clock.http_date() if timestamp is None else super().date_time_string(timestamp)

    return Dated


def install(clock: Clock) -> None:
    """Stamp SSM's times (parameter versions, commands, documents) from ``clock``."""
    import moto.ssm.models as ssm_models

    ssm_models.utcnow = clock.naive_utcnow
