"""The OptimizationJob controller as a privileged deputy in a shared namespace: a TrainJob it does not control
(no controller owner reference with the job's uid) is never adopted, patched or deleted, whatever name and
labels it carries, and the job says why it waits; a template cannot make a trial someone else's; deleting
the job deletes nothing but what the garbage collector deletes (its own trials); the SDK's trials are the
job's own."""

from __future__ import annotations

import copy
from typing import Any

from tests.optimizationjob.test_controller import Cluster, optimization_job
from trainer.api.kinds import OPTIMIZATION_JOBS, TRAINJOBS
from trainer.api.optimizationjob import OptimizationJob
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.client.optimize import trials_of
from trainer.framework.json_codec import JSON
from trainer.optimizationjob.trials import build_trial

TRIAL_LABELS = {"trainer.kubeflow.org/optimizationjob-name": "o", "trainer.kubeflow.org/trial-index": "0"}


def foreign(name: str = "o-trial-0", **meta: Any) -> JSON:
    """Someone else's TrainJob of that name in the job's namespace."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "default", **meta},
        "spec": {"runtimeRef": {"name": "theirs"}, "suspend": False},
    }


def writes_to(c: Cluster, name: str) -> list[str]:
    """The verbs of every write the operator sent to TrainJob ``name``."""
    return [w.verb for w in c.kube.writes if w.kind == TRAINJOBS.kind and w.key[1] == name]


async def test_a_foreign_trainjob_with_a_trials_name_and_labels_is_never_adopted_patched_or_deleted() -> None:
    """Labelled as trial 0 of ``o``, even owned (but not controlled) by ``o``: still not ``o``'s."""
    c = Cluster(optimization_job())
    uid = c.job["metadata"]["uid"]
    weak = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "OptimizationJob", "name": "o", "uid": uid}
    theirs = c.kube.put(foreign(labels=dict(TRIAL_LABELS), ownerReferences=[weak]))
    before = copy.deepcopy(theirs)
    c.kube.writes.clear()
    await c.settle()
    assert writes_to(c, "o-trial-0") == []
    assert c.trials()["o-trial-0"] == before  # untouched
    assert sorted(c.trials()) == ["o-trial-0", "o-trial-1"]  # trial 1 runs; trial 0 waits for its name
    misconfigured = c.condition("Misconfigured")
    assert misconfigured is not None and misconfigured["reason"] == "ErrResourceExists"
    assert (
        "TrainJob o-trial-0: already exists and is not controlled by OptimizationJob o; delete or rename it, "
        "then the job goes on" in misconfigured["message"]
    )
    events = [w.body for w in c.kube.writes if w.kind == "Event"]
    assert any(
        e.get("reason") == "ErrResourceExists"
        and e.get("type") == "Warning"
        and e.get("message")
        == 'Resource "o-trial-0" of Kind "TrainJob" already exists and is not managed by OptimizationJob'
        for e in events
    ), events
    results = {r["name"]: r for r in c.status.get("trialResults") or []}
    assert "o-trial-0" not in results  # not counted as one of the job's trials
    assert c.status["trials"] == 1


async def test_suspending_and_stopping_never_touch_a_foreign_trainjob() -> None:
    """``spec.suspend`` suspends the running trials; the foreign one keeps running as its owner set it."""
    c = Cluster(optimization_job(pruneAlgorithm={"median": {"minTrials": 1}}), foreign(labels=dict(TRIAL_LABELS)))
    await c.settle()
    job = copy.deepcopy(c.job)
    job["spec"]["suspend"] = True
    c.kube.put(job)
    await c.settle()
    assert c.trials()["o-trial-1"]["spec"]["suspend"] is True
    assert c.trials()["o-trial-0"]["spec"]["suspend"] is False
    assert writes_to(c, "o-trial-0") == []


