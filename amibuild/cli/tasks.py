"""amibuild tasks: `amibuild --list` shows them, `amibuild TASK --help` lists every flag.

Each task parses its flags, calls into `amibuild` and prints; the work lives in the package.
Heavy modules (boto3, jinja2, python-hcl2) are imported inside the task bodies so that
`amibuild --list` stays fast: each such import says so (`# deferred`). Settings can also come from invoke's config (`invoke.yaml`,
`INVOKE_AMIBUILD_*` environment variables): see `ns.configure` at the bottom.
"""

import os

from invoke import Collection, task

from amibuild.cli import report, summary, values
from amibuild.errors import ChannelSplit, Interrupted, NotUserData, PublishFailed, SpecError
from amibuild.cli import run as cli

# Flags shared by render / validate / build-ami.
SELECT_HELP = {
    "pipeline": "Pipeline file (default: the nearest amibuild.hcl in this folder or above it, up to the repository root)",
    "variant": "Variant to use (repeatable; default: every variant in the pipeline file)",
    "base": "Base: eks-optimized (default) or upstream",
    "upstream": "Upstream amazon-eks-ami checkout: a path or git URL (with --base upstream)",
    "upstream_ref": "Git ref (tag, branch, commit) of the upstream checkout",
    "os": "Operating system: al2 or al2023",
    "k8s": "Kubernetes version, e.g. 1.30 (the upstream base also takes 1.30.4 with --var kubernetes_build_date=...)",
    "arch": "Architecture: x86_64 or arm64",
    "flavor": "EKS-optimized image flavor: standard (default), nvidia or neuron (al2023), gpu (al2)",
    "region": "Build region (repeatable; default: the pipeline's regions, else AWS_REGION)",
    "extra_pkg": "Extra RPM package to install (repeatable; added to the variant's own)",
    "extra_repo": "Extra yum repository NAME=URL (repeatable; added to the variant's own)",
    "var": "Packer variable KEY=VALUE (repeatable; wins over everything else)",
    "var_file": "Packer var-file FILE.pkrvars.hcl (repeatable; later files win)",
    "build_dir": "Output folder (default: build)",
    "profile": "AWS profile (default: AWS_PROFILE / the standard chain)",
    "json": "Print what was rendered (folders, fingerprints, source AMIs, notes) as JSON on stdout",
}
REPEATABLE = ["variant", "region", "extra_pkg", "extra_repo", "var", "var_file"]


@task(help=SELECT_HELP, iterable=REPEATABLE, auto_shortflags=False)
def render(c, pipeline=None, variant=None, base=None, upstream=None, upstream_ref=None, os_=None, k8s=None,
           arch=None, region=None, extra_pkg=None, extra_repo=None, var=None, var_file=None, build_dir=None,
           profile=None, json=False, flavor=None):
    """Render Packer HCL2 for each variant into build/<variant>/."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.bake import prepare

    opts = cli.options(c, **select_flags(pipeline, variant, base, upstream, upstream_ref, os_, k8s, arch, region,
                                         extra_pkg, extra_repo, var, var_file, flavor),
                       build_dir=build_dir, profile=profile)
    result = cli.run(lambda: prepare.render(opts, cli.say, **_target()))
    cli.lines(f"note: {n}" for n in result.notes)
    if json:
        cli.emit_json(result.to_dict())
    else:
        cli.lines_out(report.render_lines(result))


@task(help=SELECT_HELP, iterable=REPEATABLE, auto_shortflags=False)
def validate(c, pipeline=None, variant=None, base=None, upstream=None, upstream_ref=None, os_=None, k8s=None,
             arch=None, region=None, extra_pkg=None, extra_repo=None, var=None, var_file=None, build_dir=None,
             profile=None, json=False, flavor=None):
    """Render, then check every file: python-hcl2 parse, packer validate, packer fmt -check."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.bake import prepare

    opts = cli.options(c, **select_flags(pipeline, variant, base, upstream, upstream_ref, os_, k8s, arch, region,
                                         extra_pkg, extra_repo, var, var_file, flavor),
                       build_dir=build_dir, profile=profile)
    result = cli.run(lambda: prepare.validate(opts, cli.say, **_target()))
    if json:
        cli.emit_json({"packer_version": result.packer_version, "valid": result.checked,
                       "directories": [str(d) for d in result.directories]})
    else:
        print(f"{len(result.checked)} variant(s) valid with packer {result.packer_version}: "
              f"{', '.join(result.checked)}")


