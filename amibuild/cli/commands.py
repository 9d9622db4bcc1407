"""What the tasks do, as functions that return data: render, validate.

Each takes an `Options` (flags, already parsed by tasks.py), works out a plan with the pure modules
(spec, render) and does the little I/O needed (resolve source AMIs, write files, run packer). It
never prints: progress goes to the `say` callback, results are returned.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Mapping

from amibuild import render as render_mod
from amibuild.pipeline import Overrides, Pipeline, Variant, check_names, load
from amibuild.aws import default_region as aws_default_region
from amibuild.errors import AwsError, PackerNotFound, PackerValidateError, SpecError
from amibuild.render import Rendered, SourceAmi, SourceHow, Target

Say = Callable[[str], None]

DEFAULT_BUILD_DIR = "build"


@dataclass(frozen=True)
class Options:
    """Everything the render/validate/build tasks share."""

    pipeline_file: str | None = None
    overrides: Overrides = Overrides()
    build_dir: str = DEFAULT_BUILD_DIR
    packer: str = "packer"
    profile: str | None = None
    cache_dir: str | None = None


@dataclass
class RenderResult:
    pipeline: Pipeline
    rendered: list[Rendered]
    directories: list[Path]
    packer_version: str
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "packer_version": self.packer_version,
            "notes": list(self.notes),
            "variants": [
                {"name": r.variant.name, "directory": str(d), "fingerprint": r.fingerprint,
                 "source_amis": {region: s.image_id or None for region, s in r.sources.items()},
                 "notes": list(r.notes)}
                for r, d in zip(self.rendered, self.directories, strict=True)
            ],
        }


def load_pipeline(options: Options) -> Pipeline:
    return load(options.pipeline_file, options.overrides, default_region=aws_default_region(options.profile))


def packer_version(options: Options, packer=None) -> tuple[str, bool, str | None]:
    """(version text, uses_plugins, note). Without packer on PATH, render for a current Packer."""
    from amibuild.bake.packer import Packer

    try:
        version = (packer or Packer(options.packer)).version()
    except PackerNotFound:
        return "unknown", True, "packer not found: rendered for Packer >= 1.7 (with required_plugins)"
    return f"{version.major}.{version.minor}.{version.patch}", version.uses_plugins, None


def resolve_sources(pipeline: Pipeline, aws, *, strict: bool = False) -> dict[str, dict[str, SourceAmi]]:
    """Variant -> build region -> where its source AMI comes from.

    The public EKS parameters are read with GetParameters, each distinct name once per region and
    the regions in parallel. Without AWS access (``aws`` None) the template looks the image up by
    name at build time; ``strict`` (build-ami) makes an unanswered read an error instead.
    """
    from amibuild.aws import fan_out

    needed = [v for v in pipeline.variants if not v.source_ami and v.base != "upstream"]
    names = sorted({render_mod.eks_parameter(v) for v in needed})
    values: dict[str, dict[str, str]] = {}
    failures: dict[str, AwsError] = {}
    if aws is not None and names:
        def read(region: str) -> dict[str, str] | AwsError:
            try:
                return aws.get_parameters(names, region)
            except AwsError as exc:
                if strict:
                    raise
                return exc

        for region, answer in fan_out(pipeline.regions, read).items():
            if isinstance(answer, AwsError):
                failures[region] = answer
            else:
                values[region] = answer
    return {
        v.name: {r: _source(v, r, aws is not None, values.get(r), failures.get(r)) for r in pipeline.regions}
        for v in pipeline.variants
    }


def _source(variant: Variant, region: str, access: bool, values: dict[str, str] | None,
            failure: AwsError | None) -> SourceAmi:
    parameter = render_mod.eks_parameter(variant)
    if variant.source_ami:
        return SourceAmi(SourceHow.PINNED, variant.source_ami, note=f"source AMI pinned to {variant.source_ami}")
    if variant.base == "upstream":
        return SourceAmi(SourceHow.LOOKUP, note="upstream base: the upstream template finds its own source AMI")
    lookup = f"looked up at build time by image name ({render_mod.eks_name_filter(variant)}, owner {render_mod.EKS_OWNER})"
    if not access:
        return SourceAmi(SourceHow.LOOKUP, parameter=parameter, note=f"source AMI: no AWS access now; {lookup}")
    if failure is not None or values is None:
        return SourceAmi(SourceHow.LOOKUP, parameter=parameter, note=f"source AMI: could not read {parameter} ({failure}); {lookup}")
    if parameter not in values:
        raise SpecError(
            f"variant {variant.name}: AWS publishes no EKS-optimized {variant.os} {variant.arch} image for "
            f"Kubernetes {variant.kubernetes_version} in {region} ({parameter} not found); pick another version"
        )
    image_id = values[parameter]
    return SourceAmi(SourceHow.RESOLVED, image_id, parameter, note=f"source AMI {image_id} from {parameter} in {region}")


def aws_if_available(options: Options) -> "Aws | None":  # noqa: F821
    """An AWS gateway when credentials are configured, else None (render works offline)."""
    from amibuild.aws import Aws

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
            packer=None, pipeline: Pipeline | None = None) -> Prepared:
    pipeline = pipeline or load_pipeline(options)
    version, uses_plugins, note = packer_version(options, packer)
    target = Target.from_env()
    upstreams = _upstreams(pipeline, options)
    binaries = upstream_binaries(pipeline, upstreams, aws if resolve else None)
    sources = resolve_sources(pipeline, aws if resolve else None, strict=strict)
    rendered = [
        render_mod.render_variant(pipeline, variant, uses_plugins=uses_plugins, target=target,
                                  sources=sources[variant.name], upstream=upstreams.get(variant.name),
                                  upstream_binaries=binaries.get(variant.name))
        for variant in pipeline.variants
    ]
    return Prepared(pipeline, rendered, version, [note] if note else [])


def support_warnings(pipeline: Pipeline, today=None) -> list[str]:
    """One line per variant whose Kubernetes version is past EKS standard or extended support."""
    from datetime import date

    from amibuild.pipeline.support import support_warning

    today = today or date.today()
    out = []
    for variant in pipeline.variants:
        warning = support_warning(variant.kubernetes_version, today)
        if warning:
            out.append(f"variant {variant.name}: {warning}")
    return out


def write_all(prepared: Prepared, options: Options, say: Say, out_dir: Path | None = None) -> list[Path]:
    out_dir = out_dir or Path(options.build_dir)
    directories = []
    # a note every variant carries (the Packer version's, say) holds for the whole run: say it once
    shared = [n for n in prepared.rendered[0].notes if all(n in r.notes for r in prepared.rendered)] \
        if len(prepared.rendered) > 1 else []
    for line in shared:
        say(f"note: {line}")
    for item in prepared.rendered:
        directories.append(render_mod.write(item, out_dir, item.record(prepared.pipeline, prepared.packer_version)))
        say(f"rendered {item.variant.name}: {out_dir / item.variant.name} (fingerprint {item.fingerprint[:12]})")
        for line in item.notes:
            if line not in shared:
                say(f"  note: {line}")
    return directories


def render(options: Options, say: Say = lambda _: None, *, aws=None, resolve: bool = True,
           packer=None, pipeline: Pipeline | None = None) -> RenderResult:
    """Render every selected variant into build/<variant>/; all or nothing."""
    if resolve and aws is None:
        aws = aws_if_available(options)
    # every variant rendered in memory before anything is written: bad input writes nothing
    prepared = prepare(options, aws=aws, resolve=resolve, packer=packer, pipeline=pipeline)
    for line in support_warnings(prepared.pipeline):
        say(f"warning: {line}")
    directories = write_all(prepared, options, say)
    return RenderResult(prepared.pipeline, prepared.rendered, directories, prepared.packer_version, prepared.notes)


def _upstreams(pipeline: Pipeline, options: Options) -> dict[str, object]:
    needed = [v for v in pipeline.variants if v.base == "upstream"]
    if not needed:
        return {}
    from amibuild.render import upstream

    cache = Path(options.cache_dir or os.environ.get("AMIBUILD_CACHE") or Path.home() / ".cache" / "amibuild") / "upstream"
    roots: dict[tuple[str, str], Path] = {}
    loaded: dict[tuple[Path, str, str], object] = {}
    out = {}
    for variant in needed:
        key = (variant.upstream, variant.upstream_ref)
        if key not in roots:
            roots[key] = upstream.fetch(variant.upstream, variant.upstream_ref or None, cache)
        # the os picks the template, the Kubernetes minor its variables-1.N.json
        minor = ".".join(variant.kubernetes_version.split(".")[:2])
        template_key = (roots[key], variant.os, minor)
        if template_key not in loaded:
            loaded[template_key] = upstream.load(roots[key], os_family=variant.os, k8s=minor)
        out[variant.name] = loaded[template_key]
    return out


def upstream_binaries(pipeline: Pipeline, upstreams: dict[str, object], aws) -> dict[str, object]:
    """Variant -> the Kubernetes binaries its upstream build installs (pinned, or listed in S3)."""
    from amibuild.render.upstream import binaries

    return {
        v.name: binaries.resolve(v, upstreams[v.name].variables, aws)  # type: ignore[attr-defined]
        for v in pipeline.variants if v.name in upstreams
    }


@dataclass
class ValidateResult:
    directories: list[Path]
    packer_version: str
    checked: list[str]


def validate(options: Options, say: Say = lambda _: None, *, aws=None) -> ValidateResult:
    """Render, then check every file: python-hcl2 parses it, `packer validate`, `packer fmt -check`."""
    from amibuild.bake.packer import Packer

    packer = Packer(options.packer)
    with _asking_version(packer) as version:
        pipeline = load_pipeline(options)  # bad input first, while `packer version` runs
        version()  # PackerNotFound here, before anything is rendered
    result = render(options, say, aws=aws, packer=packer, pipeline=pipeline)
    origins = {r.variant.name: r.variant.origins for r in result.rendered}
    check_directories(packer, result.directories, origins,
                      valid=lambda d: say(f"valid {d.name}: hcl2 parse, packer validate, packer fmt -check"))
    return ValidateResult(result.directories, result.packer_version, [d.name for d in result.directories])


# Each check is two short packer processes (validate starts the builder and provisioner plugins as
# processes of their own: ~0.3 CPU-seconds) and a python-hcl2 parse. A few at once keep the cores
# busy while one waits on a process start; more only queue for the same cores.
CHECK_PARALLEL = max(2, min(8, 2 * (os.cpu_count() or 1)))


def check_directories(packer: "Packer", directories: list[Path],  # noqa: F821
                      origins: Mapping[str, Mapping[str, str]] | None = None,
                      valid: Callable[[Path], None] = lambda _: None) -> None:
    """`check_directory` on every folder, a few at once; every variant is checked.

    ``valid`` is called, in variant order, for each folder that passed. `PackerValidateError` when
    any fails: each failing variant's own message, in variant order, joined into one line.
    """
    from concurrent.futures import ThreadPoolExecutor

    from amibuild.errors import AmibuildError

    def check(directory: Path) -> AmibuildError | None:
        try:
            check_directory(packer, directory, (origins or {}).get(directory.name))
        except AmibuildError as exc:
            return exc
        return None

    with ThreadPoolExecutor(max_workers=min(CHECK_PARALLEL, len(directories) or 1),
                            thread_name_prefix="check") as pool:
        answers = list(pool.map(check, directories))
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


def check_directory(packer: "Packer", directory: Path, origins: Mapping[str, str] | None = None) -> None:  # noqa: F821
    """python-hcl2 parses every file, `packer validate` and `packer fmt -check` accept the folder.

    A `packer validate` refusal that names a value the user set (``origins``: setting -> flag or
    file) is bad input (exit 2, naming the setting); any other refusal is amibuild's fault (exit 1).
    """
    from amibuild import hcl
    from amibuild.bake.packer import input_refusal

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


# ------------------------------------------------------------------------------- build-ami


@dataclass
class BuildRun:
    """The result of `build_ami`: the plan, and per variant what happened (None on --dry-run)."""

    plan: "BuildPlan"  # noqa: F821
    outcomes: list | None
    record_path: Path | None
    interrupted: bool = False
    aborted: bool = False

    sharing: list[str] = field(default_factory=list)  # launch/snapshot permissions missing for ami_users
    signal: str = ""  # the signal that stopped the publish step (SIGINT, SIGTERM, SIGHUP), if one did
    exit_code: int = 130  # when interrupted: 128 + that signal

    @property
    def failed(self) -> list:
        from amibuild.bake.executor import BuildStatus

        return [o for o in self.outcomes or []
                if o.status in (BuildStatus.FAILED, BuildStatus.INTERRUPTED) or o.publish_error]

    def to_dict(self) -> dict:
        if self.outcomes is None:
            return {"dry_run": True, **self.plan.to_dict()}
        return {
            "run_id": self.plan.run_id,
            "regions": list(self.plan.regions),
            "interrupted": self.interrupted,
            "record": str(self.record_path) if self.record_path else None,
            "sharing": list(self.sharing),
            "variants": [o.to_dict() for o in self.outcomes],
        }


def build_ami(
    options: Options,
    say: Say = lambda _: None,
    *,
    force: bool = False,
    dry_run: bool = False,
    parallel: int | None = None,
    max_parallel: int = 8,
    timeout: float | None = None,
    cleanup_timeout: float = 120.0,
    progress=None,
    channel: str | None = None,
    publish: bool = True,
    rehearse: bool = False,
    wait: bool = True,
    stall_after: float = 10.0,
    allow_incomplete: bool = False,
    boot_test=None,
) -> BuildRun:
    """render → validate → plan (skip unchanged) → packer build in parallel → artifacts → publish → record.

    ``channel`` None: the pipeline's default channel; ``publish`` False: build only (--no-publish).
    An interrupted build publishes nothing. Each run works in its own folder,
    build/runs/<run id>/<variant>/, so concurrent runs never share files; ``wait`` False
    (--no-wait): a variant whose build lease another run holds fails at once instead of waiting.
    """
    from amibuild.aws import Aws
    from amibuild.bake.packer import Packer
    from amibuild.bake.plan import new_run_id, plan_build

    packer = Packer(options.packer)
    with _asking_version(packer) as version:
        pipeline = load_pipeline(options)  # bad input is refused before anything else
        if publish and channel:
            from amibuild.channels.publish import check_channel

            try:
                check_channel(channel)
            except SpecError as exc:
                raise SpecError(f"--channel: {exc}") from None
            # the parameter names this channel gives must be valid before anything is built
            check_names(pipeline, channel, f"--channel {channel}")
        channel = (channel or pipeline.default_channel) if publish else None
        version()  # PackerNotFound before any AWS call
    if rehearse:
        from amibuild.rehearse.overlay import check_privileges

        check_privileges()  # --rehearse where it cannot run: refused before any AWS call
    aws = Aws(profile=options.profile)
    if not aws.has_credentials():
        from amibuild.errors import NoCredentials

        raise NoCredentials("build-ami: no AWS credentials found; set AWS_PROFILE or AWS_ACCESS_KEY_ID/"
                            "AWS_SECRET_ACCESS_KEY, or run `amibuild sandbox` for the local emulator")
    prepared = prepare(options, aws=aws, strict=True, packer=packer, pipeline=pipeline)
    for line in support_warnings(pipeline):  # after every input check: bad input stays one line
        say(f"warning: {line}")
    run_id = new_run_id()
    out_dir = run_directory(options, run_id)
    existing = find_built_images(aws, prepared.pipeline.target_regions, [r.fingerprint for r in prepared.rendered])
    plan = plan_build(prepared.pipeline, [(r, out_dir / r.variant.name) for r in prepared.rendered],
                      existing, force=force, run_id=run_id)
    if dry_run:
        return BuildRun(plan, None, None)
    # only what will be built is written; `packer build` checks each template before it starts
    building = {item.name for item in plan.to_build}
    write_all(Prepared(prepared.pipeline, [r for r in prepared.rendered if r.variant.name in building],
                       prepared.packer_version, prepared.notes), options, say, out_dir)
    return execute_plan(plan, packer, aws, options, say, parallel=parallel or min(len(plan.items), max_parallel),
                        timeout=timeout, cleanup_timeout=cleanup_timeout, progress=progress, channel=channel,
                        rehearse=rehearse, guards=build_guards(plan, aws, wait=wait, stall_after=stall_after),
                        allow_incomplete=allow_incomplete, boot_test=boot_test)


def run_directory(options: Options, run_id: str) -> Path:
    """Where one build run writes its rendered files, Packer logs and manifests: its own folder."""
    return Path(options.build_dir) / "runs" / run_id


def build_guards(plan, aws, *, wait: bool, stall_after: float) -> dict:
    """The executor's lease, reuse check and leftovers scope for a build-ami run."""
    from amibuild.lease import Lease, build_lease_name
    from amibuild.bake.leftovers import Scope

    pipeline = plan.pipeline

    def lease_for(item) -> Lease:
        name = build_lease_name(pipeline.ssm_prefix, pipeline.name, item.name, item.fingerprint)
        return Lease(aws, name, pipeline.build_region, run_id=plan.run_id)

    def reuse(item) -> dict | None:
        """The image another run finished meanwhile, when it is available in every region."""
        found = find_built_images(aws, plan.regions, [item.fingerprint])
        amis = {}
        for region in plan.regions:
            ready = sorted((i for i in found.get(region, []) if i.state == "available"),
                           key=lambda i: (i.creation_date, i.image_id))
            if not ready:
                return None
            amis[region] = ready[-1].image_id
        return amis

    def scope(item) -> Scope:
        prefix = str(item.rendered.values.get("ami_name_prefix") or
                     f"{pipeline.name}-{item.name}-{item.rendered.variant.kubernetes_version}-{item.rendered.variant.arch}")
        return Scope(plan.run_id, item.name, prefix, tuple(pipeline.regions), tuple(plan.regions))

    return {"lease_for": lease_for, "wait": wait, "reuse": reuse, "leftovers_scope": scope, "stall_after": stall_after}


