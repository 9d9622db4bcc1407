"""Concurrent lookups folded into few (amibuild.bake.coalesce): every answer comes from a lookup
that started after the call did; calls arriving while one is in flight share the next one."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from amibuild.bake.coalesce import Coalesced


class GatedLookup:
    """A lookup that answers (its own number, key) and, when told to, waits for `release` first."""

    def __init__(self, hold_first: int = 0, fail: int | None = None) -> None:
        self.calls = 0
        self.hold_first = hold_first
        self.fail = fail
        self.entered = threading.Event()
        self.gate = threading.Event()

    def __call__(self, keys):
        self.calls += 1
        number = self.calls
        if number <= self.hold_first:
            self.entered.set()
            assert self.gate.wait(10), "the test never released the lookup"
        if number == self.fail:
            raise RuntimeError(f"lookup {number} failed")
        return {k: (number, k) for k in keys}


def test_a_lone_call_is_one_lookup_of_its_key() -> None:
    lookup = Coalesced(GatedLookup())
    assert lookup("a") == (1, "a")
    assert lookup("a") == (2, "a")  # a later call never gets an earlier answer
    assert lookup.lookups == [("a",), ("a",)]


def test_calls_during_a_lookup_wait_for_the_next_and_share_it() -> None:
    gated = GatedLookup(hold_first=1)
    lookup = Coalesced(gated)
    with ThreadPoolExecutor(max_workers=4) as pool:
        first = pool.submit(lookup, "a")
        assert gated.entered.wait(10)  # lookup 1 (for "a" alone) is in flight
        later = [pool.submit(lookup, k) for k in ("b", "c", "a")]
        assert lookup.wait_queued(3)  # all three wait for the next lookup, none started its own
        gated.gate.set()
        assert first.result(10) == (1, "a")
        # started after they called: lookup 2, one for the three of them ("a" asked once)
        assert [f.result(10) for f in later] == [(2, "b"), (2, "c"), (2, "a")]
    assert lookup.lookups == [("a",), ("b", "c", "a")]


def test_an_answer_in_flight_is_not_given_to_a_caller_that_came_after_it_started() -> None:
    gated = GatedLookup(hold_first=1)
    lookup = Coalesced(gated)
    with ThreadPoolExecutor(max_workers=2) as pool:
        first = pool.submit(lookup, "a")
        assert gated.entered.wait(10)
        second = pool.submit(lookup, "a")  # the same key, while lookup 1 for it is in flight
        assert lookup.wait_queued(1)
        gated.gate.set()
        assert (first.result(10), second.result(10)) == ((1, "a"), (2, "a"))


def test_a_failed_lookup_fails_each_of_its_callers_and_the_next_one_works() -> None:
    gated = GatedLookup(hold_first=1, fail=2)
    lookup = Coalesced(gated)
    with ThreadPoolExecutor(max_workers=3) as pool:
        first = pool.submit(lookup, "a")
        assert gated.entered.wait(10)
        failing = [pool.submit(lookup, k) for k in ("b", "c")]
        assert lookup.wait_queued(2)
        gated.gate.set()
        assert first.result(10) == (1, "a")
        for future in failing:
            with pytest.raises(RuntimeError, match="lookup 2 failed"):
                future.result(10)
    assert lookup("b") == (3, "b")