BUILD_HELP = {
    **SELECT_HELP,
    "all": "Build every variant of the pipeline file (the default when no --variant is given)",
    "force": "Rebuild even when an image with the same fingerprint exists",
    "dry_run": "Print the plan (what would be built, what skipped and why) and exit",
    "json": "Print one JSON summary on stdout (progress goes to stderr)",
    "parallel": "Packer builds at once (default: every variant, capped by amibuild.max_parallel)",
    "timeout": "Give up on a variant's build after this long: seconds, or 90s, 45m, 2h",
    "channel": "Channel to publish each built or reused image to (default: the pipeline's default_channel, "
               "else recommended)",
    "no_publish": "Build only; publish nothing",
    "rehearse": "Rehearse each variant's provisioning chain first (as `amibuild rehearse`, needs root); a failing "
                "or incomplete rehearsal fails that variant before its Packer build starts",
    "allow_incomplete": "With --rehearse: build a variant whose rehearsal stopped at a step it cannot rehearse",
    "no_wait": "When another run is building a variant with the same inputs, fail (exit 1, naming that run) "
               "instead of waiting for it and reusing its image",
    "markdown": "Print a Markdown summary on stdout (what is appended to $GITHUB_STEP_SUMMARY in GitHub Actions)",
    "boot_test": "Boot each built image (`amibuild test-ami`, in parallel) before publishing; a variant whose "
                 "boot test fails is not published (exit 1), the others go on",
    "cluster": "With --boot-test: EKS cluster each test node joins, tainted amibuild.io/test:NoSchedule, and must "
               "get Ready in (default: the pipeline's test { cluster }; needs amibuild[cluster] and a kubeconfig)",
}


@task(help=BUILD_HELP, iterable=REPEATABLE, auto_shortflags=False)
def build_ami(c, pipeline=None, variant=None, all=False, base=None, upstream=None, upstream_ref=None, os_=None,
              k8s=None, arch=None, region=None, extra_pkg=None, extra_repo=None, var=None, var_file=None,
              build_dir=None, profile=None, force=False, dry_run=False, json=False, parallel=None, timeout=None,
              channel=None, no_publish=False, rehearse=False, flavor=None, no_wait=False, allow_incomplete=False,
              markdown=False, boot_test=False, cluster=None):
    """Render, validate and build the AMIs with Packer in parallel; skip what is unchanged."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.jobs import build_ami as job

    opts = cli.options(c, **select_flags(pipeline, variant, base, upstream, upstream_ref, os_, k8s, arch, region,
                                         extra_pkg, extra_repo, var, var_file, flavor),
                       all=all, build_dir=build_dir, profile=profile)
    run = cli.run(lambda: job.run(job.settings(
        opts, channel=channel, publish=not no_publish, force=force, dry_run=dry_run,
        parallel=values.optional_count(parallel, "--parallel", example=4),
        max_parallel=values.count(c.config.amibuild.max_parallel, "amibuild.max_parallel (config)", maximum=256),
        timeout=values.optional_duration(timeout, "--timeout", example="90m or 5400"),
        rehearse=rehearse, allow_incomplete=allow_incomplete, wait=not no_wait,
        stall_after=values.duration(c.config.amibuild.get("stall_after", 10), "amibuild.stall_after (config)"),
        boot_test=_boot_test_settings(opts, boot_test, cluster), **_target(),
    ), cli.say))
    if json:
        cli.emit_json(run.to_dict())
    elif not markdown:
        cli.lines_out(report.build_lines(run))
    summary.publish(summary.build_markdown(run), to_stdout=markdown)
    cli.finish(run)


def _target() -> dict:
    """What the builds are rendered for, decided once here from the environment: the target (its
    endpoint) and, on a loopback endpoint, the sandbox's transform."""
    from amibuild.sandbox import transform  # deferred: not on the `amibuild --list` path

    target, sandboxed = transform.choose(os.environ)
    return {"target": target, "transform": sandboxed}


def _boot_test_settings(opts, boot_test: bool, cluster: str | None):
    """build-ami --boot-test [--cluster C]: the pipeline's test { ... } block with --cluster over it."""
    from amibuild.cli.imagetests import boot_test_settings  # deferred: not on the `amibuild --list` path

    return cli.run(lambda: boot_test_settings(opts, boot_test=boot_test, cluster=cluster))


REHEARSE_HELP = {
    **{k: v for k, v in SELECT_HELP.items() if k not in ("build_dir", "profile")},  # writes nothing, no AWS
    "json": "Print the reports as JSON on stdout (progress goes to stderr)",
    "keep": "Keep the overlay's upper layer (every file the chain wrote) and print where it is",
    "timeout": "Stop a variant's rehearsal after this many seconds (default 600)",
    "markdown": "Print a Markdown summary on stdout (what is appended to $GITHUB_STEP_SUMMARY in GitHub Actions)",
    "allow_incomplete": "Exit 0 when a rehearsal stopped at a step it cannot rehearse (default: exit 3)",
}


