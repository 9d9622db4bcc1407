"""Where a channel's write lease lives (its home): a property of the channel, recorded on the channel.

Every writer of a channel must meet at one lease, whatever its pipeline file says: the regions in
another order, a region added since the channel was first written, a build region of its own. So
the home is chosen once, when the channel is first written (the first of its regions in name
order), and recorded on the channel's parameter in every region (the tag `tags.LEASE_HOME`). A
writer reads the channel's tags in the regions it knows before it takes the lease and goes where
they say (`lease_home`, pure); only a channel nobody has written yet gets its home from the
pipeline's regions.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from amibuild import tags
from amibuild.aws import Aws, fan_out
from amibuild.pipeline.naming import PipelineLike, VariantLike, parameter_name


def lease_home(tags_by_region: Mapping[str, Mapping[str, str]], regions: Iterable[str]) -> str:
    """The channel's lease home from the tags its parameters carry ({region: tags}, regions where the
    channel does not exist left out), else the first of `regions` (the pipeline's) in name order."""
    recorded = {found[tags.LEASE_HOME] for found in tags_by_region.values() if found.get(tags.LEASE_HOME)}
    # one value, unless two first writes raced: either way every writer picks the same
    return min(recorded) if recorded else sorted(regions)[0]


def known_regions(pipeline: PipelineLike) -> list[str]:
    """Every region a writer of this pipeline looks for the channel in."""
    return list(dict.fromkeys([*pipeline.target_regions, *getattr(pipeline, "channel_regions", ())]))


def read_home(aws: Aws, pipeline: PipelineLike, variant: VariantLike, channel: str,
              template: str | None = None) -> str:
    """The channel's lease home, from its tags in every region the pipeline knows (read in parallel)."""
    name = parameter_name(pipeline, variant, channel, template)
    regions = known_regions(pipeline)
    exists = fan_out(regions, lambda r: aws.find_parameter(name, r) is not None)
    found = fan_out([r for r in regions if exists[r]], lambda r: aws.parameter_tags(name, r))
    return lease_home(found, getattr(pipeline, "channel_regions", ()) or pipeline.target_regions)


def write_places(pipeline: PipelineLike) -> list[str]:
    """Where every write of a channel holds its lease besides the home: every region it writes.
    Prune holds its own lease in every region it prunes and waits for any channel lease there
    (`amibuild.lifecycle.exclusive`): a prune whose pipeline file lists other regions than this
    writer's meets it in every region both touch, the only regions where one endangers the other.
    A first write (no home recorded yet) needs no other places: two first writes whose pipeline files
    list different regions would pick different homes, but any two such writers share a region (each
    writes every region of the channel it knows), so they meet there."""
    return known_regions(pipeline)
