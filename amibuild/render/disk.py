"""A `Rendered` put on disk: into a fresh folder beside the old one, swapped in whole, so a failure
never leaves a half-written variant."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, Mapping

from amibuild.render.render_model import RECORD_FILE, Rendered


def write(rendered: Rendered, out_dir: Path, record: Mapping[str, Any]) -> Path:
    """Write one variant's files into out_dir/<variant>/, replacing what was there as a whole."""
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / rendered.variant.name
    staging = Path(tempfile.mkdtemp(prefix=f".{rendered.variant.name}-", dir=out_dir))
    try:
        write_files(rendered, staging)
        (staging / RECORD_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        # keep build logs and records of earlier runs that live beside the rendered files
        if final.exists():
            for keep in ("packer.log", "manifest.json"):
                if (final / keep).exists():
                    shutil.copy2(final / keep, staging / keep)
            old = final.with_name(f".{final.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            final.rename(old)
            staging.rename(final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            staging.rename(final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final


def write_files(rendered: Rendered, root: Path) -> None:
    """Every file of `rendered` under `root`, its scripts executable."""
    for name, text in rendered.files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if name in rendered.executable:
            path.chmod(0o755)
