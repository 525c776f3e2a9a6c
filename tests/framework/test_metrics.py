"""Metrics names and updates, and the probe and metrics servers on loopback."""

from __future__ import annotations

import gc

import aiohttp
import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from trainer.framework.kube.client import request_kind
from trainer.framework.kube.queue import WorkQueue
from trainer.framework.metrics import OTHER, Metrics, bounded
from trainer.framework.probes import metrics_app, parse_bind_address, probes_app, serve
from trainer.jobs.features.lifecycle import JobMetrics
from trainer.main import operator_metrics
from trainer.statusserver.series import SeriesMetrics

GENERIC = {
    **{f"process_{name}_bytes": "gauge" for name in ("virtual_memory", "resident_memory")},
    "process_start_time_seconds": "gauge",
    "process_cpu_seconds": "counter",
    "process_open_fds": "gauge",
    "process_max_fds": "gauge",
    "python_gc_objects_collected": "counter",
    "python_gc_objects_uncollectable": "counter",
    "python_gc_collections": "counter",
    "trainer_gc_seconds": "counter",
    "controller_runtime_reconcile": "counter",
    "controller_runtime_reconcile_errors": "counter",
    "controller_runtime_terminal_reconcile_errors": "counter",
    "controller_runtime_reconcile_time_seconds": "histogram",
    "controller_runtime_max_concurrent_reconciles": "gauge",
    "controller_runtime_active_workers": "gauge",
    "workqueue_depth": "gauge",
    "workqueue_adds": "counter",
    "workqueue_queue_duration_seconds": "histogram",
    "workqueue_work_duration_seconds": "histogram",
    "workqueue_retries": "counter",
    "rest_client_requests": "counter",
    "trainer_apiserver_requests": "counter",
    "kubeflow_trainer_events_dropped": "counter",
    "leader_election_master_status": "gauge",
    "controller_runtime_webhook_requests": "counter",
    "controller_runtime_webhook_latency_seconds": "histogram",
    "controller_runtime_webhook_requests_in_flight": "gauge",
}
"""The families of the framework's registry alone: no job's."""
JOBS = {
    "trainer_jobs_created": "counter",
    "trainer_jobs_succeeded": "counter",
    "trainer_jobs_failed": "counter",
    "trainer_jobs_restarted": "counter",
    "kubeflow_trainer_jobs": "gauge",
    "kubeflow_trainer_job_admission_wait_seconds": "histogram",
    "kubeflow_trainer_job_startup_seconds": "histogram",
    "kubeflow_trainer_job_run_seconds": "histogram",
    "kubeflow_trainer_job_restarts": "counter",
    "kubeflow_trainer_job_failures": "counter",
    "kubeflow_trainer_job_refusals": "counter",
    "kubeflow_trainer_optimizationjob_best_objective": "gauge",
    "kubeflow_trainer_optimizationjob_best_objective_dropped": "gauge",
}
"""The job layer's (:class:`JobMetrics`)."""
SERIES = {
    "kubeflow_trainer_trainjob_progress_ratio": "gauge",
    "kubeflow_trainer_trainjob_remaining_seconds": "gauge",
    "kubeflow_trainer_trainjob_metric": "gauge",
    "kubeflow_trainer_training_series": "gauge",
    "kubeflow_trainer_training_series_dropped": "counter",
}
"""The trainer pods' reports' (:class:`SeriesMetrics`)."""
NAMES = {**GENERIC, **JOBS, **SERIES}
"""Every family the operator exports from its start (:func:`trainer.main.operator_metrics`)."""


def families(m: Metrics) -> dict[str, str]:
    return {f.name: f.type for f in text_string_to_metric_families(m.exposition().decode())}


