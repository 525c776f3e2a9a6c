"""The lifecycle metrics of jobs after scripted lives on the recording double of ``Kube`` wired by the
real manager: each observed once, on the status write that records it, never again on a repeated
reconcile, a write from a stale cache or a fresh manager over the same stored objects."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from tests.harness import RuntimeWrapper, TrainJobWrapper, World, ago
from trainer.api.jobkinds import MPIJOB, TRAINJOB
from trainer.api.kinds import JOBS, TRAINJOBS
from trainer.framework.json_codec import JSON
from trainer.framework.metrics import Metrics
from trainer.jobs.facts import pods_wanted
from trainer.jobs.features.lifecycle import JobMetrics, LifecycleObserver, refusals, restart_reason, state_of
from trainer.wiring import Settings, new_manager


def value(m: Metrics, name: str, labels: dict[str, str]) -> float:
    """The sample ``name`` with ``labels`` (0 when it is not exported)."""
    got = m.registry.get_sample_value(name, labels)
    return got if got is not None else 0.0


def born(w: World, seconds_ago: float = 30) -> None:
    """Give the stored TrainJob a creationTimestamp ``seconds_ago``."""
    obj = copy.deepcopy(w.tj)
    obj["metadata"]["creationTimestamp"] = ago(seconds_ago)
    w.kube.put(obj)


def ready_jobs(w: World) -> None:
    """The Job controller: every pod of every Job ready."""
    for job in w.jobs():
        w.set_status(JOBS, job, {"active": pods_wanted(job), "ready": pods_wanted(job)})


def lifecycle(m: Metrics, kind: str = "TrainJob", gang: str = "none") -> dict[str, float]:
    """The lifecycle samples of ``kind`` under ``gang``, by short name."""
    labels = {"kind": kind, "gang_scheduler": gang}
    return {
        "admitted": value(m, "kubeflow_trainer_job_admission_wait_seconds_count", labels),
        "admitted_sum": value(m, "kubeflow_trainer_job_admission_wait_seconds_sum", labels),
        "startup": value(m, "kubeflow_trainer_job_startup_seconds_count", labels),
        "run_succeeded": value(m, "kubeflow_trainer_job_run_seconds_count", {**labels, "result": "succeeded"}),
        "run_failed": value(m, "kubeflow_trainer_job_run_seconds_count", {**labels, "result": "failed"}),
    }


def states(m: Metrics, kind: str = "TrainJob", gang: str = "none") -> dict[str, float]:
    out = {}
    for state in ("Created", "Suspended", "Running", "Complete", "Failed"):
        out[state] = value(m, "kubeflow_trainer_jobs", {"kind": kind, "gang_scheduler": gang, "state": state})
    return out


async def test_a_job_life_is_observed_once_per_transition_and_not_again_by_reconciles() -> None:
    w = World("torch", "none")
    born(w, 30)
    m = w.manager.metrics
    await w.settle()
    assert lifecycle(m)["admitted"] == 0, "startTime is written with the Jobs' first counts, none yet"
    (job,) = w.jobs()
    w.set_status(JOBS, job, {"active": 2})
    await w.settle()
    assert lifecycle(m)["admitted"] == 1 and 29 <= lifecycle(m)["admitted_sum"] <= 40
    assert lifecycle(m)["startup"] == 0, "no pod ready yet"
    assert states(m) == {"Created": 1, "Suspended": 0, "Running": 0, "Complete": 0, "Failed": 0}
    w.set_status(JOBS, job, {"active": 2, "ready": 1})  # the first of its two pods runs
    await w.settle()
    assert lifecycle(m)["startup"] == 1, "the first pod"
    assert states(m)["Created"] == 1, "Running once a whole Job is ready, as jobsStatus says"
    ready_jobs(w)
    await w.settle()
    assert lifecycle(m)["startup"] == 1
    assert states(m)["Running"] == 1
    for _ in range(3):
        await w.reconcile()
    w.complete_jobs()
    await w.settle()
    await w.settle()
    got = lifecycle(m)
    assert (got["admitted"], got["startup"], got["run_succeeded"], got["run_failed"]) == (1, 1, 1, 0)
    assert states(m) == {"Created": 0, "Suspended": 0, "Running": 0, "Complete": 1, "Failed": 0}


async def test_a_fresh_manager_over_the_same_objects_observes_nothing_again() -> None:
    w = World("torch", "none")
    born(w)
    await w.settle()
    ready_jobs(w)
    await w.settle()
    # The operator restarted: a new process (new metrics) over the same stored objects.
    w.manager = new_manager(w.kube, Settings(gang_scheduler_name="none", status_coalesce_seconds=0))
    w.kube.connect(w.manager.informers)
    await w.settle()
    m = w.manager.metrics
    assert lifecycle(m) == dict.fromkeys(lifecycle(m), 0.0), "nothing it saw happen"
    assert states(m)["Running"] == 1, "the gauge reads the caches"
    w.complete_jobs()
    await w.settle()
    assert lifecycle(m)["run_succeeded"] == 1, "the finish is a transition of the stored status"
    await w.settle()
    assert lifecycle(m)["run_succeeded"] == 1


async def test_a_suspended_job_waits_for_admission_and_a_resume_is_observed_once() -> None:
    tj = TrainJobWrapper().obj()
    tj["spec"]["suspend"] = True
    tj["metadata"]["creationTimestamp"] = ago(120)
    w = World(objects=[RuntimeWrapper().obj(), tj])
    m = w.manager.metrics
    await w.settle()
    assert states(m)["Suspended"] == 1 and lifecycle(m)["admitted"] == 0
    for suspend in (False, True, False):
        obj = copy.deepcopy(w.tj)
        obj["spec"]["suspend"] = suspend
        w.kube.put(obj)
        await w.settle()
    got = lifecycle(m)
    assert got["admitted"] == 1 and got["admitted_sum"] >= 119, "the first resume only"
    assert states(m)["Suspended"] == 0


async def test_failures_and_restarts_are_counted_by_bounded_reason_once() -> None:
    runtime = RuntimeWrapper().failure_policy(
        {"maxRestarts": 1, "rules": [{"name": "myOwnRule", "action": "RestartJobSet"}]}
    )
    tj = TrainJobWrapper().obj()
    tj["metadata"]["creationTimestamp"] = ago(60)
    w = World(objects=[runtime.obj(), tj])
    m = w.manager.metrics
    await w.settle()
    w.fail_jobs("BackoffLimitExceeded")
    await w.settle()
    await w.settle()
    restarts = {"kind": "TrainJob", "gang_scheduler": "none", "reason": "FailurePolicy"}
    assert value(m, "kubeflow_trainer_job_restarts_total", restarts) == 1, "the rule's own name folded"
    w.fail_jobs("BackoffLimitExceeded")
    await w.settle()
    await w.settle()
    failures = {"kind": "TrainJob", "gang_scheduler": "none", "reason": "ReachedMaxRestarts"}
    assert value(m, "kubeflow_trainer_job_failures_total", failures) == 1
    assert value(m, "kubeflow_trainer_job_restarts_total", restarts) == 1
    assert lifecycle(m)["run_failed"] == 1
    assert states(m)["Failed"] == 1


async def test_a_refusal_is_counted_once_per_transition() -> None:
    w = World("torch", "none")
    # Someone else's Service of the job's name: ErrResourceExists, counted once however often reconciled.
    theirs: JSON = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": w.key[1], "namespace": w.key[0]}}
    w.kube.put({**theirs, "metadata": {**theirs["metadata"], "labels": {"jobset.sigs.k8s.io/jobset-name": "x"}}})
    for _ in range(3):
        await w.reconcile()
        w.reconciler().children._refusals.clear()  # the retry is due
    cond = w.condition("Misconfigured")
    assert cond is not None and cond["reason"] == "ErrResourceExists"
    m = w.manager.metrics
    assert value(m, "kubeflow_trainer_job_refusals_total", {"kind": "TrainJob", "reason": "ErrResourceExists"}) == 1


def test_state_of_follows_the_state_column_for_both_kinds() -> None:
    def obj(spec: JSON, conditions: list[JSON], **status: Any) -> JSON:
        return {"metadata": {}, "spec": spec, "status": {"conditions": conditions, **status}}

    true = "True"
    assert state_of(obj({}, []), TRAINJOB) == "Created"
    assert state_of(obj({"suspend": True}, []), TRAINJOB) == "Suspended"
    assert state_of(obj({}, [], jobsStatus=[{"name": "node", "ready": 1}]), TRAINJOB) == "Running"
    assert state_of(obj({}, [{"type": "Complete", "status": true}]), TRAINJOB) == "Complete"
    both = [{"type": "Complete", "status": true}, {"type": "Failed", "status": true}]
    assert state_of(obj({}, both), TRAINJOB) == "Failed", "Failed wins, as upstream"
    running = [{"type": "Created", "status": true}, {"type": "Running", "status": true}]
    assert state_of(obj({}, running), MPIJOB) == "Running"
    assert state_of(obj({"runPolicy": {"suspend": True}}, running[:1]), MPIJOB) == "Suspended"
    assert state_of(obj({}, [{"type": "Succeeded", "status": true}]), MPIJOB) == "Complete"


def test_reasons_are_bounded_and_a_refusal_is_new_only_when_its_condition_turns() -> None:
    restarting = {"type": "RestartingJobSet", "status": "True", "reason": "FailurePolicy_anything"}
    assert restart_reason({"conditions": [restarting]}) == "FailurePolicy"
    assert restart_reason({"conditions": [{**restarting, "reason": "Whatever"}]}) == "other"
    refused = {"type": "Misconfigured", "status": "True", "reason": "ErrResourceExists", "lastTransitionTime": "t"}
    assert refusals({}, {"conditions": [refused]}) == [("ErrResourceExists", "")]
    assert refusals({"conditions": [refused]}, {"conditions": [refused]}) == []
    other = {**refused, "reason": "NodeLimitExceeded"}
    assert refusals({}, {"conditions": [other]}) == [], "not a refusal of a child"
    gone = {**refused, "status": "False"}
    assert refusals({"conditions": [gone]}, {"conditions": [refused]}) == [("ErrResourceExists", "t")]
    pods = {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate"}
    apiserver = {**refused, "reason": "TrainJobResourcesCreationFailed"}
    both = refusals({"conditions": [refused]}, {"conditions": [apiserver, pods]})
    assert both == [("TrainJobResourcesCreationFailed", "t"), ("FailedCreate", "")], "another reason is another refusal"


async def test_a_stale_cache_writing_a_finish_twice_counts_it_once() -> None:
    from trainer.api.base import Condition

    w = World("torch", "none")
    stale = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    failed = Condition(type="Failed", status="True", reason="FailedJobs", message="Job x failed")
    reconciler = w.reconciler()
    await reconciler.status.write(stale, None, [failed])
    await reconciler.status.write(stale, None, [failed])
    m = w.manager.metrics
    failures = {"kind": "TrainJob", "gang_scheduler": "none", "reason": "FailedJobs"}
    assert value(m, "kubeflow_trainer_job_failures_total", failures) == 1


async def test_an_mpijob_life_is_observed_under_its_own_kind() -> None:
    w = World("mpijob", "none")
    born(w, 10)
    m = w.manager.metrics
    await w.settle()
    mpi = lifecycle(m, "MPIJob")
    assert mpi["admitted"] == 1 and lifecycle(m)["admitted"] == 0, "by kind"
    for job in w.jobs():
        w.set_status(JOBS, job, {"active": pods_wanted(job), "ready": pods_wanted(job)})
    await w.settle()
    running = w.condition("Running")
    assert running is not None and running["status"] == "True"
    assert lifecycle(m, "MPIJob")["startup"] == 1
    assert states(m, "MPIJob")["Running"] == 1
    w.complete_jobs()
    await w.settle()
    await w.settle()
    assert lifecycle(m, "MPIJob")["run_succeeded"] == 1
    assert states(m, "MPIJob") == {"Created": 0, "Suspended": 0, "Running": 0, "Complete": 1, "Failed": 0}


class _Info:
    """A reconcile's view of a job, as the observer reads it."""

    def __init__(self, pod_ready: bool) -> None:
        self.pod_ready = pod_ready


