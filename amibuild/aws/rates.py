"""AWS's request-rate defaults, and the client-side token buckets that keep amibuild within them.

Every attempt of every client call takes a token from the matching bucket first (`Limiter.acquire`,
installed on each client by `install`); a throttled answer is retried with capped, jittered back-off
within the operation's deadline (`deadline.current()`). The defaults table and its sources:
docs/dev/decisions.md.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from amibuild.aws import deadline
from botocore.retries.standard import ThrottledRetryableChecker

# The limiter refills at this share of the documented rate, and holds one token less than AWS's
# burst: requests reach AWS with jitter (a burst held up, the next call on time), and at exactly
# the rate the account's bucket would sit near empty, so any early arrival is throttled.
HEADROOM = 0.9
THROTTLE_PATIENCE = 60.0  # seconds one call keeps retrying throttled answers when no deadline is set
BACKOFF_BASE, BACKOFF_CAP = 0.25, 20.0  # seconds: full-jitter exponential back-off between throttled attempts


@dataclass(frozen=True)
class Rate:
    """A token bucket: `burst` tokens at most, refilled at `per_second`."""

    burst: float
    per_second: float


EC2_NON_MUTATING = Rate(100, 20)
EC2_UNFILTERED = Rate(50, 10)
EC2_MUTATING = Rate(50, 5)
SSM_GET = Rate(40, 40)
SSM_PUT = Rate(3, 3)
SSM_OTHER = Rate(10, 10)
KMS_CRYPTO = Rate(5500, 5500)
OTHER = Rate(20, 10)

SSM_GET_FAMILY = frozenset({"GetParameter", "GetParameters", "GetParametersByPath"})
KMS_CRYPTO_OPS = frozenset({"GenerateMac", "VerifyMac", "Encrypt", "Decrypt", "ReEncrypt", "GenerateDataKey",
                            "GenerateDataKeyWithoutPlaintext", "GenerateDataKeyPair", "GenerateRandom"})
KMS_ASYMMETRIC = Rate(300, 300)
KMS_ASYMMETRIC_OPS = frozenset({"Sign", "Verify"})
UNLIMITED = frozenset({"s3"})
_NON_MUTATING = ("Describe", "Get", "List", "Search")
# request parameters that make an EC2 read "filtered or paginated" (query-protocol names and their API names)
_NARROWING = ("Filter", "MaxResults", "Id", "Owner", "Name")


def bucket(service: str, operation: str, *, narrowed: bool = True) -> tuple[str, Rate] | None:
    """The bucket a call draws from and its rate; None for no client-side limit (S3).

    `narrowed`: an EC2 read names a filter, IDs or a page size (else EC2's smaller "unfiltered" bucket)."""
    if service in UNLIMITED:
        return None
    if service == "ec2":
        if operation.startswith(_NON_MUTATING):
            return operation, EC2_NON_MUTATING if narrowed else EC2_UNFILTERED
        return operation, EC2_MUTATING
    if service == "ssm":
        if operation in SSM_GET_FAMILY:
            return "ssm-get", SSM_GET
        return operation, SSM_PUT if operation == "PutParameter" else SSM_OTHER
    if service == "kms" and operation in KMS_CRYPTO_OPS:
        return "kms-crypto", KMS_CRYPTO
    if service == "kms" and operation in KMS_ASYMMETRIC_OPS:
        return "kms-asymmetric", KMS_ASYMMETRIC
    return operation, OTHER


def narrowed(params: Mapping[str, Any]) -> bool:
    """Whether request parameters (API or query-wire names) carry a filter, IDs or a page size."""
    return any(any(part in key for part in _NARROWING) for key, value in params.items() if value not in (None, [], ""))


def own_share(rate: Rate) -> Rate:
    """The bucket the limiter keeps for an AWS rate: `HEADROOM` of its refill, a token less of its burst."""
    return Rate(max(1.0, rate.burst * HEADROOM - 1), rate.per_second * HEADROOM)


class TokenBucket:
    """A thread-safe token bucket that hands out tokens in order: a caller reserves the next token
    under the lock (the count may go below zero) and sleeps, outside it, until that token exists."""

    def __init__(self, rate: Rate, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.rate = rate
        self._tokens = float(rate.burst)
        self._clock, self._sleep = clock, sleep
        self._at = clock()
        self._lock = threading.Lock()

    def reserve(self) -> float:
        """Take the next token; seconds until it is there (0: now)."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.rate.burst, self._tokens + (now - self._at) * self.rate.per_second)
            self._at = now
            self._tokens -= 1
            return 0.0 if self._tokens >= 0 else -self._tokens / self.rate.per_second

    def acquire(self) -> float:
        """Wait for a token; the seconds waited."""
        wait = self.reserve()
        if wait > 0:
            self._sleep(wait)
        return wait


class Limiter:
    """The process's buckets, one per (service, account, region, bucket name), made on first use."""

    def __init__(self, rates: Callable[..., tuple[str, Rate] | None] = bucket) -> None:
        self._rates = rates
        self._buckets: dict[tuple[str, str, str, str], TokenBucket] = {}
        self._lock = threading.Lock()

    def bucket_for(self, service: str, account: str, region: str, operation: str, *,
                   narrowed: bool = True) -> TokenBucket | None:
        chosen = self._rates(service, operation, narrowed=narrowed)
        if chosen is None:
            return None
        name, rate = chosen
        key = (service, account, region, name)
        with self._lock:
            if key not in self._buckets:
                self._buckets[key] = TokenBucket(own_share(rate))
            return self._buckets[key]

    def acquire(self, service: str, account: str, region: str, operation: str, *, narrowed: bool = True) -> float:
        """Wait for a token for one attempt of `operation`; the seconds waited."""
        found = self.bucket_for(service, account, region, operation, narrowed=narrowed)
        bounded = deadline.current()
        if found is None:
            return 0.0
        if bounded is None:
            return found.acquire()
        with bounded.queued():  # a channel operation's clock stands still while it queues for tokens
            return found.acquire()

    def reset(self) -> None:
        """Forget every bucket (tests that need a full budget)."""
        with self._lock:
            self._buckets.clear()


LIMITER = Limiter()


def throttle_delay(attempts: int, started: float, *, now: float | None = None,
                   patience: float = THROTTLE_PATIENCE, rng: Callable[[], float] = random.random) -> float | None:
    """Seconds to wait before retrying a throttled attempt (the `attempts`-th), or None when the
    retry would end past the operation's deadline (`deadline.current()`), else past `patience`
    seconds after the call's first attempt (`started`)."""
    now = time.monotonic() if now is None else now
    delay = rng() * min(BACKOFF_CAP, BACKOFF_BASE * 2 ** min(attempts, 16))
    bounded = deadline.current()
    left = bounded.remaining() if bounded is not None else patience - (now - started)
    return delay if delay < left else None


def install(client: Any, *, account: str, on_throttle: Callable[[str, str, str], None],
            patience: Callable[[], float]) -> None:
    """Hook a botocore client: every attempt waits for a token (``request-created``, before signing,
    so a long wait never ages the signature), and a throttled answer is retried while the deadline
    allows (``needs-retry``, ahead of botocore's own handler, which would give up after
    `max_attempts`)."""
    service = client.meta.service_model.service_name
    region = client.meta.region_name or ""
    # and SSM's TooManyUpdates (another update of the same parameter under way: nothing written, as when
    # throttled), which botocore does not retry: a lease two writers create at once, a tag right after a put
    codes = frozenset({*ThrottledRetryableChecker._THROTTLED_ERROR_CODES, "TooManyUpdates"})

    def mark(params: Mapping[str, Any], context: dict, **_: Any) -> None:
        context["amibuild:narrowed"] = narrowed(params)
        context["amibuild:started"] = time.monotonic()

    def take(request: Any, operation_name: str, **_: Any) -> None:
        context = getattr(request, "context", None) or {}
        LIMITER.acquire(service, account, region, operation_name,
                        narrowed=context.get("amibuild:narrowed", True))

    def retry_throttled(response: Any = None, attempts: int = 0, operation: Any = None,
                        request_dict: Mapping[str, Any] | None = None, **_: Any) -> float | None:
        if response is None:
            return None
        if (response[1] or {}).get("Error", {}).get("Code") not in codes:
            return None
        started = (request_dict or {}).get("context", {}).get("amibuild:started", time.monotonic())
        delay = throttle_delay(attempts, started, patience=patience())
        if delay is None:
            return None  # botocore's handler decides (it gives up once max_attempts are spent)
        on_throttle(service, operation.name if operation is not None else "", region)
        return delay

    client.meta.events.register("before-parameter-build", mark)
    client.meta.events.register_first("request-created", take)
    if (client.meta.config.retries or {}).get("total_max_attempts") != 1:  # a probe asks once, throttled or not
        client.meta.events.register_first("needs-retry", retry_throttled)
