"""The tasks that set a machine up or show the tool: sandbox, init, demo and doctor.

Part of the task table `amibuild.cli.tasks` assembles (its docstring says how flags and
imports are kept fast).
"""

from dataclasses import dataclass
from functools import partial
from pathlib import Path

from amibuild.cli import values
from amibuild.cli import run as cli
from amibuild.cli.command import command, flag, like
from amibuild.cli.guardrails import doctor_consumer
from amibuild.cli.tasks_common import Output, Scope, Selection


@dataclass(frozen=True)
class SandboxRequest:
    """`amibuild sandbox`."""

    port: int = flag("Port on 127.0.0.1 (default: a free one)", cast=partial(values.count, minimum=0, maximum=65535,
                                                                            example=4566))


@command(SandboxRequest, shortflags=True)
def sandbox(c, r: SandboxRequest):
    """Run the local AWS emulator in the foreground (prints `export` lines first)."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild import sandbox as sandbox_mod


    cli.run(lambda: sandbox_mod.serve_foreground(port=r.port or 0))


@dataclass(frozen=True)
class InitFlags:
    """`amibuild init` (the job's own request is `amibuild.cli.init.InitRequest`)."""

    json: bool = flag("Print what was written as JSON on stdout", False)
    ci: str = flag("Also write a CI workflow for this repository: github (.github/workflows/amibuild.yml at the "
                   "repository root: nightly build-ami --boot-test, promote --due, channels --check)", "")
    here: bool = flag("Write the pipeline file here even though a parent folder of this repository has one "
                      "(commands run here then find this one)", False)


@command(InitFlags)
def init(c, r: InitFlags):
    """Write a starter amibuild.hcl (one AL2023 variant with ceph-common) and ignore build/ in .gitignore."""

    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.cli import init as init_mod

    result = cli.run(lambda: init_mod.run(init_mod.InitRequest(Path.cwd(), ci=r.ci, here=r.here)))
    if r.json:
        cli.emit_json(result.to_dict())
    else:
        cli.lines_out(result.lines())


@dataclass(frozen=True)
class DemoRequest:
    """`amibuild demo`: no flags."""


@command(DemoRequest)
def demo(c, r: DemoRequest):
    """Run the whole pipeline against the local emulator, printing each step (the README demo)."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.sandbox.demo import run_demo

    cli.run(run_demo)


@dataclass(frozen=True)
class DoctorRequest:
    """`amibuild doctor` (its checks are `amibuild.cli.doctor.checks`; with --consumer,
    `amibuild.handoff.consumer.ConsumerRequest`)."""

    pipeline: str | None = like(Selection, "pipeline")
    profile: str | None = like(Output, "profile")
    json: bool = flag("Print the checks as JSON on stdout", False)
    consumer: bool = flag("Check a consumer account instead (run with its credentials): its Allowed AMIs settings "
                          "admit the channel's images, block public access is on, the images and their keys are "
                          "usable", False)
    channel: str = flag("With --consumer: the channel whose images to check (default: the pipeline's default "
                        "channel)", "")
    build_profile: str = flag("With --consumer: the build account's AWS profile, to read the channel and the "
                              "images' launch permissions (default: the consumer's credentials)", "")


@command(DoctorRequest)
def doctor(c, r: DoctorRequest):
    """Check packer, AWS credentials, region, endpoint and the pipeline file; say what to fix."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.cli import doctor as doctor_mod

    opts = cli.options(c, Scope(r.pipeline, profile=r.profile), announce=False)
    if r.consumer:
        return doctor_consumer(opts, r.channel, r.build_profile, r.json)
    results = cli.run(lambda: doctor_mod.checks(opts))
    if r.json:
        cli.emit_json([check.to_dict() for check in results])
    else:
        print("\n".join(doctor_mod.lines(results)))
    cli.run(lambda: doctor_mod.verdict(results))
