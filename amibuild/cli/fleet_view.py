"""`amibuild fleet` and `amibuild karpenter`: who runs which image, and the Karpenter hand-off.

The tasks live here (tasks.py adds them to the collection): each turns its flags into the call of
its job (`amibuild.jobs.fleet_jobs`: `fleet_view`, `karpenter_manifest`), prints the result and exits as
it says.
"""

from __future__ import annotations

from amibuild.cli import run as cli
from amibuild.cli.requests_views import FleetRequest, KarpenterRequest
from amibuild.cli.tasks_common import Scope, options
from amibuild.handoff import karpenter as karpenter_mod
from amibuild.jobs.fleet_jobs import fleet_view, karpenter_manifest
from amibuild.lifecycle import fleet as fleet_mod
from amibuild.views import summary


def fleet(c, r: FleetRequest):
    limit = cli.run(lambda: fleet_mod.Limit.parse(r.check_behind)) if r.check_behind not in (None, "") else None
    opts = options(c, Scope(r.pipeline, r.variant, profile=r.profile))
    view = cli.run(lambda: fleet_view(opts, variant=r.variant, channel=r.channel, region=r.region, verify=r.verify))
    cli.show(view, r.json, markdown=r.markdown, lines=fleet_mod.report_lines, summary=summary.fleet_markdown, finish=False)
    cli.run(lambda: view.check(limit))
    if r.verify:
        cli.run(view.check_provenance)


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
