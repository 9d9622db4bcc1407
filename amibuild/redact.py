"""Keep credentials out of every log record, botocore's debug output included.

`invoke --debug` turns on DEBUG logging for everything, and botocore then logs each request with
its headers: `Authorization` (the access key id inside `Credential=` and the signature) and
`X-Amz-Security-Token` (the session token itself). `install()` puts one `Redact` filter in front of
every record: on the handlers that exist, and through the record factory for records made later
or sent to handlers added later. It replaces the header and query values with `<redacted>`, and
any exact secret it was told about (the secret key and session token from the environment, those
the gateway resolved) wherever they appear.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from typing import Any

from amibuild import secrets

REDACTED = "<redacted>"

# header or field name, then its value up to the closing quote: `'Authorization': b'AWS4-...'`,
# `"X-Amz-Security-Token": "..."`, `aws_secret_access_key = ...`
_QUOTED = re.compile(
    r"""(?ix)
    (['"]?(?:authorization|x-amz-security-token|x-amz-credential|x-amz-signature|
          aws_secret_access_key|aws_session_token|secretaccesskey|sessiontoken|secret_key|token)['"]?
     \s*[:=]\s*b?)
    (['"])(.*?)(?<!\\)\2
    """
)
# the same names in a query string or a header line: `X-Amz-Security-Token=...&`, `Authorization: AWS4-...`
_BARE = re.compile(
    r"""(?ix)
    (\b(?:x-amz-security-token|x-amz-credential|x-amz-signature|aws_secret_access_key|aws_session_token)=)
    [^&\s'"]+
    |(\b(?:authorization|x-amz-security-token)\s*:\s*)[^\r\n'"]+
    """
)
# the same fields in an XML answer: STS's AssumeRole (a profile with role_arn), AssumeRoleWithWebIdentity,
# GetSessionToken, whose body botocore logs before the gateway has seen the credentials in it
_XML = re.compile(r"(?i)(<(secretaccesskey|sessiontoken)>)[^<]*(?=</\2>)")
# The node group stack's NoEcho parameter (amibuild.handoff.nodegroup.PROXY_CREDENTIALS): its value
# in a request or in an answer that echoes it (the emulator's DescribeChangeSet does), XML or a dict.
_NO_ECHO = re.compile(
    r"""(?x)
    (<ParameterKey>ProxyCredentials</ParameterKey>\s*<ParameterValue>)[^<]*
    |(['"]ParameterKey['"]:\s*['"]ProxyCredentials['"],\s*['"]ParameterValue['"]:\s*)(['"])(?:(?!\3).)*\3
    |(Parameters\.member\.[0-9]+\.ParameterKey=ProxyCredentials&Parameters\.member\.[0-9]+\.ParameterValue=)[^&\s'"]*
    """
)
_ENV_SECRETS = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")
_MIN_SECRET = 8  # shorter "secrets" (dummy values such as "test") would blank ordinary words

_secrets: set[str] = set()
_lock = threading.Lock()
_installed = False


def add_secret(value: str | None, *, min_length: int = _MIN_SECRET) -> None:
    """Redact this exact value wherever it appears in a log record from now on."""
    if value and len(value) >= min_length:
        with _lock:
            _secrets.add(value)


def redact(text: str) -> str:
    text = secrets.mask(text)  # user:password@ in any URL (a proxy, a repository, a git remote)
    text = _QUOTED.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}{m.group(2)}", text)
    text = _BARE.sub(lambda m: f"{m.group(1) or m.group(2)}{REDACTED}", text)
    text = _XML.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    text = _NO_ECHO.sub(lambda m: (m.group(1) or m.group(4) or "") + REDACTED if not m.group(2)
                        else f"{m.group(2)}{m.group(3)}{REDACTED}{m.group(3)}", text)
    for secret in sorted(_secrets, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


class Redact(logging.Filter):
    """Rewrites a record's message (arguments merged in) with credentials redacted; drops nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "_amibuild_redacted", False):
            return True
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not fit its format: redact the parts
            message = f"{record.msg} {record.args}"
        record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        record._amibuild_redacted = True
        return True


_FILTER = Redact()


def install() -> None:
    """Redact every log record from now on (idempotent): handlers present now and later."""
    global _installed
    for name in _ENV_SECRETS:
        add_secret(os.environ.get(name))
    for handler in logging.getLogger().handlers:
        if _FILTER not in handler.filters:
            handler.addFilter(_FILTER)
    with _lock:
        if _installed:
            return
        _installed = True
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        _FILTER.filter(record)
        return record

    logging.setLogRecordFactory(factory)
