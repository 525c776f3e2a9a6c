"""Wall-clock times as Kubernetes writes and reads them: RFC 3339 in UTC, to the second
(``metav1.Time``: ``2006-01-02T15:04:05Z``) or to the microsecond (``metav1.MicroTime``:
``2006-01-02T15:04:05.000000Z``).

One parser, :func:`parse_time`, with one contract: an aware datetime in UTC for an RFC 3339 time, None
for anything else (None, not a string, empty, no time zone offset, not a date). It never raises; a
caller that must refuse a bad time, or sort one first (:data:`EARLIEST`), says so itself.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

EARLIEST = datetime.min.replace(tzinfo=UTC)
"""The earliest aware datetime: where a caller puts a time that :func:`parse_time` could not read when
it sorts or compares (``parse_time(value) or EARLIEST``)."""

_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 time (``2006-01-02T15:04:05Z``; fractional seconds of any length, read to the
    microsecond; ``Z`` or a ``+hh:mm``/``-hh:mm`` offset; ``T``, ``t`` or a space between date and time)
    as an aware datetime in UTC. None for None, a non-string, an empty string, a time without an offset
    or anything else that is not such a time (e.g. a 13th month). Never raises."""
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        return None
    text = value[:-1] + "+00:00" if value[-1] in "Zz" else value
    try:
        return datetime.fromisoformat(text).astimezone(UTC)
    except ValueError:  # the shape is right, a field is out of range
        return None


def format_time(at: datetime) -> str:
    """``at`` as a ``metav1.Time``: RFC 3339 in UTC to the second (``2006-01-02T15:04:05Z``; fractions are
    cut). A naive ``at`` is taken as local time (``datetime.astimezone``)."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(at: datetime) -> str:
    """``at`` as a ``metav1.MicroTime``: RFC 3339 in UTC with six fractional digits
    (``2006-01-02T15:04:05.000000Z``). A naive ``at`` is taken as local time."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_rfc3339() -> str:
    """The current time as :func:`format_time` writes it (seconds, UTC, ``Z``)."""
    return format_time(datetime.now(UTC))


def now_micro() -> str:
    """The current time as :func:`format_micro_time` writes it (microseconds, UTC, ``Z``)."""
    return format_micro_time(datetime.now(UTC))
