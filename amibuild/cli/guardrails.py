"""`amibuild allowed-amis`: the Allowed AMIs criteria that admit this pipeline's images, and how to
apply them in consumer accounts. `doctor --consumer` runs `amibuild.handoff.consumer` from the
doctor task (tasks_setup). The task turns its flags into the job's frozen request and prints the result.
"""

from __future__ import annotations

from dataclasses import dataclass

from amibuild.cli import run as cli
from amibuild.cli import values
from amibuild.cli.command import Scope, command, flag

PIPELINE_HELP = "Pipeline file (default: amibuild.hcl in the current folder or above)"


def _days(value, flag):
    return None if value in (None, "") else values.count(value, flag, minimum=0, maximum=36500, example=180)


@dataclass(frozen=True)
class AllowedAmisFlags:
    """`amibuild allowed-amis` (the job's own request is `amibuild.handoff.consumer.AllowedAmisRequest`)."""

    provider: str = flag("The build account's id, the image provider the criteria name (default: the caller's "
                         "account)", "")
    max_days_since_created: int | None = flag("Also require images younger than this many days "
                                              "(CreationDateCondition)", cast=_days)
    max_days_since_deprecated: int | None = flag("Also refuse images deprecated more than this many days ago "
                                                 "(DeprecationTimeCondition)", cast=_days)
    json: bool = flag("Print the criteria, the CLI commands and the CloudFormation template as JSON", False)
    pipeline: str | None = flag(PIPELINE_HELP)
    profile: str | None = flag("AWS profile of the build account (default: AWS_PROFILE / the standard chain)")


@command(AllowedAmisFlags)
def allowed_amis(c, r: AllowedAmisFlags):
    """Print the Allowed AMIs criteria that admit this pipeline's images, with the CLI and CloudFormation to apply them."""
    from amibuild.handoff import consumer  # deferred: boto3 behind it, not on the `amibuild --list` path

    opts = cli.options(c, Scope(r.pipeline, profile=r.profile), announce=False)
    result = cli.run(lambda: consumer.run_allowed_amis(consumer.AllowedAmisRequest(
        opts, r.provider, r.max_days_since_created, r.max_days_since_deprecated)))  # bad days: exit 2 at parse
    if r.json:
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
