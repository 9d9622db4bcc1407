"""The example GitHub Actions workflows parse, are wired the way GitHub needs, and name only real tasks
and flags: an example that calls a renamed task fails here, not on a user's first scheduled run."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
EXPECTED = ["fleet.yml", "nightly-build.yml", "promote-due.yml", "promote.yml", "prune.yml", "rehearse.yml"]

# `amibuild TASK ...` in a run: script, however the command is reached (.venv/bin/amibuild, amibuild);
# the program's own options before the task name are skipped.
_AMIBUILD = re.compile(r"(?:^|[\s/;&|(])amibuild((?:\s+-[-\w=]+)*)\s+([a-z][\w.-]*)([^\n;&|]*)")
# `invoke TASK` works only inside this repository: an example a user copies must not say it
_INVOKE = re.compile(r"(?:^|[\s/;&|(`])invoke\s+[a-z-]")
_FLAG = re.compile(r"(?<![\w-])--([a-z][\w-]*)")


@functools.cache
def task_names() -> frozenset[str]:
    result = run_cli(ROOT, "--list", "--list-format", "json")
    assert result.returncode == 0, result.stderr
    return frozenset(t["name"] for t in json.loads(result.stdout)["tasks"])


@functools.cache
def task_help(name: str) -> str:
    result = run_cli(ROOT, name, "--help")
    assert result.returncode == 0, result.stderr
    return result.stdout


def load(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))


def steps(doc: dict):
    for job_id, job in doc["jobs"].items():
        for step in job.get("steps", []):
            yield job_id, step


def commands(doc: dict) -> list[tuple[str, str, list[str]]]:
    """(job, task, flags) for every `amibuild TASK` in the workflow's run: scripts."""
    found = []
    for job_id, step in steps(doc):
        for match in _AMIBUILD.finditer(step.get("run", "")):
            found.append((job_id, match.group(2), _FLAG.findall(match.group(3))))
    return found


def test_the_examples_are_there() -> None:
    assert sorted(p.name for p in WORKFLOWS.glob("*.yml")) == EXPECTED


@pytest.mark.parametrize("name", EXPECTED)
def test_workflow_parses_with_triggers_and_jobs(name: str) -> None:
    doc = load(name)
    assert isinstance(doc, dict) and doc.get("name")
    triggers = doc.get(True, doc.get("on"))  # YAML 1.1 reads the bare key `on` as True
    assert triggers, f"{name}: no `on:`"
    assert isinstance(doc.get("jobs"), dict) and doc["jobs"]
    for job_id, job in doc["jobs"].items():
        assert job.get("runs-on"), f"{name}: job {job_id} has no runs-on"
        assert job.get("steps"), f"{name}: job {job_id} has no steps"
        for step in job["steps"]:
            assert ("uses" in step) != ("run" in step), f"{name}: {job_id}: a step needs one of uses/run: {step}"


@pytest.mark.parametrize("name", EXPECTED)
def test_workflow_names_only_tasks_that_exist(name: str) -> None:
    used = commands(load(name))
    assert used, f"{name} runs no amibuild task"
    missing = sorted({task for _, task, _ in used} - task_names())
    assert not missing, f"{name} runs tasks that `amibuild --list` does not have: {', '.join(missing)}"


@pytest.mark.parametrize("name", EXPECTED)
def test_workflow_says_amibuild_not_invoke(name: str) -> None:
    """A pip or pipx install has the `amibuild` command only: the examples (scripts and comments) use it."""
    text = (WORKFLOWS / name).read_text(encoding="utf-8")
    said = [line.strip() for line in text.splitlines() if _INVOKE.search(line)]
    assert not said, f"{name} says `invoke TASK` where a user has only `amibuild TASK`: {said}"


@pytest.mark.parametrize("name", EXPECTED)
def test_workflow_passes_only_flags_the_task_takes(name: str) -> None:
    for job_id, task, flags in commands(load(name)):
        assert task in task_names(), f"{name}: {job_id}: no task {task}"
        text = task_help(task)
        for flag in flags:
            assert re.search(rf"--(?:\[no-\])?{re.escape(flag)}(?![\w-])", text), \
                f"{name}: {job_id}: `amibuild {task}` has no --{flag}"


