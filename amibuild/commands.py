"""What the tasks do, as functions that return data: render, validate.

Each takes an `Options` (flags, already parsed by tasks.py), works out a plan with the pure modules
(spec, render) and does the little I/O needed (resolve source AMIs, write files, run packer). It
never prints: progress goes to the `say` callback, results are returned.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import render as render_mod
from . import spec
from .errors import AmibuildError, AwsError, NotFound, PackerNotFound, PackerValidateError, SpecError
from .render import Rendered, SourceAmi, Target

Say = Callable[[str], None]

DEFAULT_BUILD_DIR = "build"


@dataclass(frozen=True)
class Options:
    """Everything the render/validate/build tasks share."""

    pipeline_file: str | None = None
    overrides: spec.Overrides = spec.Overrides()
    build_dir: str = DEFAULT_BUILD_DIR
    packer: str = "packer"
    profile: str | None = None
    cache_dir: str | None = None


@dataclass
class RenderResult:
    pipeline: spec.Pipeline
    rendered: list[Rendered]
    directories: list[Path]
    packer_version: str
    notes: list[str] = field(default_factory=list)


def default_region(profile: str | None = None) -> str:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-west-2"


def load_pipeline(options: Options) -> spec.Pipeline:
    return spec.load(options.pipeline_file, options.overrides, default_region=default_region(options.profile))


def packer_version(options: Options) -> tuple[str, bool, str | None]:
    """(version text, uses_plugins, note). Without packer on PATH, render for a current Packer."""
    from .packer import Packer

    try:
        version = Packer(options.packer).version()
    except PackerNotFound:
        return "unknown", True, "packer not found: rendered for Packer >= 1.7 (with required_plugins)"
    return f"{version.major}.{version.minor}.{version.patch}", version.uses_plugins, None


def resolve_source(variant: spec.Variant, region: str, aws: "Aws | None") -> SourceAmi:  # noqa: F821
    """Where the build's source AMI comes from; reads the public SSM parameter when AWS is reachable."""
    parameter = render_mod.eks_parameter(variant)
    if variant.source_ami:
        return SourceAmi("pinned", variant.source_ami, note=f"source AMI pinned to {variant.source_ami}")
    if variant.base == "upstream":
        return SourceAmi("lookup", note="upstream base: the upstream template finds its own source AMI")
    if aws is None:
        return SourceAmi("lookup", parameter=parameter,
                         note=f"source AMI: no AWS access now; looked up at build time by image name "
                              f"({render_mod.eks_name_filter(variant)}, owner {render_mod.EKS_OWNER})")
    try:
        image_id = aws.get_parameter(parameter, region)
    except NotFound as exc:
        raise SpecError(
            f"variant {variant.name}: AWS publishes no EKS-optimized {variant.os} {variant.arch} image for "
            f"Kubernetes {variant.kubernetes_version} in {region} ({parameter} not found); pick another version"
        ) from exc
    except AwsError as exc:
        return SourceAmi("lookup", parameter=parameter,
                         note=f"source AMI: could not read {parameter} ({exc}); looked up at build time by image name")
    return SourceAmi("resolved", image_id, parameter, note=f"source AMI {image_id} from {parameter} in {region}")


def aws_if_available(options: Options) -> "Aws | None":  # noqa: F821
    """An AWS gateway when credentials are configured, else None (render works offline)."""
    from .aws import Aws

    aws = Aws(profile=options.profile, max_attempts=2)
    return aws if aws.has_credentials() else None


def render(options: Options, say: Say = lambda _: None, *, aws=None, resolve: bool = True) -> RenderResult:
    """Render every selected variant into build/<variant>/; all or nothing."""
    pipeline = load_pipeline(options)
    version, uses_plugins, note = packer_version(options)
    target = Target.from_env()
    if resolve and aws is None:
        aws = aws_if_available(options)
    upstreams = _upstreams(pipeline, options)
    rendered: list[Rendered] = []
    for variant in pipeline.variants:
        sources = {region: resolve_source(variant, region, aws if resolve else None) for region in pipeline.regions}
        rendered.append(render_mod.render_variant(
            pipeline, variant, uses_plugins=uses_plugins, target=target, sources=sources,
            upstream=upstreams.get(variant.name),
        ))
    # every variant rendered in memory before anything is written: bad input writes nothing
    out_dir = Path(options.build_dir)
    directories = []
    for item in rendered:
        directories.append(render_mod.write(item, out_dir, item.record(pipeline, version)))
        say(f"rendered {item.variant.name}: {out_dir / item.variant.name} (fingerprint {item.fingerprint[:12]})")
        for line in item.notes:
            say(f"  note: {line}")
    return RenderResult(pipeline, rendered, directories, version, [note] if note else [])


def _upstreams(pipeline: spec.Pipeline, options: Options) -> dict[str, object]:
    needed = [v for v in pipeline.variants if v.base == "upstream"]
    if not needed:
        return {}
    from . import upstream

    cache = Path(options.cache_dir or os.environ.get("AMIBUILD_CACHE") or Path.home() / ".cache" / "amibuild") / "upstream"
    loaded: dict[tuple[str, str], object] = {}
    out = {}
    for variant in needed:
        key = (variant.upstream, variant.upstream_ref)
        if key not in loaded:
            root = upstream.fetch(variant.upstream, variant.upstream_ref or None, cache)
            loaded[key] = upstream.load(root)
        out[variant.name] = loaded[key]
    return out


@dataclass
class ValidateResult:
    directories: list[Path]
    packer_version: str
    checked: list[str]


def validate(options: Options, say: Say = lambda _: None, *, aws=None) -> ValidateResult:
    """Render, then check every file: python-hcl2 parses it, `packer validate`, `packer fmt -check`."""
    from . import hcl
    from .packer import Packer

    packer = Packer(options.packer)
    packer.version()  # PackerNotFound here, before anything is rendered
    result = render(options, say, aws=aws)
    checked = []
    for directory in result.directories:
        for path in sorted(directory.glob("*.hcl")):
            try:
                hcl.loads(path.read_text(encoding="utf-8"))
            except hcl.HclSyntaxError as exc:
                raise PackerValidateError(f"{path}:{exc.line or '?'}: python-hcl2 cannot parse it ({exc})") from exc
        packer.init(directory)
        packer.validate(directory)
        unformatted = packer.fmt_check(directory)
        if unformatted:
            raise PackerValidateError(f"{directory}: not `packer fmt` clean: {', '.join(unformatted)}")
        checked.append(directory.name)
        say(f"valid {directory.name}: hcl2 parse, packer validate, packer fmt -check")
    return ValidateResult(result.directories, result.packer_version, checked)


def packer_on_path(binary: str) -> bool:
    return shutil.which(binary) is not None or Path(binary).is_file()


__all__ = ["Options", "render", "validate", "AmibuildError"]