@task(help=REHEARSE_HELP, iterable=REPEATABLE, auto_shortflags=False)
def rehearse(c, pipeline=None, variant=None, base=None, upstream=None, upstream_ref=None, os_=None, k8s=None,
             arch=None, region=None, extra_pkg=None, extra_repo=None, var=None, var_file=None, json=False,
             keep=False, timeout=None, flavor=None, allow_incomplete=False, markdown=False):
    """Run each variant's provisioners here, in a throwaway copy of this machine, before any instance exists."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.pipeline.options import load_pipeline
    from amibuild.rehearse import job
    from amibuild.rehearse import report as rehearse_report

    opts = cli.options(c, **select_flags(pipeline, variant, base, upstream, upstream_ref, os_, k8s, arch, region,
                                         extra_pkg, extra_repo, var, var_file, flavor))

    def settings() -> job.RehearseSettings:
        seconds = values.optional_duration(timeout, "--timeout", example="600 or 10m") or job.DEFAULT_TIMEOUT
        return job.RehearseSettings(opts, load_pipeline(opts), keep=keep, timeout=seconds,
                                    refuse=job.refused_packages(), allow_incomplete=allow_incomplete)

    result = cli.run(lambda: job.run(settings(), cli.say))
    if json:
        cli.emit_json([r.to_dict() for r in result.reports])
    elif not markdown:
        cli.lines_out(line for r in result.reports for line in rehearse_report.lines(r))
    summary.publish(summary.rehearse_markdown(result.reports), to_stdout=markdown)
    cli.finish(result)


@task(help={"limit": "How many runs to show (default 10)", "json": "Print JSON", "build_dir": SELECT_HELP["build_dir"]})
def runs(c, limit=10, json=False, build_dir=None):
    """List recent build runs and what each did."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.bake import record

    records = cli.run(lambda: record.list_runs(cli.options(c, build_dir=build_dir, announce=False).build_dir,
                                               values.count(limit, "--limit", example=10)))
    if json:
        cli.emit_json([r.to_dict() for r in records])
    else:
        print("\n".join(report.runs_lines(records)))


@task(help={"run_id": "The build run whose leftovers to remove (`amibuild runs` lists them)",
            "dry_run": "List what the run left behind and remove nothing",
            "json": "Print JSON", "pipeline": SELECT_HELP["pipeline"], "profile": SELECT_HELP["profile"],
            "build_dir": SELECT_HELP["build_dir"]})
def clean_run(c, run_id=None, dry_run=False, json=False, pipeline=None, profile=None, build_dir=None):
    """Remove what an unfinished build run left in AWS (never an image in use); say what it kept and why."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.lifecycle import clean

    opts = cli.options(c, pipeline=pipeline, profile=profile, build_dir=build_dir)
    result = cli.run(lambda: clean.run(clean.settings(opts, run_id, dry_run=dry_run)))
    if json:
        cli.emit_json(result.to_dict())
    else:
        if not result.found and not result.leases and not result.temp_dirs:
            print(f"run {result.run_id}: nothing left behind")
        if result.dry_run:
            kept = {item for item, _ in result.kept}
            for item in result.found:
                if item not in kept:
                    print(f"found  {item}  ({item.command()})")
            for lease in result.leases:
                print(f"found  {lease}  (held by {lease.holder})")
            for folder in result.temp_dirs:
                print(f"found  {folder}  ({folder.command()})")
        for item, why in result.kept:
            print(f"kept  {item}: {why}")
        for item in result.removed:
            print(f"removed  {item}")
        for item, why in result.failed:
            print(f"LEFT BEHIND  {item}: {why}; remove with: {item.command()}")
    cli.finish(result)


@task(help={"port": "Port on 127.0.0.1 (default: a free one)"})
def sandbox(c, port=None):
    """Run the local AWS emulator in the foreground (prints `export` lines first)."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild import sandbox as sandbox_mod


    cli.run(lambda: sandbox_mod.serve_foreground(port=values.count(port or 0, "--port", minimum=0, maximum=65535,
                                                                  example=4566)))


USERDATA_HELP = {
    "cluster": "EKS cluster name",
    "os": "Node operating system: al2023 (nodeadm, default) or al2 (bootstrap.sh)",
    "proxy": "HTTP(S) proxy URL for yum/dnf, /etc/environment, containerd, docker and the kubelet",
    "no_proxy": "Extra NO_PROXY entry: host, .domain, address or CIDR (repeatable, or comma-separated)",
    "proxy_credentials_parameter": "SSM SecureString (user:password) the node reads at boot with its role and "
                                   "puts into the --proxy URL, which then has no credentials (e.g. /amibuild/proxy-creds)",
    "service_cidr": "Cluster service CIDR (default: both EKS defaults in NO_PROXY; required for al2023)",
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
    "api_server_endpoint": "Cluster API endpoint, https://... (required for al2023)",
    "certificate_authority": "Cluster CA as base64, as describe-cluster prints it (required for al2023)",
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
             private_endpoint=False, node_label=None, taint=None, max_pods="", proxy_credentials_parameter=""):
    """Print node user data (MIME multi-part), or with --k8s-manifests the cluster side of a proxy."""
    import base64
    import os

    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild import secrets
    from amibuild.handoff.userdata import render as ud

    def body():
        cfg = ud.config_from_flags(
            cluster=cluster, os=os_, proxy=proxy, no_proxy=no_proxy or (), service_cidr=service_cidr,
            cluster_ip=cluster_ip, region=region or os.environ.get("AWS_REGION", ""), bypass=bypass or (),
            bootstrap_args=bootstrap_args, kubelet_flags=kubelet_flag or (),
            api_server_endpoint=api_server_endpoint, certificate_authority=certificate_authority,
            cfn_stack=cfn_stack, cfn_resource=cfn_resource, private_endpoint=private_endpoint,
            node_labels=node_label or (), taints=taint or (), max_pods=max_pods or None,
            proxy_credentials_parameter=proxy_credentials_parameter,
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
            "json": "Print the parts as JSON on stdout"}, auto_shortflags=False)
