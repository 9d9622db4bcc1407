"""The build-ami job: prepare → plan (skip unchanged) → write → record → bake → publish → record.

`build_ami(request, env)` is the command and `run` the whole job, from its request as the cli parsed
it. `settings` reads the config and the pipeline file once (while `packer version` runs beside it)
and refuses bad input before any AWS call.
The result, `BuildRun`, is composed of frozen parts that flowed forward — the plan, each
variant's `BuildOutcome` from the executor, each variant's `VariantPublished` from the publish
step — and `verdict` (pure) says what it means: nothing wrong, or the error to exit with.

The run record (`amibuild.bake.record`) is written before the run's first AWS write (state
``running``) and after its last (``finished``); a record that cannot be written at the start stops
the run before anything is built, at the end it is an error naming the AMIs made.
"""

from __future__ import annotations

import signal
import subprocess
import tempfile
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable, Mapping

from amibuild import __version__, tags, values
from amibuild.aws import Aws, beside, fan_out
from amibuild.aws.models import preload
from amibuild.jobs import ami_test
from amibuild.jobs import env as envs
from amibuild.jobs.build_steps import planned_steps
from amibuild.jobs.env import Env
from amibuild.jobs.requests_build import BuildRequest
from amibuild.jobs.shown import Shown
from amibuild.attest.sign import attestor as attestor_for
from amibuild.bake import record as records
from amibuild.bake.decide import ready_images
from amibuild.bake.executor import BuildGuards, BuildOutcome, BuildStatus, Executor
from amibuild.lease import Guard, Lease, build_lease_name
from amibuild.bake.leftovers import Scope
from amibuild.bake.packer import Packer, check_temp_room
from amibuild.bake.progress import Progress
from amibuild.bake.provenance import file_digest, provenance_statements
from amibuild.bake.build_plan import BuildPlan, PlanItem, new_run_id, plan_build, provenance_tags
from amibuild.bake.prepare import Prepared, Transform, prepare, support_warnings, write_all
from amibuild.channels import known, outgrown
from amibuild.channels.from_build import PublishMove, VariantPublished, check_shared, preview_publish, publish_build
from amibuild.channels.publish import check_channel
from amibuild.imagetest.after_build import boot_test_outcomes
from amibuild.errors import (AmibuildError, BuildFailed, ExitCode, Interrupted, NoCredentials, PackerInputRefused,
                             RecordNotWritten, SpecError)
from amibuild.pipeline import Pipeline, check_names
from amibuild.jobs.signals import Signals
from amibuild.pipeline.naming import parameter_name
from amibuild.pipeline.options import Options, load_pipeline
from amibuild.rehearse.overlay import check_privileges
from amibuild.rehearse.rehearse_job import rehearsal_check
from amibuild.render import Target
from amibuild.views import report, summary

Say = Callable[[str], None]


@dataclass(frozen=True)
class BuildSettings:
    """One run's request with what was settled before it starts: the pipeline file, packer, the channel
    (None: build only, --no-publish), the config's numbers, the boot test's settings (--boot-test), the
    render target and each channel write's lease settings (the run fills in its id and signals)."""

    request: BuildRequest
    options: Options
    pipeline: Pipeline
    packer: Packer
    channel: str | None
    max_parallel: int
    stall_after: float
    boot_test: Any  # imagetest.boot.BootTestSettings: boot each built image before publishing
    target: Target  # what the builds are rendered for (the platform's, `amibuild.jobs.platform`)
    transform: Transform | None  # applied to each real build before it is written (the platform's)
    channel_guard: Guard
    read_timeout: float | None  # seconds one channel request may wait for its answer (None: the gateway's)


def build_ami(r: BuildRequest, env: Env) -> Shown:
    return Shown(run(r, env), lines=report.build_lines, summary=summary.build_markdown)


