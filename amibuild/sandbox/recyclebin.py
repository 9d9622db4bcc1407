"""The emulator's Recycle Bin (``rbin``), which moto does not have, and what EC2 does with it.

Retention rules (REST JSON, as Recycle Bin's API): ``CreateRule`` (``POST /rules``), ``GetRule``
(``GET /rules/{id}``), ``ListRules`` (``POST /list-rules``, ``ResourceType`` required),
``UpdateRule`` (``PATCH /rules/{id}``) and ``DeleteRule`` (``DELETE /rules/{id}``); a rule is for
``EC2_IMAGE`` or ``EBS_SNAPSHOT`` in one region of one account, keeps what it covers for
``RetentionPeriod`` (1 to 365 DAYS), and covers every such resource of its region, or (with
``ResourceTags``) those carrying one of its tags, less any carrying one of its
``ExcludeResourceTags``. An unknown rule is ``ResourceNotFoundException`` (404), a bad request
``ValidationException`` (400).

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterable

SERVICE = "rbin"
RESOURCE_TYPES = ("EC2_IMAGE", "EBS_SNAPSHOT")
_SCOPE = re.compile(r"Credential=[^/,\s]+/[0-9]{8}/([a-z0-9-]+)/([a-z0-9-]+)/aws4_request")
_lock = threading.Lock()
def _real_time() -> datetime:
    return datetime.now(timezone.utc)


_clock: Callable[[], datetime] = _real_time


def now() -> datetime:
    """The emulator's time (its clock, once `use_clock` is given one)."""
    return _clock()


def use_clock(clock: Callable[[], datetime]) -> None:
    global _clock
    _clock = clock


@dataclass
class Rule:
    identifier: str
    account: str
    region: str
    resource_type: str
    days: int
    description: str = ""
    tags: list[dict[str, str]] = field(default_factory=list)  # [{ResourceTagKey, ResourceTagValue}]
    exclude: list[dict[str, str]] = field(default_factory=list)

    def covers(self, resource_tags: dict[str, str]) -> bool:
        def hit(wanted: list[dict[str, str]]) -> bool:
            return any(t["ResourceTagKey"] in resource_tags and resource_tags[t["ResourceTagKey"]] == t.get(
                "ResourceTagValue", resource_tags[t["ResourceTagKey"]]) for t in wanted)
        if self.exclude and hit(self.exclude):
            return False
        return not self.tags or hit(self.tags)

    def to_dict(self) -> dict[str, Any]:
        return {"Identifier": self.identifier, "Description": self.description, "ResourceType": self.resource_type,
                "RetentionPeriod": {"RetentionPeriodValue": self.days, "RetentionPeriodUnit": "DAYS"},
                "ResourceTags": self.tags, "ExcludeResourceTags": self.exclude, "Status": "available",
                "LockState": "unlocked",
                "RuleArn": f"arn:aws:rbin:{self.region}:{self.account}:rule/{self.identifier}"}


@dataclass
class Binned:
    """An image (its moto object) or a snapshot in the bin."""

    thing: Any
    entered: datetime
    exits: datetime
    tags: dict[str, str]


_rules: dict[str, Rule] = {}
_images: dict[tuple[str, str, str], Binned] = {}  # (account, region, ami id)
_snapshots: dict[tuple[str, str, str], Binned] = {}


def reset() -> None:
    with _lock:
        _rules.clear()
        _images.clear()
        _snapshots.clear()


def _covering(account: str, region: str, resource_type: str, tags: dict[str, str]) -> Rule | None:
    rules = [r for r in _rules.values() if (r.account, r.region, r.resource_type) == (account, region, resource_type)
             and r.covers(tags)]
    return max(rules, key=lambda r: r.days, default=None)  # the longest retention applies


def keep_image(backend: Any, ami: Any) -> None:
    tags = dict(backend.tags.get(ami.id, {}))
    with _lock:
        rule = _covering(backend.account_id, backend.region_name, "EC2_IMAGE", tags)
        if rule is not None:
            entered = now()
            _images[(backend.account_id, backend.region_name, ami.id)] = Binned(
                ami, entered, entered + timedelta(days=rule.days), tags)


