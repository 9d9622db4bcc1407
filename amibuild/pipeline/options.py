"""What every job is asked to work on: the pipeline file, the flags that override it, and where
to write. One frozen value, made once by `amibuild.cli` from flags and config; the stages read it.
"""

from __future__ import annotations

import os
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
    return load(options.pipeline_file, options.overrides, default_region=default_region(options.profile),
                parse_cache=Path(options.build_dir) / PARSE_CACHE)


def default_region(profile: str | None = None) -> str:
    """The build region when neither the pipeline file nor --region names one: AWS_REGION,
    AWS_DEFAULT_REGION, the profile's region in ~/.aws/config, else us-west-2."""
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        return region
    # deferred: botocore's session (~0.1 s) only when the environment names no region, so that render and
    # validate (which load no AWS gateway) do not pay for it otherwise
    import botocore.session

    try:
        return botocore.session.Session(profile=profile).get_config_variable("region") or "us-west-2"
    except Exception:  # a broken or missing profile: the AWS calls later say what is wrong
        return "us-west-2"
