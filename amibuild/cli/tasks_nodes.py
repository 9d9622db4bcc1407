"""The hand-off tasks: user data (render, decode), aws-auth, rollout and nodegroup-deploy.

Part of the task table `amibuild.cli.tasks` assembles (its docstring says how flags and
imports are kept fast).
"""

import os

from invoke import task

from amibuild.cli import summary
from amibuild.errors import NotUserData, UserDataTooBig
from amibuild.cli import run as cli
from amibuild.cli.tasks_common import SELECT_HELP, CHANNEL_HELP, _channel_options
import base64
import sys
from pathlib import Path


USERDATA_HELP = {
    "cluster": "EKS cluster name",
    "os": "Node operating system: al2023 (nodeadm, default) or al2 (bootstrap.sh)",
    "proxy": "HTTP(S) proxy URL for yum/dnf, /etc/environment, containerd, docker and the kubelet",
    "no_proxy": "Extra NO_PROXY entry: host, .domain, address or CIDR (repeatable, or comma-separated)",
    "proxy_credentials_parameter": "SSM SecureString (user:password) the node reads at boot with its role and "
                                   "puts into the --proxy URL, which then has no credentials (e.g. /amibuild/proxy-creds)",
    "service_cidr": "Cluster service CIDR (al2023 default: read with DescribeCluster; al2: both EKS defaults in "
                    "NO_PROXY)",
    "cluster_ip": "ClusterIP of the `kubernetes` service, to pick 10.100.0.0/16 or 172.20.0.0/16",
    "region": "Region of the cluster, for the regional endpoints in NO_PROXY (default: AWS_REGION)",
    "bypass": "AWS service whose regional endpoint bypasses the proxy: eks, ec2, ecr, s3, sts, or none "
              "(repeatable; default: all)",
    "bootstrap_args": "Extra arguments for /etc/eks/bootstrap.sh, quoted as for a shell (al2; checked against "
                      "bootstrap.sh's options: --use-max-pods false, not --use-max-pods=false)",
    "kubelet_flag": "Kubelet flag --name=value, no spaces or quotes (repeatable)",
    "node_label": "Node label KEY=VALUE for the kubelet to register (repeatable)",
    "taint": "Taint KEY=VALUE:EFFECT (or KEY:EFFECT) for the kubelet to register; EFFECT NoSchedule, "
             "PreferNoSchedule or NoExecute (repeatable)",
    "max_pods": "Most pods the kubelet runs (al2023: kubelet config maxPods; al2: --max-pods with "
                "--use-max-pods false)",
    "max_pods_expression": "al2023: a CEL expression nodeadm turns into max pods, over default_enis, ips_per_eni "
                           "and max_pods, e.g. \"max_pods < 30 ? max_pods : 30\" (checked here; not with --max-pods)",
    "api_server_endpoint": "Cluster API endpoint, https://... (al2023; default: read with DescribeCluster)",
    "certificate_authority": "Cluster CA as base64, as describe-cluster prints it (al2023; default: read with "
                             "DescribeCluster)",
    "cfn_stack": "Stack to signal with the node's outcome: after bootstrap.sh (al2), once the kubelet runs "
                 "(al2023); with --cfn-resource",
    "cfn_resource": "Logical ID of the resource in --cfn-stack that waits for the signal",
    "private_endpoint": "The cluster has private endpoint access: its endpoint bypasses the proxy (default: not; "
                        "aws eks describe-cluster --query cluster.resourcesVpcConfig.endpointPrivateAccess)",
    "k8s_manifests": "Print the kube-system proxy ConfigMap and daemonset patches instead (needs --proxy)",
    "vpc_cidr": "VPC CIDR for the ConfigMap's NO_PROXY (with --k8s-manifests; repeatable)",
    "base64": "Print the user data base64-encoded, as a launch template's UserData takes it",
}


@task(help=USERDATA_HELP, iterable=["no_proxy", "bypass", "kubelet_flag", "vpc_cidr", "node_label", "taint"],
      auto_shortflags=False)