def keep_snapshot(backend: Any, snapshot: Any) -> None:
    tags = dict(backend.tags.get(snapshot.id, {}))
    with _lock:
        rule = _covering(backend.account_id, backend.region_name, "EBS_SNAPSHOT", tags)
        if rule is not None:
            entered = now()
            _snapshots[(backend.account_id, backend.region_name, snapshot.id)] = Binned(
                snapshot, entered, entered + timedelta(days=rule.days), tags)


def _live(store: dict[tuple[str, str, str], Binned], account: str, region: str) -> dict[str, Binned]:
    moment = now()
    for key in [k for k, b in store.items() if b.exits <= moment]:
        del store[key]  # retention over: gone for good
    return {k[2]: b for k, b in store.items() if k[:2] == (account, region)}


def _iso(when: datetime) -> str:
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def install_ec2(amis_response: type) -> None:
    """EC2's Recycle Bin actions on moto's AMI responses (with `image_lifecycle`)."""
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import InvalidAMIIdError, InvalidSnapshotIdError

    def list_images(response: Any) -> ActionResult:
        backend = response.ec2_backend
        wanted = set(response._get_param("ImageIds", []) or [])
        with _lock:
            binned = _live(_images, backend.account_id, backend.region_name)
        listed = [{"ImageId": i, "Name": b.thing.name or "", "Description": b.thing.description or "",
                   "RecycleBinEnterTime": _iso(b.entered), "RecycleBinExitTime": _iso(b.exits)}
                  for i, b in sorted(binned.items()) if not wanted or i in wanted]
        return ActionResult({"Images": listed})

    def list_snapshots(response: Any) -> ActionResult:
        backend = response.ec2_backend
        wanted = set(response._get_param("SnapshotIds", []) or [])
        with _lock:
            binned = _live(_snapshots, backend.account_id, backend.region_name)
        listed = [{"SnapshotId": i, "Description": b.thing.description or "", "VolumeId": b.thing.volume.id,
                   "RecycleBinEnterTime": _iso(b.entered), "RecycleBinExitTime": _iso(b.exits)}
                  for i, b in sorted(binned.items()) if not wanted or i in wanted]
        return ActionResult({"Snapshots": listed})

    def restore_image(response: Any) -> ActionResult:
        backend = response.ec2_backend
        ami_id = response._get_param("ImageId")
        response.error_on_dryrun()
        with _lock:
            binned = _live(_images, backend.account_id, backend.region_name).get(ami_id)
            if binned is None:
                raise InvalidAMIIdError(ami_id)
            del _images[(backend.account_id, backend.region_name, ami_id)]
        backend.amis[ami_id] = binned.thing
        if ami_id in backend.deleted_amis:
            backend.deleted_amis.remove(ami_id)
        if binned.tags:
            backend.create_tags([ami_id], binned.tags)
        return ActionResult({"Return": "true"})

    def restore_snapshot(response: Any) -> ActionResult:
        backend = response.ec2_backend
        snapshot_id = response._get_param("SnapshotId")
        response.error_on_dryrun()
        with _lock:
            binned = _live(_snapshots, backend.account_id, backend.region_name).get(snapshot_id)
            if binned is None:
                raise InvalidSnapshotIdError()
            del _snapshots[(backend.account_id, backend.region_name, snapshot_id)]
        snapshot = binned.thing
        backend.snapshots[snapshot_id] = snapshot
        if binned.tags:
            backend.create_tags([snapshot_id], binned.tags)
        return ActionResult({"SnapshotId": snapshot_id, "Description": snapshot.description or "",
                             "Encrypted": bool(snapshot.encrypted), "OwnerId": snapshot.owner_id,
                             "State": "completed", "VolumeId": snapshot.volume.id,
                             "VolumeSize": int(snapshot.volume.size)})

    amis_response.list_images_in_recycle_bin = list_images
    amis_response.list_snapshots_in_recycle_bin = list_snapshots
    amis_response.restore_image_from_recycle_bin = restore_image
    amis_response.restore_snapshot_from_recycle_bin = restore_snapshot


