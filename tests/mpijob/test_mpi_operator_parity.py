"""MPIJob as kubeflow/mpi-operator v0.8 behaves and as Kueue's Topology Aware Scheduling reads it: the
``training.kubeflow.org/replica-index`` label, the launcher's scheduling directives applied when a
suspended job is resumed (#772), ``Running`` never re-emitted once finished (#787), terminating pods
not replaced (#810), ``status.lastReconcileTime`` never written (v0.8.2 declares it and writes it nowhere)."""

from __future__ import annotations

import copy
from typing import Any

from tests.harness import World, ago
from tests.kube_double import RecordingKube
from trainer.api.kinds import EVENTS, JOBS, MPIJOBS
from trainer.api.labels import REPLICA_INDEX_LABEL
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError
from trainer.mpijob.children import worker_replica_index

KUEUE_DIRECTIVES: JSON = {
    "nodeSelector": {"cloud.provider.com/topology-block": "b1"},
    "tolerations": [{"key": "reserved", "operator": "Equal", "value": "mpi", "effect": "NoSchedule"}],
    "schedulingGates": [{"name": "kueue.x-k8s.io/topology"}],
}
"""What Kueue writes into an MPIJob's templates when it admits the job (``RunWithPodSetsInfo``)."""


def job(w: World, role: str) -> JSON:
    (found,) = [j for j in w.jobs() if j["metadata"]["name"] == f"pi-{role}"]
    return found


def events(w: World, reason: str) -> list[JSON]:
    return [o for (res, _), o in w.kube.objects.items() if res == EVENTS and o["reason"] == reason]


def edit(w: World, change: Any) -> None:
    """A user (or Kueue) changes the stored MPIJob."""
    obj = copy.deepcopy(w.kube.objects[(MPIJOBS, w.key)])
    change(obj)
    w.kube.put(obj)


def ready(w: World) -> None:
    """The Job controller: every pod of both Jobs is running and ready."""
    w.set_status(JOBS, job(w, "launcher"), {"active": 1, "ready": 1, "startTime": ago(5)})
    w.set_status(JOBS, job(w, "worker"), {"active": 2, "ready": 2, "startTime": ago(5)})


def running_false_before_completion(w: World, message: str) -> None:
    """``Running`` is False with mpi-operator's reason and ``message``, not after ``completionTime``."""
    running = w.condition("Running")
    assert running is not None
    assert (running["status"], running["reason"], running["message"]) == ("False", "MPIJobRunning", message)
    assert running["lastTransitionTime"] <= w.obj["status"]["completionTime"]


class StartedTemplates(RecordingKube):
    """The apiserver's rule for a Job that has started (``status.startTime``): its Pod template is
    immutable, so an apply that changes it is refused (422) until startTime is cleared."""

    async def apply(self, obj: JSON, manager: str, force: bool = True, *, dry_run: bool = False) -> JSON:
        old = self.objects.get((JOBS, (obj["metadata"].get("namespace") or "", obj["metadata"]["name"])))
        started = old is not None and (old.get("status") or {}).get("startTime")
        if obj.get("kind") == "Job" and started and obj["spec"]["template"] != old["spec"]["template"]:  # type: ignore[index]
            raise ApiError(422, {"reason": "Invalid", "message": "spec.template: field is immutable"})
        return await super().apply(obj, manager, force, dry_run=dry_run)


async def test_the_launcher_running_as_a_worker_is_replica_index_0_and_workers_follow_from_1() -> None:
    w = World("mpijob", "none")
    await w.settle()
    assert REPLICA_INDEX_LABEL not in job(w, "launcher")["spec"]["template"]["metadata"]["labels"]
    assert [worker_replica_index(i, False) for i in range(2)] == ["0", "1"]
    w = World("mpijob", "none")
    edit(w, lambda o: o["spec"].update(runLauncherAsWorker=True))
    await w.settle()
    assert job(w, "launcher")["spec"]["template"]["metadata"]["labels"][REPLICA_INDEX_LABEL] == "0"
    assert [worker_replica_index(i, True) for i in range(2)] == ["1", "2"]


async def test_resuming_carries_kueues_scheduling_directives_to_the_launcher_that_had_started() -> None:
    """Suspended, started once (Kueue evicted it), admitted again with new directives: the started
    launcher's startTime is cleared and its template gets the directives with the resume (#772)."""
    w = _world_on(StartedTemplates())
    edit(w, lambda o: o["spec"].setdefault("runPolicy", {}).update(suspend=True))
    await w.settle()
    w.set_status(JOBS, job(w, "launcher"), {"startTime": ago(60)})

    def admit(o: JSON) -> None:
        o["spec"]["runPolicy"]["suspend"] = False
        for role in ("Launcher", "Worker"):
            o["spec"]["mpiReplicaSpecs"][role]["template"]["spec"].update(copy.deepcopy(KUEUE_DIRECTIVES))

    edit(w, admit)
    await w.settle()
    launcher = job(w, "launcher")
    assert launcher["spec"]["suspend"] is False
    assert not (launcher.get("status") or {}).get("startTime")
    pod = launcher["spec"]["template"]["spec"]
    assert {k: pod.get(k) for k in KUEUE_DIRECTIVES} == KUEUE_DIRECTIVES
    assert w.kube.count("delete", "Job") == 0, "mended in place, not recreated"