async def test_a_trial_of_an_earlier_job_of_the_same_name_is_waited_for_not_taken() -> None:
    """A trial still held by a deleted ``o`` (another uid) is left for the garbage collector."""
    earlier = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "OptimizationJob", "name": "o"}
    ref = {**earlier, "uid": "uid-of-the-earlier-o", "controller": True, "blockOwnerDeletion": True}
    c = Cluster(optimization_job(), foreign(labels=dict(TRIAL_LABELS), ownerReferences=[ref]))
    await c.settle()
    assert writes_to(c, "o-trial-0") == []
    assert c.trials()["o-trial-0"]["metadata"]["ownerReferences"] == [ref]


def test_a_templates_labels_and_annotations_never_override_the_controllers() -> None:
    """Objects admitted without the webhook: the controller's labels and annotations win on the trial, and
    its only owner reference is the job's."""
    obj = optimization_job()
    obj["metadata"]["uid"] = "job-uid"
    obj["spec"]["trainJobTemplate"]["metadata"] = {
        "labels": {"trainer.kubeflow.org/optimizationjob-name": "victim", "trainer.kubeflow.org/trial-index": "7"},
        "annotations": {"trainer.kubeflow.org/trial-parameters": "[]"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u", "controller": True}],
        "namespace": "elsewhere",
    }
    trial = build_trial(obj, 3, {"lr": "0.01"})
    m = trial["metadata"]
    assert m["labels"] == {"trainer.kubeflow.org/optimizationjob-name": "o", "trainer.kubeflow.org/trial-index": "3"}
    assert m["annotations"]["trainer.kubeflow.org/trial-parameters"] == '[{"name": "lr", "value": "0.01"}]'
    assert [r["uid"] for r in m["ownerReferences"]] == ["job-uid"] and m["namespace"] == "default"


async def test_deleting_the_job_mid_search_deletes_nothing_itself() -> None:
    """The controller has no delete of TrainJobs: the garbage collector deletes the job's trials (their
    controller owner reference names its uid), and nothing else; a foreign TrainJob labelled as its trial
    stays (e2e/test_optimizationjob.py runs the real garbage collector)."""
    c = Cluster(optimization_job(), foreign("o-trial-9", labels=dict(TRIAL_LABELS)))
    await c.settle()
    uid = c.job["metadata"]["uid"]
    collected = sorted(
        n for n, t in c.trials().items() if any(r["uid"] == uid for r in t["metadata"].get("ownerReferences") or [])
    )
    assert collected == ["o-trial-0", "o-trial-1"]
    c.kube.writes.clear()
    await c.kube.delete(OPTIMIZATION_JOBS, "default", "o")
    await c.manager.reconcilers["optimizationjob"](c.key)
    assert [w for w in c.kube.writes if w.kind == TRAINJOBS.kind] == []
    assert "ownerReferences" not in c.trials()["o-trial-9"]["metadata"]


def test_the_sdks_trials_are_the_jobs_own_not_every_trainjob_labelled_with_its_name() -> None:
    """``list_trials`` lists by label; a TrainJob someone labelled as a trial of the job is not one of its
    trials unless the job controls it."""
    job = OptimizationJob.model_validate({**optimization_job(), "metadata": {"name": "o", "uid": "job-uid"}})
    ref = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "OptimizationJob", "name": "o"}
    ours = foreign("o-trial-1", labels={**TRIAL_LABELS, "trainer.kubeflow.org/trial-index": "1"})
    ours["metadata"]["ownerReferences"] = [{**ref, "uid": "job-uid", "controller": True}]
    theirs = foreign("o-trial-0", labels=dict(TRIAL_LABELS))
    weak = foreign("o-trial-2", labels={**TRIAL_LABELS, "trainer.kubeflow.org/trial-index": "2"})
    weak["metadata"]["ownerReferences"] = [{**ref, "uid": "job-uid"}]
    trials = trials_of(job, [TrainJob.model_validate(t) for t in (ours, theirs, weak)])
    assert [t.name for t in trials] == ["o-trial-1"]