# ------------------------------------------------------------------------------- the rbin API


class _Refused(Exception):
    def __init__(self, status: str, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


def is_rbin(environ: dict[str, Any]) -> bool:
    signed = _SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
    return bool(signed and signed.group(2) == SERVICE)


def serve(environ: dict[str, Any], account: str, answer: Callable[[str, dict[str, Any]], Iterable[bytes]]
          ) -> Iterable[bytes]:
    """One Recycle Bin request; ``answer(status, body)`` writes the JSON response."""
    signed = _SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
    region = signed.group(1) if signed else "us-east-1"
    method, path = environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "")
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        try:
            body = json.loads(environ["wsgi.input"].read(length) or b"{}") if length else {}
        except ValueError:
            raise _Refused("400 Bad Request", "ValidationException", "the request body is not JSON") from None
        with _lock:
            return answer("200 OK", _route(method, path, body, account, region))
    except _Refused as exc:
        return answer(exc.status, {"__type": exc.kind, "message": str(exc)})


def _route(method: str, path: str, body: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    if (method, path) == ("POST", "/rules"):
        rule = _rule_from(body, account, region, Rule(f"rule-{secrets.token_hex(6)}"[:16], account, region, "", 0))
        _rules[rule.identifier] = rule
        return rule.to_dict()
    if (method, path) == ("POST", "/list-rules"):
        kind = body.get("ResourceType")
        if kind not in RESOURCE_TYPES:
            raise _Refused("400 Bad Request", "ValidationException",
                           f"ResourceType must be one of {', '.join(RESOURCE_TYPES)}")
        listed = [r for r in _rules.values() if (r.account, r.region, r.resource_type) == (account, region, kind)]
        if body.get("ResourceTags"):
            listed = [r for r in listed if r.tags and all(t in r.tags for t in body["ResourceTags"])]
        return {"Rules": [{k: v for k, v in r.to_dict().items() if k in (
            "Identifier", "Description", "RetentionPeriod", "LockState", "RuleArn")} for r in listed]}
    match = re.fullmatch(r"/rules/([A-Za-z0-9-]+)", path)
    if match:
        rule = _rules.get(match.group(1))
        if rule is None or (rule.account, rule.region) != (account, region):
            raise _Refused("404 Not Found", "ResourceNotFoundException", f"rule {match.group(1)} not found")
        if method == "GET":
            return rule.to_dict()
        if method == "DELETE":
            del _rules[rule.identifier]
            return {}
        if method == "PATCH":
            _rule_from({**rule.to_dict(), **body}, account, region, rule)
            return rule.to_dict()
    raise _Refused("404 Not Found", "ResourceNotFoundException", f"no route {method} {path}")


def _rule_from(body: dict[str, Any], account: str, region: str, rule: Rule) -> Rule:
    kind = body.get("ResourceType")
    if kind not in RESOURCE_TYPES:
        raise _Refused("400 Bad Request", "ValidationException", f"ResourceType must be one of {', '.join(RESOURCE_TYPES)}")
    period = body.get("RetentionPeriod") or {}
    days = period.get("RetentionPeriodValue")
    if period.get("RetentionPeriodUnit") != "DAYS" or not isinstance(days, int) or not 1 <= days <= 365:
        raise _Refused("400 Bad Request", "ValidationException",
                       "RetentionPeriod must be {RetentionPeriodValue: 1-365, RetentionPeriodUnit: DAYS}")
    tags, exclude = list(body.get("ResourceTags") or []), list(body.get("ExcludeResourceTags") or [])
    if tags and exclude:
        raise _Refused("400 Bad Request", "ValidationException", "give ResourceTags or ExcludeResourceTags, not both")
    for tag in tags + exclude:
        if not isinstance(tag, dict) or not tag.get("ResourceTagKey"):
            raise _Refused("400 Bad Request", "ValidationException", "each resource tag needs a ResourceTagKey")
    rule.resource_type, rule.days = kind, days
    rule.description = str(body.get("Description", "") or "")
    rule.tags, rule.exclude = tags, exclude
    return rule
