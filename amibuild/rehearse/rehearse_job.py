"""The rehearse job (`amibuild rehearse`) and the check `build-ami --rehearse` runs before each build.

The rehearsal runs a real build's provisioners: what Packer would run on the instance. `amibuild
rehearse` renders each variant's real build (no endpoint); source AMIs are not looked up (no AWS
call) and packer is not asked its version: neither changes the provisioners. `build-ami --rehearse`
takes the run's own render, and for a transformed build the real render it was made from.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from amibuild import render as render_mod
from amibuild.errors import RehearsalFailed, RehearsalIncomplete
from amibuild.pipeline import Pipeline
from amibuild.pipeline.options import Options, load_pipeline
from amibuild.render import Rendered, SourceAmi, Target
from amibuild.render.upstreams import load_upstreams
from amibuild.rehearse import overlay, prepare
from amibuild.rehearse import rehearse as run_rehearsal
from amibuild.rehearse import run as run_one

Say = Callable[[str], None]

REFUSE_ENV = "AMIBUILD_REHEARSE_REFUSE"  # package names the stand-in yum/dnf refuse (comma-separated)
REPORT_FILE = "rehearsal.json"
DEFAULT_TIMEOUT = 600.0


@dataclass(frozen=True)
class Rehearse:
    """What `amibuild rehearse` is asked: the variants (in `options`) and how to rehearse them."""

    options: Options
    keep: bool = False
    timeout: float | None = None  # None: DEFAULT_TIMEOUT
    allow_incomplete: bool = False  # exit 0 when a rehearsal stopped at a step it cannot rehearse


@dataclass(frozen=True)
class RehearseResult:
    """Every variant's `Report`; it failed when any variant's chain did, and is incomplete (exit 3)
    when one stopped at a step it cannot rehearse, unless that was allowed."""

    reports: tuple
    allow_incomplete: bool = False

    @property
    def failed(self) -> list[str]:
        return [r.variant for r in self.reports if not r.ok]

    def raise_for_status(self) -> None:
        if self.failed:
            raise RehearsalFailed(f"rehearsal failed for {', '.join(self.failed)}")
        incomplete = [f"{r.variant}: {r.incomplete}" for r in self.reports if r.incomplete]
        if incomplete and not self.allow_incomplete:
            raise RehearsalIncomplete(f"{'; '.join(incomplete)} (--allow-incomplete exits 0)")


def refused_packages() -> tuple[str, ...]:
    return tuple(name.strip() for name in os.environ.get(REFUSE_ENV, "").split(",") if name.strip())


def real_build_renders(pipeline: Pipeline, options: Options) -> list[Rendered]:
    """Each variant rendered for a real build (no endpoint), its source AMI looked up at build time."""
    # the provisioners do not depend on the Packer version (only the packer block and IMDS settings
    # do), so no `packer version` call here: rehearse works without packer installed
    upstreams = load_upstreams(pipeline, options.cache_dir)
    return [render_mod.render_variant(pipeline, variant, uses_plugins=True, target=Target(),
                                      sources={r: SourceAmi("lookup") for r in pipeline.regions},
                                      upstream=upstreams.get(variant.name))
            for variant in pipeline.variants]


def real_render(rendered: Rendered) -> Rendered:
    """The real build a render stands for: itself, or what a transform started from."""
    return rendered.real if rendered.real is not None else rendered


def run(request: Rehearse, say: Say = lambda _: None) -> RehearseResult:
    """Rehearse every selected variant; one `Report` each. Bad input is refused before any runs."""
    rendered = real_build_renders(load_pipeline(request.options), request.options)
    refuse, timeout = refused_packages(), request.timeout or DEFAULT_TIMEOUT
    # every prepared folder is removed whatever happens (a rehearsal removes its own; closing twice is harmless)
    with contextlib.ExitStack() as cleanup:
        prepared = []
        for item in rendered:  # every variant's steps evaluated (and scripts found) before any runs
            prepared.append(prepare(item))
            cleanup.callback(prepared[-1].close)
        overlay.check_privileges()
        reports = []
        for item in prepared:
            say(f"rehearsing {item.rendered.variant.name} ...")
            reports.append(run_one(item, keep=request.keep, refuse=refuse, timeout=timeout))
    return RehearseResult(tuple(reports), request.allow_incomplete)


def rehearsal_check(plan, check: Callable | None, say: Say = lambda _: None, *,
                    allow_incomplete: bool = False) -> Callable:
    """build-ami --rehearse: a check that runs ``check`` (if any), then rehearses the variant.

    The executor runs it for each variant just before that variant's Packer build; a failing
    rehearsal raises, which marks that variant failed and leaves the others to build. So does an
    incomplete one (a step it cannot rehearse, the rest never run), unless ``allow_incomplete``.
    """
    items = {item.directory.resolve(): item for item in plan.to_build}
    refuse = refused_packages()

    def rehearse_then_check(packer, directory: Path) -> None:
        if check is not None:
            check(packer, directory)  # a template Packer refuses fails first, without a rehearsal
        item = items[Path(directory).resolve()]
        report = run_rehearsal(real_render(item.rendered), refuse=refuse)
        record = Path(directory) / REPORT_FILE
        record.write_text(json.dumps(report.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        if not report.ok:
            raise RehearsalFailed(f"rehearsal failed, Packer not started: {failure_text(report)} (report: {record})")
        if report.incomplete and not allow_incomplete:
            raise RehearsalIncomplete(f"{report.incomplete}, Packer not started (--allow-incomplete builds "
                                      f"anyway; report: {record})")
        if report.incomplete:
            say(f"{item.name}: {report.incomplete} (--allow-incomplete: building anyway)")

    return rehearse_then_check


def failure_text(report) -> str:
    if report.failure is not None:
        f = report.failure
        last = next((line for line in reversed(f.output_tail) if line.strip()), "")
        return f"step {f.step} at {f.where()} ({f.ended()})" + (f": {last}" if last else "")
    own = report.own_findings
    return f"amibuild's own scripts are not shellcheck-clean: {own[0].text()}" if own else "no failure"
