"""The build tasks: render, validate, build-ami, rehearse, the runs and their clean-up, the CI
matrix, and the image tests (tests, test-ami).

Part of the task table `amibuild.cli.tasks` assembles (its docstring says how flags and
imports are kept fast).
"""

from invoke import task

from amibuild.cli import report, summary, values
from amibuild.errors import Interrupted, SpecError
from amibuild.cli import run as cli
from amibuild.cli.tasks_common import SELECT_HELP, REPEATABLE, _channel_deadline, _read_timeout, _target, select_flags


@task(help=SELECT_HELP, iterable=REPEATABLE, auto_shortflags=False)
def render(c, pipeline=None, variant=None, base=None, upstream=None, upstream_ref=None, os_=None, k8s=None,
           arch=None, region=None, extra_pkg=None, extra_repo=None, var=None, var_file=None, build_dir=None,
           profile=None, json=False, flavor=None):
    """Render Packer HCL2 for each variant into build/<variant>/."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.bake import prepare

    opts = cli.options(c, **select_flags(pipeline, variant, base, upstream, upstream_ref, os_, k8s, arch, region,
                                         extra_pkg, extra_repo, var, var_file, flavor),
                       build_dir=build_dir, profile=profile)
    result = cli.run(lambda: prepare.render(opts, cli.say, **_target()))
    cli.lines(f"note: {n}" for n in result.notes)
    if json:
        cli.emit_json(result.to_dict())
    else:
        cli.lines_out(report.render_lines(result))


@task(help=SELECT_HELP, iterable=REPEATABLE, auto_shortflags=False)
def validate(c, pipeline=None, variant=None, base=None, upstream=None, upstream_ref=None, os_=None, k8s=None,
             arch=None, region=None, extra_pkg=None, extra_repo=None, var=None, var_file=None, build_dir=None,
             profile=None, json=False, flavor=None):
    """Render, then check every file: python-hcl2 parse, packer validate, packer fmt -check."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.bake import prepare

    opts = cli.options(c, **select_flags(pipeline, variant, base, upstream, upstream_ref, os_, k8s, arch, region,
                                         extra_pkg, extra_repo, var, var_file, flavor),
                       build_dir=build_dir, profile=profile)
    result = cli.run(lambda: prepare.validate(opts, cli.say, **_target()))
    if json:
        cli.emit_json({"packer_version": result.packer_version, "valid": result.checked,
                       "directories": [str(d) for d in result.directories]})
    else:
        print(f"{len(result.checked)} variant(s) valid with packer {result.packer_version}: "
              f"{', '.join(result.checked)}")


BUILD_HELP = {
    **SELECT_HELP,
    "all": "Build every variant of the pipeline file (the default when no --variant is given)",
    "force": "Rebuild even when an image with the same fingerprint exists",
    "dry_run": "Print the plan (what would be built, what skipped and why) and exit",
    "json": "Print one JSON summary on stdout (progress goes to stderr)",
    "parallel": "Packer builds at once (default: every variant, capped by amibuild.max_parallel)",
    "timeout": "Give up on a variant's build after this long: seconds, or 90s, 45m, 2h",
    "channel": "Channel to publish each built or reused image to (default: the pipeline's default_channel, "
               "else recommended)",
    "no_publish": "Build only; publish nothing",
    "verbose": "Show each Packer step as it happens (default: a line per variant's phase; every step is always "
               "in the variant's packer.log)",
    "new_channel": "--channel is a new name: neither declared (a `channel` block, default_channel, recommended, "
                   "candidate, stable) nor there yet for every variant; without it such a name is refused as a typo",
    "rehearse": "Rehearse each variant's provisioning chain first (as `amibuild rehearse`, needs root); a failing "
                "or incomplete rehearsal fails that variant before its Packer build starts",
    "allow_incomplete": "With --rehearse: build a variant whose rehearsal stopped at a step it cannot rehearse",
    "no_wait": "When another run is building a variant with the same inputs, fail (exit 1, naming that run) "
               "instead of waiting for it and reusing its image",
    "markdown": "Print a Markdown summary on stdout (what is appended to $GITHUB_STEP_SUMMARY in GitHub Actions)",
    "boot_test": "Boot each built image (`amibuild test-ami`, in parallel) before publishing; a variant whose "
                 "boot test fails is not published (exit 1), the others go on",
    "scan": "Scan each built image's SBOM with Amazon Inspector (ScanSbom) before publishing; the findings are kept "
            "as a signed scan statement, which a channel's `requires = [\"scanned\"]` gate reads",
    "cluster": "With --boot-test: EKS cluster each test node joins, tainted amibuild.io/test:NoSchedule, and must "
               "get Ready in (default: the pipeline's test { cluster }; needs amibuild[cluster] and a kubeconfig)",
}