def decode_userdata(c, source, json=False, stack=False, region=None, profile=None):
    """Decode user data (base64, gzip, MIME, cloud-config, any nesting) and print each part."""
    import sys
    from pathlib import Path

    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.handoff.userdata import decode as ud

    def body():
        if source in ("--help", "-h"):  # invoke hands a required positional the flag itself
            raise NotUserData("for this task's help run `amibuild --help decode-userdata`")
        if stack:
            from amibuild.cli import handoff  # deferred: boto3 behind it, only for --stack

            return handoff.stack_user_data(cli.options(c, profile=profile, announce=False), stack=source,
                                           region=region)
        if region or profile:
            raise NotUserData("--region and --profile go with --stack (SOURCE is then a stack name)")
        if source == "-":
            data, name = sys.stdin.buffer.read(), "<stdin>"
        else:
            try:
                data, name = Path(source).read_bytes(), source
            except OSError as exc:
                raise NotUserData(f"{source}: cannot read: {exc.strerror}") from None
        return ud.decode(data, name)

    parts = cli.run(body)
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


@task(help={"json": "Print what was written as JSON on stdout"})
def init(c, json=False):
    """Write a starter amibuild.hcl (one AL2023 variant with ceph-common) and ignore build/ in .gitignore."""
    from pathlib import Path

    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.cli import init as init_mod

    result = cli.run(lambda: init_mod.init(Path.cwd()))
    if json:
        cli.emit_json({"pipeline": str(result.pipeline), "gitignore": str(result.gitignore),
                       "gitignore_changed": result.gitignore_changed})
    else:
        cli.lines_out(result.lines())


@task
def demo(c):
    """Run the whole pipeline against the local emulator, printing each step (the README demo)."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.sandbox.demo import run_demo

    cli.run(run_demo)


CHANNEL_HELP = {
    "pipeline": SELECT_HELP["pipeline"],
    "variant": "Variant whose channel this is (required)",
    "k8s": "Kubernetes version of the variant, if not the pipeline file's (it is part of the parameter name)",
    "profile": SELECT_HELP["profile"],
    "json": "Print the result as JSON on stdout",
}


GATE_HELP = {
    "override_gate": "Write even though the image does not meet the channel's gate (with --reason)",
    "reason": "Why the gate is overridden; kept in the channel's history",
    "now": "The time the gate's soak is judged at, ISO 8601 (default: $AMIBUILD_NOW, else now)",
}


def _seconds(c, key, default, what, *, positive=False):
    """A number of seconds from config `amibuild.KEY` (invoke.yaml / INVOKE_AMIBUILD_KEY), else `default`."""

    raw = c.config.get("amibuild", {}).get(key)
    try:
        value = default if raw in (None, "") else float(raw)
    except (TypeError, ValueError):
        value = -1.0
    if not 0 <= value < float("inf") or (positive and value == 0):  # NaN fails both comparisons
        raise SpecError(f"amibuild.{key} {raw!r} (invoke.yaml / INVOKE_AMIBUILD_{key.upper()}): {what}")
    return value


def _guard(c, signals, run_id=None):
    """The channel lease settings: how long to wait for a busy channel (config `amibuild.lease_wait`),
    how long a lease is good for (`amibuild.lease_ttl`), and the signals that stop a transaction
    before its first write."""
    from amibuild.lease import LEASE_TTL, LEASE_WAIT, Guard  # deferred: not on the `amibuild --list` path

    wait = _seconds(c, "lease_wait", LEASE_WAIT, "seconds to wait for a channel another writer holds, e.g. 30")
    ttl = _seconds(c, "lease_ttl", LEASE_TTL, "seconds a channel lease is good for, more than 0, e.g. 300",
                   positive=True)
    return Guard(run_id=run_id or "", wait=wait, ttl=ttl, cancelled=signals.requested)


class _NO_SIGNALS:  # noqa: N801 - a stand-in for `Signals` where a task holds none off
    @staticmethod
    def requested() -> bool:
        return False


def _read_timeout(c):
    """The channel client's read timeout from config `amibuild.read_timeout` (seconds), or None: the default."""
    raw = c.config.get("amibuild", {}).get("read_timeout")
    if raw in (None, ""):
        return None
    return _seconds(c, "read_timeout", None, "seconds one AWS request may wait for its answer, more than 0, e.g. 10",
                    positive=True)


DRY_RUN_CHANNEL = "Print what would be written, region by region (the plan the write carries out), and write nothing"


