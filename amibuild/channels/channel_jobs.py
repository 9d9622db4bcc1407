"""The channel jobs: publish, promote, rollback, each one call taking one frozen settings value
(made by the CLI from the flags, the config and the pipeline file). ``dry_run``: the plan the
write would carry out, read without taking the channel's lease; nothing is written.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Iterator, Mapping

from amibuild import notify
from amibuild.aws import Aws
from amibuild.channels import known
from amibuild.channels import publish as ops
from amibuild.lease import Guard
from amibuild.channels.plan import PublishPlan, PublishResult
from amibuild.errors import GateRefused
from amibuild.pipeline import Pipeline, Variant


@dataclass(frozen=True, kw_only=True)
class ChannelSettings:
    """What every channel write needs: whose channel, the lease's guard, and how to write."""

    profile: str | None
    pipeline: Pipeline
    variant: Variant
    guard: Guard = field(default_factory=Guard)
    force: bool = False  # write even if another writer moved the channel since amibuild read it
    dry_run: bool = False
    read_timeout: float | None = None  # seconds one channel request may wait (None: the gateway's default)
    override_gate: str = ""  # --override-gate --reason: why a gated channel takes an image that does not meet it
    now: datetime | None = None  # a dry run's what-if time for gates (None: AWS's clock; a write refuses one)
    say: Callable[[str], None] = lambda _: None  # warnings (an event not sent) go here

    def gateway(self) -> Aws:
        aws = Aws(profile=self.profile, region=self.pipeline.build_region)
        if self.read_timeout is not None:
            aws.ssm_read_timeout = self.read_timeout  # bounds a request below the lease's margin
        return aws


@dataclass(frozen=True, kw_only=True)
class PublishSettings(ChannelSettings):
    amis: Mapping[str, str]  # region -> AMI
    channel: str = ops.DEFAULT_CHANNEL
    run_id: str | None = None
    allow_foreign: bool = False
    new_channel: bool = False  # --new-channel: the channel may be a name neither declared nor there yet


@dataclass(frozen=True, kw_only=True)
class PromoteSettings(ChannelSettings):
    source: str
    target: str
    new_channel: bool = False  # --new-channel: the target may be a new name


@dataclass(frozen=True, kw_only=True)
class RollbackSettings(ChannelSettings):
    channel: str = ops.DEFAULT_CHANNEL
    to_version: int | None = None


def publish(s: PublishSettings) -> PublishResult | PublishPlan:
    aws = s.gateway()
    known.require(aws, s.pipeline, [s.variant], known.Asked(s.channel, new_channel=s.new_channel, can_create=True))
    with _refusal_event(aws, s, "publish", s.channel, run_id=s.run_id):
        result = ops.publish_variant(aws, pipeline=s.pipeline, variant=s.variant, amis=s.amis, channel=s.channel,
                                     run_id=s.run_id, allow_foreign=s.allow_foreign, force=s.force, guard=s.guard,
                                     dry_run=s.dry_run, override_gate=s.override_gate, now=s.now)
    return _written(aws, s, "published", result, run_id=s.run_id)


def promote(s: PromoteSettings) -> PublishResult | PublishPlan:
    aws = s.gateway()
    known.require(aws, s.pipeline, [s.variant], known.Asked(s.source, "--from"),
                  known.Asked(s.target, "--to", new_channel=s.new_channel, can_create=True))
    with _refusal_event(aws, s, f"promote {s.source} -> {s.target}", s.target, source=s.source):
        result = ops.promote(aws, pipeline=s.pipeline, variant=s.variant, source=s.source, target=s.target,
                             force=s.force, guard=s.guard, dry_run=s.dry_run, override_gate=s.override_gate, now=s.now)
    return _written(aws, s, "promoted", result, source=s.source)


def rollback(s: RollbackSettings) -> PublishResult | PublishPlan:
    aws = s.gateway()
    known.require(aws, s.pipeline, [s.variant], known.Asked(s.channel))
    result = ops.rollback(aws, pipeline=s.pipeline, variant=s.variant, channel=s.channel,
                          to_version=s.to_version, force=s.force, guard=s.guard, dry_run=s.dry_run)
    return _written(aws, s, "rolled-back", result)


# ------------------------------------------------------------------------------- events (amibuild.notify)


def _written(aws: Aws, s: ChannelSettings, kind: str, result: PublishResult | PublishPlan, **about: str | None
             ) -> PublishResult | PublishPlan:
    """Send the write's event (a dry run's plan sends nothing) and hand the result on unchanged."""
    if isinstance(result, PublishResult) and s.pipeline.events:
        notify.send(aws, s.pipeline.events, [notify.schema.channel_written(kind, result, pipeline=s.pipeline.name,
                                                                          **about)],
                    region=s.pipeline.build_region, say=s.say)
    return result


@contextmanager
def _refusal_event(aws: Aws, s: ChannelSettings, operation: str, channel: str, **about: str | None) -> Iterator[None]:
    """A gate's refusal (whichever gate refused: the channels layer raises `GateRefused` at one point)
    sends its event, then goes on as the job's error; a dry run sends nothing."""
    try:
        yield
    except GateRefused as exc:
        if s.pipeline.events and not s.dry_run:
            event = notify.schema.gate_refused(pipeline=s.pipeline.name, variant=s.variant.name, channel=channel,
                                               operation=operation, reason=str(exc), gate=exc.gate,
                                               missing=exc.missing, amis=exc.amis, **about)
            notify.send(aws, s.pipeline.events, [event], region=s.pipeline.build_region, say=s.say)
        raise
