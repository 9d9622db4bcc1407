"""The tasks that set a machine up, show the tool or look after the images: sandbox, init, demo,
doctor, prune, restore and iam-policy.

The bodies of the tasks `amibuild.cli.tasks` lists; their requests: `amibuild.jobs.requests_setup`.
"""

from __future__ import annotations

from pathlib import Path

from amibuild.cli import doctor as doctor_mod
from amibuild.cli import lifecycle
from amibuild.cli import run as cli
from amibuild.jobs.requests_setup import DemoRequest, DoctorRequest, IamPolicyRequest, InitFlags, PruneRequest, RestoreFlags, SandboxRequest
from amibuild.cli.tasks_common import Scope, _guard, options
from amibuild.handoff import consumer
from amibuild.jobs import init_job
from amibuild.lifecycle import iam, keyshare
from amibuild.lifecycle import prune as prune_mod
from amibuild.lifecycle import prune_job as prune_job
from amibuild.lifecycle import restore as restore_job
from amibuild.pipeline.options import load_pipeline


def sandbox(c, r: SandboxRequest):
    from amibuild import sandbox as sandbox_mod  # deferred: the sandbox extra (moto)

    sandbox_mod.serve_foreground(port=r.port or 0)


def init(c, r: InitFlags):
    cli.show(init_job.run(init_job.InitRequest(Path.cwd(), ci=r.ci, here=r.here)), r.json)


def demo(c, r: DemoRequest):
    from amibuild.sandbox.demo import run_demo  # deferred: the sandbox extra (moto)

    run_demo()


def doctor(c, r: DoctorRequest):
    opts = options(c, Scope(r.pipeline, profile=r.profile), announce=False)
    if r.consumer:  # the consumer account's checks (run with its credentials)
        request = consumer.ConsumerRequest(opts, r.channel or "", r.build_profile or "")
        return cli.show(consumer.run_consumer(request), r.json)
    report = doctor_mod.checks(opts)
    cli.show(report, r.json, data=lambda x: x.to_list())


def prune(c, r: PruneRequest):
    opts = options(c, Scope(r.pipeline, profile=r.profile))
    result = prune_job.run(lifecycle.settings(
        opts, keep=r.keep, older_than=r.older_than, keep_versions=3 if r.keep_versions is None else r.keep_versions,
        dry_run=r.dry_run, deprecate_only=r.deprecate_only, variants=r.variant, regions=r.region,
        disable_after=r.disable_after),
        guard=_guard(c), say=cli.say)
    cli.show(result, r.json, lines=prune_mod.report_lines)


def iam_policy(c, r: IamPolicyRequest):
    if r.form is not None and r.task_ != "share":  # a usage error: refused before the pipeline is read
        keyshare.refuse_form(r.task_, r.form)
    opts = options(c, Scope(r.pipeline))
    if r.task_ == "share":  # not an IAM policy: what each key's policy (or grants) must give the consumer accounts
        result = keyshare.run(keyshare.ShareRequest(opts, r.form or "policy", r.partition))
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
    cli.show(restore_job.run(restore_job.RestoreRequest(r.ami, r.region, r.profile)), r.json)
