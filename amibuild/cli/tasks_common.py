"""What the task bodies not yet jobs share: `amibuild.jobs.env` read from invoke's context."""

from __future__ import annotations

from typing import Any, Callable

from amibuild.cli.command import make_env
from amibuild.jobs import env as envs
from amibuild.jobs.env import Scope, channel_variant  # noqa: F401 - the bodies' names
from amibuild.pipeline.options import Options


def options(c: Any, request: Any, *, announce: bool = True) -> Options:
    return envs.options(make_env(c), request, announce=announce)


def scope_options(c, request, *, announce: bool = True) -> Options:
    return envs.scope_options(make_env(c), request, announce=announce)


def _target() -> dict:
    return envs.target(make_env(None))


def config_number(c, key: str, default: Any, read: Callable[[Any, str], Any]) -> Any:
    return envs.config_number(make_env(c), key, default, read)


def _guard(c, signals=None, run_id=None):
    return envs.guard(make_env(c).with_signals(signals), run_id)


def _channel_deadline(c) -> float | None:
    return envs.channel_deadline(make_env(c))


def _read_timeout(c):
    return envs.read_timeout(make_env(c))
