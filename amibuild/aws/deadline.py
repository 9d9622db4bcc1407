"""The deadline of one channel operation: how long, in all, it may wait on AWS for answers.

A channel write (publish, promote, rollback, repair) runs inside ``with bound(Deadline()):``;
every gateway call made inside it, in any thread the gateway fans out to, is bounded by what is
left (`Session.client` wraps the client). When nothing is left the call is abandoned and the
gateway raises `DeadlineExceeded`; later calls of the operation are not sent.

The clock counts only the time spent waiting on AWS: it runs while at least one of the
operation's calls is on the wire, and stands still between calls (the writer's own pacing, lease
polls, read-back waits) and while every call in flight is queued in a client-side rate limiter.
A limiter marks that wait with ``with current().queued():`` (when `current()` is not None), so an
operation's clock starts once it holds its first token. A read of every channel (``--check``)
counts from the last answer instead (``between_answers``). The one place deadlines are kept.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from typing import Any, Callable, Iterator, TypeVar

CHANNEL_DEADLINE = 30.0  # seconds of waiting on AWS one channel operation may spend, retries included
AFTER_DEADLINE = 3.0  # what a writer out of time still spends: one read of every region, giving its lease back

T = TypeVar("T")

_CURRENT: contextvars.ContextVar["Deadline | None"] = contextvars.ContextVar("amibuild_deadline", default=None)


class Overdue(Exception):
    """No answer within the deadline (raised inside the gateway, mapped to `DeadlineExceeded`)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no answer within {seconds:g} s")
        self.seconds = seconds


class Deadline:
    """``seconds`` of waiting on AWS, shared by every thread of one operation.

    ``between_answers``: ``seconds`` of waiting with no answer; every answer starts the clock again
    (a read of thousands of channels keeps going while AWS answers, and gives up once it stops)."""

    def __init__(self, seconds: float = CHANNEL_DEADLINE, *, between_answers: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.between_answers = between_answers
        self._clock = clock
        self._lock = threading.Lock()
        self._wire = 0  # calls on the wire now (not queued in a limiter)
        self._since = 0.0  # when the wire last became busy
        self._spent = 0.0  # waiting on AWS before that

    def remaining(self) -> float:
        with self._lock:
            return self.seconds - self._used()

    def expired(self) -> bool:
        return self.remaining() <= 0

    def _used(self) -> float:
        return self._spent + (self._clock() - self._since if self._wire else 0.0)

    def _busy(self, step: int, *, answered: bool = False) -> None:
        with self._lock:
            if answered and self.between_answers:
                self._spent, self._since = 0.0, self._clock()
            if self._wire and self._wire + step == 0:
                self._spent += self._clock() - self._since
            elif not self._wire and step > 0:
                self._since = self._clock()
            self._wire += step

    @contextlib.contextmanager
    def queued(self) -> Iterator[None]:
        """Waiting in a client-side rate limiter: not time spent waiting on AWS."""
        self._busy(-1)
        try:
            yield
        finally:
            self._busy(+1)

    def run(self, call: Callable[[], T]) -> T:
        """``call()`` (one AWS call, its retries included), abandoned with `Overdue` once the deadline
        has passed. It runs in a daemon thread of its own, so an abandoned call holds up nothing."""
        if self.expired():
            raise Overdue(self.seconds)
        box: dict[str, Any] = {}
        done = threading.Event()

        def target() -> None:
            self._busy(+1)
            try:
                box["value"] = call()
            except BaseException as exc:  # handed to the caller's thread
                box["error"] = exc
            finally:
                self._busy(-1, answered=True)  # a value or an AWS error: AWS answered
                done.set()

        context = contextvars.copy_context()  # the limiter inside the call finds this deadline
        threading.Thread(target=context.run, args=(target,), name="amibuild-deadline", daemon=True).start()
        while not done.wait(max(0.01, min(self.remaining(), 1.0))):
            if self.expired():
                raise Overdue(self.seconds)
        if "error" in box:
            raise box["error"]
        return box["value"]


def current() -> Deadline | None:
    """The deadline of the operation this thread works for, if any."""
    return _CURRENT.get()


@contextlib.contextmanager
def bound(deadline: Deadline | None) -> Iterator[Deadline | None]:
    """Every gateway call inside (in this thread and those it fans out to) is bounded by ``deadline``."""
    token = _CURRENT.set(deadline)
    try:
        yield deadline
    finally:
        _CURRENT.reset(token)


def wrap(client: Any) -> Any:
    """The client as the current operation may use it: bounded by its deadline (as is, when none)."""
    deadline = _CURRENT.get()
    return client if deadline is None else _Bounded(client, deadline)


class _Bounded:
    """A botocore client whose operations (and paginations, read whole) run under a deadline."""

    def __init__(self, client: Any, deadline: Deadline) -> None:
        self._client, self._deadline = client, deadline

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name == "get_paginator":
            return lambda operation: _BoundedPaginator(attr(operation), self._deadline)
        if name.startswith("_") or name in ("meta", "exceptions", "can_paginate", "get_waiter") or not callable(attr):
            return attr
        return lambda *args, **kwargs: self._deadline.run(lambda: attr(*args, **kwargs))


class _BoundedPaginator:
    def __init__(self, paginator: Any, deadline: Deadline) -> None:
        self._paginator, self._deadline = paginator, deadline

    def paginate(self, **kwargs: Any) -> list:
        return self._deadline.run(lambda: list(self._paginator.paginate(**kwargs)))
