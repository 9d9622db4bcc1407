"""What a command's job gets besides its request: `Env`, made once by the cli from its config, the
pipeline file it found and the platform it was told to use; and what every job reads from it: its
`Options`, the channel lease settings and the numbers of the config.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from amibuild import values
from amibuild.errors import SpecError
from amibuild.jobs.requests_build import BuildRequest, Selection
from amibuild.lease import LEASE_TTL, LEASE_WAIT, Guard
from amibuild.locate import Found, find_pipeline
from amibuild.pipeline import Overrides
from amibuild.pipeline.options import Options, load_pipeline

if TYPE_CHECKING:
    from amibuild.jobs.platform import Platform


def _quiet(line: str) -> None:
    return None


@dataclasses.dataclass(frozen=True)
class Env:
    """The config's `amibuild:` section (``config``) and where it is read from (``prefix``: `amibuild`,
    or `invoke` in this repository), the pipeline file the program found, the platform AMIBUILD_TARGET
    names (asked for when a job needs it), how to say a line on stderr (``say``) and a note that waits
    until the command says something (``pending``), and the signals held while channels are written."""

    config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    prefix: str = "amibuild"
    found: Found | None = None
    platform: Callable[[], Platform] | None = None
    say: Callable[[str], None] = _quiet
    pending: Callable[[str], None] = _quiet
    signals: Any = None
    hints: Mapping[str, str] = dataclasses.field(default_factory=dict)  # doctor's `doctor_job.Hints`, from the cli

    def with_signals(self, signals: Any) -> Env:
        return dataclasses.replace(self, signals=signals)


@dataclasses.dataclass(frozen=True)
class Scope:
    """What selects the pipeline file and its variants, for a request that is not a `Selection`."""

    pipeline: str | None = None
    variant: str | tuple[str, ...] | None = None
    k8s: str | None = None
    profile: str | None = None
    build_dir: str | None = None


def overrides(request: Selection | Scope) -> Overrides:
    """The flags that select and change the pipeline's variants: a `Selection`'s every one, a
    `Scope`'s variant and Kubernetes version."""
    if isinstance(request, Selection):
        return Overrides(
            variants=request.variant, all_variants=isinstance(request, BuildRequest) and request.all,
            base=request.base or "", upstream=request.upstream or "", upstream_ref=request.upstream_ref or "",
            os=request.os or "", kubernetes_version=request.k8s or "", arch=request.arch or "",
            flavor=request.flavor or "", regions=request.region, extra_packages=request.extra_pkg,
            extra_repos=request.extra_repo, variables=request.var, var_files=request.var_file)
    variants = request.variant if isinstance(request.variant, tuple) else (request.variant,) if request.variant else ()
    return Overrides(variants=variants, kubernetes_version=request.k8s or "")


def options(env: Env, request: Selection | Scope, *, announce: bool = True) -> Options:
    """A request + the config -> `pipeline.options.Options`.

    Without --pipeline (or the config's `pipeline`), the pipeline file is the nearest
    `amibuild.hcl` from the current folder upwards; none found means flags alone, said once on
    stderr when ``announce``. A relative build folder from the config (default `build`) lies
    beside the pipeline file; --build-dir is taken as given.
    """
    pipeline = request.pipeline or env.config.get("pipeline") or None
    if not pipeline:
        found = env.found
        if found is None or found.searched[0] != Path(os.getcwd()).resolve():  # not the Program's, or moved
            found = find_pipeline(os.getcwd())
        if found.path is not None:
            pipeline = os.path.relpath(found.path)
        elif announce:
            env.pending(found.not_found_note())
    build_dir = getattr(request, "build_dir", None)  # a Scope's, or an `Output`'s flag
    if not build_dir:
        build_dir = str(env.config.get("build_dir") or "build")
        if pipeline and not os.path.isabs(build_dir):
            build_dir = os.path.relpath(os.path.join(os.path.dirname(os.path.abspath(pipeline)), build_dir))
    profile = getattr(request, "profile", None) or os.environ.get("AWS_PROFILE") or None
    return Options(pipeline_file=pipeline, overrides=overrides(request), build_dir=build_dir,
                   packer=env.config.get("packer") or "packer", profile=profile,
                   cache_dir=env.config.get("cache_dir") or None)


