"""JobSet v0.12's per-Job failure actions on the recording double: ``RestartJob`` recreates only the
failed Job (the others keep their uid) and counts towards ``maxRestarts`` with the whole group's
restarts, ``RestartJobAndIgnoreMaxRestarts`` does not count; the counts in
``status.replicatedJobsStatus``; JobSet's ``RestartingJobSet`` while the whole group restarts; and
admission of the actions (``InPlaceRestart`` refused with JobSet's message)."""

from __future__ import annotations

import copy
import json

from tests.harness import RuntimeWrapper, TrainJobWrapper, World, ago
from trainer.api import crd
from trainer.api.jobset_v1alpha2 import IN_PLACE_RESTART_MESSAGE, FailurePolicy, FailurePolicyRule
from trainer.api.kinds import EVENTS, JOBS
from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime
from trainer.framework.json_codec import JSON
from trainer.trainjob.spec.failure_policy import decide
from trainer.webhook import rules as admission

NODE, WORKER = "pytorch-simple-node-0", "pytorch-simple-worker-0"
ATTEMPT = "jobset.sigs.k8s.io/job-restart-attempt"


def runtime(policy: JSON) -> JSON:
    """The torch sample with ``failurePolicy`` and a second replicated job ``worker`` (one Job)."""
    rt = RuntimeWrapper().failure_policy(policy).obj()
    rjobs = rt["spec"]["template"]["spec"]["replicatedJobs"]
    worker = copy.deepcopy(rjobs[0])
    worker["name"] = "worker"
    worker["template"].pop("metadata", None)
    rjobs.append(worker)
    return rt


def world(policy: JSON, *, running_condition: bool = False) -> World:
    objects = [runtime(policy), TrainJobWrapper().obj()]
    return World(objects=objects, trainjob_running_condition=running_condition)


def job(w: World, name: str) -> JSON:
    return next(j for j in w.jobs() if j["metadata"]["name"] == name)


def fail(w: World, name: str, reason: str = "BackoffLimitExceeded") -> None:
    cond = {"type": "Failed", "status": "True", "reason": reason, "message": "exit 1", "lastTransitionTime": ago(0)}
    w.set_status(JOBS, job(w, name), {"failed": 1, "conditions": [cond]})


def ready(w: World) -> None:
    for j in w.jobs():
        w.set_status(JOBS, j, {"active": 1, "ready": int(j["spec"].get("parallelism") or 1)})


def uids(w: World) -> dict[str, str]:
    return {j["metadata"]["name"]: j["metadata"]["uid"] for j in w.jobs()}


def events(w: World, reason: str) -> list[JSON]:
    return [o for (res, _), o in w.kube.objects.items() if res == EVENTS and o["reason"] == reason]


def restart_job_rule(action: str = "RestartJob") -> JSON:
    return {"name": "worker_only", "action": action, "targetReplicatedJobs": ["worker"]}


def test_decide_restarts_the_failed_job_alone_counting_with_the_group() -> None:
    failed = {
        "metadata": {
            "name": WORKER,
            "labels": {"jobset.sigs.k8s.io/replicatedjob-name": "worker", "jobset.sigs.k8s.io/job-index": "0"},
        },
        "status": {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]},
    }
    policy = FailurePolicy(max_restarts=1, rules=[FailurePolicyRule(name="one", action="RestartJob")])
    d = decide(policy, [failed], 0)
    assert d is not None and (d.fail, d.counted, d.job, d.rjob, d.index) == (False, True, WORKER, "worker", 0)
    assert d.reason == "RestartJobFailurePolicyAction" and not d.restarts_group
    assert d.message.startswith(f"applying RestartJob failure policy action (first failed job: {WORKER})")
    d = decide(policy, [failed], 1)
    assert d is not None and (d.fail, d.reason) == (True, "ReachedMaxRestarts")
    assert d.message.startswith(f"jobset failed due to reaching max number of restarts (first failed job: {WORKER})")
    rule = FailurePolicyRule(name="one", action="RestartJobAndIgnoreMaxRestarts")
    ignore = FailurePolicy(max_restarts=0, rules=[rule])
    d = decide(ignore, [failed], 7)
    assert d is not None and (d.fail, d.counted, d.job) == (False, False, WORKER)
    assert d.reason == "RestartJobAndIgnoreMaxRestartsFailurePolicyAction"


