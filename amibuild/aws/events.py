"""EventBridge and SNS calls of the gateway: PutEvents on a bus and Publish to a topic (amibuild's events)."""

from __future__ import annotations

from amibuild.aws.error_map import mapped_errors
from amibuild.errors import AwsError


class EventCalls:
    """EventBridge / SNS calls; mixed into `amibuild.aws.Aws` (needs `Session`'s clients)."""

    def put_event(self, bus: str, source: str, detail_type: str, detail: str, region: str,
                  resources: tuple[str, ...] = ()) -> str:
        """EventBridge PutEvents of one entry on ``bus`` (name or ARN); the event id. A refused entry
        (PutEvents answers 200 with FailedEntryCount) is an `AwsError` naming its error code."""
        with mapped_errors(f"events:PutEvents {bus}", region):
            answer = self.client("events", region).put_events(Entries=[{
                "Source": source, "DetailType": detail_type, "Detail": detail, "EventBusName": bus,
                "Resources": list(resources)}])
        entry = (answer.get("Entries") or [{}])[0]
        if answer.get("FailedEntryCount") or entry.get("ErrorCode"):
            raise AwsError(f"events:PutEvents {bus} in {region}: entry refused "
                           f"({entry.get('ErrorCode', '?')}: {entry.get('ErrorMessage', '')})")
        return str(entry.get("EventId", ""))

    def publish_message(self, topic_arn: str, subject: str, message: str, region: str,
                        attributes: dict[str, str] | None = None) -> str:
        """SNS Publish of ``message`` to ``topic_arn`` (in ``region``, the ARN's); the message id.
        NotFound when the topic does not exist."""
        with mapped_errors(f"sns:Publish {topic_arn}", region):
            answer = self.client("sns", region).publish(
                TopicArn=topic_arn, Subject=subject[:100], Message=message,
                MessageAttributes={k: {"DataType": "String", "StringValue": v} for k, v in (attributes or {}).items()})
        return str(answer.get("MessageId", ""))
