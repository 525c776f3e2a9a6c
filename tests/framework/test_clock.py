"""The one RFC 3339 parser and the formatters (trainer/framework/clock.py): what Kubernetes writes reads
back, anything else is None."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from trainer.framework.clock import EARLIEST, format_micro_time, format_time, now_micro, now_rfc3339, parse_time

WALL = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def test_what_kubernetes_writes_reads_back_in_utc() -> None:
    assert format_time(WALL) == "2025-01-02T03:04:05Z"
    assert format_micro_time(WALL) == "2025-01-02T03:04:05.678901Z"
    assert parse_time(format_time(WALL)) == WALL.replace(microsecond=0)
    assert parse_time(format_micro_time(WALL)) == WALL
    assert parse_time("2025-01-02T04:04:05.678901+01:00") == WALL
    assert parse_time("2025-01-02t03:04:05.678901123z") == WALL  # nanoseconds (Go's RFC3339Nano) read to µs
    assert parse_time("2025-01-02 03:04:05Z") == WALL.replace(microsecond=0)
    assert format_time(WALL.astimezone(timezone(timedelta(hours=-5)))) == "2025-01-02T03:04:05Z"
    when = parse_time(now_rfc3339())
    assert when is not None and when.tzinfo is UTC
    assert parse_time(now_micro()) is not None


@pytest.mark.parametrize(
    "value",
    [None, "", "garbage", 7, "2025-01-02", "2025-01-02T03:04:05", "2025-13-02T03:04:05Z", "20250102T030405Z"],
)
def test_anything_else_is_none(value: object) -> None:
    assert parse_time(value) is None
    assert (parse_time(value) or EARLIEST) < datetime(1, 1, 2, tzinfo=UTC)  # sorted first


def test_a_deadline_since_a_time_that_is_not_rfc3339_fails_the_reconcile() -> None:
    from trainer.jobs.facts import seconds_left

    assert seconds_left(10, format_time(WALL), WALL) == pytest.approx(10 - 0.678901)
    assert seconds_left(10, None, WALL) is None and seconds_left(None, format_time(WALL), WALL) is None
    with pytest.raises(ValueError, match="not an RFC 3339 time"):
        seconds_left(10, "garbage", WALL)