@task(help=BUILD_HELP, iterable=REPEATABLE, auto_shortflags=False)
def build_ami(c, pipeline=None, variant=None, all=False, base=None, upstream=None, upstream_ref=None, os_=None,
              k8s=None, arch=None, region=None, extra_pkg=None, extra_repo=None, var=None, var_file=None,
              build_dir=None, profile=None, force=False, dry_run=False, json=False, parallel=None, timeout=None,
              channel=None, no_publish=False, rehearse=False, flavor=None, no_wait=False, allow_incomplete=False,
              markdown=False, boot_test=False, cluster=None, new_channel=False, verbose=False, scan=False):
    """Render, validate and build the AMIs with Packer in parallel; skip what is unchanged."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.jobs import build_ami as job

    opts = cli.options(c, **select_flags(pipeline, variant, base, upstream, upstream_ref, os_, k8s, arch, region,
                                         extra_pkg, extra_repo, var, var_file, flavor),
                       all=all, build_dir=build_dir, profile=profile)
    if allow_incomplete and not rehearse:
        cli.run(lambda: _refuse("--allow-incomplete goes with --rehearse: it lets a variant whose rehearsal "
                                "stopped at a step it cannot rehearse be built"))
    run = cli.run(lambda: job.run(job.settings(
        opts, channel=channel, publish=not no_publish, new_channel=new_channel, force=force, dry_run=dry_run,
        parallel=values.optional_count(parallel, "--parallel", example=4),
        max_parallel=values.count(c.config.amibuild.max_parallel, "amibuild.max_parallel (config)", maximum=256),
        timeout=values.optional_duration(timeout, "--timeout", example="90m or 5400"),
        rehearse=rehearse, allow_incomplete=allow_incomplete, wait=not no_wait,
        stall_after=values.duration(c.config.amibuild.get("stall_after", 10), "amibuild.stall_after (config)"),
        boot_test=_boot_test_settings(opts, boot_test, cluster, _read_timeout(c)), **_target(),
        channel_deadline=_channel_deadline(c), verbose=verbose, scan=scan,
    ), cli.say))
    if json:
        cli.emit_json(run.to_dict())
    elif not markdown:
        cli.lines_out(report.build_lines(run))
    summary.publish(summary.build_markdown(run), to_stdout=markdown)
    cli.finish(run)


def _refuse(message: str):
    raise SpecError(message)


def _boot_test_settings(opts, boot_test: bool, cluster: str | None, read_timeout: float | None):
    """build-ami --boot-test [--cluster C]: the pipeline's test { ... } block with --cluster over it, and
    config `amibuild.read_timeout` for SendCommand / GetCommandInvocation, as test-ami takes it."""
    if not boot_test and not cluster:  # no boot test: none of its machinery is imported
        return None
    from amibuild.cli.imagetests import boot_test_settings  # deferred: not on the `amibuild --list` path

    return cli.run(lambda: boot_test_settings(opts, boot_test=boot_test, cluster=cluster, read_timeout=read_timeout))


REHEARSE_HELP = {
    **{k: v for k, v in SELECT_HELP.items() if k not in ("build_dir", "profile")},  # writes nothing, no AWS
    "json": "Print the reports as JSON on stdout (progress goes to stderr)",
    "keep": "Keep the overlay's upper layer (every file the chain wrote) and print where it is",
    "timeout": "Stop a variant's rehearsal after this many seconds (default 600)",
    "markdown": "Print a Markdown summary on stdout (what is appended to $GITHUB_STEP_SUMMARY in GitHub Actions)",
    "allow_incomplete": "Exit 0 when a rehearsal stopped at a step it cannot rehearse (default: exit 3)",
}


@task(help=REHEARSE_HELP, iterable=REPEATABLE, auto_shortflags=False)
def rehearse(c, pipeline=None, variant=None, base=None, upstream=None, upstream_ref=None, os_=None, k8s=None,
             arch=None, region=None, extra_pkg=None, extra_repo=None, var=None, var_file=None, json=False,
             keep=False, timeout=None, flavor=None, allow_incomplete=False, markdown=False):
    """Run each variant's provisioners here, in a throwaway copy of this machine, before any instance exists."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.pipeline.options import load_pipeline
    from amibuild.rehearse import job
    from amibuild.rehearse import report as rehearse_report

    opts = cli.options(c, **select_flags(pipeline, variant, base, upstream, upstream_ref, os_, k8s, arch, region,
                                         extra_pkg, extra_repo, var, var_file, flavor))

    def settings() -> job.RehearseSettings:
        seconds = values.optional_duration(timeout, "--timeout", example="600 or 10m") or job.DEFAULT_TIMEOUT
        return job.RehearseSettings(opts, load_pipeline(opts), keep=keep, timeout=seconds,
                                    refuse=job.refused_packages(), allow_incomplete=allow_incomplete)

    result = cli.run(lambda: job.run(settings(), cli.say))
    if json:
        cli.emit_json([r.to_dict() for r in result.reports])
    elif not markdown:
        cli.lines_out(line for r in result.reports for line in rehearse_report.lines(r))
    summary.publish(summary.rehearse_markdown(result.reports), to_stdout=markdown)
    cli.finish(result)