def userdata(c, cluster="", os_="al2023", proxy="", no_proxy=None, service_cidr="", cluster_ip="", region="",
             bypass=None, bootstrap_args="", kubelet_flag=None, api_server_endpoint="", certificate_authority="",
             cfn_stack="", cfn_resource="", k8s_manifests=False, vpc_cidr=None, base64_=False,
             private_endpoint=False, node_label=None, taint=None, max_pods="", proxy_credentials_parameter="",
             max_pods_expression=""):
    """Print node user data (MIME multi-part), or with --k8s-manifests the cluster side of a proxy."""

    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild import secrets
    from amibuild.cli import handoff
    from amibuild.handoff.userdata import render as ud

    def body():
        found = handoff.userdata_cluster(cluster=cluster, os_=os_, region=region, api_server_endpoint=api_server_endpoint,
                                         certificate_authority=certificate_authority, service_cidr=service_cidr,
                                         private_endpoint=private_endpoint, k8s_manifests=k8s_manifests)
        if found.note:
            cli.say(f"{found.note}; going by the flags")
        cfg = ud.config_from_flags(
            cluster=cluster, os=os_, proxy=proxy, no_proxy=no_proxy or (), service_cidr=found.service_cidr,
            cluster_ip=cluster_ip, region=region or os.environ.get("AWS_REGION", ""), bypass=bypass or (),
            bootstrap_args=bootstrap_args, kubelet_flags=kubelet_flag or (),
            api_server_endpoint=found.endpoint, certificate_authority=found.certificate_authority,
            cfn_stack=cfn_stack, cfn_resource=cfn_resource, private_endpoint=found.private_endpoint,
            node_labels=node_label or (), taints=taint or (), max_pods=max_pods or None,
            max_pods_expression=max_pods_expression or None, proxy_credentials_parameter=proxy_credentials_parameter,
        )
        if k8s_manifests:
            return ud.k8s_manifests(cfg, vpc_cidr or ())
        text = ud.render_userdata(cfg)
        if secrets.credentials(proxy):  # printed on purpose (the nodes need them), said once
            cli.say(f"--proxy {secrets.mask(proxy)}: the user data below carries its credentials; whoever can "
                    "describe the instance or its launch template can read them")
        return base64.b64encode(text.encode()).decode() + "\n" if base64_ else text

    print(cli.run(body), end="")


@task(help={"source": "File with the user data, or - for stdin: raw, base64, gzip, MIME, cloud-config, "
                      "or EC2 / CloudFormation JSON or YAML holding a UserData field (or a bare UserData value)",
            "stack": "SOURCE names a CloudFormation stack: decode its template's user data with the references "
                     "filled in from the stack's parameters",
            "region": "Region of the stack with --stack (default: AWS_REGION / the profile's region)",
            "profile": SELECT_HELP["profile"],
            "json": "Print the parts as JSON on stdout",
            "max_bytes": "Most bytes to read, and to decode over all layers (base64, gzip, MIME parts) "
                         "(default 1048576: 1 MiB)"}, auto_shortflags=False)
def decode_userdata(c, source, json=False, stack=False, region=None, profile=None, max_bytes=0):
    """Decode user data (base64, gzip, MIME, cloud-config, any nesting) and print each part."""

    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.handoff.userdata import decode as ud

    def body():
        if source in ("--help", "-h"):  # invoke hands a required positional the flag itself
            raise NotUserData("for this task's help run `amibuild --help decode-userdata`")
        if max_bytes < 0:
            raise NotUserData(f"--max-bytes {max_bytes}: a number of bytes, 1 or more")
        limit = max_bytes or ud.MAX_BYTES
        if stack:
            from amibuild.cli import handoff  # deferred: boto3 behind it, only for --stack

            return handoff.stack_user_data(cli.options(c, profile=profile, announce=False), stack=source,
                                           region=region, budget=ud.Budget(limit))
        if region or profile:
            raise NotUserData("--region and --profile go with --stack (SOURCE is then a stack name)")
        if source == "-":
            data, name = ud.read_limited(sys.stdin.buffer, "<stdin>", limit), "<stdin>"
        else:
            try:
                with Path(source).open("rb") as stream:
                    data, name = ud.read_limited(stream, source, limit), source
            except OSError as exc:
                raise NotUserData(f"{source}: cannot read: {exc.strerror}") from None
        return ud.decode(data, name, budget=ud.Budget(limit))

    def capped():
        try:
            return body()
        except UserDataTooBig as exc:
            if exc.nesting:
                raise
            raise UserDataTooBig(f"{exc} (--max-bytes to raise it)") from None  # the flag is the CLI's to name

    parts = cli.run(capped)
    if json:
        cli.emit_json([vars(part) for part in parts])
    else:
        print(ud.format_parts(parts), end="")


