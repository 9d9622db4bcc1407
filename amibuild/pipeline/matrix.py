"""The pipeline's variants as a CI matrix, so a pipeline fans out one variant per runner.

`matrix(pipeline)` is GitHub Actions' ``strategy.matrix`` shape, ``{"include": [{...}, ...]}``, one
entry per variant with the fields a job name or a runner choice may want; other CI systems take the
same list. `github_output` appends it to the ``$GITHUB_OUTPUT`` file as ``matrix=<json>``, which a
later job reads with ``fromJSON(needs.<job>.outputs.matrix)``. Nothing here touches AWS: the plan job
of a workflow needs no credentials.
"""

from __future__ import annotations

import json
import os
from typing import Any

from amibuild.errors import AmibuildError, UsageError
from amibuild.pipeline import Pipeline

# The fields of each entry, in table order. `variant` is what a job passes to `--variant`.
FIELDS = ("variant", "os", "arch", "kubernetes_version", "base")

# GitHub Actions refuses a matrix with more jobs than this in one workflow run.
GITHUB_MAX_JOBS = 256


def matrix(pipeline: Pipeline) -> dict[str, list[dict[str, str]]]:
    """``{"include": [{"variant", "os", "arch", "kubernetes_version", "base"}, ...]}``, file order."""
    return {"include": [{"variant": v.name, "os": v.os, "arch": v.arch, "kubernetes_version": v.kubernetes_version,
                         "base": v.base} for v in pipeline.variants]}


def github_output(value: dict[str, Any], path: str | os.PathLike | None = None) -> str:
    """Append ``matrix=<compact JSON>`` to the ``$GITHUB_OUTPUT`` file (or ``path``); the line written.

    Compact JSON never holds a raw newline, so the one-line ``name=value`` form is enough (no
    heredoc delimiter needed).
    """
    path = path or os.environ.get("GITHUB_OUTPUT")
    if not path:
        raise UsageError("--github: GITHUB_OUTPUT is not set; run inside a GitHub Actions step, or use --json")
    jobs = len(value.get("include", ()))
    if jobs > GITHUB_MAX_JOBS:
        raise UsageError(f"--github: {jobs} variants, but GitHub Actions runs at most {GITHUB_MAX_JOBS} jobs "
                         "per matrix; split the pipeline or select some with --variant")
    line = "matrix=" + json.dumps(value, separators=(",", ":"), sort_keys=True)
    try:
        with open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")
    except OSError as exc:
        raise AmibuildError(f"--github: cannot write GITHUB_OUTPUT {path} ({exc.strerror or exc})") from exc
    return line


def table(value: dict[str, Any]) -> list[str]:
    """The matrix as aligned text lines, a header first."""
    headers = {"variant": "variant", "os": "os", "arch": "arch", "kubernetes_version": "k8s", "base": "base"}
    rows = [headers, *value.get("include", ())]
    widths = {f: max(len(str(row[f])) for row in rows) for f in FIELDS}
    return ["  ".join(str(row[f]).ljust(widths[f]) for f in FIELDS).rstrip() for row in rows]