@task(help={"limit": "How many runs to show (default 10)", "json": "Print JSON", "build_dir": SELECT_HELP["build_dir"]})
def runs(c, limit=10, json=False, build_dir=None):
    """List recent build runs and what each did."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.bake import record

    records = cli.run(lambda: record.list_runs(cli.options(c, build_dir=build_dir, announce=False).build_dir,
                                               values.count(limit, "--limit", example=10)))
    if json:
        cli.emit_json([r.to_dict() for r in records])
    else:
        print("\n".join(report.runs_lines(records)))


@task(help={"run_id": "The build run whose leftovers to remove (`amibuild runs` lists them)",
            "dry_run": "List what the run left behind and remove nothing",
            "json": "Print JSON", "pipeline": SELECT_HELP["pipeline"], "profile": SELECT_HELP["profile"],
            "build_dir": SELECT_HELP["build_dir"]})
def clean_run(c, run_id=None, dry_run=False, json=False, pipeline=None, profile=None, build_dir=None):
    """Remove what an unfinished build run left in AWS (never an image in use); say what it kept and why."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.lifecycle import clean

    opts = cli.options(c, pipeline=pipeline, profile=profile, build_dir=build_dir)
    result = cli.run(lambda: clean.run(clean.settings(opts, run_id, dry_run=dry_run)))
    if json:
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


@task(help={"pipeline": SELECT_HELP["pipeline"], "variant": SELECT_HELP["variant"],
            "json": "Print the matrix as JSON on stdout",
            "github": "Append matrix=<json> to $GITHUB_OUTPUT (GitHub Actions) and print that line"},
      iterable=["variant"], auto_shortflags=False)
