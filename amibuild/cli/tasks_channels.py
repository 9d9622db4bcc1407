"""The channel tasks: publish, promote, rollback, history and channels (list, --check, --repair).

Part of the task table `amibuild.cli.tasks` assembles (its docstring says how flags and
imports are kept fast).
"""

from invoke import task

from amibuild.cli import report, summary, values
from amibuild.errors import ChannelSplit, PublishFailed, SpecError
from amibuild.cli import run as cli
from amibuild.cli.inventory import promote_line
from amibuild.cli.tasks_common import CHANNEL_HELP, _channel_deadline, _guard, _read_timeout, _channel_options


GATE_HELP = {
    "override_gate": "Write even though the image does not meet the channel's gate (with --reason)",
    "reason": "Why the gate is overridden; kept in the channel's history",
    "now": "With --dry-run only: the what-if time the gate's soak is judged at, ISO 8601 (default: "
           "$AMIBUILD_NOW, else the time AWS answers with); a write with it exits 2",
}


DRY_RUN_CHANNEL = "Print what would be written, region by region (the plan the write carries out), and write nothing"
NEW_CHANNEL = ("The channel is a new name: neither declared (a `channel` block, default_channel, recommended, "
               "candidate, stable) nor there yet for the variant; without it such a name is refused as a typo")


def _plan_only(dry_run: bool, markdown: bool) -> None:
    """--markdown summarises a write; a dry run's plan has no summary to give, so the pair is refused."""
    if dry_run and markdown:
        raise SpecError("--markdown summarises a channel write, and --dry-run writes nothing: the plan prints "
                        "as text, or as JSON with --json")


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


@task(help={**CHANNEL_HELP,
            "ami": "REGION=AMI_ID, comma-separated or repeated; every target region of the pipeline needs one",
            "channel": "Channel to publish to (default: recommended)",
            "run_id": "Run id to record (default: the images' amibuild:run-id tag)",
            "allow_foreign": "Publish images amibuild did not build (no amibuild:fingerprint tag)",
            "force": "Write even if another writer moved the channel since amibuild read it",
            "dry_run": DRY_RUN_CHANNEL,
            "markdown": "Print a Markdown summary on stdout (what is appended to $GITHUB_STEP_SUMMARY in GitHub Actions)",
            "new_channel": NEW_CHANNEL, **GATE_HELP},
      iterable=["ami"], auto_shortflags=False)
def publish(c, variant=None, ami=None, channel="recommended", run_id=None, allow_foreign=False, force=False,
            pipeline=None, k8s=None, profile=None, json=False, dry_run=False, override_gate=False, reason=None,
            now=None, markdown=False, new_channel=False):
    """Publish AMI ids built elsewhere to a variant's SSM channel, in every target region or none."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.channels import job
    from amibuild.channels.plan import parse_amis

    def body(signals):
        # deferred: imported when the task runs, not on the `amibuild --list` path
        from amibuild.channels.gates import check_reason
        from amibuild.cli import imagetests

        _plan_only(dry_run, markdown)
        override, when = check_reason(override_gate, reason), imagetests.what_if_now(now, dry_run=dry_run)
        opts = _channel_options(c, pipeline, variant, k8s, profile)
        pipe, var = cli.channel_variant(opts, variant)
        return job.publish(job.PublishSettings(
            profile=opts.profile, pipeline=pipe, variant=var, amis=parse_amis(ami or []), channel=channel,
            run_id=run_id, allow_foreign=allow_foreign, force=force, read_timeout=_read_timeout(c),
            guard=_guard(c, signals, run_id), dry_run=dry_run, override_gate=override, now=when,
            new_channel=new_channel, say=cli.say))

    _channel_result(*cli.run_channel(body), json=json, markdown=markdown)


@task(help={**CHANNEL_HELP, "from_": "Channel to copy from, e.g. recommended",
            "to": "Channel to copy into, e.g. stable",
            "force": "Write even if another writer moved the target channel since amibuild read it",
            "dry_run": DRY_RUN_CHANNEL,
            "markdown": "Print a Markdown summary on stdout (what is appended to $GITHUB_STEP_SUMMARY in GitHub Actions)",
            "due": "Promote every gated channel (pipeline `channel` blocks with `from`) whose gate is met now, "
                   "for every variant; print what was promoted and what waits until when",
            "new_channel": NEW_CHANNEL.replace("The channel", "--to"), **GATE_HELP},
      auto_shortflags=False)
def promote(c, variant=None, from_=None, to=None, force=False, pipeline=None, k8s=None, profile=None, json=False,
            dry_run=False, markdown=False, due=False, override_gate=False, reason=None, now=None, new_channel=False):
    """Copy a channel's exact AMI, region by region, into another channel."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.channels import job

    from amibuild.channels.gates import check_reason
    from amibuild.cli import imagetests

    if due:
        return _promote_due(c, variant, from_, to, override_gate, pipeline, k8s, profile, json, now, markdown,
                            dry_run=dry_run, force=force, reason=reason, new_channel=new_channel)

    def body(signals):
        if not from_ or not to:
            raise SpecError("promote: give --from CHANNEL and --to CHANNEL, e.g. --from recommended --to stable")
        _plan_only(dry_run, markdown)
        override, when = check_reason(override_gate, reason), imagetests.what_if_now(now, dry_run=dry_run)
        opts = _channel_options(c, pipeline, variant, k8s, profile)
        pipe, var = cli.channel_variant(opts, variant)
        return job.promote(job.PromoteSettings(profile=opts.profile, pipeline=pipe, variant=var, source=from_,
                                               target=to, force=force, read_timeout=_read_timeout(c),
                                               guard=_guard(c, signals), dry_run=dry_run, override_gate=override,
                                               now=when, new_channel=new_channel, say=cli.say))

    result, signals = cli.run_channel(body)
    line = promote_line(_channel_options(c, pipeline, variant, k8s, profile), result)  # amibuild/cli/inventory.py
    if line:
        cli.say(line)
    _channel_result(result, signals, json=json, markdown=markdown)


