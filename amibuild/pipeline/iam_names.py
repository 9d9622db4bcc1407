"""IAM role and instance profile names, and Karpenter's discovery tag value, in the shapes AWS takes."""

from __future__ import annotations

import re

from amibuild.errors import SpecError

ROLE_MAX = 64
INSTANCE_PROFILE_MAX = 128
DISCOVERY_MAX = 256  # an EC2 tag value
# IAM's name characters (CreateRole, CreateInstanceProfile); `[...]` ranges and fullmatch, so a
# trailing newline, `#`, `{{}}` or a non-ASCII letter never passes
_NAME = re.compile("[A-Za-z0-9+=,.@_-]+", re.ASCII)


def role(value: str, label: str) -> str:
    """An IAM role name (not an ARN): 1-64 of A-Z a-z 0-9 + = , . @ _ -."""
    return _check(ROLE_MAX, value, label, f"an IAM role name is 1 to {ROLE_MAX}")


def instance_profile(value: str, label: str) -> str:
    """An IAM instance profile name (not an ARN): 1-128 of A-Z a-z 0-9 + = , . @ _ -."""
    return _check(INSTANCE_PROFILE_MAX, value, label, f"an IAM instance profile name is 1 to {INSTANCE_PROFILE_MAX}")


def discovery(value: str, label: str) -> str:
    """A karpenter.sh/discovery tag value (a cluster name, as a rule): 1-256 of the same characters."""
    return _check(DISCOVERY_MAX, value, label, f"a karpenter.sh/discovery value here is 1 to {DISCOVERY_MAX}")


def _check(limit: int, value: str, label: str, what: str) -> str:
    if len(value) > limit or not _NAME.fullmatch(value):
        shown = ascii(value if len(value) <= 80 else value[:80] + "...")  # a newline or escape shown, not printed
        raise SpecError(f"{label} {shown}: {what} ASCII letters, digits and + = , . @ _ - (the name, not its ARN; "
                        "no spaces, line breaks or braces)")
    return value
