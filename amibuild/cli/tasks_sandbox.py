"""The bodies of the two tasks that run the local AWS emulator, kept in the cli (the product never
names it): sandbox (in the foreground) and demo (the whole pipeline against it, the README demo).
"""

from __future__ import annotations

from amibuild import sandbox as sandbox_mod
from amibuild.sandbox.demo import run_demo


def sandbox(c, r):
    sandbox_mod.serve_foreground(port=r.port or 0)  # moto, the sandbox extra, is imported only now


def demo(c, r):
    run_demo()
