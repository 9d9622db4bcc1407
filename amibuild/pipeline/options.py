"""What every job is asked to work on: the pipeline file, the flags that override it, and where
to write. One frozen value, made once by `amibuild.cli` from flags and config; the stages read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from amibuild.pipeline import Overrides, Pipeline, load

DEFAULT_BUILD_DIR = "build"
PARSE_CACHE = ".hcl-cache"  # in the build folder: python-hcl2 parses of the pipeline file (amibuild.hclcache)


@dataclass(frozen=True)
class Options:
    """The selection and input settings the render / validate / build / channel jobs share."""

    pipeline_file: str | None = None
    overrides: Overrides = Overrides()
    build_dir: str = DEFAULT_BUILD_DIR
    packer: str = "packer"
    profile: str | None = None
    cache_dir: str | None = None


def load_pipeline(options: Options) -> Pipeline:
    """The pipeline file (or the flags alone) read, overridden and validated."""
    from amibuild.aws import default_region  # deferred: boto3 behind it, not on the `amibuild --list` path

    return load(options.pipeline_file, options.overrides, default_region=default_region(options.profile),
                parse_cache=Path(options.build_dir) / PARSE_CACHE)