def _world_on(kube: RecordingKube) -> World:
    """A :class:`World` of the MPIJob sample over ``kube``."""
    from tests.conftest import load_sample
    from trainer.framework.kube.cache import key_of
    from trainer.wiring import Settings, new_manager

    w = World.__new__(World)
    w.controller, w.resource = "mpijob", MPIJOBS
    w.kube = kube
    w.manager = new_manager(kube, Settings(gang_scheduler_name="none", status_coalesce_seconds=0))
    kube.connect(w.manager.informers)
    w.key = key_of(kube.put(load_sample("mpijob.yaml")))
    return w


async def test_running_is_not_re_emitted_once_finished() -> None:
    """Seen running, then the launcher's Job completes while its pod still looks ready: Running turns
    False keeping its reason and message, told by no event, and stays so."""
    w = World("mpijob", "none")
    await w.settle()
    ready(w)
    await w.settle()
    assert w.condition("Running") is not None and w.condition("Running")["status"] == "True"  # type: ignore[index]
    assert len(events(w, "MPIJobRunning")) == 1
    w.set_status(JOBS, job(w, "launcher"), {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]})
    await w.settle()
    running_false_before_completion(w, "MPIJob default/pi is running.")
    assert w.obj["status"]["conditions"][-1]["type"] == "Succeeded"
    assert len(events(w, "MPIJobRunning")) == 1, "no second MPIJobRunning event"


async def test_a_job_finished_before_it_was_seen_running_gets_running_false() -> None:
    w = World("mpijob", "none")
    await w.settle()
    w.complete_jobs()
    await w.settle()
    running_false_before_completion(w, "MPIJob default/pi is finished but Running condition was never set.")
    assert events(w, "MPIJobRunning") == []


async def test_terminating_pods_are_not_replaced_before_they_are_gone() -> None:
    w = World("mpijob", "none")
    await w.settle()
    assert job(w, "launcher")["spec"]["podReplacementPolicy"] == "Failed"
    assert job(w, "worker")["spec"]["podReplacementPolicy"] == "Failed"


def worker_pod(index: str, **labels: str) -> JSON:
    """A pod as an MPIJob's Indexed worker Job creates it, before admission."""
    base = {
        "training.kubeflow.org/job-name": "pi",
        "training.kubeflow.org/operator-name": "mpi-operator",
        "training.kubeflow.org/replica-type": "worker",
        "batch.kubernetes.io/job-completion-index": index,
    }
    meta = {"namespace": "default", "labels": {**base, **labels}}
    return {"metadata": {**meta, "annotations": {"batch.kubernetes.io/job-completion-index": index}}}


def test_admission_labels_each_worker_pod_with_its_replica_index() -> None:
    from trainer.webhook import rules

    stored: dict[str, JSON] = {"pi": {"spec": {}}, "pal": {"spec": {"runLauncherAsWorker": True}}}
    facts = rules.AdmissionFacts(
        runtime=lambda *_: None,
        active_pods=lambda *_: 0,
        volcano_queues=lambda: None,
        local_queue_exists=lambda *_: None,
        mpijob=lambda _ns, name: stored.get(name),
    )
    path = "/metadata/labels/training.kubeflow.org~1replica-index"
    assert rules.replica_index_patch(worker_pod("3"), facts) == [{"op": "add", "path": path, "value": "3"}]
    pal = worker_pod("3", **{"training.kubeflow.org/job-name": "pal"})
    assert rules.replica_index_patch(pal, facts) == [{"op": "add", "path": path, "value": "4"}]
    assert rules.replica_index_patch(worker_pod("1", **{REPLICA_INDEX_LABEL: "1"}), facts) == []
    trainjob_pod = worker_pod("1", **{"training.kubeflow.org/operator-name": "trainer"})
    assert rules.replica_index_patch(trainjob_pod, facts) == []


async def test_the_status_never_carries_last_reconcile_time_as_mpi_operator_never_writes_it() -> None:
    w = World("mpijob", "none")
    await w.settle()
    ready(w)
    await w.settle()
    status = w.obj["status"]
    assert status["startTime"] and status["replicaStatuses"], "the status is written"
    assert "lastReconcileTime" not in status
    assert await w.reconcile() == 0, "a settled job is not written again"
