"""The pure parts of ``bench.burst`` and ``bench.raw_client``: metrics text, writes per TrainJob, /proc
figures, the RSS slope, and the copy of the operator's children for the raw-client baseline."""

from __future__ import annotations

import copy
import statistics
from typing import Any

import pytest

from api.kinds import CONFIGMAPS, JOBS, SERVICES, TRAINJOBS
from bench.burst import (
    complete,
    cpu_seconds,
    jobs_per_trainjob,
    load,
    owned_by_trainjob,
    parse_args,
    parse_requests,
    per_trainjob,
    pods_per_node,
    slope_per_1000,
    status_mib,
    trainjobs,
    write_delta,
    writes_total,
)
from bench.raw_client import post_all, raw_copy, trainjob_owner
from tests.kube_double import RecordingKube
from trainer.metrics import Metrics

JSON = dict[str, Any]
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
    m = Metrics()
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


async def test_post_all_posts_each_trainjob_then_its_children_owned_by_the_new_uid() -> None:
    kube = RecordingKube()
    service = {"apiVersion": "v1", "kind": "Service", "metadata": server_meta("burst-0"), "spec": {"clusterIP": "None"}}
    children = {"burst-0": [job_as_read(), service]}
    result = await post_all(kube, trainjobs(range(2), "bench", False), children, "raw", concurrency=2)
    assert (result.trainjobs, result.children) == (2, 2)
    assert result.seconds >= result.trainjobs_seconds >= 0
    order = [(w.kind, w.key) for w in kube.writes]
    assert order.index(("TrainJob", ("raw", "burst-0"))) < order.index(("Job", ("raw", "burst-0-node-0")))
    assert order.index(("TrainJob", ("raw", "burst-0"))) < order.index(("Service", ("raw", "burst-0")))
    assert ("TrainJob", ("raw", "burst-1")) in order and len(order) == 4
    uid = kube.objects[(TRAINJOBS, ("raw", "burst-0"))]["metadata"]["uid"]
    for res, name in ((JOBS, "burst-0-node-0"), (SERVICES, "burst-0")):
        assert kube.objects[(res, ("raw", name))]["metadata"]["ownerReferences"][0]["uid"] == uid
    assert not any(res == CONFIGMAPS for res, _ in kube.objects)
