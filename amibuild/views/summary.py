"""CI summaries people read: Markdown for ``$GITHUB_STEP_SUMMARY`` (and `--markdown`), and workflow commands.

When ``GITHUB_STEP_SUMMARY`` names a file (GitHub Actions sets it for every step), `build-ami`,
`publish`, `promote`, `rollback`, `rollout`, `fleet`, `rehearse` and `channels --check` append a Markdown summary to it:
a table per variant (status, AMI per region, fingerprint, duration, test result) or per consumer.
`--markdown` prints the same summary on stdout, anywhere. An error that names a line of the
pipeline file is also printed as a workflow command, ``::error file=amibuild.hcl,line=N::message``,
so GitHub annotates that line (`annotation`). Like every view, the renderers are pure (see `amibuild.views`).
"""

from __future__ import annotations

import os
import re
import sys
from datetime import timezone
from typing import Any, Iterable, Sequence

SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def cell(value: Any) -> str:
    """A value as one Markdown table cell: no newlines, pipes escaped, and outside `code` no `<tag>` (GitHub
    would drop `<nil>` or `<redacted>` from an error as HTML) but the `<br>` our cells join lines with."""
    text = "" if value is None else str(value)
    text = "`".join(p if i % 2 else re.sub(r"<(?!br>)", "&lt;", p) for i, p in enumerate(text.split("`")))
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ").strip() or " "


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return lines


def publish(markdown: str, *, to_stdout: bool = False) -> str:
    """Append to the file ``$GITHUB_STEP_SUMMARY`` names (GitHub Actions sets it); print it too with `--markdown`.
    Returns "" or why that file could not be written (a warning: the command's work is done by now)."""
    path, problem = os.environ.get(SUMMARY_ENV, ""), ""
    if path:
        try:
            with open(path, "a", encoding="utf-8") as out:
                out.write(markdown.rstrip("\n") + "\n\n")
        except OSError as exc:  # e.g. a `docker run -e GITHUB_STEP_SUMMARY` step without the file mounted
            problem = f"job summary not written: {SUMMARY_ENV}={path}: {exc.strerror or exc}"
    if to_stdout:
        print(markdown.rstrip("\n"), flush=True)
    return problem


# ------------------------------------------------------------------------------- annotations

# how amibuild names a line of a file in its messages: `PATH:LINE: ...`
_LINE = re.compile(r"(?P<file>[^\s:]+\.hcl):(?P<line>[0-9]+)(?=[:\s]|\Z)", re.ASCII)


def annotation(message: str, workspace: str | None = None) -> str | None:
    """``::error file=F,line=N::message`` when `message` names a line of a pipeline file, else None.

    GitHub wants the file relative to the workspace (the repository's root); the message's own
    path is made relative to `workspace` (``$GITHUB_WORKSPACE``, else the current folder).
    """
    match = _LINE.search(message)
    if not match:
        return None
    path = match.group("file")
    base = workspace or os.environ.get("GITHUB_WORKSPACE") or os.getcwd()
    if os.path.isabs(path):
        relative = os.path.relpath(path, base)
        path = relative if not relative.startswith("..") else path
    text = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    file = path.replace("%", "%25").replace(",", "%2C").replace(":", "%3A").replace("\r", "%0D").replace("\n", "%0A")
    return f"::error file={file},line={match.group('line')}::{text}"


