"""The TrainJob lifecycle as JobSet defines it, on the recording double of ``Kube`` wired by the real
manager: failurePolicy restarts (every Job recreated, old attempt deleted first, the count in the
status), FailJobSet and RestartJobSetAndIgnoreMaxRestarts rules, the runtime snapshot,
ttlSecondsAfterFinished, the TrainJob's own activeDeadlineSeconds, and JobSet's words on ``Complete``."""

from __future__ import annotations

import copy

from tests.harness import RuntimeWrapper, TrainJobWrapper, World, ago
from trainer.api.jobset_v1alpha2 import FailurePolicy, FailurePolicyRule
from trainer.api.kinds import CLUSTER_TRAINING_RUNTIMES, CONFIGMAPS, EVENTS, SERVICES
from trainer.framework.json_codec import JSON
from trainer.trainjob.spec.failure_policy import decide

RESTART = "RestartJobSetFailurePolicyAction"


def failed_job(name: str, rjob: str, reason: str, at: str = "2026-01-01T00:00:00Z", message: str = "") -> JSON:
    cond = {"type": "Failed", "status": "True", "reason": reason, "message": message, "lastTransitionTime": at}
    return {
        "metadata": {"name": name, "labels": {"jobset.sigs.k8s.io/replicatedjob-name": rjob}},
        "status": {"conditions": [cond]},
    }


def test_the_first_matching_rule_decides_for_the_earliest_failed_job_it_matches() -> None:
    policy = FailurePolicy(
        max_restarts=3,
        rules=[
            FailurePolicyRule(name="deadline", action="FailJobSet", on_job_failure_reasons=["DeadlineExceeded"]),
            FailurePolicyRule(name="any", action="RestartJobSetAndIgnoreMaxRestarts"),
        ],
    )
    early = failed_job("a", "node", "BackoffLimitExceeded", "2026-01-01T00:00:00Z")
    late = failed_job("b", "node", "DeadlineExceeded", "2026-01-01T00:00:05Z")
    d = decide(policy, [early, late], 0)
    assert d is not None and (d.fail, d.reason) == (True, "FailJobSetFailurePolicyAction") and "job: b" in d.message
    d = decide(policy, [early], 0)
    assert d is not None and (d.fail, d.counted) == (False, False)
    assert d.reason == "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction"


def test_restart_until_max_restarts_then_fail_and_targets_and_patterns_narrow_a_rule() -> None:
    policy = FailurePolicy(max_restarts=2)
    job = failed_job("a", "node", "BackoffLimitExceeded", message="exit 1")
    for counted in (0, 1):
        d = decide(policy, [job], counted)
        assert d is not None and (d.fail, d.counted, d.reason) == (False, True, "RestartJobSetFailurePolicyAction")
    d = decide(policy, [job], 2)
    assert d is not None and (d.fail, d.reason) == (True, "ReachedMaxRestarts")
    assert "first failed job: a" in d.message and "BackoffLimitExceeded" in d.message
    narrow = FailurePolicy(
        rules=[
            FailurePolicyRule(name="init", action="FailJobSet", target_replicated_jobs=["initializer"]),
            FailurePolicyRule(name="oom", action="FailJobSet", on_job_failure_message_patterns=["OOM.*"]),
        ]
    )
    d = decide(narrow, [job], 0)  # neither rule matches: RestartJobSet, and maxRestarts 0 is reached
    assert d is not None and d.reason == "ReachedMaxRestarts"
    d = decide(narrow, [failed_job("c", "node", "PodFailurePolicy", message="OOMKilled")], 0)
    assert d is not None and d.reason == "FailJobSetFailurePolicyAction"
    assert decide(None, [job], 0) is not None and decide(policy, [], 0) is None


def world(policy: JSON | None = None, ttl: int | None = None, deadline: int | None = None) -> World:
    """The torch sample on a runtime with ``failurePolicy`` and ``ttlSecondsAfterFinished``, and a
    TrainJob with ``activeDeadlineSeconds``, reconciled on the double."""
    runtime = RuntimeWrapper()
    if policy is not None:
        runtime.failure_policy(policy)
    if ttl is not None:
        runtime.ttl_seconds_after_finished(ttl)
    tj = TrainJobWrapper()
    if deadline is not None:
        tj.active_deadline_seconds(deadline)
    return World(objects=[runtime.obj(), tj.obj()])


