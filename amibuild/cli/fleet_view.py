"""`amibuild fleet` and `amibuild karpenter`: who runs which image, and the Karpenter hand-off.

The tasks live here (tasks.py adds them to the collection) so that their flags sit beside the
few lines that turn them into calls: `fleet_view` (flags → gather → classify) and the check.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from amibuild import secrets
from amibuild.aws import Aws
from amibuild.channels import known
from amibuild.channels import read as channel_read
from amibuild.cli import run as cli
from amibuild.cli.requests_views import FleetRequest, KarpenterRequest
from amibuild.cli.tasks_common import Scope, options
from amibuild.errors import SpecError
from amibuild.handoff import consumer
from amibuild.handoff import karpenter as karpenter_mod
from amibuild.lifecycle import fleet as fleet_mod
from amibuild.pipeline.naming import check_channel, parameter_name
from amibuild.pipeline.options import load_pipeline
from amibuild.suggest import suggest
from amibuild.views import summary


def fleet_view(options: Any, *, variant: str | None = None, channel: str | None = None, region: str | None = None,
               now: datetime | None = None, aws: Any = None, verify: bool = False) -> Any:
    """`amibuild fleet`: flags → gather (read-only) → classify (→ with ``verify``, each image's provenance marked)."""

    if channel:
        check_channel(channel)
    pipeline = load_pipeline(options)
    regions = (region,) if region else pipeline.target_regions
    if aws is None:
        aws = Aws(profile=options.profile, region=pipeline.build_region)
    if channel:  # a typo would show an empty view and exit 0; any variant of the selection may hold it
        known.require(aws, pipeline, pipeline.variants, known.Asked(channel), every=False, regions=regions)
    facts = fleet_mod.gather(aws, pipeline, regions)
    view = fleet_mod.classify(facts, now or datetime.now(timezone.utc), variant=variant, channel=channel, region=region)
    return fleet_mod.mark(view, fleet_mod.provenance(aws, pipeline, facts, view)) if verify else view


def fleet(c, r: FleetRequest):
    limit = cli.run(lambda: fleet_mod.Limit.parse(r.check_behind)) if r.check_behind not in (None, "") else None
    opts = options(c, Scope(r.pipeline, r.variant, profile=r.profile))
    view = cli.run(lambda: fleet_view(opts, variant=r.variant, channel=r.channel, region=r.region, verify=r.verify))
    if r.json:
        cli.emit_json(view.to_dict())
    elif not r.markdown:
        cli.lines_out(fleet_mod.report_lines(view))
    summary.publish(summary.fleet_markdown(view), to_stdout=r.markdown)
    cli.run(lambda: view.check(limit))
    if r.verify:
        cli.run(view.check_provenance)


def karpenter_manifest(options: Any, *, variant: str | None, channel: str | None, name: str | None = None,
                       role: str | None = None, instance_profile: str | None = None, cluster: str | None = None,
                       discovery: str | None = None, region: str | None = None, settings: Any = None,
                       aws: Any = None) -> dict:
    """`amibuild karpenter`: flags → the node class (checked before any AWS call) → the channel exists there."""

    if not variant or not channel:
        raise SpecError("karpenter: give --variant VARIANT and --channel CHANNEL, e.g. --variant ceph --channel stable")
    check_channel(channel)
    pipeline = load_pipeline(options)
    chosen = pipeline.variants[0]
    where = region or pipeline.build_region
    if settings and settings.proxy and not settings.proxy_credentials_parameter and chosen.proxy.credentials_parameter:

        # the variant's proxy { credentials_parameter }, for a proxy URL without credentials of its own
        if not secrets.credentials(settings.proxy):
            settings = replace(settings, proxy_credentials_parameter=chosen.proxy.credentials_parameter)
    parameter = parameter_name(pipeline, chosen, channel)
    manifest = karpenter_mod.node_class(
        name=karpenter_mod.check_name(name or f"{chosen.name}-{channel}"), parameter=parameter, region=where,
        os_family=chosen.os, cluster=cluster or pipeline.name, pipeline=pipeline.name, variant=chosen.name,
        channel=channel, role=role or "", instance_profile=instance_profile or "", discovery=discovery or "",
        settings=replace(settings, region=settings.region or where) if settings else karpenter_mod.NodeSettings(region=where))
    if aws is None:
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
        cli.say(f"karpenter: {note}")
    return manifest


def karpenter(c, r: KarpenterRequest):
    opts = options(c, Scope(r.pipeline, r.variant, profile=r.profile))

    def body() -> dict:
        if r.max_pods_expression:
            raise karpenter_mod.max_pods_expression_refused()
        settings = karpenter_mod.NodeSettings(
            proxy=r.proxy, no_proxy=tuple(e for v in r.no_proxy for e in v.split(",") if e),
            kubelet_flags=r.kubelet_flag, vpc_cidrs=r.vpc_cidr, service_cidr=r.service_cidr or None,
            region=r.region or "", proxy_credentials_parameter=r.proxy_credentials_parameter)
        return karpenter_manifest(opts, variant=r.variant, channel=r.channel, name=r.name, role=r.role,
                                  instance_profile=r.instance_profile, cluster=r.cluster, discovery=r.discovery,
                                  region=r.region, settings=settings)

    manifest = cli.run(body)
    if not r.cluster:  # the default is a guess: say it, so a wrong one is seen before the nodes fail to join
        cli.say(karpenter_mod.cluster_default_note(manifest, role=bool(r.role or r.instance_profile),
                                                   discovery=bool(r.discovery)))
    note = manifest["metadata"]["annotations"].get("amibuild/proxy-credentials")
    if note:
        cli.say(f"karpenter: {note}")
    cli.emit_json(manifest) if r.json else print(karpenter_mod.to_yaml(manifest), end="")
