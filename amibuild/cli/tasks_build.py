"""The build tasks: render, validate, build-ami, rehearse, the runs and their clean-up, the CI
matrix, and the image tests (tests, test-ami).

Each task is declared by its request (`amibuild.cli.command`): the request's fields
are the task's flags. Part of the task table `amibuild.cli.tasks` assembles.
"""

from dataclasses import dataclass
from functools import partial


from amibuild.cli import report, summary, values
from amibuild.cli.command import command, flag, like
from amibuild.errors import Interrupted, SpecError
from amibuild.cli import run as cli
from amibuild.cli.tasks_common import MARKDOWN_HELP, Output, Selection, _channel_deadline, _read_timeout, _target



@dataclass(frozen=True)
class RenderRequest(Selection, Output):
    """`amibuild render` and `amibuild validate`."""

    json: bool = flag("Print what was rendered (folders, fingerprints, source AMIs, notes) as JSON on stdout", False)


@command(RenderRequest)
def render(c, request: RenderRequest):
    """Render Packer HCL2 for each variant into build/<variant>/."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.bake import prepare

    result = cli.run(lambda: prepare.render(cli.options(c, request), cli.say, **_target()))
    cli.lines(f"note: {n}" for n in result.notes)
    if request.json:
        cli.emit_json(result.to_dict())
    else:
        cli.lines_out(report.render_lines(result))


@command(RenderRequest)
def validate(c, request: RenderRequest):
    """Render, then check every file: python-hcl2 parse, packer validate, packer fmt -check."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.bake import prepare

    result = cli.run(lambda: prepare.validate(cli.options(c, request), cli.say, **_target()))
    if request.json:
        cli.emit_json({"packer_version": result.packer_version, "valid": result.checked,
                       "directories": [str(d) for d in result.directories]})
    else:
        print(f"{len(result.checked)} variant(s) valid with packer {result.packer_version}: "
              f"{', '.join(result.checked)}")


@dataclass(frozen=True)
class BuildRequest(Selection, Output):
    """`amibuild build-ami`."""

    all: bool = flag("Build every variant of the pipeline file (the default when no --variant is given)", False)
    force: bool = flag("Rebuild even when an image with the same fingerprint exists", False)
    dry_run: bool = flag("Print the plan (what would be built, what skipped and why) and exit", False)
    json: bool = flag("Print one JSON summary on stdout (progress goes to stderr)", False)
    parallel: int | None = flag("Packer builds at once (default: every variant, capped by amibuild.max_parallel)",
                                cast=partial(values.optional_count, example=4))
    timeout: float | None = flag("Give up on a variant's build after this long: seconds, or 90s, 45m, 2h",
                                 cast=partial(values.optional_duration, example="90m or 5400"))
    channel: str | None = flag("Channel to publish each built or reused image to (default: the pipeline's "
                               "default_channel, else recommended)")
    no_publish: bool = flag("Build only; publish nothing", False)
    verbose: bool = flag("Show each Packer step as it happens (default: a line per variant's phase; every step is "
                         "always in the variant's packer.log)", False)
    new_channel: bool = flag("--channel is a new name: neither declared (a `channel` block, default_channel, "
                             "recommended, candidate, stable) nor there yet for every variant; without it such a "
                             "name is refused as a typo", False)
    rehearse: bool = flag("Rehearse each variant's provisioning chain first (as `amibuild rehearse`, needs root); a "
                          "failing or incomplete rehearsal fails that variant before its Packer build starts", False)
    allow_incomplete: bool = flag("With --rehearse: build a variant whose rehearsal stopped at a step it cannot "
                                  "rehearse", False)
    no_wait: bool = flag("When another run is building a variant with the same inputs, fail (exit 1, naming that "
                         "run) instead of waiting for it and reusing its image", False)
    markdown: bool = flag(MARKDOWN_HELP, False)
    boot_test: bool = flag("Boot each built image (`amibuild test-ami`, in parallel) before publishing; a variant "
                           "whose boot test fails is not published (exit 1), the others go on", False)
    scan: bool = flag("Scan each built image's SBOM with Amazon Inspector (ScanSbom) before publishing; the findings "
                      "are kept as a signed scan statement, which a channel's `requires = [\"scanned\"]` gate reads",
                      False)
    cluster: str | None = flag("With --boot-test: EKS cluster each test node joins, tainted "
                               "amibuild.io/test:NoSchedule, and must get Ready in (default: the pipeline's test "
                               "{ cluster }; needs amibuild[cluster] and a kubeconfig)")


