"""Node group hand-off from the command line: task flags → typed calls of `amibuild.handoff`
(rollout: flags → `handoff.job.RolloutSettings`).

Flags are known here only; `amibuild.handoff` takes stacks, regions and parameter names.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Iterable, Mapping

from amibuild import secrets
from amibuild.aws import Aws
from amibuild.channels import publish
from amibuild.cli import values
from amibuild.errors import AccessDenied, SpecError
from amibuild.handoff import job, node_settings
from amibuild.handoff.rollout import RolloutRefused
from amibuild.handoff.userdata import decode as ud
from amibuild.handoff.userdata.bootstrap_sh import check_bootstrap_words
from amibuild.handoff.userdata.render import (aws_auth_entry, check_proxy_url, check_role_arn, config_from_flags,
                                              render_userdata)
from amibuild.pipeline.options import load_pipeline
from amibuild.handoff.cluster import NODE_ACCESS_ENTRY_TYPE, ClusterFacts, node_access, read_cluster
from amibuild.handoff.nodegroup import (NODE_GROUP, NODE_OSES, PROXY_CREDENTIALS, DeployResult, check_ours, deploy,
                                        node_role_arn, parse_parameters, stack_parameters, template_json)
from amibuild.handoff.rollout import DEFAULT_TIMEOUT
from amibuild.pipeline.proxy_credentials import POLICY_NAME as PROXY_CREDENTIALS_POLICY


def gateway(options: Any, region: str | None) -> tuple[Aws, str]:
    """(Aws, region): `region`, else AWS_REGION / the profile's region, as the AWS CLI picks it."""
    return job.gateway(options.profile, region)


def channel_parameter(options: Any, variant: str | None, channel: str | None) -> str | None:
    """The SSM parameter of a variant's channel (default recommended); None without --variant."""
    if not variant:
        if channel:
            raise SpecError(f"--channel {channel} needs --variant: the parameter name comes from both")
        return None
    pipeline = load_pipeline(options)
    return publish.parameter_name(pipeline, pipeline.variants[0], channel or publish.DEFAULT_CHANNEL)


def seconds(value: Any) -> float:
    """--timeout as seconds (default `DEFAULT_TIMEOUT`)."""
    return values.optional_duration(value, "--timeout", example="3600, 30m or 2h") or DEFAULT_TIMEOUT


def rollout_settings(options: Any, *, stack: str | None, nodegroup: str | None, variant: str | None,
                     channel: str | None, region: str | None, dry_run: bool = False, wait: bool = True,
                     timeout: float | None = None) -> job.RolloutSettings:
    """`amibuild rollout`'s flags (--stack NAME or --nodegroup CLUSTER/NAME) as settings; bad input refused."""
    if bool(stack) == bool(nodegroup):
        raise SpecError("rollout: give --stack NAME or --nodegroup CLUSTER/NAME (one of them)")
    parameter = channel_parameter(options, variant, channel)
    wait_for = seconds(timeout)
    if stack:
        return job.RolloutSettings(options.profile, region, stack=stack, channel_parameter=parameter,
                                   dry_run=dry_run, wait=wait, timeout=wait_for)
    cluster, _, name = (nodegroup or "").partition("/")
    if not cluster or not name or "/" in name:
        raise SpecError(f"--nodegroup {nodegroup!r}: write CLUSTER/NAME, e.g. prod/ng-managed")
    if not parameter:
        raise SpecError("--nodegroup needs --variant (and --channel): a managed node group follows no parameter")
    return job.RolloutSettings(options.profile, region, nodegroup=(cluster, name), channel_parameter=parameter,
                               dry_run=dry_run, wait=wait, timeout=wait_for)


DEFAULT_NODE_OS = "al2023"  # without --os, --variant or an existing stack: what EKS publishes today


