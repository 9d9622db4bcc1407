"""Channels that grew through another pipeline folder: found before build-ami builds anything.

A channel is written in every region it lives in or in none, and each of its parameters records
those regions (the tag `tags.CHANNEL_REGIONS`). A checkout of the pipeline whose file lists more
regions may have grown the channel; a run of a file listing fewer can then never publish to it:
`decide` refuses the write, but in build-ami only after the builds. `find_outgrown` asks first,
in a few batched calls per region whatever the number of variants (no call per channel).

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import itertools
import string
from typing import Mapping, Sequence

from amibuild import tags
from amibuild.aws import Aws, fan_out
from amibuild.errors import PublishRefused

_ANY_REGION = tuple(string.ascii_lowercase)  # every region name begins with a letter
FIT_MAX = 512  # fitting sets asked for (11 calls a region); a run of more regions reads the suspects' tags instead


def fitting(regions: Sequence[str], region: str) -> list[str]:
    """Every regions tag a channel parameter in `region` may carry and still be written by a run of
    `regions`: the sorted, space-joined sets of those regions that hold `region`. Pure."""
    others = sorted(set(regions) - {region})
    return [" ".join(sorted({region, *extra})) for n in range(len(others) + 1)
            for extra in itertools.combinations(others, n)]


def outgrown(wanted: Sequence[str], recording: Mapping[str, Sequence[str]], fit: Mapping[str, Sequence[str]] | None,
             recorded: Mapping[str, Mapping[str, str]], regions: Sequence[str] = ()) -> dict[str, tuple[str, ...]]:
    """{parameter: every region it records} for each of `wanted` (this run's channel parameters) that
    records regions in some region (`recording`: region -> names) not matched by a fitting set there
    (`fit`: region -> names; None: not asked, the regions recorded are judged against the run's
    `regions` once read). ``recorded``: the tags read for those parameters (parameter -> tags). Pure."""
    names = set(wanted)
    grown = sorted({name for region, found in recording.items() for name in found
                    if name in names and (fit is None or name not in set(fit.get(region, ())))})
    found = {name: tuple(sorted(recorded.get(name, {}).get(tags.CHANNEL_REGIONS, "").split())) for name in grown}
    if fit is None and recorded:
        return {name: where for name, where in found.items() if not set(where) <= set(regions)}
    return found


def find_outgrown(aws: Aws, pipeline: str, channel: str, parameters: Sequence[str],
                  regions: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Read `outgrown`'s facts in every region (in parallel) and decide: {parameter: its regions}."""
    if not parameters:
        return {}
    chosen = {tags.PIPELINE: [pipeline], tags.CHANNEL: [channel]}

    def look(job: tuple[str, str]) -> list[str]:
        region, which = job
        if which == "recording":
            return aws.parameters_tagged(region, chosen, prefixes={tags.CHANNEL_REGIONS: _ANY_REGION})
        return aws.parameters_tagged(region, {**chosen, tags.CHANNEL_REGIONS: fitting(regions, region)})

    # the fitting sets double with each region: past FIT_MAX each suspect's tags are read instead
    asked = ("recording",) if 2 ** (len(set(regions)) - 1) > FIT_MAX else ("recording", "fit")
    seen = fan_out([(r, which) for r in regions for which in asked], look)
    recording = {r: seen[(r, "recording")] for r in regions}
    fit = {r: seen[(r, "fit")] for r in regions} if "fit" in asked else None
    suspects = outgrown(parameters, recording, fit, {})
    where = {name: next(r for r in regions if name in recording[r]) for name in suspects}
    recorded = fan_out(sorted(suspects), lambda name: aws.parameter_tags(name, where[name]))
    return outgrown(parameters, recording, fit, recorded, regions)


def refusal(channel: str, grown: Mapping[str, Sequence[str]], regions: Sequence[str]) -> PublishRefused | None:
    """The error build-ami stops with before building, naming each grown channel parameter, where it
    lives and what to do; None when nothing grew."""
    if not grown:
        return None
    ours = set(regions)
    detail = "; ".join(f"{name} lives in {', '.join(found) or 'more regions'}"
                       + (f" ({', '.join(r for r in found if r not in ours)} not in this pipeline)" if found else "")
                       for name, found in sorted(grown.items()))
    return PublishRefused(
        f"channel {channel} grew beyond this pipeline's regions ({', '.join(regions)}), through a pipeline "
        f"file that lists more: {detail}. A channel is written in every region or none, so this run could "
        "build but never publish; nothing was built or written. Add those regions to the pipeline file "
        "(`regions` or `copy_to`), or pass --no-publish to build only")