def _channel_result(result, signals, *, json: bool, markdown: bool = False) -> None:
    """Print a channel write's result (or a dry run's plan), then exit as it says; a write's summary
    (a row per region: AMI before and after) goes to $GITHUB_STEP_SUMMARY, and with --markdown to stdout."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.channels.plan import PublishPlan

    if isinstance(result, PublishPlan):  # --dry-run: nothing was written
        cli.emit_json({"dry_run": True, **result.to_dict()}) if json else cli.lines_out(report.plan_lines(result))
        cli.finish(result)
        return
    if json or not markdown:
        cli.emit_json(result.to_dict()) if json else cli.lines_out(report.publish_lines(result))
    summary.publish(summary.publish_markdown(result), to_stdout=markdown)
    cli.finish_channel(result, signals)


def _channel_options(c, pipeline, variant, k8s, profile):
    return cli.options(c, pipeline=pipeline, variant=[variant] if variant else None, k8s=k8s, profile=profile)


@task(help={**CHANNEL_HELP,
            "ami": "REGION=AMI_ID, comma-separated or repeated; every target region of the pipeline needs one",
            "channel": "Channel to publish to (default: recommended)",
            "run_id": "Run id to record (default: the images' amibuild:run-id tag)",
            "allow_foreign": "Publish images amibuild did not build (no amibuild:fingerprint tag)",
            "force": "Write even if another writer moved the channel since amibuild read it",
            "dry_run": DRY_RUN_CHANNEL,
            "markdown": "Print a Markdown summary on stdout (what is appended to $GITHUB_STEP_SUMMARY in GitHub Actions)",
            **GATE_HELP},
      iterable=["ami"], auto_shortflags=False)
def publish(c, variant=None, ami=None, channel="recommended", run_id=None, allow_foreign=False, force=False,
            pipeline=None, k8s=None, profile=None, json=False, dry_run=False, override_gate=False, reason=None,
            now=None, markdown=False):
    """Publish AMI ids built elsewhere to a variant's SSM channel, in every target region or none."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.channels import job
    from amibuild.channels.plan import parse_amis

    def body(signals):
        # deferred: imported when the task runs, not on the `amibuild --list` path
        from amibuild.channels.gates import check_reason
        from amibuild.cli import imagetests

        override, when = check_reason(override_gate, reason), imagetests.now(now)
        opts = _channel_options(c, pipeline, variant, k8s, profile)
        pipe, var = cli.channel_variant(opts, variant)
        return job.publish(job.PublishSettings(
            profile=opts.profile, pipeline=pipe, variant=var, amis=parse_amis(ami or []), channel=channel,
            run_id=run_id, allow_foreign=allow_foreign, force=force, read_timeout=_read_timeout(c),
            guard=_guard(c, signals, run_id), dry_run=dry_run, override_gate=override, now=when))

    _channel_result(*cli.run_channel(body), json=json, markdown=markdown)


@task(help={**CHANNEL_HELP, "from_": "Channel to copy from, e.g. recommended",
            "to": "Channel to copy into, e.g. stable",
            "force": "Write even if another writer moved the target channel since amibuild read it",
            "dry_run": DRY_RUN_CHANNEL,
            "markdown": "Print a Markdown summary on stdout (what is appended to $GITHUB_STEP_SUMMARY in GitHub Actions)",
            "due": "Promote every gated channel (pipeline `channel` blocks with `from`) whose gate is met now, "
                   "for every variant; print what was promoted and what waits until when",
            **GATE_HELP},
      auto_shortflags=False)
def promote(c, variant=None, from_=None, to=None, force=False, pipeline=None, k8s=None, profile=None, json=False,
            dry_run=False, markdown=False, due=False, override_gate=False, reason=None, now=None):
    """Copy a channel's exact AMI, region by region, into another channel."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.channels import job

    from amibuild.channels.gates import check_reason
    from amibuild.cli import imagetests

    if due:
        return _promote_due(c, variant, from_, to, override_gate, pipeline, k8s, profile, json, now, markdown)

    def body(signals):
        if not from_ or not to:
            raise SpecError("promote: give --from CHANNEL and --to CHANNEL, e.g. --from recommended --to stable")
        override, when = check_reason(override_gate, reason), imagetests.now(now)
        opts = _channel_options(c, pipeline, variant, k8s, profile)
        pipe, var = cli.channel_variant(opts, variant)
        return job.promote(job.PromoteSettings(profile=opts.profile, pipeline=pipe, variant=var, source=from_,
                                               target=to, force=force, read_timeout=_read_timeout(c),
                                               guard=_guard(c, signals), dry_run=dry_run, override_gate=override,
                                               now=when))

    _channel_result(*cli.run_channel(body), json=json, markdown=markdown)


def _promote_due(c, variant, from_, to, override_gate, pipeline, k8s, profile, json, now, markdown=False):
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.aws import Aws
    from amibuild.channels import due
    from amibuild.cli import imagetests
    from amibuild.pipeline.options import load_pipeline

    def body(signals):
        if from_ or to or override_gate:
            raise SpecError("promote --due follows the pipeline's gates: leave out --from, --to and --override-gate")
        when = imagetests.now(now)
        opts = cli.options(c, pipeline=pipeline, variant=[variant] if variant else None, k8s=k8s, profile=profile)
        pipe = load_pipeline(opts)
        return due.promote_due(Aws(profile=opts.profile, region=pipe.build_region), pipe, now=when,
                               guard=lambda: _guard(c, signals), say=cli.say)

    items, _ = cli.run_channel(body)
    if json:
        cli.emit_json([i.to_dict() for i in items])
    elif not markdown:
        cli.lines_out(due.lines(items))
    summary.publish(summary.due_markdown(items), to_stdout=markdown)
    if any(i.action is due.DueAction.FAILED for i in items):
        def failed() -> None:
            raise PublishFailed("a due promotion failed (see above)")

        cli.run(failed)


@task(help={**CHANNEL_HELP, "channel": "Channel to roll back (default: recommended)",
            "to_version": "Parameter version to go back to, as `amibuild history` shows it for the build region "
                          "(default: the newest version holding another AMI than now)",
            "force": "Write even if another writer moved the channel since amibuild read it",
            "dry_run": DRY_RUN_CHANNEL,
            "markdown": "Print a Markdown summary on stdout (what is appended to $GITHUB_STEP_SUMMARY in GitHub Actions)"},
      auto_shortflags=False)
def rollback(c, variant=None, channel="recommended", to_version=None, force=False, pipeline=None, k8s=None,
             profile=None, json=False, dry_run=False, markdown=False):
    """Put a channel back to an earlier AMI from its parameter history."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.channels import job

    def body(signals):
        version = values.optional_count(to_version, "--to-version", example=3)
        opts = _channel_options(c, pipeline, variant, k8s, profile)
        pipe, var = cli.channel_variant(opts, variant)
        return job.rollback(job.RollbackSettings(profile=opts.profile, pipeline=pipe, variant=var, channel=channel,
                                                 to_version=version, force=force, read_timeout=_read_timeout(c), guard=_guard(c, signals),
                                                 dry_run=dry_run))

    _channel_result(*cli.run_channel(body), json=json, markdown=markdown)


