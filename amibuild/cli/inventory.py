"""`amibuild sbom`, `diff`, `scan`: an image's signed package list, two images compared, a vulnerability scan.

The tasks live here (tasks.py adds them to the collection): each turns its flags into its frozen
request (`amibuild.jobs.image_inventory`), runs the job and prints its result.
"""

from __future__ import annotations

from dataclasses import dataclass

from amibuild.cli import run as cli
from amibuild.cli.command import JSON_HELP, K8S_HELP, command, flag, scope_options
from amibuild.errors import SpecError


@dataclass(frozen=True)
class ImageRequest:
    """The flags sbom, diff and scan share."""

    variant: str | None = flag("Variant whose image this is (required)")
    k8s: str | None = flag(K8S_HELP)
    pipeline: str | None = flag("Pipeline file (default: amibuild.hcl in the current folder or above)")
    profile: str | None = flag("AWS profile (default: AWS_PROFILE / the standard chain)")
    json: bool = flag(JSON_HELP, False)


@dataclass(frozen=True)
class SbomFlags(ImageRequest):
    """`amibuild sbom`."""

    channel: str | None = flag("Channel whose image (in the build region) to show, e.g. stable")
    ami: str | None = flag("An image id (in the build region), instead of a channel")
    format: str = flag("cyclonedx (default: the stored CycloneDX 1.5 JSON), spdx (SPDX 2.3 JSON) or table",
                       "cyclonedx")


@command(SbomFlags)
def sbom(c, r: SbomFlags):
    """Print an image's package list (its signed SBOM): CycloneDX, SPDX or a table."""
    from amibuild.jobs import image_inventory as job  # deferred: not on the `amibuild --list` path

    opts = scope_options(c, r)
    result = cli.run(lambda: job.run_sbom(job.SbomRequest(opts, _required(r.variant), r.channel, r.ami, r.format)))
    _print(result, r.json)


@dataclass(frozen=True)
class DiffFlags(ImageRequest):
    """`amibuild diff`."""

    from_: str | None = flag("The older image: a channel, an AMI id or a build-ami run id (--from)", name="from")
    to: str | None = flag("The newer image: a channel, an AMI id or a build-ami run id (--to)")
    markdown: bool = flag("Print the same as Markdown (release notes, $GITHUB_STEP_SUMMARY)", False)


@command(DiffFlags)
def diff(c, r: DiffFlags):
    """Compare two images of a variant: packages, kernel/kubelet/containerd/nodeadm, settings, vulnerabilities."""
    from amibuild.jobs import image_inventory as job  # deferred: not on the `amibuild --list` path

    opts = scope_options(c, r)
    result = cli.run(lambda: job.run_diff(job.DiffRequest(opts, _required(r.variant), r.from_ or "", r.to or "",
                                                          r.markdown)))
    _print(result, r.json)


@dataclass(frozen=True)
class ScanFlags(ImageRequest):
    """`amibuild scan`."""

    channel: str | None = flag("Channel whose image to scan (its policy, if its block has `scan`, says pass or "
                               "refuse)")
    ami: str | None = flag("An image id (in the build region), instead of a channel")


@command(ScanFlags)
def scan(c, r: ScanFlags):
    """Scan an image's SBOM with Amazon Inspector (ScanSbom); keep the findings as a signed scan statement."""
    from amibuild.jobs import image_inventory as job  # deferred: not on the `amibuild --list` path

    opts = scope_options(c, r)
    result = cli.run(lambda: job.run_scan(job.ScanRequest(opts, _required(r.variant), r.channel, r.ami)))
    _print(result, r.json)


def _print(result, json: bool) -> None:
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
