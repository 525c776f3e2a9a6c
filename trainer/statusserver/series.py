"""What trainer pods report, as Prometheus series: each running TrainJob's ``status.trainerStatus``
(KEP-2779: ``progressPercentage``, ``estimatedRemainingSeconds``, ``metrics``) as gauges labelled by
``namespace`` and ``trainjob``, bounded.

Fed by the TrainJob cache (:meth:`TrainingSeries.on_trainjob`, an informer handler), not by the posts:
what is exported is what is stored, whichever replica's status server wrote it, and a restarted
operator exports again from its first list. Series, from :func:`trainer.api.series.series_of`:

* ``kubeflow_trainer_trainjob_progress_ratio``: ``progressPercentage`` / 100;
* ``kubeflow_trainer_trainjob_remaining_seconds``: ``estimatedRemainingSeconds``;
* ``kubeflow_trainer_trainjob_metric{metric}``: each metric whose value reads as a finite number, its
  name sanitised (:func:`trainer.api.series.metric_label`), the first
  :data:`trainer.api.series.MAX_METRICS_PER_JOB` of them.

Bounds: at most ``max_series`` series at once (``--training-metrics-max-series``); a job whose series
would pass the cap is not exported and ``kubeflow_trainer_training_series_dropped_total`` grows by its
series, once per job, until room is made (it is exported at its next report that fits). A finished or
deleted job's series are removed on the cache event that shows it, so they are gone by the next scrape.
``kubeflow_trainer_training_series`` is the number exported now. The five families
(:class:`SeriesMetrics`) are registered once per registry
(:meth:`~trainer.framework.metrics.Metrics.families`), with the kubeflow/trainer#3429 prefix.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from trainer.api.series import METRIC, PROGRESS, REMAINING, Series, series_of
from trainer.framework.bounded import BoundedDict
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import Key, key_of
from trainer.framework.metrics import Metrics

DEFAULT_MAX_SERIES = 5000
"""``--training-metrics-max-series`` unless set: about 700 jobs with progress, ETA and five metrics."""
MAX_REFUSED = 100_000
"""Jobs remembered as refused (their drop counted) at most; the oldest go first."""


class SeriesMetrics:
    """The families of the trainer pods' reports in ``registry``; one per registry: take it with
    :meth:`of`. Raises ``ValueError`` when ``registry`` has them already."""

    def __init__(self, registry: CollectorRegistry) -> None:
        series = ["namespace", "trainjob"]
        self.progress = Gauge(
            "kubeflow_trainer_trainjob_progress_ratio",
            "Training progress of a running TrainJob as its trainer last reported it, 0 to 1",
            series,
            registry=registry,
        )
        self.remaining = Gauge(
            "kubeflow_trainer_trainjob_remaining_seconds",
            "Seconds of training left of a running TrainJob as its trainer last estimated",
            series,
            registry=registry,
        )
        self.training_metric = Gauge(
            "kubeflow_trainer_trainjob_metric",
            "A numeric metric a running TrainJob's trainer reported (trainerStatus.metrics), by name",
            [*series, "metric"],
            registry=registry,
        )
        self.training_series = Gauge(
            "kubeflow_trainer_training_series", "Series of the trainer pods' reports exported now", registry=registry
        )
        self.training_dropped = Counter(
            "kubeflow_trainer_training_series_dropped_total",
            "Series of the trainer pods' reports not exported: over --training-metrics-max-series",
            registry=registry,
        )

    @staticmethod
    def of(metrics: Metrics) -> SeriesMetrics:
        """The training series' families of ``metrics``' registry, registered at the first call."""
        return metrics.families(SeriesMetrics)


class TrainingSeries:
    """The exported series of every TrainJob (see the module docstring), at most ``max_series``."""

    def __init__(self, metrics: Metrics, max_series: int = DEFAULT_MAX_SERIES) -> None:
        self.metrics, self.max_series = SeriesMetrics.of(metrics), max_series
        self._jobs: dict[Key, Series] = {}
        """Exported now, per job."""
        self._count = 0
        self._refused: BoundedDict[Key, None] = BoundedDict(MAX_REFUSED)
        """Jobs not exported for the cap whose drop was counted."""

    def __len__(self) -> int:
        """Series exported now."""
        return self._count

    def on_trainjob(self, old: JSON | None, new: JSON | None) -> None:
        """Informer handler of the TrainJob cache: export, change or remove the job's series."""
        if new is None:
            if old is not None:
                self._set(key_of(old), {})
            return
        self._set(key_of(new), series_of(new))

    def _set(self, key: Key, wanted: Series) -> None:
        have = self._jobs.get(key)
        if have is None and not wanted:
            self._refused.pop(key, None)
            return
        if have is None and self._count + len(wanted) > self.max_series:
            if key not in self._refused:
                self._refused[key] = None
                self.metrics.training_dropped.inc(len(wanted))
            return
        self._refused.pop(key, None)
        have = have or {}
        ns, name = key
        for series in have.keys() - wanted.keys():
            self._gauge(series).remove(ns, name, *_extra(series))
        grown = len(wanted) - len(have)
        if grown > 0 and self._count + grown > self.max_series:
            # An exported job reporting more: keep its series as they were, the new ones dropped.
            wanted = {s: v for s, v in wanted.items() if s in have}
        for series, value in wanted.items():
            self._gauge(series).labels(ns, name, *_extra(series)).set(value)
        self._count += len(wanted) - len(have)
        if wanted:
            self._jobs[key] = wanted
        else:
            self._jobs.pop(key, None)
        self.metrics.training_series.set(self._count)

    def _gauge(self, series: tuple[str, str]) -> Gauge:
        m = self.metrics
        return {PROGRESS: m.progress, REMAINING: m.remaining, METRIC: m.training_metric}[series[0]]


def _extra(series: tuple[str, str]) -> tuple[str, ...]:
    """The labels of ``series`` besides namespace and trainjob: the metric's name, for a metric."""
    return (series[1],) if series[0] == METRIC else ()
