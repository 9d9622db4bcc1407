"""EventBridge and SNS calls of the gateway: PutEvents on a bus and Publish to a topic (amibuild's events)."""

from __future__ import annotations

import time

from amibuild.aws.error_map import mapped_errors
from amibuild.errors import AwsError

_ENTRY_ATTEMPTS = 3
_RETRYABLE = ("ThrottlingException", "InternalFailure")  # PutEvents' entry error codes worth sending again


class EventCalls:
    """EventBridge / SNS calls; mixed into `amibuild.aws.Aws` (needs `Session`'s clients)."""

    def put_event(self, bus: str, source: str, detail_type: str, detail: str, region: str,
                  resources: tuple[str, ...] = ()) -> str:
        """EventBridge PutEvents of one entry on ``bus`` (name or ARN); the event id. PutEvents answers
        200 with FailedEntryCount for an entry it did not take: one failed for throttling or an
        internal failure is sent again (AWS's advice; botocore retries only whole calls), a
        refused one is an `AwsError` naming its error code."""
        for attempt in range(_ENTRY_ATTEMPTS):
            with mapped_errors(f"events:PutEvents {bus}", region):
                answer = self.client("events", region).put_events(Entries=[{
                    "Source": source, "DetailType": detail_type, "Detail": detail, "EventBusName": bus,
                    "Resources": list(resources)}])
            entry = (answer.get("Entries") or [{}])[0]
            if not (answer.get("FailedEntryCount") or entry.get("ErrorCode")):
                return str(entry.get("EventId", ""))
            if entry.get("ErrorCode") not in _RETRYABLE or attempt == _ENTRY_ATTEMPTS - 1:
                break
            time.sleep(0.2 * 2 ** attempt)
        raise AwsError(f"events:PutEvents {bus} in {region}: entry refused "
                       f"({entry.get('ErrorCode', '?')}: {entry.get('ErrorMessage', '')})")

    def publish_message(self, topic_arn: str, subject: str, message: str, region: str,
                        attributes: dict[str, str] | None = None) -> str:
        """SNS Publish of ``message`` to ``topic_arn`` (in ``region``, the ARN's); the message id.
        NotFound when the topic does not exist."""
        with mapped_errors(f"sns:Publish {topic_arn}", region):
            answer = self.client("sns", region).publish(
                TopicArn=topic_arn, Subject=subject[:100], Message=message,
                MessageAttributes={k: {"DataType": "String", "StringValue": v} for k, v in (attributes or {}).items()})
        return str(answer.get("MessageId", ""))
