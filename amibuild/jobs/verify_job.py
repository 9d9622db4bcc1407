"""The `verify` job: check the signed statements about a channel's images, or one image.

`verify_report`: the targets (the channel's parameter per region, or one AMI), the statements read
and verified (`amibuild.channels.channel_verify`), and a render of today's pipeline file
(`today_renders`) to compare the signed fingerprint with, rendered for the platform the cli chose.
"""

from __future__ import annotations

import json as json_mod
from dataclasses import replace
from typing import Any, Callable

from amibuild.aws import Aws, beside
from amibuild.bake import prepare
from amibuild.channels import channel_verify as verify_mod
from amibuild.channels import known
from amibuild.channels.channel_verify import Target, Today
from amibuild.errors import AmibuildError, SpecError
from amibuild.jobs.env import one_variant
from amibuild.jobs.platform import Platform
from amibuild.pipeline.naming import check_channel
from amibuild.pipeline.options import load_pipeline
from amibuild.pipeline.value_checks import AMI_ID_FLAG


def today_renders(options: Any, pipeline: Any, aws: Any, variants: list[str], *,
                  platform: Callable[[], Platform]) -> tuple[dict[str, Any], str]:
    """({variant: `Today`}, why not) from a render of today's pipeline file, for the variants asked,
    rendered as build-ami renders them here (for the platform ``platform()`` names, asked only then)."""
    named = [v for v in variants if any(x.name == v for x in pipeline.variants)]
    if not named:
        return {}, ""
    chosen_platform = platform()
    try:
        chosen = replace(pipeline, variants=tuple(v for v in pipeline.variants if v.name in named))
        prepared = prepare.prepare(options, aws=aws, pipeline=chosen, target=chosen_platform.target,
                                   transform=chosen_platform.transform)
    except AmibuildError as exc:
        return {}, f"today's file was not rendered: {exc}"
    return {r.variant.name: Today(r.fingerprint, json_mod.loads(json_mod.dumps(r.variant.settings(), default=str)),
                                  {region: s.image_id for region, s in r.sources.items() if s.image_id})
            for r in prepared.rendered}, ""


def verify_report(options: Any, *, ami: str | None, channel: str | None,
                  region: str | None, platform: Callable[[], Platform], aws: Any = None) -> Any:
    """Targets → statements read and verified → (the report (pure check over the facts), why today's
    file was not rendered)."""

    if bool(ami) == bool(channel):
        raise SpecError("verify: give --ami AMI, or --channel CHANNEL [--variant VARIANT] [--region REGION]")
    if ami and not AMI_ID_FLAG.fullmatch(ami):
        raise SpecError(f"--ami {ami!r} is not an AMI id (ami- and 8 or 17 hex digits)")
    if channel:
        check_channel(channel)
        pipeline, chosen = one_variant(options, "whose channel this is")
    else:
        pipeline, chosen = load_pipeline(options), None
    regions = list(pipeline.target_regions)
    if region and region not in regions:
        raise SpecError(f"--region {region}: not a target region of pipeline {pipeline.name} ({', '.join(regions)})")
    aws = aws or Aws(profile=options.profile, region=pipeline.build_region)
    if ami:
        where = region or pipeline.build_region
        targets = [Target(where, ami, aws.find_image(where, ami))]
        facts = verify_mod.gather(aws, pipeline, targets, subject=ami)
        # the variant is known once its provenance is read: today's render comes after
        variants = sorted({verify_mod.variant_of(f) for f in facts.found.values() if f is not None} - {""})
        today, why_not = today_renders(options, pipeline, aws, variants, platform=platform)
        return verify_mod.check(facts, today), why_not
    # a typo'd channel is refused with did-you-mean (exit 2), as every task that names one does
    known.require(aws, pipeline, [chosen], known.Asked(channel), regions=[region] if region else None)
    gate = pipeline.gates.get(channel)
    # today's render (imports, `packer version`, the source AMI lookups) runs beside the reads
    with beside(lambda: today_renders(options, pipeline, aws, [chosen.name], platform=platform)) as rendered:
        targets = verify_mod.channel_targets(aws, pipeline, chosen, channel, [region] if region else regions)
        facts = verify_mod.gather(aws, pipeline, targets, subject=f"{chosen.name} {channel}", variant=chosen.name,
                                  requires_test=bool(gate and "tested" in gate.requires))
        today, why_not = rendered()
    return verify_mod.check(facts, today), why_not
