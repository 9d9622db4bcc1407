"""The channel jobs: publish, promote, rollback, each one call taking one frozen settings value
(made by the CLI from the flags, the config and the pipeline file). ``dry_run``: the plan the
write would carry out, read without taking the channel's lease; nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Mapping

from amibuild.aws import Aws
from amibuild.channels import known
from amibuild.channels import publish as ops
from amibuild.lease import Guard
from amibuild.channels.plan import PublishPlan, PublishResult
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
    return ops.publish_variant(aws, pipeline=s.pipeline, variant=s.variant, amis=s.amis, channel=s.channel,
                               run_id=s.run_id, allow_foreign=s.allow_foreign, force=s.force, guard=s.guard,
                               dry_run=s.dry_run, override_gate=s.override_gate, now=s.now)


def promote(s: PromoteSettings) -> PublishResult | PublishPlan:
    aws = s.gateway()
    known.require(aws, s.pipeline, [s.variant], known.Asked(s.source, "--from"),
                  known.Asked(s.target, "--to", new_channel=s.new_channel, can_create=True))
    return ops.promote(aws, pipeline=s.pipeline, variant=s.variant, source=s.source, target=s.target,
                       force=s.force, guard=s.guard, dry_run=s.dry_run, override_gate=s.override_gate, now=s.now)


def rollback(s: RollbackSettings) -> PublishResult | PublishPlan:
    aws = s.gateway()
    known.require(aws, s.pipeline, [s.variant], known.Asked(s.channel))
    return ops.rollback(aws, pipeline=s.pipeline, variant=s.variant, channel=s.channel,
                        to_version=s.to_version, force=s.force, guard=s.guard, dry_run=s.dry_run)
