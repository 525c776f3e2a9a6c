"""What trainer pods report, as series (trainer/statusserver/series.py): fed by the TrainJob cache, capped,
removed once a job finishes or goes, off with its flag."""

from __future__ import annotations

import copy

import pytest

from tests.kube_double import RecordingKube
from trainer.api.kinds import TRAINJOBS
from trainer.api.series import MAX_METRICS_PER_JOB, metric_label, series_of
from trainer.framework.json_codec import JSON
from trainer.framework.metrics import Metrics
from trainer.statusserver.series import TrainingSeries
from trainer.statusserver.server import StatusServerSettings, setup
from trainer.wiring import Settings, new_manager
from trainer.wiring.settings import parse_args

NS = "team-a"


def trainjob(name: str, progress: int | None = 40, metrics: list[JSON] | None = None, **status: object) -> JSON:
    """A TrainJob whose trainer reported ``progress``, 300 s left and ``metrics``."""
    reported: JSON = {"lastUpdatedTime": "2026-01-01T00:00:00Z", "estimatedRemainingSeconds": 300}
    if progress is not None:
        reported["progressPercentage"] = progress
    if metrics is not None:
        reported["metrics"] = metrics
    return {
        "apiVersion": TRAINJOBS.api_version,
        "kind": TRAINJOBS.kind,
        "metadata": {"namespace": NS, "name": name, "uid": f"uid-{name}"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
        "status": {"trainerStatus": reported, **status},
    }


def value(m: Metrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def exported(m: Metrics) -> int:
    """Series of the three training gauges in the exposition."""
    text = m.exposition().decode().splitlines()
    names = ("kubeflow_trainer_trainjob_progress_ratio{", "kubeflow_trainer_trainjob_remaining_seconds{")
    return sum(1 for line in text if line.startswith((*names, "kubeflow_trainer_trainjob_metric{")))


def test_a_report_becomes_gauges_by_namespace_and_trainjob() -> None:
    m = Metrics()
    s = TrainingSeries(m)
    metrics = [
        {"name": "loss", "value": "0.25"},
        {"name": "val accuracy", "value": "0.9"},
        {"name": "x", "value": "n/a"},
    ]
    s.on_trainjob(None, trainjob("a", 40, metrics))
    assert value(m, "kubeflow_trainer_trainjob_progress_ratio", namespace=NS, trainjob="a") == 0.4
    assert value(m, "kubeflow_trainer_trainjob_remaining_seconds", namespace=NS, trainjob="a") == 300
    assert value(m, "kubeflow_trainer_trainjob_metric", namespace=NS, trainjob="a", metric="loss") == 0.25
    assert value(m, "kubeflow_trainer_trainjob_metric", namespace=NS, trainjob="a", metric="val_accuracy") == 0.9
    assert exported(m) == 4 == len(s), "a value that is not a number is not a series"
    assert value(m, "kubeflow_trainer_training_series") == 4
    # The next report drops a metric and changes progress.
    s.on_trainjob(None, trainjob("a", 70, metrics[:1]))
    assert value(m, "kubeflow_trainer_trainjob_progress_ratio", namespace=NS, trainjob="a") == 0.7
    assert value(m, "kubeflow_trainer_trainjob_metric", namespace=NS, trainjob="a", metric="val_accuracy") is None
    assert exported(m) == 3 == len(s)


def test_names_are_sanitised_and_bounded_per_job() -> None:
    assert metric_label("val loss/üb{er}") == "val_loss/_b_er_"
    assert len(metric_label("m" * 200)) == 64
    many = [{"name": f"m{i}", "value": str(i)} for i in range(256)]
    got = series_of(trainjob("a", None, many))
    assert len(got) == MAX_METRICS_PER_JOB + 1, "the first 32 metrics and the remaining seconds"
    clash = [{"name": "a b", "value": "1"}, {"name": "a_b", "value": "2"}, {"name": "inf", "value": "inf"}]
    assert {k: v for k, v in series_of(trainjob("a", None, clash)).items() if k[0] == "metric"} == {
        ("metric", "a_b"): 1
    }


@pytest.mark.parametrize(
    "end", ["Complete", "Failed", "deleted", "deleting"], ids=["complete", "failed", "deleted", "being deleted"]
)
def test_a_finished_or_deleted_job_has_its_series_removed(end: str) -> None:
    m = Metrics()
    s = TrainingSeries(m)
    job = trainjob("a", 40, [{"name": "loss", "value": "1"}])
    s.on_trainjob(None, job)
    s.on_trainjob(None, trainjob("b"))
    assert exported(m) == 5
    if end == "deleted":
        s.on_trainjob(job, None)
    else:
        later = copy.deepcopy(job)
        if end == "deleting":
            later["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        else:
            later["status"]["conditions"] = [{"type": end, "status": "True", "reason": "x"}]
        s.on_trainjob(job, later)
    assert value(m, "kubeflow_trainer_trainjob_progress_ratio", namespace=NS, trainjob="a") is None
    assert value(m, "kubeflow_trainer_trainjob_metric", namespace=NS, trainjob="a", metric="loss") is None
    assert exported(m) == 2 == len(s), "only b's"


def test_past_the_cap_new_jobs_are_not_exported_and_their_series_are_counted_dropped_once() -> None:
    m = Metrics()
    s = TrainingSeries(m, max_series=5)
    s.on_trainjob(None, trainjob("a"))  # 2 series
    s.on_trainjob(None, trainjob("b"))  # 4
    for _ in range(3):  # c's reports, again and again: dropped once
        s.on_trainjob(None, trainjob("c"))
    assert value(m, "kubeflow_trainer_trainjob_progress_ratio", namespace=NS, trainjob="c") is None
    assert value(m, "kubeflow_trainer_training_series_dropped_total") == 2
    assert len(s) == exported(m) == 4
    # a finishes: room for c at its next report.
    s.on_trainjob(None, trainjob("a", conditions=[{"type": "Complete", "status": "True"}]))
    s.on_trainjob(None, trainjob("c"))
    assert value(m, "kubeflow_trainer_trainjob_progress_ratio", namespace=NS, trainjob="c") == 0.4
    assert len(s) == exported(m) == 4
    # An exported job that reports more than fits keeps what it had.
    s.on_trainjob(None, trainjob("b", 50, [{"name": "loss", "value": "1"}, {"name": "acc", "value": "2"}]))
    assert value(m, "kubeflow_trainer_trainjob_progress_ratio", namespace=NS, trainjob="b") == 0.5
    assert len(s) == exported(m) <= 5


def test_a_thousand_jobs_reporting_stay_under_the_cap() -> None:
    m = Metrics()
    s = TrainingSeries(m, max_series=2000)
    for i in range(1000):
        metrics = [{"name": f"m{k}", "value": "1"} for k in range(3)]
        s.on_trainjob(None, trainjob(f"job-{i}", i % 100, metrics))  # 5 series each
    assert len(s) == exported(m) == 2000, "400 jobs exported, whole"
    assert value(m, "kubeflow_trainer_training_series") == 2000
    assert value(m, "kubeflow_trainer_training_series_dropped_total") == 600 * 5
    for i in range(1000):  # every job reports again: nothing more dropped, nothing over the cap
        s.on_trainjob(None, trainjob(f"job-{i}", 100))
    assert len(s) == exported(m) <= 2000
    assert value(m, "kubeflow_trainer_training_series_dropped_total") == 600 * 5


@pytest.mark.parametrize("on", [True, False])
async def test_the_status_server_feeds_the_series_from_the_cache_unless_switched_off(on: bool) -> None:
    kube = RecordingKube()
    manager = new_manager(kube, Settings(status_coalesce_seconds=0))
    setup(kube, StatusServerSettings(port=0, training_metrics=on, training_metrics_max_series=10), manager)
    kube.connect(manager.informers)
    stored = kube.put(trainjob("a"))
    got = value(manager.metrics, "kubeflow_trainer_trainjob_progress_ratio", namespace=NS, trainjob="a")
    assert got == (0.4 if on else None)
    kube.objects.pop((TRAINJOBS, (NS, "a")))
    kube._feed(TRAINJOBS, None, deleted=True, key=(NS, "a"))
    assert value(manager.metrics, "kubeflow_trainer_trainjob_progress_ratio", namespace=NS, trainjob="a") is None
    assert stored["metadata"]["name"] == "a"


def test_the_flags() -> None:
    args = parse_args([])
    assert (args.training_metrics, args.training_metrics_max_series) == (True, 5000)
    args = parse_args(["--training-metrics", "false", "--training-metrics-max-series", "100"])
    assert (args.training_metrics, args.training_metrics_max_series) == (False, 100)
    settings = args.options(StatusServerSettings)
    assert (settings.training_metrics, settings.training_metrics_max_series) == (False, 100)
    with pytest.raises(SystemExit):
        parse_args(["--training-metrics-max-series", "-1"])
