"""The steps a build-ami run takes around each variant's build, as its flags ask: its dry run's plan."""

from __future__ import annotations

from typing import Any


def planned_steps(settings: Any, plan: Any) -> tuple[str, ...]:
    """What the real run does around each variant's build, as its flags and the pipeline say: each flag
    a dry run takes is shown in the plan, none silently dropped, and each write beside Packer's."""
    steps, request = [], settings.request
    if request.rehearse:
        steps.append("rehearse each variant's provisioning chain first (root); "
                     + ("an incomplete rehearsal still builds (--allow-incomplete)" if request.allow_incomplete
                        else "a failing or incomplete rehearsal stops that variant"))
    parallel = request.parallel or settings.max_parallel
    limit = f", each within {request.timeout:g} s" if request.timeout else ""
    steps.append(f"packer build, up to {parallel} at a time{limit}"
                 + ("; a variant another run is building fails at once (--no-wait)" if request.no_wait else ""))
    pipeline, kept = plan.pipeline, plan.pipeline.attestation
    steps.append("store each built image's SBOM and provenance statement in "
                 + (f"s3://{kept.bucket}" if kept.bucket else "the attestation bucket (amibuild-attestations-ACCOUNT)")
                 + (f", signed with {kept.kms_key}" if kept.kms_key else ", unsigned (the attestation block names no kms_key)"))
    if request.scan:
        steps.append("scan each built image's SBOM with Inspector (ScanSbom) and keep the findings as a signed "
                     "scan statement, before it is published")
    if settings.boot_test is not None:
        where = f", joining cluster {settings.boot_test.cluster}" if settings.boot_test.cluster else ""
        steps.append(f"boot test each built image before it is published{where}; "
                     "an image whose boot test fails, or cannot run, is not published")
    if settings.channel:
        deprecating = sorted(i.name for i in plan.items if i.rendered.variant.deprecate_after)
        steps.append(f"before each write to channel {settings.channel}: deregistration protection on for the image it "
                     f"will hold{' (with cooldown)' if pipeline.protection.cooldown else ''}"
                     + (f", and its deprecation time moved to deprecate_after from now ({', '.join(deprecating)})"
                        if deprecating else ""))
    return tuple(steps)
