"""`amibuild allowed-amis`: the Allowed AMIs criteria that admit this pipeline's images, and how to
apply them in consumer accounts. `doctor --consumer` runs `amibuild.handoff.consumer` from the
doctor task (tasks_setup). The task turns its flags into the job's frozen request and prints the result.
"""

from __future__ import annotations

from invoke import task

from amibuild.cli import run as cli
from amibuild.cli import values

ALLOWED_HELP = {
    "provider": "The build account's id, the image provider the criteria name (default: the caller's account)",
    "max_days_since_created": "Also require images younger than this many days (CreationDateCondition)",
    "max_days_since_deprecated": "Also refuse images deprecated more than this many days ago (DeprecationTimeCondition)",
    "json": "Print the criteria, the CLI commands and the CloudFormation template as JSON",
    "pipeline": "Pipeline file (default: amibuild.hcl in the current folder or above)",
    "profile": "AWS profile of the build account (default: AWS_PROFILE / the standard chain)",
}


def _days(value, flag):
    return None if value in (None, "") else values.count(value, flag, minimum=0, maximum=36500, example=180)


@task(help=ALLOWED_HELP, auto_shortflags=False)
def allowed_amis(c, provider="", max_days_since_created=None, max_days_since_deprecated=None, json=False,
                 pipeline=None, profile=None):
    """Print the Allowed AMIs criteria that admit this pipeline's images, with the CLI and CloudFormation to apply them."""
    from amibuild.handoff import consumer  # deferred: boto3 behind it, not on the `amibuild --list` path

    opts = cli.options(c, pipeline=pipeline, profile=profile, announce=False)
    result = cli.run(lambda: consumer.run_allowed_amis(consumer.AllowedAmisRequest(
        opts, provider or "", _days(max_days_since_created, "--max-days-since-created"),
        _days(max_days_since_deprecated, "--max-days-since-deprecated"))))  # bad days: exit 2, before any AWS call
    if json:
        cli.emit_json(result.to_dict())
    else:
        cli.lines_out(result.lines())
    cli.finish(result)


def doctor_consumer(opts, channel: str, build_profile: str, json: bool) -> None:
    """`doctor --consumer`: the consumer account's checks, printed, then the verdict (exit 1 on a failure)."""
    from amibuild.handoff import consumer  # deferred: boto3 behind it, not on the `amibuild --list` path

    result = cli.run(lambda: consumer.run_consumer(consumer.ConsumerRequest(opts, channel or "", build_profile or "")))
    if json:
        cli.emit_json(result.to_dict())
    else:
        cli.lines_out(result.lines())
    cli.finish(result)
