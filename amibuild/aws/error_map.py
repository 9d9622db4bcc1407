"""botocore's errors turned into amibuild's at the gateway boundary (`mapped_errors`), naming the action."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

from amibuild.aws.deadline import Overdue
from amibuild.errors import (AccessDenied, AwsError, DeadlineExceeded, EndpointUnreachable, ExpiredToken, NoCredentials,
                             NotFound, UsageError)
from botocore import exceptions as bx
from botocore.parsers import ResponseParserError

_EXPIRED = {"ExpiredToken", "ExpiredTokenException", "RequestExpired", "TokenRefreshRequired"}
_DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedAccess",
           "AuthFailure", "InvalidClientTokenId", "UnrecognizedClientException", "SignatureDoesNotMatch"}
_NOT_FOUND = {"ParameterNotFound", "InvalidAMIID.NotFound", "InvalidAMIID.Unavailable",
              "InvalidAMIID.Malformed", "ValidationError", "ResourceNotFoundException",
              "ParameterVersionNotFound", "InvalidSnapshot.NotFound", "NoSuchBucket",
              "NoSuchKey", "NotFoundException",  # KMS: no such key or alias
              # EC2: a launch template, or a version of one, that does not exist
              "InvalidLaunchTemplateId.NotFound", "InvalidLaunchTemplateId.VersionNotFound",
              "InvalidLaunchTemplateName.NotFoundException"}


@contextlib.contextmanager
def mapped_errors(action: str, region: str | None = None) -> Iterator[None]:
    """Translate botocore exceptions raised inside into amibuild's, naming the action."""
    where = f" in {region}" if region else ""
    try:
        yield
    except Overdue as exc:
        raise DeadlineExceeded(
            f"{action}{where}: no answer from AWS within {exc.seconds:g} s, the deadline of this channel "
            "operation; amibuild gave up waiting"
        ) from exc
    except bx.NoCredentialsError as exc:
        raise NoCredentials(
            f"{action}{where}: no AWS credentials found; set AWS_PROFILE or AWS_ACCESS_KEY_ID/"
            "AWS_SECRET_ACCESS_KEY"
        ) from exc
    except (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ProxyConnectionError,
            bx.ReadTimeoutError, bx.ConnectionClosedError) as exc:
        endpoint = getattr(exc, "kwargs", {}).get("endpoint_url") or os.environ.get("AWS_ENDPOINT_URL") or "AWS"
        raise EndpointUnreachable(
            f"{action}{where}: cannot reach {endpoint} ({exc.__class__.__name__}); check the network and "
            "AWS_ENDPOINT_URL"
        ) from exc
    except bx.ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        message = str(error.get("Message", "")).strip().splitlines()[0] if error.get("Message") else code
        if code.isdigit() or message.lstrip().startswith("<"):  # an HTTP error page, not an AWS error
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or code
            raise AwsError(f"{action}{where}: the endpoint answered HTTP {status} with no AWS error in it (an HTML "
                           "page?); check AWS_ENDPOINT_URL and the region, or retry if AWS is having trouble") from exc
        if code in _EXPIRED:
            raise ExpiredToken(f"{action}{where}: the AWS credentials have expired; refresh them (e.g. `aws sso login`)") from exc
        if code in _DENIED:
            raise AccessDenied(f"{action}{where}: access denied ({code}); the credentials need permission for {action}") from exc
        if code in _NOT_FOUND:
            raise NotFound(f"{action}{where}: {message}") from exc
        raise AwsError(f"{action}{where}: {code}: {message}") from exc
    except (bx.UnauthorizedSSOTokenError, bx.TokenRetrievalError) as exc:  # an SSO login that has run out
        raise ExpiredToken(f"{action}{where}: the AWS credentials have expired; refresh them (e.g. `aws sso login`)") from exc
    except bx.SSOTokenLoadError as exc:  # an SSO profile that was never logged in (no token in the cache)
        raise NoCredentials(f"{action}{where}: no AWS SSO login for this profile ({_one_line(str(exc))}); "
                            "run `aws sso login`") from exc
    except (bx.InvalidConfigError, bx.PartialCredentialsError) as exc:  # the profile is written wrong
        raise UsageError(f"{action}{where}: {_one_line(str(exc)).rstrip('.')}; check the profile in ~/.aws/config "
                         "(and ~/.aws/credentials) or the AWS_* credential variables") from exc
    except (bx.UnknownRegionError, bx.InvalidRegionError, bx.NoRegionError) as exc:
        raise UsageError(f"{action}{where}: {_one_line(str(exc))}; check --region or AWS_REGION") from exc
    except bx.BotoCoreError as exc:
        raise AwsError(f"{action}{where}: {_one_line(str(exc))}") from exc
    except ResponseParserError as exc:  # not a BotoCoreError: an answer that is not AWS's format
        # its text quotes the body (an HTML page, say): not worth a line of its own
        raise AwsError(f"{action}{where}: the endpoint's answer is not an AWS response (botocore cannot parse it); "
                       "check AWS_ENDPOINT_URL and the region, or retry if AWS is having trouble") from exc


def _one_line(text: str) -> str:
    return " ".join(text.split())
