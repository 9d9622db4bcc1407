"""Which regions clients changed since the last reset, so that a reset redoes only those.

A full reset drops every moto backend and seeds all of `SEED_REGIONS` again (~0.5–1 s); most
tests change one or two regions, and many change none. The emulator's middleware notes each
request here; `reset` then resets and reseeds just the regions written to.

What counts as a change is decided from the request alone (`scope`), conservatively.

Why it is built this way: docs/dev/decisions.md.
"""

from __future__ import annotations

import io
import re
import threading
from typing import Any
from urllib.parse import parse_qs

# Services moto keeps one backend per partition for (key "aws"), not per region: a write to one
# of them is reset with everything.
PARTITION_SERVICES = frozenset({"iam", "s3", "sts", "route53", "cloudfront", "organizations", "sso", "ce"})
READ_PREFIXES = ("Describe", "List", "Get")
READ_ACTIONS = frozenset({"Sign", "Verify", "GenerateMac", "VerifyMac"})  # KMS: they use a key and change nothing
EVERYTHING = "*"

_CREDENTIAL = re.compile(r"Credential=[^/,\s]+/[0-9]{8}/([a-z0-9-]+)/([a-z0-9-]+)/aws4_request")
_FORM = "application/x-www-form-urlencoded"


def scope(environ: dict[str, Any]) -> str | None:
    """The region a request changes, `EVERYTHING`, or None when it only reads.

    Reads a form-encoded body to find its ``Action`` and puts it back for the application."""
    method = environ.get("REQUEST_METHOD", "GET").upper()
    action = _action(environ)
    if action is None and method in ("GET", "HEAD"):
        return None
    if action is not None and (action.startswith(READ_PREFIXES) or action in READ_ACTIONS):
        return None
    signed = _CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", "")) or \
        _CREDENTIAL.search("Credential=" + _query(environ).get("X-Amz-Credential", [""])[0])
    if signed is None:
        return EVERYTHING
    region, service = signed.groups()
    return EVERYTHING if service in PARTITION_SERVICES else region


def _action(environ: dict[str, Any]) -> str | None:
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:  # JSON protocol: "AmazonSSM.PutParameter"
        return target.rsplit(".", 1)[-1]
    action = _query(environ).get("Action")
    if action:
        return action[0]
    if environ.get("CONTENT_TYPE", "").split(";")[0].strip() == _FORM:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        action = parse_qs(body.decode("utf-8", "replace")).get("Action")
        if action:
            return action[0]
    return None


def _query(environ: dict[str, Any]) -> dict[str, list[str]]:
    return parse_qs(environ.get("QUERY_STRING", ""))


class Touched:
    """The regions written to since the last `take` (thread-safe: the server is threaded)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._regions: set[str] = set()

    def note(self, environ: dict[str, Any]) -> None:
        region = scope(environ)
        if region is not None:
            self.add(region)

    def add(self, region: str) -> None:
        with self._lock:
            self._regions.add(region)

    def take(self) -> set[str]:
        """What was written to (`EVERYTHING` among them means all), and start afresh."""
        with self._lock:
            regions, self._regions = self._regions, set()
        return regions


def reset_regions(regions: set[str]) -> None:
    """Emulator side: drop every moto backend of these regions (all services, all accounts);
    moto creates them afresh when next asked, as after its own full reset."""
    from moto.core.base_backend import BackendDict

    for service in list(BackendDict._instances):
        for account in list(service.values()):
            for region in regions & set(dict.keys(account)):
                dict.__getitem__(account, region).reset()
                dict.__delitem__(account, region)
