"""The lower bound of a run through the token-bucket proxy, and the rows that set a run beside it.

The bound is the larger of the rate bound (for every region and bucket, the calls the run needed
less the bucket's burst, over AWS's documented refill rate; the largest, since regions and buckets
run side by side) and the emulator bound (the same forwarded requests replayed straight to the
emulator, no proxy and no bucket, 32 at a time, in their order).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from benchmarks.common import BenchmarkError, Row, Target, ms


def bound_rows(label: str, wall: float, proxy: Any, mark: int, retried: int, failures: Sequence[str], cells: int,
               upstream: str, start: float, cell: str) -> list[Row]:
    """Rows for one run: wall (and when the first and last answers came), both bounds, the ratio
    (target 1.3), failures (target 0), throttled answers and the calls per `cell` by API."""
    from amibuild.aws import rates
    from faultproxy import replay

    seen = proxy.log[mark:]
    forwarded = [s for s in seen if s.outcome == "forwarded"]
    if not forwarded:
        raise BenchmarkError(f"{label}: the proxy saw no request")
    throttled = sum(1 for s in seen if s.outcome == "throttled")
    per_bucket: Counter = Counter()
    per_api: Counter = Counter()
    for s in forwarded:
        op = s.op.rsplit(".", 1)[-1]
        per_api[op] += 1
        chosen = rates.bucket(s.service, op)
        if chosen is not None:
            per_bucket[(s.region, s.service, chosen[0], chosen[1])] += 1
    rate_bound, where = 0.0, ""
    for (region, service, name, rate), n in per_bucket.items():
        seconds = max(0.0, n - rate.burst) / rate.per_second
        if seconds > rate_bound:
            rate_bound, where = seconds, f"{service} {name} in {region}: {n} calls at {rate.per_second:g}/s"
    recorded, proxy.recorded = proxy.recorded or [], None
    emulator_bound = replay(upstream, recorded)
    bound = max(rate_bound, emulator_bound)
    per_cell = ", ".join(f"{op} {n / cells:.2f}" for op, n in per_api.most_common())
    return [
        Row(f"{label}: wall", ms(wall), detail=f"{len(forwarded)} requests answered; first answer after "
            f"{min(s.at for s in seen) - start:.2f} s, last {wall - (max(s.at for s in seen) - start):.2f} s before the end"),
        Row(f"{label}: rate bound", ms(rate_bound), detail=where),
        Row(f"{label}: emulator bound", ms(emulator_bound), detail=f"{len(recorded)} requests replayed"),
        Row(f"{label}: wall / lower bound", wall / bound, unit="x", target=Target(1.3)),
        Row(f"{label}: failures", len(failures), unit="", target=Target(0)),
        Row(f"{label}: throttled, retried", throttled, unit="",
            detail=f"gateway retried {retried}; calls per {cell}: {per_cell}"),
    ]
