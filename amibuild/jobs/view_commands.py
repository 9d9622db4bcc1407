"""The view commands: fleet, karpenter, verify, sbom, diff, scan and allowed-amis.

Each is `command(request, env) -> Shown`: its request (`amibuild.jobs.requests_views`) as the cli
parsed it, the job's `Env`, and what it prints and exits with. Their jobs: `amibuild.jobs.fleet_jobs`,
`verify_job`, `image_inventory`; `amibuild.handoff.consumer`.
"""

from __future__ import annotations

from amibuild.channels import channel_verify as verify_mod
from amibuild.handoff import consumer
from amibuild.handoff import karpenter as karpenter_mod
from amibuild.jobs import image_inventory as job
from amibuild.jobs.env import Env, Scope, options, scope_options
from amibuild.jobs.fleet_jobs import fleet_view, karpenter_manifest
from amibuild.jobs.requests_views import (AllowedAmisRequest, DiffRequest, FleetRequest, KarpenterRequest, SbomRequest,
                                          ScanRequest, VerifyRequest)
from amibuild.jobs.shown import Shown
from amibuild.jobs.verify_job import verify_report
from amibuild.lifecycle import fleet as fleet_mod
from amibuild.views import summary


def fleet(r: FleetRequest, env: Env) -> Shown:
    limit = fleet_mod.Limit.parse(r.check_behind) if r.check_behind not in (None, "") else None
    opts = options(env, Scope(r.pipeline, r.variant, profile=r.profile))
    view = fleet_view(opts, variant=r.variant, channel=r.channel, region=r.region, verify=r.verify)

    def status() -> None:
        view.check(limit)
        if r.verify:
            view.check_provenance()

    return Shown(view, lines=fleet_mod.report_lines, summary=summary.fleet_markdown, status=status)


def karpenter(r: KarpenterRequest, env: Env) -> Shown:
    opts = options(env, Scope(r.pipeline, r.variant, profile=r.profile))
    if r.max_pods_expression:
        raise karpenter_mod.max_pods_expression_refused()
    settings = karpenter_mod.NodeSettings(
        proxy=r.proxy, no_proxy=tuple(e for v in r.no_proxy for e in v.split(",") if e),
        kubelet_flags=r.kubelet_flag, vpc_cidrs=r.vpc_cidr, service_cidr=r.service_cidr or None,
        region=r.region or "", proxy_credentials_parameter=r.proxy_credentials_parameter)
    manifest = karpenter_manifest(opts, channel=r.channel, name=r.name, role=r.role,
                                  instance_profile=r.instance_profile, cluster=r.cluster, discovery=r.discovery,
                                  region=r.region, settings=settings, say=env.say)
    if not r.cluster:  # the default is a guess: say it, so a wrong one is seen before the nodes fail to join
        env.say(karpenter_mod.cluster_default_note(manifest, role=bool(r.role or r.instance_profile),
                                                   discovery=bool(r.discovery)))
    note = manifest["metadata"]["annotations"].get("amibuild/proxy-credentials")
    if note:
        env.say(f"karpenter: {note}")
    return Shown(manifest, data=lambda m: m, text=karpenter_mod.to_yaml(manifest))


def verify(r: VerifyRequest, env: Env) -> Shown:  # today's file is rendered for the platform AMIBUILD_TARGET names
    report, why_not = verify_report(scope_options(env, r), ami=r.ami, channel=r.channel,
                                    region=r.region, platform=env.platform)
    return Shown(report, data=lambda x: {**x.to_dict(), "today_not_rendered": why_not or None},
                 lines=lambda x: verify_mod.lines(x) + ([f"  ({why_not})"] if why_not else []))


def sbom(r: SbomRequest, env: Env) -> Shown:
    return Shown(job.run_sbom(r, scope_options(env, r)))


def diff(r: DiffRequest, env: Env) -> Shown:
    return Shown(job.run_diff(r, scope_options(env, r)))


def scan(r: ScanRequest, env: Env) -> Shown:
    return Shown(job.run_scan(r, scope_options(env, r)))


def allowed_amis(r: AllowedAmisRequest, env: Env) -> Shown:  # days out of range: exit 2 before any AWS call
    opts = options(env, Scope(r.pipeline, profile=r.profile), announce=False)
    return Shown(consumer.run_allowed_amis(opts, r.provider, r.max_days_since_created, r.max_days_since_deprecated))
