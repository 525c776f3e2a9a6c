"""The TrainJob lifecycle as JobSet defines it, on the real cluster: failurePolicy restarts (every Job
recreated, the old attempt's pods gone first; or, by RestartJob, the failed Job alone), rules, the
runtime snapshot, ttlSecondsAfterFinished and one activeDeadlineSeconds for the whole TrainJob. Jobs
fail for real: through a Job-level ``activeDeadlineSeconds`` the Job controller enforces, or a pod
failure the test drives (a Failed pod status, as a kubelet reports it, with ``backoffLimit: 0``)."""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

import pytest

from e2e.test_trainjob import RUN_FOR, rjob, runtime, trainjob
from localcluster.client import Client, condition, wait_for
from trainer.api.kinds import JOBS, PODS, SERVICES, TRAINING_RUNTIMES, TRAINJOBS
from trainer.framework.json_codec import JSON

pytestmark = pytest.mark.e2e
ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
JOB_ATTEMPT = "jobset.sigs.k8s.io/job-restart-attempt"
SHORT = {  # pods complete after about 6 s
    "pod-complete.stage.kwok.x-k8s.io/delay": "6s",
    "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "7s",
}


def with_policy(rt: JSON, policy: JSON | None = None, **spec: Any) -> JSON:
    rt = copy.deepcopy(rt)
    if policy is not None:
        rt["spec"]["template"]["spec"]["failurePolicy"] = policy
    rt["spec"]["template"]["spec"].update(spec)
    return rt


def deadline_node(seconds: int) -> JSON:
    """The trainer replicated job whose Jobs the Job controller fails after ``seconds`` (DeadlineExceeded)."""
    node = rjob("node", "trainer", RUN_FOR)
    node["template"]["spec"]["activeDeadlineSeconds"] = seconds
    return node


async def attempts_seen(client: Client, ns: str, name: str, seen: list[set[str]], stop: asyncio.Event) -> None:
    """Record the restart attempts of the pods that exist together, until ``stop``."""
    while not stop.is_set():
        pods = await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={name}")
        seen.append({p["metadata"]["labels"].get(ATTEMPT, "") for p in pods})
        await asyncio.sleep(0.2)


async def fail_pod(client: Client, ns: str, pod: JSON) -> None:
    """Its container exits 1, as a kubelet would report it (with ``backoffLimit: 0`` its Job fails)."""
    container = pod["spec"]["containers"][0]["name"]
    terminated = {"exitCode": 1, "reason": "Error", "startedAt": pod["status"].get("startTime"), "finishedAt": None}
    terminated["finishedAt"] = terminated["startedAt"]
    status = {
        "name": container,
        "image": "busybox",
        "imageID": "",
        "ready": False,
        "restartCount": 0,
        "state": {"terminated": terminated},
    }
    failed = {"phase": "Failed", "containerStatuses": [status]}
    await client.kube.patch_status(PODS, ns, pod["metadata"]["name"], failed)


async def test_max_restarts_recreates_every_job_then_fails(client: Client, ns: str) -> None:
    await client.apply(with_policy(runtime("rt", deadline_node(3)), {"maxRestarts": 2}), ns)
    await client.apply(trainjob("flaky", "rt"), ns)
    seen: list[set[str]] = []
    stop = asyncio.Event()
    watcher = asyncio.create_task(attempts_seen(client, ns, "flaky", seen, stop))
    uids: list[str] = []
    try:
        for attempt in ("0", "1", "2"):

            async def job_of_attempt(a: str = attempt) -> JSON | None:
                jobs = await client.jobs(ns, "flaky")
                return next((j for j in jobs if j["metadata"]["labels"].get(ATTEMPT) == a), None)

            job = await wait_for(job_of_attempt, f"the Job of attempt {attempt}", timeout=60)
            uids.append(job["metadata"]["uid"])
        tj = await client.wait_condition(ns, "flaky", "Failed", timeout=60)
    finally:
        stop.set()
        await watcher
    failed = condition(tj, "Failed")
    assert failed is not None and failed["reason"] == "ReachedMaxRestarts"
    assert "flaky-node-0" in failed["message"] and "DeadlineExceeded" in failed["message"]
    assert tj["status"]["restarts"] == 2 and len(set(uids)) == 3, "every attempt's Job is new"
    assert all(len(s - {""}) <= 1 for s in seen), f"two attempts' pods ran at once: {[s for s in seen if len(s) > 1]}"

    def restarts(events: list[JSON]) -> int:
        told = [e for e in events if e["reason"] == "RestartJobSetFailurePolicyAction"]
        return sum(int(e.get("count") or (e.get("series") or {}).get("count") or 1) for e in told)

    events = await client.wait_events(ns, "flaky", lambda es: restarts(es) >= 2, "2 RestartJobSetFailurePolicyAction")
    assert restarts(events) == 2


