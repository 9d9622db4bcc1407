"""`amibuild sbom`, `amibuild diff`: an image's signed package list, and two images compared.

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


def _required(variant: str | None) -> str:
    if not variant:
        raise SpecError("--variant: name the variant whose image this is")
    return variant
