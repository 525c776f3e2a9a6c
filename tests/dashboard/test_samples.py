"""The metrics the dashboard samples while a job's page is viewed: bounded per job, in jobs and in
metrics; only viewed jobs, only while viewed recently, nothing once the job finished."""

from __future__ import annotations

from typing import Any

import pytest

from trainer.dashboard.samples import MAX_METRICS, Samples
from trainer.framework.json_codec import JSON


def reporting(metrics: dict[str, Any], **status: Any) -> JSON:
    """A TrainJob that reports ``metrics``."""
    reported = [{"name": k, "value": str(v)} for k, v in metrics.items()]
    return {"metadata": {"name": "a"}, "status": {"trainerStatus": {"metrics": reported}, **status}}


def key(name: str) -> tuple[str, str, str]:
    return ("TrainJob", "team-a", name)


def test_points_per_job_are_capped_the_oldest_going_first() -> None:
    s = Samples(points=10, jobs=3)
    s.viewed(key("a"), 0)
    for t in range(25):
        assert s.add(key("a"), t, reporting({"loss": 1 / (t + 1), "accuracy": t / 25, "note": "warming"})) == 2
    curves = s.curves(key("a"))
    assert sorted(curves) == ["accuracy", "loss"], "a value that is no number is left out"
    assert [t for t, _ in curves["loss"]] == list(range(15, 25))


def test_jobs_are_capped_the_least_recently_viewed_going_first() -> None:
    s = Samples(points=5, jobs=2)
    s.viewed(key("a"), 0)
    s.viewed(key("b"), 1)
    s.viewed(key("a"), 2)  # a is viewed again: b is now the oldest
    s.add(key("b"), 2, reporting({"loss": 1}))
    s.viewed(key("c"), 3)
    assert len(s) == 2
    assert s.curves(key("b")) == {}
    assert s.watched(3) == [key("a"), key("c")]


def test_only_viewed_jobs_are_sampled_and_only_while_viewed_recently() -> None:
    s = Samples(viewed_for=60)
    assert s.add(key("a"), 0, reporting({"loss": 1})) == 0
    assert s.curves(key("a")) == {}
    s.viewed(key("a"), 100)
    assert s.watched(160) == [key("a")]
    assert s.watched(161) == []


def test_metrics_per_job_are_capped_and_a_finished_job_adds_none() -> None:
    s = Samples()
    s.viewed(key("a"), 0)
    assert s.add(key("a"), 0, reporting({f"m{i}": i for i in range(MAX_METRICS + 5)})) == MAX_METRICS
    assert len(s.curves(key("a"))) == MAX_METRICS
    done = reporting({"m0": 1}, conditions=[{"type": "Complete", "status": "True"}])
    assert s.add(key("a"), 1, done) == 0


def test_a_job_is_sampled_at_most_once_in_the_gap() -> None:
    s = Samples(gap=0.5)
    s.viewed(key("a"), 0)
    added = [s.add(key("a"), t / 10, reporting({"loss": 1})) for t in range(20)]
    assert added == [1, 0, 0, 0, 0] * 4
    assert len(s.curves(key("a"))["loss"]) == 4


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError):
        Samples(points=0)
    with pytest.raises(ValueError):
        Samples(jobs=0)
