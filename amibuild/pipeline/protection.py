"""What the pipeline asks EC2 to keep safe about the images its channels hold: the pipeline's
``protection { cooldown = true }`` block (deregistration protection's 24-hour cooldown) and a
variant's ``deprecate_after = "180d"``. Checked at load, exit 2 naming the file and field."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from amibuild.errors import SpecError
from amibuild.suggest import check_fields, one_block

KEYS = ("cooldown",)
MIN_DEPRECATE_AFTER = timedelta(days=1)
MAX_DEPRECATE_AFTER = timedelta(days=3650)  # EC2 takes a deprecation time at most 10 years ahead

_DURATION = re.compile(r"([0-9]{1,6})([hdw])", re.ASCII)
_UNITS = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}


@dataclass(frozen=True)
class ProtectionSettings:
    """How a channel image is protected: always on; with ``cooldown``, EC2's WithCooldown (a disable
    takes effect 24 hours later)."""

    cooldown: bool = False

    @property
    def wanted(self) -> str:
        """DescribeImages' DeregistrationProtection value a channel image should show."""
        return "enabled-with-cooldown" if self.cooldown else "enabled"


def protection_settings(value: Any, where: str) -> ProtectionSettings:
    """The ``protection { cooldown = true }`` block, checked."""
    body = one_block(value, where, "protection { cooldown = true }")
    check_fields(body, KEYS, where, "the block has cooldown")
    cooldown = body.get("cooldown", False)
    if not isinstance(cooldown, bool):
        raise SpecError(f"{where}.cooldown: {cooldown!r} is not a boolean; write cooldown = true or false")
    return ProtectionSettings(cooldown)


def deprecate_after(value: Any, where: str) -> timedelta | None:
    """``"180d"`` (hours h, days d, weeks w) as a timedelta; "" or None: no deprecation time."""
    if value is None or value == "":
        return None
    match = _DURATION.fullmatch(value.strip() if isinstance(value, str) else "")
    if not match:
        raise SpecError(f"{where}: {value!r} is not a duration; write a whole number of hours, days or weeks "
                        'in quotes, e.g. deprecate_after = "180d"')
    after = int(match.group(1)) * _UNITS[match.group(2)]
    if not MIN_DEPRECATE_AFTER <= after <= MAX_DEPRECATE_AFTER:
        raise SpecError(f"{where}: {value!r} is out of range; EC2 takes a deprecation time at most 10 years "
                        "ahead, and amibuild asks for at least 1 day (1d to 3650d)")
    return after


def packer_duration(after: timedelta) -> str:
    """The duration as Packer's timeadd() takes it (hours: it has no day unit)."""
    return f"{int(after.total_seconds() // 3600)}h"
