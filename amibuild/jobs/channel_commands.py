"""The channel commands: publish, promote, rollback, history and channels (list, --check, --repair).

Each is `command(request, env) -> Shown`: its request (`amibuild.jobs.requests_channels`) as the cli
parsed it, the job's `Env`, and what it prints and exits with. The writes run with the signals held
(the task table says so): ``env.signals``.
"""

from __future__ import annotations

from amibuild import values
from amibuild.aws import Aws
from amibuild.channels import channel_jobs as job
from amibuild.channels import due, known
from amibuild.channels import read as channel_status
from amibuild.channels import repair as repair_mod
from amibuild.channels.gates import check_reason
from amibuild.channels.plan import PublishPlan, parse_amis
from amibuild.errors import SpecError
from amibuild.jobs.env import Env, channel_deadline, guard, one_variant, read_timeout, scope_options
from amibuild.jobs.requests_channels import ChannelsRequest, HistoryRequest, PromoteRequest, PublishRequest, RollbackRequest
from amibuild.jobs.shown import Shown
from amibuild.jobs.signals import finish_channel, held
from amibuild.pipeline.options import load_pipeline
from amibuild.views import report, summary


def _written(result, env: Env) -> Shown:
    """A channel write's result (or a dry run's plan); a write's summary (a row per region: AMI before
    and after) goes to $GITHUB_STEP_SUMMARY, and with --markdown to stdout. A signal during the write
    exits 128 + its number once the result is printed, saying what moved."""
    if isinstance(result, PublishPlan):  # --dry-run: nothing was written
        return Shown(result, data=lambda plan: {"dry_run": True, **plan.to_dict()}, lines=report.plan_lines)
    return Shown(result, lines=report.publish_lines, summary=summary.publish_markdown,
                 status=lambda: finish_channel(result, env.signals))


def _write(r, env: Env, write, *, gated: bool = True):
    """A channel write (publish, promote, rollback). Its flags are checked first (--dry-run with
    --markdown; a gate's override and what-if time), then the pipeline read; ``write(common)`` makes
    and runs the job's settings, ``common(run_id)`` giving the fields every write's settings share."""
    if r.dry_run and r.markdown:  # --markdown summarises a write; a dry run's plan has no summary to give
        raise SpecError("--markdown summarises a channel write, and --dry-run writes nothing: the plan prints "
                        "as text, or as JSON with --json")
    gate = {"override_gate": check_reason(r.override_gate, r.reason), "new_channel": r.new_channel,
            "now": values.what_if_now(r.now, dry_run=r.dry_run)} if gated else {}
    opts = scope_options(env, r)
    pipe, var = one_variant(opts, "whose channel this is")
    return write(lambda run_id=None: dict(
        profile=opts.profile, pipeline=pipe, variant=var, force=r.force, read_timeout=read_timeout(env),
        guard=guard(env, run_id), dry_run=r.dry_run, say=env.say, **gate))


def publish(r: PublishRequest, env: Env) -> Shown:
    return _written(_write(r, env, lambda common: job.publish(job.PublishSettings(
        amis=parse_amis(list(r.ami)), channel=r.channel, run_id=r.run_id, allow_foreign=r.allow_foreign,
        **common(r.run_id)))), env)


def promote(r: PromoteRequest, env: Env) -> Shown:
    if r.due:
        return _promote_due(r, env)
    if not r.from_ or not r.to:
        raise SpecError("promote: give --from CHANNEL and --to CHANNEL, e.g. --from recommended --to stable")
    result = _write(r, env, lambda common: job.promote(job.PromoteSettings(source=r.from_, target=r.to, **common())))
    # deferred: of the channel commands only promote shows a package diff, and what it imports (the
    # SBOM and signing libraries, the render) adds ~0.15 s of CPU to every other one's start
    from amibuild.jobs.image_inventory import promote_line

    line = promote_line(scope_options(env, r), result)
    if line:
        env.say(line)
    return _written(result, env)


def _promote_due(r: PromoteRequest, env: Env) -> Shown:
    if r.from_ or r.to or r.override_gate or r.reason or r.new_channel:  # every flag honoured or refused
        raise SpecError("promote --due follows the pipeline's gates: leave out --from, --to, --override-gate, "
                        "--reason and --new-channel")
    when = values.what_if_now(r.now, dry_run=r.dry_run)
    opts = scope_options(env, r)
    pipe = load_pipeline(opts)
    done = due.promote_due(Aws(profile=opts.profile, region=pipe.build_region), pipe, now=when,
                           guard=lambda: guard(env), say=env.say, dry_run=r.dry_run, force=r.force)
    return Shown(done, data=lambda d: d.to_list(), lines=report.due_lines, summary=lambda d: summary.due_markdown(d.items, d.dry_run))


def rollback(r: RollbackRequest, env: Env) -> Shown:
    return _written(_write(r, env, lambda common: job.rollback(job.RollbackSettings(
        channel=r.channel, to_version=r.to_version, **common())), gated=False), env)


def history(r: HistoryRequest, env: Env) -> Shown:
    opts = scope_options(env, r)
    pipe, var = one_variant(opts, "whose channel this is")
    aws = Aws(profile=opts.profile, region=pipe.build_region)
    if r.channel:  # a typo would show an empty table and exit 0
        known.require(aws, pipe, [var], known.Asked(r.channel), regions=(r.region,) if r.region else None)
    entries = channel_status.history(aws, pipeline=pipe, variant=var, channel=r.channel, region=r.region)
    return Shown(entries, data=lambda x: [e.to_dict() for e in x], lines=report.history_lines)


def channels(r: ChannelsRequest, env: Env) -> Shown:  # the list; --check finds split ones, --repair mends them
    def gateway():
        opts = scope_options(env, r)
        pipe = load_pipeline(opts)
        aws = Aws(profile=opts.profile, region=pipe.build_region)
        aws.ssm_read_timeout = read_timeout(env) or aws.ssm_read_timeout
        return aws, pipe

    if not r.check and not r.repair:
        aws, pipe = gateway()
        entries = channel_status.with_safeguards(aws, channel_status.channels(aws, pipeline=pipe))
        return Shown(entries, data=lambda x: [e.to_dict() for e in x],
                     lines=lambda x: [summary.channels_markdown(x)] if r.markdown else report.channel_lines(x))

    def body(signals=None):
        aws, pipe = gateway()
        splits = repair_mod.check(aws, pipeline=pipe, seconds=channel_deadline(env))
        repaired = (repair_mod.repair_all(aws, pipeline=pipe, splits=splits, guard=guard(env.with_signals(signals)))
                    if r.repair else None)
        return repair_mod.ChannelCheck(tuple(splits), None if repaired is None else tuple(repaired))

    checked, signals = held(body) if r.repair else (body(), None)
    return Shown(checked, summary=None if r.repair else lambda x: summary.channel_check_markdown(x.splits),
                 status=lambda: checked.raise_for_status(signals.name, signals.exit_code) if signals
                 else checked.raise_for_status())
