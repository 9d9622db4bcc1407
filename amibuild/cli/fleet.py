"""`amibuild fleet` and `amibuild karpenter`: who runs which image, and the Karpenter hand-off.

The tasks live here (tasks.py adds them to the collection) so that their flags sit beside the
few lines that turn them into calls: `fleet_view` (flags → gather → classify) and the check.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from invoke import task

from amibuild.cli import run as cli

FLEET_HELP = {
    "variant": "Only consumers and channels of this variant (default: every one)",
    "channel": "Only this channel (default: every one)",
    "region": "Only this region (default: every target region of the pipeline)",
    "json": "Print the view as JSON on stdout",
    "markdown": "Print the view as a Markdown summary on stdout (as written to $GITHUB_STEP_SUMMARY)",
    "check_behind": "Exit 1, naming them, when any consumer is more than N versions (or Nd days) behind its "
                    "channel, or orphaned: for a scheduled CI job",
    "pipeline": "Pipeline file (default: amibuild.hcl in the current folder or above)",
    "profile": "AWS profile (default: AWS_PROFILE / the standard chain)",
}


def fleet_view(options: Any, *, variant: str | None = None, channel: str | None = None, region: str | None = None,
               now: datetime | None = None, aws: Any = None) -> Any:
    """`amibuild fleet`: flags → gather (read-only) → classify."""
    from amibuild.aws import Aws
    from amibuild.cli.commands import load_pipeline
    from amibuild.lifecycle import fleet
    from amibuild.pipeline.naming import check_channel

    if channel:
        check_channel(channel)
    pipeline = load_pipeline(options)
    regions = (region,) if region else pipeline.target_regions
    if aws is None:
        aws = Aws(profile=options.profile, region=pipeline.build_region)
    facts = fleet.gather(aws, pipeline, regions)
    return fleet.classify(facts, now or datetime.now(timezone.utc), variant=variant, channel=channel, region=region)


@task(help=FLEET_HELP, auto_shortflags=False)
def fleet(c, variant=None, channel=None, region=None, json=False, markdown=False, check_behind=None, pipeline=None,
          profile=None):
    """Show every channel and every consumer of its images (stacks, node groups, instances) and how far behind."""
    from amibuild.cli import summary
    from amibuild.lifecycle import fleet as fleet_mod

    limit = cli.run(lambda: fleet_mod.Limit.parse(check_behind)) if check_behind not in (None, "") else None
    opts = cli.options(c, pipeline=pipeline, profile=profile, variant=[variant] if variant else None)
    view = cli.run(lambda: fleet_view(opts, variant=variant, channel=channel, region=region))
    if json:
        cli.emit_json(view.to_dict())
    elif not markdown:
        cli.lines_out(fleet_mod.report_lines(view))
    summary.publish(summary.fleet_markdown(view), to_stdout=markdown)
    cli.run(lambda: view.check(limit))
