"""`amibuild fleet` and `amibuild karpenter`: who runs which image, and the Karpenter hand-off.

The tasks live here (tasks.py adds them to the collection) so that their flags sit beside the
few lines that turn them into calls: `fleet_view` (flags → gather → classify) and the check.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from dataclasses import dataclass

from amibuild.cli import run as cli
from amibuild.cli.command import Scope, command, flag, like
from amibuild.suggest import suggest


@dataclass(frozen=True)
class FleetRequest:
    """`amibuild fleet`."""

    variant: str | None = flag("Only consumers and channels of this variant (default: every one)")
    channel: str | None = flag("Only this channel (default: every one)")
    region: str | None = flag("Only this region (default: every target region of the pipeline)")
    json: bool = flag("Print the view as JSON on stdout", False)
    markdown: bool = flag("Print the view as a Markdown summary on stdout (as written to $GITHUB_STEP_SUMMARY)",
                          False)
    check_behind: str | None = flag("Exit 1, naming them, when any consumer is more than N versions (or Nd days) "
                                    "behind its channel, or orphaned: for a scheduled CI job")
    verify: bool = flag("Check the signed provenance of every running image; mark each without valid provenance "
                        "from this pipeline (an image nobody built through it) and exit 1 naming them", False)
    pipeline: str | None = flag("Pipeline file (default: amibuild.hcl in the current folder or above)")
    profile: str | None = flag("AWS profile (default: AWS_PROFILE / the standard chain)")


def fleet_view(options: Any, *, variant: str | None = None, channel: str | None = None, region: str | None = None,
               now: datetime | None = None, aws: Any = None, verify: bool = False) -> Any:
    """`amibuild fleet`: flags → gather (read-only) → classify (→ with ``verify``, each image's provenance marked)."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.aws import Aws
    from amibuild.pipeline.options import load_pipeline
    from amibuild.channels import known
    from amibuild.lifecycle import fleet
    from amibuild.pipeline.naming import check_channel

    if channel:
        check_channel(channel)
    pipeline = load_pipeline(options)
    regions = (region,) if region else pipeline.target_regions
    if aws is None:
        aws = Aws(profile=options.profile, region=pipeline.build_region)
    if channel:  # a typo would show an empty view and exit 0; any variant of the selection may hold it
        known.require(aws, pipeline, pipeline.variants, known.Asked(channel), every=False, regions=regions)
    facts = fleet.gather(aws, pipeline, regions)
    view = fleet.classify(facts, now or datetime.now(timezone.utc), variant=variant, channel=channel, region=region)
    return fleet.mark(view, fleet.provenance(aws, pipeline, facts, view)) if verify else view


@command(FleetRequest)
def fleet(c, r: FleetRequest):
    """Show every channel and every consumer of its images (stacks, node groups, instances) and how far behind."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.cli import summary
    from amibuild.lifecycle import fleet as fleet_mod

    limit = cli.run(lambda: fleet_mod.Limit.parse(r.check_behind)) if r.check_behind not in (None, "") else None
    opts = cli.options(c, Scope(r.pipeline, r.variant, profile=r.profile))
    view = cli.run(lambda: fleet_view(opts, variant=r.variant, channel=r.channel, region=r.region, verify=r.verify))
    if r.json:
        cli.emit_json(view.to_dict())
    elif not r.markdown:
        cli.lines_out(fleet_mod.report_lines(view))
    summary.publish(summary.fleet_markdown(view), to_stdout=r.markdown)
    cli.run(lambda: view.check(limit))
    if r.verify:
        cli.run(view.check_provenance)


@dataclass(frozen=True)
class KarpenterRequest:
    """`amibuild karpenter`."""

    variant: str | None = flag("Variant whose channel the node class follows (required)")
    channel: str | None = flag("Channel to follow, e.g. stable (required)")
    name: str | None = flag("The EC2NodeClass's name (default: VARIANT-CHANNEL)")
    role: str | None = flag("IAM role of the nodes (default: KarpenterNodeRole-CLUSTER, unless --instance-profile)")
    instance_profile: str | None = flag("Instance profile of the nodes, instead of --role")
    cluster: str | None = flag("Cluster name, for the discovery tag (default: the pipeline's name)")
    discovery: str | None = flag("Value of the karpenter.sh/discovery tag selecting subnets and security groups "
                                 "(default: the cluster)")
    region: str | None = flag("Region whose channel parameter to check (default: the pipeline's build region)")
    proxy: str = flag("HTTP(S) proxy for the nodes (in the user data: AL2023 NodeConfig environment, AL2 boothook)",
                      "")
    no_proxy: tuple[str, ...] = flag("Extra NO_PROXY entry (repeatable or comma-separated; with --proxy)",
                                     repeat=True)
    proxy_credentials_parameter: str = flag(
        "SSM SecureString (user:password) the nodes read at boot for --proxy, whose URL then has no credentials; "
        "the node role must be allowed to read it (default: the variant's proxy { credentials_parameter })", "")
    vpc_cidr: tuple[str, ...] = flag("The VPC's CIDR, for NO_PROXY (repeatable; with --proxy on AL2023)",
                                     repeat=True)
    service_cidr: str = flag("Cluster service CIDR, for NO_PROXY (default: both EKS defaults)", "")
    kubelet_flag: tuple[str, ...] = flag("Extra kubelet flag --name=value (repeatable; AL2023: NodeConfig "
                                         "spec.kubelet.flags)", repeat=True)
    max_pods_expression: str = flag("Refused here: Karpenter's own NodeConfig sets maxPods, which wins over the "
                                    "expression (use the EC2NodeClass's spec.kubelet.maxPods or podsPerCore)", "")
    json: bool = flag("Print the manifest as JSON instead of YAML", False)
    pipeline: str | None = like(FleetRequest, "pipeline")
    profile: str | None = like(FleetRequest, "profile")


def karpenter_manifest(options: Any, *, variant: str | None, channel: str | None, name: str | None = None,
                       role: str | None = None, instance_profile: str | None = None, cluster: str | None = None,
                       discovery: str | None = None, region: str | None = None, settings: Any = None,
                       aws: Any = None) -> dict:
    """`amibuild karpenter`: flags → the node class (checked before any AWS call) → the channel exists there."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.aws import Aws
    from amibuild.channels import known
    from amibuild.channels import read as channel_read
    from amibuild.pipeline.options import load_pipeline
    from amibuild.errors import SpecError
    from amibuild.handoff import consumer, karpenter
    from amibuild.pipeline.naming import check_channel, parameter_name

    if not variant or not channel:
        raise SpecError("karpenter: give --variant VARIANT and --channel CHANNEL, e.g. --variant ceph --channel stable")
    check_channel(channel)
    pipeline = load_pipeline(options)
    chosen = pipeline.variants[0]
    where = region or pipeline.build_region
    if settings and settings.proxy and not settings.proxy_credentials_parameter and chosen.proxy.credentials_parameter:
        # deferred: imported when the task runs, not on the `amibuild --list` path
        from amibuild import secrets

        # the variant's proxy { credentials_parameter }, for a proxy URL without credentials of its own
        if not secrets.credentials(settings.proxy):
            settings = replace(settings, proxy_credentials_parameter=chosen.proxy.credentials_parameter)
    parameter = parameter_name(pipeline, chosen, channel)
    manifest = karpenter.node_class(
        name=karpenter.check_name(name or f"{chosen.name}-{channel}"), parameter=parameter, region=where,
        os_family=chosen.os, cluster=cluster or pipeline.name, pipeline=pipeline.name, variant=chosen.name,
        channel=channel, role=role or "", instance_profile=instance_profile or "", discovery=discovery or "",
        settings=replace(settings, region=settings.region or where) if settings else karpenter.NodeSettings(region=where))
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


@command(KarpenterRequest)
def karpenter(c, r: KarpenterRequest):
    """Print an EC2NodeClass that follows a channel: a promote becomes drift, Karpenter replaces the nodes."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.handoff import karpenter as karpenter_mod

    opts = cli.options(c, Scope(r.pipeline, r.variant, profile=r.profile))

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