@task(help={**CHANNEL_HELP, "channel": "Only this channel (default: every channel of the variant)",
            "region": "Only this region (default: every target region of the pipeline)"},
      auto_shortflags=False)
def history(c, variant=None, channel=None, region=None, pipeline=None, k8s=None, profile=None, json=False):
    """Show a variant's channel history: version, time, AMI, fingerprint, run id, who wrote it."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.channels import read as channel_status

    def body():
        aws, pipe, var = cli.channel_target(_channel_options(c, pipeline, variant, k8s, profile), variant)
        return channel_status.history(aws, pipeline=pipe, variant=var, channel=channel, region=region)

    entries = cli.run(body)
    cli.emit_json([e.to_dict() for e in entries]) if json else cli.lines_out(report.history_lines(entries))


@task(help={"pipeline": CHANNEL_HELP["pipeline"], "profile": CHANNEL_HELP["profile"], "json": CHANNEL_HELP["json"],
            "check": "Exit 1 naming every channel whose regions hold images of different builds (or none)",
            "repair": "Bring every split channel to one build under its lease, saying which and why",
            "markdown": "Print the table as Markdown on stdout"},
      auto_shortflags=False)
def channels(c, pipeline=None, profile=None, json=False, markdown=False, check=False, repair=False):
    """List every variant x channel x region: AMI, version, age; --check / --repair split channels."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.pipeline.options import load_pipeline
    from amibuild.channels import read as channel_status
    from amibuild.channels import repair as repair_mod
    from amibuild.aws import Aws

    def gateway():
        opts = cli.options(c, pipeline=pipeline, profile=profile)
        pipe = load_pipeline(opts)
        aws = Aws(profile=opts.profile, region=pipe.build_region)
        aws.ssm_read_timeout = _read_timeout(c) or aws.ssm_read_timeout
        return aws, pipe

    if not check and not repair:
        entries = cli.run(lambda: _listing(channel_status, gateway))
        if markdown:
            print(summary.channels_markdown(entries))
            return
        cli.emit_json([e.to_dict() for e in entries]) if json else cli.lines_out(report.channel_lines(entries))
        return

    def body(signals=None):
        aws, pipe = gateway()
        splits = repair_mod.check(aws, pipeline=pipe)
        if not repair:
            return splits, []
        return splits, [repair_mod.repair(aws, pipeline=pipe, split=s, guard=_guard(c, signals)) for s in splits]

    if repair:
        (splits, repaired), _signals = cli.run_channel(body)
    else:
        splits, repaired = cli.run(body)
    if json:
        cli.emit_json({"split": [s.to_dict() for s in splits],
                       "repaired": [{"channel": d.split.channel, "variant": d.split.variant, "build": d.choice.build,
                                     "why": d.choice.why, "result": d.result.to_dict()} for d in repaired]})
    elif not (markdown and not repair):
        lines = [s.describe() for s in splits] if not repair else [x for d in repaired for x in repair_mod.repair_lines(d)]
        cli.lines_out(lines or ["every channel is whole: each region holds an image of the same build"])
    if not repair:
        summary.publish(summary.channel_check_markdown(splits), to_stdout=markdown)
    if splits and not repair:
        def split() -> None:
            raise ChannelSplit(f"{len(splits)} channel(s) split across regions; "
                               "`amibuild channels --repair` brings each to one build")

        cli.run(split)