def settings(r: BuildRequest, env: Env) -> BuildSettings:
    """The settings of one run: the flags and the config checked, the pipeline file read once, the
    channel checked, packer found. Bad input is refused here, before any AWS call."""
    options = envs.options(env, r)
    if r.allow_incomplete and not r.rehearse:
        raise SpecError("--allow-incomplete goes with --rehearse: it lets a variant whose rehearsal stopped at a "
                        "step it cannot rehearse be built")
    read_timeout = envs.read_timeout(env)  # the channel requests' and SendCommand's
    # what the config, the boot test's settings and the platform settle for the run
    settled = dict(max_parallel=envs.config_number(env, "max_parallel", 8, partial(values.count, maximum=256)),
                   stall_after=envs.config_number(env, "stall_after", 10.0, values.duration),
                   boot_test=ami_test.boot_test_settings(
                       options, boot_test=r.boot_test, cluster=r.cluster, read_timeout=read_timeout,
                       poll=env.platform().poll_seconds if r.boot_test or r.cluster else None),
                   **envs.target(env), channel_guard=envs.guard(env), read_timeout=read_timeout)
    channel, publish = r.channel, not r.no_publish
    packer = Packer(options.packer)
    with beside(packer.version) as version:
        pipeline = load_pipeline(options)  # bad input is refused before anything else
        if not publish and (channel or r.new_channel):
            raise SpecError(f"{'--channel' if channel else '--new-channel'} names the channel to publish to, and "
                            "--no-publish publishes nothing: give one or the other")
        # botocore parses the EC2 and SSM models while packer answers; no request is sent
        preload(options.profile, [("ec2", pipeline.build_region), ("ssm", pipeline.build_region)])
        if publish and channel:
            try:
                check_channel(channel)
            except SpecError as exc:
                raise SpecError(f"--channel: {exc}") from None
            # the parameter names this channel gives must be valid before anything is built
            check_names(pipeline, channel, f"--channel {channel}")
        chosen = (channel or pipeline.default_channel) if publish else None
        if chosen and pipeline.narrowed_out:  # a channel is written in every region or none
            raise SpecError(
                f"--region {' '.join(pipeline.regions)}: channel {chosen} lives in every region of the pipeline "
                f"({', '.join(pipeline.channel_regions)}), and this build would publish only "
                f"{', '.join(pipeline.target_regions)}, leaving {', '.join(pipeline.narrowed_out)} on another "
                "build; drop --region to build and publish every region, or pass --no-publish to build only")
        version()  # PackerNotFound before any AWS call
        check_temp_room(tempfile.gettempdir())  # where the builds' Packer processes keep their sockets
    if r.rehearse:
        check_privileges()  # --rehearse where it cannot run: refused before any AWS call
    return BuildSettings(r, options, pipeline, packer, chosen, **settled)


@dataclass(frozen=True)
class BuildRun:
    """One build-ami run: the plan, and (unless a dry run) what each variant's build and publish did."""

    plan: BuildPlan
    outcomes: tuple[BuildOutcome, ...] | None  # None: --dry-run
    record_path: Path | None
    published: Mapping[str, VariantPublished] = field(default_factory=dict)
    interrupted: bool = False
    aborted: bool = False  # a second Ctrl-C: packer killed before its cleanup finished
    sharing: tuple[str, ...] = ()  # launch/snapshot permissions missing for ami_users
    signal: str = ""  # the signal that stopped the publish step (SIGINT, SIGTERM, SIGHUP), if one did
    exit_code: int = ExitCode.INTERRUPTED  # when interrupted: 128 + that signal
    record_error: str = ""  # the run record could not be written: why
    # {variant: its provenance statement (`amibuild.attest.sign.Stored`)}, for the variants built in this run
    statements: Mapping[str, Any] = field(default_factory=dict)
    sboms: Mapping[str, Any] = field(default_factory=dict)  # {variant: `amibuild.bake.sboms.SbomStored`}
    scans: Mapping[str, Any] = field(default_factory=dict)  # --scan: {variant: `amibuild.jobs.image_inventory.Scanned`}
    publish_plan: tuple[PublishMove, ...] = ()  # --dry-run: what the publish step would write where
    steps: tuple[str, ...] = ()  # --dry-run: what the real run does around each build, from its flags

    def publish_of(self, name: str) -> VariantPublished | None:
        return self.published.get(name)

    @property
    def failed(self) -> list[BuildOutcome]:
        """Variants that failed to build, or built and were not published."""
        return [o for o in self.outcomes or []
                if o.failed or (self.publish_of(o.name) is not None and not self.publish_of(o.name).ok)]

    def variant_dict(self, outcome: BuildOutcome) -> dict:
        done = self.publish_of(outcome.name)
        kept = (("provenance", self.statements), ("sbom", self.sboms), ("scan", self.scans))
        return {**outcome.to_dict(), "published": done.published() if done else {},
                "publish_error": done.error if done else outcome.boot_error,
                **{key: made[outcome.name].to_dict() for key, made in kept if outcome.name in made}}

    def to_dict(self) -> dict:
        if self.outcomes is None:
            return {"dry_run": True, **self.plan.to_dict(), "steps": list(self.steps),
                    "publish": [m.to_dict() for m in self.publish_plan]}
        return {
            "run_id": self.plan.run_id,
            "regions": list(self.plan.regions),
            "interrupted": self.interrupted,
            "record": str(self.record_path) if self.record_path and not self.record_error else None,
            "record_error": self.record_error or None,
            "sharing": list(self.sharing),
            "variants": [self.variant_dict(o) for o in self.outcomes],
        }

    def raise_for_status(self) -> None:
        error = verdict(self)
        if error is not None:
            raise error


