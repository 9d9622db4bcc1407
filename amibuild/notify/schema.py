"""amibuild's events as data: one `Event` per channel write, gate refusal, test result and
deregistered image, each a pure function of the job's result (docs/events.md is the schema).

Every event's detail carries ``schema``, ``event``, ``pipeline``, ``variant``, ``channel``,
``regions``, ``amis`` (region → AMI), ``versions`` (region → before/after) and ``run_id``, and what
its type needs beside; nothing secret goes in (URLs are masked, as everywhere amibuild prints)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Protocol, Sequence

from amibuild import __version__, secrets

SOURCE = "amibuild"
SCHEMA_VERSION = 1
DETAIL_TYPES: Mapping[str, str] = {
    "published": "amibuild Channel Published",
    "promoted": "amibuild Channel Promoted",
    "rolled-back": "amibuild Channel Rolled Back",
    "gate-refused": "amibuild Gate Refused",
    "test-result": "amibuild Image Test Result",
    "deregistered": "amibuild Image Deregistered",
}


@dataclass(frozen=True)
class Event:
    """One event: its kind (a key of DETAIL_TYPES) and its detail (JSON-ready, masked)."""

    kind: str
    detail: Mapping[str, Any]

    @property
    def detail_type(self) -> str:
        return DETAIL_TYPES[self.kind]

    @property
    def resources(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.detail.get("amis", {}).values())))

    def detail_json(self) -> str:
        return json.dumps(self.detail, sort_keys=True)

    def envelope(self) -> dict[str, Any]:
        """What an SNS message carries: EventBridge's fields, so one reader parses both."""
        return {"source": SOURCE, "detail-type": self.detail_type, "resources": list(self.resources),
                "detail": dict(self.detail)}

    def subject(self) -> str:
        d = self.detail
        return f"{self.detail_type}: {d.get('pipeline')} {d.get('variant')} {d.get('channel') or ''}".strip()


class _RegionWrite(Protocol):
    region: str
    ami: str
    previous_ami: str | None
    previous_version: int
    version: int


class _ChannelWrite(Protocol):
    operation: str
    parameter: str
    variant: str
    channel: str
    regions: Sequence[_RegionWrite]

    @property
    def changed(self) -> bool: ...


def _detail(kind: str, *, pipeline: str, variant: str, channel: str, amis: Mapping[str, str],
            versions: Mapping[str, Any] | None = None, run_id: str | None = None, source: str | None = None,
            **extra: Any) -> dict[str, Any]:
    detail = {"schema": SCHEMA_VERSION, "event": kind, "amibuild_version": __version__, "pipeline": pipeline,
              "variant": variant, "channel": channel, "regions": sorted(amis), "amis": dict(sorted(amis.items())),
              "versions": dict(versions or {}), "run_id": run_id, **extra}
    if source is not None:
        detail["from"] = source
    return secrets.mask(detail)  # a URL's user:password@ as user:***@, however deep


def channel_written(kind: str, result: _ChannelWrite, *, pipeline: str, run_id: str | None = None,
                    source: str | None = None) -> Event:
    """``published`` / ``promoted`` / ``rolled-back``: what the channel held before and holds now, per region."""
    versions = {r.region: {"before": {"ami": r.previous_ami, "version": r.previous_version or None},
                           "after": {"ami": r.ami, "version": r.version}} for r in result.regions}
    return Event(kind, _detail(kind, pipeline=pipeline, variant=result.variant, channel=result.channel,
                               amis={r.region: r.ami for r in result.regions}, versions=versions, run_id=run_id,
                               operation=result.operation, parameter=result.parameter, changed=result.changed,
                               source=source))


def gate_refused(*, pipeline: str, variant: str, channel: str, operation: str, reason: str, gate: str = "",
                 missing: Iterable[str] = (), amis: Mapping[str, str] | None = None, run_id: str | None = None,
                 source: str | None = None) -> Event:
    """``gate-refused``: the image did not meet the channel's gate; nothing was written."""
    return Event("gate-refused", _detail("gate-refused", pipeline=pipeline, variant=variant, channel=channel,
                                         amis=amis or {}, run_id=run_id, operation=operation, gate=gate,
                                         missing=list(missing), reason=reason, source=source))


def test_result(result: Mapping[str, Any], *, pipeline: str) -> Event:
    """``test-result``: a boot test's (`BootTestResult.to_dict`) verdict and checks for one image."""
    amis = {result["region"]: result["image_id"]} if result.get("image_id") else {}
    checks = [{"name": c.get("name"), "result": c.get("result")} for c in result.get("checks", [])]
    return Event("test-result", _detail("test-result", pipeline=pipeline, variant=result.get("variant", ""),
                                        channel="", amis=amis, run_id=result.get("run_id") or None, test="boot",
                                        result=result.get("result"), tag=result.get("tag"),
                                        error=result.get("error"), checks=checks))


def deregistered(outcome: Mapping[str, Any], *, pipeline: str, name: str = "") -> Event:
    """``deregistered``: one image prune deregistered (a `PruneOutcome` as data) and the snapshots it deleted."""
    return Event("deregistered", _detail("deregistered", pipeline=pipeline, variant=outcome.get("variant", ""),
                                         channel="", amis={outcome["region"]: outcome["image_id"]},
                                         name=name, snapshots_deleted=list(outcome.get("snapshots_deleted", ()))))
