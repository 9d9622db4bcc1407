"""Plain-text reports of results for people (JSON goes out as data, see `amibuild.cli.run.emit_json`)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from typing import Any, Iterable

from amibuild.pipeline import Pipeline, imagetests


def build_lines(run: Any) -> Iterable[str]:
    plan = run.plan
    if run.outcomes is None:
        yield f"plan for run {plan.run_id} (dry run: nothing built), regions {', '.join(plan.regions)}:"
        for step in getattr(run, "steps", ()):
            yield f"  step  {step}"
        moves = {m.variant: m for m in getattr(run, "publish_plan", ())}
        for item in plan.items:
            amis = " ".join(f"{r}={a}" for r, a in sorted(item.existing.items()))
            yield f"  {item.decision.value:5} {item.name}: {item.reason}{'  ' + amis if amis else ''}"
            if item.name in moves:
                yield from move_lines(moves[item.name])
        if not moves:
            yield "  publish: nothing (--no-publish)"
        return
    yield f"run {plan.run_id}: " + (f"record NOT written: {run.record_error}" if run.record_error
                                    else f"record {run.record_path}")
    width = max((len(o.name) for o in run.outcomes), default=0)
    for outcome in run.outcomes:
        amis = " ".join(f"{r}={a}" for r, a in sorted(outcome.amis.items()))
        detail = amis if outcome.status.has_image else \
            f"{outcome.error} (log: {outcome.log})" if outcome.log else outcome.error
        yield f"  {outcome.name.ljust(width)}  {outcome.status:11}  {detail}"
        if outcome.lease:
            yield f"  {''.ljust(width)}  lease        {outcome.lease}"
        for left in outcome.left_behind:
            yield f"  {''.ljust(width)}  LEFT BEHIND  {left['kind']} {left['id']} in {left['region']}: {left['command']}"
        if outcome.boot_test:
            yield f"  {''.ljust(width)}  boot test    {_boot_line(outcome.boot_test)}"
        done = run.publish_of(outcome.name)
        if done is not None and done.ok:
            versions = ", ".join(f"{r}: {v if v == 'unchanged' else 'version ' + str(v)}"
                                 for r, v in done.regions.items())
            yield f"  {''.ljust(width)}  published    {done.parameter} ({versions})"
            if getattr(done, "older", ()):
                yield (f"  {''.ljust(width)}  OLDER BUILD  {done.channel} moved back to an image built before the one "
                       f"it held, in {', '.join(done.older)}")
        elif done is not None:
            yield f"  {''.ljust(width)}  NOT published: {done.error}"
    for line in run.sharing:
        yield f"  sharing: {line}"


def move_lines(move: Any) -> Iterable[str]:
    """A variant's publish in a build-ami dry run: region, previous -> new, the version it would make."""
    if move.refused:
        yield f"        publish to {move.channel} ({move.parameter}): REFUSED: {move.refused}"
        return
    yield f"        publish to {move.channel} ({move.parameter}):"
    for r in move.regions:
        new = r.new or "(the image this run builds)"
        if r.unchanged:
            yield f"          {r.region}: {new}  unchanged, version {r.version}"
            continue
        flag = "  OLDER BUILD than the channel holds now" if r.older else ""
        yield f"          {r.region}: {r.previous or '(new)'} -> {new}  version {r.version}{flag}"


def _boot_line(test: Any) -> str:
    """One line of a variant's boot test (`imagetest.boot.BootTestResult.to_dict()`)."""
    line = f"{test['result']} ({test['seconds']:.1f}s, instance {test['instance_id'] or '-'} " \
           f"{'terminated' if test['terminated'] else 'NOT terminated'})"
    if test.get("node_ready_seconds") is not None:
        line += (f"; node {test['node']} Ready in {test['cluster']} after {test['node_ready_seconds']:.1f}s, "
                 f"{'removed' if test['node_removed'] else 'NOT removed'}")
    elif test.get("node"):
        line += f"; node {test['node']} of {test['cluster']} {'removed' if test['node_removed'] else 'NOT removed'}"
    return line


def clean_lines(result: Any) -> Iterable[str]:
    """What `clean-run` found (a dry run), kept and why, removed, and could not remove (with the command that does)."""
    if not result.found and not result.leases and not result.temp_dirs:
        yield f"run {result.run_id}: nothing left behind"
    if result.dry_run:
        kept = {item for item, _ in result.kept}
        for item in result.unprotect:
            yield (f"would turn deregistration protection off  {item}  (aws ec2 disable-image-deregistration-protection "
                   f"--image-id {item.id} --region {item.region})")
        for item in result.found:
            if item not in kept:
                yield f"found  {item}  ({item.command()})"
        for lease in result.leases:
            yield f"found  {lease}  (held by {lease.holder})"
        for folder in result.temp_dirs:
            yield f"found  {folder}  ({folder.command()})"
    for item, why in result.kept:
        yield f"kept  {item}: {why}"
    for item in result.removed:
        yield f"removed  {item}"
    for item, why in result.failed:
        yield f"LEFT BEHIND  {item}: {why}; remove with: {item.command()}"


