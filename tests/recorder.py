"""A recording proxy: every AWS request that passes through it, named as the IAM action it needs.

`Recorder` is a `FaultProxy` (same forwarding, same faults) that also notes, per request, the
signing service from the SigV4 credential scope and the operation, so that a test can compare what
a task really called with the policy `amibuild.lifecycle.iam` prints for it. The operation comes from where
each protocol puts it:

    JSON (SSM, ...)         the ``X-Amz-Target`` header           AmazonSSM.PutParameter
    query (EC2, ASG, CFN)   ``Action=`` in the form body or URL   DescribeImages
    REST (EKS)              method + path, matched against botocore's model of the service

It sees Packer's requests as well as boto3's: Packer reaches EC2 through ``custom_endpoint_ec2``,
which amibuild renders from ``AWS_ENDPOINT_URL``.

`refuse` answers chosen query-protocol requests (EC2, ...) with an error in EC2's own XML shape,
which botocore parses into a proper ``ClientError`` (FaultProxy's JSON errors suit JSON services).

    with Recorder(sandbox.endpoint) as recorder:
        env = {**os.environ, "AWS_ENDPOINT_URL": recorder.endpoint}
        ...
        recorder.actions()   # {"ec2:DescribeImages", "ssm:PutParameter", ...}
"""

from __future__ import annotations

import functools
import io
import json
import re
import threading
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler

from faultproxy import _SCOPE, FaultProxy, _query_action


@dataclass(frozen=True)
class Call:
    """One request: the IAM action it needs and where it went."""

    service: str  # the SigV4 signing name, which is also the IAM prefix for every service used here
    operation: str
    region: str
    names: tuple[str, ...] = ()  # what it acted on, where the request names it: SSM parameters, stacks

    @property
    def action(self) -> str:
        return f"{self.service}:{_IAM_NAMES.get((self.service, self.operation), self.operation)}"


# operations whose IAM action has another name (S3 authorizes listing a bucket's keys as s3:ListBucket)
_IAM_NAMES = {("s3", "ListObjectsV2"): "ListBucket", ("s3", "ListObjects"): "ListBucket"}


class Recorder(FaultProxy):
    """`FaultProxy` that records every request as a `Call`."""

    def __init__(self, upstream: str, **kwargs: object) -> None:
        super().__init__(upstream, **kwargs)  # type: ignore[arg-type]
        self.calls: list[Call] = []
        self._calls_lock = threading.Lock()
        self._refusals: list[list] = []  # [operation, region, needle, code, message, times left or None]

    def refuse(self, operation: str, region: str, *, code: str, message: str, contains: str = "",
               times: int | None = None) -> None:
        """Answer `operation` in `region` (only requests whose body holds `contains`) with an EC2 error."""
        with self._calls_lock:
            self._refusals.append([operation, region, contains, code, message, times])

    def actions(self) -> set[str]:
        with self._calls_lock:
            return {c.action for c in self.calls}

    def forget(self) -> None:
        with self._calls_lock:
            self.calls.clear()

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else b""
        scope = _SCOPE.search(request.headers.get("Authorization", ""))
        region, service = (scope.group(1), scope.group(2)) if scope else ("", "")
        target = request.headers.get("X-Amz-Target") or ""
        operation = (target.rsplit(".", 1)[-1] if target else
                     _query_action(request.path, body) or _rest_operation(service, request.command, request.path,
                                                                      request.headers.keys()))
        with self._calls_lock:
            self.calls.append(Call(service, operation or f"?{request.command} {request.path}", region,
                                   _names(body, bool(target))))
            refusal = self._refusal(operation, region, body)
        if refusal is not None:
            code, message = refusal
            self._record(operation, region, "failed")
            payload = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
                       f"<Message>{message}</Message></Error></Errors><RequestID>recorder</RequestID></Response>")
            self._reply(request, 400, [("Content-Type", "text/xml;charset=UTF-8")], payload.encode())
            return
        original = request.rfile
        request.rfile = io.BytesIO(body)  # FaultProxy reads the body again; keep-alive needs the socket back
        try:
            super()._handle(request)
        finally:
            request.rfile = original

    def _refusal(self, operation: str, region: str, body: bytes) -> tuple[str, str] | None:
        for refusal in self._refusals:
            op, where, needle, code, message, left = refusal
            if op == operation and where == region and needle.encode() in body and left != 0:
                if left is not None:
                    refusal[5] = left - 1
                return code, message
        return None


def _names(body: bytes, json_protocol: bool) -> tuple[str, ...]:
    """SSM parameter names / paths (JSON body) or CloudFormation stack names (query form) of a request."""
    if json_protocol:
        try:
            doc = json.loads(body or b"{}")
        except ValueError:
            return ()
        if not isinstance(doc, dict):
            return ()
        names = [doc.get(k) for k in ("Name", "Path", "ResourceId")] + list(doc.get("Names") or [])
        return tuple(n for n in names if isinstance(n, str))
    form = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
    return tuple(form.get("StackName", []))


@functools.cache
def _rest_routes(service: str) -> tuple[tuple[str, re.Pattern[str], str], ...]:
    """(method, path regex, operation) for every operation of a REST service, most specific first."""
    import botocore.session
    from botocore.exceptions import UnknownServiceError

    try:
        model = botocore.session.get_session().get_service_model(service)
    except UnknownServiceError:  # not a service botocore knows under its signing name
        return ()
    routes = []
    for name in model.operation_names:
        http = model.operation_model(name).http
        path, _, query = http.get("requestUri", "/").partition("?")
        # S3 tells operations on one path apart by a query key (?tagging, ?acl; x-id is only a hint) or
        # a required query member or header (UploadPart's uploadId, CopyObject's x-amz-copy-source)
        keys = {k for k in urllib.parse.parse_qs(query, keep_blank_values=True) if k != "x-id"}
        shape = model.operation_model(name).input_shape
        for member in (shape.required_members if shape is not None else ()):
            where = shape.members[member].serialization
            if where.get("location") == "querystring":
                keys.add(where.get("name", member))
            elif where.get("location") == "header":
                keys.add("header:" + where.get("name", member).lower())
        keys = frozenset(keys)
        regex = re.sub(r"\\\{[^}]+\\\+\\\}", ".+", re.escape(path))  # a greedy label ({Key+}) spans "/"
        regex = re.sub(r"\\\{[^}]+\\\}", "[^/]+", regex)
        routes.append((http.get("method", "POST"), re.compile(f"^{regex}/?$"), name, keys, path.count("{")))
    routes.sort(key=lambda r: (-len(r[3]), r[4], -len(r[1].pattern)))
    return tuple((m, p, n, k) for m, p, n, k, _ in routes)


def _rest_operation(service: str, method: str, path: str, headers=()) -> str:
    parts = urllib.parse.urlsplit(path)
    plain = urllib.parse.unquote(parts.path)
    given = set(urllib.parse.parse_qs(parts.query, keep_blank_values=True)) | {f"header:{h.lower()}" for h in headers}
    for route_method, pattern, name, keys in _rest_routes(service):
        # a label holding "/" (EKS's principal ARN) comes percent-encoded: match it before decoding too
        if route_method == method and (pattern.match(parts.path) or pattern.match(plain)) and keys <= given:
            return name
    return ""
