"""The pure parts of ``bench.burst``, ``bench.cluster`` and ``bench.raw_client``: metrics text, writes per
TrainJob, /proc figures, the RSS slope, the operator's command line and metrics, and the copy of the
operator's children for the raw-client baseline."""

from __future__ import annotations

import copy
import gc
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, generate_latest

from bench.burst import (
    ANY_RESOURCE,
    COMPARED,
    GC_METRIC,
    REQUESTS_METRIC,
    REST_METRIC,
    CountedOperator,
    compare,
    complete,
    gauge_sum,
    jobs_per_trainjob,
    load,
    over_budget,
    owned_by_trainjob,
    parse_args,
    parse_reconciles,
    parse_requests,
    per_trainjob,
    print_ratios,
    ratio,
    requests_metric,
    resolve,
    slope_per_1000,
    summary,
    trainjobs,
    webhook_args,
    write_delta,
    writes_total,
)
from bench.cluster import NODES, Operator, cpu_seconds, pods_per_node, status_mib
from bench.raw_client import RawController, raw_copy, trainjob_owner
from localcluster import ROOT
from tests.kube_double import RecordingKube
from trainer.api.kinds import CONFIGMAPS, JOBS, SERVICES, TRAINJOBS
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError
from trainer.framework.metrics import Metrics
from trainer.main import operator_metrics

OLD_UID = "11111111-1111-1111-1111-111111111111"
JOB_UID = "22222222-2222-2222-2222-222222222222"
NEW_UID = "33333333-3333-3333-3333-333333333333"


def owner_ref(uid: str = OLD_UID, name: str = "burst-0") -> JSON:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def server_meta(name: str, **extra: Any) -> JSON:
    return {
        "name": name,
        "namespace": "bench",
        "uid": JOB_UID,
        "resourceVersion": "4242",
        "creationTimestamp": "2025-01-01T00:00:00Z",
        "generation": 1,
        "managedFields": [{"manager": "trainer", "operation": "Apply"}],
        "ownerReferences": [owner_ref()],
        **extra,
    }


def job_as_read() -> JSON:
    """A trainer Job as the apiserver returns it after the Job controller ran."""
    controller_labels = {
        "controller-uid": JOB_UID,
        "batch.kubernetes.io/controller-uid": JOB_UID,
        "job-name": "burst-0-node-0",
        "batch.kubernetes.io/job-name": "burst-0-node-0",
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": server_meta("burst-0-node-0", labels={"jobset.sigs.k8s.io/jobset-name": "burst-0"}),
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "completionMode": "Indexed",
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": JOB_UID}},
            "template": {
                "metadata": {"labels": {"jobset.sigs.k8s.io/jobset-name": "burst-0", **controller_labels}},
                "spec": {"containers": [{"name": "node", "image": "pytorch"}], "restartPolicy": "Never"},
            },
        },
        "status": {"succeeded": 2, "conditions": [{"type": "Complete", "status": "True"}]},
    }


# --- metrics text and writes per TrainJob --------------------------------------------------------------


def exposition(requests: list[tuple[str, str, str, str]]) -> str:
    """The real operator registry's text after these requests ``(method, code, verb, resource)``."""
    m = operator_metrics()
    m.reconciled("trainjob", "success", 0.01)  # other metrics are in the text too
    for method, code, verb, resource in requests:
        m.observe_request(method, code, "127.0.0.1:6443", verb, resource)
    return m.exposition().decode()


def test_parse_requests_reads_trainer_apiserver_requests_total_only() -> None:
    text = exposition(
        [
            ("PATCH", "200", "APPLY", "jobs"),
            ("PATCH", "200", "APPLY", "jobs"),
            ("PATCH", "409", "APPLY", "jobs"),
            ("GET", "200", "LIST", "trainjobs"),
            ("PATCH", "200", "PATCH", "trainjobs/status"),
        ]
    )
    assert parse_requests(text) == {
        ("APPLY", "jobs", "200"): 2.0,
        ("APPLY", "jobs", "409"): 1.0,
        ("LIST", "trainjobs", "200"): 1.0,
        ("PATCH", "trainjobs/status", "200"): 1.0,
    }


