"""The one place the CLI chooses where the work runs: ``AMIBUILD_TARGET``.

``aws`` (the default) is real AWS, through AWS_ENDPOINT_URL* if set. ``sandbox`` is the local
emulator's platform (`amibuild.sandbox.transform.platform`); `amibuild sandbox` exports it. Nothing
is guessed from the endpoint: a proxy on this machine in front of real AWS is still AWS.
"""

from __future__ import annotations

import os
from typing import Mapping

from amibuild.errors import SpecError
from amibuild.jobs import platform as platforms
from amibuild.sandbox import transform as sandbox

TARGET_ENV = "AMIBUILD_TARGET"
SANDBOX = "sandbox"


def platform(env: Mapping[str, str] | None = None) -> platforms.Platform:
    """The platform ``env`` (default: this process's environment) names in AMIBUILD_TARGET."""
    env = os.environ if env is None else env
    name = (env.get(TARGET_ENV) or platforms.AWS).strip().lower()
    if name == platforms.AWS:
        return platforms.aws(env)
    if name == SANDBOX:
        return sandbox.platform(env)
    raise SpecError(f"{TARGET_ENV}={env.get(TARGET_ENV)!r}: one of {platforms.AWS} (real AWS, the default) "
                    f"or {SANDBOX} (the local emulator, as `amibuild sandbox` exports it)")
