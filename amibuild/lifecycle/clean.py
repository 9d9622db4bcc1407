"""The clean-run job: find (and unless a dry run remove) what one unfinished build run left in AWS.

What is found: the run's instances and volumes by tag, key pairs and AMIs (copies included) by
name, security groups from the run's Packer logs when they are still in build/runs/<run id>/
(read only when they are regular files: a FIFO or a device would hang or never end), the run's
leases and Packer's temporary folder. What may go is decided by `amibuild.lifecycle.cleanup.decide`
(pure, over the same in-use facts prune gathers): never an image in use nor one of a run that
published. A run id nothing knows of is refused (exit 2).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from amibuild.aws import Aws
from amibuild.bake import leftovers
from amibuild.bake import record as records
from amibuild.bake.packer import temp_prefix
from amibuild.errors import NoCredentials, SpecError
from amibuild.lifecycle import cleanup
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
    if not run_id:
        raise SpecError("--run-id: name the run whose leftovers to remove, e.g. --run-id 20261130T170000Z-abc123; "
                        "`amibuild runs` lists them")
    if not leftovers.RUN_ID.match(run_id):
        raise SpecError(f"--run-id: {run_id!r} is not a run id like 20261130T170000Z-abc123; "
                        "`amibuild runs` lists them")
    return CleanSettings(options, load_pipeline(options), run_id, dry_run)


def _record_published(path: Path) -> bool:
    """Whether the run's record says it published a variant (an unreadable record: no)."""
    if not records.is_regular(path):
        return False
    try:
        data = json.loads(records.read_regular(path))
        return any(isinstance(v, dict) and v.get("published") for v in data.get("variants") or ())
    except (OSError, ValueError, AttributeError, TypeError):
        return False


def run(settings: CleanSettings) -> cleanup.CleanupResult:
    """Every variant, every region: find the run's leftovers, decide, and remove unless a dry run."""
    pipeline, run_id = settings.pipeline, settings.run_id
    aws = Aws(profile=settings.options.profile)
    if not aws.has_credentials():
        raise NoCredentials("clean-run: no AWS credentials found; set AWS_PROFILE or AWS_ACCESS_KEY_ID/"
                            "AWS_SECRET_ACCESS_KEY")
    build_dir = settings.options.build_dir
    folder = records.run_directory(build_dir, run_id)
    record = records.record_path(build_dir, run_id)
    scratch = sorted(str(p) for p in Path(tempfile.gettempdir()).glob(f"{temp_prefix(run_id)}*")
                     if p.is_dir() and not p.is_symlink())
    facts = cleanup.gather(aws, pipeline, run_id, records.packer_logs(build_dir, run_id),
                           recorded=folder.is_dir() or record.exists() or record.is_symlink(),
                           record_published=_record_published(record), temp_dirs=scratch)
    return cleanup.execute(aws, facts, cleanup.decide(facts), dry_run=settings.dry_run)
