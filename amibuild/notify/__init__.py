"""amibuild's events: the pipeline's ``events { bus | sns_topic }`` block (`destination`), one event per
channel write, gate refusal, test result and prune deregistration as a pure function of the job's
result (`schema`), and the thin sender whose failures are warnings, never the job's (`send`).
The schema is documented in docs/events.md."""

from amibuild.notify.schema import DETAIL_TYPES, Event
from amibuild.notify.send import send

__all__ = ["DETAIL_TYPES", "Event", "send"]