def deploy_from_flags(options: Any, *, stack: str, region: str | None, variant: str | None, channel: str | None,
                      flags: Mapping[str, str], subnets: Iterable[str], parameters: Iterable[str],
                      proxy: str, no_proxy: Iterable[str], service_cidr: str, say: Callable[[str], None],
                      wait: bool = True, timeout: float | None = None, os_: str = "",
                      private_endpoint: bool = False, api_server_endpoint: str = "",
                      certificate_authority: str = "", kubelet_flags: Iterable[str] = (),
                      node_labels: Iterable[str] = (), taints: Iterable[str] = (),
                      max_pods: str | None = None, dry_run: bool = False,
                      credentials_parameter: str = "") -> DeployResult:
    """`amibuild nodegroup-deploy`: flags (parameter name -> value) and --parameter KEY=VALUE become the
    stack's parameters. The nodes' OS is --os, else the variant's, else the stack's, else al2023.
    The node settings (proxy, kubelet flags, labels, taints, max pods) are the stack's, changed by
    the flags given (`node_settings`); al2023 nodes and al2 nodes with any setting get user data
    from `amibuild userdata`'s code, with the cluster's endpoint, CA, service CIDR and endpoint access
    read with DescribeCluster (flags when it cannot be read)."""
    if not stack:
        raise SpecError("nodegroup-deploy: --stack NAME is required")
    wait_for = seconds(timeout)  # every flag is read before any other check or AWS call
    if os_ and os_ not in NODE_OSES:
        raise SpecError(f"--os {os_!r}: choose one of {', '.join(NODE_OSES)}")
    given = parse_parameters(parameters)
    own = sorted(set(given) & set(node_settings.PARAMETERS))
    if own:
        raise SpecError(f"--parameter {own[0]}: set it with {node_settings.PARAMETERS[own[0]]} (amibuild writes "
                        "the user data from it)")
    named = {**{key: value for key, value in flags.items() if value},
             "Subnets": ",".join(s for value in subnets for s in value.split(",") if s)}
    for key, value in named.items():
        if value and key in given:
            raise SpecError(f"{key} is set twice: by its own flag and by --parameter")
    given.update({key: value for key, value in named.items() if value})
    asked = node_settings.Asked.parse(proxy=proxy, no_proxy=no_proxy, kubelet_flags=kubelet_flags,
                                      labels=node_labels, taints=taints, max_pods=max_pods,
                                      proxy_credentials_parameter=credentials_parameter)
    if asked.proxy:
        check_proxy_url(asked.proxy)
    if private_endpoint and not (asked.proxy or asked.proxy is None):
        raise SpecError("--private-endpoint goes with --proxy")
    parameter = channel_parameter(options, variant, channel)
    # --os wins over the variant's, as a flag does over the pipeline file everywhere else.
    variant_os = load_pipeline(options).variants[0].os if variant else ""
    # the variant's proxy { credentials_parameter }: where its nodes read the proxy's user:password
    variant_parameter = load_pipeline(options).variants[0].proxy.credentials_parameter if variant else ""
    if given.get(node_settings.BOOTSTRAP) and (os_ or variant_os) == "al2023":
        raise _bootstrap_on_al2023()
    if given.get(node_settings.BOOTSTRAP) and (os_ or variant_os) != "al2023":
        check_bootstrap_words(_words(given[node_settings.BOOTSTRAP]), "--parameter BootstrapArguments")
    aws, region = gateway(options, region)
    found = aws.describe_stack(stack, region)
    origin = check_ours(aws, stack, region) if found is not None else None
    if found is None:  # what a create lacks, said before DescribeCluster and the user data
        stack_parameters({"NodeGroupName": stack, **given}, None)
        if not parameter and not given.get("NodeImageId"):
            raise SpecError("creating a node group stack needs --variant (and --channel), or --parameter NodeImageId=AMI")
    previous = {key: p.value for key, p in found.parameters.items()} if found else {}
    node_os = os_ or variant_os or str((origin or {}).get("os") or "") or DEFAULT_NODE_OS
    if origin is not None and origin.get("os") and origin.get("os") != node_os:
        say(f"stack {stack}: nodes move from {origin.get('os')} to {node_os} (the rolling update replaces them)")
    settings = asked.merge(previous)
    if variant_parameter and asked.proxy_credentials_parameter is None and settings.proxy \
            and not settings.proxy_credentials_parameter and not secrets.credentials(settings.proxy):
        settings = replace(settings, proxy_credentials_parameter=variant_parameter)
    if settings.proxy_credentials_parameter and secrets.credentials(settings.proxy):
        raise SpecError(f"--proxy-credentials-parameter {settings.proxy_credentials_parameter}: the nodes' proxy "
                        f"{secrets.mask(settings.proxy)} carries credentials already; give --proxy without "
                        "user:password@ (the nodes read them from the parameter)")
    stack_proxy, proxy_in_data, hidden = proxy_credentials_parameter(settings.proxy, say)
    settings = replace(settings, proxy=stack_proxy)  # HttpProxy holds the URL masked
    if private_endpoint and not settings.proxy:
        raise SpecError("--private-endpoint goes with --proxy (the stack has no proxy)")
    bootstrap_args = given.get(node_settings.BOOTSTRAP, previous.get(node_settings.BOOTSTRAP, ""))
    if node_os == "al2" and given.get(node_settings.BOOTSTRAP):  # the stack said al2: checked now
        check_bootstrap_words(_words(given[node_settings.BOOTSTRAP]), "--parameter BootstrapArguments")
    if node_os == "al2023":
        if node_settings.BOOTSTRAP in given and given[node_settings.BOOTSTRAP]:
            raise _bootstrap_on_al2023()
        # bootstrap.sh's arguments mean nothing to nodeadm: the update says it drops them.
        given[node_settings.BOOTSTRAP] = ""
        bootstrap_args = ""
    given.update(settings.to_parameters())
    cluster = given.get("ClusterName") or previous.get("ClusterName", "")
    facts, unread = _cluster_facts(aws, cluster, region) if cluster else (None, "")
    user_data = None
    if node_os == "al2023" or settings.proxy or settings.kubelet:
        al2023 = node_os == "al2023"
        endpoint = api_server_endpoint or (facts.endpoint if facts and al2023 else "")
        ca = certificate_authority or (facts.certificate_authority if facts and al2023 else "")
        cidr = service_cidr or (facts.service_cidr if facts else "")
        if al2023 and not (endpoint and ca and cidr):
            raise SpecError(
                f"al2023 nodes need cluster {cluster or '(--cluster)'}'s endpoint, CA and service CIDR, and "
                f"DescribeCluster in {region} gave none: give --api-server-endpoint, --certificate-authority "
                "and --service-cidr")
        if unread:
            say(f"{unread}; going by the flags")
        cfg = config_from_flags(
            cluster=cluster, os=node_os, proxy=proxy_in_data, no_proxy=settings.no_proxy, service_cidr=cidr,
            region=region, api_server_endpoint=endpoint, certificate_authority=ca,
            # An update that does not give BootstrapArguments keeps the stack's: the user data too.
            bootstrap_args=bootstrap_args, cfn_stack=stack, cfn_resource=NODE_GROUP,
            private_endpoint=private_endpoint or bool(facts and facts.private_endpoint), kubelet=settings.kubelet,
            proxy_credentials_parameter=settings.proxy_credentials_parameter,
        )
        user_data = render_userdata(cfg).replace(_CREDENTIALS_MARK, "${" + PROXY_CREDENTIALS + "}")
    elif service_cidr or api_server_endpoint or certificate_authority:
        raise SpecError("--service-cidr, --api-server-endpoint and --certificate-authority go with al2023 nodes, "
                        "--proxy or kubelet settings")
    result = deploy(aws, stack, region, given={**given, **hidden},
                    template_body=template_json(user_data, node_os=node_os, hidden=hidden,
                                                proxy_credentials_parameter=settings.proxy_credentials_parameter),
                    channel_parameter=parameter, say=say, wait=wait, timeout=wait_for, dry_run=dry_run)
    if settings.proxy_credentials_parameter:
        say(f"proxy {settings.proxy}: the nodes {'would read' if dry_run else 'read'} its credentials at boot from "
            f"SSM parameter {settings.proxy_credentials_parameter} (a SecureString holding user:password); the node "
            f"role's policy {PROXY_CREDENTIALS_POLICY} allows ssm:GetParameter on it and kms:Decrypt through SSM")
    if dry_run:  # nothing sent: no access to set up yet
        return result
    mode = facts.authentication_mode if facts else ""
    return replace(result, notes=(node_access(cluster, mode, stack=stack),))