def verdict(run: BuildRun) -> AmibuildError | None:
    """What a finished run means: None (exit 0) or the error to exit with. Pure.

    Interrupted (exit 128 + signal) says what was published before; a failure to record the run
    names the AMIs made; Packer refusing only values the user gave is bad input (exit 2); any
    failed or unpublished variant is `BuildFailed` (exit 1).
    """
    outcomes = run.outcomes or ()
    refused = [m.variant for m in run.publish_plan if m.refused] if run.outcomes is None else []
    if refused:  # a dry run exits as the run would: a variant built and not published fails it
        return BuildFailed(f"{len(refused)} variant(s) would not be published: {', '.join(refused)} (see the plan)")
    if run.interrupted:
        published = [o.name for o in outcomes if run.publish_of(o.name) and run.publish_of(o.name).ok]
        others = [o.name for o in outcomes if o.name not in published]
        stuck = [o.name for o in outcomes if run.publish_of(o.name) and run.publish_of(o.name).stuck_regions]
        by = f" by {run.signal}" if run.signal else ""
        rest = (f"; not published: {', '.join(others)}" if others else "") + (
            f"; left partly written (see the run record): {', '.join(stuck)}" if stuck else "")
        text = (f"interrupted{by}: " + (
            f"published before the interrupt: {', '.join(published)} (every region){rest}"
            if published else f"nothing was published{rest if stuck else ''}") + (
            "; packer was killed before its cleanup finished" if run.aborted else "") + _left_behind(outcomes)
            + (f"; {run.record_error}{_made(outcomes)}" if run.record_error else ""))
        return Interrupted(text, run.exit_code or ExitCode.INTERRUPTED, summary=True)
    if run.record_error:
        return RecordNotWritten(f"{run.record_error}{_made(outcomes)}{_failed(outcomes)}{_left_behind(outcomes)}")
    failed = run.failed
    if failed and all(o.input_refused for o in failed) and not any(o.status == BuildStatus.BUILT for o in outcomes):
        # Packer refused values the user gave, before any instance started: bad input, exit 2
        return PackerInputRefused(failed[0].error)
    if failed:
        def why(o: BuildOutcome) -> str:
            done = run.publish_of(o.name)
            if done is not None and not done.ok and not o.failed:
                return f"{o.name} (not published: {done.error})"
            if o.boot_error:
                return f"{o.name} (not published: {o.boot_error})"
            return f"{o.name} (log: {o.log})" if o.log else f"{o.name} ({o.error})"
        return BuildFailed(f"{len(failed)} variant(s) failed: {', '.join(why(o) for o in failed)}"
                           f"{_left_behind(outcomes)}")
    return None


def _left_behind(outcomes) -> str:
    """What failed builds left in AWS that amibuild could not remove, with the commands that do."""
    items = [x for o in outcomes for x in o.left_behind]
    if not items:
        return ""
    return "; LEFT BEHIND (remove with): " + "; ".join(x["command"] for x in items)


def _failed(outcomes) -> str:
    failed = [f"{o.name} ({o.error})" for o in outcomes if o.status == BuildStatus.FAILED]
    return f"; failed: {', '.join(failed)}" if failed else ""


def _made(outcomes) -> str:
    amis = [f"{o.name} {r}={a}" for o in outcomes if o.status == BuildStatus.BUILT for r, a in sorted(o.amis.items())]
    return f"; AMIs made: {', '.join(amis)}" if amis else "; no AMI was made"