@contextlib.contextmanager
def _asking_version(packer: "Packer") -> Iterator[Callable[[], object]]:  # noqa: F821
    """Start `packer version` in the background; the block calls what it yields for the answer.

    `packer version` is a process of its own: it runs on another core while this one parses the
    pipeline file, instead of after it. An error in the block (bad input) still comes first; a
    missing packer is raised where the block asks.
    """
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="packer-version") as pool:
        asked = pool.submit(packer.version)
        yield asked.result


def find_built_images(aws, regions, fingerprints) -> dict:
    """amibuild's images with any of these fingerprints: one DescribeImages per region, in parallel."""
    from amibuild.aws import fan_out
    from amibuild.bake.plan import FINGERPRINT_TAG

    if not fingerprints:
        return {}
    values = sorted(set(fingerprints))

    def lookup(region: str):
        return aws.describe_images(region, owners=["self"], filters={f"tag:{FINGERPRINT_TAG}": values})

    return fan_out(regions, lookup)


def execute_plan(plan, packer, aws, options: Options, say: Say, *, parallel: int, timeout, cleanup_timeout,
                 progress=None, channel: str | None = None, rehearse: bool = False,
                 guards: dict | None = None, allow_incomplete: bool = False, boot_test=None) -> BuildRun:
    import json

    from amibuild import __version__
    from amibuild.bake.executor import Executor
    from amibuild.bake.plan import provenance_tags
    from amibuild.bake.progress import Progress

    commit = git_commit(plan.pipeline.source.parent if plan.pipeline.source else Path.cwd())
    own_progress = progress is None
    progress = progress or Progress([i.name for i in plan.items])
    check = None  # `packer build` checks each template itself before its first step
    if rehearse:  # each variant's chain rehearsed just before its Packer build; a failure stops that variant
        from amibuild.cli.rehearse import rehearsal_check

        check = rehearsal_check(plan, options, check, say, allow_incomplete=allow_incomplete)
    try:
        executor = Executor(
            plan, packer, aws,
            provenance=lambda item: provenance_tags(item, plan, version=__version__, git_commit=commit),
            check=check, progress=progress, parallel=parallel, timeout=timeout, cleanup_timeout=cleanup_timeout,
            **(guards or {}),
        )
        outcomes = executor.build()
    finally:
        if own_progress:
            progress.close()
    sharing: list[str] = []
    interrupted = executor.state.interrupted
    stopped_by, exit_code = "", 130
    if boot_test is not None and not interrupted:  # --boot-test: before anything is published
        from amibuild.cli.imagetests import Stop
        from amibuild.imagetest.after_build import boot_test_outcomes

        with Stop() as stop:
            if not boot_test_outcomes(aws, plan, outcomes, boot_test, cancelled=stop.requested, say=say) \
                    or stop.requested():
                interrupted, exit_code = True, stop.exit_code
    if channel and not interrupted:
        from amibuild.cli.signals import Signals

        # A signal here lets the channel writes in flight finish (or put back) and starts no other;
        # the run is then recorded as interrupted, with what each variant's channel did.
        with Signals() as signals:
            publish_outcomes(aws, plan, outcomes, channel, say, cancelled=signals.requested)
            if not signals.requested():
                sharing = check_shared(aws, plan, outcomes)
        if signals.requested():
            interrupted, stopped_by, exit_code = True, signals.name, signals.exit_code
    runs = Path(options.build_dir) / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    record_path = runs / f"{plan.run_id}.json"
    items = {i.name: i for i in plan.items}
    record = {
        "run_id": plan.run_id,
        "started": plan.started,
        "amibuild_version": __version__,
        "git_commit": commit,
        "pipeline": str(plan.pipeline.source) if plan.pipeline.source else None,
        "regions": list(plan.regions),
        "force": plan.force,
        "interrupted": interrupted,
        "signal": stopped_by or None,
        "variants": [
            {**o.to_dict(), "inputs": items[o.name].rendered.variant.settings(),
             "source_amis": {r: s.image_id for r, s in items[o.name].rendered.sources.items()}}
            for o in outcomes
        ],
    }
    record["sharing"] = sharing
    record_path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return BuildRun(plan, outcomes, record_path, interrupted, executor.state.aborted, sharing, stopped_by, exit_code)


