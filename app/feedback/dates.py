"""Dates of a feedback request, as the backend sends them, made aware and put in Asia/Seoul.

The Spring backend serialises ``LocalDateTime``/``LocalDate`` either as ISO strings or, with
Jackson's default ``WRITE_DATES_AS_TIMESTAMPS``, as arrays::

    [2026, 5, 1]                        a LocalDate
    [2026, 5, 1, 9, 30]                 seconds left out when they are zero
    [2026, 5, 1, 9, 30, 15]
    [2026, 5, 1, 9, 30, 15, 123456789]  the last item is NANOseconds (may exceed 999,999)

A value without an offset is Korean local time (the backend's zone); one with an offset is
converted. Everything here returns aware datetimes in :data:`SEOUL`, so no comparison in the
feedback code ever mixes naive and aware values (what the system we replace got wrong).

A date without a time means the whole day: as a start it is 00:00, as an end 23:59:59.999999.

Every value must lie between 1970-01-01 and the end of 9999-12-31 in Seoul: what Python's
datetime holds in any zone, and where Seoul's offsets are whole minutes, so a job's dates come
back unchanged from JSON (Redis); Seoul's local mean time before 1908 is +08:27:52, which JSON
keeps as +08:27. Anything else, numbers too large for a date included, is a ValueError, which
pydantic reports as that field's 422, never an OverflowError's 500.
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta
from typing import Annotated
from zoneinfo import ZoneInfo

from pydantic import BeforeValidator

__all__ = ["SEOUL", "EndDateTime", "StartDateTime", "parse_moment", "week_window"]

SEOUL = ZoneInfo("Asia/Seoul")
WEEK = timedelta(days=7)
_NANOS_PER_SECOND = 1_000_000_000
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")
_EARLIEST = datetime(1970, 1, 1, tzinfo=SEOUL)
_LATEST = datetime.combine(date(9999, 12, 31), time.max, tzinfo=SEOUL)


def parse_moment(value: object, *, end_of_day: bool = False) -> datetime:
    """An ISO string or a Jackson array -> an aware datetime in Asia/Seoul.

    Raises ValueError (pydantic turns it into a validation error) for anything else."""
    try:
        moment = _parse(value, end_of_day)
    except OverflowError:  # a year or an offset past what datetime holds
        raise ValueError("date out of range") from None
    if not _EARLIEST <= moment <= _LATEST:  # one zone object: compared without conversion
        raise ValueError("date out of range (1970-01-01 .. 9999-12-31)")
    return moment


def _parse(value: object, end_of_day: bool) -> datetime:
    if isinstance(value, str):
        text = value.strip()
        if _DATE_ONLY.fullmatch(text):
            return _whole_day(date.fromisoformat(text), end_of_day)
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError("not an ISO date-time") from None
        return _in_seoul(parsed)
    if isinstance(value, list | tuple):
        return _from_array(list(value), end_of_day)
    raise ValueError("a date must be an ISO string or an array [y, m, d, h, mi, s, nanos]")


def _from_array(items: list[object], end_of_day: bool) -> datetime:
    if not 3 <= len(items) <= 7 or any(type(item) is not int for item in items):
        raise ValueError("a date array holds 3 to 7 integers [y, m, d, h, mi, s, nanos]")
    numbers: list[int] = [item for item in items if type(item) is int]
    if len(numbers) == 3:
        return _whole_day(date(*numbers), end_of_day)
    year, month, day, hour, minute, *rest = numbers
    second = rest[0] if rest else 0
    nanos = rest[1] if len(rest) > 1 else 0
    if not 0 <= nanos < _NANOS_PER_SECOND:
        raise ValueError("nanoseconds must be within 0..999,999,999")
    # Python keeps microseconds: the nanoseconds are cut to them, never an overflow.
    moment = datetime(year, month, day, hour, minute, second, nanos // 1000)
    return moment.replace(tzinfo=SEOUL)


def _whole_day(day: date, end_of_day: bool) -> datetime:
    return datetime.combine(day, time.max if end_of_day else time.min, tzinfo=SEOUL)


def _in_seoul(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        return moment.replace(tzinfo=SEOUL)
    return moment.astimezone(SEOUL)


def _start(value: object) -> datetime:
    return parse_moment(value)


def _end(value: object) -> datetime:
    return parse_moment(value, end_of_day=True)


StartDateTime = Annotated[datetime, BeforeValidator(_start)]
"""A date-time field; a bare date is the start of that day."""

EndDateTime = Annotated[datetime, BeforeValidator(_end)]
"""A date-time field; a bare date is the end of that day (an inclusive end date)."""


def week_window(now: datetime) -> tuple[datetime, datetime]:
    """The last 7 days before ``now`` (aware), in Asia/Seoul: ``(now - 7 days, now)``."""
    if now.tzinfo is None:
        raise ValueError("week_window needs an aware datetime")
    end = now.astimezone(SEOUL)
    return end - WEEK, end