def scope_options(env: Env, request: Any, *, announce: bool = True) -> Options:
    """`Options` from the request's pipeline, variant, k8s and profile only: a task's --region or --os
    is its own (a stack's region, a node's OS), not a selection of the pipeline's."""
    return options(env, Scope(getattr(request, "pipeline", None), getattr(request, "variant", None),
                              getattr(request, "k8s", None), getattr(request, "profile", None)), announce=announce)


def one_variant(options: Options, what: str):
    """(Pipeline, Variant) of a command that acts on one variant: the one --variant names, else the
    pipeline's only one; ``what`` says whose (exit 2 naming the variants when there are more)."""
    pipeline = load_pipeline(options)
    if len(pipeline.variants) != 1:
        names = [v.name for v in pipeline.variants]
        raise SpecError(f"--variant: name the variant {what}, one of {', '.join(names)}, e.g. --variant {names[0]}")
    return pipeline, pipeline.variants[0]


def target(env: Env) -> dict:
    """What the builds are rendered for: the platform's target and transform, as keyword arguments of
    the render, validate and build jobs."""
    chosen = env.platform()
    return {"target": chosen.target, "transform": chosen.transform}


def config_source(env: Env, key: str) -> str:
    """Where config `amibuild.KEY` is set, as the running program reads it: `amibuild` reads
    amibuild.yaml and AMIBUILD_KEY, `invoke` in this repository invoke.yaml and INVOKE_AMIBUILD_KEY."""
    name = f"AMIBUILD_{key.upper()}" if env.prefix == "amibuild" else f"{env.prefix.upper()}_AMIBUILD_{key.upper()}"
    return f"{env.prefix}.yaml / {name}"


def config_number(env: Env, key: str, default: Any, read: Callable[[Any, str], Any]) -> Any:
    """Config `amibuild.KEY` read with `values.count` / `values.duration` (``read``), else ``default``;
    a bad value is refused naming the key and where it is set."""
    raw = env.config.get(key)
    if not values.given(raw):
        return default
    try:
        return read(raw, f"amibuild.{key}")
    except SpecError as exc:
        raise SpecError(f"{exc} (from {config_source(env, key)})") from None


def seconds(env: Env, key: str, default: Any, what: str, *, positive: bool = False) -> Any:
    """A number of seconds from config `amibuild.KEY` (amibuild.yaml / AMIBUILD_KEY), else `default`
    (returned as it is: None where the job has a default of its own)."""
    raw = env.config.get(key)
    if raw in (None, ""):
        return default
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = -1.0
    if not 0 <= value < float("inf") or (positive and value == 0):  # NaN fails both comparisons
        raise SpecError(f"amibuild.{key} {raw!r} ({config_source(env, key)}): {what}")
    return value


def guard(env: Env, run_id: str | None = None) -> Guard:
    """The channel lease settings: how long to wait for a busy channel (config `amibuild.lease_wait`),
    how long a lease is good for (`amibuild.lease_ttl`), how long the write may wait on AWS in all
    (`amibuild.channel_deadline`, default 30 s), and the signals that stop a transaction before its
    first write (``env.signals``)."""
    wait = seconds(env, "lease_wait", LEASE_WAIT, "seconds to wait for a channel another writer holds, e.g. 30")
    ttl = seconds(env, "lease_ttl", LEASE_TTL, "seconds a channel lease is good for, more than 0, e.g. 300",
                  positive=True)
    cancelled = {"cancelled": env.signals.requested} if env.signals else {}  # none held off: never cancelled
    return Guard(run_id=run_id or "", wait=wait, ttl=ttl, deadline=channel_deadline(env), **cancelled)


def channel_deadline(env: Env) -> float | None:
    """Config `amibuild.channel_deadline`: seconds of waiting on AWS a channel write may spend; None: the default."""
    return seconds(env, "channel_deadline", None, "seconds of waiting on AWS a channel write may spend, more than 0, "
                   "e.g. 30", positive=True)


def read_timeout(env: Env) -> float | None:
    """The channel client's read timeout from config `amibuild.read_timeout` (seconds), or None: the default."""
    return seconds(env, "read_timeout", None, "seconds one AWS request may wait for its answer, more than 0, e.g. 10",
                   positive=True)