@command(BuildRequest)
def build_ami(c, request: BuildRequest):
    """Render, validate and build the AMIs with Packer in parallel; skip what is unchanged."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.jobs import build_ami as job

    opts = cli.options(c, request)
    if request.allow_incomplete and not request.rehearse:
        cli.run(lambda: _refuse("--allow-incomplete goes with --rehearse: it lets a variant whose rehearsal "
                                "stopped at a step it cannot rehearse be built"))
    run = cli.run(lambda: job.run(job.settings(
        opts, channel=request.channel, publish=not request.no_publish, new_channel=request.new_channel,
        force=request.force, dry_run=request.dry_run, parallel=request.parallel,
        max_parallel=values.count(c.config.amibuild.max_parallel, "amibuild.max_parallel (config)", maximum=256),
        timeout=request.timeout, rehearse=request.rehearse, allow_incomplete=request.allow_incomplete,
        wait=not request.no_wait,
        stall_after=values.duration(c.config.amibuild.get("stall_after", 10), "amibuild.stall_after (config)"),
        boot_test=_boot_test_settings(opts, request.boot_test, request.cluster, _read_timeout(c)), **_target(),
        channel_deadline=_channel_deadline(c), verbose=request.verbose, scan=request.scan,
    ), cli.say))
    if request.json:
        cli.emit_json(run.to_dict())
    elif not request.markdown:
        cli.lines_out(report.build_lines(run))
    summary.publish(summary.build_markdown(run), to_stdout=request.markdown)
    cli.finish(run)


def _refuse(message: str):
    raise SpecError(message)


def _boot_test_settings(opts, boot_test: bool, cluster: str | None, read_timeout: float | None):
    """build-ami --boot-test [--cluster C]: the pipeline's test { ... } block with --cluster over it, and
    config `amibuild.read_timeout` for SendCommand / GetCommandInvocation, as test-ami takes it."""
    if not boot_test and not cluster:  # no boot test: none of its machinery is imported
        return None
    from amibuild.cli.image_tests import boot_test_settings  # deferred: not on the `amibuild --list` path

    return cli.run(lambda: boot_test_settings(opts, boot_test=boot_test, cluster=cluster, read_timeout=read_timeout))


@dataclass(frozen=True)
class RehearseRequest(Selection):
    """`amibuild rehearse`: writes nothing, calls no AWS (no --build-dir, no --profile)."""

    json: bool = flag("Print the reports as JSON on stdout (progress goes to stderr)", False)
    keep: bool = flag("Keep the overlay's upper layer (every file the chain wrote) and print where it is", False)
    timeout: float | None = flag("Stop a variant's rehearsal after this many seconds (default 600)",
                                 cast=partial(values.optional_duration, example="600 or 10m"))
    markdown: bool = flag(MARKDOWN_HELP, False)
    allow_incomplete: bool = flag("Exit 0 when a rehearsal stopped at a step it cannot rehearse (default: exit 3)",
                                  False)


@command(RehearseRequest)
def rehearse(c, request: RehearseRequest):
    """Run each variant's provisioners here, in a throwaway copy of this machine, before any instance exists."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.pipeline.options import load_pipeline
    from amibuild.rehearse import rehearse_job as job
    from amibuild.rehearse import rehearsal_report as rehearse_report

    opts = cli.options(c, request)

    def settings() -> job.RehearseSettings:
        return job.RehearseSettings(opts, load_pipeline(opts), keep=request.keep,
                                    timeout=request.timeout or job.DEFAULT_TIMEOUT, refuse=job.refused_packages(),
                                    allow_incomplete=request.allow_incomplete)

    result = cli.run(lambda: job.run(settings(), cli.say))
    if request.json:
        cli.emit_json([r.to_dict() for r in result.reports])
    elif not request.markdown:
        cli.lines_out(line for r in result.reports for line in rehearse_report.lines(r))
    summary.publish(summary.rehearse_markdown(result.reports), to_stdout=request.markdown)
    cli.finish(result)


@dataclass(frozen=True)
class RunsRequest:
    """`amibuild runs`."""

    limit: int = flag("How many runs to show (default 10)", 10, cast=partial(values.count, example=10))
    json: bool = flag("Print JSON", False)
    build_dir: str | None = like(Output, "build_dir")


@command(RunsRequest, shortflags=True)
def runs(c, request: RunsRequest):
    """List recent build runs and what each did."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.bake import record

    records = cli.run(lambda: record.list_runs(cli.options(c, request, announce=False).build_dir, request.limit))
    if request.json:
        cli.emit_json([r.to_dict() for r in records])
    else:
        print("\n".join(report.runs_lines(records)))


@dataclass(frozen=True)
class CleanRunRequest:
    """`amibuild clean-run` (its short flags follow this order: -r, -d, -j, -p, -o, -b)."""

    run_id: str | None = flag("The build run whose leftovers to remove (`amibuild runs` lists them)")
    dry_run: bool = flag("List what the run left behind and remove nothing", False)
    json: bool = flag("Print JSON", False)
    pipeline: str | None = like(Selection, "pipeline")
    profile: str | None = like(Output, "profile")
    build_dir: str | None = like(Output, "build_dir")


@command(CleanRunRequest, shortflags=True)
def clean_run(c, request: CleanRunRequest):
    """Remove what an unfinished build run left in AWS (never an image in use); say what it kept and why."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.lifecycle import clean

    opts = cli.options(c, request)
    result = cli.run(lambda: clean.run(clean.settings(opts, request.run_id, dry_run=request.dry_run)))
    if request.json:
        cli.emit_json(result.to_dict())
    else:
        if not result.found and not result.leases and not result.temp_dirs:
            print(f"run {result.run_id}: nothing left behind")
        if result.dry_run:
            kept = {item for item, _ in result.kept}
            for item in result.found:
                if item not in kept:
                    print(f"found  {item}  ({item.command()})")
            for lease in result.leases:
                print(f"found  {lease}  (held by {lease.holder})")
            for folder in result.temp_dirs:
                print(f"found  {folder}  ({folder.command()})")
        for item, why in result.kept:
            print(f"kept  {item}: {why}")
        for item in result.removed:
            print(f"removed  {item}")
        for item, why in result.failed:
            print(f"LEFT BEHIND  {item}: {why}; remove with: {item.command()}")
    cli.finish(result)


