"""The view tasks: fleet, karpenter, verify, sbom, diff, scan and allowed-amis.

The bodies of the tasks `amibuild.cli.tasks` lists; their requests: `amibuild.jobs.requests_views`.
Each turns its flags into the call of its job (`amibuild.jobs.fleet_jobs`, `verify_job`,
`image_inventory`; `amibuild.handoff.consumer`), prints the result and exits as it says.
"""

from __future__ import annotations

from amibuild.channels import channel_verify as verify_mod
from amibuild.cli import run as cli
from amibuild.jobs.requests_views import AllowedAmisFlags, DiffFlags, FleetRequest, KarpenterRequest, SbomFlags, ScanFlags, VerifyRequest
from amibuild.cli.target import platform
from amibuild.cli.tasks_common import Scope, options, scope_options
from amibuild.errors import SpecError
from amibuild.handoff import consumer
from amibuild.handoff import karpenter as karpenter_mod
from amibuild.jobs import image_inventory as job
from amibuild.jobs.fleet_jobs import fleet_view, karpenter_manifest
from amibuild.jobs.verify_job import verify_report
from amibuild.lifecycle import fleet as fleet_mod
from amibuild.views import summary


def fleet(c, r: FleetRequest):
    limit = fleet_mod.Limit.parse(r.check_behind) if r.check_behind not in (None, "") else None
    opts = options(c, Scope(r.pipeline, r.variant, profile=r.profile))
    view = fleet_view(opts, variant=r.variant, channel=r.channel, region=r.region, verify=r.verify)
    cli.show(view, r.json, markdown=r.markdown, lines=fleet_mod.report_lines, summary=summary.fleet_markdown, finish=False)
    view.check(limit)
    if r.verify:
        view.check_provenance()


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
                                  region=r.region, settings=settings, say=cli.say)

    manifest = cli.run(body)
    if not r.cluster:  # the default is a guess: say it, so a wrong one is seen before the nodes fail to join
        cli.say(karpenter_mod.cluster_default_note(manifest, role=bool(r.role or r.instance_profile),
                                                   discovery=bool(r.discovery)))
    note = manifest["metadata"]["annotations"].get("amibuild/proxy-credentials")
    if note:
        cli.say(f"karpenter: {note}")
    cli.emit_json(manifest) if r.json else print(karpenter_mod.to_yaml(manifest), end="")


def verify(c, r: VerifyRequest):  # today's file is rendered for the platform AMIBUILD_TARGET names
    opts = scope_options(c, r)
    report, why_not = verify_report(opts, ami=r.ami, variant=r.variant, channel=r.channel, region=r.region,
                                    platform=platform)
    cli.show(report, r.json, data=lambda x: {**x.to_dict(), "today_not_rendered": why_not or None},
             lines=lambda x: verify_mod.lines(x) + ([f"  ({why_not})"] if why_not else []))


def sbom(c, r: SbomFlags):
    cli.show(job.run_sbom(job.SbomRequest(*_image(c, r), r.channel, r.ami, r.format)), r.json)


def diff(c, r: DiffFlags):
    cli.show(job.run_diff(job.DiffRequest(*_image(c, r), r.from_ or "", r.to or "", r.markdown)), r.json)


def scan(c, r: ScanFlags):
    cli.show(job.run_scan(job.ScanRequest(*_image(c, r), r.channel, r.ami)), r.json)


def _image(c, r) -> tuple:
    """(Options, variant) of an sbom, diff or scan: --variant is required."""
    opts = scope_options(c, r)
    if not r.variant:
        raise SpecError("--variant: name the variant whose image this is")
    return opts, r.variant


def allowed_amis(c, r: AllowedAmisFlags):  # `doctor --consumer` runs the consumer account's checks
    opts = options(c, Scope(r.pipeline, profile=r.profile), announce=False)
    cli.show(consumer.run_allowed_amis(consumer.AllowedAmisRequest(
        opts, r.provider, r.max_days_since_created, r.max_days_since_deprecated)), r.json)  # bad days: exit 2 at parse
