"""The sandbox build: a pure rewrite of a real build (`amibuild.render.Build`) for the local emulator.

Render always produces the real build for the target its caller gives. Against the emulator there
is no instance to connect to, so the sandbox owns the rewrite it needs.

Why it is built this way: docs/dev/decisions.md.
`platform` is what the CLI selects with AMIBUILD_TARGET=sandbox (`amibuild.cli.target`), handed in
through `amibuild.jobs.platform`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from amibuild import hcl
from amibuild import render
from amibuild.sandbox import standin_store as standin  # the names only: not the stand-in runner
from amibuild.pipeline import imagetests
from amibuild.jobs.platform import Platform, endpoint_of
from amibuild.render import Build, Provisioner, ProvisionerKind, Target

SANDBOX_POLLING = (1, 30)  # seconds between polls, attempts: the emulator answers at once
SANDBOX_POLL_SECONDS = 0.1  # between Run Command polls of a boot test
NOTE = ("sandbox build (AMIBUILD_TARGET=sandbox): communicator \"none\"; provisioners that need a "
        "connection to the instance are shown, not run")
PYTHON_ENV = "AMIBUILD_PYTHON"  # the Python the stand-in step runs amibuild.sandbox.image_standin with
_STANDIN_INLINE = (f'if [ -z "${PYTHON_ENV}" ]; then echo "amibuild sandbox: stage 1 checks not run: this build '
                   f'was not started by amibuild ({PYTHON_ENV} is not set)"; exit 0; fi; '
                   f'exec "${PYTHON_ENV}" -m amibuild.sandbox.image_standin "$AMIBUILD_ROOT"')


@dataclass(frozen=True)
class SandboxTarget:
    """What a sandbox build needs from where it runs: the emulator's endpoint, the Python that runs
    the stand-in step, and the folder stand-ins are kept in for the boot test."""

    endpoint: str
    python: str
    store: str


def platform(env: Mapping[str, str], *, python: str = sys.executable) -> Platform:
    """The sandbox's platform (what `AMIBUILD_TARGET=sandbox` selects): the emulator's endpoint,
    this transform, and short Run Command polls (the emulator answers at once)."""
    endpoint = endpoint_of(env) or ""
    where = SandboxTarget(endpoint, python, str(standin.store(env)))
    return Platform(name="sandbox", target=Target(endpoint or None), poll_seconds=SANDBOX_POLL_SECONDS,
                    transform=functools.partial(sandboxed, where=where))


def sandboxed(build: Build, *, where: SandboxTarget) -> Build:
    """The sandbox build of ``build`` (a real build). Pure: its files are a function of the two."""
    real = render.finish(build)
    ours = (ProvisionerKind.STEP, ProvisionerKind.SCRIPT)
    # the image's stand-in: the real chain, which the last step rehearses
    instance = {f"{standin.STANDIN_DIR}/{name}": text for name, text in real.files.items()
                if name.endswith(".hcl") and "/" not in name}
    return dataclasses.replace(
        build,
        target=Target(where.endpoint, communicator="none", polling=SANDBOX_POLLING),
        early=tuple(echo(p) for p in build.early),
        late=(*(echo(p) for p in build.late if p.kind in ours), standin_step(build)),
        shipped=MappingProxyType({**build.shipped, render.CHECKS_SCRIPT: render.checks_script(build.variant),
                                  standin.CHECKS_LIST: checks_list(build.variant)}),
        remote_steps=False,
        extra_files=MappingProxyType({**build.extra_files, **instance}),
        notes=(*build.notes, NOTE),
        packer_env=MappingProxyType({**build.packer_env, PYTHON_ENV: where.python, standin.STORE_ENV: where.store}),
        real=real,
    )


def checks_list(variant: Any) -> str:
    """The variant's checks of the build instance as JSON (name, command, timeout, stage: stage 1's
    "build", the clean-up's "hygiene"), for the stand-in to run one by one in their steps' places."""
    return json.dumps([{"name": c.name, "command": c.command, "timeout": c.timeout, "stage": stage}
                       for stage in ("build", imagetests.HYGIENE)
                       for c in imagetests.check_set(variant, stage=stage).checks], indent=2) + "\n"


def echo(provisioner: Provisioner) -> Provisioner:
    """A shell-local step in place of ``provisioner`` that prints what would have run, values included."""
    return dataclasses.replace(provisioner, block=echo_block(provisioner.name, provisioner.env))


def echo_block(script: str, env: Sequence[tuple[str, str]]) -> hcl.Block:
    """A shell-local step that prints what would have run, values included.

    Values reach the shell only as environment variables (Packer's shell-local quotes each one) and
    are expanded inside double quotes, so a value holding quotes, `$(...)`, backticks, `;` or a
    newline is printed, never run. The inline text itself is fixed: no value is ever part of it.
    """
    names = [name for name, _ in env]
    inline = "printf '%s\\n' \"amibuild sandbox: no instance to connect to; would run $AMIBUILD_STEP\""
    inline += "".join(f' "  {name}=${name}"' for name in names)
    block = hcl.Block("provisioner", ("shell-local",))
    block.attr("environment_vars", [f"AMIBUILD_STEP={script}",
                                    *(hcl.template([f"{name}=", hcl.Expr(expr)]) for name, expr in env)])
    block.attr("inline", [inline])
    return block


def standin_step(build: Build) -> Provisioner:
    """The last step: rehearse the real chain under instance/ with the checks last, in a throwaway
    copy of this machine, failing the Packer build when a check fails. With stage 1 off it only
    keeps the image's stand-in for the boot test. The Python comes from Packer's environment
    (`packer_env`), not from the files."""
    block = hcl.Block("provisioner", ("shell-local",))
    block.attr("environment_vars", [hcl.template(["AMIBUILD_ROOT=", hcl.Expr("path.root")]),
                                    f"AMIBUILD_RUN_CHECKS={str(build.variant.test_on_build).lower()}"])
    block.attr("inline", [_STANDIN_INLINE])
    return Provisioner(ProvisionerKind.CHECKS, Path(render.CHECKS_SCRIPT).name, (), block)


def render_for_env(pipeline: Any, variant: Any, *, env: Mapping[str, str], **kwargs: Any) -> render.Rendered:
    """One variant's sandbox build, as the CLI renders it with AMIBUILD_TARGET=sandbox in ``env``: the
    real build for the emulator's target, then this transform. ``kwargs`` are `render.render_build`'s others."""
    chosen = platform(env)
    return render.finish(chosen.transform(render.render_build(pipeline, variant, target=chosen.target, **kwargs)))
