"""`amibuild sbom`, `diff`, `scan`: an image's signed package list, two images compared, a vulnerability scan.

The tasks live here (tasks.py adds them to the collection): each turns its flags into its frozen
request (`amibuild.jobs.image_inventory`), runs the job and prints its result.
"""

from __future__ import annotations

from amibuild.cli import run as cli
from amibuild.cli.requests_views import DiffFlags, SbomFlags, ScanFlags
from amibuild.cli.tasks_common import scope_options
from amibuild.errors import SpecError
from amibuild.jobs import image_inventory as job


def sbom(c, r: SbomFlags):
    opts = scope_options(c, r)
    result = cli.run(lambda: job.run_sbom(job.SbomRequest(opts, _required(r.variant), r.channel, r.ami, r.format)))
    cli.show(result, r.json)


def diff(c, r: DiffFlags):
    opts = scope_options(c, r)
    result = cli.run(lambda: job.run_diff(job.DiffRequest(opts, _required(r.variant), r.from_ or "", r.to or "",
                                                          r.markdown)))
    cli.show(result, r.json)


def scan(c, r: ScanFlags):
    opts = scope_options(c, r)
    result = cli.run(lambda: job.run_scan(job.ScanRequest(opts, _required(r.variant), r.channel, r.ami)))
    cli.show(result, r.json)


def _required(variant: str | None) -> str:
    if not variant:
        raise SpecError("--variant: name the variant whose image this is")
    return variant
