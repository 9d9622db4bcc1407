"""`amibuild tests`, `amibuild test-ami` and the gate flags: flags turned into the stages' values, results into lines."""

from __future__ import annotations

from typing import Any, Iterable

from amibuild.pipeline import Pipeline
from amibuild.pipeline import imagetests


def listing(pipeline: Pipeline) -> list[dict[str, Any]]:
    """Every selected variant's checks (what will run) and the built-ins turned off."""
    return [{"variant": v.name, "os": v.os, "flavor": v.flavor, "kubernetes_version": v.kubernetes_version,
             **imagetests.check_set(v).to_dict()} for v in pipeline.variants]


def listing_lines(entries: Iterable[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for entry in entries:
        checks = entry["checks"]
        out.append(f"{entry['variant']} ({entry['os']} {entry['flavor']}, Kubernetes {entry['kubernetes_version']}): "
                   f"{len(checks)} check(s), on the build instance and in the boot test")
        width = max((len(c["name"]) for c in checks), default=0)
        for check in checks:
            out.append(f"  {check['name'].ljust(width)}  {check['origin']:<13}  {check['what']}")
        for off in entry["disabled"]:
            out.append(f"  {off['name'].ljust(width)}  turned off     {off['reason']} ({off['where']})")
    return out


NOW_ENV = "AMIBUILD_NOW"  # the time a gate's soak is judged at (tests, replays); default: the clock


def now(flag: str | None, env: dict | None = None):
    """The time gates are decided at: --now, else $AMIBUILD_NOW, else the clock (UTC)."""
    import os
    from datetime import datetime, timezone

    from amibuild.errors import SpecError

    source, value = ("--now", flag) if flag else (NOW_ENV, (env if env is not None else os.environ).get(NOW_ENV, ""))
    if not value:
        return datetime.now(timezone.utc)
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise SpecError(f"{source} {value!r}: an ISO 8601 time, e.g. 2026-12-04T12:00:00Z") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
