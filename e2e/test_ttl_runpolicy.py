"""KEP-2899 part 2 (kubeflow/trainer#3824, #4052) on the shared cluster: a TrainJob's own
``ttlSecondsAfterFinished`` deletes the TrainJob with its children; a runtime's ``runPolicy`` gives the
TTL and the deadline a TrainJob does not set; ``status.startTime`` and ``completionTime`` as JobSet
keeps them (kubernetes-sigs/jobset KEP-1186) across suspend and resume."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import pytest

from e2e.test_trainjob import RUN_FOR, rjob, runtime, trainjob
from localcluster.client import Client, condition, wait_for
from trainer.api.kinds import CONFIGMAPS, JOBS, SERVICES, TRAINJOBS
from trainer.framework.clock import parse_time
from trainer.framework.json_codec import JSON

pytestmark = pytest.mark.e2e
SHORT = {  # KWOK completes these pods after 3-4 s
    "pod-complete.stage.kwok.x-k8s.io/delay": "3s",
    "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "4s",
}


def with_run_policy(rt: JSON, **policy: int) -> JSON:
    rt["spec"]["runPolicy"] = policy
    return rt


async def gone_at(client: Client, ns: str, name: str, timeout: float) -> datetime:
    """Poll until the TrainJob ``name`` is gone; the wall-clock time it was first seen gone."""

    async def probe() -> datetime | None:
        return datetime.now(UTC) if await client.trainjob(ns, name) is None else None

    return await wait_for(probe, f"TrainJob {ns}/{name} deleted", timeout=timeout, interval=0.1)


async def no_children(client: Client, ns: str, name: str) -> bool:
    """No Job, Service or ConfigMap of the TrainJob ``name`` is left (the garbage collector took them)."""
    if await client.jobs(ns, name) or await client.kube.get_or_none(SERVICES, ns, name) is not None:
        return False
    items, _ = await client.kube.list(CONFIGMAPS, ns, f"jobset.sigs.k8s.io/jobset-name={name}")
    return not items


async def test_a_trainjob_ttl_deletes_it_with_its_children_5_to_8_seconds_after_complete(
    client: Client, ns: str
) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    await client.apply(trainjob("ttl", "rt", ttlSecondsAfterFinished=5), ns)
    tj = await client.wait_condition(ns, "ttl", "Complete", timeout=60)
    seen = time.monotonic()
    complete = condition(tj, "Complete")
    assert complete is not None
    finished = parse_time(complete["lastTransitionTime"])
    assert finished is not None and tj["status"]["completionTime"] == complete["lastTransitionTime"]
    at = await gone_at(client, ns, "ttl", timeout=20)
    assert time.monotonic() - seen <= 8.5
    assert 5 <= (at - finished).total_seconds() <= 8, (at, finished)
    await wait_for(lambda: no_children(client, ns, "ttl"), "the children collected with the TrainJob", timeout=30)


async def test_a_runtime_run_policy_ttl_applies_to_a_trainjob_that_sets_none_only(client: Client, ns: str) -> None:
    await client.apply(with_run_policy(runtime("rt", rjob("node", "trainer")), ttlSecondsAfterFinished=3), ns)
    await client.apply(trainjob("inherits", "rt"), ns)
    await client.apply(trainjob("keeps", "rt", ttlSecondsAfterFinished=600), ns)
    await client.wait_condition(ns, "inherits", "Complete", timeout=60)
    await client.wait_condition(ns, "keeps", "Complete", timeout=60)
    await gone_at(client, ns, "inherits", timeout=20)
    await wait_for(lambda: no_children(client, ns, "inherits"), "its children collected", timeout=30)
    await asyncio.sleep(5)
    kept = await client.trainjob(ns, "keeps")
    assert kept is not None and condition(kept, "Complete") is not None, "its own TTL holds"
    assert await client.jobs(ns, "keeps"), "and its Jobs stay"


async def test_a_runtime_run_policy_deadline_fails_a_running_trainjob(client: Client, ns: str) -> None:
    await client.apply(with_run_policy(runtime("rt", rjob("node", "trainer", RUN_FOR)), activeDeadlineSeconds=5), ns)
    start = time.monotonic()
    await client.apply(trainjob("late", "rt"), ns)
    tj = await client.wait_condition(ns, "late", "Failed", timeout=60)
    took = time.monotonic() - start
    failed = condition(tj, "Failed")
    assert failed is not None and failed["reason"] == "DeadlineExceeded", failed
    assert "runPolicy.activeDeadlineSeconds" in failed["message"]
    assert 4 <= took <= 15, took
    assert tj["status"]["completionTime"] == failed["lastTransitionTime"]

    async def stopped() -> bool:
        items, _ = await client.kube.list(JOBS, ns, "jobset.sigs.k8s.io/jobset-name=late")
        return all(not (j.get("status") or {}).get("active") for j in items)

    await wait_for(stopped, "no Job of it active", timeout=30)
    assert await client.kube.get_or_none(TRAINJOBS, ns, "late") is not None, "no TTL: the TrainJob stays"


async def test_start_and_completion_time_as_jobset_keeps_them_across_suspend_and_resume(
    client: Client, ns: str
) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer", SHORT)), ns)
    await client.apply(trainjob("times", "rt", suspend=True), ns)
    await client.wait_condition(ns, "times", "Suspended", timeout=30)
    tj = await client.trainjob(ns, "times")
    assert tj is not None and not (tj.get("status") or {}).get("startTime"), "not while created suspended"

    async def start_time() -> str | None:
        tj = await client.trainjob(ns, "times")
        return ((tj or {}).get("status") or {}).get("startTime")

    await client.kube.merge_patch(TRAINJOBS, ns, "times", {"spec": {"suspend": False}})
    first = await wait_for(start_time, "startTime set on resume", timeout=30)
    await client.kube.merge_patch(TRAINJOBS, ns, "times", {"spec": {"suspend": True}})

    async def cleared() -> bool:
        return not await start_time()

    await wait_for(cleared, "startTime cleared while suspended", timeout=30)
    await asyncio.sleep(1.5)  # the next start is a later second
    await client.kube.merge_patch(TRAINJOBS, ns, "times", {"spec": {"suspend": False}})
    second = await wait_for(start_time, "startTime set again on resume", timeout=30)
    t1, t2 = parse_time(first), parse_time(second)
    assert t1 is not None and t2 is not None and t2 > t1
    tj = await client.wait_condition(ns, "times", "Complete", timeout=60)
    complete = condition(tj, "Complete")
    assert complete is not None
    assert tj["status"]["startTime"] == second, "kept once finished"
    assert tj["status"]["completionTime"] == complete["lastTransitionTime"]
    finished = parse_time(complete["lastTransitionTime"])
    assert finished is not None and finished >= t2