@dataclass(frozen=True)
class MatrixRequest:
    """`amibuild matrix`."""

    pipeline: str | None = like(Selection, "pipeline")
    variant: tuple[str, ...] = like(Selection, "variant")
    json: bool = flag("Print the matrix as JSON on stdout", False)
    github: bool = flag("Append matrix=<json> to $GITHUB_OUTPUT (GitHub Actions) and print that line", False)


@command(MatrixRequest)
def matrix(c, request: MatrixRequest):
    """Print the variants as a CI matrix, so each runner builds one variant."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.pipeline.options import load_pipeline
    from amibuild.pipeline import matrix as matrix_mod

    value = cli.run(lambda: matrix_mod.matrix(load_pipeline(cli.options(c, request))))
    written = cli.run(lambda: matrix_mod.github_output(value)) if request.github else None
    if request.json:
        cli.emit_json(value)
    else:
        print(written or "\n".join(matrix_mod.table(value)))


@dataclass(frozen=True)
class TestsRequest:
    """`amibuild tests`."""

    __test__ = False  # pytest: not a test class
    pipeline: str | None = like(Selection, "pipeline")
    variant: tuple[str, ...] = like(Selection, "variant")
    json: bool = flag("Print JSON", False)


@command(TestsRequest)
def tests(c, request: TestsRequest):
    """List the checks each variant's image must pass: built-in (per OS and flavor) and the pipeline file's."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.cli import image_tests as imagetests
    from amibuild.pipeline.options import load_pipeline

    entries = cli.run(lambda: imagetests.listing(load_pipeline(cli.options(c, request))))
    cli.emit_json(entries) if request.json else cli.lines_out(imagetests.listing_lines(entries))


@dataclass(frozen=True)
class TestAmiRequest(Output):
    """`amibuild test-ami`."""

    __test__ = False  # pytest: not a test class
    variant: str | None = flag("Variant whose image to test", required="test-ami: --variant: name the variant whose "
                               "image to test, e.g. --variant ceph")
    ami: str | None = flag("The image to boot, in the build region (its copies are tagged with the result too)")
    run_id: str | None = flag("Test the image a build run made of the variant")
    cluster: str | None = flag("EKS cluster the test node joins (tainted amibuild.io/test:NoSchedule)")
    subnet: str | None = flag("Subnet of the test instance (default: the pipeline's test { subnet_id })")
    security_group: str | None = flag("Security group of the test instance (default: test { security_group_id })")
    instance_profile: str | None = flag("Instance profile of the test instance, with SSM access (default: test "
                                        "{ instance_profile })")
    instance_type: str | None = flag("Instance type (default: test { instance_type }, else the variant's)")
    timeout: float | None = flag("Give up after this long: seconds, or 15m (default: test { timeout }, else 15m)",
                                 cast=partial(values.optional_duration, example="15m or 900"))
    pipeline: str | None = like(Selection, "pipeline")
    json: bool = flag("Print the result as JSON on stdout", False)


@command(TestAmiRequest)
def test_ami(c, request: TestAmiRequest):
    """Boot the image, run every check through SSM Run Command, terminate it; tag the image passed or failed."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.cli import image_tests as imagetests
    from amibuild.imagetest import boot
    from amibuild.jobs.signals import Signals

    opts = cli.options(c, request)
    flags = {"cluster": request.cluster, "subnet_id": request.subnet, "security_group_id": request.security_group,
             "instance_profile": request.instance_profile, "instance_type": request.instance_type,
             "read_timeout": _read_timeout(c), "timeout": request.timeout}  # config amibuild.read_timeout: SendCommand's too
    with Signals(imagetests.BOOT_TEST_SIGNALS) as stop:
        def guarded():
            try:
                return imagetests.test_ami(opts, ami=request.ami, run_id=request.run_id, flags=flags, say=cli.say,
                                           stop=stop)
            except BaseException:
                if stop.requested():
                    raise Interrupted("interrupted: the boot test stopped and its instance was terminated",
                                      stop.exit_code) from None
                raise

        result, record = cli.run(guarded)
    cli.emit_json(result.to_dict()) if request.json else cli.lines_out([*boot.report_lines(result), f"record: {record}"])
    cli.finish(result)