@task(help={"role_arn": "IAM role ARN of the nodes (e.g. the node group stack's NodeInstanceRole output)",
            "stack": "Node group stack whose NodeInstanceRole output is the role (instead of --role-arn)",
            "region": "Region of the stack (default: AWS_REGION / the profile's region)",
            "profile": SELECT_HELP["profile"],
            "access_entry": "Create the EKS access entry (type EC2_LINUX) for the role in --cluster instead "
                            "(eks:CreateAccessEntry; nothing happens when it exists)",
            "cluster": "EKS cluster for --access-entry"},
      auto_shortflags=False)
def aws_auth(c, role_arn="", stack="", region=None, profile=None, access_entry=False, cluster=""):
    """Print the aws-auth mapRoles entry for the nodes' role, or create its EKS access entry."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.cli import handoff

    print(cli.run(lambda: handoff.node_access_from_flags(
        cli.options(c, profile=profile, announce=False), role_arn=role_arn, stack=stack, region=region,
        access_entry=access_entry, cluster=cluster)), end="")


ROLLOUT_HELP = {
    "stack": "Node group stack to roll (made from amibuild/handoff/templates/nodegroup.yaml or the classic EKS template)",
    "nodegroup": "EKS managed node group CLUSTER/NAME whose launch template names the image (instead of --stack)",
    "variant": "Variant whose channel to roll to (with --stack, default: the SSM parameter the stack names now)",
    "channel": "Channel of the variant to roll to (default: recommended)",
    "region": "Region of the stack or cluster (default: AWS_REGION / the profile's region)",
    "dry_run": "Create the change set, print what would change, delete it: change nothing",
    "no_wait": "Return once the update has started instead of following it to the end",
    "timeout": "Stop waiting after this long: seconds, or 30m, 2h (default 2h); the update itself goes on",
    "pipeline": SELECT_HELP["pipeline"],
    "k8s": CHANNEL_HELP["k8s"],
    "profile": SELECT_HELP["profile"],
    "json": "Print the result as JSON on stdout",
    "markdown": "Print a Markdown summary on stdout (what is appended to $GITHUB_STEP_SUMMARY in GitHub Actions)",
}


@task(help=ROLLOUT_HELP, auto_shortflags=False)
def rollout(c, stack=None, nodegroup=None, variant=None, channel=None, region=None, dry_run=False, no_wait=False,
            timeout=None, pipeline=None, k8s=None, profile=None, json=False, markdown=False):
    """Roll a node group stack or EKS managed node group to a channel's AMI: change set, update, verify."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.cli import handoff
    from amibuild.handoff import job

    opts = _channel_options(c, pipeline, variant, k8s, profile)
    result = cli.run(lambda: job.rollout(handoff.rollout_settings(
        opts, stack=stack, nodegroup=nodegroup, variant=variant, channel=channel, region=region, dry_run=dry_run,
        wait=not no_wait, timeout=timeout), cli.say))
    if json or not markdown:
        cli.emit_json(result.to_dict()) if json else cli.lines_out(result.lines())
    summary.publish(summary.rollout_markdown(result), to_stdout=markdown)