async def test_a_fail_rule_fails_at_once(client: Client, ns: str) -> None:
    rule = {"name": "deadline", "action": "FailJobSet", "onJobFailureReasons": ["DeadlineExceeded"]}
    await client.apply(with_policy(runtime("rt", deadline_node(2)), {"maxRestarts": 5, "rules": [rule]}), ns)
    await client.apply(trainjob("strict", "rt"), ns)
    tj = await client.wait_condition(ns, "strict", "Failed", timeout=60)
    failed = condition(tj, "Failed")
    assert failed is not None and failed["reason"] == "FailJobSetFailurePolicyAction"
    assert not (tj["status"].get("restarts") or 0)


async def test_a_pattern_that_backtracking_takes_hours_on_holds_nothing(client: Client, ns: str) -> None:
    """``^(.|.)*Z$`` against "Job was active longer than specified deadline" runs for hours on a
    backtracking engine; on RE2 it is linear: the rule does not match, the default applies, and another
    TrainJob is served meanwhile."""
    rule = {"name": "redos", "action": "FailJobSet", "onJobFailureMessagePatterns": ["^(.|.)*Z$"]}
    await client.apply(with_policy(runtime("rt", deadline_node(2)), {"maxRestarts": 0, "rules": [rule]}), ns)
    await client.apply(runtime("quick", rjob("node", "trainer", SHORT)), ns)
    await client.apply(trainjob("redos", "rt"), ns)
    tj = await client.wait_condition(ns, "redos", "Failed", timeout=60)
    failed = condition(tj, "Failed")
    assert failed is not None and failed["reason"] == "ReachedMaxRestarts", "no rule matched: RestartJobSet, max 0"
    assert "DeadlineExceeded" in failed["message"]
    await client.apply(trainjob("after", "quick"), ns)
    await client.wait_condition(ns, "after", "Complete", timeout=60)


async def test_a_job_that_fails_once_then_succeeds_completes_with_one_restart(client: Client, ns: str) -> None:
    """A rule RestartJobSetAndIgnoreMaxRestarts restarts without consuming maxRestarts (0 here)."""
    rule = {
        "name": "flaky",
        "action": "RestartJobSetAndIgnoreMaxRestarts",
        "onJobFailureReasons": ["BackoffLimitExceeded"],
    }
    node = rjob("node", "trainer", SHORT)
    node["template"]["spec"]["backoffLimit"] = 0
    await client.apply(with_policy(runtime("rt", node), {"maxRestarts": 0, "rules": [rule]}), ns)
    await client.apply(trainjob("once", "rt"), ns)

    async def running_pod() -> JSON | None:
        pods = await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=once")
        return next((p for p in pods if (p.get("status") or {}).get("phase") == "Running"), None)

    pod = await wait_for(running_pod, "a running pod of attempt 0", timeout=60)
    assert pod["metadata"]["labels"][ATTEMPT] == "0"
    await fail_pod(client, ns, pod)
    tj = await client.wait_condition(ns, "once", "Complete", timeout=90)
    assert tj["status"]["restarts"] == 1 and not tj["status"].get("restartsCountTowardsMax")
    (job,) = await client.jobs(ns, "once")
    assert job["metadata"]["labels"][ATTEMPT] == "1"