def annotate(message: str) -> None:
    """In GitHub Actions (``GITHUB_ACTIONS=true``), print the error as a workflow command on stderr."""
    line = annotation(message) if os.environ.get("GITHUB_ACTIONS") == "true" else None
    if line:
        print(line, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------- renderers


def fleet_markdown(view: Any) -> str:
    """The fleet view: channels, then consumers with how far behind they are and what rolls them."""
    lines = [f"### amibuild fleet: {view.pipeline}", "", "**Channels**", ""]
    lines += table(["variant", "channel", "region", "AMI", "version", "age (days)"],
                   [(c.variant, c.channel, c.region, f"`{c.ami}`", c.version,
                     "" if c.age_days is None else f"{c.age_days:.1f}") for c in view.channels])
    lines += ["", "**Consumers**", ""]
    rows = []
    verified = any(getattr(r, "provenance", "") for r in view.consumers)  # `fleet --verify`: a provenance column
    for r in view.consumers:
        behind = ("orphaned: " + r.why) if r.standing == "orphaned" else (
            "current" if r.standing == "current" else f"{r.behind_versions} behind ({r.behind_days or 0:.1f} d)")
        named = f" ({r.detail})" if r.kind == "instances" else f" (stack {r.stack})" if r.stack else ""
        row = (r.kind, r.name + named, r.region, f"`{r.image_id}`",
               f"{r.variant} {r.channel}".strip(), "" if r.version is None else r.version, behind,
               f"`{r.command}`" if r.command else r.hint)
        if verified:
            row += ("valid" if not r.unverified else f"**UNVERIFIED**: {r.provenance}",)
        rows.append(row)
    lines += table(["kind", "consumer", "region", "image", "channel", "version", "behind", "to roll"]
                   + (["provenance"] if verified else []), rows)
    return "\n".join(lines)


def build_markdown(run: Any) -> str:
    """build-ami: one row per variant (status, AMI per region, fingerprint, duration, published, test)."""
    head = f"### amibuild build-ami {run.plan.run_id}"
    if run.outcomes is None:
        moves = {m.variant: m for m in getattr(run, "publish_plan", ())}

        def publish_cell(name: str) -> str:
            move = moves.get(name)
            if move is None:
                return "-"
            return "<br>".join(f"{r.region}: `{r.previous or '(new)'}` → `{r.new or 'this build'}` v{r.version}"
                               + (" **OLDER build**" if r.older else "") for r in move.regions)
        rows = [(i.name, str(i.decision), i.reason, publish_cell(i.name))
                for i in run.plan.items]
        return "\n".join([head + " (dry run: nothing built)", ""] + table(["variant", "plan", "why", "publish"], rows))
    rows = []
    for o in run.outcomes:
        done = run.publish_of(o.name)  # what the publish step did for it (None: not published)
        published = done.published() if done else {}
        where = ", ".join(f"{k} v{v}" if isinstance(v, int) else f"{k} {v}"
                          for k, v in (published.get("regions") or {}).items())
        channel = f"{published.get('channel', '')} {where}".strip() if published else ""
        test = (o.boot_test or {}).get("result")  # build-ami --boot-test's verdict: passed, failed, not tested
        amis = "<br>".join(f"{region}: `{ami}`" for region, ami in sorted(o.amis.items())) or "-"
        rows.append((o.name, str(o.status), amis, f"`{o.fingerprint}`" if o.fingerprint else "",
                     f"{o.seconds:.0f}s", (done.error if done else "") or channel or "-", test or "-",
                     o.error or o.reason))
    lines = [head, ""] + table(["variant", "status", "AMI per region", "fingerprint", "duration", "published",
                                "test", "note"], rows)
    if run.sharing:
        lines += ["", "**Sharing**", ""] + [f"- {cell(p)}" for p in run.sharing]
    return "\n".join(lines)


def publish_markdown(result: Any) -> str:
    """publish / promote / rollback: one row per region of the channel write."""
    rows = [(r.region, str(r.action), f"`{r.ami}`", f"`{r.previous_ami}`" if r.previous_ami else "-",
             f"{r.previous_version} → {r.version}" if r.previous_version != r.version else str(r.version))
            for r in result.regions]
    title = f"### amibuild {result.operation}: {result.variant} {result.channel}"
    return "\n".join([title, "", f"`{result.parameter}`", ""]
                     + table(["region", "action", "AMI", "before", "version"], rows))


def rollout_markdown(result: Any) -> str:
    done = "dry run" if result.dry_run else ("verified" if result.verified else
                                             "started, not waited for" if result.started else "-")
    rows = [(result.target, result.region, str(result.action), result.channel, f"`{result.ami}`",
             f"`{result.previous_image}`" if result.previous_image else "-", result.status or "-", done,
             result.reason)]
    return "\n".join([f"### amibuild rollout: {result.target}", ""]
                     + table(["target", "region", "action", "channel", "AMI", "before", "status", "result", "why"],
                             rows))


def channels_markdown(entries: Sequence[Any]) -> str:
    rows = [(e.variant, e.channel, e.region, f"`{e.ami}`" if e.ami else "missing", e.version or "-",
             # botocore dates it in the local zone; said in UTC, as everywhere else
             e.modified.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M") if e.modified else "-") for e in entries]
    return "\n".join(["### amibuild channels", ""]
                     + table(["variant", "channel", "region", "AMI", "version", "written"], rows))


def due_markdown(items: Sequence[Any], dry_run: bool = False) -> str:
    """`promote --due`: one row per variant x gated channel: promoted, waiting (until when) or failed."""
    rows = [(i.variant, i.channel, i.source, str(i.action), f"`{i.ami}`" if i.ami else "-",
             i.due_at.strftime("%Y-%m-%d %H:%M UTC") if i.due_at else "-", i.detail) for i in items]
    return "\n".join([f"### amibuild promote --due{' (dry run: nothing written)' if dry_run else ''}", ""]
                     + (table(["variant", "channel", "from", "action", "AMI", "due", "detail"], rows) if rows
                        else ["no gated channel (a pipeline `channel` block with `from`)"]))


def channel_check_markdown(splits: Sequence[Any]) -> str:
    """`channels --check`: every split channel, one row per region and what it holds."""
    rows = [(s.variant, s.channel, h.region, f"`{h.ami}`" if h.ami else "nothing",
             h.build.partition(" ")[0][:12] if h.build else "-") for s in splits for h in s.holdings]
    return "\n".join(["### amibuild channels --check", ""]
                     + (table(["variant", "channel", "region", "AMI", "build"], rows) if rows
                        else ["every channel is whole: each region holds an image of the same build"]))


def rehearse_markdown(reports: Sequence[Any]) -> str:
    """rehearse: one row per variant: passed, failed (the first failure, or amibuild's own shellcheck
    errors) or incomplete (the step it could not rehearse), as the report's verdict line says."""
    rows = []
    for report in reports:
        failure = report.failure
        if failure:
            note = f"step {failure.step}: {failure.where()} {failure.ended()}"
        elif not report.ok:
            note = "shellcheck: " + "; ".join(f.text() for f in report.own_findings)
        else:
            note = report.incomplete or "; ".join(report.notes) or "-"
        verdict = "passed" if report.ok and not report.gaps else "incomplete" if report.ok else "failed"
        rows.append((report.variant, verdict, len(report.steps), f"{report.seconds:.0f}s", note))
    return "\n".join(["### amibuild rehearse", ""] + table(["variant", "result", "steps", "duration", "note"], rows))
