"""A job whose pods cannot be created says why: the Job controller's ``FailedCreate`` Events on its Jobs
become condition ``ReplicaFailure`` on the TrainJob or MPIJob (pure part, then the reconcile)."""

from __future__ import annotations

import copy
import itertools

import pytest

from tests.harness import World, ago
from tests.kube_double import TableStore
from trainer.api.conditions import COND_REPLICA_FAILURE, REASON_FAILED_CREATE
from trainer.api.kinds import EVENTS, JOBS, MPIJOBS, TRAINJOBS
from trainer.framework.controller import Reader
from trainer.framework.json_codec import JSON
from trainer.jobs.features.replica_failure import FIELD_SELECTOR, jobs_owner, kept_event, replica_failure, same_cause
from trainer.jobs.features.replica_failure import about as about_uid

QUOTA = (
    'pods "{pod}" is forbidden: exceeded quota: pods, requested: count/pods=1, used: count/pods=0, '
    "limited: count/pods=0"
)
_names = itertools.count()


def job(name: str = "pi-node-0-0", uid: str = "uid-j", **status: object) -> JSON:
    """A running Job of 2 pods the Job controller started a minute ago, controlled by TrainJob ``pi``."""
    owner = {"apiVersion": TRAINJOBS.api_version, "kind": "TrainJob", "name": "pi", "uid": "uid-t", "controller": True}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "uid": uid, "ownerReferences": [owner]},
        "spec": {"parallelism": 2, "completions": 2},
        "status": {"startTime": ago(60), **status},
    }


def event(about: JSON, message: str | None = None, seconds_ago: float = 0, pod: str = "x7k2p") -> JSON:
    """The Job controller's ``FailedCreate`` Event about the Job ``about``."""
    meta = about["metadata"]
    text = message if message is not None else "Error creating: " + QUOTA.format(pod=f"{meta['name']}-{pod}")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{next(_names):x}", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
            "resourceVersion": "12",
        },
        "reason": "FailedCreate",
        "message": text,
        "type": "Warning",
        "source": {"component": "job-controller"},
        "firstTimestamp": ago(seconds_ago),
        "lastTimestamp": ago(seconds_ago),
        "count": 1,
    }


def about(*events: JSON):  # type: ignore[no-untyped-def]
    def events_about(uid: str) -> list[JSON]:
        return [e for e in events if e["involvedObject"]["uid"] == uid]

    return events_about


def test_an_event_about_a_job_that_lacks_pods_names_the_job_and_the_apiservers_message() -> None:
    j = job(active=1)
    cond = replica_failure([j], about(event(j)), [])
    assert cond is not None
    assert (cond.type, cond.status, cond.reason) == (COND_REPLICA_FAILURE, "True", REASON_FAILED_CREATE)
    assert cond.message.startswith("Job pi-node-0-0: Error creating: pods ")
    assert "exceeded quota: pods" in cond.message


@pytest.mark.parametrize(
    ("why", "status", "spec"),
    [
        ("every pod is there", {"active": 2}, {}),
        ("every pod is there or done", {"active": 1, "succeeded": 1}, {}),
        ("suspended: it creates no pods", {}, {"suspend": True}),
        ("finished", {"conditions": [{"type": "Complete", "status": "True"}]}, {}),
    ],
)
def test_no_condition_when_the_job_lacks_no_pod(why: str, status: JSON, spec: JSON) -> None:
    j = job(**status)
    j["spec"].update(spec)
    assert replica_failure([j], about(event(j)), []) is None, why


def test_an_event_about_an_earlier_job_of_the_same_name_does_not_count() -> None:
    earlier = job(uid="uid-old")
    now = job(uid="uid-new")
    stale = event(earlier)
    assert replica_failure([now], lambda uid: [stale], []) is None


def test_an_event_from_before_the_job_last_started_does_not_count() -> None:
    j = job()
    j["status"]["startTime"] = ago(10)  # resumed 10 s ago
    assert replica_failure([j], about(event(j, seconds_ago=120)), []) is None
    assert replica_failure([j], about(event(j, seconds_ago=1)), []) is not None


def test_the_latest_event_of_the_first_failing_job_by_name_is_told() -> None:
    a, b = job("pi-node-0-0", "uid-a"), job("pi-node-0-1", "uid-b")
    old, new = event(a, "Error creating: old", seconds_ago=30), event(a, "Error creating: new", seconds_ago=2)
    cond = replica_failure([b, a], about(event(b), old, new), [])
    assert cond is not None and cond.message == "Job pi-node-0-0: Error creating: new"