# stands for the proxy's user:password while the user data is written; letters and digits only, so
# every quoting the user data applies (shell, systemd, YAML) leaves it as it is
_CREDENTIALS_MARK = "AMIBUILDPROXYCREDENTIALS7f3a"


def proxy_credentials_parameter(proxy: str, say: Callable[[str], None]) -> tuple[str, str, dict[str, str | None]]:
    """(the proxy URL for the stack's HttpProxy parameter, the URL for the user data, {NoEcho
    parameter: value}) — credentials in the proxy URL go to the stack as its NoEcho
    `PROXY_CREDENTIALS` parameter, never into the template body or another parameter. HttpProxy
    keeps the URL masked (user:***@), which tells the next deploy that the stack holds them: it
    then keeps the parameter's value (None: UsePreviousValue), which it cannot read back."""
    # deferred: only for a deploy with a proxy
    from amibuild import secrets
    from amibuild import redact  # deferred: logging filters for --debug, installed when needed

    credentials = secrets.credentials(proxy)
    if not credentials:
        return proxy, proxy, {}
    in_data = proxy.replace(credentials + "@", _CREDENTIALS_MARK + "@", 1)
    kept = credentials.endswith(secrets.MASK)  # the stack's own HttpProxy, as a previous deploy masked it
    if not kept:
        if "%" in credentials:
            # the systemd drop-ins double every '%' of the URL; one parameter cannot hold both forms
            raise SpecError(f"--proxy {secrets.mask(proxy)}: percent-encoded credentials cannot be passed to the "
                            "stack; give the proxy a password of letters, digits and - . _ ~ ! $ & * + , ; =")
        for word in secrets.words(proxy):
            redact.add_secret(word, min_length=secrets.MIN_WORD)  # --debug logs the CreateStack request
    say(f"proxy {secrets.mask(proxy)}: its credentials go to the stack as the NoEcho parameter "
        f"{PROXY_CREDENTIALS}{' (kept as it is)' if kept else ''}, not in the template; the nodes' user data still "
        "carries them (anyone allowed ec2:DescribeLaunchTemplateVersions or ec2:DescribeInstanceAttribute can read "
        "them): prefer a proxy that authenticates the nodes without a password")
    return secrets.mask(proxy), in_data, {PROXY_CREDENTIALS: None if kept else credentials}


