"""Leader election decisions, given a Lease and the clock (the pure part of trainer.kube.leader)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from trainer.kube.leader import (
    LEASE_DURATION,
    RENEW_DEADLINE,
    RETRY_PERIOD,
    LeaderElector,
    Observation,
    default_identity,
    default_namespace,
    micro_time,
    next_spec,
    observe,
    released_spec,
)

WALL = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
STAMP = "2025-01-02T03:04:05.678901Z"


def held(holder: str, duration: int = 15, transitions: int = 3, acquired: str = "2025-01-01T00:00:00.000000Z") -> dict:  # type: ignore[type-arg]
    return {
        "holderIdentity": holder,
        "leaseDurationSeconds": duration,
        "acquireTime": acquired,
        "renewTime": "2025-01-01T00:00:10.000000Z",
        "leaseTransitions": transitions,
    }


def test_defaults_are_controller_runtimes() -> None:
    assert (LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD) == (15.0, 10.0, 2.0)


def test_micro_time_is_rfc3339_with_microseconds_in_utc() -> None:
    assert micro_time(WALL) == STAMP


def test_no_lease_creates_one_held_by_me() -> None:
    assert next_spec(None, "me", 100.0, WALL, 15) == {
        "holderIdentity": "me",
        "leaseDurationSeconds": 15,
        "acquireTime": STAMP,
        "renewTime": STAMP,
        "leaseTransitions": 0,
    }


def test_a_lease_validly_held_by_another_is_left_alone() -> None:
    seen = observe(None, held("other"), now=100.0)
    assert next_spec(seen, "me", 100.0, WALL, 15) is None
    assert next_spec(seen, "me", 114.9, WALL, 15) is None


def test_expiry_counts_from_when_the_contents_were_first_seen_not_from_renewTime() -> None:
    # renewTime is another machine's clock: only our own observation time counts.
    first = observe(None, held("other"), now=100.0)
    again = observe(first, held("other"), now=110.0)  # unchanged: still observed at 100
    assert again.at == 100.0
    spec = next_spec(again, "me", 115.0, WALL, 15)
    assert spec is not None
    assert spec["holderIdentity"] == "me"
    assert spec["acquireTime"] == STAMP
    assert spec["leaseTransitions"] == 4


def test_a_renewal_by_the_holder_restarts_the_expiry() -> None:
    first = observe(None, held("other"), now=100.0)
    renewed = {**held("other"), "renewTime": "2025-01-01T00:00:12.000000Z"}
    later = observe(first, renewed, now=112.0)
    assert later.at == 112.0
    assert next_spec(later, "me", 120.0, WALL, 15) is None
    assert next_spec(later, "me", 127.0, WALL, 15) is not None


def test_a_released_lease_is_taken_at_once() -> None:
    released = released_spec(Observation(held("other", transitions=5), 0.0), WALL)
    assert released == {
        "holderIdentity": "",
        "leaseDurationSeconds": 1,
        "acquireTime": STAMP,
        "renewTime": STAMP,
        "leaseTransitions": 5,
    }
    spec = next_spec(observe(None, released, now=50.0), "me", 50.0, WALL, 15)
    assert spec is not None
    assert (spec["holderIdentity"], spec["leaseTransitions"], spec["leaseDurationSeconds"]) == ("me", 6, 15)


def test_the_holder_renews_keeping_acquire_time_and_transitions() -> None:
    mine = observe(None, held("me", transitions=7), now=10.0)
    spec = next_spec(mine, "me", 500.0, WALL, 15)  # even if our own record looks expired
    assert spec == {
        "holderIdentity": "me",
        "leaseDurationSeconds": 15,
        "acquireTime": "2025-01-01T00:00:00.000000Z",
        "renewTime": STAMP,
        "leaseTransitions": 7,
    }


def test_a_missing_duration_means_expired() -> None:
    seen = observe(None, {"holderIdentity": "other"}, now=1.0)
    assert seen.expired(1.0)
    assert next_spec(seen, "me", 1.0, WALL, 15) is not None


def test_timings_must_nest() -> None:
    with pytest.raises(ValueError, match="retry period < renew deadline < lease duration"):
        LeaderElector(None, "ns", "l", lease_duration=10, renew_deadline=10)  # type: ignore[arg-type]


def test_default_namespace_reads_the_service_account_mount(tmp_path: Path) -> None:
    f = tmp_path / "namespace"
    f.write_text("trainer-system\n")
    assert default_namespace(f) == "trainer-system"
    assert default_namespace(tmp_path / "missing") == "default"


def test_identities_are_unique_per_process() -> None:
    assert default_identity() != default_identity()
