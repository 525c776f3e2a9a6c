"""MPIJobs kubeflow/mpi-operator v0.8 started (:mod:`trainer.mpijob.upstream`), on the recording double of
``Kube`` wired by the real manager: a running one finishes under its launcher Job with mpi-operator's
worker Pods, its status following them, and no child of ours; then ``cleanPodPolicy`` on the worker
Pods; a suspended one's launcher Job goes in the foreground, then the MPIJob is ours (its Service,
ConfigMap and SSH Secret taken as they are); a finished one is left untouched. The Pod informer is
label-selected and keeps no Pod spec."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.harness import World, ago
from trainer.api.kinds import CONFIGMAPS, JOBS, MPIJOBS, PODS, SECRETS, SERVICES, Resource
from trainer.api.labels import JOB_NAME_LABEL
from trainer.framework.json_codec import JSON
from trainer.jobs.child_writer import HASH_ANNOTATION
from trainer.jobs.mpi import mount_ssh
from trainer.mpijob.upstream import UPSTREAM_SSH_KEYS, WATCHES, kept_pod, mpijob_of_pod

NS, NAME = "default", "pi"
CREATED = {
    "type": "Created",
    "status": "True",
    "reason": "MPIJobCreated",
    "message": "MPIJob default/pi is created.",
    "lastTransitionTime": ago(60),
    "lastUpdateTime": ago(60),
}


def world(suspend: bool = False, clean: str = "Running", workers: bool = True, **status: Any) -> World:
    """The sample MPIJob ``default/pi`` (2 workers) as mpi-operator left it: its status, its launcher
    Job, Service, ConfigMap and SSH Secret (labelled ``app`` only), and, unless suspended (or without
    ``workers``), its two worker Pods running."""
    w = World("mpijob", "none")
    obj = copy.deepcopy(w.obj)
    obj["spec"]["runPolicy"] = {"cleanPodPolicy": clean, "suspend": suspend}
    conditions = [CREATED]
    if suspend:
        conditions.append(
            {"type": "Suspended", "status": "True", "reason": "MPIJobSuspended", "message": "MPIJob suspended"}
        )
    obj["status"] = {"conditions": conditions, **({} if suspend else {"startTime": ago(60)}), **status}
    w.kube.put(obj)
    owned = owner(w)
    app = {"app": NAME}
    launcher = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{NAME}-launcher", "namespace": NS, "labels": app, "ownerReferences": [owned]},
        "spec": {"suspend": suspend, "template": {"spec": {"containers": [{"name": "mpi-launcher"}]}}},
        "status": {} if suspend else {"active": 1, "ready": 1, "startTime": ago(50)},
    }
    w.kube.put(launcher)
    for kind, name, extra in (
        ("Service", NAME, {"spec": {"clusterIP": "None", "selector": {"training.kubeflow.org/job-name": NAME}}}),
        ("ConfigMap", f"{NAME}-config", {"data": {"hostfile": "pi-worker-0.pi.default.svc slots=1\n"}}),
        ("Secret", f"{NAME}-ssh", {"type": "kubernetes.io/ssh-auth", "data": dict.fromkeys(UPSTREAM_SSH_KEYS, "a2V5")}),
    ):
        meta = {"name": name, "namespace": NS, "labels": app, "ownerReferences": [owned]}
        w.kube.put({"apiVersion": "v1", "kind": kind, "metadata": meta, **extra})
    if workers and not suspend:
        for i in range(2):
            worker(w, i, "Running")
    return w


def owner(w: World) -> JSON:
    return {
        "apiVersion": MPIJOBS.api_version,
        "kind": "MPIJob",
        "name": NAME,
        "uid": w.obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def worker(w: World, index: int, phase: str, reason: str | None = None) -> JSON:
    """mpi-operator's worker Pod ``pi-worker-<index>`` (``newWorker``), in ``phase``."""
    labels = {
        "training.kubeflow.org/operator-name": "mpi-operator",
        "training.kubeflow.org/job-name": NAME,
        "training.kubeflow.org/job-role": "worker",
        "training.kubeflow.org/replica-index": str(index),
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{NAME}-worker-{index}",
            "namespace": NS,
            "labels": labels,
            "ownerReferences": [owner(w)],
        },
        "spec": {"containers": [{"name": "mpi-worker", "image": "mpioperator/mpi-pi:openmpi"}]},
        "status": {"phase": phase, **({"reason": reason} if reason else {})},
    }
    return w.kube.put(pod)


def stored(w: World, res: Resource, name: str) -> JSON | None:
    return w.kube.objects.get((res, (NS, name)))


def launcher(w: World) -> JSON:
    found = stored(w, JOBS, f"{NAME}-launcher")
    assert found is not None
    return found


def pods(w: World) -> list[str]:
    return sorted(k[1] for (res, k) in w.kube.objects if res == PODS)


