"""The hand-off tasks: user data (render, decode), aws-auth, rollout and nodegroup-deploy.

The bodies of the tasks `amibuild.cli.tasks` lists; their requests: `amibuild.jobs.requests_nodes`.
"""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path

from amibuild import secrets
from amibuild.cli import handoff
from amibuild.cli import run as cli
from amibuild.jobs.requests_nodes import AwsAuthRequest, DecodeUserdataRequest, DeployRequest, RolloutRequest, UserdataRequest
from amibuild.cli.tasks_common import scope_options
from amibuild.errors import NotUserData, UserDataTooBig
from amibuild.handoff import handoff_jobs as job
from amibuild.handoff.userdata import decode as userdata_decode
from amibuild.handoff.userdata import render as userdata_render
from amibuild.views import summary


def userdata(c, r: UserdataRequest):
    found = job.userdata_cluster(cluster=r.cluster, os_=r.os, region=r.region,
                                 api_server_endpoint=r.api_server_endpoint,
                                 certificate_authority=r.certificate_authority, service_cidr=r.service_cidr,
                                 private_endpoint=r.private_endpoint, k8s_manifests=r.k8s_manifests)
    if found.note:
        cli.say(f"{found.note}; going by the flags")
    cfg = userdata_render.config_from_flags(
        cluster=r.cluster, os=r.os, proxy=r.proxy, no_proxy=r.no_proxy, service_cidr=found.service_cidr,
        cluster_ip=r.cluster_ip, region=r.region or os.environ.get("AWS_REGION", ""), bypass=r.bypass,
        bootstrap_args=r.bootstrap_args, kubelet_flags=r.kubelet_flag,
        api_server_endpoint=found.endpoint, certificate_authority=found.certificate_authority,
        cfn_stack=r.cfn_stack, cfn_resource=r.cfn_resource, private_endpoint=found.private_endpoint,
        node_labels=r.node_label, taints=r.taint, max_pods=r.max_pods or None,
        max_pods_expression=r.max_pods_expression or None,
        proxy_credentials_parameter=r.proxy_credentials_parameter,
    )
    if r.k8s_manifests:
        return print(userdata_render.k8s_manifests(cfg, r.vpc_cidr), end="")
    text = userdata_render.render_userdata(cfg)
    if secrets.credentials(r.proxy):  # printed on purpose (the nodes need them), said once
        cli.say(f"--proxy {secrets.mask(r.proxy)}: the user data below carries its credentials; whoever can "
                "describe the instance or its launch template can read them")
    print(base64.b64encode(text.encode()).decode() + "\n" if r.base64 else text, end="")


def decode_userdata(c, r: DecodeUserdataRequest):
    try:
        parts = _decoded(c, r)
    except UserDataTooBig as exc:
        if exc.nesting:
            raise
        raise UserDataTooBig(f"{exc} (--max-bytes to raise it)") from None  # the flag is the CLI's to name
    cli.emit_json([vars(part) for part in parts]) if r.json else print(userdata_decode.format_parts(parts), end="")


def _decoded(c, r: DecodeUserdataRequest):
    source = r.source
    if r.max_bytes < 0:
        raise NotUserData(f"--max-bytes {r.max_bytes}: a number of bytes, 1 or more")
    limit = r.max_bytes or userdata_decode.MAX_BYTES
    if r.stack:
        return job.stack_user_data(scope_options(c, r, announce=False).profile, stack=source,
                                   region=r.region, budget=userdata_decode.Budget(limit))
    if r.region or r.profile:
        raise NotUserData("--region and --profile go with --stack (SOURCE is then a stack name)")
    if source == "-":
        data, name = userdata_decode.read_limited(sys.stdin.buffer, "<stdin>", limit), "<stdin>"
    else:
        try:
            with Path(source).open("rb") as stream:
                data, name = userdata_decode.read_limited(stream, source, limit), source
        except OSError as exc:
            raise NotUserData(f"{source}: cannot read: {exc.strerror}") from None
    return userdata_decode.decode(data, name, budget=userdata_decode.Budget(limit))


def aws_auth(c, r: AwsAuthRequest):
    print(handoff.node_access_from_flags(
        scope_options(c, r, announce=False), role_arn=r.role_arn, stack=r.stack, region=r.region,
        access_entry=r.access_entry, cluster=r.cluster), end="")


def rollout(c, r: RolloutRequest):
    opts = scope_options(c, r)
    result = job.rollout(handoff.rollout_settings(
        opts, stack=r.stack, nodegroup=r.nodegroup, variant=r.variant, channel=r.channel, region=r.region,
        dry_run=r.dry_run, wait=not r.no_wait, timeout=r.timeout), cli.say)
    cli.show(result, r.json, markdown=r.markdown, summary=summary.rollout_markdown, finish=False)


def nodegroup_deploy(c, r: DeployRequest):
    opts = scope_options(c, r)
    flags = {"ClusterName": r.cluster, "VpcId": r.vpc_id, "ClusterControlPlaneSecurityGroup": r.control_plane_sg,
             "NodeGroupName": r.nodegroup_name}
    result = job.deploy(handoff.deploy_settings(
        opts, stack=r.stack, region=r.region, variant=r.variant, channel=r.channel, flags=flags,
        subnets=list(r.subnet), parameters=list(r.parameter), proxy=r.proxy, no_proxy=list(r.no_proxy),
        service_cidr=r.service_cidr, wait=not r.no_wait, timeout=r.timeout, os_=r.os,
        private_endpoint=r.private_endpoint, api_server_endpoint=r.api_server_endpoint,
        certificate_authority=r.certificate_authority, kubelet_flags=list(r.kubelet_flag),
        node_labels=list(r.node_label), taints=list(r.taint), max_pods=r.max_pods or None, dry_run=r.dry_run,
        credentials_parameter=r.proxy_credentials_parameter, max_pods_expression=r.max_pods_expression), cli.say)
    cli.show(result, r.json)
