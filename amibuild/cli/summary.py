"""CI summaries people read: Markdown for ``$GITHUB_STEP_SUMMARY`` (and `--markdown`), and workflow commands.

When ``GITHUB_STEP_SUMMARY`` names a file (GitHub Actions sets it for every step), `build-ami`,
`promote`, `rollout`, `fleet`, `rehearse` and `channels --check` append a Markdown summary to it:
a table per variant (status, AMI per region, fingerprint, duration, test result) or per consumer.
`--markdown` prints the same summary on stdout, anywhere. An error that names a line of the
pipeline file is also printed as a workflow command, ``::error file=amibuild.hcl,line=N::message``,
so GitHub annotates that line (`annotation`).

The renderers are pure (a result in, Markdown text out) and read results through the fields the
result objects already carry, so a result that gains a field does not break them.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable, Mapping, Sequence

SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


def cell(value: Any) -> str:
    """A value as one Markdown table cell: no newlines, pipes escaped."""
    text = "" if value is None else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ").strip() or " "


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return lines


def append(markdown: str, environ: Mapping[str, str] | None = None) -> str | None:
    """Append to the file ``$GITHUB_STEP_SUMMARY`` names; its path, or None when it is not set."""
    path = (environ if environ is not None else os.environ).get(SUMMARY_ENV, "")
    if not path:
        return None
    with open(path, "a", encoding="utf-8") as out:
        out.write(markdown.rstrip("\n") + "\n\n")
    return path


def publish(markdown: str, *, to_stdout: bool = False) -> None:
    """Append to the step summary when running in GitHub Actions; print it too with `--markdown`."""
    append(markdown)
    if to_stdout:
        print(markdown.rstrip("\n"), flush=True)


# ------------------------------------------------------------------------------- annotations

_LINE = re.compile(r"(?P<file>[^\s:,;()'\"]+\.hcl)(?::| line |, line |:line )(?P<line>[0-9]+)")


def annotation(message: str) -> str | None:
    """``::error file=F,line=N::message`` when `message` names a line of a pipeline file, else None."""
    match = _LINE.search(message)
    if not match:
        return None
    text = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    file = match.group("file").replace("%", "%25").replace(",", "%2C").replace(":", "%3A")
    return f"::error file={file},line={match.group('line')}::{text}"


# ------------------------------------------------------------------------------- renderers


def fleet_markdown(view: Any) -> str:
    """The fleet view: channels, then consumers with how far behind they are and what rolls them."""
    lines = [f"### amibuild fleet: {view.pipeline}", "", "**Channels**", ""]
    lines += table(["variant", "channel", "region", "AMI", "version", "age (days)"],
                   [(c.variant, c.channel, c.region, f"`{c.ami}`", c.version,
                     "" if c.age_days is None else f"{c.age_days:.1f}") for c in view.channels])
    lines += ["", "**Consumers**", ""]
    rows = []
    for r in view.consumers:
        behind = ("orphaned: " + r.why) if r.standing == "orphaned" else (
            "current" if r.standing == "current" else f"{r.behind_versions} behind ({r.behind_days or 0:.1f} d)")
        rows.append((r.kind, r.name + (f" ({r.detail})" if r.kind == "instances" else ""), r.region, f"`{r.image_id}`",
                     f"{r.variant} {r.channel}".strip(), "" if r.version is None else r.version, behind,
                     f"`{r.command}`" if r.command else r.hint))
    lines += table(["kind", "consumer", "region", "image", "channel", "version", "behind", "to roll"], rows)
    return "\n".join(lines)


def build_markdown(run: Any) -> str:
    """build-ami: one row per variant (status, AMI per region, fingerprint, duration, test result)."""
    data = run.to_dict() if hasattr(run, "to_dict") else dict(run)
    rows = []
    for v in data.get("variants", []):
        amis = v.get("amis") or v.get("artifacts") or {}
        ami_text = ", ".join(f"{region}: `{ami}`" for region, ami in sorted(amis.items())) if isinstance(amis, dict) \
            else ", ".join(map(str, amis))
        seconds = v.get("duration") or v.get("seconds") or v.get("elapsed")
        duration = f"{float(seconds):.0f}s" if isinstance(seconds, (int, float)) else (seconds or "")
        test = v.get("test") or v.get("tests") or v.get("rehearsal") or ""
        if isinstance(test, dict):
            test = test.get("status") or test.get("result") or ""
        rows.append((v.get("variant") or v.get("name"), v.get("status") or v.get("action"), ami_text,
                     f"`{v['fingerprint']}`" if v.get("fingerprint") else "", duration, test,
                     v.get("error") or v.get("reason") or ""))
    lines = [f"### amibuild build-ami{': ' + str(data['run_id']) if data.get('run_id') else ''}", ""]
    lines += table(["variant", "status", "AMI per region", "fingerprint", "duration", "test", "note"], rows)
    return "\n".join(lines)


def publish_markdown(result: Any, operation: str) -> str:
    """promote / publish / rollback: one row per region of the channel write."""
    data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
    plan = data.get("plan", data)
    rows = [(r.get("region"), r.get("action") or r.get("status"), f"`{r.get('ami')}`" if r.get("ami") else "",
             r.get("previous") or r.get("current") or "", r.get("version") or "")
            for r in plan.get("regions", data.get("regions", []))]
    title = f"### amibuild {operation}: {plan.get('variant', '')} {plan.get('channel', '')}".rstrip()
    return "\n".join([title, ""] + table(["region", "action", "AMI", "before", "version"], rows))


def rollout_markdown(result: Any) -> str:
    data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
    keys = [k for k in ("target", "region", "action", "status", "before", "after", "image", "reason") if k in data]
    return "\n".join([f"### amibuild rollout: {data.get('target', '')}", ""]
                     + table(keys, [[data.get(k) for k in keys]]))


def channels_markdown(entries: Sequence[Any], problems: Sequence[str] = ()) -> str:
    rows = [(e.variant, e.channel, e.region, f"`{e.ami}`" if e.ami else "missing", e.version or "",
             e.modified.strftime("%Y-%m-%d %H:%M") if getattr(e, "modified", None) else "") for e in entries]
    lines = ["### amibuild channels", ""] + table(["variant", "channel", "region", "AMI", "version", "written"], rows)
    if problems:
        lines += ["", "**Problems**", ""] + [f"- {cell(p)}" for p in problems]
    return "\n".join(lines)


def rehearse_markdown(reports: Sequence[Any]) -> str:
    rows = []
    for report in reports:
        data = report.to_dict() if hasattr(report, "to_dict") else dict(report)
        rows.append((data.get("variant"), data.get("status") or ("passed" if data.get("ok") else "failed"),
                     len(data.get("steps", []) or []), data.get("failed_step") or data.get("error") or ""))
    return "\n".join(["### amibuild rehearse", ""] + table(["variant", "result", "steps", "note"], rows))
