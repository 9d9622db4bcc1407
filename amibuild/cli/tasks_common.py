"""What the task bodies share: a request's pipeline options (`options`), the target the builds are
rendered for, and the channel lease and timeout settings from invoke's config."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Callable

from amibuild.cli import run as cli
from amibuild.cli import values
from amibuild.cli.requests_build import BuildRequest, Selection
from amibuild.cli.target import platform
from amibuild.errors import SpecError
from amibuild.lease import LEASE_TTL, LEASE_WAIT, Guard
from amibuild.locate import find_pipeline
from amibuild.pipeline import Overrides
from amibuild.pipeline.options import Options, load_pipeline


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


def options(c: Any, request: Selection | Scope, *, announce: bool = True) -> Options:
    """A task's request + invoke config -> `pipeline.options.Options`.

    Without --pipeline (or the config's `pipeline`), the pipeline file is the nearest
    `amibuild.hcl` from the current folder upwards; none found means flags alone, said once on
    stderr when ``announce``. A relative build folder from the config (default `build`) lies
    beside the pipeline file; --build-dir is taken as given.
    """
    config = c.config.get("amibuild", {}) if hasattr(c, "config") else {}
    pipeline = request.pipeline or config.get("pipeline") or None
    if not pipeline:
        found = getattr(c.config, "_amibuild_found", None) if hasattr(c, "config") else None
        if found is None or found.searched[0] != Path(os.getcwd()).resolve():  # not the Program's, or moved
            found = find_pipeline(os.getcwd())
        if found.path is not None:
            pipeline = os.path.relpath(found.path)
        elif announce:
            cli.pending(found.not_found_note())
    build_dir = getattr(request, "build_dir", None)  # a Scope's, or an `Output`'s flag
    if not build_dir:
        build_dir = str(config.get("build_dir") or "build")
        if pipeline and not os.path.isabs(build_dir):
            build_dir = os.path.relpath(os.path.join(os.path.dirname(os.path.abspath(pipeline)), build_dir))
    profile = getattr(request, "profile", None) or os.environ.get("AWS_PROFILE") or None
    return Options(pipeline_file=pipeline, overrides=overrides(request), build_dir=build_dir,
                   packer=config.get("packer", "packer"), profile=profile,
                   cache_dir=config.get("cache_dir") or None)


def scope_options(c, request, *, announce: bool = True) -> Options:
    """`Options` from the request's pipeline, variant, k8s and profile only: a task's --region or --os
    is its own (a stack's region, a node's OS), not a selection of the pipeline's."""
    return options(c, Scope(getattr(request, "pipeline", None), getattr(request, "variant", None),
                            getattr(request, "k8s", None), getattr(request, "profile", None)), announce=announce)


def channel_variant(options: Options, variant: str | None):
    """(Pipeline, Variant) for publish / promote / rollback / history of one variant."""
    if not variant:
        raise SpecError("--variant: name the variant whose channel this is, e.g. --variant ceph")
    pipeline = load_pipeline(options)
    return pipeline, pipeline.variants[0]


def _target() -> dict:
    """What the builds are rendered for: the target and the transform of the platform AMIBUILD_TARGET
    names (`amibuild.cli.target`), as keyword arguments of the render, validate and build jobs."""
    chosen = platform()
    return {"target": chosen.target, "transform": chosen.transform}


def config_source(c, key: str) -> str:
    """Where config `amibuild.KEY` is set, as the running program reads it: `amibuild` reads
    amibuild.yaml and AMIBUILD_KEY, `invoke` in this repository invoke.yaml and INVOKE_AMIBUILD_KEY."""
    prefix = getattr(getattr(c, "config", None), "prefix", "invoke")
    env = f"AMIBUILD_{key.upper()}" if prefix == "amibuild" else f"{prefix.upper()}_AMIBUILD_{key.upper()}"
    return f"{prefix}.yaml / {env}"


def config_number(c, key: str, default: Any, read: Callable[[Any, str], Any]) -> Any:
    """Config `amibuild.KEY` read with `values.count` / `values.duration` (``read``), else ``default``;
    a bad value is refused naming the key and where it is set."""
    raw = c.config.get("amibuild", {}).get(key)
    if not values.given(raw):
        return default
    try:
        return read(raw, f"amibuild.{key}")
    except SpecError as exc:
        raise SpecError(f"{exc} (from {config_source(c, key)})") from None


def _seconds(c, key, default, what, *, positive=False):
    """A number of seconds from config `amibuild.KEY` (amibuild.yaml / AMIBUILD_KEY), else `default`
    (returned as it is: None where the job has a default of its own)."""

    raw = c.config.get("amibuild", {}).get(key)
    if raw in (None, ""):
        return default
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = -1.0
    if not 0 <= value < float("inf") or (positive and value == 0):  # NaN fails both comparisons
        raise SpecError(f"amibuild.{key} {raw!r} ({config_source(c, key)}): {what}")
    return value


def _guard(c, signals=None, run_id=None):
    """The channel lease settings: how long to wait for a busy channel (config `amibuild.lease_wait`),
    how long a lease is good for (`amibuild.lease_ttl`), how long the write may wait on AWS in all
    (`amibuild.channel_deadline`, default 30 s), and the signals that stop a transaction before its
    first write."""
    wait = _seconds(c, "lease_wait", LEASE_WAIT, "seconds to wait for a channel another writer holds, e.g. 30")
    ttl = _seconds(c, "lease_ttl", LEASE_TTL, "seconds a channel lease is good for, more than 0, e.g. 300",
                   positive=True)
    cancelled = {"cancelled": signals.requested} if signals else {}  # none held off: never cancelled
    return Guard(run_id=run_id or "", wait=wait, ttl=ttl, deadline=_channel_deadline(c), **cancelled)


def _channel_deadline(c) -> float | None:
    """Config `amibuild.channel_deadline`: seconds of waiting on AWS a channel write may spend; None: the default."""
    return _seconds(c, "channel_deadline", None, "seconds of waiting on AWS a channel write may spend, more than 0, "
                    "e.g. 30", positive=True)


def _read_timeout(c):
    """The channel client's read timeout from config `amibuild.read_timeout` (seconds), or None: the default."""
    return _seconds(c, "read_timeout", None, "seconds one AWS request may wait for its answer, more than 0, e.g. 10",
                    positive=True)