def _bootstrap_on_al2023() -> SpecError:
    return SpecError("--parameter BootstrapArguments is for al2's bootstrap.sh; al2023 nodes (nodeadm) do not read "
                     "it: give --kubelet-flag, --node-label, --taint or --max-pods")


def _words(text: str) -> list[str]:
    import shlex

    try:
        return shlex.split(text)
    except ValueError as exc:
        raise SpecError(f"--parameter BootstrapArguments {text!r}: {exc}") from None


def stack_user_data(options: Any, *, stack: str, region: str | None) -> list:
    """`amibuild decode-userdata --stack`: the user data of the stack's template, its references
    filled in with the stack's parameters and pseudo parameters."""
    aws, region = gateway(options, region)
    found = aws.describe_stack(stack, region)
    if found is None:
        raise RolloutRefused(f"stack {stack} does not exist in {region}")
    references = ud.stack_references({key: p.value for key, p in found.parameters.items()}, stack=stack,
                                     region=region)
    return ud.decode(aws.stack_template(stack, region).encode(), f"stack {stack}", references)


def _cluster_facts(aws: Aws, cluster: str, region: str) -> tuple[ClusterFacts | None, str]:
    """(DescribeCluster's facts, "") or (None, why) when the cluster is not there or may not be read."""
    try:
        facts = read_cluster(aws, cluster, region)
    except AccessDenied as exc:
        return None, f"cluster {cluster}: cannot read it ({exc})"
    return facts, "" if facts is not None else f"cluster {cluster}: not found in {region}"


def node_role(options: Any, *, role_arn: str, stack: str, region: str | None) -> str:
    """`amibuild aws-auth`: the role ARN given, or the NodeInstanceRole output of `stack`."""
    if bool(role_arn) == bool(stack):
        raise SpecError("aws-auth: give --role-arn ARN or --stack NAME (one of them)")
    if role_arn:
        return role_arn
    aws, region = gateway(options, region)
    return node_role_arn(aws, stack, region)


def node_access_from_flags(options: Any, *, role_arn: str, stack: str, region: str | None, access_entry: bool,
                           cluster: str) -> str:
    """`amibuild aws-auth`: the aws-auth mapRoles entry, and the access entry that does the same
    today (printed as a command; created with --access-entry --cluster)."""
    if bool(role_arn) == bool(stack):
        raise SpecError("aws-auth: give --role-arn ARN or --stack NAME (one of them)")
    if cluster and not access_entry:
        raise SpecError("--cluster goes with --access-entry")
    if access_entry and not cluster:
        raise SpecError("--access-entry needs --cluster NAME: the cluster to create the entry in")
    if role_arn:
        check_role_arn(role_arn)  # refuse a bad ARN before any AWS call
    if not access_entry:
        role = node_role(options, role_arn=role_arn, stack=stack, region=region)
        return aws_auth_entry(role) + access_entry_hint(check_role_arn(role))
    aws, region = gateway(options, region)
    role = role_arn or node_role_arn(aws, stack, region)
    arn = check_role_arn(role)
    created = aws.create_access_entry(cluster, arn, region, entry_type=NODE_ACCESS_ENTRY_TYPE)
    what = "created" if created else "already there"
    return f"access entry for {arn} in cluster {cluster} ({region}): {what} (type {NODE_ACCESS_ENTRY_TYPE})\n"


def access_entry_hint(role_arn: str) -> str:
    """The access-entry way, as comment lines after the aws-auth entry."""
    return (
        "# Clusters with access entries (authentication mode API or API_AND_CONFIG_MAP) need no aws-auth\n"
        f"# entry: `amibuild aws-auth --role-arn {role_arn} --access-entry --cluster CLUSTER` creates one, as does\n"
        f"# aws eks create-access-entry --cluster-name CLUSTER --principal-arn {role_arn} --type {NODE_ACCESS_ENTRY_TYPE}\n"
    )
