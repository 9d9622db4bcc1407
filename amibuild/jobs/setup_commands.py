"""The set-up and lifecycle commands: init, doctor, prune, iam-policy and restore.

Each is `command(request, env) -> Shown`: its request (`amibuild.jobs.requests_setup`) as the cli
parsed it, the job's `Env`, and what it prints and exits with. doctor's other ways out, when no
credentials or no endpoint answer, are the cli's (``env.hints``).
"""

from __future__ import annotations

from pathlib import Path

from amibuild import values
from amibuild.errors import Interrupted, SpecError
from amibuild.handoff import consumer
from amibuild.jobs import doctor_job, init_job
from amibuild.jobs.env import Env, Scope, guard, options
from amibuild.jobs.requests_setup import DoctorRequest, IamPolicyRequest, InitRequest, PruneRequest, RestoreRequest
from amibuild.jobs.shown import Shown
from amibuild.jobs.signals import Signals
from amibuild.lifecycle import iam, keyshare, prune_job
from amibuild.lifecycle import prune as prune_mod
from amibuild.lifecycle import restore as restore_job
from amibuild.pipeline.options import load_pipeline


def init(r: InitRequest, env: Env) -> Shown:
    return Shown(init_job.run(r, Path.cwd()))


def doctor(r: DoctorRequest, env: Env) -> Shown:
    given = [name for name, value in (("--channel", r.channel), ("--build-profile", r.build_profile)) if value]
    if given and not r.consumer:
        raise SpecError(f"{' and '.join(given)} {'go' if len(given) > 1 else 'goes'} with --consumer: the consumer "
                        "account's checks read them")
    opts = options(env, Scope(r.pipeline, profile=r.profile), announce=False)
    if r.consumer:  # the consumer account's checks (run with its credentials)
        return Shown(consumer.run_consumer(consumer.ConsumerSettings(opts, r.channel or "", r.build_profile or "")))
    return Shown(doctor_job.checks(opts, hints=doctor_job.Hints(**env.hints)), data=lambda x: x.to_list())


def prune(r: PruneRequest, env: Env) -> Shown:  # every flag checked before the pipeline file is read or AWS asked
    opts = options(env, Scope(r.pipeline, profile=r.profile))
    if r.keep in (None, ""):
        raise SpecError("prune: say how many images to keep per variant and region, e.g. --keep 5")
    keep = values.count(r.keep, "--keep", minimum=1)
    versions = values.count(prune_mod.DEFAULT_KEEP_VERSIONS if r.keep_versions is None else r.keep_versions, "--keep-versions",
                            minimum=0, example=3)
    age = values.age(r.older_than, "--older-than")
    disable = values.age(r.disable_after, "--disable-after")
    if disable is not None and r.deprecate_only:
        raise SpecError("prune: --disable-after and --deprecate-only do not go together: deprecate first, "
                        "then disable in a later run")
    settings = prune_job.PruneSettings(opts.profile, load_pipeline(opts), keep, age, versions, r.dry_run, r.deprecate_only,
                                       r.variant, r.region, disable)
    result = prune_job.run(settings, guard=guard(env), say=env.say)
    return Shown(result, lines=prune_mod.report_lines, status=lambda: finish_prune(result, env.signals))


def finish_prune(result: prune_mod.PruneResult, signals: Signals | None) -> None:
    """After a prune: exit 128 + the signal if one came (its report shows what was done), else its verdict."""
    if signals is None or not signals.requested():
        return result.raise_for_status()
    outcomes = result.outcomes or ()
    waiting = sum(o.status is prune_mod.Done.NOT_STARTED for o in outcomes)
    what = (f"{len(outcomes) - waiting} image(s) finished, {waiting} not started (prune again for them)"
            if outcomes else "nothing was changed")
    failed = f"; {len(result.failed)} failed (see above)" if result.failed else ""
    raise Interrupted(f"interrupted by {signals.name}: {what}{failed}", signals.exit_code, summary=True)


def iam_policy(r: IamPolicyRequest, env: Env) -> Shown:
    if r.form is not None and r.task_ != "share":  # a usage error: refused before the pipeline is read
        keyshare.refuse_form(r.task_, r.form)
    opts = options(env, Scope(r.pipeline))
    if r.task_ == "share":  # not an IAM policy: what each key's policy (or grants) must give the consumer accounts
        result = keyshare.run(keyshare.ShareSettings(opts, r.form or "policy", r.partition))
        return Shown(result, notes=tuple(f"note: {note}" for note in result.notes))
    loaded = load_pipeline(opts)
    policy = iam.policy(r.task_, loaded, stacks=r.stack, node_role_arn=r.node_role_arn, account=r.account,
                        partition=r.partition)
    notes = iam.notes(r.task_, loaded, stacks=r.stack, node_role_arn=r.node_role_arn, partition=r.partition)
    return Shown(policy, text=iam.to_json(policy), notes=tuple(f"note: {note}" for note in notes))


def restore(r: RestoreRequest, env: Env) -> Shown:
    return Shown(restore_job.run(r.ami, r.region, r.profile))