def run(r: BuildRequest, env: Env, *, progress=None) -> BuildRun:
    """render → validate → plan (skip unchanged) → packer build in parallel → artifacts → publish → record.

    Bad input is refused first (`settings`). An interrupted build publishes nothing. Each run works in
    its own folder, build/runs/<run id>/<variant>/, so concurrent runs never share files; with
    --no-wait a variant whose build lease another run holds fails at once instead of waiting.
    """
    return _run(settings(r, env), env.say, progress=progress)


def _run(settings: BuildSettings, say: Say, *, progress) -> BuildRun:
    options, pipeline = settings.options, settings.pipeline
    aws = Aws(profile=options.profile)
    if settings.read_timeout is not None:  # the publish step's channel requests, as publish's
        aws.ssm_read_timeout = settings.read_timeout
    if not aws.has_credentials():
        raise NoCredentials("build-ami: no AWS credentials found; set AWS_PROFILE or AWS_ACCESS_KEY_ID/"
                            "AWS_SECRET_ACCESS_KEY")
    if settings.channel:  # a typo would publish beside the channel meant (its gate walked around)
        known.require(aws, pipeline, pipeline.variants,
                      known.Asked(settings.channel, new_channel=settings.request.new_channel, can_create=True))
    if settings.boot_test is not None and settings.boot_test.cluster:
        # --boot-test --cluster C: the node group's user data for C (DescribeCluster), before anything is built
        from amibuild.handoff import testnode  # deferred: celpy and lark (the user data's CEL) only with --cluster

        user_data = testnode.user_data(aws, pipeline.variants, region=pipeline.build_region,
                                       cluster=settings.boot_test.cluster)
        settings = replace(settings, boot_test=replace(settings.boot_test, user_data=user_data))
    # beside the render: the channel's look for growth (it needs only the parameter names)
    regions = pipeline.target_regions
    with beside(lambda: find_grown(aws, pipeline, settings.channel)) as grown:
        prepared = prepare(options, aws=aws, strict=True, packer=settings.packer, pipeline=pipeline,
                           target=settings.target, transform=settings.transform)
        for line in support_warnings(pipeline):  # after every input check: bad input stays one line
            say(f"warning: {line}")
        existing = find_built_images(aws, regions, [r.fingerprint for r in prepared.rendered])
        refused = outgrown.refusal(settings.channel or "", grown(), regions)
    if refused is not None:  # refused here, before anything is built or written, not after the builds
        raise refused
    run_id = new_run_id()
    out_dir = records.run_directory(options.build_dir, run_id)
    plan = plan_build(prepared.pipeline, [(r, out_dir / r.variant.name) for r in prepared.rendered],
                      existing, force=settings.request.force, run_id=run_id)
    if settings.request.dry_run:  # the publish the real run would make is part of the plan
        moves = preview_publish(aws, plan, settings.channel, tested=settings.boot_test is not None,
                                scanned=settings.request.scan) if settings.channel else ()
        return BuildRun(plan, None, None, publish_plan=moves, steps=planned_steps(settings, plan))
    # only what will be built is written; `packer build` checks each template before it starts
    building = {item.name for item in plan.to_build}
    write_all(Prepared(prepared.pipeline, [r for r in prepared.rendered if r.variant.name in building],
                       prepared.packer_version, prepared.notes), options, say, out_dir)
    parallel = settings.request.parallel or min(len(plan.items), settings.max_parallel)
    return execute_plan(plan, settings, aws, say, parallel=parallel, progress=progress)


def find_grown(aws: Aws, pipeline: Pipeline, channel: str | None) -> dict[str, tuple[str, ...]]:
    """Whether the channel to publish to grew beyond this pipeline's regions
    (`amibuild.channels.outgrown`): {parameter: the regions it lives in}, empty when nothing grew
    or nothing is published."""
    if not channel:
        return {}
    names = [parameter_name(pipeline, variant, channel) for variant in pipeline.variants]
    return outgrown.find_outgrown(aws, pipeline.name, channel, names, pipeline.target_regions)


def find_built_images(aws, regions, fingerprints) -> dict:
    """amibuild's images with any of these fingerprints: one DescribeImages per region, in parallel."""
    if not fingerprints:
        return {}
    wanted = sorted(set(fingerprints))
    return fan_out(regions, lambda region: aws.describe_images(region, owners=["self"],
                                                               filters={f"tag:{tags.FINGERPRINT}": wanted}))