def matrix(c, pipeline=None, variant=None, json=False, github=False):
    """Print the variants as a CI matrix, so each runner builds one variant."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.pipeline.options import load_pipeline
    from amibuild.pipeline import matrix as matrix_mod

    opts = cli.options(c, pipeline=pipeline, variant=variant)
    value = cli.run(lambda: matrix_mod.matrix(load_pipeline(opts)))
    written = cli.run(lambda: matrix_mod.github_output(value)) if github else None
    if json:
        cli.emit_json(value)
    else:
        print(written or "\n".join(matrix_mod.table(value)))


@task(help={"pipeline": SELECT_HELP["pipeline"], "variant": SELECT_HELP["variant"], "json": "Print JSON"},
      iterable=["variant"], auto_shortflags=False)
def tests(c, pipeline=None, variant=None, json=False):
    """List the checks each variant's image must pass: built-in (per OS and flavor) and the pipeline file's."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.cli import imagetests
    from amibuild.pipeline.options import load_pipeline

    opts = cli.options(c, pipeline=pipeline, variant=variant)
    entries = cli.run(lambda: imagetests.listing(load_pipeline(opts)))
    cli.emit_json(entries) if json else cli.lines_out(imagetests.listing_lines(entries))


@task(help={"variant": "Variant whose image to test", "ami": "The image to boot, in the build region (its copies "
             "are tagged with the result too)", "run_id": "Test the image a build run made of the variant",
             "cluster": "EKS cluster the test node joins (tainted amibuild.io/test:NoSchedule)",
             "subnet": "Subnet of the test instance (default: the pipeline's test { subnet_id })",
             "security_group": "Security group of the test instance (default: test { security_group_id })",
             "instance_profile": "Instance profile of the test instance, with SSM access (default: test { instance_profile })",
             "instance_type": "Instance type (default: test { instance_type }, else the variant's)",
             "timeout": "Give up after this long: seconds, or 15m (default: test { timeout }, else 15m)",
             "pipeline": SELECT_HELP["pipeline"], "profile": SELECT_HELP["profile"], "build_dir": SELECT_HELP["build_dir"],
             "json": "Print the result as JSON on stdout"}, auto_shortflags=False)
def test_ami(c, variant=None, ami=None, run_id=None, cluster=None, subnet=None, security_group=None,
             instance_profile=None, instance_type=None, timeout=None, pipeline=None, profile=None, build_dir=None,
             json=False):
    """Boot the image, run every check through SSM Run Command, terminate it; tag the image passed or failed."""
    # deferred: imported when the task runs, not on the `amibuild --list` path
    from amibuild.cli import imagetests
    from amibuild.imagetest import boot
    from amibuild.jobs.signals import Signals

    opts = cli.options(c, pipeline=pipeline, variant=[variant] if variant else None, profile=profile,
                       build_dir=build_dir)
    flags = {"cluster": cluster, "subnet_id": subnet, "security_group_id": security_group,
             "instance_profile": instance_profile, "instance_type": instance_type,
             "read_timeout": _read_timeout(c)}  # config amibuild.read_timeout: SendCommand's too
    with Signals(imagetests.BOOT_TEST_SIGNALS) as stop:
        def body():
            if not variant:
                raise SpecError("test-ami: --variant: name the variant whose image to test, e.g. --variant ceph")
            seconds = values.optional_duration(timeout, "--timeout", example="15m or 900")
            return imagetests.test_ami(opts, ami=ami, run_id=run_id, flags={**flags, "timeout": seconds},
                                       say=cli.say, stop=stop)

        def guarded():
            try:
                return body()
            except BaseException:
                if stop.requested():
                    raise Interrupted("interrupted: the boot test stopped and its instance was terminated",
                                      stop.exit_code) from None
                raise

        result, record = cli.run(guarded)
    cli.emit_json(result.to_dict()) if json else cli.lines_out([*boot.report_lines(result), f"record: {record}"])
    cli.finish(result)