PUBLISH_PARALLEL = 4


def publish_outcomes(aws, plan, outcomes, channel: str, say: Say, *, cancelled=lambda: False) -> None:
    """Publish each built or reused variant to `channel`: per variant one transaction under the
    channel's lease, all regions or none.

    Which variants and with what is decided by `channels.from_build.plan_build_publish` (pure);
    channels that already hold a reused image are found with GetParameters first (ten names a
    call per region), so an unchanged scheduled run makes no parameter version and few calls.
    Once `cancelled()` (a signal came) no further variant starts; those in flight finish or put back.
    """
    from concurrent.futures import ThreadPoolExecutor

    from amibuild.channels import publish
    from amibuild.channels.from_build import channel_reads, plan_build_publish
    from amibuild.lease import Guard
    from amibuild.errors import AmibuildError

    current = {region: aws.get_parameters(names, region)
               for region, names in channel_reads(plan, outcomes, channel).items()}
    by_name = {o.name: o for o in outcomes}
    unchanged = str(publish.PublishAction.UNCHANGED)

    def publish_one(item) -> None:
        outcome = by_name[item.name]
        if cancelled():
            outcome.publish_error = "not published: interrupted before its turn"
            return
        if item.unchanged:
            outcome.published = {"channel": channel, "parameter": item.parameter,
                                 "regions": {r: unchanged for r in sorted(item.amis)}}
            return
        try:
            result = publish.publish_variant(aws, pipeline=plan.pipeline, variant=item.variant, amis=item.amis,
                                             channel=channel, fingerprint=item.fingerprint, run_id=item.run_id,
                                             guard=Guard(run_id=plan.run_id, cancelled=cancelled))
        except AmibuildError as exc:
            outcome.publish_error = str(exc)
            say(f"{outcome.name}: not published: {exc}")
            return
        outcome.published = {"channel": channel, "parameter": result.parameter, "regions": {
            r.region: (r.version if r.action is publish.PublishAction.WRITE else unchanged) for r in result.regions}}
        say(f"{outcome.name}: published to {channel} ({result.parameter}): "
            + ", ".join(f"{r.region}={r.ami}" for r in result.regions))

    # Variants are independent channels: a few at once (the gateway paces and retries SSM writes,
    # whose account-wide rate is low), each still all regions or none. Signals do not raise here
    # (the caller holds them off): each variant asks `cancelled` before it starts.
    with ThreadPoolExecutor(max_workers=PUBLISH_PARALLEL) as pool:
        for future in [pool.submit(publish_one, item) for item in plan_build_publish(plan, outcomes, channel, current)]:
            future.result()


