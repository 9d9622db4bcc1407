"""`amibuild allowed-amis`: the Allowed AMIs criteria that admit this pipeline's images, and how to
apply them in consumer accounts. `doctor --consumer` runs `amibuild.handoff.consumer` from the
doctor task (tasks_setup). The task turns its flags into the job's frozen request and prints the result.
"""

from __future__ import annotations

from amibuild.cli import run as cli
from amibuild.cli.requests_views import AllowedAmisFlags
from amibuild.cli.tasks_common import Scope, options
from amibuild.handoff import consumer

PIPELINE_HELP = "Pipeline file (default: amibuild.hcl in the current folder or above)"


def allowed_amis(c, r: AllowedAmisFlags):
    opts = options(c, Scope(r.pipeline, profile=r.profile), announce=False)
    result = cli.run(lambda: consumer.run_allowed_amis(consumer.AllowedAmisRequest(
        opts, r.provider, r.max_days_since_created, r.max_days_since_deprecated)))  # bad days: exit 2 at parse
    if r.json:
        cli.emit_json(result.to_dict())
    else:
        cli.lines_out(result.lines())
    cli.finish(result)


def doctor_consumer(opts, channel: str, build_profile: str, json: bool) -> None:
    """`doctor --consumer`: the consumer account's checks, printed, then the verdict (exit 1 on a failure)."""

    result = cli.run(lambda: consumer.run_consumer(consumer.ConsumerRequest(opts, channel or "", build_profile or "")))
    if json:
        cli.emit_json(result.to_dict())
    else:
        cli.lines_out(result.lines())
    cli.finish(result)