def _promote_due(c, variant, from_, to, override_gate, pipeline, k8s, profile, json, now, markdown=False, *,
                 dry_run=False, force=False, reason=None, new_channel=False):
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.aws import Aws
    from amibuild.channels import due
    from amibuild.cli import imagetests
    from amibuild.pipeline.options import load_pipeline

    def body(signals):
        if from_ or to or override_gate or reason or new_channel:  # every flag honoured or refused
            raise SpecError("promote --due follows the pipeline's gates: leave out --from, --to, --override-gate, "
                            "--reason and --new-channel")
        when = imagetests.what_if_now(now, dry_run=dry_run)
        opts = cli.options(c, pipeline=pipeline, variant=[variant] if variant else None, k8s=k8s, profile=profile)
        pipe = load_pipeline(opts)
        return due.promote_due(Aws(profile=opts.profile, region=pipe.build_region), pipe, now=when,
                               guard=lambda: _guard(c, signals), say=cli.say, dry_run=dry_run, force=force)

    items, _ = cli.run_channel(body)
    if json:
        cli.emit_json([i.to_dict() for i in items])
    elif not markdown:
        cli.lines_out((["promote --due (dry run: nothing written)"] if dry_run else []) + due.lines(items))
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
        _plan_only(dry_run, markdown)
        version = values.optional_count(to_version, "--to-version", example=3)
        opts = _channel_options(c, pipeline, variant, k8s, profile)
        pipe, var = cli.channel_variant(opts, variant)
        return job.rollback(job.RollbackSettings(profile=opts.profile, pipeline=pipe, variant=var, channel=channel,
                                                 to_version=version, force=force, read_timeout=_read_timeout(c), guard=_guard(c, signals),
                                                 dry_run=dry_run, say=cli.say))

    _channel_result(*cli.run_channel(body), json=json, markdown=markdown)


@task(help={**CHANNEL_HELP, "channel": "Only this channel (default: every channel of the variant)",
            "region": "Only this region (default: every target region of the pipeline)"},
      auto_shortflags=False)
def history(c, variant=None, channel=None, region=None, pipeline=None, k8s=None, profile=None, json=False):
    """Show a variant's channel history: version, time, AMI, fingerprint, run id, who wrote it."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.channels import known
    from amibuild.channels import read as channel_status

    def body():
        aws, pipe, var = cli.channel_target(_channel_options(c, pipeline, variant, k8s, profile), variant)
        if channel:  # a typo would show an empty table and exit 0
            known.require(aws, pipe, [var], known.Asked(channel), regions=(region,) if region else None)
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
        splits = repair_mod.check(aws, pipeline=pipe, seconds=_channel_deadline(c))
        if not repair:
            return splits, []
        return splits, repair_mod.repair_all(aws, pipeline=pipe, splits=splits, guard=_guard(c, signals))

    if repair:
        (splits, repaired), signals = cli.run_channel(body)
    else:
        splits, repaired = cli.run(body)
    if json:
        cli.emit_json({"split": [s.to_dict() for s in splits],
                       "repaired": [{"channel": o.split.channel, "variant": o.split.variant, "build": o.done.choice.build,
                                     "why": o.done.choice.why, "result": o.done.result.to_dict()}
                                    for o in repaired if o.done is not None],
                       **({"channels": [o.to_dict() for o in repaired]} if repair else {})})
    elif not (markdown and not repair):
        # --repair: a line (or more) for every split channel, in the order handled, moved or not
        lines = [s.describe() for s in splits] if not repair else [x for o in repaired for x in repair_mod.outcome_lines(o)]
        cli.lines_out(lines or ["every channel is whole: each region holds an image of the same build"])
    if repair:
        verdict = repair_mod.repair_verdict(repaired, signal=signals.name, exit_code=signals.exit_code)
        if verdict is not None:
            def stop() -> None:
                raise verdict

            cli.run(stop)
        return
    summary.publish(summary.channel_check_markdown(splits), to_stdout=markdown)
    if splits:
        def split() -> None:
            raise ChannelSplit(f"{len(splits)} channel(s) split across regions; "
                               "`amibuild channels --repair` brings each to one build")

        cli.run(split)


def _listing(channel_status, gateway):
    aws, pipe = gateway()
    return channel_status.with_safeguards(aws, channel_status.channels(aws, pipeline=pipe))