@pytest.mark.parametrize("name", EXPECTED)
def test_aws_access_is_through_an_oidc_role(name: str) -> None:
    doc = load(name)
    for job_id, job in doc["jobs"].items():
        credential_steps = [s for s in job["steps"]
                            if str(s.get("uses", "")).startswith("aws-actions/configure-aws-credentials@")]
        if not credential_steps:
            continue
        permissions = job.get("permissions", doc.get("permissions", {}))
        assert permissions.get("id-token") == "write", f"{name}: {job_id} assumes a role without id-token: write"
        for step in credential_steps:
            assert step["with"]["role-to-assume"] == "${{ vars.AMIBUILD_ROLE_ARN }}"
            assert not {"aws-access-key-id", "aws-secret-access-key"} & set(step["with"]), "long-lived keys"


@pytest.mark.parametrize("name", EXPECTED)
def test_no_expression_is_pasted_into_a_script(name: str) -> None:
    """Inputs and matrix values reach run: scripts as env variables, so a crafted input is not shell."""
    for job_id, step in steps(load(name)):
        assert "${{" not in step.get("run", ""), f"{name}: {job_id}: {step['run']!r}"


def test_nightly_build_fans_out_over_the_plan_jobs_matrix() -> None:
    doc = load("nightly-build.yml")
    assert {"schedule", "workflow_dispatch"} <= set(doc[True])
    plan, build = doc["jobs"]["plan"], doc["jobs"]["build"]
    output = plan["outputs"]["matrix"]
    step_id = re.fullmatch(r"\$\{\{ steps\.([\w-]+)\.outputs\.matrix \}\}", output).group(1)
    step = next(s for s in plan["steps"] if s.get("id") == step_id)
    assert re.search(r"amibuild matrix --github\b", step["run"])
    assert build["needs"] == "plan"
    assert build["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert build["strategy"]["fail-fast"] is False
    assert [t for _, t, _ in commands({"jobs": {"build": build}})] == ["doctor", "build-ami"]
    assert build["env"]["VARIANT"] == "${{ matrix.variant }}"
    (flags,) = [f for _, t, f in commands({"jobs": {"build": build}}) if t == "build-ami"]
    assert "boot-test" in flags, "the nightly build boot-tests each image before publishing it"


def test_nightly_checks_after_the_builds_that_no_channel_is_split() -> None:
    doc = load("nightly-build.yml")
    job = doc["jobs"]["channels"]
    assert job["needs"] == "build" and job["if"] == "always()"
    assert [(t, f) for _, t, f in commands({"jobs": {"channels": job}})] == [("channels", ["check"])]


def test_promote_waits_for_approval_then_rolls_out() -> None:
    doc = load("promote.yml")
    assert set(doc[True]) == {"workflow_dispatch"}
    assert set(doc[True]["workflow_dispatch"]["inputs"]) == {"variant", "from", "to", "stack"}
    (job,) = doc["jobs"].values()
    assert job["environment"] == "production"
    assert [(t, f) for _, t, f in commands(doc)] == [
        ("promote", ["variant", "from", "to"]),
        ("rollout", ["stack", "variant", "channel"]),
        ("fleet", ["variant", "channel"]),
    ]


def test_fleet_runs_daily_and_fails_when_a_consumer_falls_behind() -> None:
    doc = load("fleet.yml")
    (cron,) = [entry["cron"] for entry in doc[True]["schedule"]]
    assert cron.split()[2:] == ["*", "*", "*"], "daily"
    assert [(t, f) for _, t, f in commands(doc)] == [("fleet", ["check-behind"])]
    run = next(s["run"] for _, s in steps(doc) if "fleet" in s.get("run", ""))
    assert "--check-behind 14d" in run


def test_prune_runs_weekly_with_a_dry_run_first() -> None:
    doc = load("prune.yml")
    (cron,) = [entry["cron"] for entry in doc[True]["schedule"]]
    assert cron.split()[2:] == ["*", "*", "0"], "weekly, on Sundays"
    assert [(t, "dry-run" in f) for _, t, f in commands(doc)] == [("prune", True), ("prune", False)]


def test_rehearse_runs_on_pull_requests_without_aws_access() -> None:
    doc = load("rehearse.yml")
    assert "pull_request" in doc[True]
    assert [t for _, t, _ in commands(doc)] == ["rehearse"]
    for job in doc["jobs"].values():
        assert not [s for s in job["steps"] if "configure-aws-credentials" in str(s.get("uses", ""))]


def test_promote_due_runs_on_a_schedule_and_checks_the_channels_after() -> None:
    doc = load("promote-due.yml")
    assert {"schedule", "workflow_dispatch"} <= set(doc[True])
    assert [(t, f) for _, t, f in commands(doc)] == [("promote", ["due", "json"]), ("channels", ["check"])]
