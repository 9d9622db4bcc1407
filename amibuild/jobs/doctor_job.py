"""The `doctor` job: what a new user gets wrong, one check per line, each saying what to do.

`checks(options)` looks at the machine (packer, pipeline, region, credentials, endpoint, identity)
and returns a `Doctor` report, the `Check` values in display order; it says itself whether a check
failed (`raise_for_status`, exit 1). `Hints` carries the caller's other ways out when no credentials
or no endpoint answer (the CLI's: its local emulator). Each check in detail: docs/dev/decisions.md.
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError

from amibuild import PIPELINE_FILE, hcl
from amibuild.aws import Aws
from amibuild.aws.session import NO_CREDENTIALS
from amibuild.bake.packer import INSTALL_HINT, Packer
from amibuild.bake.prepare import support_warnings
from amibuild.errors import AmibuildError, AwsError, PackerError, PackerNotFound, UsageError
from amibuild.handoff.consumer import Check
from amibuild.lifecycle import keyshare_check
from amibuild.pipeline import Pipeline, known_regions, load
from amibuild.pipeline.options import Options
from amibuild.suggest import suggest

CONNECT_TIMEOUT = 2.0  # seconds; a local emulator answers in milliseconds, a dead port at once
FALLBACK_REGION = "us-west-2"  # what options.default_region() falls back to when nothing is set
_ENDPOINT_VAR = re.compile(r"^AWS_ENDPOINT_URL(?:_[A-Z0-9_]+)?\Z")
_NO_CREDENTIALS = (f"{NO_CREDENTIALS}; set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (run `aws sso login` "
                   "for an SSO profile)")


@dataclass(frozen=True)
class Hints:
    """What else to try, from the caller: after the missing credentials' advice, and before an
    unreachable endpoint's "fix or unset" (each "" for AWS's own advice alone)."""

    credentials: str = ""
    endpoint: str = ""


@dataclass(frozen=True)
class Doctor:
    """Every check, in display order; failed when one of them is."""

    checks: tuple[Check, ...]

    def __iter__(self):
        return iter(self.checks)

    def lines(self) -> list[str]:
        return [c.line() for c in self.checks]

    def to_list(self) -> list[dict[str, object]]:
        """The JSON: a list of the checks."""
        return [vars(c) for c in self.checks]

    def raise_for_status(self) -> None:
        """Raise (exit 1) naming the failed checks; return when all passed."""
        failed = [c.name for c in self.checks if not c.ok]
        if failed:
            raise AmibuildError(f"doctor: {len(failed)} check(s) failed: {', '.join(failed)}")


def checks(options: Options, *, hints: Hints = Hints()) -> Doctor:
    """Every check, in display order (see the module docstring)."""
    env_name, env_region = next(iter(_env_regions()), ("", ""))
    region_problem = _not_a_region(env_name, env_region)
    # A mistyped AWS_REGION would otherwise fail the pipeline check under the pipeline's name.
    default_region = env_region if env_region and not region_problem else FALLBACK_REGION
    pipeline_check, pipeline = check_pipeline(options, default_region)
    aws, credentials = check_credentials(options.profile, hints=hints)
    endpoint = check_endpoints(hints=hints)
    results = [
        check_packer(options.packer),
        pipeline_check,
        *([check_support(pipeline)] if pipeline is not None else []),
        check_region(pipeline, env_name, env_region, aws.region if aws else None,
                     misspelled=misspelled_regions(_region_sources(options.profile, aws))),
        credentials,
        endpoint,
    ]
    if aws is not None and credentials.ok and endpoint.ok:
        results.append(check_identity(aws, pipeline.build_region if pipeline else default_region))
        if pipeline is not None and results[-1].ok:
            results += [Check("key-share", f.ok, f.line()) for f in keyshare_check.check(aws, pipeline)]
    return Doctor(tuple(results))


# ------------------------------------------------------------------------------------ the checks


def check_packer(binary: str) -> Check:
    packer = Packer(binary)
    try:
        path = packer.path
    except PackerNotFound:
        return Check("packer", False, f"not found ({binary!r} is not on PATH); {INSTALL_HINT}")
    try:
        version = packer.version()
    except PackerNotFound as exc:  # runs, but older than MIN_VERSION; or cannot be run at all
        return Check("packer", False, str(exc))
    except PackerError as exc:
        return Check("packer", False, f"{path} does not work ({exc}); reinstall it: {INSTALL_HINT}")
    if not version.uses_plugins:
        return Check("packer", True, f"{version} at {path} ({version}: no IMDSv2 settings on the build "
                                     "instance; 1.7+ recommended)")
    return Check("packer", True, f"{version} at {path} (required_plugins and IMDSv2 settings on the build instance)")


def check_pipeline(options: Options, default_region: str) -> tuple[Check, Pipeline | None]:
    try:
        pipeline = load(options.pipeline_file, options.overrides, default_region=default_region)
    except AmibuildError as exc:
        return Check("pipeline", False, str(exc)), None
    if pipeline.source is None:
        message = (f"no {PIPELINE_FILE} in {Path.cwd()}; flags alone give one variant, `default` "
                   "(pass --pipeline FILE to use another)")
    else:
        message = f"{pipeline.source}: {len(pipeline.variants)} variant(s): {', '.join(v.name for v in pipeline.variants)}"
    return Check("pipeline", True, message), pipeline


def check_support(pipeline: Pipeline, today=None) -> Check:
    """Whether every variant's Kubernetes version is still in EKS standard support (a warning if not)."""
    warnings = support_warnings(pipeline, today)
    if warnings:
        return Check("kubernetes", True, "; ".join(warnings), warn=True)
    versions = ", ".join(sorted({v.kubernetes_version for v in pipeline.variants}))
    return Check("kubernetes", True, f"{versions}: in EKS standard support")


