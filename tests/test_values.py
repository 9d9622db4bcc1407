"""Numbers and durations from the command line: one parser (amibuild.values) for every flag."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from amibuild import values
from amibuild.errors import SpecError


@pytest.mark.parametrize("text,seconds", [("90", 90), ("90s", 90), ("10m", 600), ("2h", 7200), ("3d", 259200),
                                          ("2w", 1209600), (" 1.5h ", 5400), (45, 45)])
def test_durations_read_seconds_minutes_hours_days_and_weeks(text, seconds: float) -> None:
    assert values.duration(text, "--timeout") == seconds


@pytest.mark.parametrize("text", ["abc", "-5", "0", "0s", "10x", "1e9", "", "10 m s", "400d", True])
def test_durations_refuse_words_negatives_zeros_and_absurd_lengths(text) -> None:
    with pytest.raises(SpecError, match=r"^--timeout ") as caught:
        values.duration(text, "--timeout")
    assert caught.value.exit_code == 2


def test_an_age_needs_a_unit_and_none_means_no_limit() -> None:
    assert values.age("10m", "--older-than") == timedelta(minutes=10)
    assert values.age(None, "--older-than") is None
    with pytest.raises(SpecError, match="--older-than '30'"):
        values.age("30", "--older-than")


@pytest.mark.parametrize("text,minimum,expected", [("5", 1, 5), (5, 1, 5), ("+3", 1, 3), ("0", 0, 0)])
def test_counts_are_whole_numbers_from_their_minimum(text, minimum: int, expected: int) -> None:
    assert values.count(text, "--keep", minimum=minimum) == expected


@pytest.mark.parametrize("text,minimum", [("abc", 1), ("1.5", 1), ("-1", 0), ("0", 1), ("", 1), (True, 0),
                                          ("99999999", 1)])
def test_counts_refuse_everything_else_naming_the_flag(text, minimum: int) -> None:
    with pytest.raises(SpecError, match=r"^--keep "):
        values.count(text, "--keep", minimum=minimum)


def test_optional_flags_left_out_are_none() -> None:
    assert values.optional_count(None, "--parallel") is None
    assert values.optional_duration("", "--timeout") is None


@pytest.mark.parametrize("text,expected", [
    ("2025-01-01T00:00:00.000Z", datetime(2025, 1, 1, tzinfo=timezone.utc)),  # DescribeImages' DeprecationTime
    ("2026-12-04T12:30:00Z", datetime(2026, 12, 4, 12, 30, tzinfo=timezone.utc)),
    ("2026-12-04T12:30:00+02:00", datetime(2026, 12, 4, 10, 30, tzinfo=timezone.utc)),
    ("2026-12-04T12:30:00", datetime(2026, 12, 4, 12, 30, tzinfo=timezone.utc)),  # no zone: UTC
    (" 2026-12-04T12:30:00Z\n", datetime(2026, 12, 4, 12, 30, tzinfo=timezone.utc)),
])
def test_aws_times_are_aware_datetimes(text: str, expected: datetime) -> None:
    moment = values.parse_iso_time(text)
    assert moment == expected and moment.tzinfo is not None


@pytest.mark.parametrize("text", ["", "yesterday", "2026-13-01T00:00:00Z"])
def test_unreadable_aws_times_are_none(text: str) -> None:
    assert values.parse_iso_time(text) is None