def test_parse_reconciles_sums_every_result_of_one_controller() -> None:
    m = Metrics()
    for controller, result in [("trainjob", "success"), ("trainjob", "requeue_after"), ("trainjob", "error")]:
        m.reconciled(controller, result, 0.01)
    m.reconciled("mpijob", "success", 0.01)
    assert parse_reconciles(m.exposition().decode()) == 3.0
    assert parse_reconciles(m.exposition().decode(), "mpijob") == 1.0
    assert parse_reconciles(Metrics().exposition().decode()) == 0.0


def test_parse_requests_of_a_fresh_operator_is_empty() -> None:
    assert parse_requests(exposition([])) == {}


def test_write_delta_sums_codes_and_leaves_out_reads_and_still_rows() -> None:
    before = {
        ("APPLY", "jobs", "200"): 10.0,
        ("GET", "trainjobs", "200"): 5.0,
        ("POST", "events", "201"): 3.0,
    }
    after = {
        ("APPLY", "jobs", "200"): 30.0,
        ("APPLY", "jobs", "409"): 2.0,
        ("GET", "trainjobs", "200"): 50.0,
        ("LIST", "jobs", "200"): 4.0,
        ("WATCH", "jobs", "200"): 1.0,
        ("POST", "events", "201"): 3.0,
        ("PATCH", "trainjobs/status", "200"): 10.0,
    }
    assert write_delta(before, after) == {("APPLY", "jobs"): 22.0, ("PATCH", "trainjobs/status"): 10.0}
    assert writes_total(after) == 45.0


def test_per_trainjob_divides_by_n_largest_first() -> None:
    delta = {("PATCH", "trainjobs/status"): 1000.0, ("APPLY", "jobs"): 500.0, ("APPLY", "services"): 500.0}
    rows = per_trainjob(delta, 500)
    assert rows == {"PATCH trainjobs/status": 2.0, "APPLY jobs": 1.0, "APPLY services": 1.0}
    assert list(rows) == ["PATCH trainjobs/status", "APPLY jobs", "APPLY services"]
    with pytest.raises(ValueError):
        per_trainjob(delta, 0)


# --- the fallback of an operator without trainer_apiserver_requests_total ------------------------------


def old_exposition(requests: list[tuple[str, str, str]]) -> str:
    """The text of an operator that exports only client-go's ``rest_client_requests_total`` (as the
    operator did before ``trainer_apiserver_requests_total``), after these ``(method, code, host)``."""
    registry = CollectorRegistry()
    rest = Counter(
        "rest_client_requests_total",
        "Number of HTTP requests, partitioned by status code, method, and host",
        ["code", "method", "host"],
        registry=registry,
    )
    Counter("controller_runtime_reconcile_total", "reconciles", ["controller", "result"], registry=registry).labels(
        "trainjob", "success"
    ).inc()
    for method, code, host in requests:
        rest.labels(code, method, host).inc()
    return generate_latest(registry).decode()


def test_requests_metric_prefers_trainer_apiserver_requests_total() -> None:
    assert requests_metric(exposition([])) == REQUESTS_METRIC  # the family alone, before any request
    assert requests_metric(exposition([("GET", "200", "LIST", "jobs")])) == REQUESTS_METRIC
    assert requests_metric(old_exposition([])) == REST_METRIC
    assert requests_metric(old_exposition([("GET", "200", "127.0.0.1:6443")])) == REST_METRIC
    with pytest.raises(ValueError, match="neither"):
        requests_metric("# TYPE up gauge\nup 1\n")


def test_parse_requests_of_rest_client_requests_total_by_method_only() -> None:
    text = old_exposition(
        [
            ("PATCH", "200", "127.0.0.1:6443"),
            ("PATCH", "200", "127.0.0.2:6443"),  # hosts summed
            ("PATCH", "409", "127.0.0.1:6443"),
            ("POST", "201", "127.0.0.1:6443"),
            ("GET", "200", "127.0.0.1:6443"),
            ("DELETE", "200", "127.0.0.1:6443"),
        ]
    )
    counts = parse_requests(text, REST_METRIC)
    assert counts == {
        ("PATCH", ANY_RESOURCE, "200"): 2.0,
        ("PATCH", ANY_RESOURCE, "409"): 1.0,
        ("POST", ANY_RESOURCE, "201"): 1.0,
        ("GET", ANY_RESOURCE, "200"): 1.0,
        ("DELETE", ANY_RESOURCE, "200"): 1.0,
    }
    assert writes_total(counts) == 5.0  # every method but GET
    assert per_trainjob(write_delta({}, counts), 1) == {"PATCH *": 3.0, "DELETE *": 1.0, "POST *": 1.0}
    assert parse_requests(text) == {}  # the new metric is not in an old operator's text
    with pytest.raises(ValueError):
        parse_requests(text, "apiserver_request_total")


