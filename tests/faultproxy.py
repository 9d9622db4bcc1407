"""A small fault-injecting HTTP forwarder on 127.0.0.1, in front of the local emulator.

Point ``AWS_ENDPOINT_URL`` at `FaultProxy.endpoint` and every AWS call goes through it. It can

* delay every request (`delay`, seconds) to stand in for network latency;
* answer ``ThrottlingException`` to a fraction of chosen operations (`throttle`);
* throttle as AWS does (`rate_limit`): a token bucket per access key, region and API (or API group),
  at AWS's default rates (amibuild/aws/rates.py; the table: docs/dev/decisions.md) or scaled or overridden, answered with each
  service's own throttling error: EC2 ``RequestLimitExceeded`` (HTTP 503, query/XML ``Response``
  body), SSM and KMS ``ThrottlingException`` (HTTP 400, JSON ``__type``), CloudFormation, STS and
  Auto Scaling ``Throttling`` (HTTP 400, XML ``ErrorResponse``). EKS (REST, no operation on the wire
  in a form read here) and S3 are forwarded unlimited;
* record every request as sent (`record`), for `replay` against the emulator without the proxy;
* fail chosen operations in one region with a non-retryable error (`fail`);
* hold the first N matching requests until all N have arrived, then let them go together
  (`hold`): a deterministic way to make two writers race;
* hold chosen requests (an operation, a region, a parameter name) until the test releases them
  (`gate`): the test knows a request is in flight and decides when it lands, with no sleeping;
* pause every matching request, before or after forwarding it, until the test resumes them
  (`pause` / `resume`), so a test acts while a chosen call is in flight (or its answer is);
* die (`die`): refuse new connections and drop open ones, as an endpoint that went away.

Operations are named as the wire names them: the ``X-Amz-Target`` header for JSON protocols
(``AmazonSSM.PutParameter``), else the query ``Action`` (``DescribeImages``). The region comes from
the SigV4 credential scope; for SSM, the parameter ``Name`` comes from the JSON body. Everything
seen is recorded in `log` as `Seen` entries.

    with FaultProxy(sandbox.endpoint, seed=1) as proxy:
        proxy.throttle(0.3)
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
"""

from __future__ import annotations

import http.client
import json
import random
import re
import threading
import time
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterable, Mapping

SSM_WRITES = ("AmazonSSM.PutParameter",)
_SCOPE = re.compile(r"Credential=[^/]+/\d{8}/([^/]+)/([^/]+)/aws4_request")
_KEY = re.compile(r"Credential=([^/]+)/")
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
               "transfer-encoding", "upgrade", "content-length"}
_OWN_HEADERS = {"server"}  # `_reply` writes its own; the upstream's Date is AWS's clock, so it is forwarded


@dataclass(frozen=True)
class Seen:
    """One request the proxy handled: what it was and what the proxy did with it."""

    op: str
    region: str
    outcome: str  # "forwarded" | "throttled" | "failed"
    at: float = 0.0  # time.monotonic() when answered
    name: str = ""  # the SSM parameter named in the request, if any
    service: str = ""  # the SigV4 signing name: "ec2", "ssm", ...


class Gate:
    """Requests matching (operation, region, name) wait here until `release`; see `FaultProxy.gate`."""

    def __init__(self, ops: frozenset[str], region: str | None, name: str | None, count: int | None,
                 timeout: float) -> None:
        self.ops, self.region, self.name, self.left, self.timeout = ops, region, name, count, timeout
        self._open = threading.Event()
        self._arrived = threading.Condition()
        self.held = 0  # how many requests have been caught so far

    def matches(self, op: str, region: str, name: str) -> bool:
        return (op in self.ops and (self.region is None or region == self.region)
                and (self.name is None or self.name in name) and self.left != 0)

    def catch(self) -> None:
        with self._arrived:
            self.held += 1
            self._arrived.notify_all()
        # bounded, so that a test that forgets to release fails instead of hanging
        self._open.wait(self.timeout)

    def wait_held(self, count: int = 1, timeout: float = 60.0) -> bool:
        """Block until `count` requests are caught; False on timeout."""
        with self._arrived:
            return self._arrived.wait_for(lambda: self.held >= count, timeout)

    def release(self) -> None:
        self._open.set()


