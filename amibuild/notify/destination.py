"""The pipeline's ``events { bus = "default" }`` / ``events { sns_topic = "arn:aws:sns:…" }`` block:
where amibuild sends its events (EventBridge PutEvents or SNS Publish). Checked at load, exit 2."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from amibuild.errors import SpecError
from amibuild.suggest import check_fields, one_block, suggest

KEYS = ("bus", "sns_topic")

_REGION = r"[a-z]{2}(-[a-z]+)+-[0-9]"
# EventBridge: a bus name ([/.\-_A-Za-z0-9]{1,256}) or its ARN; SNS: a standard topic's ARN
_BUS_NAME = re.compile(r"[/.\-_A-Za-z0-9]{1,256}", re.ASCII)
_BUS_ARN = re.compile(rf"arn:aws[a-z-]*:events:(?P<region>{_REGION}):[0-9]{{12}}:event-bus/[/.\-_A-Za-z0-9]{{1,256}}",
                      re.ASCII)
_TOPIC_ARN = re.compile(rf"arn:aws[a-z-]*:sns:(?P<region>{_REGION}):[0-9]{{12}}:[A-Za-z0-9_-]{{1,256}}(\.fifo)?",
                        re.ASCII)


@dataclass(frozen=True)
class EventTarget:
    """Where events go: an EventBridge bus (name or ARN) or an SNS topic ARN; neither: no events."""

    bus: str = ""
    sns_topic: str = ""

    def __bool__(self) -> bool:
        return bool(self.bus or self.sns_topic)

    def region(self, default: str) -> str:
        """The region to call: the ARN's, else ``default`` (the pipeline's build region) for a bus name."""
        match = _BUS_ARN.fullmatch(self.bus) or _TOPIC_ARN.fullmatch(self.sns_topic)
        return match.group("region") if match else default

    def describe(self) -> str:
        return f"EventBridge bus {self.bus}" if self.bus else f"SNS topic {self.sns_topic}"


def event_target(value: Any, where: str, known_regions: frozenset[str]) -> EventTarget:
    """The block's one field, checked; SpecError naming the field and what to write."""
    body = one_block(value, where, 'events { bus = "default" } or events { sns_topic = "arn:aws:sns:REGION:ACCOUNT:TOPIC" }')
    check_fields(body, KEYS, where, "the block has bus or sns_topic")
    for key in KEYS:
        if key in body and (not isinstance(body[key], str) or not body[key]):
            raise SpecError(f"{where}.{key}: a non-empty string in quotes")
    if len(body) != 1:
        raise SpecError(f"{where}: give bus or sns_topic, not {'both' if body else 'neither'}: events go to one place")
    bus, topic = body.get("bus", ""), body.get("sns_topic", "")
    if bus.startswith("arn:"):
        match = _BUS_ARN.fullmatch(bus)
        if not match:
            raise SpecError(f"{where}.bus {bus!r}: an event bus ARN is arn:aws:events:REGION:ACCOUNT:event-bus/NAME; "
                            'or give the bus name ("default")')
        _known(match.group("region"), f"{where}.bus", known_regions)
    elif bus and not _BUS_NAME.fullmatch(bus):
        raise SpecError(f"{where}.bus {bus!r}: an event bus name (1-256 letters, digits, '.', '-', '_', '/'), "
                        'e.g. "default", or its ARN')
    if topic:
        match = _TOPIC_ARN.fullmatch(topic)
        if not match:
            raise SpecError(f"{where}.sns_topic {topic!r}: an SNS topic ARN, arn:aws:sns:REGION:ACCOUNT:TOPIC")
        if topic.endswith(".fifo"):
            raise SpecError(f"{where}.sns_topic {topic!r}: a FIFO topic needs a message group per message; "
                            "name a standard topic")
        _known(match.group("region"), f"{where}.sns_topic", known_regions)
    return EventTarget(bus=bus, sns_topic=topic)


def _known(region: str, where: str, known_regions: frozenset[str]) -> None:
    if region not in known_regions:
        raise SpecError(f"{where}: unknown region {region!r} in the ARN{suggest(region, sorted(known_regions))}")