def test_the_observer_alone_decides_and_counts_each_transition_once_in_both_families() -> None:
    m = Metrics()
    observer = LifecycleObserver(JobMetrics.of(m), MPIJOB, "volcano")
    obj: JSON = {"metadata": {"uid": "u", "namespace": "ns", "creationTimestamp": ago(30)}, "spec": {}}
    failed = {"type": "Failed", "status": "True", "reason": "MPIJobFailed", "lastTransitionTime": ago(0)}
    observer.observed(obj, {}, None, _Info(pod_ready=True))  # a first status held back: nothing written
    startup = {"kind": "MPIJob", "gang_scheduler": "volcano"}
    assert value(m, "kubeflow_trainer_job_startup_seconds_count", startup) == 1, "born, and a pod runs"
    created = {"conditions": [{"type": "Created", "status": "True"}]}
    for _ in range(2):  # the second from a cache that had not seen the first
        observer.observed(obj, {}, created, _Info(pod_ready=True))
        observer.observed(obj, created, {"conditions": [*created["conditions"], failed]}, None)
    outcome = {"kind": "MPIJob", "namespace": "ns", "runtime": ""}
    assert value(m, "trainer_jobs_created_total", outcome) == 1
    assert value(m, "trainer_jobs_failed_total", {**outcome, "reason": "MPIJobFailed"}) == 1
    assert value(m, "kubeflow_trainer_job_failures_total", {**startup, "reason": "MPIJobFailed"}) == 1
    assert value(m, "kubeflow_trainer_job_startup_seconds_count", startup) == 1
    assert value(m, "kubeflow_trainer_job_run_seconds_count", {**startup, "result": "failed"}) == 0, "never started"