def test_both_metrics_count_the_same_writes_of_the_current_operator() -> None:
    text = exposition(
        [
            ("PATCH", "200", "APPLY", "jobs"),
            ("POST", "201", "POST", "events"),
            ("GET", "200", "LIST", "jobs"),
            ("GET", "200", "WATCH", "jobs"),
            ("PATCH", "200", "PATCH", "trainjobs/status"),
        ]
    )
    assert writes_total(parse_requests(text, REST_METRIC)) == writes_total(parse_requests(text)) == 3.0


# --- --compare: the ratios, the ref, the flags an old operator knows --------------------------------------


def test_ratio_is_this_over_ref() -> None:
    assert ratio(30.0, 40.0) == 0.75
    assert ratio(2.0, 3.0) == 0.667
    assert ratio(0.0, 0.0) == 1.0
    assert ratio(1.0, 0.0) is None
    assert ratio(None, 4.0) is None and ratio(4.0, None) is None


def operator_run(cpu: float, writes: float, peak: float, children: float, done: float | None) -> JSON:
    return {
        "keep": None,
        "operator": {
            "cpu_ms_per_trainjob": cpu,
            "writes_per_trainjob_total": writes,
            "rss_mib": {"start": 80.0, "after": 90.0, "peak": peak},
            "children_seconds": children,
            "complete_seconds": done,
        },
        "baseline": {"ratio": 0.5},
    }


def test_compare_operator_phases() -> None:
    this = operator_run(cpu=10.0, writes=6.0, peak=120.0, children=30.0, done=45.0)
    ref = operator_run(cpu=20.0, writes=8.0, peak=100.0, children=60.0, done=None)  # suspended or not reached
    rows = compare(this, ref)
    assert list(rows) == [key for key, _ in COMPARED]
    assert rows["cpu_ms_per_trainjob"] == {"this": 10.0, "ref": 20.0, "ratio": 0.5}
    assert rows["writes_per_trainjob"] == {"this": 6.0, "ref": 8.0, "ratio": 0.75}
    assert rows["rss_peak_mib"]["ratio"] == 1.2
    assert rows["children_seconds"]["ratio"] == 0.5
    assert rows["complete_seconds"] == {"this": 45.0, "ref": None, "ratio": None}
    assert rows["rss_slope_mib_per_1000"] == {"this": None, "ref": None, "ratio": None}  # no --keep


def test_print_ratios_one_line_per_figure_and_the_fallback_said(capsys: pytest.CaptureFixture[str]) -> None:
    rows = compare(operator_run(10.0, 6.0, 120.0, 30.0, 45.0), operator_run(20.0, 11.0, 100.0, 60.0, None))
    print_ratios(rows, "aaaaaaa-dirty", "bbbbbbb", REST_METRIC)
    lines = capsys.readouterr().out.splitlines()
    assert "aaaaaaa-dirty / bbbbbbb" in lines[0]
    by_label = {label: next(line.split() for line in lines if line.strip().startswith(label)) for _, label in COMPARED}
    assert by_label["CPU ms per TrainJob"][-3:] == ["10.00", "20.00", "0.50"]
    assert by_label["writes per TrainJob"][-1] == "0.55"
    assert by_label["seconds to every Complete"][-3:] == ["45.00", "-", "n/a"]
    assert REST_METRIC in lines[-1]
    print_ratios(rows, "aaaaaaa", "bbbbbbb", REQUESTS_METRIC)
    assert REST_METRIC not in capsys.readouterr().out


def test_summary_of_a_keep_curve_and_of_a_run_that_timed_out() -> None:
    keep = {
        "batch": 1000,
        "curve": [{"kept": 0, "rss_mib": 80.0}],
        "cpu_ms_per_trainjob": 12.5,
        "writes_per_trainjob": 4.0,
        "slope_mib_per_1000": 3.5,
        "rss_peak_mib": 140.0,
        "children_seconds": 50.0,
        "complete_seconds": None,
    }
    assert summary({"keep": keep}) == {
        "cpu_ms_per_trainjob": 12.5,
        "writes_per_trainjob": 4.0,
        "reconciles_per_trainjob": None,
        "rss_slope_mib_per_1000": 3.5,
        "rss_peak_mib": 140.0,
        "children_seconds": 50.0,
        "complete_seconds": None,
    }
    assert set(summary({"keep": None, "timeout": "operator phase, children: 3/100 jobs"}).values()) == {None}