def _listing(channel_status, gateway):
    aws, pipe = gateway()
    return channel_status.channels(aws, pipeline=pipe)


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
                     dry_run=False, proxy_credentials_parameter=""):
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
        dry_run=dry_run, credentials_parameter=proxy_credentials_parameter), cli.say))
    cli.emit_json(result.to_dict()) if json else cli.lines_out(result.lines())
    cli.finish(result)


@task(help={"pipeline": SELECT_HELP["pipeline"], "variant": SELECT_HELP["variant"],
            "json": "Print the matrix as JSON on stdout",
            "github": "Append matrix=<json> to $GITHUB_OUTPUT (GitHub Actions) and print that line"},
      iterable=["variant"], auto_shortflags=False)
def matrix(c, pipeline=None, variant=None, json=False, github=False):
    """Print the variants as a CI matrix, so each runner builds one variant."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.pipeline.options import load_pipeline
    from amibuild.pipeline import matrix as matrix_mod

    opts = cli.options(c, pipeline=pipeline, variant=variant)
    value = cli.run(lambda: matrix_mod.matrix(load_pipeline(opts)))
    written = cli.run(lambda: matrix_mod.github_output(value)) if github else None
    if json:
        cli.emit_json(value)
    else:
        print(written or "\n".join(matrix_mod.table(value)))


@task(help={"pipeline": SELECT_HELP["pipeline"], "profile": SELECT_HELP["profile"],
            "json": "Print the checks as JSON on stdout"}, auto_shortflags=False)
def doctor(c, pipeline=None, profile=None, json=False):
    """Check packer, AWS credentials, region, endpoint and the pipeline file; say what to fix."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.cli import doctor as doctor_mod

    results = cli.run(lambda: doctor_mod.checks(cli.options(c, pipeline=pipeline, profile=profile, announce=False)))
    if json:
        cli.emit_json([r.to_dict() for r in results])
    else:
        print("\n".join(doctor_mod.lines(results)))
    cli.run(lambda: doctor_mod.verdict(results))


PRUNE_HELP = {
    "keep": "Images to keep per variant and region, newest first (required, at least 1)",
    "older_than": "Also keep every image younger than this: 90m, 12h, 30d, 2w (default: no age limit)",
    "keep_versions": "Also keep the images of this many earlier versions of every channel, for rollback (default 3)",
    "dry_run": "Print the plan, with the reason for every image kept, and change nothing",
    "deprecate_only": "Set a deprecation time on the images instead of deleting them and their snapshots",
    "variant": "Only images of this variant (repeatable; default: every variant amibuild tagged)",
    "region": "Only this region (repeatable; default: every target region of the pipeline)",
    "pipeline": SELECT_HELP["pipeline"],
    "profile": SELECT_HELP["profile"],
    "json": "Print the plan and what was done as JSON on stdout",
}


@task(help=PRUNE_HELP, iterable=["variant", "region"], auto_shortflags=False)
def prune(c, keep=None, older_than=None, keep_versions=None, dry_run=False, deprecate_only=False, variant=None,
          region=None, pipeline=None, profile=None, json=False):
    """Delete old images amibuild made: keep the newest N per variant and region and every image in use."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.cli import lifecycle
    from amibuild.lifecycle import job
    from amibuild.lifecycle import prune as prune_mod

    opts = cli.options(c, pipeline=pipeline, profile=profile)
    result = cli.run(lambda: job.run(lifecycle.settings(
        opts, keep=keep, older_than=older_than, keep_versions=3 if keep_versions is None else keep_versions,
        dry_run=dry_run, deprecate_only=deprecate_only, variants=variant or (), regions=region or ()),
        guard=_guard(c, _NO_SIGNALS), say=cli.say))
    cli.emit_json(result.to_dict()) if json else cli.lines_out(prune_mod.report_lines(result))
    cli.finish(result)


@task(help={"task_": "Task the policy is for: build, publish (also promote, rollback, history, channels), "
                     "rollout, prune, fleet (describes only), test (test-ami, build-ami --boot-test), or all (default)",
            "pipeline": SELECT_HELP["pipeline"],
            "stack": "Nodegroup stack the rollout may change (repeatable; required for rollout and all)",
            "node_role_arn": "ARN of the node role: the only role iam:PassRole is allowed for (rollout and all)",
            "account": "Account id to put in the ARNs (default: *, any account)",
            "partition": "AWS partition: aws (default), aws-cn or aws-us-gov"},
      iterable=["stack"], auto_shortflags=False)
def iam_policy(c, task_="all", pipeline=None, stack=None, node_role_arn=None, account="*", partition="aws"):
    """Print a least-privilege IAM policy document (JSON) for a task: build, publish, rollout, prune, fleet, test or all."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.pipeline.options import load_pipeline
    from amibuild.lifecycle import iam

    opts = cli.options(c, pipeline=pipeline)
    loaded = cli.run(lambda: load_pipeline(opts))
    print(cli.run(lambda: iam.to_json(iam.policy(task_, loaded, stacks=stack or (),
                                                 node_role_arn=node_role_arn, account=account,
                                                 partition=partition))), end="")
    for note in iam.notes(task_, loaded):
        cli.say(f"note: {note}")


