"""TrainJobs Kubeflow Trainer started (:mod:`trainer.trainjob.features.upstream_jobset`), on the recording
double of ``Kube`` wired by the real manager: a running one finishes under its JobSet with the JobSet's
status on the TrainJob and no child of ours; a suspended one's JobSet is deleted in the foreground, then
the TrainJob runs under this operator; a finished one is left untouched; a deadline fails it and deletes
the JobSet, as upstream's ``reconcileDeadline``. Upstream's YAML runtime snapshot is read; one it made
without this operator's label is labelled, not created again."""

from __future__ import annotations

import copy

import pytest
import yaml

from tests.harness import RuntimeWrapper, TrainJobWrapper, World, ago
from trainer.api.kinds import CONFIGMAPS, JOBSETS, TRAINJOBS
from trainer.api.snapshot import runtime_of_snapshot
from trainer.framework.json_codec import JSON
from trainer.trainjob.features.upstream_jobset import jobset_status, kept_jobset, trainjob_of_jobset


def world(suspend: bool = False, deadline: int | None = None) -> World:
    tj = TrainJobWrapper()
    if deadline is not None:
        tj.active_deadline_seconds(deadline)
    obj = tj.obj()
    obj["spec"]["suspend"] = suspend
    return World(objects=[RuntimeWrapper().obj(), obj])


