"""The channel tasks: publish, promote, rollback, history and channels (list, --check, --repair).

The bodies of the tasks `amibuild.cli.tasks` lists; their requests: `amibuild.cli.requests_channels`.
"""

from __future__ import annotations

from amibuild.aws import Aws
from amibuild.channels import channel_jobs as job
from amibuild.channels import due, known
from amibuild.channels import read as channel_status
from amibuild.channels import repair as repair_mod
from amibuild.channels.gates import check_reason
from amibuild.channels.plan import PublishPlan, parse_amis
from amibuild.cli import values
from amibuild.cli import run as cli
from amibuild.cli.requests_channels import ChannelsRequest, HistoryRequest, PromoteRequest, PublishRequest, RollbackRequest
from amibuild.cli.tasks_common import _channel_deadline, _guard, _read_timeout, channel_variant, scope_options
from amibuild.errors import SpecError
from amibuild.jobs.image_inventory import promote_line
from amibuild.pipeline.options import load_pipeline
from amibuild.views import report, summary


def _plan_only(dry_run: bool, markdown: bool) -> None:
    """--markdown summarises a write; a dry run's plan has no summary to give, so the pair is refused."""
    if dry_run and markdown:
        raise SpecError("--markdown summarises a channel write, and --dry-run writes nothing: the plan prints "
                        "as text, or as JSON with --json")


def _channel_result(result, signals, *, json: bool, markdown: bool = False) -> None:
    """Print a channel write's result (or a dry run's plan), then exit as it says; a write's summary
    (a row per region: AMI before and after) goes to $GITHUB_STEP_SUMMARY, and with --markdown to stdout."""
    if isinstance(result, PublishPlan):  # --dry-run: nothing was written
        return cli.show(result, json, data=lambda plan: {"dry_run": True, **plan.to_dict()}, lines=report.plan_lines)
    cli.show(result, json, markdown=markdown, lines=report.publish_lines, summary=summary.publish_markdown, finish=False)
    cli.finish_channel(result, signals)


def _write(c, r, write, *, gated: bool = True):
    """A channel write (publish, promote, rollback) under held signals: (its result, the signals seen).
    Its flags are checked first (--dry-run with --markdown; a gate's override and what-if time), then
    the pipeline read; ``write(common)`` makes and runs the job's settings, ``common(run_id)`` giving
    the fields every write's settings share."""
    def body(signals):
        _plan_only(r.dry_run, r.markdown)
        gate = {"override_gate": check_reason(r.override_gate, r.reason), "new_channel": r.new_channel,
                "now": values.what_if_now(r.now, dry_run=r.dry_run)} if gated else {}
        opts = scope_options(c, r)
        pipe, var = channel_variant(opts, r.variant)
        return write(lambda run_id=None: dict(
            profile=opts.profile, pipeline=pipe, variant=var, force=r.force, read_timeout=_read_timeout(c),
            guard=_guard(c, signals, run_id), dry_run=r.dry_run, say=cli.say, **gate))
    return cli.run_channel(body)


def publish(c, r: PublishRequest):
    _channel_result(*_write(c, r, lambda common: job.publish(job.PublishSettings(
        amis=parse_amis(list(r.ami)), channel=r.channel, run_id=r.run_id, allow_foreign=r.allow_foreign,
        **common(r.run_id)))), json=r.json, markdown=r.markdown)


def promote(c, r: PromoteRequest):
    if r.due:
        return _promote_due(c, r)
    if not r.from_ or not r.to:
        raise SpecError("promote: give --from CHANNEL and --to CHANNEL, e.g. --from recommended --to stable")
    result, signals = _write(c, r, lambda common: job.promote(job.PromoteSettings(source=r.from_, target=r.to,
                                                                                   **common())))
    line = promote_line(scope_options(c, r), result)  # amibuild/jobs/image_inventory.py
    if line:
        cli.say(line)
    _channel_result(result, signals, json=r.json, markdown=r.markdown)


def _promote_due(c, r: PromoteRequest):
    def body(signals):
        if r.from_ or r.to or r.override_gate or r.reason or r.new_channel:  # every flag honoured or refused
            raise SpecError("promote --due follows the pipeline's gates: leave out --from, --to, --override-gate, "
                            "--reason and --new-channel")
        when = values.what_if_now(r.now, dry_run=r.dry_run)
        opts = scope_options(c, r)
        pipe = load_pipeline(opts)
        return due.promote_due(Aws(profile=opts.profile, region=pipe.build_region), pipe, now=when,
                               guard=lambda: _guard(c, signals), say=cli.say, dry_run=r.dry_run, force=r.force)

    done, _ = cli.run_channel(body)
    cli.show(done, r.json, markdown=r.markdown, data=lambda d: d.to_list(), summary=lambda d: summary.due_markdown(d.items))


def rollback(c, r: RollbackRequest):
    _channel_result(*_write(c, r, lambda common: job.rollback(job.RollbackSettings(
        channel=r.channel, to_version=r.to_version, **common())), gated=False), json=r.json, markdown=r.markdown)


def history(c, r: HistoryRequest):
    opts = scope_options(c, r)
    pipe, var = channel_variant(opts, r.variant)
    aws = Aws(profile=opts.profile, region=pipe.build_region)
    if r.channel:  # a typo would show an empty table and exit 0
        known.require(aws, pipe, [var], known.Asked(r.channel), regions=(r.region,) if r.region else None)
    entries = channel_status.history(aws, pipeline=pipe, variant=var, channel=r.channel, region=r.region)
    cli.emit_json([e.to_dict() for e in entries]) if r.json else cli.lines_out(report.history_lines(entries))


def channels(c, r: ChannelsRequest):
    def gateway():
        opts = scope_options(c, r)
        pipe = load_pipeline(opts)
        aws = Aws(profile=opts.profile, region=pipe.build_region)
        aws.ssm_read_timeout = _read_timeout(c) or aws.ssm_read_timeout
        return aws, pipe

    if not r.check and not r.repair:
        aws, pipe = gateway()
        entries = channel_status.with_safeguards(aws, channel_status.channels(aws, pipeline=pipe))
        if r.markdown:
            return cli.lines_out([summary.channels_markdown(entries)])
        cli.emit_json([e.to_dict() for e in entries]) if r.json else cli.lines_out(report.channel_lines(entries))
        return

    def body(signals=None):
        aws, pipe = gateway()
        splits = repair_mod.check(aws, pipeline=pipe, seconds=_channel_deadline(c))
        repaired = repair_mod.repair_all(aws, pipeline=pipe, splits=splits, guard=_guard(c, signals)) if r.repair else None
        return repair_mod.ChannelCheck(tuple(splits), None if repaired is None else tuple(repaired))

    checked, signals = cli.run_channel(body) if r.repair else (body(), None)
    cli.show(checked, r.json, markdown=r.markdown and not r.repair, finish=False,
             summary=None if r.repair else lambda x: summary.channel_check_markdown(x.splits))
    checked.raise_for_status(signals.name, signals.exit_code) if signals else checked.raise_for_status()