def test_writes_over_max_writes_fail_the_run_and_within_or_unmeasured_do_not() -> None:
    run = {"operator": {"writes_per_trainjob_total": 5.02}}
    assert over_budget(run, 5.0) == "5.02 writes per TrainJob, more than --max-writes 5"
    assert over_budget(run, 5.02) is None and over_budget(run, None) is None
    assert over_budget({"keep": {"writes_per_trainjob": 4.0}}, 4.5) is None
    assert over_budget({"keep": None, "restart": {}}, 1.0) is None, "a --restart measures no burst writes"
    assert parse_args(["--max-writes", "5"]).max_writes == 5.0


def test_resolve_names_commits_only() -> None:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert resolve("HEAD") == head.stdout.strip()
    with pytest.raises(ValueError, match="no such commit"):
        resolve("no-such-ref-of-this-repository")
    with pytest.raises(ValueError):
        resolve("HEAD:")  # a tree, not a commit
    with pytest.raises(ValueError):
        resolve("--help")  # not read as an option


def test_the_operator_of_a_ref_gets_only_flags_every_version_has(tmp_path: Path) -> None:
    op = CountedOperator(tmp_path / "kubeconfig", "bench", tmp_path / "log", root=tmp_path)
    flags = [a for a in op.args if a.startswith("--")]
    assert flags == [
        "--kubeconfig",
        "--namespace",
        "--log-format",
        "--metrics-bind-address",
        "--health-probe-bind-address",
    ]
    assert op.args[1:3] == ["-m", "trainer"] and op.root == tmp_path


def test_with_webhook_ours_serves_on_loopback_and_its_configurations_call_that_port(tmp_path: Path) -> None:
    flags, path = webhook_args(ROOT, tmp_path)
    port = flags[flags.index("--webhook-port") + 1]
    assert flags[flags.index("--webhook-host") + 1] == "127.0.0.1" and path == tmp_path / "webhooks.yaml"
    configs = list(yaml.safe_load_all(path.read_text()))
    urls = {w["clientConfig"]["url"].split("/")[2] for c in configs for w in c["webhooks"]}
    assert urls == {f"127.0.0.1:{port}"}, urls
    assert {c["kind"] for c in configs} >= {"ValidatingWebhookConfiguration"}
    assert parse_args(["--webhook"]).webhook and not parse_args([]).webhook


def test_an_operator_of_every_namespace_with_extra_flags(tmp_path: Path) -> None:
    op = Operator(tmp_path / "kubeconfig", None, tmp_path / "log", args=["--gang-scheduler-name", "none"])
    assert "--namespace" not in op.args
    assert op.args[op.args.index("--kubeconfig") + 1] == str(tmp_path / "kubeconfig")
    assert op.args[-2:] == ["--gang-scheduler-name", "none"]
    assert op.args[op.args.index("--metrics-bind-address") + 1] == f"127.0.0.1:{op.metrics_port}"
    assert op.args[op.args.index("--health-probe-bind-address") + 1] == f"127.0.0.1:{op.health_port}"
    assert op.metrics_port != op.health_port and op.root == ROOT
    with pytest.raises(RuntimeError, match="not started"):
        _ = op.pid
    assert "bench.cpu_profile" not in op.args


def test_a_profiled_operator_runs_under_cprofile_writing_to_the_path_given(tmp_path: Path) -> None:
    op = Operator(tmp_path / "kubeconfig", "bench", tmp_path / "log", profile=tmp_path / "op.prof")
    assert op.args[1:7] == ["-m", "bench.cpu_profile", "-o", str(tmp_path / "op.prof"), "-m", "trainer"]
    assert parse_args(["--profile", "p.prof"]).profile == Path("p.prof") and parse_args([]).profile is None


