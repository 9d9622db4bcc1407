"""`invoke rehearse` and `build-ami --rehearse`: render each variant for a real build, then rehearse it.

A sandbox render (loopback endpoint) replaces the provisioners with echo steps, so the rehearsal
always renders for a real build (no endpoint): the provisioners are what Packer would run on the
instance. Source AMIs are not looked up (no AWS call) and packer is not asked its version: neither
changes the provisioners.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Iterable

from amibuild import render as render_mod
from amibuild.pipeline import Pipeline
from amibuild.cli.commands import Options, Say, _upstreams, load_pipeline
from amibuild.errors import RehearsalFailed, RehearsalIncomplete
from amibuild.render import Rendered, SourceAmi, Target

REFUSE_ENV = "AMIBUILD_REHEARSE_REFUSE"  # package names the stand-in yum/dnf refuse (comma-separated)
REPORT_FILE = "rehearsal.json"
EXIT_INCOMPLETE = RehearsalIncomplete.exit_code  # a rehearsal that stopped at a step it cannot rehearse


def seconds(value, flag: str, default: float = 600.0) -> float:
    """A duration flag (90s, 10m, bare seconds), read by the one parser every flag uses."""
    from amibuild.cli import values

    return values.optional_duration(value, flag, example="600 or 10m") or default


def refused_packages(env=os.environ) -> tuple[str, ...]:
    return tuple(name.strip() for name in env.get(REFUSE_ENV, "").split(",") if name.strip())


def real_build_renders(pipeline: Pipeline, options: Options,
                       rendered: Iterable[Rendered] | None = None) -> list[Rendered]:
    """Each variant rendered for a real build (no endpoint), with the source AMIs of ``rendered``
    where given. Always rendered again: a render for the sandbox holds echo steps instead."""
    sources = {r.variant.name: dict(r.sources) for r in rendered or ()}
    # the provisioners do not depend on the Packer version (only the packer block and IMDS settings
    # do), so no `packer version` call here: rehearse works without packer installed
    upstreams = _upstreams(pipeline, options)
    return [render_mod.render_variant(pipeline, variant, uses_plugins=True, target=Target(),
                                      sources=sources.get(variant.name) or {r: SourceAmi("lookup") for r in pipeline.regions},
                                      upstream=upstreams.get(variant.name))
            for variant in pipeline.variants]


def rehearse(options: Options, say: Say = lambda _: None, *, keep: bool = False, timeout: float = 600.0,
             refuse: Iterable[str] = ()) -> list:
    """Rehearse every selected variant; returns one `Report` each. Bad input is refused before any runs."""
    from amibuild.rehearse import overlay, prepare, run

    pipeline = load_pipeline(options)
    rendered = real_build_renders(pipeline, options)
    prepared = []
    try:
        for item in rendered:  # every variant's steps evaluated (and scripts found) before any runs
            prepared.append(prepare(item))
        overlay.check_privileges()
    except BaseException:
        for item in prepared:
            item.close()
        raise
    reports = []
    for index, item in enumerate(prepared):
        say(f"rehearsing {item.rendered.variant.name} ...")
        try:
            reports.append(run(item, keep=keep, refuse=refuse, timeout=timeout))
        except BaseException:
            for rest in prepared[index + 1:]:
                rest.close()
            raise
    return reports


def rehearsal_check(plan, options: Options, check: Callable | None, say: Say = lambda _: None, *,
                    allow_incomplete: bool = False) -> Callable:
    """build-ami --rehearse: a check that runs ``check`` (if any), then rehearses the variant.

    The executor runs it for each variant just before that variant's Packer build; a failing
    rehearsal raises, which marks that variant failed and leaves the others to build. So does an
    incomplete one (a step it cannot rehearse, the rest never run), unless ``allow_incomplete``.
    """
    from amibuild.rehearse import rehearse as run_rehearsal

    items = {item.directory.resolve(): item for item in plan.to_build}
    renders = {r.variant.name: r for r in real_build_renders(
        plan.pipeline, options, [item.rendered for item in plan.to_build])}
    refuse = refused_packages()

    def rehearse_then_check(packer, directory: Path) -> None:
        if check is not None:
            check(packer, directory)  # a template Packer refuses fails first, without a rehearsal
        item = items[Path(directory).resolve()]
        report = run_rehearsal(renders[item.name], refuse=refuse)
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
        ended = f"exit {f.exit_status}" if f.exit_status is not None else "did not finish"
        return f"step {f.step} at {f.where()} ({ended})" + (f": {last}" if last else "")
    own = report.own_findings
    return f"amibuild's own scripts are not shellcheck-clean: {own[0].text()}" if own else "no failure"
