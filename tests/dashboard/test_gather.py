"""The pure parts of what the dashboard asks Prometheus: the PromQL of a job's metrics (label values
quoted and escaped) and the time range of its curves (creation to completion, bounded points)."""

from __future__ import annotations

from datetime import UTC, datetime

from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.dashboard.gather import CURVE_POINTS, curve_range, kind_of, metric_query, promql_string

NOW = datetime(2026, 1, 1, 1, 0, 0, tzinfo=UTC)


def job(**status: str) -> TrainJob:
    return TrainJob.model_validate(
        {
            "metadata": {"name": "a", "namespace": "team-a", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"runtimeRef": {"name": "rt"}},
            "status": status,
        }
    )


def test_the_query_names_the_job_with_its_label_values_escaped() -> None:
    assert metric_query("team-a", "digits-x") == (
        'max by (metric) (kubeflow_trainer_trainjob_metric{namespace="team-a",trainjob="digits-x"})'
    )
    assert promql_string('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'


def test_the_range_runs_from_creation_to_completion_in_bounded_steps() -> None:
    start, end, step = curve_range(job(), NOW)
    assert (start, end) == (datetime(2026, 1, 1, tzinfo=UTC).timestamp(), NOW.timestamp())
    assert step == 15 and (end - start) / step <= CURVE_POINTS
    start, end, step = curve_range(job(completionTime="2026-01-01T00:01:00Z"), NOW)
    assert (end - start, step) == (60, 1)


def test_only_the_job_kinds_are_known() -> None:
    assert kind_of("trainjobs") is not None and kind_of("mpijobs") is not None
    assert kind_of("pods") is None