async def test_max_restarts_recreates_every_job_then_fails_with_reached_max_restarts() -> None:
    w = world({"maxRestarts": 2})
    await w.settle()
    uids = {j["metadata"]["uid"] for j in w.jobs()}
    for attempt in (1, 2):
        w.fail_jobs("BackoffLimitExceeded")
        await w.settle()
        assert w.tj["status"]["restarts"] == attempt and w.tj["status"]["restartsCountTowardsMax"] == attempt
        assert w.condition("Failed") is None, "a restarting job is not Failed"
        jobs = w.jobs()
        assert jobs and {j["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] for j in jobs} == {str(attempt)}
        pod_labels = jobs[0]["spec"]["template"]["metadata"]["labels"]
        assert pod_labels["jobset.sigs.k8s.io/restart-attempt"] == str(attempt)
        assert not uids & {j["metadata"]["uid"] for j in jobs}, "every Job is new"
        uids = {j["metadata"]["uid"] for j in jobs}
    foreground = [x for x in w.kube.writes if x.verb == "delete" and x.kind == "Job"]
    assert len(foreground) == 2, "each old Job deleted once"
    events = [o for (res, _), o in w.kube.objects.items() if res == EVENTS and o["reason"] == RESTART]
    assert sum((e.get("series") or {}).get("count", 1) for e in events) == 2 and all(
        e["type"] == "Warning" for e in events
    ), "an event per restart"
    w.fail_jobs("BackoffLimitExceeded")
    await w.settle()
    failed = w.condition("Failed")
    assert (
        failed is not None and failed["reason"] == "ReachedMaxRestarts" and "pytorch-simple-node-0" in failed["message"]
    )
    assert w.tj["status"]["restarts"] == 2
    assert await w.settle() is None and len(w.kube.writes) == len(w.kube.writes)


async def test_a_fail_rule_fails_at_once_and_an_ignore_max_rule_restarts_without_counting() -> None:
    rules = [
        {"name": "deadline", "action": "FailJobSet", "onJobFailureReasons": ["DeadlineExceeded"]},
        {
            "name": "flaky",
            "action": "RestartJobSetAndIgnoreMaxRestarts",
            "onJobFailureReasons": ["BackoffLimitExceeded"],
        },
    ]
    w = world({"maxRestarts": 0, "rules": rules})
    await w.settle()
    w.fail_jobs("BackoffLimitExceeded")
    await w.settle()
    assert (w.tj["status"]["restarts"], w.tj["status"].get("restartsCountTowardsMax")) == (1, None)
    w.complete_jobs()  # the second attempt succeeds
    await w.settle()
    complete = w.condition("Complete")
    assert complete is not None and complete["status"] == "True" and w.tj["status"]["restarts"] == 1

    w2 = world({"maxRestarts": 5, "rules": rules})
    await w2.settle()
    w2.fail_jobs("DeadlineExceeded")
    await w2.settle()
    failed = w2.condition("Failed")
    assert failed is not None and failed["reason"] == "FailJobSetFailurePolicyAction"
    assert "restarts" not in w2.tj["status"]


async def test_the_runtime_is_frozen_and_a_finished_status_stays_when_the_runtime_goes() -> None:
    w = world()
    await w.settle()
    snapshot = w.kube.objects[(CONFIGMAPS, (w.key[0], f"{w.key[1]}-runtime-snapshot"))]
    assert snapshot["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    runtime = ("", "torch-distributed")
    edited = copy.deepcopy(w.kube.objects[(CLUSTER_TRAINING_RUNTIMES, runtime)])
    edited["spec"]["mlPolicy"]["numNodes"] = 7
    edited["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0][
        "image"
    ] = "changed"
    w.kube.put(edited)
    writes = len(w.kube.writes)
    await w.settle()
    assert len(w.kube.writes) == writes, "an edited runtime changes nothing of a started job"
    w.complete_jobs()
    await w.settle()
    status = copy.deepcopy(w.tj["status"])
    await w.kube.delete(CLUSTER_TRAINING_RUNTIMES, None, runtime[1])
    await w.kube.delete(CONFIGMAPS, w.key[0], f"{w.key[1]}-runtime-snapshot")
    await w.settle()
    assert w.tj["status"] == status, "outcome and jobsStatus stay"


async def test_ttl_deletes_the_children_keeps_the_outcome_and_never_reruns() -> None:
    w = world(ttl=3)
    await w.settle()
    w.complete_jobs()
    requeue = await w.settle()
    assert requeue is not None and 0 < requeue <= 3
    tj = copy.deepcopy(w.tj)
    for c in tj["status"]["conditions"]:  # three seconds later
        c["lastTransitionTime"] = ago(4)
    w.kube.put(tj)
    await w.settle()
    assert not w.jobs() and not [o for (res, _), o in w.kube.objects.items() if res == SERVICES]
    assert w.condition("Complete") is not None and w.tj["status"]["jobsStatus"][0]["succeeded"] == 1
    writes = len(w.kube.writes)
    await w.settle()
    assert len(w.kube.writes) == writes and not w.jobs(), "no Job is created again"


async def test_the_trainjob_deadline_is_one_budget_and_fails_with_deadline_exceeded() -> None:
    w = world(deadline=20)
    requeue = await w.settle()
    assert requeue is not None and 0 < requeue <= 20
    assert all("activeDeadlineSeconds" not in j["spec"] for j in w.jobs())
    tj = copy.deepcopy(w.tj)
    tj["metadata"]["creationTimestamp"] = ago(21)
    tj.setdefault("status", {})["startTime"] = ago(21)  # counted from status.startTime (JobSet's KEP-1186)
    w.kube.put(tj)
    await w.settle()
    failed = w.condition("Failed")
    assert failed is not None and failed["reason"] == "DeadlineExceeded"
    assert not w.jobs(), "every Job goes"


async def test_the_complete_condition_says_jobsets_words() -> None:
    w = World("torch", "none")
    await w.settle()
    w.complete_jobs()
    await w.settle()
    cond = w.condition("Complete")
    assert cond is not None and (cond["reason"], cond["message"]) == (
        "AllJobsCompleted",
        "jobset completed successfully",
    )