def select_flags(pipeline, variant, base, upstream, upstream_ref, os_, k8s, arch, region, extra_pkg, extra_repo,
                 var, var_file, flavor) -> dict:
    """The selection and input flags render, validate, rehearse and build-ami share, by name."""
    return {"pipeline": pipeline, "variant": variant, "base": base, "upstream": upstream,
            "upstream_ref": upstream_ref, "os": os_, "k8s": k8s, "arch": arch, "region": region,
            "extra_pkg": extra_pkg, "extra_repo": extra_repo, "var": var, "var_file": var_file, "flavor": flavor}


@task(help={"pipeline": SELECT_HELP["pipeline"], "variant": SELECT_HELP["variant"], "json": "Print JSON"},
      iterable=["variant"], auto_shortflags=False)
def tests(c, pipeline=None, variant=None, json=False):
    """List the checks each variant's image must pass: built-in (per OS and flavor) and the pipeline file's."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.cli import imagetests
    from amibuild.pipeline.options import load_pipeline

    opts = cli.options(c, pipeline=pipeline, variant=variant)
    entries = cli.run(lambda: imagetests.listing(load_pipeline(opts)))
    cli.emit_json(entries) if json else cli.lines_out(imagetests.listing_lines(entries))


@task(help={"variant": "Variant whose image to test", "ami": "The image to boot, in the build region (its copies "
             "are tagged with the result too)", "run_id": "Test the image a build run made of the variant",
             "cluster": "EKS cluster the test node joins (tainted amibuild.io/test:NoSchedule)",
             "subnet": "Subnet of the test instance (default: the pipeline's test { subnet_id })",
             "security_group": "Security group of the test instance (default: test { security_group_id })",
             "instance_profile": "Instance profile of the test instance, with SSM access (default: test { instance_profile })",
             "instance_type": "Instance type (default: test { instance_type }, else the variant's)",
             "timeout": "Give up after this long: seconds, or 15m (default: test { timeout }, else 15m)",
             "pipeline": SELECT_HELP["pipeline"], "profile": SELECT_HELP["profile"], "build_dir": SELECT_HELP["build_dir"],
             "json": "Print the result as JSON on stdout"}, auto_shortflags=False)
def test_ami(c, variant=None, ami=None, run_id=None, cluster=None, subnet=None, security_group=None,
             instance_profile=None, instance_type=None, timeout=None, pipeline=None, profile=None, build_dir=None,
             json=False):
    """Boot the image, run every check through SSM Run Command, terminate it; tag the image passed or failed."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.cli import imagetests
    from amibuild.imagetest import boot
    from amibuild.jobs.signals import Signals

    opts = cli.options(c, pipeline=pipeline, variant=[variant] if variant else None, profile=profile,
                       build_dir=build_dir)
    flags = {"cluster": cluster, "subnet_id": subnet, "security_group_id": security_group,
             "instance_profile": instance_profile, "instance_type": instance_type}
    with Signals(imagetests.BOOT_TEST_SIGNALS) as stop:
        def body():
            if not variant:
                raise SpecError("test-ami: --variant: name the variant whose image to test, e.g. --variant ceph")
            seconds = values.optional_duration(timeout, "--timeout", example="15m or 900")
            return imagetests.test_ami(opts, ami=ami, run_id=run_id, flags={**flags, "timeout": seconds},
                                       say=cli.say, stop=stop)

        def guarded():
            try:
                return body()
            except BaseException:
                if stop.requested():
                    raise Interrupted("interrupted: the boot test stopped and its instance was terminated",
                                      stop.exit_code) from None
                raise

        result, record = cli.run(guarded)
    cli.emit_json(result.to_dict()) if json else cli.lines_out([*boot.report_lines(result), f"record: {record}"])
    cli.finish(result)


ns = Collection(render, validate, rehearse, build_ami, runs, clean_run, publish, promote, rollback, history, channels,
                nodegroup_deploy, rollout, userdata, decode_userdata, aws_auth, prune, iam_policy, matrix, doctor,
                sandbox, demo, init, tests, test_ami)
# fleet view and Karpenter hand-off: their tasks live in amibuild/cli/fleet.py
from amibuild.cli.fleet import fleet, karpenter  # noqa: E402

ns.add_task(fleet)
ns.add_task(karpenter)
ns.configure({
    "amibuild": {
        "pipeline": None,  # default: amibuild.hcl when present
        "build_dir": "build",
        "packer": "packer",
        "cache_dir": None,
        "max_parallel": 8,
        # seconds a channel write waits for another writer's lease on the channel (default 30); None
        # so that invoke passes INVOKE_AMIBUILD_LEASE_WAIT through as text and `_guard` words the error
        "lease_wait": None,
        "lease_ttl": None,  # seconds a channel lease is good for (default 300)
        "read_timeout": None,  # seconds a channel write's request waits for its answer (default 10)
        "stall_after": 10,  # seconds of silence from Packer before build-ami checks the endpoint is alive
    }
})
