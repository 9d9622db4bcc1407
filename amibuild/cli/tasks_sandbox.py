"""The two tasks that run the local AWS emulator, kept in the cli (the product never names it):
sandbox (in the foreground) and demo (the whole pipeline against it, the README demo).

The bodies of the tasks `amibuild.cli.tasks` lists; their requests: `amibuild.jobs.requests_setup`.
"""

from __future__ import annotations

from amibuild import sandbox as sandbox_mod
from amibuild.jobs.requests_setup import DemoRequest, SandboxRequest
from amibuild.sandbox.demo import run_demo


def sandbox(c, r: SandboxRequest):
    sandbox_mod.serve_foreground(port=r.port or 0)  # moto, the sandbox extra, is imported only now


def demo(c, r: DemoRequest):
    run_demo()
