"""The `fleet` and `karpenter` jobs: who runs which image (`fleet_view`: gather → classify, and with
``verify`` each image's provenance), and the Karpenter node class that follows a channel
(`karpenter_manifest`: the node class, checked before any AWS call, then the channel's parameter
looked up where the nodes read it). The cli turns the flags into their arguments and prints.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Callable

from amibuild.aws import Aws
from amibuild.channels import known
from amibuild.channels import read as channel_read
from amibuild.errors import SpecError
from amibuild.handoff import consumer
from amibuild.handoff import karpenter as karpenter_mod
from amibuild.jobs.env import one_variant
from amibuild.lifecycle import fleet as fleet_mod
from amibuild.pipeline.naming import check_channel, parameter_name
from amibuild.pipeline import proxy_credentials
from amibuild.pipeline.options import load_pipeline
from amibuild.suggest import suggest


def fleet_view(options: Any, *, variant: str | None = None, channel: str | None = None, region: str | None = None,
               aws: Any = None, verify: bool = False) -> Any:
    """`amibuild fleet`: gather (read-only) → classify (→ with ``verify``, each image's provenance marked)."""

    if channel:
        check_channel(channel)
    pipeline = load_pipeline(options)
    regions = (region,) if region else pipeline.target_regions
    aws = aws or Aws(profile=options.profile, region=pipeline.build_region)
    if channel:  # a typo would show an empty view and exit 0; any variant of the selection may hold it
        known.require(aws, pipeline, pipeline.variants, known.Asked(channel), every=False, regions=regions)
    facts = fleet_mod.gather(aws, pipeline, regions)
    view = fleet_mod.classify(facts, datetime.now(timezone.utc), variant=variant, channel=channel, region=region)
    return fleet_mod.mark(view, fleet_mod.provenance(aws, pipeline, facts, view)) if verify else view


def karpenter_manifest(options: Any, *, channel: str | None, name: str | None = None,
                       role: str | None = None, instance_profile: str | None = None, cluster: str | None = None,
                       discovery: str | None = None, region: str | None = None,
                       settings: karpenter_mod.NodeSettings, say: Callable[[str], None]) -> dict:
    """`amibuild karpenter`: the node class (checked before any AWS call) → the channel exists there;
    a note about the image's admission in the region goes to ``say``."""

    if not channel:
        raise SpecError("karpenter: give --channel CHANNEL, the channel the node class follows, e.g. --channel stable")
    check_channel(channel)
    pipeline, chosen = one_variant(options, "whose channel the node class follows")
    where = region or pipeline.build_region
    # the region the nodes are in, and the variant's proxy { credentials_parameter } for a proxy URL without its own
    settings = replace(settings, region=settings.region or where, proxy_credentials_parameter=proxy_credentials.for_proxy(
        settings.proxy, settings.proxy_credentials_parameter, chosen.proxy.credentials_parameter))
    parameter = parameter_name(pipeline, chosen, channel)
    manifest = karpenter_mod.node_class(
        name=karpenter_mod.check_name(name or f"{chosen.name}-{channel}"), parameter=parameter, region=where,
        os_family=chosen.os, cluster=cluster or pipeline.name, pipeline=pipeline.name, variant=chosen.name,
        channel=channel, role=role or "", instance_profile=instance_profile or "", discovery=discovery or "",
        settings=settings)
    aws = Aws(profile=options.profile, region=pipeline.build_region)
    known.require(aws, pipeline, [chosen], known.Asked(channel), regions=(where,))
    found = aws.find_parameter(parameter, where)
    if found is None:
        held = sorted({e.channel for e in channel_read.channels(aws, pipeline=pipeline, regions=(where,))
                       if e.variant == chosen.name and e.ami})
        raise SpecError(f"--channel {channel}: variant {chosen.name} has no channel {channel} in {where} "
                        f"(no parameter {parameter}){suggest(channel, held, cutoff=0.5)}; "
                        + (f"its channels there: {', '.join(held)}" if held else
                           "it has none there yet: build-ami publishes to recommended, promote copies it on"))
    note = consumer.admission_note(aws, where, found.value)
    if note:  # a warning only: Karpenter resolves the parameter in the cluster's account when it launches
        say(f"karpenter: {note}")
    return manifest
