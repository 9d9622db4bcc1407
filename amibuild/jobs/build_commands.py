"""The build commands besides build-ami and test-ami: render, validate, rehearse, the runs and their
clean-up, the CI matrix and the image tests' listing.

Each is `command(request, env) -> Shown`: its request (`amibuild.jobs.requests_build`) as the cli
parsed it, the job's `Env`, and what it prints and exits with.
"""

from __future__ import annotations

from amibuild.bake import prepare, record
from amibuild.jobs.env import Env, Scope, options, target
from amibuild.jobs.requests_build import CleanRunRequest, MatrixRequest, RehearseRequest, RenderRequest, RunsRequest, TestsRequest
from amibuild.jobs.shown import Shown
from amibuild.lifecycle import clean
from amibuild.pipeline import matrix as matrix_mod
from amibuild.pipeline.options import load_pipeline
from amibuild.rehearse import rehearsal_report, rehearse_job
from amibuild.views import report, summary


def render(r: RenderRequest, env: Env) -> Shown:
    result = prepare.render(options(env, r), env.say, **target(env))
    for note in result.notes:
        env.say(f"note: {note}")
    return Shown(result, lines=report.render_lines)


def validate(r: RenderRequest, env: Env) -> Shown:
    result = prepare.validate(options(env, r), env.say, **target(env))
    return Shown(result, data=lambda x: {
        "packer_version": x.packer_version, "valid": x.checked, "directories": [str(d) for d in x.directories]},
        lines=lambda x: [f"{len(x.checked)} variant(s) valid with packer {x.packer_version}: {', '.join(x.checked)}"])


def rehearse(r: RehearseRequest, env: Env) -> Shown:
    job = rehearse_job.Rehearse(options(env, r), keep=r.keep, timeout=r.timeout, allow_incomplete=r.allow_incomplete)
    return Shown(rehearse_job.run(job, env.say), data=lambda x: [one.to_dict() for one in x.reports],
                 lines=lambda x: [line for one in x.reports for line in rehearsal_report.lines(one)],
                 summary=lambda x: summary.rehearse_markdown(x.reports))


def runs(r: RunsRequest, env: Env) -> Shown:
    records = record.list_runs(options(env, Scope(build_dir=r.build_dir), announce=False).build_dir, r.limit)
    return Shown(records, data=lambda x: [one.to_dict() for one in x], text="\n".join(report.runs_lines(records)) + "\n")


def clean_run(r: CleanRunRequest, env: Env) -> Shown:
    opts = options(env, Scope(r.pipeline, profile=r.profile, build_dir=r.build_dir))
    return Shown(clean.run(clean.settings(opts, r.run_id, dry_run=r.dry_run)), lines=report.clean_lines)


def matrix(r: MatrixRequest, env: Env) -> Shown:
    value = matrix_mod.matrix(load_pipeline(options(env, Scope(r.pipeline, r.variant))))
    written = matrix_mod.github_output(value) if r.github else None
    return Shown(value, data=lambda x: x, text=(written or "\n".join(matrix_mod.table(value))) + "\n")


def tests(r: TestsRequest, env: Env) -> Shown:
    entries = report.tests_listing(load_pipeline(options(env, Scope(r.pipeline, r.variant))))
    return Shown(entries, data=lambda x: x, lines=report.tests_listing_lines)
