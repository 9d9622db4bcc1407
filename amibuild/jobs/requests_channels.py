"""The requests (flags) of the channel tasks: publish, promote, rollback, history, channels. Their
bodies: `amibuild.jobs.channel_commands`."""

from dataclasses import dataclass
from functools import partial

from amibuild import values
from amibuild.request import flag, like
from amibuild.request import MARKDOWN_HELP
from amibuild.jobs.requests_build import ChannelRequest

NEW_CHANNEL = ("The channel is a new name: neither declared (a `channel` block, default_channel, recommended, "
               "candidate, stable) nor there yet for the variant; without it such a name is refused as a typo")


@dataclass(frozen=True)
class Gate:
    """The flags of a write that may override a channel's gate."""

    override_gate: bool = flag("Write even though the image does not meet the channel's gate (with --reason)", False)
    reason: str | None = flag("Why the gate is overridden; kept in the channel's history")
    now: str | None = flag("With --dry-run only: the what-if time the gate's soak is judged at, ISO 8601 (default: "
                           "$AMIBUILD_NOW, else the time AWS answers with); a write with it exits 2")


@dataclass(frozen=True)
class Write:
    """The flags every channel write shares."""

    force: bool = flag("Write even if another writer moved the channel since amibuild read it", False)
    dry_run: bool = flag("Print what would be written, region by region (the plan the write carries out), and "
                         "write nothing", False)
    markdown: bool = flag(MARKDOWN_HELP, False)


@dataclass(frozen=True)
class PublishRequest(ChannelRequest, Write, Gate):
    """`amibuild publish`."""

    ami: tuple[str, ...] = flag("REGION=AMI_ID, comma-separated or repeated; every target region of the pipeline "
                                "needs one", repeat=True)
    channel: str = flag("Channel to publish to (default: recommended)", "recommended")
    run_id: str | None = flag("Run id to record (default: the images' amibuild:run-id tag)")
    allow_foreign: bool = flag("Publish images amibuild did not build (no amibuild:fingerprint tag)", False)
    new_channel: bool = flag(NEW_CHANNEL, False)


@dataclass(frozen=True)
class PromoteRequest(ChannelRequest, Write, Gate):
    """`amibuild promote`."""

    from_: str | None = flag("Channel to copy from, e.g. recommended", name="from")
    to: str | None = flag("Channel to copy into, e.g. stable")
    force: bool = flag("Write even if another writer moved the target channel since amibuild read it", False)
    due: bool = flag("Promote every gated channel (pipeline `channel` blocks with `from`) whose gate is met now, "
                     "for every variant; print what was promoted and what waits until when", False)
    new_channel: bool = flag(NEW_CHANNEL.replace("The channel", "--to"), False)


@dataclass(frozen=True)
class RollbackRequest(ChannelRequest, Write):
    """`amibuild rollback`."""

    channel: str = flag("Channel to roll back (default: recommended)", "recommended")
    to_version: int | None = flag("Parameter version to go back to, as `amibuild history` shows it for the build "
                                  "region (default: the newest version holding another AMI than now)",
                                  cast=partial(values.optional_count, example=3))


@dataclass(frozen=True)
class HistoryRequest(ChannelRequest):
    """`amibuild history`."""

    channel: str | None = flag("Only this channel (default: every channel of the variant)")
    region: str | None = flag("Only this region (default: every target region of the pipeline)")


@dataclass(frozen=True)
class ChannelsRequest:
    """`amibuild channels`."""

    pipeline: str | None = like(ChannelRequest, "pipeline")
    profile: str | None = like(ChannelRequest, "profile")
    json: bool = like(ChannelRequest, "json")
    markdown: bool = flag("Print the table as Markdown on stdout", False)
    check: bool = flag("Exit 1 naming every channel whose regions hold images of different builds (or none)", False)
    repair: bool = flag("Bring every split channel to one build under its lease, saying which and why", False)