DEPLOY_HELP = {
    "stack": "Stack to create or update (required)",
    "cluster": "EKS cluster the nodes join (ClusterName; required to create)",
    "variant": "Variant whose channel the nodes run: NodeImageIdSSMParam names that channel's parameter",
    "channel": "Channel of the variant (default: recommended)",
    "vpc_id": "VPC of the cluster (VpcId; required to create)",
    "subnet": "Subnet for the nodes (Subnets; repeatable or comma-separated; required to create)",
    "control_plane_sg": "The cluster's control plane security group (ClusterControlPlaneSecurityGroup; "
                        "required to create)",
    "nodegroup_name": "NodeGroupName, used in resource names (default on create: the stack name)",
    "parameter": "Another template parameter KEY=VALUE, e.g. NodeInstanceType=m6i.large (repeatable); on update "
                 "every parameter not given keeps its value",
    "proxy": "HTTP(S) proxy for the nodes: their user data comes from `amibuild userdata` (boothook, bootstrap, "
             "cfn-signal); the stack keeps it (HttpProxy) until `--proxy none` removes it",
    "no_proxy": "Extra NO_PROXY entry for the nodes (repeatable or comma-separated; kept by the stack; "
                "none removes them)",
    "proxy_credentials_parameter": "SSM SecureString (user:password) the nodes read at boot for --proxy, whose URL "
                                   "then has no credentials; the node role may read it (kept by the stack; none "
                                   "removes it; default: the variant's proxy { credentials_parameter })",
    "kubelet_flag": "Kubelet flag --name=value for the nodes, no spaces or quotes (repeatable; kept by the stack; "
                    "none removes them)",
    "node_label": "Node label KEY=VALUE (repeatable; kept by the stack; none removes them)",
    "taint": "Node taint KEY=VALUE:EFFECT or KEY:EFFECT (repeatable; kept by the stack; none removes them)",
    "max_pods": "Most pods per node (kept by the stack; none: the AMI's default)",
    "max_pods_expression": "al2023: a CEL expression nodeadm turns into max pods (default_enis, ips_per_eni, "
                           "max_pods; kept by the stack in place of --max-pods; none removes it)",
    "service_cidr": "Cluster service CIDR (default: read with DescribeCluster; for NO_PROXY and al2023's NodeConfig)",
    "os": "Node OS: al2 (bootstrap.sh) or al2023 (nodeadm); default: the variant's, else the stack's, else al2023",
    "private_endpoint": "With --proxy: the cluster endpoint bypasses the proxy, as for private endpoint access "
                        "(default: what DescribeCluster says, else not)",
    "api_server_endpoint": "Cluster API endpoint for al2023 nodes (default: read with DescribeCluster)",
    "certificate_authority": "Cluster CA (base64) for al2023 nodes (default: read with DescribeCluster)",
    "region": ROLLOUT_HELP["region"],
    "no_wait": "Return once CloudFormation has started instead of following the stack's events",
    "dry_run": "Check and read everything, print the create or update (parameters) that would be sent, send nothing",
    "timeout": ROLLOUT_HELP["timeout"],
    "pipeline": SELECT_HELP["pipeline"],
    "k8s": CHANNEL_HELP["k8s"],
    "profile": SELECT_HELP["profile"],
    "json": "Print the result as JSON on stdout",
}


@task(help=DEPLOY_HELP, iterable=["subnet", "parameter", "no_proxy", "kubelet_flag", "node_label", "taint"],
      auto_shortflags=False)
def nodegroup_deploy(c, stack=None, cluster=None, variant=None, channel=None, vpc_id=None, subnet=None,
                     control_plane_sg=None, nodegroup_name=None, parameter=None, proxy="", no_proxy=None,
                     service_cidr="", region=None, no_wait=False, timeout=None, pipeline=None, k8s=None,
                     profile=None, json=False, os_="", private_endpoint=False, api_server_endpoint="",
                     certificate_authority="", kubelet_flag=None, node_label=None, taint=None, max_pods="",
                     dry_run=False, proxy_credentials_parameter="", max_pods_expression=""):
    """Create or update a node group stack from amibuild's template, pointed at a channel's parameter."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.cli import handoff
    from amibuild.handoff import job

    opts = _channel_options(c, pipeline, variant, k8s, profile)
    flags = {"ClusterName": cluster, "VpcId": vpc_id, "ClusterControlPlaneSecurityGroup": control_plane_sg,
             "NodeGroupName": nodegroup_name}
    result = cli.run(lambda: job.deploy(handoff.deploy_settings(
        opts, stack=stack, region=region, variant=variant, channel=channel, flags=flags, subnets=subnet or [],
        parameters=parameter or [], proxy=proxy, no_proxy=no_proxy or [], service_cidr=service_cidr,
        wait=not no_wait, timeout=timeout, os_=os_, private_endpoint=private_endpoint,
        api_server_endpoint=api_server_endpoint, certificate_authority=certificate_authority,
        kubelet_flags=kubelet_flag or [], node_labels=node_label or [], taints=taint or [], max_pods=max_pods or None,
        dry_run=dry_run, credentials_parameter=proxy_credentials_parameter,
        max_pods_expression=max_pods_expression), cli.say))
    cli.emit_json(result.to_dict()) if json else cli.lines_out(result.lines())
    cli.finish(result)