def check_region(pipeline: Pipeline | None, env_name: str, env_region: str, profile_region: str | None, *,
                 misspelled: Iterable[str] = ()) -> Check:
    misspelled = list(misspelled)
    if misspelled:  # even where the pipeline's regions win: other commands and Packer's copies read them
        return Check("region", False, "; ".join(misspelled))
    if pipeline is not None and _file_sets_regions(pipeline.source):
        copies = f", copies to {', '.join(pipeline.copy_to)}" if pipeline.copy_to else ""
        return Check("region", True, f"builds in {', '.join(pipeline.regions)} (pipeline.regions in "
                                     f"{pipeline.source}){copies}")
    if env_region:
        problem = _not_a_region(env_name, env_region)
        if problem:
            return Check("region", False, problem)
        return Check("region", True, f"builds in {env_region} ({env_name})")
    if profile_region:
        return Check("region", True, f"builds in {profile_region} (the AWS profile's region)")
    return Check("region", False, f"none set, so builds would go to {FALLBACK_REGION}; set AWS_REGION, or "
                                  "regions = [...] in the pipeline block")


def check_credentials(profile: str | None, *, hints: Hints = Hints()) -> tuple[Aws | None, Check]:
    try:
        aws = Aws(profile=profile, max_attempts=2)
    except UsageError as exc:  # the gateway refuses a profile that does not exist
        return None, Check("credentials", False, f"{exc}, or create it with "
                                                 f"`aws configure --profile {profile or 'NAME'}`")
    except BotoCoreError as exc:  # a config or credentials file botocore cannot parse
        return None, Check("credentials", False, f"{exc}; fix that file")
    problem = aws.credentials_problem()
    if problem == NO_CREDENTIALS:
        return aws, Check("credentials", False, _NO_CREDENTIALS + hints.credentials)
    if problem:  # a broken profile: say what botocore found wrong, not "none found"
        return aws, Check("credentials", False, f"{problem}; fix profile {profile or os.environ.get('AWS_PROFILE') or 'default'} "
                                                "in ~/.aws/config (or AWS_CONFIG_FILE)")
    if os.environ.get("AWS_ACCESS_KEY_ID"):
        source = "AWS_ACCESS_KEY_ID in the environment"
    elif profile:
        source = f"profile {profile}"
    else:
        source = "the standard chain (config files, SSO or instance role)"
    return aws, Check("credentials", True, f"found ({source})")