class JobTable:
    """A cache of jobs that tells its handlers of every change, as an informer does."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], JSON] = {}
        self.handlers: list[Callable[[JSON | None, JSON | None], None]] = []

    def items(self) -> list[JSON]:
        return list(self.objects.values())

    def get(self, namespace: str | None, name: str) -> JSON | None:
        return self.objects.get((namespace or "", name))

    def add_handler(self, handler: Callable[[JSON | None, JSON | None], None]) -> None:
        self.handlers.append(handler)

    def set(self, obj: JSON) -> None:
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        old, self.objects[key] = self.objects.get(key), obj
        for h in self.handlers:
            h(old, obj)

    def remove(self, name: str) -> None:
        old = self.objects.pop(("n", name))
        for h in self.handlers:
            h(old, None)


def test_job_states_derives_the_state_of_changed_jobs_only_and_forgets_jobs_gone(monkeypatch: Any) -> None:
    import trainer.jobs.features.lifecycle as lifecycle_module

    derived: list[str] = []

    def counting_state_of(obj: JSON, facts: Any) -> str:
        derived.append(obj["metadata"]["name"])
        return state_of(obj, facts)

    monkeypatch.setattr(lifecycle_module, "state_of", counting_state_of)

    def job(name: str, rv: str, conditions: list[JSON] | None = None) -> JSON:
        return {
            "metadata": {"namespace": "n", "name": name, "resourceVersion": rv},
            "status": {"conditions": conditions},
        }

    complete = [{"type": "Complete", "status": "True"}]
    table = JobTable()
    for name in ("a", "b", "skip"):
        table.set(job(name, "1"))
    states = lifecycle_module.JobStates(table, TRAINJOB, lambda o: o["metadata"]["name"] != "skip")
    assert states() == {"Created": 2} and sorted(derived) == ["a", "b"], "the first scrape reads every job"
    assert states() == {"Created": 2} and len(derived) == 2, "nothing changed: nothing derived"
    table.set(job("a", "2", complete))
    assert states() == {"Complete": 1, "Created": 1} and derived[2:] == ["a"], "only the job that changed"
    table.remove("b")
    assert states() == {"Complete": 1} and derived[3:] == [], "a job gone is forgotten"
    table.set(job("b", "1"))
    table.set(job("skip", "2", complete))
    assert states() == {"Complete": 1, "Created": 1} and derived[3:] == ["b"], "a job not counted stays out"
    monkeypatch.setattr(lifecycle_module, "MAX_CHANGED", 1)
    table.set(job("c", "1"))
    table.set(job("d", "1"))  # past MAX_CHANGED: the changes are let go and the next scrape reads all
    assert states() == {"Complete": 1, "Created": 3} and sorted(derived[4:]) == ["a", "b", "c", "d"]