async def test_restart_job_recreates_only_the_failed_job_and_counts_towards_max_restarts() -> None:
    w = world({"maxRestarts": 1, "rules": [restart_job_rule()]})
    await w.settle()
    before = uids(w)
    assert set(before) == {NODE, WORKER} and job(w, WORKER)["metadata"]["labels"][ATTEMPT] == "0"
    fail(w, WORKER)
    await w.settle()
    after = uids(w)
    assert after[NODE] == before[NODE], "the Job that did not fail runs on"
    assert after[WORKER] != before[WORKER], "the failed Job is recreated"
    worker = job(w, WORKER)
    assert worker["metadata"]["labels"][ATTEMPT] == "1" and worker["metadata"]["annotations"][ATTEMPT] == "1"
    assert worker["spec"]["template"]["metadata"]["labels"][ATTEMPT] == "1"
    assert worker["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "0", "no restart of the group"
    status = w.tj["status"]
    assert status["replicatedJobsStatus"] == [{"name": "worker", "jobRestarts": [1], "jobRestartsCountTowardsMax": [1]}]
    assert "restarts" not in status and w.condition("Failed") is None
    assert w.condition("RestartingJobSet") is None, "JobSet sets no RestartingJobSet for a Job restarted alone"
    deletes = [x for x in w.kube.writes if x.verb == "delete" and x.kind == "Job"]
    assert [x.key[1] for x in deletes] == [WORKER], "the failed Job deleted once, no other"
    (event,) = events(w, "RestartJobFailurePolicyAction")
    assert event["type"] == "Warning" and (event.get("series") or {}).get("count", 1) == 1
    assert f"(first failed job: {WORKER})" in event["message"]

    # maxRestarts 1 is used up: the next failure, of either Job, fails the TrainJob as JobSet does.
    fail(w, NODE)  # no rule matches the node: RestartJobSet, which counts the worker's restart too
    await w.settle()
    failed = w.condition("Failed")
    assert failed is not None and failed["reason"] == "ReachedMaxRestarts"
    assert failed["message"].startswith(
        f"jobset failed due to reaching max number of restarts (first failed job: {NODE})"
    )
    writes = len(w.kube.writes)
    await w.settle()
    assert len(w.kube.writes) == writes, "a settled TrainJob is not written again"


async def test_restart_job_beyond_max_restarts_fails_and_a_second_failure_is_not_restarted_twice() -> None:
    w = world({"maxRestarts": 1, "rules": [restart_job_rule()]})
    await w.settle()
    fail(w, WORKER)
    await w.reconcile()  # the decision: counted in the status, no delete yet
    assert w.tj["status"]["replicatedJobsStatus"][0]["jobRestarts"] == [1]
    await w.reconcile()  # the failed Job goes (foreground) and, gone, is created again
    await w.reconcile()
    assert w.tj["status"]["replicatedJobsStatus"][0]["jobRestarts"] == [1], "restarted once"
    assert len(events(w, "RestartJobFailurePolicyAction")) == 1
    fail(w, WORKER)
    await w.settle()
    failed = w.condition("Failed")
    assert failed is not None and failed["reason"] == "ReachedMaxRestarts" and WORKER in failed["message"]
    assert w.tj["status"]["replicatedJobsStatus"][0]["jobRestartsCountTowardsMax"] == [1]


async def test_restart_job_and_ignore_max_restarts_does_not_count_then_the_job_completes() -> None:
    w = world({"maxRestarts": 0, "rules": [restart_job_rule("RestartJobAndIgnoreMaxRestarts")]})
    await w.settle()
    node = uids(w)[NODE]
    for n in (1, 2, 3):
        fail(w, WORKER)
        await w.settle()
        assert w.condition("Failed") is None
        assert job(w, WORKER)["metadata"]["labels"][ATTEMPT] == str(n)
    assert uids(w)[NODE] == node
    assert w.tj["status"]["replicatedJobsStatus"] == [{"name": "worker", "jobRestarts": [3]}]
    assert len(events(w, "RestartJobAndIgnoreMaxRestartsFailurePolicyAction")) >= 1
    w.complete_jobs()
    await w.settle()
    complete = w.condition("Complete")
    assert complete is not None and complete["message"] == "jobset completed successfully"
    assert w.tj["status"]["replicatedJobsStatus"] == [{"name": "worker", "jobRestarts": [3]}], "kept"
    # A whole-group restart of a TrainJob keeps the per-Job count on its new Jobs, as JobSet does.
    w2 = world({"maxRestarts": 1, "rules": [restart_job_rule("RestartJobAndIgnoreMaxRestarts")]})
    await w2.settle()
    fail(w2, WORKER)
    await w2.settle()
    fail(w2, NODE)
    await w2.settle()
    assert w2.tj["status"]["restarts"] == 1
    assert job(w2, WORKER)["metadata"]["labels"][ATTEMPT] == "1" and job(w2, NODE)["metadata"]["labels"][ATTEMPT] == "0"


async def test_restarting_job_set_shows_while_the_group_restarts() -> None:
    w = world({"maxRestarts": 2, "rules": [{"name": "any_failure", "action": "RestartJobSet"}]})
    await w.settle()
    w.fail_jobs("BackoffLimitExceeded")
    await w.settle()
    restarting = w.condition("RestartingJobSet")
    assert restarting is not None and restarting["status"] == "True"
    assert restarting["reason"] == "FailurePolicy_any_failure"
    assert restarting["message"].startswith("applying RestartJobSet failure policy action (first failed job: ")
    assert [e["type"] for e in events(w, "FailurePolicy_any_failure")] == ["Warning"]
    ready(w)
    await w.settle()
    assert w.condition("RestartingJobSet") is None, "gone once every Job is ready (the default shape)"

    rich = world({"maxRestarts": 2}, running_condition=True)
    await rich.settle()
    rich.fail_jobs("BackoffLimitExceeded")
    await rich.settle()
    restarting = rich.condition("RestartingJobSet")
    assert restarting is not None and (restarting["status"], restarting["reason"]) == ("True", "DefaultFailurePolicy")
    ready(rich)
    await rich.settle()
    restarting = rich.condition("RestartingJobSet")
    assert restarting is not None
    assert (restarting["status"], restarting["reason"], restarting["message"]) == (
        "False",
        "JobsReady",
        "all jobs are ready",
    )
    rich.complete_jobs()
    await rich.settle()
    restarting = rich.condition("RestartingJobSet")
    assert rich.condition("Complete") is not None and restarting is not None
    assert (restarting["status"], restarting["reason"], restarting["message"]) == (
        "False",
        "JobSetCompleted",
        "jobset completed successfully",
    ), "as JobSet's setJobSetCompletedCondition"


def test_admission_accepts_the_per_job_actions_and_refuses_in_place_restart() -> None:
    for action in ("RestartJob", "RestartJobAndIgnoreMaxRestarts"):
        rt = runtime({"maxRestarts": 1, "rules": [restart_job_rule(action)]})
        assert admission.validate_runtime(rt).allowed, action
    rt = runtime({"maxRestarts": 1, "restartStrategy": "InPlaceRestart"})
    (err,) = admission.validate_runtime(rt).errors
    assert err == (
        "spec.template.spec.failurePolicy.restartStrategy: "
        "InPlaceRestart restart strategy cannot be set when InPlaceRestart feature gate is disabled"
    )
    rt = runtime({"rules": [restart_job_rule()]})
    rt["spec"]["template"]["spec"]["replicatedJobs"][1]["replicas"] = 1025
    (err,) = admission.validate_runtime(rt).errors
    assert "RestartJob or RestartJobAndIgnoreMaxRestarts action and a replicated job with replicas > 1024" in err
    # Without the webhook, the CRD refuses it with the same words.
    text = json.dumps([crd.crd(spec) for spec in crd.CRDS if spec.model is ClusterTrainingRuntime])
    assert IN_PLACE_RESTART_MESSAGE in text and "RestartJobAndIgnoreMaxRestarts" in text