def jobset_of(w: World, suspend: bool = False, status: JSON | None = None) -> JSON:
    """The JobSet Kubeflow Trainer made of ``w``'s TrainJob, stored as its JobSet controller left it."""
    tj = w.obj["metadata"]
    owner = {
        "apiVersion": TRAINJOBS.api_version,
        "kind": TRAINJOBS.kind,
        "name": tj["name"],
        "uid": tj["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    obj = {
        "apiVersion": JOBSETS.api_version,
        "kind": JOBSETS.kind,
        "metadata": {"name": tj["name"], "namespace": tj["namespace"], "ownerReferences": [owner]},
        "spec": {"suspend": suspend, "replicatedJobs": [{"name": "node", "template": {"spec": {"parallelism": 2}}}]},
        "status": status or {},
    }
    return w.kube.put(obj)


RUNNING = {"replicatedJobsStatus": [{"name": "node", "ready": 1, "active": 1, "succeeded": 0, "failed": 0}]}
COMPLETED: JSON = {
    "conditions": [
        {
            "type": "Completed",
            "status": "True",
            "reason": "AllJobsCompleted",
            "message": "jobset completed successfully",
            "lastTransitionTime": ago(1),
        }
    ],
    "replicatedJobsStatus": [{"name": "node", "ready": 0, "active": 0, "succeeded": 1, "failed": 0, "suspended": 0}],
}


async def test_a_running_trainjob_finishes_under_its_jobset_with_the_jobsets_status_and_no_child_of_ours() -> None:
    w = world()
    jobset_of(w, status=RUNNING)
    await w.settle()
    assert w.jobs() == [] and w.kube.count(kind=CONFIGMAPS.kind) == 0 and w.kube.count("delete") == 0
    node = {"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}
    assert w.obj["status"]["jobsStatus"] == [node]
    assert w.condition("Complete") is None
    w.set_status(JOBSETS, w.kube.objects[(JOBSETS, w.key)], COMPLETED)
    await w.settle()
    complete = w.condition("Complete")
    assert complete is not None and (complete["status"], complete["reason"], complete["message"]) == (
        "True",
        "AllJobsCompleted",
        "jobset completed successfully",
    )
    assert w.obj["status"]["jobsStatus"][0]["succeeded"] == 1
    assert w.jobs() == [] and w.kube.count("delete") == 0
    assert await w.reconcile() == 0  # settled: nothing is written again


async def test_a_failed_jobset_fails_the_trainjob_with_its_reason() -> None:
    w = world()
    cond = {
        "type": "Failed",
        "status": "True",
        "reason": "FailedJobs",
        "message": "jobset failed",
        "lastTransitionTime": ago(0),
    }
    jobset_of(w, status={"conditions": [cond]})
    await w.settle()
    failed = w.condition("Failed")
    assert failed is not None and (failed["reason"], failed["message"]) == ("FailedJobs", "jobset failed")


async def test_a_suspended_trainjobs_jobset_goes_in_the_foreground_then_the_trainjob_is_ours() -> None:
    w = world(suspend=True)
    jobset_of(w, suspend=True)
    await w.reconcile()
    deletes = [x for x in w.kube.writes if x.verb == "delete"]
    assert [(d.kind, d.key) for d in deletes] == [(JOBSETS.kind, w.key)]
    assert w.jobs() == []  # nothing of ours while the JobSet was there
    await w.settle()  # the JobSet is gone (the double deletes at once): ours, suspended
    assert w.jobs() and all(j["spec"]["suspend"] is True for j in w.jobs())


async def test_a_resumed_trainjob_whose_jobset_upstream_left_suspended_is_taken_over() -> None:
    w = world(suspend=False)  # Kueue admitted it; upstream stopped before it resumed the JobSet
    jobset_of(w, suspend=True)
    await w.reconcile()
    assert [(x.verb, x.kind) for x in w.kube.writes if x.verb == "delete"] == [("delete", JOBSETS.kind)]
    await w.settle()
    assert w.jobs() and all(j["spec"].get("suspend") is not True for j in w.jobs())


async def test_a_jobset_being_deleted_is_waited_for() -> None:
    w = world(suspend=True)
    js = jobset_of(w, suspend=True)
    deleting = copy.deepcopy(js)
    deleting["metadata"]["deletionTimestamp"] = ago(0)
    w.kube.put(deleting)
    assert await w.reconcile() == 0 and w.jobs() == []


async def test_a_finished_trainjob_and_its_jobset_are_left_untouched() -> None:
    w = world()
    jobset_of(w, status=COMPLETED)
    done = copy.deepcopy(w.obj)
    done["status"] = {"conditions": [{**COMPLETED["conditions"][0], "type": "Complete"}]}
    w.kube.put(done)
    before = len(w.kube.writes)
    await w.reconcile()
    assert len(w.kube.writes) == before


async def test_past_its_deadline_a_running_trainjob_fails_and_its_jobset_is_deleted() -> None:
    w = world(deadline=5)
    old = copy.deepcopy(w.obj)
    old["metadata"]["creationTimestamp"] = ago(60)
    w.kube.put(old)
    jobset_of(w, status=RUNNING)
    await w.reconcile()
    failed = w.condition("Failed")
    assert failed is not None and failed["reason"] == "DeadlineExceeded"
    assert (JOBSETS, w.key) not in w.kube.objects


async def test_before_its_deadline_the_reconcile_comes_back_when_it_falls() -> None:
    w = world(deadline=600)
    jobset_of(w, status=RUNNING)
    requeue = await w.settle()
    assert requeue is not None and 590 < requeue <= 600


def test_the_cache_keeps_of_a_jobset_its_metadata_suspend_and_status_only() -> None:
    js = {
        "metadata": {"name": "a", "managedFields": [{}]},
        "spec": {"suspend": True, "replicatedJobs": [{"name": "node"}]},
        "status": RUNNING,
    }
    assert kept_jobset(js) == {"metadata": {"name": "a"}, "spec": {"suspend": True}, "status": RUNNING}


def test_a_jobset_maps_to_the_trainjob_that_controls_it_only() -> None:
    ref = {"apiVersion": TRAINJOBS.api_version, "kind": "TrainJob", "name": "tj", "controller": True}
    js = {"metadata": {"namespace": "ns", "ownerReferences": [ref]}}
    assert list(trainjob_of_jobset(js, None)) == [("ns", "tj")]  # type: ignore[arg-type]
    for other in ({**ref, "controller": False}, {**ref, "kind": "Other"}, {**ref, "apiVersion": "x.io/v1"}):
        assert list(trainjob_of_jobset({"metadata": {"namespace": "ns", "ownerReferences": [other]}}, None)) == []  # type: ignore[arg-type]


def test_jobs_status_counts_default_to_zero() -> None:
    assert jobset_status({}) == {"jobsStatus": None}
    assert jobset_status({"status": {"replicatedJobsStatus": [{"name": "node"}]}}) == {
        "jobsStatus": [{"name": "node", "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}]
    }


UPSTREAM_SNAPSHOT = yaml.safe_dump(
    {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime", "metadata": {"name": "rt"}}
)


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ('{"kind": "ClusterTrainingRuntime", "metadata": {"name": "rt"}}', "rt"),
        (UPSTREAM_SNAPSHOT, "rt"),
        ("a: &x [1]\nb: *x\n", None),  # an alias: refused, never expanded
        ("[" * 5000, None),
        ("- 1\n", None),
        ("", None),
    ],
)
def test_a_snapshot_is_read_as_json_or_upstreams_yaml_without_aliases(text: str, name: str | None) -> None:
    got = runtime_of_snapshot({"data": {"runtime": text}})
    assert (got["metadata"]["name"] if got else None) == name


async def test_upstreams_snapshot_without_our_label_is_labelled_not_created_again() -> None:
    w = world()
    tj = w.obj["metadata"]
    owner = {
        "apiVersion": TRAINJOBS.api_version,
        "kind": "TrainJob",
        "name": tj["name"],
        "uid": tj["uid"],
        "controller": True,
    }
    runtime = RuntimeWrapper().obj()
    snapshot: JSON = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{tj['name']}-runtime-snapshot",
            "namespace": tj["namespace"],
            "ownerReferences": [owner],
        },
        "data": {"runtime": yaml.safe_dump(runtime)},
    }
    w.kube.put(snapshot)  # no jobset-name label: the label-narrowed ConfigMap cache does not have it
    await w.settle()
    stored = w.kube.objects[(CONFIGMAPS, (tj["namespace"], snapshot["metadata"]["name"]))]
    assert stored["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == tj["name"]
    assert stored["data"] == snapshot["data"]  # upstream's snapshot is kept as it froze the runtime
    assert w.jobs() and w.kube.count("create", CONFIGMAPS.kind) == 1  # created (409) once, then labelled
    assert w.kube.count("merge_patch", CONFIGMAPS.kind) == 1