def guards(plan: BuildPlan, aws: Aws, *, wait: bool, stall_after: float) -> BuildGuards:
    """The executor's lease, reuse check and leftovers scope for a build-ami run."""
    pipeline = plan.pipeline

    def lease_for(item: PlanItem) -> Lease:
        name = build_lease_name(pipeline.ssm_prefix, pipeline.name, item.name, item.fingerprint)
        return Lease(aws, name, pipeline.build_region, run_id=plan.run_id)

    def reuse(item: PlanItem) -> dict | None:
        """The image another run finished meanwhile, when it is available in every region."""
        found = find_built_images(aws, plan.regions, [item.fingerprint])
        return ready_images(plan.regions, {r: [i for i in images if i.tags.get(tags.FINGERPRINT) == item.fingerprint]
                                           for r, images in found.items()})

    def scope(item: PlanItem) -> Scope:
        prefix = str(item.rendered.values.get("ami_name_prefix") or
                     f"{pipeline.name}-{item.name}-{item.rendered.variant.kubernetes_version}-{item.rendered.variant.arch}")
        return Scope(plan.run_id, item.name, prefix, tuple(pipeline.regions), tuple(plan.regions))

    return BuildGuards(lease_for=lease_for, wait=wait, reuse=reuse, leftovers_scope=scope, stall_after=stall_after)


def _record(plan: BuildPlan, commit: str | None, *, state: str, outcomes=(), published=None,
            interrupted: bool = False, signal: str = "", sharing=(), statements=None) -> dict:
    items = {i.name: i for i in plan.items}
    done = BuildRun(plan, tuple(outcomes), None, published or {}, statements=statements or {})
    return {
        "run_id": plan.run_id,
        "started": plan.started,
        "state": state,
        "amibuild_version": __version__,
        "git_commit": commit,
        "pipeline": str(plan.pipeline.source) if plan.pipeline.source else None,
        "regions": list(plan.regions),
        "force": plan.force,
        "interrupted": interrupted,
        "signal": signal or None,
        "variants": [
            {**done.variant_dict(o), "inputs": items[o.name].rendered.variant.settings(),
             "source_amis": {r: s.image_id for r, s in items[o.name].rendered.sources.items()}}
            for o in outcomes
        ] if outcomes else [
            {"name": i.name, "status": "planned", "decision": str(i.decision), "fingerprint": i.fingerprint,
             "reason": i.reason} for i in plan.items
        ],
        "sharing": list(sharing),
    }


SCANNING = ("finishing the scan under way, then stopping; nothing is published",
            "still finishing the scan under way")
STORING = ("storing the SBOMs and statements of the images built, then stopping; nothing is published",
           "still storing the SBOMs and statements of the images built")


