"""The steps a build-ami run takes around each variant's build, as its flags ask: its dry run's plan."""

from __future__ import annotations

from typing import Any


def planned_steps(settings: Any) -> tuple[str, ...]:
    """What the real run does around each variant's build, as its flags say: each flag a dry run
    takes is shown in the plan, none silently dropped."""
    steps, request = [], settings.request
    if request.rehearse:
        steps.append("rehearse each variant's provisioning chain first (root); "
                     + ("an incomplete rehearsal still builds (--allow-incomplete)" if request.allow_incomplete
                        else "a failing or incomplete rehearsal stops that variant"))
    parallel = request.parallel or settings.max_parallel
    limit = f", each within {request.timeout:g} s" if request.timeout else ""
    steps.append(f"packer build, up to {parallel} at a time{limit}"
                 + ("; a variant another run is building fails at once (--no-wait)" if request.no_wait else ""))
    if request.scan:
        steps.append("scan each built image's SBOM with Inspector (ScanSbom) and keep the findings as a signed "
                     "scan statement, before it is published")
    if settings.boot_test is not None:
        where = f", joining cluster {settings.boot_test.cluster}" if settings.boot_test.cluster else ""
        steps.append(f"boot test each built image before it is published{where}; "
                     "an image whose boot test fails, or cannot run, is not published")
    return tuple(steps)
