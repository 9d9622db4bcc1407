"""`amibuild sbom`, `diff`, `scan`: an image's signed package list, two images compared, a vulnerability scan.

The tasks live here (tasks.py adds them to the collection): each turns its flags into its frozen
request (`amibuild.jobs.image_inventory`), runs the job and prints its result.
"""

from __future__ import annotations

from amibuild.aws import Aws
from amibuild.cli import run as cli
from amibuild.cli.requests_views import DiffFlags, SbomFlags, ScanFlags
from amibuild.cli.tasks_common import scope_options
from amibuild.errors import AmibuildError, SpecError
from amibuild.jobs import image_inventory as job
from amibuild.pipeline.options import load_pipeline


def sbom(c, r: SbomFlags):
    opts = scope_options(c, r)
    result = cli.run(lambda: job.run_sbom(job.SbomRequest(opts, _required(r.variant), r.channel, r.ami, r.format)))
    _print(result, r.json)


def diff(c, r: DiffFlags):
    opts = scope_options(c, r)
    result = cli.run(lambda: job.run_diff(job.DiffRequest(opts, _required(r.variant), r.from_ or "", r.to or "",
                                                          r.markdown)))
    _print(result, r.json)


def scan(c, r: ScanFlags):
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
