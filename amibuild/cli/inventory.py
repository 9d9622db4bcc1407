"""`amibuild sbom`, `diff`, `scan`: an image's signed package list, two images compared, a vulnerability scan.

The tasks live here (tasks.py adds them to the collection): each turns its flags into its frozen
request (`amibuild.jobs.image_inventory`), runs the job and prints its result.
"""

from __future__ import annotations

from invoke import task

from amibuild.cli import run as cli
from amibuild.errors import SpecError

COMMON_HELP = {
    "variant": "Variant whose image this is (required)",
    "k8s": "Kubernetes version of the variant, if not the pipeline file's (it is part of the parameter name)",
    "pipeline": "Pipeline file (default: amibuild.hcl in the current folder or above)",
    "profile": "AWS profile (default: AWS_PROFILE / the standard chain)",
    "json": "Print the result as JSON on stdout",
}
SBOM_HELP = {
    **COMMON_HELP,
    "channel": "Channel whose image (in the build region) to show, e.g. stable",
    "ami": "An image id (in the build region), instead of a channel",
    "format": "cyclonedx (default: the stored CycloneDX 1.5 JSON), spdx (SPDX 2.3 JSON) or table",
}
DIFF_HELP = {
    **COMMON_HELP,
    "from_": "The older image: a channel, an AMI id or a build-ami run id (--from)",
    "to": "The newer image: a channel, an AMI id or a build-ami run id (--to)",
    "markdown": "Print the same as Markdown (release notes, $GITHUB_STEP_SUMMARY)",
}


@task(help=SBOM_HELP, auto_shortflags=False)
def sbom(c, variant=None, channel=None, ami=None, format="cyclonedx", k8s=None, json=False, pipeline=None, profile=None):
    """Print an image's package list (its signed SBOM): CycloneDX, SPDX or a table."""
    from amibuild.jobs import image_inventory as job  # deferred: not on the `amibuild --list` path

    opts = cli.options(c, pipeline=pipeline, profile=profile, k8s=k8s, variant=[variant] if variant else None)
    result = cli.run(lambda: job.run_sbom(job.SbomRequest(opts, _required(variant), channel, ami, format)))
    if json:
        cli.emit_json(result.to_dict())
    else:
        cli.lines_out(result.lines())
    cli.finish(result)


@task(help=DIFF_HELP, auto_shortflags=False)
def diff(c, variant=None, from_=None, to=None, markdown=False, k8s=None, json=False, pipeline=None, profile=None):
    """Compare two images of a variant: packages, kernel/kubelet/containerd/nodeadm, settings, vulnerabilities."""
    from amibuild.jobs import image_inventory as job  # deferred: not on the `amibuild --list` path

    opts = cli.options(c, pipeline=pipeline, profile=profile, k8s=k8s, variant=[variant] if variant else None)
    result = cli.run(lambda: job.run_diff(job.DiffRequest(opts, _required(variant), from_ or "", to or "",
                                                          markdown)))
    if json:
        cli.emit_json(result.to_dict())
    else:
        cli.lines_out(result.lines())
    cli.finish(result)


SCAN_HELP = {
    **COMMON_HELP,
    "channel": "Channel whose image to scan (its policy, if its block has `scan`, says pass or refuse)",
    "ami": "An image id (in the build region), instead of a channel",
}


@task(help=SCAN_HELP, auto_shortflags=False)
def scan(c, variant=None, channel=None, ami=None, k8s=None, json=False, pipeline=None, profile=None):
    """Scan an image's SBOM with Amazon Inspector (ScanSbom); keep the findings as a signed scan statement."""
    from amibuild.jobs import image_inventory as job  # deferred: not on the `amibuild --list` path

    opts = cli.options(c, pipeline=pipeline, profile=profile, k8s=k8s, variant=[variant] if variant else None)
    result = cli.run(lambda: job.run_scan(job.ScanRequest(opts, _required(variant), channel, ami)))
    if json:
        cli.emit_json(result.to_dict())
    else:
        cli.lines_out(result.lines())
    cli.finish(result)


def _required(variant: str | None) -> str:
    if not variant:
        raise SpecError("--variant: name the variant whose image this is")
    return variant


def promote_line(opts, result) -> str:
    """The one line `promote` says about the change it makes (or plans) in the build region: the diff
    of the image the target channel held and the one it gets. Never fails the promote."""
    # deferred: imported when promote has written, not on the `amibuild --list` path
    from amibuild.aws import Aws
    from amibuild.errors import AmibuildError
    from amibuild.jobs import image_inventory as job
    from amibuild.pipeline.options import load_pipeline

    rows = [r for r in getattr(result, "regions", ()) if getattr(r, "previous_ami", "") and r.ami
            and r.previous_ami != r.ami]
    if not rows:
        return ""
    try:
        pipeline = load_pipeline(opts)
        variant = next(v for v in pipeline.variants if v.name == result.variant)
        row = next((r for r in rows if r.region == pipeline.build_region), rows[0])
        aws = Aws(profile=opts.profile, region=pipeline.build_region)
        old, new = (aws.find_image(row.region, ami) for ami in (row.previous_ami, row.ami))
        if old is None or new is None:
            return f"diff: not compared: {row.previous_ami if old is None else row.ami} is gone from {row.region}"
        return "diff: " + job.diff_images(aws, pipeline, variant, job.Located(f"{result.channel} before", row.region, old),
                                          job.Located(result.channel, row.region, new)).summary()
    except (AmibuildError, StopIteration) as exc:
        return f"diff: not compared: {exc}"
