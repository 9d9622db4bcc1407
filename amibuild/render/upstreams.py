"""The amazon-eks-ami checkouts a pipeline's upstream variants build from: fetched (cached) and
loaded once per (source, ref, os, Kubernetes minor), and the Kubernetes binaries each installs."""

from __future__ import annotations

import functools
import os
from pathlib import Path

from amibuild.pipeline import Pipeline
from amibuild.render import upstream
from amibuild.render.upstream import binaries


def load_upstreams(pipeline: Pipeline, cache_dir: str | None) -> dict[str, object]:
    """Variant name -> its loaded upstream template (only the variants with the upstream base)."""
    needed = [v for v in pipeline.variants if v.base == "upstream"]
    if not needed:
        return {}

    cache = Path(cache_dir or os.environ.get("AMIBUILD_CACHE") or Path.home() / ".cache" / "amibuild") / "upstream"
    fetch, load = functools.cache(upstream.fetch), functools.cache(upstream.load)  # once per checkout, per template
    out = {}
    for variant in needed:
        root = fetch(variant.upstream, variant.upstream_ref or None, cache)
        # the os picks the template, the Kubernetes minor its variables-1.N.json
        minor = ".".join(variant.kubernetes_version.split(".")[:2])
        out[variant.name] = load(root, os_family=variant.os, k8s=minor)
    return out


def upstream_binaries(pipeline: Pipeline, upstreams: dict[str, object], aws) -> dict[str, object]:
    """Variant -> the Kubernetes binaries its upstream build installs (pinned, or listed in S3)."""
    return {
        v.name: binaries.resolve(v, upstreams[v.name].variables, aws)  # type: ignore[attr-defined]
        for v in pipeline.variants if v.name in upstreams
    }