async def test_scrape_reads_the_metrics_port_and_keeps_the_metric_of_the_first_scrape(tmp_path: Path) -> None:
    texts = [old_exposition([("PATCH", "200", "127.0.0.1:6443")]), exposition([("PATCH", "200", "APPLY", "jobs")])]

    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(text=texts.pop(0))

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    op = CountedOperator(tmp_path / "kubeconfig", "bench", tmp_path / "log")
    site = web.TCPSite(runner, "127.0.0.1", op.metrics_port)
    await site.start()
    try:
        assert await op.scrape() == {("PATCH", ANY_RESOURCE, "200"): 1.0}
        assert op.metric == REST_METRIC
        # the second text has both metrics: the one chosen first is kept
        assert await op.scrape() == {("PATCH", ANY_RESOURCE, "200"): 1.0}
        assert op.metric == REST_METRIC and not texts
    finally:
        await runner.cleanup()


def test_parse_args_compare() -> None:
    assert parse_args([]).compare is None
    assert parse_args(["--compare", "HEAD~4", "--keep"]).compare == "HEAD~4"


# --- /proc figures and the slope -----------------------------------------------------------------------


def test_cpu_seconds_counts_fields_after_a_command_name_with_spaces_and_parentheses() -> None:
    # fields 3.. : state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
    stat = "4242 (python (a) b) S 1 4242 4242 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 3 0 12345\n"
    assert cpu_seconds(stat, 100) == 3.0


def test_status_mib_reads_kib_lines() -> None:
    status = "Name:\tpython\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t3\n"
    assert status_mib(status, "VmRSS") == 100.0
    assert status_mib(status, "VmHWM") == 200.0
    with pytest.raises(KeyError):
        status_mib(status, "VmSwap")


def test_slope_per_1000_is_the_least_squares_slope() -> None:
    line = [(1000.0, 120.0), (2000.0, 140.0), (3000.0, 160.0)]
    assert slope_per_1000(line) == pytest.approx(20.0)
    noisy = [(1000.0, 121.0), (2000.0, 138.0), (3000.0, 161.0)]  # residuals +1, -2, +1 cancel
    assert slope_per_1000(noisy) == pytest.approx(20.0)
    with pytest.raises(statistics.StatisticsError):
        slope_per_1000([(1000.0, 120.0)])


def test_pods_per_node_fits_every_pod_on_the_nodes() -> None:
    assert pods_per_node(100, 8) == 110
    assert pods_per_node(2000, 8) == 260
    assert pods_per_node(2001, 8) * 8 >= 2001
    assert pods_per_node(4000) == pods_per_node(4000, NODES) == 4000 // NODES + 10


# --- the objects ---------------------------------------------------------------------------------------


def test_trainjobs_of_the_torch_sample_have_two_nodes() -> None:
    made = trainjobs(range(3, 5), "bench", suspend=True)
    assert [t["metadata"] for t in made] == [
        {"name": "burst-3", "namespace": "bench"},
        {"name": "burst-4", "namespace": "bench"},
    ]
    assert all(t["spec"]["trainer"]["numNodes"] == 2 and t["spec"]["suspend"] is True for t in made)
    assert "suspend" not in trainjobs(range(1), "bench", suspend=False)[0]["spec"]
    assert jobs_per_trainjob(load("torch-distributed.yaml")) == 1


def test_jobs_per_trainjob_sums_replicas() -> None:
    runtime = {"spec": {"template": {"spec": {"replicatedJobs": [{"name": "a", "replicas": 3}, {"name": "b"}]}}}}
    assert jobs_per_trainjob(runtime) == 4


