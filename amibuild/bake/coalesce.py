"""Many threads each asking a lookup about their own key, answered by a few lookups of many keys.

The executor's builds each look for their image again once they hold their build lease (another
run may have finished it since the plan was made): with `--parallel 16` that was 16 DescribeImages
per region at once, served one at a time by the endpoint, and the first `packer build` started only
after most of them had been answered (~1 s against the emulator). `Coalesced` folds them: a call
joins the next lookup to start, which asks for every key waiting by then; while one lookup is in
flight, the calls arriving meanwhile wait for the next one instead of starting their own. So 16
builds make two lookups per region, the first for the first build alone.

The guarantee the lease needs: **every answer comes from a lookup that started after the call
did.** A build that took its lease and then asks sees everything a lookup of its own would have
seen; an answer already in flight when it asked is never given to it.
"""

from __future__ import annotations

import threading
from typing import Callable, Generic, Hashable, Mapping, Sequence, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Coalesced(Generic[K, V]):
    """``lookup(keys) -> {key: value}`` shared by concurrent callers of ``self(key)``."""

    def __init__(self, lookup: Callable[[Sequence[K]], Mapping[K, V]]) -> None:
        self._lookup = lookup
        self._cond = threading.Condition()
        self._started = 0  # lookups started so far; the next one is number _started + 1
        self._finished = 0
        self._running = False
        self._waiting: list[K] = []  # keys for the next lookup
        self._answers: dict[int, tuple[Mapping[K, V] | None, BaseException | None]] = {}
        self._readers: dict[int, int] = {}  # callers yet to read each answer
        self.lookups: list[tuple[K, ...]] = []  # the keys of each lookup made, in order

    def __call__(self, key: K) -> V:
        with self._cond:
            number = self._started + 1  # the first lookup to start from now on: it will include this key
            self._waiting.append(key)
            self._readers[number] = self._readers.get(number, 0) + 1
            self._cond.notify_all()  # for wait_queued
            while self._finished < number:
                if self._running:
                    self._cond.wait()
                    continue
                # none running, none started since this call: it starts lookup `number` for every waiting key
                self._started = number
                keys = tuple(dict.fromkeys(self._waiting))
                self._waiting = []
                self._running = True
                self.lookups.append(keys)
                self._cond.release()
                try:
                    answer: tuple[Mapping[K, V] | None, BaseException | None] = (dict(self._lookup(keys)), None)
                except BaseException as exc:  # every caller of this lookup gets its error
                    answer = (None, exc)
                finally:
                    self._cond.acquire()
                self._answers[number] = answer
                self._finished = number
                self._running = False
                self._cond.notify_all()
            found, error = self._answers[number]
            self._readers[number] -= 1
            if not self._readers[number]:
                del self._readers[number], self._answers[number]
        if error is not None:
            raise error
        assert found is not None
        return found[key]

    def wait_queued(self, count: int, timeout: float = 10.0) -> bool:
        """Block until ``count`` calls wait for the next lookup (tests: a known point, no sleeping)."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self._waiting) >= count, timeout)