def render_lines(result: Any) -> Iterable[str]:
    """What `render` wrote: one line per variant (progress and notes went to stderr)."""
    for rendered, directory in zip(result.rendered, result.directories, strict=True):
        yield f"{rendered.variant.name}  {directory}  {rendered.fingerprint[:12]}"


def runs_lines(listed: list) -> Iterable[str]:
    """One line per `bake.record.ListedRun`: the run's variant counts, or why its record is unreadable."""
    if not listed:
        yield "no runs recorded yet (build/runs/ is empty)"
        return
    for entry in listed:
        record = entry.record
        if record is None:
            yield f"{entry.path.stem}  UNREADABLE: {entry.problem} ({entry.path})"
            continue
        counts = Counter(variant.get("status", "?") for variant in record.get("variants", []))
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        yield f"{record.get('run_id')}  {record.get('started', '')}  {summary}"


def publish_lines(result: Any) -> Iterable[str]:
    yield f"{result.operation}: {result.variant} {result.channel} ({result.parameter})"
    for r in result.regions:
        if r.action == "write":
            yield f"  {r.region}: {r.previous_ami or '(new)'} -> {r.ami}  version {r.version}"
        else:
            yield f"  {r.region}: {r.ami}  unchanged, version {r.version}"
    for step in getattr(result, "guarded", ()):
        yield f"  safeguard {step.describe()}"
    for note in getattr(result, "notes", ()):
        yield f"  note: {note}"


def plan_lines(plan: Any) -> Iterable[str]:
    """A channel write's plan (--dry-run): what each region would get; nothing was written."""
    yield f"{plan.operation} (dry run: nothing written): {plan.variant} {plan.channel} ({plan.parameter})"
    for r in plan.regions:
        if r.action == "write":
            yield f"  {r.region}: {r.previous_ami or '(new)'} -> {r.ami}  would write version {r.previous_version + 1}"
        elif r.action == "unchanged":
            yield f"  {r.region}: {r.ami}  unchanged, version {r.previous_version}"
        else:
            yield f"  {r.region}: {r.ami or '(no AMI)'}  REFUSED: {r.reason}"
    for step in getattr(plan, "guards", ()):
        yield f"  would safeguard {step.describe()}"


def due_lines(run: Any) -> Iterable[str]:
    """`promote --due`: a line per gated channel, then the plan of each promotion a dry run would make."""
    yield from run.lines()
    for item in run:
        if item.plan is not None:
            yield from (f"  {line}" for line in plan_lines(item.plan))


def history_lines(entries: list) -> Iterable[str]:
    rows = [(e.channel, e.region, str(e.version), when(e.modified), e.ami, e.fingerprint or "-", e.run_id or "-",
             e.user or "-") for e in entries]
    return table(("CHANNEL", "REGION", "VERSION", "TIME (UTC)", "AMI", "FINGERPRINT", "RUN ID", "WRITTEN BY"), rows)


def channel_lines(entries: list) -> Iterable[str]:
    rows = [(e.variant, e.k8s, e.channel, e.region, e.ami or "(not published)", str(e.version or "-"), age(e.modified),
             getattr(e, "protection", "") or "-", (getattr(e, "deprecation_time", "") or "-")[:16])
            for e in entries]
    return table(("VARIANT", "K8S", "CHANNEL", "REGION", "AMI", "VERSION", "AGE", "PROTECTION", "DEPRECATES"), rows)


def table(header: tuple, rows: list) -> list[str]:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    return ["  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in (header, *rows)]


def when(moment: Any) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def age(moment: Any) -> str:
    if moment is None:
        return "-"
    seconds = max(0, int((datetime.now(timezone.utc) - moment).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def tests_listing(pipeline: Pipeline) -> list[dict[str, Any]]:
    """Every selected variant's checks (what will run, at every stage) and the built-ins turned off."""
    return [{"variant": v.name, "os": v.os, "flavor": v.flavor, "kubernetes_version": v.kubernetes_version,
             **imagetests.check_set(v, stage="all").to_dict()} for v in pipeline.variants]


def tests_listing_lines(entries: Iterable[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for entry in entries:
        checks = entry["checks"]
        boot_only = sum(1 for c in checks if c["stages"] == ["boot"])
        hygiene = sum(1 for c in checks if c["stages"] == [imagetests.HYGIENE])
        out.append(f"{entry['variant']} ({entry['os']} {entry['flavor']}, Kubernetes {entry['kubernetes_version']}): "
                   f"{len(checks) - boot_only - hygiene} check(s) on the build instance and in the boot test"
                   + (f", {boot_only} in the boot test only" if boot_only else "")
                   + (f", {hygiene} of the clean-up (the build's last step)" if hygiene else ""))
        width = max((len(c["name"]) for c in checks), default=0)
        out += [f"  {check['name'].ljust(width)}  {check['origin']:<13}  {'+'.join(check['stages']):<10}  {check['what']}"
                for check in checks]
        out += [f"  {off['name'].ljust(width)}  turned off     {off['reason']} ({off['where']})"
                + (f"; warning: {off['note']}" if off.get("note") else "") for off in entry["disabled"]]
    return out
