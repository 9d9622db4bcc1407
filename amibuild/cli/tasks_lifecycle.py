"""The lifecycle tasks: prune, restore and iam-policy.

The bodies of the tasks `amibuild.cli.tasks` lists; their requests: `amibuild.cli.requests_setup`.
"""

from __future__ import annotations

from amibuild.cli import lifecycle
from amibuild.cli import run as cli
from amibuild.cli.requests_setup import IamPolicyRequest, PruneRequest, RestoreFlags
from amibuild.cli.tasks_common import Scope, _guard, options
from amibuild.lifecycle import iam, keyshare
from amibuild.lifecycle import prune as prune_mod
from amibuild.lifecycle import prune_job as prune_job
from amibuild.lifecycle import restore as restore_job
from amibuild.pipeline.options import load_pipeline


def prune(c, r: PruneRequest):
    opts = options(c, Scope(r.pipeline, profile=r.profile))
    result = cli.run(lambda: prune_job.run(lifecycle.settings(
        opts, keep=r.keep, older_than=r.older_than, keep_versions=3 if r.keep_versions is None else r.keep_versions,
        dry_run=r.dry_run, deprecate_only=r.deprecate_only, variants=r.variant, regions=r.region,
        disable_after=r.disable_after),
        guard=_guard(c), say=cli.say))
    cli.show(result, r.json, lines=prune_mod.report_lines)


def iam_policy(c, r: IamPolicyRequest):
    if r.form is not None and r.task_ != "share":  # a usage error: refused before the pipeline is read
        cli.run(lambda: keyshare.refuse_form(r.task_, r.form))
    opts = options(c, Scope(r.pipeline))
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


def restore(c, r: RestoreFlags):
    cli.show(cli.run(lambda: restore_job.run(restore_job.RestoreRequest(r.ami, r.region, r.profile))), r.json)
