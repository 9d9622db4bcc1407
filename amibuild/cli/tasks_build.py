"""The build tasks: render, validate, build-ami, rehearse, the runs and their clean-up, the CI
matrix, and the image tests (tests, test-ami).

The bodies of the tasks `amibuild.cli.tasks` lists: each takes its frozen request
(`amibuild.jobs.requests_build`), calls into the package and prints.
"""

from __future__ import annotations

from functools import partial

from amibuild.bake import prepare, record
from amibuild import values
from amibuild.cli import run as cli
from amibuild.jobs.requests_build import (
    BuildRequest,
    CleanRunRequest,
    MatrixRequest,
    RehearseRequest,
    RenderRequest,
    RunsRequest,
    TestAmiRequest,
    TestsRequest,
)
from amibuild.cli.target import platform
from amibuild.cli.tasks_common import Scope, _guard, _read_timeout, _target, config_number, options
from amibuild.errors import SpecError
from amibuild.imagetest import boot
from amibuild.jobs import ami_test
from amibuild.jobs import build_ami as build_job
from amibuild.lifecycle import clean
from amibuild.pipeline import matrix as matrix_mod
from amibuild.pipeline.options import load_pipeline
from amibuild.rehearse import rehearsal_report as rehearse_report
from amibuild.rehearse import rehearse_job as rehearse_job
from amibuild.views import report, summary


def render(c, request: RenderRequest):
    result = prepare.render(options(c, request), cli.say, **_target())
    for note in result.notes:
        cli.say(f"note: {note}")
    cli.show(result, request.json, lines=report.render_lines, finish=False)


def validate(c, request: RenderRequest):
    result = prepare.validate(options(c, request), cli.say, **_target())
    cli.show(result, request.json, finish=False, data=lambda r: {
        "packer_version": r.packer_version, "valid": r.checked, "directories": [str(d) for d in r.directories]},
        lines=lambda r: [f"{len(r.checked)} variant(s) valid with packer {r.packer_version}: {', '.join(r.checked)}"])


def build_ami(c, request: BuildRequest):
    opts = options(c, request)
    if request.allow_incomplete and not request.rehearse:
        raise SpecError("--allow-incomplete goes with --rehearse: it lets a variant whose rehearsal stopped at a "
                        "step it cannot rehearse be built")
    read_timeout = _read_timeout(c)  # config amibuild.read_timeout: the channel requests' and SendCommand's
    job = build_job.BuildAmi(  # a bad config value: one line, exit 2 (the task runs inside cli.run)
        opts, channel=request.channel, publish=not request.no_publish, new_channel=request.new_channel,
        force=request.force, dry_run=request.dry_run, parallel=request.parallel,
        max_parallel=config_number(c, "max_parallel", 8, partial(values.count, maximum=256)),
        timeout=request.timeout, rehearse=request.rehearse, allow_incomplete=request.allow_incomplete,
        wait=not request.no_wait,
        stall_after=config_number(c, "stall_after", 10.0, values.duration),
        boot_test=_boot_test_settings(opts, request.boot_test, request.cluster, read_timeout), **_target(),
        channel_guard=_guard(c), read_timeout=read_timeout, verbose=request.verbose,
        scan=request.scan)
    run = build_job.run(job, cli.say)
    cli.show(run, request.json, markdown=request.markdown, lines=report.build_lines, summary=summary.build_markdown)


def _boot_test_settings(opts, boot_test: bool, cluster: str | None, read_timeout: float | None):
    """build-ami --boot-test [--cluster C]: the pipeline's test { ... } block with --cluster over it, and
    config `amibuild.read_timeout` for SendCommand / GetCommandInvocation, as test-ami takes it."""
    if not boot_test and not cluster:  # no boot test: none of its machinery is imported
        return None
    return cli.run(lambda: ami_test.boot_test_settings(opts, boot_test=boot_test, cluster=cluster,
                                                     read_timeout=read_timeout, poll=platform().poll_seconds))


def rehearse(c, request: RehearseRequest):
    job = rehearse_job.Rehearse(options(c, request), keep=request.keep, timeout=request.timeout,
                                allow_incomplete=request.allow_incomplete)
    result = rehearse_job.run(job, cli.say)
    cli.show(result, request.json, markdown=request.markdown, data=lambda x: [r.to_dict() for r in x.reports],
             lines=lambda x: [line for r in x.reports for line in rehearse_report.lines(r)],
             summary=lambda x: summary.rehearse_markdown(x.reports))


def runs(c, request: RunsRequest):
    records = record.list_runs(options(c, Scope(build_dir=request.build_dir), announce=False).build_dir, request.limit)
    cli.emit_json([r.to_dict() for r in records]) if request.json else print("\n".join(report.runs_lines(records)))


def clean_run(c, request: CleanRunRequest):
    opts = options(c, Scope(request.pipeline, profile=request.profile, build_dir=request.build_dir))
    result = clean.run(clean.settings(opts, request.run_id, dry_run=request.dry_run))
    cli.show(result, request.json, lines=report.clean_lines)


def matrix(c, request: MatrixRequest):
    value = cli.run(lambda: matrix_mod.matrix(load_pipeline(options(c, Scope(request.pipeline, request.variant)))))
    written = cli.run(lambda: matrix_mod.github_output(value)) if request.github else None
    cli.emit_json(value) if request.json else print(written or "\n".join(matrix_mod.table(value)))


def tests(c, request: TestsRequest):
    entries = report.tests_listing(load_pipeline(options(c, Scope(request.pipeline, request.variant))))
    cli.emit_json(entries) if request.json else cli.lines_out(report.tests_listing_lines(entries))


def test_ami(c, request: TestAmiRequest):
    opts = options(c, Scope(request.pipeline, request.variant, profile=request.profile, build_dir=request.build_dir))
    job = ami_test.TestAmi(opts, ami=request.ami, run_id=request.run_id, channel=request.channel, cluster=request.cluster,
                           subnet_id=request.subnet, security_group_id=request.security_group,
                           instance_profile=request.instance_profile, instance_type=request.instance_type,
                           read_timeout=_read_timeout(c), timeout=request.timeout)  # config amibuild.read_timeout: SendCommand's too
    result, record = ami_test.run(job, say=cli.say, poll=platform().poll_seconds)
    cli.show(result, request.json, lines=lambda r: [*boot.report_lines(r), f"record: {record}"])
