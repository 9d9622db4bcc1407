"""The node hand-off commands: userdata, decode-userdata, aws-auth, rollout and nodegroup-deploy.

Each is `command(request, env) -> Shown`: its request (`amibuild.jobs.requests_nodes`) as the cli
parsed it, the job's `Env`, and what it prints and exits with. Every flag is checked here, before
any AWS call (rollout's and nodegroup-deploy's become `handoff_jobs.RolloutSettings` and
`DeploySettings`); `amibuild.handoff` takes stacks, regions and parameter names.
"""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path
from types import MappingProxyType

from amibuild import secrets, values
from amibuild.aws import Aws
from amibuild.channels import known, publish
from amibuild.errors import NotUserData, SpecError, UserDataTooBig
from amibuild.handoff import handoff_jobs as job
from amibuild.handoff import node_settings
from amibuild.handoff.cluster import NODE_ACCESS_ENTRY_TYPE
from amibuild.handoff.nodegroup import NODE_OSES, check_stack_name, parse_parameters
from amibuild.handoff.rollout import DEFAULT_TIMEOUT
from amibuild.handoff.userdata import decode as userdata_decode
from amibuild.handoff.userdata import render as userdata_render
from amibuild.handoff.userdata.bootstrap_sh import check_bootstrap_words
from amibuild.handoff.userdata.config import split_args
from amibuild.jobs.env import Env, one_variant, scope_options
from amibuild.jobs.requests_nodes import AwsAuthRequest, DecodeUserdataRequest, DeployRequest, RolloutRequest, UserdataRequest
from amibuild.jobs.shown import Shown
from amibuild.pipeline import imagetests, proxy_credentials
from amibuild.pipeline.options import Options, load_pipeline
from amibuild.views import summary


def userdata(r: UserdataRequest, env: Env) -> Shown:
    chosen = load_pipeline(scope_options(env, r)).variants[0] if r.variant else None
    node_os = r.os or (chosen.os if chosen else "") or "al2023"
    credentials = proxy_credentials.for_proxy(r.proxy, r.proxy_credentials_parameter,
                                              chosen.proxy.credentials_parameter if chosen else "")
    found = job.userdata_cluster(cluster=r.cluster, os_=node_os, region=r.region,
                                 api_server_endpoint=r.api_server_endpoint,
                                 certificate_authority=r.certificate_authority, service_cidr=r.service_cidr,
                                 private_endpoint=r.private_endpoint, k8s_manifests=r.k8s_manifests)
    if found.note:
        env.say(f"{found.note}; going by the flags")
    cfg = userdata_render.config_from_flags(
        cluster=r.cluster, os=node_os, proxy=r.proxy, no_proxy=r.no_proxy, service_cidr=found.service_cidr,
        cluster_ip=r.cluster_ip, region=r.region or os.environ.get("AWS_REGION", ""), bypass=r.bypass,
        bootstrap_args=r.bootstrap_args, kubelet_flags=r.kubelet_flag,
        api_server_endpoint=found.endpoint, certificate_authority=found.certificate_authority,
        cfn_stack=r.cfn_stack, cfn_resource=r.cfn_resource, private_endpoint=found.private_endpoint,
        node_labels=r.node_label, taints=r.taint, max_pods=r.max_pods or None,
        max_pods_expression=r.max_pods_expression or None,
        proxy_credentials_parameter=credentials,
    )
    if r.k8s_manifests:
        return Shown(cfg, text=userdata_render.k8s_manifests(cfg, r.vpc_cidr))
    text = userdata_render.render_userdata(cfg)
    if secrets.credentials(r.proxy):  # printed on purpose (the nodes need them), said once
        env.say(f"--proxy {secrets.mask(r.proxy)}: the user data below carries its credentials; whoever can "
                "describe the instance or its launch template can read them")
    return Shown(cfg, text=base64.b64encode(text.encode()).decode() + "\n" if r.base64 else text)