def check_shared(aws, plan, outcomes) -> list[str]:
    """Missing launch / snapshot permissions for the pipeline's ami_users, as lines to show."""
    from amibuild.channels import read as channel_status

    users = plan.pipeline.ami_users
    if not users:
        return []
    problems = []
    for outcome in outcomes:
        if outcome.status.has_image and outcome.amis:
            report = channel_status.check_sharing(aws, amis=outcome.amis, users=users)
            problems += [f"{outcome.name}: {line}" for line in report.problems()]
    return problems


def git_commit(directory: Path) -> str | None:
    """The pipeline repository's HEAD commit, or None outside a git work tree."""
    import subprocess

    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=directory, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def list_runs(options: Options, limit: int = 10) -> list[dict]:
    """The newest run records under build/runs/, newest first."""
    import json

    runs = sorted((Path(options.build_dir) / "runs").glob("*.json"), reverse=True)[:limit]
    out = []
    for path in runs:
        try:
            out.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return out


# ------------------------------------------------------------------------------- clean-run


def clean_run(options: Options, run_id: str | None, say: Say = lambda _: None, *, dry_run: bool = False):
    """Find (and unless ``dry_run`` remove) what a build run left in AWS, every variant, every region,
    and nothing in use (`amibuild.lifecycle.cleanup` decides; this reads the run's record and logs)."""
    import json

    from amibuild.aws import Aws
    from amibuild.bake import leftovers
    from amibuild.lifecycle import cleanup

    if not run_id or not leftovers.RUN_ID.match(run_id):
        raise SpecError(f"--run-id: {run_id!r} is not a run id like 20261130T170000Z-abc123; "
                        "`amibuild runs` lists them")
    pipeline = load_pipeline(options)
    aws = Aws(profile=options.profile)
    if not aws.has_credentials():
        from amibuild.errors import NoCredentials

        raise NoCredentials("clean-run: no AWS credentials found; set AWS_PROFILE or AWS_ACCESS_KEY_ID/"
                            "AWS_SECRET_ACCESS_KEY, or run `amibuild sandbox` for the local emulator")
    folder = run_directory(options, run_id)
    record = folder.parent / f"{run_id}.json"
    lines: list[str] = []
    for log in sorted(folder.glob("*/packer.log")):
        if log.is_file() and not log.is_symlink():  # a FIFO or a device would hang or never end
            lines += log.read_text(encoding="utf-8", errors="replace").splitlines()
    published = False
    if record.is_file() and not record.is_symlink():
        try:
            data = json.loads(record.read_text(encoding="utf-8"))
            published = any(isinstance(v, dict) and v.get("published") for v in data.get("variants") or ())
        except (OSError, ValueError, AttributeError, TypeError):
            published = False
    import tempfile

    from amibuild.bake.executor import temp_prefix

    scratch = sorted(str(p) for p in Path(tempfile.gettempdir()).glob(f"{temp_prefix(run_id)}*")
                     if p.is_dir() and not p.is_symlink())
    facts = cleanup.gather(aws, pipeline, run_id, lines, recorded=folder.is_dir() or record.is_file(),
                           record_published=published, temp_dirs=scratch)
    return cleanup.execute(aws, facts, cleanup.decide(facts), dry_run=dry_run)


# ------------------------------------------------------------------------------- channels


def channel_target(options: Options, variant: str | None):
    """(Aws, Pipeline, Variant) for publish / promote / rollback / history of one variant."""
    from amibuild.aws import Aws

    if not variant:
        raise SpecError("--variant: name the variant whose channel to change, e.g. --variant ceph")
    pipeline = load_pipeline(options)
    return Aws(profile=options.profile, region=pipeline.build_region), pipeline, pipeline.variants[0]
