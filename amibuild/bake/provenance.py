"""build-ami's provenance statements: for each variant built in this run, once its images exist in
every region and before anything is published, a signed SLSA v1 provenance (`amibuild.attest`)."""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from amibuild.attest import predicates
from amibuild.attest.sign import Attestor, Stored
from amibuild.attest.statement import PROVENANCE
from amibuild.aws import fan_out
from amibuild.bake.executor import BuildOutcome, BuildStatus
from amibuild.bake.build_plan import BuildPlan, PlanItem


def file_digest(path: Path | None) -> str | None:
    """The hex SHA-256 of the pipeline file as read for this run (None: no file, or unreadable now)."""
    if path is None:
        return None
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def for_each_attestable(plan: BuildPlan, outcomes: Sequence[BuildOutcome],
                        one: Callable[[PlanItem, BuildOutcome], Any]) -> Mapping[str, Any]:
    """{variant: ``one(item, outcome)``}, the variants in parallel, for each variant built in this run
    whose images exist in every target region."""
    items = {i.name: i for i in plan.items}
    built = {o.name: o for o in outcomes if o.status is BuildStatus.BUILT and set(plan.regions) <= set(o.amis)}
    return fan_out(sorted(built), lambda name: one(items[name], built[name])) if built else {}


def provenance_statements(attestor: Attestor, plan: BuildPlan, outcomes: Sequence[BuildOutcome], *, version: str,
                          git_commit: str | None, packer_version: str, pipeline_digest: str | None,
                          package_lists: Mapping[str, str] | None = None) -> Mapping[str, Stored]:
    """{variant: its provenance statement, stored}, the variants in parallel. ``pipeline_digest``:
    `file_digest` of the pipeline file, taken when the run started; ``package_lists``: {variant: the
    hex SHA-256 of its stored SBOM}."""
    def one(item: PlanItem, outcome: BuildOutcome) -> Stored:
        """The SLSA predicate of one variant's build, signed and stored."""
        finished = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        predicate = predicates.provenance(
            amibuild_version=version, pipeline=plan.pipeline.name,
            pipeline_file=str(plan.pipeline.source) if plan.pipeline.source else None, pipeline_digest=pipeline_digest,
            git_commit=git_commit, variant=item.name, fingerprint=item.fingerprint, inputs=item.rendered.variant.settings(),
            source_amis={r: s.image_id for r, s in item.rendered.sources.items()}, account=attestor.where.account,
            packer_version=packer_version, run_id=plan.run_id, regions=plan.regions,
            started=outcome.started or plan.started, finished=finished,
            package_list_digest=(package_lists or {}).get(item.name) or None)
        return attestor.make({r: outcome.amis[r] for r in plan.regions}, PROVENANCE, predicate, plan.run_id)

    return for_each_attestable(plan, outcomes, one)
