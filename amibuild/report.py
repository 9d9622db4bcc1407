"""Plain-text reports of results for people (JSON goes out as data, see cli.emit_json)."""

from __future__ import annotations

from typing import Any, Iterable


def build_lines(run: Any) -> Iterable[str]:
    plan = run.plan
    if run.outcomes is None:
        yield f"plan for run {plan.run_id} (dry run: nothing built), regions {', '.join(plan.regions)}:"
        for item in plan.items:
            amis = " ".join(f"{r}={a}" for r, a in sorted(item.existing.items()))
            yield f"  {item.decision.value:5} {item.name}: {item.reason}{'  ' + amis if amis else ''}"
        return
    yield f"run {plan.run_id}: record {run.record_path}"
    width = max((len(o.name) for o in run.outcomes), default=0)
    for outcome in run.outcomes:
        amis = " ".join(f"{r}={a}" for r, a in sorted(outcome.amis.items()))
        detail = amis if outcome.status in ("built", "skipped") else f"{outcome.error} (log: {outcome.log})"
        yield f"  {outcome.name.ljust(width)}  {outcome.status:11}  {detail}"


def runs_lines(records: list[dict]) -> Iterable[str]:
    if not records:
        yield "no runs recorded yet (build/runs/ is empty)"
        return
    for record in records:
        counts: dict[str, int] = {}
        for variant in record.get("variants", []):
            counts[variant.get("status", "?")] = counts.get(variant.get("status", "?"), 0) + 1
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        yield f"{record.get('run_id')}  {record.get('started', '')}  {summary}"
