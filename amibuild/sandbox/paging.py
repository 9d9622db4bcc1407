"""DescribeInstances and DescribeImages in pages of ``MaxResults`` items, as AWS pages them.

moto 5.2.5 counts DescribeInstances' MaxResults in reservations (a RunInstances of 1,000 is one
"item") and does not page DescribeImages at all, so a region's thousands of instances or images
come back in one answer however small a page the caller asks for. Here, as on AWS, MaxResults
counts instances (5 to 1,000; not with InstanceIds) and images (1 to 1,000; not with ImageIds); a
reservation split by a page boundary appears on both pages with its instances of that page; the
NextToken is opaque; without MaxResults everything comes in one answer. Docs: docs/sandbox-paging.md.
"""

from __future__ import annotations

import base64
import copy
from typing import Any, Sequence

INSTANCE_PAGE = (5, 1000)  # DescribeInstances' MaxResults range (EC2 API reference)
IMAGE_PAGE = (1, 1000)  # DescribeImages' MaxResults range
_TOKEN_PREFIX = "amibuild-page:"


def _token(offset: int) -> str:
    return base64.urlsafe_b64encode(f"{_TOKEN_PREFIX}{offset}".encode()).decode()


def _offset(token: Any) -> int:
    """The item offset a NextToken stands for; AWS's InvalidPaginationToken for anything else."""
    from moto.ec2.exceptions import EC2ClientError

    if not token:
        return 0
    try:
        text = base64.urlsafe_b64decode(str(token).encode()).decode()
        if text.startswith(_TOKEN_PREFIX):
            return int(text[len(_TOKEN_PREFIX):])
    except (ValueError, UnicodeDecodeError):
        pass
    raise EC2ClientError("InvalidPaginationToken", f"The pagination token {token} is invalid.")


def _page_size(response: Any, limits: tuple[int, int], *, excluded: str, exclusive_with: str) -> int | None:
    """MaxResults, checked against `limits` and against `excluded` (ids) in the same request."""
    from moto.ec2.exceptions import EC2ClientError, InvalidParameterCombination

    raw = response._get_param("MaxResults")
    if raw is None:
        return None
    if response._get_param(excluded, []):
        raise InvalidParameterCombination(f"The parameter {exclusive_with} cannot be used with the parameter maxResults")
    size = int(raw)
    low, high = limits
    if not low <= size <= high:
        raise EC2ClientError("InvalidParameterValue",
                             f"Value ( {size} ) for parameter maxResults is invalid. "
                             f"Expecting a value between {low} and {high}.")
    return size


def page_reservations(reservations: Sequence[Any], offset: int, size: int | None) -> tuple[list[Any], int | None]:
    """The reservations holding instances [offset, offset + size) of all of them, each cut to the
    instances of the page (copies: the backend's own stay whole); the next offset, or None."""
    if size is None and offset == 0:
        return list(reservations), None
    end = None if size is None else offset + size
    page, seen = [], 0
    for reservation in reservations:
        count = len(reservation.instances)
        low, high = max(offset - seen, 0), count if end is None else min(end - seen, count)
        if low < high:
            part = copy.copy(reservation)
            part.instances = reservation.instances[low:high]
            page.append(part)
        seen += count
        if end is not None and seen >= end:
            break
    total = sum(len(r.instances) for r in reservations)
    return page, (end if end is not None and end < total else None)


def install() -> None:
    """Replace moto's DescribeInstances and wrap the DescribeImages answer (after image_lifecycle's)."""
    from moto.core.responses import ActionResult
    from moto.ec2.responses.amis import AmisResponse
    from moto.ec2.responses.instances import InstanceResponse

    def describe_instances(response: Any) -> ActionResult:
        response.error_on_dryrun()
        size = _page_size(response, INSTANCE_PAGE, excluded="InstanceIds", exclusive_with="instancesSet")
        offset = _offset(response._get_param("NextToken"))
        filters = response._filters_from_querystring()
        ids = response._get_param("InstanceIds", [])
        backend = response.ec2_backend
        reservations = (backend.get_reservations_by_instance_ids(ids, filters=filters) if ids
                        else backend.describe_instances(filters=filters))
        page, after = page_reservations(reservations, offset, size)
        return ActionResult({"Reservations": page, "NextToken": None if after is None else _token(after)})

    listed = AmisResponse.describe_images

    def describe_images(response: Any) -> ActionResult:
        size = _page_size(response, IMAGE_PAGE, excluded="ImageIds", exclusive_with="imageIds")
        offset = _offset(response._get_param("NextToken"))
        answer = listed(response)  # kept whole: it may carry more than the list (accounts' ImageAllowed)
        images = answer.result["Images"]
        if size is None and offset == 0:
            return answer
        end = len(images) if size is None else offset + size
        answer._result = {"Images": images[offset:end], "NextToken": _token(end) if end < len(images) else None}
        return answer

    InstanceResponse.describe_instances = describe_instances
    AmisResponse.describe_images = describe_images
