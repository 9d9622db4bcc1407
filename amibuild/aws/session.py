"""The gateway's session: the boto3 session (standard credential chain, profile, region), one client per
service and region, botocore's retry mode and short connect timeouts, the call count, STS, and the
region fan-out. The per-service calls (ssm.py, s3.py, ec2.py, cfn.py, eks.py) build on `Session`.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar

import boto3
from botocore import exceptions as bx
from botocore.config import Config

from amibuild import redact
from amibuild.errors import UsageError
from amibuild.aws import deadline, models, rates, regions
from amibuild.aws.error_map import mapped_errors
from amibuild.poll import settled


CONNECT_TIMEOUT = 2
CONNECT_ATTEMPTS = 2
NO_CREDENTIALS = "none found"  # what `credentials_problem` says when the chain finds nothing


def give_up_on_dead_endpoint(attempts: int = 0, caught_exception: BaseException | None = None, **_: Any) -> None:
    """botocore `needs-retry` hook, run before the retry handler: stop retrying a connection error
    after CONNECT_ATTEMPTS by raising it (returning None would let the next handler retry)."""
    if isinstance(caught_exception, (bx.EndpointConnectionError, bx.ConnectTimeoutError,
                                     bx.ProxyConnectionError)) and attempts >= CONNECT_ATTEMPTS:
        raise caught_exception


class Session:
    """The boto3 session and its clients, one per service and region. Thread-safe: builds and publishes fan out over regions."""

    def __init__(self, *, profile: str | None = None, region: str | None = None, max_attempts: int = 3) -> None:
        models.wait_for_preload()  # the models a preload parses are shared, not parsed again here
        try:
            self._session = boto3.session.Session(profile_name=profile, region_name=region)
            models.share_loader(self._session)  # service models parsed once per process
        except bx.ProfileNotFound as exc:
            raise UsageError(f"AWS profile {profile or os.environ.get('AWS_PROFILE')!r} not found in "
                             "~/.aws/config; check --profile / AWS_PROFILE") from exc
        self._config = Config(
            connect_timeout=CONNECT_TIMEOUT,
            read_timeout=30,
            retries={"mode": "adaptive", "max_attempts": max_attempts},
        )
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self.calls: list[tuple[str, str, str]] = []  # (service, operation, region), for reports and tests
        self.throttled: list[tuple[str, str, str]] = []  # throttled answers retried, likewise
        self.throttle_patience = rates.THROTTLE_PATIENCE  # seconds a call retries throttling with no deadline set

    @property
    def region(self) -> str | None:
        return self._session.region_name

    def configured_region(self) -> str | None:
        """The region the profile's config file names, whatever AWS_REGION says (no AWS call)."""
        try:
            return self._session._session.get_scoped_config().get("region")
        except Exception:  # a broken profile: the credentials check says why
            return None

    def has_credentials(self) -> bool:
        """True when the credential chain finds something, without calling AWS."""
        return not self.credentials_problem()

    def credentials_problem(self) -> str:
        """"" when the credential chain finds something (no AWS call); else `NO_CREDENTIALS`, or what is
        wrong with a broken profile (a source_profile or sso-session that does not exist, a
        credential_process that cannot run)."""
        try:
            return "" if self._session.get_credentials() is not None else NO_CREDENTIALS
        except Exception as exc:
            return (str(exc) or type(exc).__name__).rstrip(".")

    def _new_client(self, service: str, region_name: str, config: Any) -> Any:
        """A botocore client; a region AWS does not have is bad input, refused before any call
        (with an endpoint override the typo would reach it and come back as an HTML 500)."""
        if region_name and (wrong := regions.problem(region_name)):
            raise UsageError(f"{service}: {wrong}; check --region or AWS_REGION")
        client = self._session.client(service, region_name=region_name, config=config)
        self._prepare(client)  # every client amibuild makes, whatever its config
        return client

    def client(self, service: str, region: str) -> Any:
        return deadline.wrap(self._own_client(service, region, lambda: self._config))  # bounded inside a channel operation (`aws.deadline`)

    def _own_client(self, name: str, region: str, config: Callable[[], Config]) -> Any:
        """The client cached as (``name``, region), made once with ``config()``; ``name`` is its service,
        or "service:purpose" for a client with a config of its own ("ssm:channels")."""
        key = (name, region)
        with self._lock:
            if key not in self._clients:
                self._clients[key] = self._new_client(name.partition(":")[0], region_name=region, config=config())
            return self._clients[key]

    def _prepare(self, client: Any) -> None:
        """Hooks on every client: the call count, the dead-endpoint cut-off, and the rate limiter
        (amibuild/aws/rates.py: a token per attempt from the bucket of this service, account and
        region, shared by every thread; throttled answers retried while the deadline allows)."""
        client.meta.events.register("before-call", self._count)
        client.meta.events.register_first("needs-retry", give_up_on_dead_endpoint)
        credentials = self._session.get_credentials()
        # AWS's buckets are per account; the access key stands for it (one key, one account) with no STS call
        rates.install(client, account=getattr(credentials, "access_key", None) or "",
                      on_throttle=lambda *seen: self.throttled.append(seen),
                      patience=lambda: self.throttle_patience)
        if credentials is not None:  # so --debug logs never show them, whatever their source
            redact.add_secret(credentials.secret_key)
            redact.add_secret(credentials.token)

    def _count(self, model: Any, context: Mapping[str, Any], **_: Any) -> None:
        self.calls.append((model.service_model.service_name, model.name, context.get("client_region", "")))

    def caller_identity(self, region: str) -> dict[str, str]:
        """Account and ARN of the credentials in use (sts:GetCallerIdentity)."""
        with mapped_errors("sts:GetCallerIdentity", region):
            raw = self.client("sts", region).get_caller_identity()
        return {"account": raw["Account"], "arn": raw["Arn"]}


K = TypeVar("K")
V = TypeVar("V")
MAX_WORKERS = 32


def fan_out(keys: Sequence[K], work: Callable[[K], V]) -> dict[K, V]:
    """Run `work` for every key (a region, usually) in threads, up to MAX_WORKERS; the first error wins.

    The gateway is thread-safe, and AWS calls spend their time waiting on the network (or for a
    token: the rate limiter, not the pool size, sets the pace). Each thread runs in a copy of the
    caller's context, so an operation's deadline goes with it.
    """
    keys = list(keys)
    if len(keys) <= 1:
        return {k: work(k) for k in keys}
    with ThreadPoolExecutor(max_workers=min(MAX_WORKERS, len(keys)), thread_name_prefix="amibuild-aws") as pool:
        futures = {k: pool.submit(contextvars.copy_context().run, work, k) for k in keys}
        return {k: settled(futures[k]) for k in keys}


@contextlib.contextmanager
def beside(work: Callable[[], V]) -> Iterator[Callable[[], V]]:
    """Start ``work`` in a thread while the block runs; the block calls what this yields for its
    answer (``work``'s error is raised there). An error in the block comes first: leaving it waits
    for ``work`` to end and drops what it returned or raised.
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="amibuild-beside") as pool:
        started = pool.submit(contextvars.copy_context().run, work)
        yield lambda: settled(started)

