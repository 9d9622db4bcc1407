"""The plan's image lookup, started before the variants render, for the fingerprints the last runs had.

The plan needs amibuild's images with each variant's fingerprint (one DescribeImages per region),
and a fingerprint is known only once its variant is rendered. In the common run, nothing changed
since the last one: the fingerprints are the ones the newest run records name. build-ami asks
for those while it renders (`recent_fingerprints`, then the lookup beside the render); once the
fingerprints are known, it looks up only those the early lookup did not ask for (`unasked`:
none when nothing changed) and joins the two answers (`joined`).

The plan sees what one lookup after the render would have shown: both lookups are made during
this run, and `plan_build` indexes the images by fingerprint, so the early answer's images of
fingerprints no variant has now change nothing. A guess that is wrong costs one more lookup per
region, never a wrong decision.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping, Sequence

from amibuild.aws import Image
from amibuild.bake import record as records

RECORDS_READ = 3  # the newest run records a guess reads: a run of a few variants does not hide the others


def recent_fingerprints(build_dir: str | Path, variants: Iterable[str]) -> tuple[str, ...]:
    """The newest fingerprint each of ``variants`` had in the newest run records of ``build_dir``:
    a guess, so a missing, unreadable or foreign record gives fewer (or none), never an error."""
    wanted = set(variants)
    found: dict[str, str] = {}
    for listed in records.list_runs(build_dir, limit=RECORDS_READ):  # newest first
        for entry in (listed.record or {}).get("variants", []):
            name, fingerprint = entry.get("name"), entry.get("fingerprint")
            if name in wanted and isinstance(fingerprint, str) and fingerprint:
                found.setdefault(name, fingerprint)
    return tuple(sorted(set(found.values())))


def unasked(needed: Iterable[str], asked: Iterable[str]) -> list[str]:
    """The fingerprints still to look up: those needed that the early lookup did not ask for. Pure."""
    done = set(asked)
    return sorted({fp for fp in needed if fp not in done})


def joined(*answers: Mapping[str, Sequence[Image]]) -> dict[str, list[Image]]:
    """Several lookups' answers (region -> images) as one, each image once. Pure."""
    out: dict[str, list[Image]] = {}
    for answer in answers:
        for region, images in answer.items():
            have = out.setdefault(region, [])
            seen = {i.image_id for i in have}
            have.extend(i for i in images if i.image_id not in seen)
    return out
