"""The thin sender: each event to the pipeline's bus (PutEvents) or topic (SNS Publish). A failed
send is a warning for the caller to print, never the job's failure; a dry run calls nothing here."""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable

from amibuild.errors import AmibuildError
from amibuild.notify.schema import SOURCE, Event
from amibuild.notify.destination import EventTarget


def send(aws: Any, target: EventTarget, events: Iterable[Event], *, region: str,
         say: Callable[[str], None] = lambda _: None) -> None:
    """Send each event to ``target`` (every caller sends only when the pipeline has one); a failed
    one's warning goes to ``say``. ``aws``: the gateway (`amibuild.aws.Aws`); ``region``: the
    pipeline's build region, used for a bus name."""
    where = target.region(region)
    for event in events:
        try:
            if target.bus:
                aws.put_event(target.bus, SOURCE, event.detail_type, event.detail_json(), where,
                              resources=event.resources)
            else:
                aws.publish_message(target.sns_topic, event.subject(), json.dumps(event.envelope(), sort_keys=True),
                                    where, attributes={"detail_type": event.detail_type,
                                                       "pipeline": str(event.detail.get("pipeline") or "-"),
                                                       "variant": str(event.detail.get("variant") or "-")})
        except AmibuildError as exc:  # the job is done: its event not arriving must not undo it
            say(f"warning: {event.detail_type} event not sent to {target.describe()}: {exc}")