def finish(w: World, condition: JSON, **counts: int) -> None:
    """The Job controller finishes mpi-operator's launcher Job."""
    w.set_status(JOBS, launcher(w), {"active": 0, "ready": 0, **counts, "conditions": [condition]})


def record_deletes(w: World) -> list[tuple[str, str, str]]:
    """Every delete from now on: (kind, name, propagation)."""
    seen: list[tuple[str, str, str]] = []
    delete = w.kube.delete

    async def recording(
        res: Resource,
        namespace: str | None,
        name: str,
        propagation: str = "Background",
        uid: str | None = None,
        *,
        dry_run: bool = False,
    ) -> bool:
        seen.append((res.kind, name, propagation))
        return await delete(res, namespace, name, propagation, uid, dry_run=dry_run)

    w.kube.delete = recording  # type: ignore[method-assign]
    return seen


async def test_a_running_mpijob_finishes_under_its_launcher_job_with_mpi_operators_workers() -> None:
    w = world()
    await w.settle()
    # mpi-operator's launcher Job got our labels (so the Job cache lists it), nothing else of ours exists.
    assert [j["metadata"]["name"] for j in w.jobs()] == [f"{NAME}-launcher"]
    assert launcher(w)["metadata"]["labels"][JOB_NAME_LABEL] == NAME
    assert HASH_ANNOTATION not in (launcher(w)["metadata"].get("annotations") or {})
    assert launcher(w)["spec"]["template"] == {"spec": {"containers": [{"name": "mpi-launcher"}]}}
    assert w.kube.count("apply") == 0 and w.kube.count("delete") == 0
    assert w.kube.count("create", "Service") == w.kube.count("create", "ConfigMap") == 0
    running = w.condition("Running")
    assert running is not None and (running["status"], running["reason"]) == ("True", "MPIJobRunning")
    replicas = w.obj["status"]["replicaStatuses"]
    assert (replicas["Launcher"]["active"], replicas["Worker"]["active"]) == (1, 2)

    done = ago(1)
    finish(w, {"type": "Complete", "status": "True", "reason": "CompletionsReached"}, succeeded=1)
    w.set_status(JOBS, launcher(w), {"completionTime": done})
    await w.settle()
    succeeded = w.condition("Succeeded")
    assert succeeded is not None and (succeeded["reason"], succeeded["message"]) == (
        "MPIJobSucceeded",
        "MPIJob default/pi successfully completed.",
    )
    assert w.obj["status"]["completionTime"] == done
    assert w.condition("Running")["status"] == "False"  # type: ignore[index]
    assert pods(w) == [], "cleanPodPolicy Running: the running workers are deleted"
    assert [j["metadata"]["name"] for j in w.jobs()] == [f"{NAME}-launcher"], "no child of ours, ever"
    assert await w.reconcile() == 0  # settled: nothing is written again


@pytest.mark.parametrize(("policy", "left"), [("None", ["pi-worker-0", "pi-worker-1"]), ("Running", ["pi-worker-1"])])
async def test_once_finished_clean_pod_policy_deletes_worker_pods_as_mpi_operator_does(
    policy: str, left: list[str]
) -> None:
    w = world(clean=policy)
    worker(w, 1, "Succeeded")
    await w.settle()
    finish(w, {"type": "Complete", "status": "True"}, succeeded=1)
    await w.settle()
    assert pods(w) == left


async def test_clean_pod_policy_all_deletes_every_worker_pod() -> None:
    w = world(clean="All")
    worker(w, 1, "Failed")
    await w.settle()
    finish(w, {"type": "Complete", "status": "True"}, succeeded=1)
    await w.settle()
    assert pods(w) == []


async def test_a_failed_launcher_fails_the_mpijob_with_its_reason() -> None:
    w = world()
    await w.settle()
    finish(w, {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "too many"}, failed=7)
    await w.settle()
    failed = w.condition("Failed")
    assert failed is not None and failed["reason"] == "BackoffLimitExceeded"
    assert "too many" in failed["message"]
    assert w.obj["status"]["replicaStatuses"]["Launcher"]["failed"] == 7
    assert w.obj["status"].get("completionTime")


async def test_an_evicted_worker_fails_the_mpijob_as_mpi_operator_does() -> None:
    w = world()
    await w.settle()
    worker(w, 0, "Failed", reason="Evicted")
    await w.settle()
    failed = w.condition("Failed")
    assert failed is not None and (failed["reason"], failed["message"]) == ("MPIJobEvicted", "1/2 workers are evicted")
    assert w.condition("Running")["status"] == "False"  # type: ignore[index]