def test_the_aggregators_prefix_is_dropped() -> None:
    j = job()
    combined = event(j, "(combined from similar events): Error creating: boom")
    cond = replica_failure([j], about(combined), [])
    assert cond is not None and cond.message == "Job pi-node-0-0: Error creating: boom"


def test_the_same_refusal_for_another_pod_name_keeps_the_message_another_refusal_changes_it() -> None:
    j = job()
    first = replica_failure([j], about(event(j, pod="aaaaa")), [])
    assert first is not None
    again = replica_failure([j], about(event(j, pod="bbbbb")), [first])
    assert again is not None and again.message == first.message, "the same cause: not written again"
    other = event(j, 'Error creating: pods "pi-node-0-0-ccccc" is forbidden: violates PodSecurity "restricted"')
    changed = replica_failure([j], about(other), [first])
    assert changed is not None and "PodSecurity" in changed.message


def test_same_cause_ignores_only_the_pod_name() -> None:
    assert same_cause('Job a: pods "a-0-xxxxx" is forbidden: q', 'Job a: pods "a-0-yyyyy" is forbidden: q')
    assert same_cause('Job a: Pod "a-0-xxxxx" is invalid: f', 'Job a: Pod "a-0-zzzzz" is invalid: f')
    assert not same_cause('Job a: pods "a-0-x" is forbidden: q', 'Job b: pods "b-0-x" is forbidden: q')
    assert not same_cause("Job a: used: count/pods=0", "Job a: used: count/pods=1")


def test_what_the_cache_keeps_of_an_event() -> None:
    e = event(job())
    e["metadata"].update(
        {"uid": "ev", "resourceVersion": "7", "managedFields": [{"manager": "kube-controller-manager"}]}
    )
    e.update({"reportingComponent": "", "reportingInstance": "", "series": {"count": 3, "lastObservedTime": "t"}})
    kept = kept_event(e)
    assert kept["metadata"] == {"name": e["metadata"]["name"], "namespace": "default", "resourceVersion": "7"}
    assert kept["involvedObject"] == {"kind": "Job", "name": "pi-node-0-0", "namespace": "default", "uid": "uid-j"}
    assert kept["series"] == {"lastObservedTime": "t"}
    assert not {"source", "count", "reportingInstance", "reportingComponent"} & kept.keys()


def test_an_event_maps_to_the_job_that_controls_its_job_of_the_same_incarnation() -> None:
    j = job()
    reader = Reader("trainjob", {JOBS: TableStore([j])})
    to_keys = jobs_owner(TRAINJOBS)
    assert list(to_keys(event(j), reader)) == [("default", "pi")]
    assert list(jobs_owner(MPIJOBS)(event(j), reader)) == [], "not an MPIJob's Job"
    assert list(to_keys(event(job(uid="uid-old")), reader)) == [], "an earlier Job of that name"
    assert list(to_keys(event(job(name="other")), reader)) == [], "a Job not cached (not the job's)"


def test_events_are_read_by_the_job_they_are_about() -> None:
    a, b = job("a", "uid-a"), job("b", "uid-b")
    reader = Reader("trainjob", {EVENTS: TableStore([event(a), event(b)], index_by=about_uid)})
    assert [e["involvedObject"]["name"] for e in reader.about(EVENTS, "uid-b")] == ["b"]


def test_the_field_selector_names_the_job_controllers_failed_creates() -> None:
    assert set(FIELD_SELECTOR.split(",")) == {"involvedObject.kind=Job", "reason=FailedCreate", "source=job-controller"}


# ------------------------------------------------------------------ the reconcile


def started(w: World, active: int = 0) -> list[JSON]:
    """The Job controller starts every Job of ``w`` with ``active`` pods; returns the Jobs."""
    for j in w.jobs():
        w.set_status(JOBS, j, {"startTime": ago(5), "active": active})
    return sorted(w.jobs(), key=lambda j: j["metadata"]["name"])


def told(w: World) -> list[str]:
    """The messages of the Warning events written about the sample's job with reason FailedCreate."""
    return [
        x.body["message"]
        for x in w.kube.writes
        if x.kind == "Event" and x.body.get("reason") == REASON_FAILED_CREATE and x.body["type"] == "Warning"
    ]


