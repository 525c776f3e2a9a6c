"""The SDK says why a job waits: a wait that runs out raises :class:`JobWaitingError` (a
:class:`WaitTimeoutError`) carrying :func:`trainer.api.waiting.why_waiting`'s answer, a wait for a pod stops
early on one that cannot start (:class:`PodCannotStartError`), and ``why_waiting`` asks directly. Over
the in-memory Kube double, whose job never changes (one list, then no watch event)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from tests.kube_double import RecordingKube
from trainer.api.kinds import TRAINJOBS
from trainer.api.labels import JOBSET_NAME, REPLICATED_JOB_NAME
from trainer.client import (
    TRAINJOB,
    AsyncJobClient,
    AsyncTrainerClient,
    JobWaitingError,
    PodCannotStartError,
    UnknownNodeError,
    WaitTimeoutError,
    jobs,
)
from trainer.client.types import COMPLETION_INDEX_LABEL
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import Kube

PULL = 'Back-off pulling image "registry.invalid/nope:1"'


def stuck_job() -> JSON:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "stuck", "namespace": "team-a", "uid": "u1"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
        "status": {"jobsStatus": [{"name": "node", "active": 1}]},
    }


def pending_pod(name: str, **status: Any) -> JSON:
    labels = {JOBSET_NAME: "stuck", REPLICATED_JOB_NAME: "node", COMPLETION_INDEX_LABEL: "0"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "labels": labels,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"containers": [{"name": "node", "image": "registry.invalid/nope:1"}]},
        "status": {"phase": "Pending", **status},
    }


def pulling(reason: str = "ImagePullBackOff") -> JSON:
    waiting = {"reason": reason, "message": PULL}
    return pending_pod("stuck-node-0-0-a", containerStatuses=[{"name": "node", "state": {"waiting": waiting}}])


def unschedulable() -> JSON:
    scheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    message = "0/2 nodes are available: 2 Insufficient cpu."
    return pending_pod("stuck-node-0-0-b", conditions=[{**scheduled, "message": message}])


@pytest.fixture
def kube(monkeypatch: pytest.MonkeyPatch) -> RecordingKube:
    """The double with the stuck job; a watch that lists once and then hears nothing; no PodGroup."""
    double = RecordingKube()
    double.put(stuck_job())

    async def observe(kube: Any, res: Any, namespace: Any, **kw: Any) -> AsyncIterator[dict[str, JSON]]:
        items, _ = await double.list(res, namespace, kw.get("label_selector"), field_selector=kw.get("field_selector"))
        yield {str(i["metadata"]["name"]): i for i in items}
        await asyncio.Event().wait()

    async def no_podgroup(self: Any, name: str) -> None:
        return None

    monkeypatch.setattr(jobs, "observe", observe)
    monkeypatch.setattr(AsyncJobClient, "get_podgroup", no_podgroup)
    return double


def job_client(kube: RecordingKube) -> AsyncJobClient[Any]:
    return AsyncJobClient(cast(Kube, kube), "team-a", TRAINJOB)


async def test_a_wait_that_runs_out_says_why_the_job_waits(kube: RecordingKube) -> None:
    kube.put(unschedulable())
    with pytest.raises(JobWaitingError) as raised:
        await job_client(kube).wait_for_job_status("stuck", timeout=0.2)
    error = raised.value
    assert isinstance(error, WaitTimeoutError) and isinstance(error, TimeoutError)
    assert (error.why.reason, error.last) == ("Unschedulable", "Created")
    assert str(error) == (
        "timed out after 0.2s waiting for TrainJob team-a/stuck to be Complete; last seen: Created; "
        "why: Unschedulable: pod stuck-node-0-0-b: 0/2 nodes are available: 2 Insufficient cpu.; "
        f"next: {error.why.next_step}; see docs/troubleshooting.md#pods-that-cannot-be-scheduled"
    )


async def test_a_wait_with_nothing_holding_the_job_is_a_plain_timeout(kube: RecordingKube) -> None:
    with pytest.raises(WaitTimeoutError) as raised:
        await job_client(kube).wait_for_job_status("stuck", timeout=0.2)
    assert type(raised.value) is WaitTimeoutError


async def test_the_kubeflow_shaped_client_raises_the_same_and_answers_why(kube: RecordingKube) -> None:
    kube.put(pulling())
    c = AsyncTrainerClient(cast(Kube, kube), "team-a")
    with pytest.raises(JobWaitingError, match="why: ImagePullBackOff: pod stuck-node-0-0-a: container node: Back-off"):
        await c.wait_for_job_status("stuck", {"Running"}, timeout=0.5, polling_interval=0.1)
    why = await c.why_waiting("stuck")
    assert why is not None and (why.reason, why.source) == ("ImagePullBackOff", "pod stuck-node-0-0-a")


async def test_a_wait_for_a_pod_stops_at_once_on_one_that_cannot_start(kube: RecordingKube) -> None:
    kube.put(pulling())
    with pytest.raises(PodCannotStartError) as raised:
        await job_client(kube).wait_for_pods("stuck", timeout=120)
    assert isinstance(raised.value, RuntimeError) and raised.value.why.reason == "ImagePullBackOff"
    assert str(raised.value).startswith(
        f"step 'node' node 0 of TrainJob team-a/stuck cannot start: ImagePullBackOff: pod stuck-node-0-0-a: "
        f"container node: {PULL}; next: "
    )


@pytest.mark.parametrize("pod", [pulling("ErrImagePull"), unschedulable()], ids=["ErrImagePull", "Unschedulable"])
async def test_a_wait_for_a_pod_that_may_still_start_runs_out_saying_why(kube: RecordingKube, pod: JSON) -> None:
    kube.put(pod)
    with pytest.raises(JobWaitingError) as raised:
        await job_client(kube).wait_for_pods("stuck", timeout=0.2)
    assert raised.value.last == f"pod {pod['metadata']['name']} Pending"
    assert raised.value.why.source == f"pod {pod['metadata']['name']}"


async def test_a_suspended_job_under_kueue_says_what_its_workload_waits_for(
    kube: RecordingKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = await kube.get(TRAINJOBS, "team-a", "stuck")
    job["status"]["conditions"] = [{"type": "Suspended", "status": "True", "reason": "Suspended", "message": "x"}]
    kube.put(job)
    quota = "couldn't assign flavors to pod set node: insufficient unused quota for cpu in flavor default"
    workload = {
        "metadata": {"name": "trainjob-stuck-1"},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": quota}]},
    }

    async def owned(self: Any, uid: str) -> JSON | None:
        return workload if uid == "u1" else None

    monkeypatch.setattr(AsyncJobClient, "_workload", owned)
    why = await job_client(kube).why_waiting("stuck")
    assert why is not None and (why.reason, why.message) == ("Pending", f"Workload trainjob-stuck-1: {quota}")


def node_pod(index: int, phase: str) -> JSON:
    pod = pending_pod(f"stuck-node-0-{index}-a")
    pod["metadata"]["labels"][COMPLETION_INDEX_LABEL] = str(index)
    pod["status"] = {"phase": phase}
    return pod


@pytest.mark.parametrize("finished", [False, True], ids=["running", "finished"])
async def test_a_node_the_step_does_not_have_is_named_with_those_it_has(kube: RecordingKube, finished: bool) -> None:
    """``logs --node 5`` of a 2-node job: an error naming the nodes there are, at once (it said
    ``Pod team-a/of step 'node' node 5 of stuck not found`` of a finished job, and waited out a running one)."""
    if finished:
        kube.put({**stuck_job(), "status": {"conditions": [{"type": "Complete", "status": "True"}]}})
    for index in (0, 1):
        kube.put(node_pod(index, "Succeeded" if finished else "Running"))
    with pytest.raises(UnknownNodeError) as raised:
        await job_client(kube).wait_for_pods("stuck", node=5, timeout=120)
    assert str(raised.value) == "TrainJob team-a/stuck has no node 5 in step 'node'; its nodes are: 0, 1"
    assert [p["metadata"]["name"] for p in await job_client(kube).wait_for_pods("stuck", node=1)] == [
        "stuck-node-0-1-a"
    ]


async def test_a_node_whose_pod_may_still_come_is_waited_for(kube: RecordingKube) -> None:
    kube.put(node_pod(0, "Running"))
    kube.put(node_pod(1, "Pending"))  # the Job is still creating its pods
    with pytest.raises(WaitTimeoutError):
        await job_client(kube).wait_for_pods("stuck", node=5, timeout=0.2)


def step_job(completions: int) -> JSON:
    """The step's Job: the labels its pods have, ``completions`` nodes."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "stuck-node-0", "namespace": "team-a", "labels": pending_pod("x")["metadata"]["labels"]},
        "spec": {"completions": completions, "parallelism": completions, "completionMode": "Indexed"},
    }


async def test_a_node_whose_job_has_not_made_its_pod_yet_is_waited_for(kube: RecordingKube) -> None:
    """Node 0's pod started, node 1's not created yet (the Job controller creates one pod first, then
    the next batch): ``logs --node 1`` waits for it, ``--node 2`` of that 2-node Job is unknown at once."""
    kube.put(node_pod(0, "Running"))
    kube.put(step_job(2))
    with pytest.raises(WaitTimeoutError):
        await job_client(kube).wait_for_pods("stuck", node=1, timeout=0.2)
    with pytest.raises(UnknownNodeError) as raised:
        await job_client(kube).wait_for_pods("stuck", node=2, timeout=120)
    assert str(raised.value) == "TrainJob team-a/stuck has no node 2 in step 'node'; its nodes are: 0"