def samples(m: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(m.exposition().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_have_controller_runtime_names_in_their_own_registry() -> None:
    m = operator_metrics()
    m.controller("trainjob", 4)
    m.workqueue("trainjob")
    assert families(m) == NAMES
    assert not any(name.startswith("controller_runtime") for name in REGISTRY._names_to_collectors)
    assert Metrics().registry is not m.registry
    jobs = JobMetrics.of(m)
    jobs.outcome("created", "TrainJob", "ns", "rt")
    jobs.outcome("failed", "MPIJob", "ns", "", "BackoffLimitExceeded")
    samples = [s.name for f in text_string_to_metric_families(m.exposition().decode()) for s in f.samples]
    assert "trainer_jobs_created_total" in samples and "trainer_jobs_failed_total" in samples
    assert not [n for n in samples if n.endswith("_created")], "no _created series, as the Go client"


def test_the_framework_registry_holds_no_job_and_each_layer_registers_its_families_once() -> None:
    m = Metrics()
    assert families(m) == GENERIC
    jobs = JobMetrics.of(m)
    assert JobMetrics.of(m) is jobs and m.families(JobMetrics) is jobs, "registered once"
    assert families(m) == {**GENERIC, **JOBS}
    assert SeriesMetrics.of(m) is SeriesMetrics.of(m)
    assert families(m) == NAMES
    with pytest.raises(ValueError):
        JobMetrics(m.registry)  # a name taken


def test_jobs_by_state_are_counted_at_scrape_time_with_every_state_present() -> None:
    m = Metrics()
    states = {"Running": 2, "Suspended": 1}
    JobMetrics.of(m).job_states("TrainJob", "volcano", lambda: states)
    s = samples(m)

    def jobs(state: str) -> float:
        return s[("kubeflow_trainer_jobs", (("gang_scheduler", "volcano"), ("kind", "TrainJob"), ("state", state)))]

    assert [jobs(st) for st in ("Created", "Suspended", "Running", "Complete", "Failed")] == [0, 1, 2, 0, 0]
    states["Complete"] = 1  # read again at the next scrape
    s = samples(m)
    assert jobs("Complete") == 1


def test_reasons_outside_the_fixed_set_fold_into_other() -> None:
    assert bounded("FailedJobs", {"FailedJobs"}) == "FailedJobs"
    assert bounded("FailurePolicy_my-own-rule", {"FailedJobs"}) == OTHER == "other"


def test_reconciles_count_by_result_and_errors_separately() -> None:
    m = Metrics()
    m.controller("trainjob", 4)
    m.reconciled("trainjob", "success", 0.02)
    m.reconciled("trainjob", "error", 0.5)
    m.reconciled("trainjob", "requeue_after", 0.01)
    s = samples(m)
    total = "controller_runtime_reconcile_total"
    assert s[(total, (("controller", "trainjob"), ("result", "success")))] == 1
    assert s[(total, (("controller", "trainjob"), ("result", "error")))] == 1
    assert s[(total, (("controller", "trainjob"), ("result", "requeue")))] == 0
    assert s[("controller_runtime_reconcile_errors_total", (("controller", "trainjob"),))] == 1
    assert s[("controller_runtime_reconcile_time_seconds_count", (("controller", "trainjob"),))] == 3
    assert s[("controller_runtime_max_concurrent_reconciles", (("controller", "trainjob"),))] == 4


async def test_the_work_queue_reports_as_client_go_does() -> None:
    m = Metrics()
    q: WorkQueue[str] = WorkQueue(metrics=m.workqueue("trainjob"))
    q.add("a")
    q.add("a")  # de-duplicated: not an add
    q.add("b")
    name = (("name", "trainjob"),)
    assert samples(m)[("workqueue_depth", name)] == 2
    assert samples(m)[("workqueue_adds_total", name)] == 2
    key = await q.get()
    q.add(key)  # added while processing: counted, queued again on done
    q.done(key)
    q.add_rate_limited("c")
    s = samples(m)
    assert s[("workqueue_adds_total", name)] == 3
    assert s[("workqueue_depth", name)] == 2  # b, and a again
    assert s[("workqueue_queue_duration_seconds_count", name)] == 1
    assert s[("workqueue_work_duration_seconds_count", name)] == 1
    assert s[("workqueue_retries_total", name)] == 1
    q.shutdown()


def test_requests_are_counted_by_code_method_and_host() -> None:
    m = Metrics()
    m.observe_request("GET", "200", "127.0.0.1:6443", "LIST", "jobs")
    m.observe_request("GET", "200", "127.0.0.1:6443", "GET", "jobs")
    m.observe_request("PATCH", "<error>", "127.0.0.1:6443", "APPLY", "jobs")
    s = samples(m)
    assert s[("rest_client_requests_total", (("code", "200"), ("host", "127.0.0.1:6443"), ("method", "GET")))] == 2
    assert s[("rest_client_requests_total", (("code", "<error>"), ("host", "127.0.0.1:6443"), ("method", "PATCH")))]
    by_resource = "trainer_apiserver_requests_total"
    assert s[(by_resource, (("code", "200"), ("resource", "jobs"), ("verb", "LIST")))] == 1
    assert s[(by_resource, (("code", "<error>"), ("resource", "jobs"), ("verb", "APPLY")))] == 1


@pytest.mark.parametrize(
    ("method", "path", "query", "content_type", "kind"),
    [
        ("GET", "/apis/batch/v1/namespaces/ns/jobs", [], None, ("LIST", "jobs")),
        ("GET", "/apis/batch/v1/jobs", [("watch", "true")], None, ("WATCH", "jobs")),
        ("GET", "/apis/batch/v1/namespaces/ns/jobs/j", [], None, ("GET", "jobs")),
        ("PATCH", "/apis/batch/v1/namespaces/ns/jobs/j", [], "application/apply-patch+yaml", ("APPLY", "jobs")),
        (
            "PATCH",
            "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/t/status",
            [],
            "application/merge-patch+json",
            ("PATCH", "trainjobs/status"),
        ),
        ("POST", "/api/v1/namespaces/ns/events", [], "application/json", ("POST", "events")),
        ("GET", "/api/v1/namespaces/ns", [], None, ("GET", "namespaces")),
        ("POST", "/api/v1/namespaces", [], "application/json", ("POST", "namespaces")),
        ("PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", [], "application/json", ("PUT", "leases")),
        ("GET", "/version", [], None, ("GET", "")),
    ],
)
def test_requests_are_named_by_verb_and_resource_as_the_apiserver_names_them(
    method: str, path: str, query: list[tuple[str, str]], content_type: str | None, kind: tuple[str, str]
) -> None:
    assert request_kind(method, path, query, content_type) == kind


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("0", None),
        ("", None),
        (":8080", (None, 8080)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("[::1]:9000", ("::1", 9000)),
    ],
)
def test_bind_addresses(value: str, parsed: tuple[str | None, int] | None) -> None:
    assert parse_bind_address(value) == parsed


@pytest.mark.parametrize("value", ["8080", "host:", "host:http", ":70000"])
def test_bad_bind_addresses(value: str) -> None:
    with pytest.raises(ValueError, match="bind address"):
        parse_bind_address(value)


async def test_probes_and_metrics_answer_on_loopback() -> None:
    m = Metrics()
    m.controller("trainjob", 1)
    reason: str | None = "not watching: trainjobs.trainer.kubeflow.org, pods"
    probes = await serve(probes_app(lambda: reason), "127.0.0.1:0", "probes")
    metrics = await serve(metrics_app(m), "127.0.0.1:0", "metrics")
    assert probes and metrics
    try:
        async with aiohttp.ClientSession() as http:
            base = f"http://127.0.0.1:{probes[1]}"
            async with http.get(base + "/healthz") as r:
                assert (r.status, await r.text()) == (200, "ok")
            async with http.get(base + "/readyz") as r:
                assert (r.status, await r.text()) == (
                    500,
                    "[-]informers-synced failed: not watching: trainjobs.trainer.kubeflow.org, pods\n"
                    "healthz check failed\n",
                )
            reason = None
            async with http.get(base + "/readyz") as r:
                assert (r.status, await r.text()) == (200, "ok")
            async with http.get(f"http://127.0.0.1:{metrics[1]}/metrics") as r:
                assert r.status == 200
                assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
                assert "controller_runtime_reconcile_total" in await r.text()
    finally:
        await probes[0].cleanup()
        await metrics[0].cleanup()
    assert await serve(metrics_app(m), "0", "metrics") is None


async def test_readyz_names_every_failed_check() -> None:
    webhook: str | None = "ValidatingWebhookConfiguration trainer-webhook not found"
    probes = await serve(
        probes_app(lambda: "not synced: pods", {"webhook-configurations": lambda: webhook}), "127.0.0.1:0", "probes"
    )
    assert probes
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{probes[1]}/readyz") as r:
                assert (r.status, await r.text()) == (
                    500,
                    "[-]informers-synced failed: not synced: pods\n"
                    "[-]webhook-configurations failed: ValidatingWebhookConfiguration trainer-webhook not found\n"
                    "healthz check failed\n",
                )
            webhook = None
            async with http.get(f"http://127.0.0.1:{probes[1]}/readyz") as r:
                assert (r.status, await r.text()) == (
                    500,
                    "[-]informers-synced failed: not synced: pods\nhealthz check failed\n",
                )
    finally:
        await probes[0].cleanup()


def test_the_process_is_measured_as_controller_runtime_exports_it() -> None:
    text = Metrics().exposition().decode()
    rss = [line for line in text.splitlines() if line.startswith("process_resident_memory_bytes ")]
    assert rss and float(rss[0].split()[1]) > 10 * 2**20  # a Python process holds more than 10 MiB
    assert "process_cpu_seconds_total " in text


def gc_figures(m: Metrics) -> dict[tuple[str, str], float]:
    """``(sample name, generation) -> value`` of the garbage collector's families."""
    return {
        (s.name, s.labels["generation"]): s.value
        for f in text_string_to_metric_families(m.exposition().decode())
        for s in f.samples
        if s.name.startswith(("trainer_gc_", "python_gc_"))
    }


def test_the_garbage_collector_is_timed_by_generation() -> None:
    m = Metrics()
    before = gc_figures(m)
    assert {g for name, g in before if name == "trainer_gc_seconds_total"} == {"0", "1", "2"}
    garbage: list[object] = []
    garbage.append(garbage)  # a cycle only the collector frees
    del garbage
    gc.collect()
    after = gc_figures(m)
    assert after["python_gc_collections_total", "2"] == before["python_gc_collections_total", "2"] + 1
    assert after["trainer_gc_seconds_total", "2"] > before["trainer_gc_seconds_total", "2"]
    assert after["python_gc_objects_collected_total", "2"] >= before["python_gc_objects_collected_total", "2"] + 1
    assert gc_figures(Metrics())["trainer_gc_seconds_total", "2"] >= after["trainer_gc_seconds_total", "2"]
    assert sum(type(c).__name__ == "_Timer" for c in gc.callbacks) == 1, "one hook, however many registries"