async def test_restart_job_recreates_only_the_failed_job_then_the_trainjob_completes(client: Client, ns: str) -> None:
    """JobSet v0.12's RestartJob: the worker's Job fails, only it is deleted and created again (the
    trainer's Job runs on, same uid), counted in status.replicatedJobsStatus; then all complete."""
    rule = {"name": "worker_only", "action": "RestartJob", "targetReplicatedJobs": ["worker"]}
    twenty = {"pod-complete.stage.kwok.x-k8s.io/delay": "20s", "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "21s"}
    worker = rjob("worker", None, SHORT)
    worker["template"]["spec"]["backoffLimit"] = 0
    rt = runtime("rt", rjob("node", "trainer", twenty), worker)
    await client.apply(with_policy(rt, {"maxRestarts": 1, "rules": [rule]}), ns)
    await client.apply(trainjob("alone", "rt"), ns)

    async def running_worker() -> JSON | None:
        selector = "jobset.sigs.k8s.io/jobset-name=alone,jobset.sigs.k8s.io/replicatedjob-name=worker"
        pods = await client.pods(ns, selector)
        return next((p for p in pods if (p.get("status") or {}).get("phase") == "Running"), None)

    pod = await wait_for(running_worker, "a running worker pod", timeout=60)
    assert pod["metadata"]["labels"][JOB_ATTEMPT] == "0"
    before = {j["metadata"]["name"]: j["metadata"]["uid"] for j in await client.jobs(ns, "alone")}
    await fail_pod(client, ns, pod)

    async def recreated() -> JSON | None:
        jobs = await client.jobs(ns, "alone")
        return next((j for j in jobs if j["metadata"]["labels"].get(JOB_ATTEMPT) == "1"), None)

    job = await wait_for(recreated, "the worker's Job created again", timeout=60)
    assert job["metadata"]["name"] == "alone-worker-0" and job["metadata"]["uid"] != before["alone-worker-0"]
    after = {j["metadata"]["name"]: j["metadata"]["uid"] for j in await client.jobs(ns, "alone")}
    assert after["alone-node-0"] == before["alone-node-0"], "the trainer's Job runs on"
    tj = await client.wait_condition(ns, "alone", "Complete", timeout=90)
    assert tj["status"]["replicatedJobsStatus"] == [
        {"name": "worker", "jobRestarts": [1], "jobRestartsCountTowardsMax": [1]}
    ]
    assert not tj["status"].get("restarts"), "no restart of the whole group"
    final = {j["metadata"]["name"]: j["metadata"]["uid"] for j in await client.jobs(ns, "alone")}
    assert final["alone-node-0"] == before["alone-node-0"]
    events = await client.wait_events(
        ns, "alone", lambda es: any(e["reason"] == "RestartJobFailurePolicyAction" for e in es), "the restart's event"
    )
    assert [e["type"] for e in events if e["reason"] == "RestartJobFailurePolicyAction"] == ["Warning"]


async def test_the_runtime_is_frozen_when_edited_or_deleted(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer", SHORT)), ns)
    await client.apply(trainjob("frozen", "rt"), ns)
    (job,) = await wait_for(lambda: client.jobs(ns, "frozen"), "the Job")
    edited = runtime("rt", rjob("node", "trainer", SHORT))
    edited["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0][
        "image"
    ] = "edited"
    await client.apply(edited, ns)
    tj = await client.wait_condition(ns, "frozen", "Complete", timeout=60)
    (after,) = await client.jobs(ns, "frozen")
    assert after["metadata"]["uid"] == job["metadata"]["uid"]
    assert after["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox"
    await client.kube.delete(TRAINING_RUNTIMES, ns, "rt")
    await asyncio.sleep(3)
    again = await client.trainjob(ns, "frozen")
    assert again is not None and again["status"] == tj["status"], "outcome and jobsStatus unchanged"


async def test_ttl_deletes_the_children_and_keeps_the_outcome(client: Client, ns: str) -> None:
    await client.apply(with_policy(runtime("rt", rjob("node", "trainer")), ttlSecondsAfterFinished=3), ns)
    await client.apply(trainjob("short", "rt"), ns)
    await client.wait_condition(ns, "short", "Complete", timeout=60)
    done = time.monotonic()

    async def gone() -> bool:
        return not await client.jobs(ns, "short") and await client.kube.get_or_none(SERVICES, ns, "short") is None

    await wait_for(gone, "the children deleted after the TTL", timeout=15)
    assert time.monotonic() - done < 15
    end = time.monotonic() + 30
    while time.monotonic() < end:  # never re-run
        assert not await client.jobs(ns, "short")
        await asyncio.sleep(2)
    tj = await client.trainjob(ns, "short")
    assert condition(tj, "Complete") is not None and tj is not None
    assert tj["status"]["jobsStatus"][0]["succeeded"] == 1


async def test_one_deadline_for_the_whole_trainjob(client: Client, ns: str) -> None:
    """An initializer (10 s) then a trainer (long) under one 20 s budget fail at about 20 s, not 40."""
    ten = {"pod-complete.stage.kwok.x-k8s.io/delay": "10s", "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "11s"}
    init = rjob("dataset-initializer", "dataset-initializer", ten)
    node = rjob("node", "trainer", RUN_FOR, dependsOn=[{"name": "dataset-initializer", "status": "Complete"}])
    await client.apply(runtime("rt", init, node), ns)
    start = time.monotonic()
    await client.apply(trainjob("budget", "rt", activeDeadlineSeconds=20), ns)
    tj = await client.wait_condition(ns, "budget", "Failed", timeout=60)
    took = time.monotonic() - start
    failed = condition(tj, "Failed")
    assert failed is not None and failed["reason"] == "DeadlineExceeded"
    assert 18 <= took <= 30, took
    await wait_for(lambda: _no_active(client, ns), "every Job gone or finished", timeout=30)
    assert await client.kube.get_or_none(TRAINJOBS, ns, "budget") is not None


async def _no_active(client: Client, ns: str) -> bool:
    items, _ = await client.kube.list(JOBS, ns, "jobset.sigs.k8s.io/jobset-name=budget")
    return all(not (j.get("status") or {}).get("active") for j in items)
