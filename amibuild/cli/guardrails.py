"""`amibuild allowed-amis`: the Allowed AMIs criteria that admit this pipeline's images, and how to
apply them in consumer accounts (`amibuild.handoff.consumer`; `doctor --consumer` runs its other job
from the doctor task). The task turns its flags into the job's frozen request and prints the result.
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
    cli.show(result, r.json)
