"""The clean-run job: find (and unless a dry run remove) what one build run left in AWS.

For a run whose amibuild process itself died (so it could not clean up): its instances and
volumes by tag, key pairs and AMIs (copies included) by name, security groups from the run's
Packer logs when they are still in build/runs/<run id>/ (read only when they are regular files).
Refused while the run still holds a build lease: it may be building right now. What may be
removed is decided in `amibuild.bake.leftovers`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from amibuild.aws import Aws
from amibuild.bake import leftovers
from amibuild.bake import record as records
from amibuild.bake.lease import holder_gone, parse_holder
from amibuild.errors import CleanupIncomplete, NoCredentials, SpecError
from amibuild.pipeline import Pipeline
from amibuild.pipeline.options import Options, load_pipeline


@dataclass(frozen=True)
class CleanSettings:
    options: Options
    pipeline: Pipeline
    run_id: str
    dry_run: bool = False


def settings(options: Options, run_id: str | None, *, dry_run: bool = False) -> CleanSettings:
    """Bad input (a run id that is none, the pipeline file) refused before any AWS call."""
    if not run_id or not leftovers.RUN_ID.match(run_id):
        raise SpecError(f"--run-id: {run_id!r} is not a run id like 20261130T170000Z-abc123; "
                        "`amibuild runs` lists them")
    return CleanSettings(options, load_pipeline(options), run_id, dry_run)


@dataclass(frozen=True)
class CleanRun:
    """What `run` found of one run, removed, and could not remove."""

    run_id: str
    found: tuple = ()
    removed: tuple = ()
    failed: tuple = ()  # (Leftover, why)
    dry_run: bool = False

    def to_dict(self) -> dict:
        return {
            "run_id": self.run_id,
            "dry_run": self.dry_run,
            "found": [{"kind": x.kind, "region": x.region, "id": x.id, "command": x.command()} for x in self.found],
            "removed": [str(x) for x in self.removed],
            "left_behind": [{"kind": x.kind, "region": x.region, "id": x.id, "why": why, "command": x.command()}
                            for x, why in self.failed],
        }

    def raise_for_status(self) -> None:
        if self.failed:
            raise CleanupIncomplete(f"{len(self.failed)} leftover(s) of run {self.run_id} not removed")


def run(settings: CleanSettings) -> CleanRun:
    """Every variant, every region: find the run's leftovers, and remove them unless a dry run."""
    pipeline, run_id = settings.pipeline, settings.run_id
    aws = Aws(profile=settings.options.profile)
    if not aws.has_credentials():
        raise NoCredentials("clean-run: no AWS credentials found; set AWS_PROFILE or AWS_ACCESS_KEY_ID/"
                            "AWS_SECRET_ACCESS_KEY, or run `amibuild sandbox` for the local emulator")
    leases = f"{pipeline.ssm_prefix.rstrip('/')}/{pipeline.name}/_leases"
    for parameter in aws.parameters_under(leases, pipeline.build_region):
        holder = parse_holder(parameter.value)
        if holder.run_id == run_id and not holder.expired(time.time()) and not holder_gone(holder):
            raise SpecError(f"--run-id: run {run_id} is still building ({holder}); "
                            "stop it first, or wait for its lease to expire")
    lines = records.packer_logs(settings.options.build_dir, run_id)
    scope = leftovers.Scope(run_id, None, None, tuple(pipeline.regions), tuple(pipeline.target_regions))
    found = tuple(leftovers.find(aws, scope, leftovers.stream_resources(lines)))
    result = CleanRun(run_id, found, dry_run=settings.dry_run)
    if settings.dry_run or not found:
        return result
    removed, failed = leftovers.remove(aws, list(found))
    return CleanRun(run_id, found, tuple(removed), tuple(failed), settings.dry_run)
