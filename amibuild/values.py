"""Numbers and durations from the command line, parsed in one place for every flag of every task.

invoke hands flag values over as text. Each numeric flag goes through `count` and each time flag
through `duration` or `age`, so `--timeout 10m` and `--older-than 10m` mean the same thing, and a
non-number, a negative or a meaningless zero is refused with one line naming the flag (exit 2),
before anything is done. Domain functions take the typed values these return.
"""

from __future__ import annotations

import math
import os
import re
from datetime import datetime, timedelta, timezone
from typing import Any

from amibuild.errors import SpecError

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([smhdw]?)\s*\Z", re.ASCII)

# The longest wait any flag may ask for: a year. Past it a number is a typo, and float seconds
# that large overflow the timers they are handed to.
MAX_SECONDS = 366 * 86400
MAX_COUNT = 1_000_000


def given(value: Any) -> bool:
    """False for a flag left out (None, or an empty string from config or the environment)."""
    return value is not None and str(value).strip() != ""


def count(value: Any, flag: str, *, minimum: int = 1, maximum: int = MAX_COUNT, example: int = 5) -> int:
    """A whole number of at least `minimum` (and at most `maximum`)."""
    text = str(value).strip()
    number = None if isinstance(value, bool) or not re.fullmatch(r"[+]?[0-9]+", text) else int(text)
    if number is None or number < minimum:
        raise SpecError(f"{flag} {value!r}: a whole number of at least {minimum}, e.g. {flag} {example}")
    if number > maximum:
        raise SpecError(f"{flag} {value!r}: at most {maximum}")
    return number


def duration(value: Any, flag: str, *, unit_required: bool = False, example: str = "90s, 10m, 2h or 3d") -> float:
    """Seconds from `90`, `90s`, `10m`, `2h`, `3d` or `2w` (a bare number is seconds unless
    `unit_required`). Zero, negatives and non-numbers are refused."""
    text = str(value)
    match = _DURATION.match(text)
    if isinstance(value, bool) or not match or (unit_required and not match.group(2)):
        what = "a number and s, m, h, d or w" if unit_required else "seconds, or a number and s, m, h, d or w"
        raise SpecError(f"{flag} {value!r}: {what}, e.g. {example}")
    seconds = float(match.group(1)) * UNITS[match.group(2) or "s"]
    if not math.isfinite(seconds) or seconds <= 0:
        raise SpecError(f"{flag} {value!r}: must be more than zero, e.g. {example}")
    if seconds > MAX_SECONDS:
        raise SpecError(f"{flag} {value!r}: at most a year ({MAX_SECONDS // 86400}d)")
    return seconds


def age(value: Any, flag: str) -> timedelta | None:
    """An age such as `30d`, `12h`, `2w` (a unit is required: `30` alone is ambiguous); None when not given."""
    if not given(value):
        return None
    return timedelta(seconds=duration(value, flag, unit_required=True, example="12h, 30d or 2w"))


def optional_count(value: Any, flag: str, **kwargs: Any) -> int | None:
    return count(value, flag, **kwargs) if given(value) else None


def optional_duration(value: Any, flag: str, **kwargs: Any) -> float | None:
    return duration(value, flag, **kwargs) if given(value) else None


NOW_ENV = "AMIBUILD_NOW"  # a what-if time for a dry run's gates (replays, "what is due on Friday")


def what_if_now(flag: str | None, *, dry_run: bool) -> datetime | None:
    """--now, else $AMIBUILD_NOW: the what-if time a dry run's gates are judged at; None (AWS's clock)
    when neither is given. A write with one is refused (exit 2) before any AWS call: a clock that runs
    ahead, or a typed date, must not skip a soak."""
    source, value = ("--now", flag) if flag else (NOW_ENV, os.environ.get(NOW_ENV, ""))
    if not value:
        return None
    if not dry_run:
        raise SpecError(f"{source} is for what-if plans only: drop it, or add --dry-run "
                        "(a write judges the soak on AWS's clock)")
    parsed = parse_iso_time(value)
    if parsed is None:
        raise SpecError(f"{source} {value!r}: an ISO 8601 time, e.g. 2026-12-04T12:00:00Z")
    return parsed


def wildcard_match(text: str, pattern: str) -> bool:
    """AWS's name wildcards: ``*`` any run of characters, ``?`` one; nothing else is special (fnmatch's
    ``[...]`` would be: AMI names may hold brackets)."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, text, re.DOTALL) is not None


def parse_iso_time(text: str) -> datetime | None:
    """An ISO 8601 time as AWS and amibuild write them (``...Z``, with or without fractions) as an aware
    datetime, UTC where it names no zone; None for "" or text that is not one."""
    try:
        moment = datetime.fromisoformat((text or "").strip())
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