async def test_a_suspended_mpijobs_launcher_goes_in_the_foreground_then_the_mpijob_is_ours() -> None:
    w = world(suspend=True)
    secret_data = copy.deepcopy(stored(w, SECRETS, f"{NAME}-ssh")["data"])  # type: ignore[index]
    deletes = record_deletes(w)
    await w.settle()
    assert deletes[0] == ("Job", f"{NAME}-launcher", "Foreground")
    roles = {j["metadata"]["name"]: j for j in w.jobs()}
    assert set(roles) == {f"{NAME}-launcher", f"{NAME}-worker"}, "ours now"
    assert all(HASH_ANNOTATION in j["metadata"]["annotations"] and j["spec"]["suspend"] for j in roles.values())
    for res, name in ((SERVICES, NAME), (CONFIGMAPS, f"{NAME}-config"), (SECRETS, f"{NAME}-ssh")):
        obj = stored(w, res, name)
        assert obj is not None and obj["metadata"]["labels"][JOB_NAME_LABEL] == NAME, name
    assert stored(w, SECRETS, f"{NAME}-ssh")["data"] == secret_data, "the key pair is kept"  # type: ignore[index]
    assert w.kube.count("create", "Secret") == 1  # asked for once (409), then labelled

    resumed = copy.deepcopy(w.obj)
    resumed["spec"]["runPolicy"]["suspend"] = False
    w.kube.put(resumed)
    await w.settle()
    assert all(j["spec"]["suspend"] is False for j in w.jobs())
    assert pods(w) == []


async def test_a_suspended_mpijobs_leftover_workers_are_deleted_too() -> None:
    w = world(suspend=True)
    worker(w, 0, "Running")
    deletes = record_deletes(w)
    await w.settle()
    assert ("Pod", f"{NAME}-worker-0", "Background") in deletes
    assert pods(w) == []


async def test_a_launcher_job_being_deleted_is_waited_for() -> None:
    w = world(suspend=True)
    await w.reconcile()  # asked for: labelled
    deleting = copy.deepcopy(launcher(w))
    deleting["metadata"]["deletionTimestamp"] = ago(0)
    w.kube.put(deleting)
    assert await w.reconcile() == 0
    assert [j["metadata"]["name"] for j in w.jobs()] == [f"{NAME}-launcher"]


async def test_a_finished_mpijob_is_left_untouched() -> None:
    succeeded = {"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded", "lastTransitionTime": ago(30)}
    w = world(workers=False, completionTime=ago(30))  # mpi-operator cleaned its workers up
    obj = copy.deepcopy(w.obj)
    obj["spec"]["runPolicy"]["ttlSecondsAfterFinished"] = 0
    obj["status"]["conditions"] = [CREATED, succeeded]
    w.kube.put(obj)
    before = len(w.kube.writes)
    await w.settle()
    assert len(w.kube.writes) == before, "no write, no delete of the MPIJob by our ttlSecondsAfterFinished"
    assert stored(w, MPIJOBS, NAME) is not None


async def test_an_mpijob_of_ours_is_never_asked_for_its_launcher() -> None:
    w = World("mpijob", "none")
    await w.settle()
    assert w.kube.count("create", "Job") == 2 and w.kube.count("merge_patch", "Job") == 0


def test_the_pod_informer_is_label_selected_and_keeps_no_pod_spec() -> None:
    w = World("mpijob", "none")
    (informer,) = [i for i in w.manager.informers if i.res == PODS]
    assert informer.label_selector == "training.kubeflow.org/operator-name=mpi-operator" == WATCHES.label
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": NS, "uid": "u", "managedFields": [{}], "annotations": {"a": "b"}},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": "Running", "reason": "x", "podIP": "10.0.0.1"},
    }
    assert kept_pod(pod) == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": NS, "uid": "u"},
        "status": {"phase": "Running", "reason": "x"},
    }


def test_a_pod_maps_to_the_mpijob_that_controls_it_only() -> None:
    ref = {"apiVersion": MPIJOBS.api_version, "kind": "MPIJob", "name": "pi", "controller": True}
    pod = {"metadata": {"namespace": NS, "name": "pi-worker-0", "ownerReferences": [ref]}}
    assert list(mpijob_of_pod(pod, None)) == [(NS, "pi")]  # type: ignore[arg-type]
    for other in ({**ref, "controller": False}, {**ref, "kind": "Job"}, {**ref, "apiVersion": "kubeflow.org/v1"}):
        pod = {"metadata": {"namespace": NS, "name": "x", "ownerReferences": [other]}}
        assert list(mpijob_of_pod(pod, None)) == []  # type: ignore[arg-type]


def test_mpi_operators_ssh_secret_has_the_keys_ours_mount() -> None:
    pod: JSON = {"spec": {"containers": [{"name": "c"}]}}
    mount_ssh(pod, "s", "/root/.ssh")
    (volume,) = pod["spec"]["volumes"]
    assert {item["key"] for item in volume["secret"]["items"]} <= set(UPSTREAM_SSH_KEYS)
