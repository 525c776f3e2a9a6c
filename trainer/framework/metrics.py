"""Prometheus metrics with the names and labels controller-runtime and client-go give theirs, so the
dashboards and alerts written for Go operators chart this one unchanged.

Followed upstream (names, labels, buckets, and when each is updated):

* controller-runtime ``pkg/internal/controller/metrics/metrics.go``:
  ``controller_runtime_reconcile_total{controller,result}`` (result ``success``, ``error``,
  ``requeue``, ``requeue_after``), ``controller_runtime_reconcile_errors_total{controller}``,
  ``controller_runtime_terminal_reconcile_errors_total{controller}``,
  ``controller_runtime_reconcile_time_seconds{controller}``,
  ``controller_runtime_max_concurrent_reconciles{controller}``,
  ``controller_runtime_active_workers{controller}``;
* controller-runtime ``pkg/metrics/workqueue.go`` with client-go ``util/workqueue/metrics.go``:
  ``workqueue_depth``, ``workqueue_adds_total``, ``workqueue_queue_duration_seconds``,
  ``workqueue_work_duration_seconds``, ``workqueue_retries_total``, all by ``{name}``;
* controller-runtime ``pkg/metrics/client_go_adapter.go``: ``rest_client_requests_total{code,method,host}``;
* client-go ``tools/leaderelection/metrics.go``: ``leader_election_master_status{name}``;
* controller-runtime ``pkg/webhook/internal/metrics/metrics.go``:
  ``controller_runtime_webhook_requests_total{webhook,code}``,
  ``controller_runtime_webhook_latency_seconds{webhook,code}`` (its default buckets),
  ``controller_runtime_webhook_requests_in_flight{webhook}``; ``webhook`` is the path, ``code`` the
  HTTP status of the answer (an AdmissionReview refused, even for an internal error, is a 200).

Besides: ``trainer_apiserver_requests_total{verb,resource,code}``, the same requests by the labels the
apiserver's ``apiserver_request_total`` uses (``APPLY``, ``POST``, ``PATCH`` ... and ``jobs``,
``trainjobs/status``, ``events`` ...), so writes per object kind are read from the operator itself;
and ``kubeflow_trainer_events_dropped_total``, the Events never written because the recorder's queue was
full or the shutdown's flush ran out of time (:mod:`trainer.framework.kube.events`; client-go drops them
the same way and counts nothing).

The process's own (``process_resident_memory_bytes``, ``process_cpu_seconds_total``, open file
descriptors), as controller-runtime exports them; its garbage collector's (``python_gc_collections_total``
and the rest of ``prometheus_client``'s ``GCCollector``, and ``trainer_gc_seconds_total{generation}``,
the seconds its collections took: :mod:`trainer.framework.gc_time`). Everything lives in the :class:`Metrics` object's
own ``CollectorRegistry`` (never the process-wide default one), so two operators in one process, or a
test, never share counters; the layers above register their own families in it, once each
(:meth:`Metrics.families`). Counters carry no ``_created`` series (``disable_created_metrics``), as
the Go client exports none.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Hashable
from typing import TypeVar, cast

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)

from trainer.framework.gc_time import GCTimeCollector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The ``Content-Type`` of :meth:`Metrics.exposition`: Prometheus text format 0.0.4, which every
Prometheus reads (the metric names are all legacy-valid, so the text is the same in format 1.0.0)."""

RECONCILE_BUCKETS = (
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
    *(1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60),
)
"""controller-runtime's ``reconcile_time_seconds`` buckets."""
QUEUE_BUCKETS = tuple(1e-8 * 10**i for i in range(12))
"""client-go's workqueue latency buckets: ``prometheus.ExponentialBuckets(10e-9, 10, 12)``."""

OTHER = "other"
"""The label value of a reason outside the fixed set a metric names (:func:`bounded`)."""

F = TypeVar("F")


def bounded(value: str, known: Collection[str]) -> str:
    """``value`` when it is one of ``known``, else :data:`OTHER`: a label value from a fixed set (so a
    label has a bounded number of values whatever the objects hold)."""
    return value if value in known else OTHER


RESULT_SUCCESS, RESULT_ERROR, RESULT_REQUEUE, RESULT_REQUEUE_AFTER = "success", "error", "requeue", "requeue_after"


