"""Render and validate: every selected variant rendered in memory (source AMIs resolved, upstream
templates converted), then written into build/<variant>/; validate checks each folder with
python-hcl2, `packer validate` and `packer fmt -check`.

All or nothing: every variant is rendered before any file is written, so bad input writes
nothing. `amibuild.jobs.build_ami` builds on `prepare` and `write_all`.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Callable, Mapping

from amibuild import hcl
from amibuild import render as render_mod
from amibuild.aws import Aws, beside, fan_out
from amibuild.bake import credential_macs
from amibuild.bake.packer import Packer, input_refusal
from amibuild.bake.record import why_not_written
from amibuild.errors import AmibuildError, AwsError, OutputNotWritten, PackerNotFound, PackerValidateError, SpecError
from amibuild.pipeline import Pipeline, Variant
from amibuild.pipeline.options import Options, load_pipeline
from amibuild.pipeline.support import support_warning
from amibuild.poll import settled
from amibuild.render import Rendered, SourceAmi, SourceHow, Target, Transform
from amibuild.render.upstreams import load_upstreams, upstream_binaries

Say = Callable[[str], None]

__all__ = ["Options", "Prepared", "RenderResult", "Transform", "ValidateResult", "Say", "aws_if_available",
           "check_directories", "check_directory", "load_pipeline", "packer_version", "prepare", "render",
           "resolve_sources", "support_warnings", "validate", "write_all"]

@dataclass
class RenderResult:
    pipeline: Pipeline
    rendered: list[Rendered]
    directories: list[Path]
    packer_version: str
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"packer_version": self.packer_version, "notes": list(self.notes),
                "variants": [{"name": r.variant.name, "directory": str(d), "fingerprint": r.fingerprint,
                              "source_amis": {region: s.image_id or None for region, s in r.sources.items()},
                              "notes": list(r.notes)} for r, d in zip(self.rendered, self.directories, strict=True)]}


def packer_version(options: Options, packer=None) -> tuple[str, bool, str | None]:
    """(version text, uses_plugins, note). Without packer on PATH, render for a current Packer."""
    try:
        version = (packer or Packer(options.packer)).version()
    except PackerNotFound:
        return "unknown", True, "packer not found: rendered for Packer >= 1.7 (with required_plugins)"
    return str(version), version.uses_plugins, None


def resolve_sources(pipeline: Pipeline, aws, *, strict: bool = False) -> dict[str, dict[str, SourceAmi]]:
    """Variant -> build region -> where its source AMI comes from.

    The public EKS parameters are read with GetParameters, each distinct name once per region and
    the regions in parallel. Without AWS access (``aws`` None) the template looks the image up by
    name at build time; ``strict`` (build-ami) makes an unanswered read an error instead.
    """
    needed = [v for v in pipeline.variants if not v.source_ami and v.base != "upstream"]
    names = sorted({render_mod.eks_parameter(v) for v in needed})

    def read(region: str) -> dict[str, str] | AwsError:
        try:
            return aws.get_parameters(names, region)
        except AwsError as exc:
            if strict:
                raise
            return exc

    answers = fan_out(pipeline.regions, read) if aws is not None and names else {}
    return {v.name: {r: _source(v, r, aws is not None, answers.get(r)) for r in pipeline.regions}
            for v in pipeline.variants}


def _source(variant: Variant, region: str, access: bool, values: dict[str, str] | AwsError | None) -> SourceAmi:
    parameter = render_mod.eks_parameter(variant)
    if variant.source_ami:
        return SourceAmi(SourceHow.PINNED, variant.source_ami, note=f"source AMI pinned to {variant.source_ami}")
    if variant.base == "upstream":
        return SourceAmi(SourceHow.LOOKUP, note="upstream base: the upstream template finds its own source AMI")
    lookup = (f"looked up at build time by image name ({render_mod.eks_name_filter(variant)}, "
              f"owner {', '.join(render_mod.eks_owners([region]))})")
    if not access:
        return SourceAmi(SourceHow.LOOKUP, parameter=parameter, note=f"source AMI: no AWS access now; {lookup}")
    if values is None or isinstance(values, AwsError):  # the read failed (None: it was not made)
        return SourceAmi(SourceHow.LOOKUP, parameter=parameter, note=f"source AMI: could not read {parameter} ({values}); {lookup}")
    if parameter not in values:
        raise SpecError(f"variant {variant.name}: AWS publishes no EKS-optimized {variant.os} {variant.arch} image for "
                        f"Kubernetes {variant.kubernetes_version} in {region} ({parameter} not found); "
                        "pick another version")
    image_id = values[parameter]
    return SourceAmi(SourceHow.RESOLVED, image_id, parameter, note=f"source AMI {image_id} from {parameter} in {region}")


def aws_if_available(options: Options) -> Aws | None:
    """An AWS gateway when credentials are configured, else None (render works offline)."""
    aws = Aws(profile=options.profile, max_attempts=2)
    return aws if aws.has_credentials() else None


@dataclass
class Prepared:
    """Every selected variant rendered in memory; nothing written yet."""

    pipeline: Pipeline
    rendered: list[Rendered]
    packer_version: str
    notes: list[str]


def prepare(options: Options, *, aws=None, resolve: bool = True, strict: bool = False,
            packer=None, pipeline: Pipeline | None = None, target: Target = Target(),
            transform: Transform | None = None) -> Prepared:
    """Every selected variant's real build for ``target``, then ``transform`` (the platform's, which
    the caller chose) applied to each: both decided by the caller, nothing read from the environment."""
    pipeline = pipeline or load_pipeline(options)
    version, uses_plugins, note = packer_version(options, packer)
    upstreams = load_upstreams(pipeline, options.cache_dir)
    binaries = upstream_binaries(pipeline, upstreams, aws if resolve else None)
    sources = resolve_sources(pipeline, aws if resolve else None, strict=strict)
    builds = [
        render_mod.render_build(pipeline, variant, uses_plugins=uses_plugins, target=target,
                                sources=sources[variant.name], upstream=upstreams.get(variant.name),
                                upstream_binaries=binaries.get(variant.name))
        for variant in pipeline.variants
    ]
    finals = [transform(b) if transform is not None else b for b in builds]
    # the credentials' MACs are facts like the source AMIs: gathered here, so the render stays pure
    macs = credential_macs.gather(pipeline, finals, aws if resolve else None, strict=strict)
    rendered = [render_mod.finish(b, macs.of(b)) for b in finals]
    return Prepared(pipeline, rendered, version, [n for n in (note, macs.note) if n])


def support_warnings(pipeline: Pipeline, today=None) -> list[str]:
    """One line per variant whose Kubernetes version is past EKS standard or extended support."""
    today = today or date.today()
    return [f"variant {variant.name}: {warning}" for variant in pipeline.variants
            if (warning := support_warning(variant.kubernetes_version, today))]


def write_all(prepared: Prepared, options: Options, say: Say, out_dir: Path | None = None) -> list[Path]:
    out_dir = out_dir or Path(options.build_dir)
    directories = []
    # a note every variant carries (the Packer version's, say) holds for the whole run: say it once
    shared = [n for n in prepared.rendered[0].notes if all(n in r.notes for r in prepared.rendered)] \
        if len(prepared.rendered) > 1 else []
    for line in shared:
        say(f"note: {line}")
    for item in prepared.rendered:
        try:
            directories.append(render_mod.write(item, out_dir, item.record(prepared.pipeline, prepared.packer_version)))
        except OSError as exc:  # a full or read-only disk: one line, nothing else done
            raise OutputNotWritten(f"{out_dir / item.variant.name}: cannot write the rendered files "
                                   f"({why_not_written(exc)})") from exc
        say(f"rendered {item.variant.name}: {out_dir / item.variant.name} (fingerprint {item.fingerprint[:12]})")
        for line in item.notes:
            if line not in shared:
                say(f"  note: {line}")
    return directories


def render(options: Options, say: Say = lambda _: None, *, aws=None, resolve: bool = True,
           packer=None, pipeline: Pipeline | None = None, target: Target = Target(),
           transform: Transform | None = None) -> RenderResult:
    """Render every selected variant into build/<variant>/; all or nothing."""
    if resolve and aws is None:
        aws = aws_if_available(options)
    # every variant rendered in memory before anything is written: bad input writes nothing
    prepared = prepare(options, aws=aws, resolve=resolve, packer=packer, pipeline=pipeline, target=target,
                       transform=transform)
    for line in support_warnings(prepared.pipeline):
        say(f"warning: {line}")
    directories = write_all(prepared, options, say)
    return RenderResult(prepared.pipeline, prepared.rendered, directories, prepared.packer_version, prepared.notes)


@dataclass
class ValidateResult:
    directories: list[Path]
    packer_version: str
    checked: list[str]


def validate(options: Options, say: Say = lambda _: None, *, aws=None, target: Target = Target(),
             transform: Transform | None = None) -> ValidateResult:
    """Render, then check every file: python-hcl2 parses it, `packer validate`, `packer fmt -check`."""
    packer = Packer(options.packer)
    with beside(packer.version) as version:
        pipeline = load_pipeline(options)  # bad input first, while `packer version` runs on another core
        version()  # PackerNotFound here, before anything is rendered
    result = render(options, say, aws=aws, packer=packer, pipeline=pipeline, target=target, transform=transform)
    origins = {r.variant.name: r.variant.origins for r in result.rendered}
    check_directories(packer, result.directories, origins,
                      valid=lambda d: say(f"valid {d.name}: hcl2 parse, packer validate, packer fmt -check"))
    return ValidateResult(result.directories, result.packer_version, [d.name for d in result.directories])


# Each check is two short packer processes and a python-hcl2 parse: a few at once keep the cores
# busy while one waits on a process start; more only queue for the same cores.
CHECK_PARALLEL = max(2, min(8, 2 * (os.cpu_count() or 1)))


def check_directories(packer: Packer, directories: list[Path],
                      origins: Mapping[str, Mapping[str, str]] | None = None,
                      valid: Callable[[Path], None] = lambda _: None) -> None:
    """`check_directory` on every folder, a few at once; every variant is checked.

    ``valid`` is called, in variant order, for each folder that passed. `PackerValidateError` when
    any fails: each failing variant's own message, in variant order, joined into one line.
    """
    def check(directory: Path) -> AmibuildError | None:
        try:
            check_directory(packer, directory, (origins or {}).get(directory.name))
        except AmibuildError as exc:
            return exc
        return None

    with ThreadPoolExecutor(max_workers=min(CHECK_PARALLEL, len(directories) or 1),
                            thread_name_prefix="check") as pool:
        answers = list(map(settled, [pool.submit(check, d) for d in directories]))
    for directory, answer in zip(directories, answers, strict=True):
        if answer is None:
            valid(directory)
    failures = [exc for exc in answers if exc is not None]
    if len(failures) == 1:
        raise failures[0]
    if failures:
        error = PackerValidateError("; ".join(str(exc) for exc in failures))
        error.output = "\n".join(getattr(exc, "output", "") for exc in failures)  # type: ignore[attr-defined]
        raise error from failures[0]


def check_directory(packer: Packer, directory: Path, origins: Mapping[str, str] | None = None) -> None:
    """python-hcl2 parses every file, `packer validate` and `packer fmt -check` accept the folder.

    A `packer validate` refusal that names a value the user set (``origins``: setting -> flag or
    file) is bad input (exit 2, naming the setting); any other refusal is amibuild's fault (exit 1).
    """
    for path in sorted(directory.glob("*.hcl")):
        try:
            hcl.loads(path.read_text(encoding="utf-8"))
        except hcl.HclSyntaxError as exc:
            raise PackerValidateError(f"{path}:{exc.line or '?'}: python-hcl2 cannot parse it ({exc})") from exc
    packer.init(directory)
    try:
        packer.validate(directory)
    except PackerValidateError as exc:
        refused = input_refusal(getattr(exc, "output", "") or str(exc), str(exc).split(": ", 1)[-1], origins or {})
        if refused is None:
            raise
        raise refused from exc
    unformatted = packer.fmt_check(directory)
    if unformatted:
        raise PackerValidateError(f"{directory}: not `packer fmt` clean: {', '.join(unformatted)}")