@dataclass
class _Failure:
    region: str
    ops: frozenset[str]
    status: int
    code: str
    message: str
    times: int | None  # None: every matching request
    name: str = ""  # only requests naming a parameter that contains this


class FaultProxy:
    """Threaded forwarder to `upstream` with injectable delay, throttling, failures and holds."""

    def __init__(self, upstream: str, *, delay: float = 0.0, seed: int | None = None) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.hostname not in ("127.0.0.1", "localhost"):
            raise ValueError(f"FaultProxy forwards to loopback only, not {upstream}")
        self._upstream = (parsed.hostname, parsed.port or 80)
        self.delay = delay
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._throttle: tuple[float, frozenset[str]] = (0.0, frozenset())
        self._failures: list[_Failure] = []
        self._hold: tuple[frozenset[str], threading.Barrier, float] | None = None
        self._hold_left = 0
        self._hold_body = b""
        self._gates: list[Gate] = []
        self.log: list[Seen] = []
        self._pause: tuple[frozenset[str], str | None, bool] | None = None
        self._pause_open = threading.Event()
        self._pause_drop = False
        self._paused = 0
        self._dead = False
        self._rates: Callable[[str, str, bool], tuple[str, float, float] | None] | None = None
        self._buckets: dict[tuple[str, str, str, str], _Bucket] = {}
        self.recorded: list[tuple[str, str, dict[str, str], bytes]] | None = None
        self._endpoint = ""
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- faults -------------------------------------------------------------------------------

    def throttle(self, fraction: float, ops: Iterable[str] = SSM_WRITES) -> None:
        """Answer ThrottlingException (HTTP 400) to about `fraction` of the matching requests."""
        with self._lock:
            self._throttle = (fraction, frozenset(ops))

    def rate_limit(self, *, scale: float = 1.0, rates: Mapping[tuple[str, str], tuple[float, float]] | None = None,
                   services: Iterable[str] = ("ec2", "ssm", "kms", "cloudformation", "sts", "autoscaling")) -> None:
        """Throttle as AWS does: a token bucket per access key, region and bucket, at the rates of
        amibuild/aws/rates.py (``bucket``: EC2 100 burst / 20 a second per non-mutating API, 50 / 5
        per mutating one; SSM 40 / 40 for the GetParameter family together, 3 / 3 for PutParameter)
        times `scale` (0.5: another tool uses half the account's budget). `rates` overrides
        (service, bucket name) -> (burst, per second). A request finding its bucket empty gets the
        service's throttling error (see the module docstring) and is logged "throttled"."""
        from amibuild.aws import rates as aws_rates

        wanted, overrides = frozenset(services), dict(rates or {})

        def choose(service: str, op: str, narrowed: bool) -> tuple[str, float, float] | None:
            if service not in wanted:
                return None
            found = aws_rates.bucket(service, op, narrowed=narrowed)
            if found is None:
                return None
            name, rate = found
            # a scaled bucket still holds one whole request (below 1 it would refuse every one); an override may not
            burst, per_second = overrides.get((service, name), (max(1.0, rate.burst * scale), rate.per_second * scale))
            return name, burst, per_second

        with self._lock:
            self._rates = choose
            self._buckets = {}

    def record(self) -> None:
        """Keep every request forwarded from now on (`recorded`: method, path, headers, body), for `replay`."""
        with self._lock:
            self.recorded = []

    def fail(self, region: str, ops: Iterable[str] = SSM_WRITES, *, times: int | None = None,
             status: int = 400, code: str = "AccessDeniedException",
             message: str = "injected by FaultProxy: explicit deny in a service control policy",
             name: str = "") -> None:
        """Fail matching requests in `region` (all of them, or the next `times`; only those naming a
        parameter that contains `name`, if given) with a JSON error."""
        with self._lock:
            self._failures.append(_Failure(region, frozenset(ops), status, code, message, times, name))

    def answer(self, region: str, ops: Iterable[str], body: Mapping[str, object], *, times: int = 1) -> None:
        """Answer the next `times` matching requests in `region` with HTTP 200 and the JSON `body`, as
        the service would answer (e.g. PutEvents' FailedEntryCount for an entry it did not take)."""
        self.fail(region, ops, times=times, status=200, code="", message=json.dumps(body))

    def hold(self, ops: Iterable[str], count: int, timeout: float = 20.0, *, body_has: str = "") -> None:
        """Hold the next `count` matching requests (whose body contains `body_has`) until all have
        arrived, then release them at once."""
        with self._lock:
            self._hold = (frozenset(ops), threading.Barrier(count), timeout)
            self._hold_left = count
            self._hold_body = body_has.encode()

    def gate(self, ops: Iterable[str] = SSM_WRITES, *, region: str | None = None, name: str | None = None,
             count: int | None = 1, timeout: float = 60.0) -> Gate:
        """Hold the next `count` (None: every) request of `ops` in `region` naming a parameter that
        contains `name`, until `Gate.release`."""
        gate = Gate(frozenset(ops), region, name, count, timeout)
        with self._lock:
            self._gates.append(gate)
        return gate

    def pause(self, ops: Iterable[str], *, region: str | None = None, after_forward: bool = False) -> None:
        """Hold every matching request (in `region`, if given) until `resume`.

        ``after_forward``: the request reaches the emulator first and only its answer is held, so
        what it creates exists while the caller still waits for the reply.
        """
        with self._lock:
            self._pause = (frozenset(ops), region, after_forward)
            self._pause_open.clear()
            self._pause_drop = False
            self._paused = 0

    def paused(self) -> int:
        """How many requests the pause has caught so far."""
        with self._lock:
            return self._paused

    def resume(self, *, drop: bool = False) -> None:
        """Let the paused requests go on (``drop``: close their connections without an answer)."""
        with self._lock:
            self._pause_drop = drop
            self._pause = None
        self._pause_open.set()

    def die(self) -> None:
        """Become an endpoint that is gone: new connections refused, open ones closed unanswered."""
        with self._lock:
            self._dead = True
        self.resume(drop=True)
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def held(self) -> int:
        """How many requests the current `hold` has caught so far."""
        with self._lock:
            return 0 if self._hold is None else self._hold[1].parties - self._hold_left

    def clear(self) -> None:
        """Drop every fault (the delay stays)."""
        with self._lock:
            self._throttle = (0.0, frozenset())
            self._rates, self._buckets = None, {}
            self._failures = []
            self._hold, self._hold_left = None, 0
            gates, self._gates = self._gates, []
        for gate in gates:
            gate.release()

    def count(self, op: str | None = None, outcome: str | None = None, region: str | None = None,
              name: str | None = None) -> int:
        """Requests seen; `name` matches parameter names containing it."""
        with self._lock:
            return sum(
                1 for s in self.log
                if (op is None or s.op == op) and (outcome is None or s.outcome == outcome)
                and (region is None or s.region == region) and (name is None or name in s.name)
            )

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out in two writes; with Nagle's algorithm the body would wait for
            # the client's delayed ACK (~40 ms a request on Linux)
            disable_nagle_algorithm = True

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                proxy._handle(self)

            do_GET = do_PUT = do_DELETE = do_HEAD = do_POST  # noqa: N815

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="faultproxy", daemon=True)
        self._thread.start()
        self._endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.resume()
        self.stop()

    @property
    def endpoint(self) -> str:
        if not self._endpoint:
            raise RuntimeError("the proxy is not started")
        return self._endpoint

    # -- the forwarding -----------------------------------------------------------------------

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else b""
        op = request.headers.get("X-Amz-Target") or _query_action(request.path, body)
        scope = _SCOPE.search(request.headers.get("Authorization", ""))
        region = scope.group(1) if scope else ""
        service = scope.group(2) if scope else ""
        name = _parameter_name(body)

        if self._dead:
            request.close_connection = True
            return
        if self.delay:
            time.sleep(self.delay)
        self._wait_for_hold(op, body)
        self._wait_at_gate(op, region, name)
        after_forward = self._paused_here(op, region)
        if after_forward is False and not self._pass_pause():
            request.close_connection = True
            return
        limited = self._over_rate(request, service, op, region, body)
        if limited is not None:
            status, headers, payload = limited
            self._record(op, region, "throttled", name, service)
            self._reply(request, status, headers, payload)
            return
        fault = self._fault_for(op, region, name)
        if fault is not None:
            outcome, status, code, message = fault
            self._record(op, region, outcome, name)
            if status == 200:  # `answer`: the service's own answer, made up here
                self._reply(request, 200, [("Content-Type", "application/x-amz-json-1.1")], message.encode())
                return
            if service == "ec2":  # EC2 answers in XML
                xml = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
                       f'<Message>{message}</Message></Error></Errors><RequestID>faultproxy</RequestID></Response>')
                self._reply(request, status, [("Content-Type", "text/xml;charset=UTF-8")], xml.encode())
                return
            payload = json.dumps({"__type": code, "message": message}).encode()
            self._reply(request, status, [("Content-Type", "application/x-amz-json-1.1"),
                                          ("x-amzn-ErrorType", code)], payload)
            return

        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        connection = http.client.HTTPConnection(*self._upstream, timeout=60)
        try:
            connection.request(request.command, request.path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
            reply_headers = [(k, v) for k, v in response.getheaders()
                             if k.lower() not in _HOP_BY_HOP | _OWN_HEADERS]
            status = response.status
        finally:
            connection.close()
        self._record(op, region, "forwarded", name, service)
        if self.recorded is not None:
            with self._lock:
                self.recorded.append((request.command, request.path, dict(request.headers.items()), body))
        if after_forward and not self._pass_pause():
            request.close_connection = True
            return
        if self._dead:
            request.close_connection = True
            return
        self._reply(request, status, reply_headers, data)

    def _over_rate(self, request: BaseHTTPRequestHandler, service: str, op: str, region: str,
                   body: bytes) -> tuple[int, list[tuple[str, str]], bytes] | None:
        """The throttling answer when the request's bucket is empty (`rate_limit`), else None."""
        choose = self._rates
        if choose is None or not op:
            return None
        action = op.rsplit(".", 1)[-1]  # "AmazonSSM.PutParameter" -> "PutParameter"
        from amibuild.aws.rates import narrowed

        params = urllib.parse.parse_qs(body.decode("utf-8", "replace")) if not body.startswith(b"{") else {}
        chosen = choose(service, action, narrowed({k: v for k, v in params.items() if k not in ("Action", "Version")})
                        if service == "ec2" else True)
        if chosen is None:
            return None
        bucket_name, burst, per_second = chosen
        key = _KEY.search(request.headers.get("Authorization", ""))
        with self._lock:
            bucket = self._buckets.setdefault((key.group(1) if key else "", region, service, bucket_name),
                                              _Bucket(burst, per_second))
            if bucket.take():
                return None
        return _throttling_answer(service, request.headers.get("X-Amz-Target") is not None)

    def _paused_here(self, op: str, region: str) -> bool | None:
        """None: not paused; False: held before forwarding; True: held after forwarding."""
        with self._lock:
            if self._pause is None or op not in self._pause[0] or self._pause[1] not in (None, region):
                return None
            self._paused += 1
            return self._pause[2]

    def _pass_pause(self) -> bool:
        """Wait for `resume`; False when it resumed with drop (close the connection)."""
        self._pause_open.wait(120)
        return not self._pause_drop

    def _wait_at_gate(self, op: str, region: str, name: str) -> None:
        with self._lock:
            gate = next((g for g in self._gates if g.matches(op, region, name)), None)
            if gate is not None and gate.left is not None:
                gate.left -= 1  # under the proxy's lock: two requests never take the last place
        if gate is not None:
            gate.catch()

    def _wait_for_hold(self, op: str, body: bytes = b"") -> None:
        with self._lock:
            if self._hold is None or op not in self._hold[0] or self._hold_left <= 0 or self._hold_body not in body:
                return
            self._hold_left -= 1
            barrier, timeout = self._hold[1], self._hold[2]
        try:
            barrier.wait(timeout)
        except threading.BrokenBarrierError:
            pass  # not all arrived in time: let this one go rather than hang the test

    def _fault_for(self, op: str, region: str, name: str = "") -> tuple[str, int, str, str] | None:
        with self._lock:
            for failure in self._failures:
                if failure.region == region and op in failure.ops and failure.times != 0 and failure.name in name:
                    if failure.times is not None:
                        failure.times -= 1
                    return "failed", failure.status, failure.code, failure.message
            fraction, ops = self._throttle
            if op in ops and self._random.random() < fraction:
                return "throttled", 400, "ThrottlingException", "Rate exceeded"
        return None

    def _record(self, op: str, region: str, outcome: str, name: str = "", service: str = "") -> None:
        with self._lock:
            self.log.append(Seen(op, region, outcome, time.monotonic(), name, service))

    @staticmethod
    def _reply(request: BaseHTTPRequestHandler, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        request.send_response_only(status)
        request.send_header("Server", request.version_string())
        if not any(key.lower() == "date" for key, _ in headers):  # an answer of the proxy's own (a fault)
            request.send_header("Date", request.date_time_string())
        for key, value in headers:
            request.send_header(key, value)
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        if request.command != "HEAD":
            request.wfile.write(body)


class _Bucket:
    """AWS's side of a token bucket: a request takes a token or is refused (no waiting)."""

    def __init__(self, burst: float, per_second: float) -> None:
        self.burst, self.per_second = burst, per_second
        self.tokens, self.at = float(burst), time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.per_second)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


def _throttling_answer(service: str, json_protocol: bool) -> tuple[int, list[tuple[str, str]], bytes]:
    """Each service's own answer to a request over its rate: status, headers, body."""
    request_id = f"{random.getrandbits(64):016x}-faultproxy"
    if service == "ec2":
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>RequestLimitExceeded</Code>'
                f'<Message>Request limit exceeded.</Message></Error></Errors><RequestID>{request_id}</RequestID></Response>')
        return 503, [("Content-Type", "text/xml;charset=UTF-8")], body.encode()
    if json_protocol:  # SSM, KMS
        payload = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}).encode()
        return 400, [("Content-Type", "application/x-amz-json-1.1"), ("x-amzn-RequestId", request_id)], payload
    body = ('<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message>'
            f'</Error><RequestId>{request_id}</RequestId></ErrorResponse>')  # CloudFormation, STS, Auto Scaling
    return 400, [("Content-Type", "text/xml")], body.encode()