def execute_plan(plan: BuildPlan, settings: BuildSettings, aws: Aws, say: Say, *, parallel: int,
                 progress=None) -> BuildRun:
    options = settings.options
    commit = git_commit(plan.pipeline.source.parent if plan.pipeline.source else Path.cwd())
    path = records.record_path(options.build_dir, plan.run_id)
    # before the first AWS write (the build leases, Packer): a run that cannot be recorded does not start
    records.write_record(path, _record(plan, commit, state="running"))
    attestor, digest = None, None
    if plan.to_build:
        # asked before the builds, so that "unsigned" is said before a build of many minutes, not after it
        attestor, digest = attestor_for(aws, plan.pipeline, say), file_digest(plan.pipeline.source)
    own_progress = progress is None
    progress = progress or Progress([i.name for i in plan.items], verbose=settings.request.verbose)
    check = None  # `packer build` checks each template itself before its first step
    if settings.request.rehearse:  # each variant's chain rehearsed just before its Packer build; a failure stops that variant
        check = rehearsal_check(plan, check, say, allow_incomplete=settings.request.allow_incomplete)
    try:
        executor = Executor(
            plan, settings.packer, aws,
            provenance=lambda item: provenance_tags(item, plan, version=__version__, git_commit=commit),
            check=check, progress=progress, parallel=parallel, timeout=settings.request.timeout,
            guards=guards(plan, aws, wait=not settings.request.no_wait, stall_after=settings.stall_after),
        )
        outcomes = executor.build()
    finally:
        if own_progress:
            progress.close()
    sharing: list[str] = []
    published: dict[str, VariantPublished] = {}
    interrupted, signum = executor.state.interrupted, executor.state.signum
    stopped_by, exit_code = (signal.Signals(signum).name, ExitCode.for_signal(signum)) if signum else \
        ("", ExitCode.INTERRUPTED)
    statements: dict[str, Any] = {}
    sboms: dict[str, Any] = {}
    if attestor is not None and not interrupted:
        from amibuild.bake.sboms import store_sboms  # deferred: cyclonedx-python-lib only when something was built

        # a signal lets these few writes end, then the run stops and is recorded with its images
        with Signals(STORING) as stop:
            # each built variant's SBOM, stored beside its statements; its digest goes into the provenance
            sboms = dict(store_sboms(aws, attestor.where, plan, outcomes))
            for name, kept in sorted(sboms.items()):
                say(f"{'warning: ' if kept.error else ''}{name}: {kept.line()}")
            # each built variant's provenance, signed and stored before its boot test and its publish
            statements = dict(provenance_statements(attestor, plan, outcomes, version=__version__, git_commit=commit,
                                                    packer_version=str(settings.packer.version()), pipeline_digest=digest,
                                                    package_lists={n: k.digest for n, k in sboms.items()}))
            for name, stored in sorted(statements.items()):
                say(f"{'warning: ' if stored.error else ''}{name}: {stored.line()}")
        if stop.requested():
            interrupted, stopped_by, exit_code = True, stop.name, stop.exit_code
    scans: dict[str, Any] = {}
    if settings.request.scan and attestor is not None and not interrupted:  # --scan: before anything is published
        from amibuild.jobs.image_inventory import scan_built  # deferred: cyclonedx-python-lib and cryptography only with --scan
        with Signals(SCANNING) as stop:  # the scan under way ends, its statement stored; the rest are not started
            scans = scan_built(aws, attestor, plan, sboms, say, cancelled=stop.requested)
        if stop.requested():
            interrupted, stopped_by, exit_code = True, stop.name, stop.exit_code
    if settings.boot_test is not None and not interrupted:  # --boot-test: before anything is published
        with Signals() as stop:  # a signal stops the tests at their next poll; each terminates its instance
            outcomes, finished = boot_test_outcomes(aws, plan, outcomes, settings.boot_test,
                                                    cancelled=stop.requested, say=say, attestor=attestor)
        if not finished or stop.requested():
            interrupted, stopped_by, exit_code = True, stop.name, stop.exit_code
    if settings.channel and not interrupted:
        # A signal here lets the channel writes in flight finish (or put back) and starts no other;
        # the run is then recorded as interrupted, with what each variant's channel did.
        with Signals() as signals:
            try:
                published = publish_build(aws, plan, outcomes, settings.channel, say, cancelled=signals.requested,
                                          guard=settings.channel_guard)
            except Exception as exc:  # the step as a whole (its first reads, a bug): the builds and the record stand
                published = not_published(outcomes, settings.channel, exc)
            if not signals.requested():
                try:
                    sharing = check_shared(aws, plan, outcomes)
                except AmibuildError as exc:
                    sharing = [f"the images' launch and snapshot permissions could not be checked: {exc}"]
        if signals.requested():
            interrupted, stopped_by, exit_code = True, signals.name, signals.exit_code
    result = BuildRun(plan, outcomes, path, published, interrupted, executor.state.aborted, tuple(sharing),
                      stopped_by, exit_code, statements=statements, sboms=sboms, scans=scans)
    try:
        records.write_record(path, _record(plan, commit, state="finished", outcomes=outcomes, published=published,
                                           interrupted=interrupted, signal=stopped_by, sharing=sharing,
                                           statements=statements))
    except RecordNotWritten as exc:
        return replace(result, record_error=str(exc))
    return result


def not_published(outcomes, channel: str, exc: Exception) -> dict[str, VariantPublished]:
    """Every variant with an image, not published because the publish step failed as a whole."""
    why = str(exc) if isinstance(exc, AmibuildError) else f"{type(exc).__name__}: {exc}"
    return {o.name: VariantPublished(o.name, channel, error=f"the publish step failed: {why}")
            for o in outcomes if o.status.has_image and not o.failed}


def git_commit(directory: Path) -> str | None:
    """The pipeline repository's HEAD commit, or None outside a git work tree."""

    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=directory, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None
