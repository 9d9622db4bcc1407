"""What the task groups share: the selection flags (`Selection`, `Output`), the target the builds are rendered
for, the channel flags' help and the channel lease settings from invoke's config.

Part of the task table `amibuild.cli.tasks` assembles (its docstring says how flags and
imports are kept fast).
"""

from dataclasses import dataclass

from amibuild.errors import SpecError
from amibuild.cli.command import JSON_HELP, K8S_HELP, Scope, flag, flags, like, scope_options  # noqa: F401


@dataclass(frozen=True)
class Selection:
    """The 14 selection and input flags render, validate, rehearse and build-ami share."""

    pipeline: str | None = flag("Pipeline file (default: the nearest amibuild.hcl in this folder or above it, up to "
                                "the repository root)")
    variant: tuple[str, ...] = flag("Variant to use (repeatable; default: every variant in the pipeline file)",
                                    repeat=True)
    base: str | None = flag("Base: eks-optimized (default) or upstream")
    upstream: str | None = flag("Upstream amazon-eks-ami checkout: a path or git URL (with --base upstream)")
    upstream_ref: str | None = flag("Git ref (tag, branch, commit) of the upstream checkout")
    os: str | None = flag("Operating system: al2 or al2023")
    k8s: str | None = flag("Kubernetes version, e.g. 1.30 (the upstream base also takes 1.30.4 with "
                           "--var kubernetes_build_date=...)")
    arch: str | None = flag("Architecture: x86_64 or arm64")
    flavor: str | None = flag("EKS-optimized image flavor: standard (default), nvidia or neuron (al2023), gpu (al2)")
    region: tuple[str, ...] = flag("Build region (repeatable; default: the pipeline's regions, else AWS_REGION)",
                                   repeat=True)
    extra_pkg: tuple[str, ...] = flag("Extra RPM package to install (repeatable; added to the variant's own)",
                                      repeat=True)
    extra_repo: tuple[str, ...] = flag(
        "Extra yum repository NAME=URL|GPGKEY (repeatable; added to the variant's own): GPGKEY an https:// URL or "
        "a local armored key file, or NAME=URL|gpgcheck=false; |insecure=true to allow plain http", repeat=True)
    var: tuple[str, ...] = flag("Packer variable KEY=VALUE (repeatable; wins over everything else)", repeat=True)
    var_file: tuple[str, ...] = flag("Packer var-file FILE.pkrvars.hcl (repeatable; later files win)", repeat=True)


@dataclass(frozen=True)
class Output:
    """Where a job writes and whose AWS credentials it uses."""

    build_dir: str | None = flag("Output folder (default: build)")
    profile: str | None = flag("AWS profile (default: AWS_PROFILE / the standard chain)")


# the help of iam-policy and doctor, not declared as a request yet
SELECT_HELP = {f.name: f.metadata["help"] for f in (*flags(Selection), *flags(Output))}

MARKDOWN_HELP = "Print a Markdown summary on stdout (what is appended to $GITHUB_STEP_SUMMARY in GitHub Actions)"


@dataclass(frozen=True)
class ChannelRequest:
    """The flags that name one variant's channels: publish, promote, rollback, history."""

    pipeline: str | None = like(Selection, "pipeline")
    variant: str | None = flag("Variant whose channel this is (required)")
    k8s: str | None = flag(K8S_HELP)
    profile: str | None = like(Output, "profile")
    json: bool = flag(JSON_HELP, False)



def _target() -> dict:
    """What the builds are rendered for: the target and the transform of the platform AMIBUILD_TARGET
    names (`amibuild.cli.target`), as keyword arguments of the render, validate and build jobs."""
    from amibuild.cli.target import platform  # deferred: the renderer, not on the `amibuild --list` path

    chosen = platform()
    return {"target": chosen.target, "transform": chosen.transform}


def _seconds(c, key, default, what, *, positive=False):
    """A number of seconds from config `amibuild.KEY` (invoke.yaml / INVOKE_AMIBUILD_KEY), else `default`."""

    raw = c.config.get("amibuild", {}).get(key)
    try:
        value = default if raw in (None, "") else float(raw)
    except (TypeError, ValueError):
        value = -1.0
    if not 0 <= value < float("inf") or (positive and value == 0):  # NaN fails both comparisons
        raise SpecError(f"amibuild.{key} {raw!r} (invoke.yaml / INVOKE_AMIBUILD_{key.upper()}): {what}")
    return value


def _guard(c, signals, run_id=None):
    """The channel lease settings: how long to wait for a busy channel (config `amibuild.lease_wait`),
    how long a lease is good for (`amibuild.lease_ttl`), how long the write may wait on AWS in all
    (`amibuild.channel_deadline`, default 30 s), and the signals that stop a transaction before its
    first write."""
    from amibuild.lease import LEASE_TTL, LEASE_WAIT, Guard  # deferred: not on the `amibuild --list` path

    wait = _seconds(c, "lease_wait", LEASE_WAIT, "seconds to wait for a channel another writer holds, e.g. 30")
    ttl = _seconds(c, "lease_ttl", LEASE_TTL, "seconds a channel lease is good for, more than 0, e.g. 300",
                   positive=True)
    return Guard(run_id=run_id or "", wait=wait, ttl=ttl, cancelled=signals.requested, deadline=_channel_deadline(c))


def _channel_deadline(c) -> float | None:
    """Config `amibuild.channel_deadline`: seconds of waiting on AWS a channel write may spend; None: the default."""
    if c.config.get("amibuild", {}).get("channel_deadline") in (None, ""):
        return None
    return _seconds(c, "channel_deadline", None, "seconds of waiting on AWS a channel write may spend, more than 0, "
                    "e.g. 30", positive=True)


class _NO_SIGNALS:  # noqa: N801 - in place of `Signals` where a task holds none off
    @staticmethod
    def requested() -> bool:
        return False


def _read_timeout(c):
    """The channel client's read timeout from config `amibuild.read_timeout` (seconds), or None: the default."""
    raw = c.config.get("amibuild", {}).get("read_timeout")
    if raw in (None, ""):
        return None
    return _seconds(c, "read_timeout", None, "seconds one AWS request may wait for its answer, more than 0, e.g. 10",
                    positive=True)