class Metrics:
    """Every metric of the operator, registered in ``registry`` (a new one by default): the generic
    families here, and those the layers above register through :meth:`families`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry if registry is not None else CollectorRegistry()
        self._families: dict[Callable[[CollectorRegistry], object], object] = {}
        # process_resident_memory_bytes, process_cpu_seconds_total, open fds...: what controller-runtime
        # exports too (its process collector), and what sizing the memory limit reads.
        ProcessCollector(registry=self.registry)
        # python_gc_collections_total and the rest, and the seconds the collections took (gc_time).
        GCCollector(registry=self.registry)
        GCTimeCollector(self.registry)
        self._controller_families(self.registry)
        self._workqueue_families(self.registry)
        self._client_families(self.registry)
        self._webhook_families(self.registry)
        self.leader = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master",
            ["name"],
            registry=self.registry,
        )

    def _controller_families(self, r: CollectorRegistry) -> None:
        """controller-runtime's reconcile families, by ``controller``."""
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            ["controller"],
            registry=r,
        )
        self.terminal_errors = Counter(
            "controller_runtime_terminal_reconcile_errors_total",
            "Total number of terminal reconciliation errors per controller",
            ["controller"],
            registry=r,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"],
            buckets=RECONCILE_BUCKETS,
            registry=r,
        )
        self.max_concurrent = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            ["controller"],
            registry=r,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            ["controller"],
            registry=r,
        )

    def _workqueue_families(self, r: CollectorRegistry) -> None:
        """client-go's work queue families, by ``name``."""
        self.queue_depth = Gauge("workqueue_depth", "Current depth of workqueue", ["name"], registry=r)
        self.queue_adds = Counter(
            "workqueue_adds_total", "Total number of adds handled by workqueue", ["name"], registry=r
        )
        self.queue_duration = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            ["name"],
            buckets=QUEUE_BUCKETS,
            registry=r,
        )
        self.work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            ["name"],
            buckets=QUEUE_BUCKETS,
            registry=r,
        )
        self.queue_retries = Counter(
            "workqueue_retries_total", "Total number of retries handled by workqueue", ["name"], registry=r
        )

    def _client_families(self, r: CollectorRegistry) -> None:
        """The apiserver requests: client-go's by method and host, and the apiserver's labels."""
        self.rest_requests = Counter(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host",
            ["code", "method", "host"],
            registry=r,
        )
        self.api_requests = Counter(
            "trainer_apiserver_requests_total",
            "Requests this operator sent to the apiserver, by verb and resource (as apiserver_request_total)",
            ["verb", "resource", "code"],
            registry=r,
        )
        self.events_dropped = Counter(
            "kubeflow_trainer_events_dropped_total",
            "Events never written: the recorder's queue was full, or its flush at shutdown ran out of time",
            registry=r,
        )

    def _webhook_families(self, r: CollectorRegistry) -> None:
        """controller-runtime's admission webhook families, by ``webhook`` (the path)."""
        hooks = ["webhook", "code"]
        self.webhook_requests = Counter(
            "controller_runtime_webhook_requests_total",
            "Total number of admission requests by HTTP status code.",
            hooks,
            registry=r,
        )
        self.webhook_latency = Histogram(
            "controller_runtime_webhook_latency_seconds",
            "Histogram of the latency of processing admission requests",
            hooks,
            registry=r,
        )
        self.webhook_in_flight = Gauge(
            "controller_runtime_webhook_requests_in_flight",
            "Current number of admission requests being served.",
            ["webhook"],
            registry=r,
        )

    def families(self, build: Callable[[CollectorRegistry], F]) -> F:
        """The families ``build`` registers in this registry (a layer's own: its class, given the
        registry), built at the first call with ``build`` and the same object at every later one, so
        each is registered once however many controllers ask. Raises what ``build`` raises
        (``ValueError`` for a name another collector of the registry has)."""
        if build not in self._families:
            self._families[build] = build(self.registry)
        return cast("F", self._families[build])

    def controller(self, name: str, max_concurrent: int) -> None:
        """Declare controller ``name`` (its series exist, at zero, before its first reconcile)."""
        self.max_concurrent.labels(name).set(max_concurrent)
        self.active_workers.labels(name).set(0)
        self.reconcile_errors.labels(name)
        self.terminal_errors.labels(name)
        self.reconcile_time.labels(name)
        for result in (RESULT_SUCCESS, RESULT_ERROR, RESULT_REQUEUE, RESULT_REQUEUE_AFTER):
            self.reconcile_total.labels(name, result)

    def reconciled(self, controller: str, result: str, seconds: float, terminal: bool = False) -> None:
        """One reconcile of ``controller`` ended with ``result`` after ``seconds``; ``terminal``: with
        an error no retry can fix (counted in both error counters, as controller-runtime does)."""
        self.reconcile_total.labels(controller, result).inc()
        if result == RESULT_ERROR:
            self.reconcile_errors.labels(controller).inc()
        if terminal:
            self.terminal_errors.labels(controller).inc()
        self.reconcile_time.labels(controller).observe(seconds)

    def observe_request(self, method: str, code: str, host: str, verb: str, resource: str) -> None:
        """A :data:`trainer.framework.kube.client.RequestObserver`: count one apiserver request, by method and host
        (client-go's series) and by verb and resource (what the operator writes, per object kind)."""
        self.rest_requests.labels(code, method, host).inc()
        self.api_requests.labels(verb, resource, code).inc()

    def webhook(self, path: str) -> None:
        """Declare the admission webhook served on ``path`` (its in-flight gauge exists, at zero)."""
        self.webhook_in_flight.labels(path).set(0)

    def webhook_started(self, path: str) -> None:
        """An admission request on ``path`` is being served (until :meth:`webhook_answered`)."""
        self.webhook_in_flight.labels(path).inc()

    def webhook_answered(self, path: str, code: int, seconds: float) -> None:
        """The admission request on ``path`` was answered with HTTP status ``code`` after ``seconds``."""
        self.webhook_in_flight.labels(path).dec()
        self.webhook_requests.labels(path, str(code)).inc()
        self.webhook_latency.labels(path, str(code)).observe(seconds)

    def leading(self, name: str, leading: bool) -> None:
        """Whether this process holds lease ``name``."""
        self.leader.labels(name).set(1 if leading else 0)

    def workqueue(self, name: str) -> WorkQueueMetrics:
        """The :class:`trainer.framework.kube.queue.QueueMetrics` of the work queue ``name``."""
        return WorkQueueMetrics(self, name)

    def exposition(self) -> bytes:
        """Every metric in the Prometheus text format (:data:`CONTENT_TYPE`)."""
        return generate_latest(self.registry)


