"""`amibuild verify`: check the signed statements about a channel's images, or one image.

The task lives here (tasks.py adds it to the collection): it turns its flags into the call of its
job (`amibuild.jobs.verify_job.verify_report`, rendering today's file for the platform AMIBUILD_TARGET
names), prints the report and exits as it says.
"""

from __future__ import annotations

from amibuild.channels import channel_verify as verify_mod
from amibuild.cli import run as cli
from amibuild.cli.requests_views import VerifyRequest
from amibuild.cli.target import platform
from amibuild.cli.tasks_common import scope_options
from amibuild.jobs.verify_job import verify_report


def verify(c, r: VerifyRequest):
    opts = scope_options(c, r)
    report, why_not = cli.run(lambda: verify_report(opts, ami=r.ami, variant=r.variant, channel=r.channel,
                                                    region=r.region, platform=platform))
    cli.show(report, r.json, data=lambda x: {**x.to_dict(), "today_not_rendered": why_not or None},
             lines=lambda x: verify_mod.lines(x) + ([f"  ({why_not})"] if why_not else []))