def test_owned_and_complete() -> None:
    job = job_as_read()
    assert trainjob_owner(job) == "burst-0" and owned_by_trainjob(job)
    job["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "x", "uid": "u"}]
    assert trainjob_owner(job) is None
    assert complete(job_as_read())
    assert not complete({"status": {"conditions": [{"type": "Complete", "status": "False"}]}})


def test_parse_args_refuses_a_zero_batch() -> None:
    assert parse_args(["--n", "10"]).concurrency == 32
    with pytest.raises(SystemExit):
        parse_args(["--batch", "0"])


# --- the children copied for the raw-client baseline --------------------------------------------------


def test_raw_copy_of_a_job_drops_what_the_server_and_job_controller_set() -> None:
    read = job_as_read()
    kept = copy.deepcopy(read)
    out = raw_copy(read, "raw", NEW_UID)
    assert read == kept  # the input is left alone
    assert "status" not in out
    assert out["metadata"] == {
        "name": "burst-0-node-0",
        "namespace": "raw",
        "labels": {"jobset.sigs.k8s.io/jobset-name": "burst-0"},
        "ownerReferences": [owner_ref(NEW_UID)],
    }
    assert "selector" not in out["spec"]
    assert out["spec"]["template"]["metadata"]["labels"] == {"jobset.sigs.k8s.io/jobset-name": "burst-0"}
    assert out["spec"]["parallelism"] == 2 and out["spec"]["completionMode"] == "Indexed"


def test_raw_copy_of_services_keeps_headless_and_drops_allocated_ips() -> None:
    headless: JSON = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": server_meta("burst-0"),
        "spec": {"clusterIP": "None", "clusterIPs": ["None"], "selector": {"a": "b"}, "publishNotReadyAddresses": True},
        "status": {"loadBalancer": {}},
    }
    out = raw_copy(headless, "raw", NEW_UID)
    assert out["spec"] == headless["spec"]
    assert out["metadata"]["ownerReferences"][0]["uid"] == NEW_UID
    allocated = copy.deepcopy(headless)
    allocated["spec"].update(clusterIP="10.0.0.12", clusterIPs=["10.0.0.12"])
    spec = raw_copy(allocated, "raw", NEW_UID)["spec"]
    assert "clusterIP" not in spec and "clusterIPs" not in spec and spec["selector"] == {"a": "b"}


def test_raw_copy_keeps_config_map_data_and_other_owners() -> None:
    other = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid"}
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": server_meta("burst-0-runtime-snapshot", ownerReferences=[owner_ref(), other]),
        "data": {"runtime": '{"kind": "ClusterTrainingRuntime"}'},
    }
    out = raw_copy(cm, "raw", NEW_UID)
    assert out["data"] == cm["data"]
    assert out["metadata"]["ownerReferences"] == [owner_ref(NEW_UID), other]


async def test_raw_controller_posts_the_children_of_each_trainjob_event_owned_by_its_uid() -> None:
    kube = RecordingKube()
    service = {"apiVersion": "v1", "kind": "Service", "metadata": server_meta("burst-0"), "spec": {"clusterIP": "None"}}
    controller = RawController(kube, "raw", {"burst-0": [job_as_read(), service]}, concurrency=2)
    for tj in trainjobs(range(2), "raw", False):
        created = await kube.create(TRAINJOBS, "raw", tj)
        controller.handle(created)
        controller.handle(created)  # a second event of the same TrainJob writes nothing more
    await controller.wait(2, time.monotonic() + 5)
    result = controller.result
    assert (result.children, sorted(result.done), sorted(result.seen)) == (
        2,
        ["burst-0", "burst-1"],
        ["burst-0", "burst-1"],
    )
    assert all(result.done[name] >= result.seen[name] for name in result.done)
    creates = [(w.kind, w.key) for w in kube.writes if w.kind != "TrainJob"]
    assert sorted(creates) == [("Job", ("raw", "burst-0-node-0")), ("Service", ("raw", "burst-0"))]
    uid = kube.objects[(TRAINJOBS, ("raw", "burst-0"))]["metadata"]["uid"]
    for res, name in ((JOBS, "burst-0-node-0"), (SERVICES, "burst-0")):
        assert kube.objects[(res, ("raw", name))]["metadata"]["ownerReferences"][0]["uid"] == uid
    assert not any(res == CONFIGMAPS for res, _ in kube.objects)
    await controller.stop()


async def test_raw_controller_wait_raises_a_refused_post() -> None:
    kube = RecordingKube(refuse={"Job": (422, "spec.template: Invalid value")})
    controller = RawController(kube, "raw", {"burst-0": [job_as_read()]}, concurrency=1)
    controller.handle(await kube.create(TRAINJOBS, "raw", trainjobs(range(1), "raw", False)[0]))
    with pytest.raises(ApiError) as err:
        await controller.wait(1, time.monotonic() + 5)
    assert err.value.status == 422


def test_the_garbage_collectors_seconds_are_read_from_the_operators_metric() -> None:
    m = Metrics()
    before = gauge_sum(m.exposition().decode(), GC_METRIC, "generation")
    gc.collect()
    assert gauge_sum(m.exposition().decode(), GC_METRIC, "generation") > before
