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