class WorkQueueMetrics:
    """One work queue's metrics, updated as client-go's ``defaultQueueMetrics`` does: ``add`` counts
    and deepens, ``get`` shallows and observes the time since the first ``add``, ``done`` observes
    the time since ``get``."""

    def __init__(self, metrics: Metrics, name: str) -> None:
        self.depth = metrics.queue_depth.labels(name)
        self.adds = metrics.queue_adds.labels(name)
        self.latency = metrics.queue_duration.labels(name)
        self.work = metrics.work_duration.labels(name)
        self.retries = metrics.queue_retries.labels(name)
        self.depth.set(0)
        self._added: dict[Hashable, float] = {}
        self._started: dict[Hashable, float] = {}

    def add(self, key: Hashable) -> None:
        """See :class:`trainer.framework.kube.queue.QueueMetrics`."""
        self.adds.inc()
        self.depth.inc()
        self._added.setdefault(key, time.monotonic())

    def get(self, key: Hashable) -> None:
        """See :class:`trainer.framework.kube.queue.QueueMetrics`."""
        now = time.monotonic()
        self.depth.dec()
        self._started[key] = now
        added = self._added.pop(key, None)
        if added is not None:
            self.latency.observe(now - added)

    def done(self, key: Hashable) -> None:
        """See :class:`trainer.framework.kube.queue.QueueMetrics`."""
        started = self._started.pop(key, None)
        if started is not None:
            self.work.observe(time.monotonic() - started)

    def retry(self) -> None:
        """See :class:`trainer.framework.kube.queue.QueueMetrics`."""
        self.retries.inc()