def replay(upstream: str, requests: Iterable[tuple[str, str, dict[str, str], bytes]], *, workers: int = 32) -> float:
    """Send recorded requests straight to `upstream` (loopback), `workers` at a time, in their
    order; the wall seconds it took. The emulator checks no signature, so old ones do."""
    from concurrent.futures import ThreadPoolExecutor

    parsed = urllib.parse.urlsplit(upstream)
    if parsed.hostname not in ("127.0.0.1", "localhost"):
        raise ValueError(f"replay sends to loopback only, not {upstream}")
    local = threading.local()

    def send(item: tuple[str, str, dict[str, str], bytes]) -> None:
        method, path, headers, body = item
        connection = getattr(local, "connection", None)
        if connection is None:
            connection = local.connection = http.client.HTTPConnection(parsed.hostname, parsed.port or 80, timeout=60)
        connection.request(method, path, body=body,
                           headers={k: v for k, v in headers.items() if k.lower() not in _HOP_BY_HOP})
        connection.getresponse().read()

    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(send, list(requests)))
    return time.monotonic() - start


def _parameter_name(body: bytes) -> str:
    """The ``Name`` (or ``ResourceId``) an SSM JSON request names; "" for anything else."""
    if not body.startswith(b"{"):
        return ""
    try:
        data = json.loads(body)
    except ValueError:
        return ""
    return str(data.get("Name") or data.get("ResourceId") or "") if isinstance(data, dict) else ""


def _query_action(path: str, body: bytes) -> str:
    """The ``Action`` of a query-protocol request (EC2, STS, ...), from the body or the URL."""
    for source in (body.decode("utf-8", "replace"), urllib.parse.urlsplit(path).query):
        action = urllib.parse.parse_qs(source).get("Action")
        if action:
            return action[0]
    return ""