def decode_userdata(r: DecodeUserdataRequest, env: Env) -> Shown:
    try:
        parts = _decoded(r, env)
    except UserDataTooBig as exc:
        if exc.nesting:
            raise
        raise UserDataTooBig(f"{exc} (--max-bytes to raise it)") from None  # the flag is the CLI's to name
    return Shown(parts, data=lambda found: [vars(part) for part in found], text=userdata_decode.format_parts(parts))


def _decoded(r: DecodeUserdataRequest, env: Env) -> list:
    source = r.source
    if r.max_bytes < 0:
        raise NotUserData(f"--max-bytes {r.max_bytes}: a number of bytes, 1 or more")
    limit = r.max_bytes or userdata_decode.MAX_BYTES
    if r.stack:
        return job.stack_user_data(scope_options(env, r, announce=False).profile, stack=source,
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


def aws_auth(r: AwsAuthRequest, env: Env) -> Shown:  # the aws-auth entry, or the access entry that does the same today
    if bool(r.role_arn) == bool(r.stack):
        raise SpecError("aws-auth: give --role-arn ARN or --stack NAME (one of them)")
    if r.cluster and not r.access_entry:
        raise SpecError("--cluster goes with --access-entry")
    if r.access_entry and not r.cluster:
        raise SpecError("--access-entry needs --cluster NAME: the cluster to create the entry in")
    if r.role_arn:
        userdata_render.check_role_arn(r.role_arn)  # refuse a bad ARN before any AWS call
    imagetests.check_cluster(r.cluster or "", "--cluster")
    profile = scope_options(env, r, announce=False).profile
    if r.access_entry:
        text = job.create_node_access_entry(profile, role_arn=r.role_arn, stack=r.stack, region=r.region,
                                            cluster=r.cluster)
        return Shown(text, text=text)
    role = r.role_arn or job.node_role(profile, r.stack, r.region)
    entry, arn = userdata_render.aws_auth_entry(role), userdata_render.check_role_arn(role)
    return Shown(role, text=entry + (  # the access-entry way, as comment lines after the aws-auth entry
        "# Clusters with access entries (authentication mode API or API_AND_CONFIG_MAP) need no aws-auth\n"
        f"# entry: `amibuild aws-auth --role-arn {arn} --access-entry --cluster CLUSTER` creates one, as does\n"
        f"# aws eks create-access-entry --cluster-name CLUSTER --principal-arn {arn} --type {NODE_ACCESS_ENTRY_TYPE}\n"))


def _channel(opts: Options, r: RolloutRequest | DeployRequest):
    """(the SSM parameter of the channel (default recommended) of the variant (`one_variant`), the
    variant); (None, None) when neither --variant nor --channel is given."""
    if not r.variant and not r.channel:
        return None, None
    pipeline, variant = one_variant(opts, "whose channel the nodes follow")
    if r.channel:  # a typo would roll the nodes onto a channel nobody gates
        known.require(Aws(profile=opts.profile, region=pipeline.build_region), pipeline, [variant],
                      known.Asked(r.channel))
    return publish.parameter_name(pipeline, variant, r.channel or publish.DEFAULT_CHANNEL), variant


def _timeout(r: RolloutRequest | DeployRequest) -> float:
    return values.optional_duration(r.timeout, "--timeout", example="3600, 30m or 2h") or DEFAULT_TIMEOUT


def rollout(r: RolloutRequest, env: Env) -> Shown:
    opts = scope_options(env, r)
    if bool(r.stack) == bool(r.nodegroup):
        raise SpecError("rollout: give --stack NAME or --nodegroup CLUSTER/NAME (one of them)")
    wait_for = _timeout(r)
    cluster, _, name = (r.nodegroup or "").partition("/")
    if r.nodegroup and (not cluster or not name or "/" in name):
        raise SpecError(f"--nodegroup {r.nodegroup!r}: write CLUSTER/NAME, e.g. prod/ng-managed")
    parameter, _ = _channel(opts, r)  # after the pure checks: it may ask AWS
    if not r.stack and not parameter:
        raise SpecError("--nodegroup needs --variant or --channel (default recommended): a managed node group "
                        "follows no parameter")
    rolled = {"stack": r.stack} if r.stack else {"nodegroup": (cluster, name)}
    result = job.rollout(job.RolloutSettings(opts.profile, r.region, **rolled, channel_parameter=parameter,
                                             dry_run=r.dry_run, wait=not r.no_wait, timeout=wait_for), env.say)
    return Shown(result, summary=summary.rollout_markdown)


def nodegroup_deploy(r: DeployRequest, env: Env) -> Shown:
    return Shown(job.deploy(deploy_settings(r, scope_options(env, r)), env.say))


def deploy_settings(r: DeployRequest, opts: Options) -> job.DeploySettings:
    """nodegroup-deploy's flags as settings, every flag checked before any AWS call: its own flags and
    --parameter KEY=VALUE become the stack's parameters, the node setting flags `node_settings.Asked`,
    --variant its channel's parameter and its OS."""
    if not r.stack:
        raise SpecError("nodegroup-deploy: --stack NAME is required")
    check_stack_name(r.stack)  # before DescribeStacks: a create would send it to CreateStack
    wait_for = _timeout(r)
    if r.os and r.os not in NODE_OSES:
        raise SpecError(f"--os {r.os!r}: choose one of {', '.join(NODE_OSES)}")
    given = parse_parameters(r.parameter)
    own = sorted(set(given) & set(node_settings.PARAMETERS))
    if own:
        raise SpecError(f"--parameter {own[0]}: set it with {node_settings.PARAMETERS[own[0]]} (amibuild writes "
                        "the user data from it)")
    named = {"ClusterName": r.cluster, "VpcId": r.vpc_id, "ClusterControlPlaneSecurityGroup": r.control_plane_sg,
             "NodeGroupName": r.nodegroup_name, "Subnets": ",".join(s for value in r.subnet for s in value.split(",") if s)}
    for key, value in named.items():
        if value and key in given:
            raise SpecError(f"{key} is set twice: by its own flag and by --parameter")
    imagetests.check_cluster(r.cluster or "", "--cluster")  # al2 nodes without settings get it only in ClusterName
    given.update({key: value for key, value in named.items() if value})
    asked = node_settings.Asked.parse(proxy=r.proxy, no_proxy=r.no_proxy, kubelet_flags=r.kubelet_flag,
                                      labels=r.node_label, taints=r.taint, max_pods=r.max_pods or None,
                                      proxy_credentials_parameter=r.proxy_credentials_parameter,
                                      max_pods_expression=r.max_pods_expression)
    if asked.proxy:
        userdata_render.check_proxy_url(asked.proxy)
    if r.private_endpoint and not (asked.proxy or asked.proxy is None):
        raise SpecError("--private-endpoint goes with --proxy")
    parameter, chosen = _channel(opts, r)
    variant_os = chosen.os if chosen else ""
    node_os = r.os or variant_os  # --os wins over the variant's, as a flag does over the pipeline file everywhere else
    if asked.max_pods_expression and node_os == "al2":
        raise SpecError("--max-pods-expression is nodeadm's (al2023); al2's bootstrap.sh takes a fixed --max-pods N")
    if given.get(node_settings.BOOTSTRAP):
        if node_os == "al2023":
            raise job.bootstrap_on_al2023()
        flag = "--parameter BootstrapArguments"
        check_bootstrap_words(split_args(given[node_settings.BOOTSTRAP], flag), flag)
    return job.DeploySettings(
        opts.profile, r.region, r.stack, given=MappingProxyType(given), asked=asked, channel_parameter=parameter,
        os=r.os, variant_os=variant_os, private_endpoint=r.private_endpoint, api_server_endpoint=r.api_server_endpoint,
        certificate_authority=r.certificate_authority, service_cidr=r.service_cidr, wait=not r.no_wait,
        timeout=wait_for, dry_run=r.dry_run,
        # the variant's proxy { credentials_parameter }: where its nodes read the proxy's user:password
        variant_credentials_parameter=chosen.proxy.credentials_parameter if chosen else "")