async def test_a_trainjob_says_which_job_cannot_create_pods_and_loses_it_when_they_are_created() -> None:
    w = World("torch", "none")
    await w.settle()
    first = started(w)[0]
    w.kube.put(event(first, pod="aaaaa"))
    assert w.key in w.manager.queues["trainjob"]._waiting, "the Event brings the TrainJob's reconcile"
    await w.reconcile()
    cond = w.condition(COND_REPLICA_FAILURE)
    assert cond is not None and cond["reason"] == REASON_FAILED_CREATE, w.obj["status"]
    assert cond["message"].startswith(f"Job {first['metadata']['name']}: Error creating:")
    assert "exceeded quota" in cond["message"]
    assert told(w) == [cond["message"]], "one Warning event"
    assert await w.reconcile() == 0, "settled: nothing written again"

    w.kube.put(event(first, pod="bbbbb"))  # the Job controller tries again, refused the same way
    assert await w.reconcile() == 0 and len(told(w)) == 1, "the same refusal is not told again"

    w.kube.put(event(first, 'Error creating: pods "p" is forbidden: violates PodSecurity "restricted:latest"'))
    await w.reconcile()
    message = w.condition(COND_REPLICA_FAILURE)["message"]  # type: ignore[index]
    assert "PodSecurity" in message and told(w)[-1] == message and len(told(w)) == 2, "another refusal: told"

    for j in w.jobs():  # the quota was raised: every pod is created
        w.set_status(JOBS, j, {"active": j["spec"]["parallelism"]})
    await w.reconcile()
    assert w.condition(COND_REPLICA_FAILURE) is None, w.obj["status"]
    assert await w.settle() is None and await w.reconcile() == 0
    refused = {"kind": "TrainJob", "reason": REASON_FAILED_CREATE}
    count = w.manager.metrics.registry.get_sample_value("kubeflow_trainer_job_refusals_total", refused)
    assert count == 1, "one refusal: the condition turned True once (its new message is no new refusal)"


async def test_events_of_jobs_the_trainjob_does_not_control_or_earlier_jobs_are_ignored() -> None:
    w = World("torch", "none")
    await w.settle()
    first = started(w)[0]
    foreign = copy.deepcopy(first)
    foreign["metadata"] = {"name": "someone-elses", "namespace": "default", "labels": first["metadata"]["labels"]}
    foreign = w.kube.put(foreign)
    earlier = copy.deepcopy(first)
    earlier["metadata"]["uid"] = "uid-of-an-earlier-job"
    w.kube.put(event(foreign))
    w.kube.put(event(earlier))
    assert await w.reconcile() == 0
    assert w.condition(COND_REPLICA_FAILURE) is None


async def test_a_finished_trainjob_carries_no_replica_failure() -> None:
    w = World("torch", "none")
    await w.settle()
    first = started(w)[0]
    w.kube.put(event(first))
    await w.reconcile()
    assert w.condition(COND_REPLICA_FAILURE) is not None
    w.complete_jobs()
    await w.settle()
    assert w.condition("Complete") is not None and w.condition(COND_REPLICA_FAILURE) is None


async def test_an_mpijob_says_which_job_cannot_create_pods() -> None:
    w = World("mpijob", "none")
    await w.settle()
    worker = next(j for j in started(w) if j["metadata"]["name"].endswith("-worker"))
    w.kube.put(event(worker))
    assert w.key in w.manager.queues["mpijob"]._waiting
    await w.reconcile()
    cond = w.condition(COND_REPLICA_FAILURE)
    assert cond is not None and cond["message"].startswith(f"Job {worker['metadata']['name']}: Error creating:")
    assert len(told(w)) == 1 and await w.reconcile() == 0
    for j in w.jobs():
        w.set_status(JOBS, j, {"active": j["spec"].get("parallelism", 1)})
    await w.reconcile()
    assert w.condition(COND_REPLICA_FAILURE) is None


def test_both_controllers_share_one_events_cache() -> None:
    w = World("torch", "none")
    events = [i for i in w.manager.informers if i.res == EVENTS]
    assert len(events) == 1 and events[0].field_selector == FIELD_SELECTOR
    stores = {id(r.stores[EVENTS]) for r in w.manager.readers.values() if EVENTS in r.stores}
    assert stores == {id(events[0])}
    assert sum(EVENTS in r.stores for r in w.manager.readers.values()) == 2  # not the OptimizationJob controller
