"""The tasks that set a machine up or show the tool: sandbox, init, demo and doctor.

The bodies of the tasks `amibuild.cli.tasks` lists; their requests: `amibuild.cli.requests_setup`.
"""

from __future__ import annotations

from pathlib import Path

from amibuild.cli import doctor as doctor_mod
from amibuild.cli import run as cli
from amibuild.cli.requests_setup import DemoRequest, DoctorRequest, InitFlags, SandboxRequest
from amibuild.cli.tasks_common import Scope, options
from amibuild.handoff import consumer
from amibuild.jobs import init_job


def sandbox(c, r: SandboxRequest):
    from amibuild import sandbox as sandbox_mod  # deferred: the sandbox extra (moto)

    cli.run(lambda: sandbox_mod.serve_foreground(port=r.port or 0))


def init(c, r: InitFlags):
    cli.show(cli.run(lambda: init_job.run(init_job.InitRequest(Path.cwd(), ci=r.ci, here=r.here))), r.json)


def demo(c, r: DemoRequest):
    from amibuild.sandbox.demo import run_demo  # deferred: the sandbox extra (moto)

    cli.run(run_demo)


def doctor(c, r: DoctorRequest):
    opts = options(c, Scope(r.pipeline, profile=r.profile), announce=False)
    if r.consumer:  # the consumer account's checks (run with its credentials)
        request = consumer.ConsumerRequest(opts, r.channel or "", r.build_profile or "")
        return cli.show(cli.run(lambda: consumer.run_consumer(request)), r.json)
    report = cli.run(lambda: doctor_mod.checks(opts))
    cli.show(report, r.json, data=lambda x: x.to_list())
