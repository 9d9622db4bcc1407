"""The lifecycle tasks: prune, restore and iam-policy.

Part of the task table `amibuild.cli.tasks` assembles (its docstring says how flags and
imports are kept fast).
"""

from dataclasses import dataclass

from amibuild.cli import run as cli
from amibuild.cli.command import command, flag, like
from amibuild.cli.tasks_common import Output, Scope, Selection, _guard, _NO_SIGNALS


@dataclass(frozen=True)
class PruneRequest:
    """`amibuild prune` (its numbers and ages are checked in `amibuild.cli.lifecycle.settings`)."""

    keep: str | None = flag("Images to keep per variant and region, newest first (required, at least 1)")
    older_than: str | None = flag("Also keep every image younger than this: 90m, 12h, 30d, 2w (default: no age "
                                  "limit)")
    keep_versions: str | None = flag("Also keep the images of this many earlier versions of every channel, for "
                                     "rollback (default 3)")
    dry_run: bool = flag("Print the plan, with the reason for every image kept, and change nothing", False)
    deprecate_only: bool = flag("Set a deprecation time on the images instead of deleting them and their snapshots",
                                False)
    variant: tuple[str, ...] = flag("Only images of this variant (repeatable; default: every variant amibuild "
                                    "tagged)", repeat=True)
    region: tuple[str, ...] = flag("Only this region (repeatable; default: every target region of the pipeline)",
                                   repeat=True)
    pipeline: str | None = like(Selection, "pipeline")
    profile: str | None = like(Output, "profile")
    json: bool = flag("Print the plan and what was done as JSON on stdout", False)
    disable_after: str | None = flag("Also disable (DisableImage) the images nothing uses that are older than this, "
                                     "e.g. 30d; shared images are skipped (default: disable none)")


@command(PruneRequest)
def prune(c, r: PruneRequest):
    """Delete old images amibuild made: keep the newest N per variant and region and every image in use."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.cli import lifecycle
    from amibuild.lifecycle import prune_job as job
    from amibuild.lifecycle import prune as prune_mod

    opts = cli.options(c, Scope(r.pipeline, profile=r.profile))
    result = cli.run(lambda: job.run(lifecycle.settings(
        opts, keep=r.keep, older_than=r.older_than, keep_versions=3 if r.keep_versions is None else r.keep_versions,
        dry_run=r.dry_run, deprecate_only=r.deprecate_only, variants=r.variant, regions=r.region,
        disable_after=r.disable_after),
        guard=_guard(c, _NO_SIGNALS), say=cli.say))
    cli.emit_json(result.to_dict()) if r.json else cli.lines_out(prune_mod.report_lines(result))
    cli.finish(result)


@dataclass(frozen=True)
class IamPolicyRequest:
    """`amibuild iam-policy` (the policy itself is `amibuild.lifecycle.iam.policy`)."""

    task_: str = flag("Task the policy is for: build, publish (also promote, rollback, history, channels), "
                      "rollout, prune, fleet (describes only), test (test-ami, build-ami --boot-test), verify (verify, "
                      "fleet --verify with fleet), scan (scan, sbom, diff, build-ami --scan with build), or all "
                      "(default); or share: what the ami_users accounts need on each region's KMS key (not an IAM "
                      "policy)", "all", name="task")
    pipeline: str | None = like(Selection, "pipeline")
    stack: tuple[str, ...] = flag("Nodegroup stack the rollout may change (repeatable; required for rollout; all "
                                  "without it: every stack)", repeat=True)
    node_role_arn: str | None = flag("ARN of the node role: the only role iam:PassRole is allowed for (required for "
                                     "rollout; all without it: no iam:PassRole)")
    account: str = flag("Account id to put in the ARNs (default: *, any account)", "*")
    partition: str = flag("AWS partition: aws (default), aws-cn or aws-us-gov", "aws")
    form: str | None = flag("With --task share: policy (key policy statements, default) or grants (CreateGrant calls)")


@command(IamPolicyRequest)
def iam_policy(c, r: IamPolicyRequest):
    """Print a least-privilege IAM policy (JSON) for a task: build, publish, rollout, prune, fleet, test, verify, scan, all, or share."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.pipeline.options import load_pipeline
    from amibuild.lifecycle import iam, keyshare

    if r.form is not None and r.task_ != "share":  # a usage error: refused before the pipeline is read
        cli.run(lambda: keyshare.refuse_form(r.task_, r.form))
    opts = cli.options(c, Scope(r.pipeline))
    if r.task_ == "share":  # not an IAM policy: what each key's policy (or grants) must give the consumer accounts
        result = cli.run(lambda: keyshare.run(keyshare.ShareRequest(opts, r.form or "policy", r.partition)))
        cli.lines_out(result.lines())
        for note in result.notes:
            cli.say(f"note: {note}")
        return
    loaded = cli.run(lambda: load_pipeline(opts))
    print(cli.run(lambda: iam.to_json(iam.policy(r.task_, loaded, stacks=r.stack, node_role_arn=r.node_role_arn,
                                                 account=r.account, partition=r.partition))), end="")
    for note in iam.notes(r.task_, loaded, stacks=r.stack, node_role_arn=r.node_role_arn):
        cli.say(f"note: {note}")


@dataclass(frozen=True)
class RestoreFlags:
    """`amibuild restore` (the job's own request is `amibuild.lifecycle.restore.RestoreRequest`)."""

    ami: str = flag("The deregistered image to bring back (required), e.g. ami-0123456789abcdef0", "")
    region: str = flag("The region it was deregistered in (required)", "")
    profile: str | None = like(Output, "profile")
    json: bool = flag("Print what was restored as JSON on stdout", False)


@command(RestoreFlags)
def restore(c, r: RestoreFlags):
    """Bring a deregistered image back from the Recycle Bin, with its snapshots and tags."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.lifecycle import restore as job

    result = cli.run(lambda: job.run(job.RestoreRequest(r.ami, r.region, r.profile)))
    cli.emit_json(result.to_dict()) if r.json else cli.lines_out(result.lines())
    cli.finish(result)