def check_endpoints(*, hints: Hints = Hints()) -> Check:
    """Each endpoint override accepts a TCP connection within `CONNECT_TIMEOUT` seconds."""
    overrides = sorted((k, v) for k, v in os.environ.items() if _ENDPOINT_VAR.match(k) and v)
    if not overrides:
        return Check("endpoint", True, "no AWS_ENDPOINT_URL override: AWS's own endpoints")
    if os.environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() == "true":
        return Check("endpoint", True, f"{', '.join(k for k, _ in overrides)} set but ignored "
                                       "(AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true)")
    for name, url in overrides:
        problem = _unreachable(url, CONNECT_TIMEOUT)
        if problem:
            return Check("endpoint", False, f"{name}={url}: {problem}; {hints.endpoint}fix or unset {name}")
    return Check("endpoint", True, f"{', '.join(f'{name}={url}' for name, url in overrides)} accepts connections")


def check_identity(aws: Aws, region: str) -> Check:
    try:
        who = aws.caller_identity(region)
    except AwsError as exc:
        return Check("identity", False, str(exc))
    return Check("identity", True, f"account {who['account']} as {who['arn']} (sts in {region})")


# ------------------------------------------------------------------------------------- helpers


def _env_regions() -> list[tuple[str, str]]:
    """(variable, value) of each region the environment sets, first the one `options.default_region` reads."""
    return [(name, os.environ[name]) for name in ("AWS_REGION", "AWS_DEFAULT_REGION") if os.environ.get(name)]


def _region_sources(profile: str | None, aws: Aws | None) -> list[tuple[str, str]]:
    """(where, region) for every place a region is set: AWS_REGION, AWS_DEFAULT_REGION, the profile's config."""
    found = _env_regions()
    configured = aws.configured_region() if aws is not None else None
    if configured:
        name = profile or os.environ.get("AWS_PROFILE") or "default"
        found.append((f"the region of profile {name} (~/.aws/config, or AWS_CONFIG_FILE)", configured))
    return found


def misspelled_regions(sources: Iterable[tuple[str, str]]) -> list[str]:
    """One problem per source naming a region that is not an AWS region, with the nearest one."""
    return [problem for where, region in sources if (problem := _not_a_region(where, region))]


def _not_a_region(where: str, region: str) -> str:
    """"" for no region or an AWS region; else what is wrong, the nearest region, and what to fix."""
    if not region or region in known_regions():
        return ""
    variable = where.startswith("AWS_")
    return (f"{where}{'=' if variable else ': '}{region} is not an AWS region{suggest(region, sorted(known_regions()))}"
            f"; fix {where if variable else 'it'}")


def _file_sets_regions(source: Path | None) -> bool:
    """Whether the pipeline file itself names build regions (load fills in a default otherwise)."""
    if source is None:
        return False
    doc = hcl.loads(source.read_text(encoding="utf-8"))  # load has just read and checked it
    blocks = doc.get("pipeline") or []
    blocks = [blocks] if isinstance(blocks, dict) else blocks
    return any(isinstance(b, dict) and b.get("regions") for b in blocks)


def _unreachable(url: str, timeout: float) -> str:
    """Why nothing answers at `url` (one phrase), or "" when a TCP connection opens."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "not an http(s) URL; write e.g. http://127.0.0.1:5000"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return "the port is not a number"
    started = time.monotonic()
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            return ""
    except socket.gaierror:
        return f"unknown host {parts.hostname}"
    except ConnectionRefusedError:
        reason = "connection refused"
    except TimeoutError:
        reason = f"no answer within {timeout:g}s"
    except OSError as exc:
        reason = exc.strerror or exc.__class__.__name__
    return f"unreachable: nothing answers on {parts.hostname}:{port} ({reason} after {time.monotonic() - started:.1f}s)"
