"""Admission by the real Kueue (its TrainJob integration), with the operator run as
``--gang-scheduler-name=kueue``: Kueue sizes a TrainJob's quota from every node, flips ``suspend``
and writes the flavor's node selector into the TrainJob's overrides; the operator honours both.
Kueue (0.19: ``waitForPodsReady`` on by default) sees each admitted job's pods ready from its
``jobsStatus`` (``ready`` + ``succeeded`` against the runtime's Jobs): the Workload's
``PodsReady`` turns True. One whose pods never get ready is evicted when the PodsReady timeout
passes (``Evicted``/``PodsReadyTimeout``), requeued after its backoff and deactivated at the
requeue limit, as Kueue's ``waitForPodsReady`` documents; the operator suspends its Jobs each time
and writes nothing once the job is held."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.helpers import kueue_sees_runtime, log_events, size
from e2e.test_trainjob import rjob, runtime, trainjob
from localcluster import ExternalCluster, LocalCluster
from localcluster.client import Client, condition, wait_for
from localcluster.kueue import cluster_queue, local_queue, resource_flavor
from localcluster.operator_process import Operator
from trainer.api.kinds import KUEUE_CLUSTER_QUEUES, KUEUE_WORKLOADS
from trainer.framework.json_codec import JSON

pytestmark = pytest.mark.e2e
GANG_SCHEDULER = "kueue"
RUN_15S = {
    "pod-complete.stage.kwok.x-k8s.io/delay": "15s",
    "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "16s",
}


async def kueue_queues(client: Client, ns: str, cpu: str) -> None:
    """A flavor selecting the KWOK nodes, a ClusterQueue ``cq-<ns>`` with ``cpu`` CPUs, a LocalQueue
    ``lq`` in ``ns``; returns once the ClusterQueue is Active."""
    await client.apply(resource_flavor("kwok", {"type": "kwok"}))
    await client.apply(cluster_queue(f"cq-{ns}", "kwok", cpu, "64Gi", namespaces=[ns]))
    await client.apply(local_queue(ns, "lq", f"cq-{ns}"))

    async def active() -> bool:
        cq = await client.kube.get_or_none(KUEUE_CLUSTER_QUEUES, None, f"cq-{ns}")
        return bool(condition(cq, "Active") and condition(cq, "Active")["status"] == "True")  # type: ignore[index]

    await wait_for(active, f"ClusterQueue cq-{ns} active")


def kueue_runtime() -> JSON:
    """A runtime whose trainer step runs 15 s per pod. Its template leaves ``parallelism`` unset:
    the node count is the TrainJob's ``trainer.numNodes`` alone."""
    return runtime("rt", rjob("node", "trainer", RUN_15S))


def queued(name: str, nodes: int, cpu: str) -> JSON:
    """A suspended TrainJob of ``nodes`` nodes of ``cpu`` CPUs each, in LocalQueue ``lq``."""
    resources = {"requests": {"cpu": cpu, "memory": "1Gi"}}
    job = trainjob(name, "rt", suspend=True, trainer={"numNodes": nodes, "resourcesPerNode": resources})
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
    return job


async def workload_of(client: Client, ns: str, name: str) -> JSON | None:
    """The Workload Kueue made for TrainJob ``name`` (the one it owns)."""
    tj = await client.trainjob(ns, name)
    if tj is None:
        return None
    items, _ = await client.kube.list(KUEUE_WORKLOADS, ns)
    uid = tj["metadata"]["uid"]
    owned = [w for w in items if any(o.get("uid") == uid for o in w["metadata"].get("ownerReferences") or [])]
    return owned[0] if owned else None


async def pending_for_quota(client: Client, ns: str, name: str) -> JSON | None:
    """The Workload of TrainJob ``name`` while Kueue holds it for want of quota (``QuotaReserved`` False,
    ``insufficient ...``), else None."""
    wl = await workload_of(client, ns, name)
    reserved = condition(wl, "QuotaReserved")
    return wl if reserved and reserved["status"] == "False" and "insufficient" in reserved["message"] else None


async def test_quota_counts_every_node_and_holds_the_bigger_job_until_the_first_finishes(
    client: Client, ns: str
) -> None:
    await kueue_queues(client, ns, cpu="2")
    await client.apply(kueue_runtime(), ns)
    await kueue_sees_runtime(client.kube, ns, "rt", "lq")
    await client.apply(queued("small", nodes=1, cpu="1500m"), ns)

    async def admitted(name: str) -> bool:
        tj = await client.trainjob(ns, name)
        return bool(tj and tj["spec"].get("suspend") is False)

    await wait_for(lambda: admitted("small"), "Kueue to admit the 1-node x 1.5-CPU TrainJob into 2 CPUs", timeout=60)
    (pod,) = await wait_for(lambda: _running(client, ns, "small", 1), "the small job's pod running", timeout=30)
    # The flavor's node labels, written by Kueue into the TrainJob's overrides, reach the pod.
    assert pod["spec"].get("nodeSelector", {}).get("type") == "kwok", pod["spec"].get("nodeSelector")
    ready = await wait_for(lambda: _pods_ready(client, ns, "small"), "Kueue to see the small job's pods ready", 30)
    assert condition(ready, "Admitted")["status"] == "True"  # type: ignore[index]

    await client.apply(queued("big", nodes=2, cpu="1500m"), ns)

    wl = await wait_for(lambda: pending_for_quota(client, ns, "big"), "the 2-node job's Workload pending for quota", 30)
    # Both nodes are counted: 2 pods x 1.5 CPU (Kueue 0.14.5 counted the template's parallelism, 1).
    assert [ps["count"] for ps in wl["spec"]["podSets"]] == [2], wl["spec"]["podSets"]
    assert [r["resources"]["cpu"] for r in wl["status"]["resourceRequests"]] == ["3"], wl["status"]

    # 3 CPUs hold the big job alone but not beside the small one: it still waits.
    await client.apply(cluster_queue(f"cq-{ns}", "kwok", "3", "64Gi", namespaces=[ns]))
    for _ in range(12):
        tj = await client.trainjob(ns, "big")
        assert tj is not None and tj["spec"]["suspend"] is True
        assert await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=big") == []
        await asyncio.sleep(0.25)
    assert condition(tj, "Suspended")["status"] == "True"  # type: ignore[index]
    small = await client.trainjob(ns, "small")
    assert condition(small, "Complete") is None, "the small job finished before the check"

    await client.wait_condition(ns, "small", "Complete", timeout=60)
    pods = await wait_for(lambda: _running(client, ns, "big", 2), "the big job's 2 pods after the small one", 60)
    assert {p["spec"]["nodeSelector"]["type"] for p in pods} == {"kwok"}
    await wait_for(lambda: _pods_ready(client, ns, "big"), "Kueue to see the big job's 2 pods ready", 30)
    await client.wait_condition(ns, "big", "Complete", timeout=60)


async def _pods_ready(client: Client, ns: str, name: str) -> JSON | None:
    """The job's Workload once its ``PodsReady`` condition is True (Kueue's reading of ``jobsStatus``)."""
    wl = await workload_of(client, ns, name)
    c = condition(wl, "PodsReady")
    return wl if c and c["status"] == "True" else None


async def _running(client: Client, ns: str, name: str, n: int) -> list[JSON] | None:
    pods = await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={name}")
    running = [p for p in pods if (p.get("status") or {}).get("phase") in ("Running", "Succeeded")]
    await asyncio.sleep(0)
    return running if len(running) >= n else None


# Kueue's waitForPodsReady for the eviction test (apis/config/v1beta2 WaitForPodsReady of v0.19.2):
# a 20 s timeout; requeued 15 s after an eviction (backoff base x 2^(count-1)); deactivated when a
# second timeout would make the requeue count exceed 1.
SHORT_PODS_READY = {
    "timeout": "20s",
    "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 15, "backoffLimitCount": 1},
}
NO_SUCH_NODE = {"trainer.kubeflow.org/e2e-no-such-node": "true"}


@pytest.fixture
def short_pods_ready_timeout(cluster: LocalCluster | ExternalCluster) -> Iterator[None]:
    """Kueue restarted with :data:`SHORT_PODS_READY`, and with its defaults again afterwards."""
    if not isinstance(cluster, LocalCluster):
        pytest.skip("restarts Kueue with another Configuration: the local cluster only")
    cluster.restart_kueue(SHORT_PODS_READY)
    try:
        yield
    finally:
        cluster.restart_kueue(None)


def _states(wl: JSON | None) -> dict[str, tuple[str, str]]:
    """``type -> (status, reason)`` of the Workload's conditions."""
    return {c["type"]: (c["status"], c["reason"]) for c in ((wl or {}).get("status") or {}).get("conditions") or []}


async def test_pods_never_ready_evicted_requeued_then_deactivated_and_the_operator_follows(
    client: Client, ns: str, operator: Operator, short_pods_ready_timeout: None
) -> None:
    log_start = size(operator.log_path)
    await kueue_queues(client, ns, cpu="4")
    rt = kueue_runtime()
    # A node selector no KWOK node has: admitted pods stay Pending (Unschedulable), never ready.
    rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["nodeSelector"] = (
        NO_SUCH_NODE
    )
    await client.apply(rt, ns)
    await kueue_sees_runtime(client.kube, ns, "rt", "lq")
    await client.apply(queued("stuck", nodes=2, cpu="1"), ns)

    async def admitted() -> JSON | None:
        tj = await client.trainjob(ns, "stuck")
        return tj if tj and tj["spec"].get("suspend") is False else None

    async def pods_pending() -> list[JSON] | None:
        pods = await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=stuck")
        pending = [p for p in pods if (p.get("status") or {}).get("phase") == "Pending"]
        return pending if len(pending) == 2 else None

    async def evicted(reason: str) -> JSON | None:
        wl = await workload_of(client, ns, "stuck")
        return wl if _states(wl).get("Evicted") == ("True", reason) else None

    # First admission: the pods are made, carry the impossible selector beside the flavor's, and wait.
    await wait_for(admitted, "Kueue to admit the TrainJob", timeout=60)
    pods = await wait_for(pods_pending, "the 2 pods Pending", timeout=30)
    assert all(p["spec"]["nodeSelector"] == {**NO_SUCH_NODE, "type": "kwok"} for p in pods), pods

    # The PodsReady timeout passes: Kueue evicts the Workload and suspends the TrainJob; the
    # operator suspends its Jobs (their pods go) and says Suspended; Kueue sets the requeue state.
    wl = await wait_for(lambda: evicted("PodsReadyTimeout"), "Evicted/PodsReadyTimeout on the Workload", timeout=60)
    assert _states(wl)["PodsReady"][0] == "False", _states(wl)
    assert wl["status"]["requeueState"]["count"] == 1, wl["status"].get("requeueState")
    assert wl["status"]["requeueState"].get("requeueAt"), wl["status"]["requeueState"]
    evicted_message = condition(wl, "Evicted")["message"]  # type: ignore[index]
    assert evicted_message == f"Exceeded the PodsReady timeout {ns}/{wl['metadata']['name']}", evicted_message
    suspended = await _held(client, ns, "stuck")
    assert suspended["spec"]["suspend"] is True

    # Kueue releases the quota only once the job is no longer active (the operator's jobsStatus
    # says no pod is active): QuotaReserved False, Requeued False for the eviction's reason.
    async def released() -> JSON | None:
        wl = await workload_of(client, ns, "stuck")
        states = _states(wl)
        if states.get("QuotaReserved", ("",))[0] == "False" and states.get("Requeued", ("",))[0] == "False":
            return wl
        return None

    wl = await wait_for(released, "Kueue to release the evicted Workload's quota", timeout=30)
    assert _states(wl)["Requeued"] == ("False", "PodsReadyTimeout"), _states(wl)
    assert "admission" not in wl["status"], wl["status"]

    # After the backoff Kueue requeues it (Requeued/BackoffFinished) and admits it again; the
    # operator resumes the same Jobs, and the pods are back (still Pending).
    async def requeued() -> JSON | None:
        wl = await workload_of(client, ns, "stuck")
        return wl if _states(wl).get("Requeued") == ("True", "BackoffFinished") else None

    wl = await wait_for(requeued, "Requeued/BackoffFinished after the 15 s backoff", timeout=60)
    assert wl["status"]["requeueState"]["count"] == 1, wl["status"].get("requeueState")
    await wait_for(admitted, "Kueue to admit the TrainJob again", timeout=60)
    await wait_for(pods_pending, "the 2 pods Pending again", timeout=30)

    # The second timeout would be the second requeue, past backoffLimitCount 1: Kueue deactivates
    # the Workload (spec.active false) and evicts it for that; the job is held for good.
    reason = "DeactivatedDueToRequeuingLimitExceeded"
    wl = await wait_for(lambda: evicted(reason), f"Evicted/{reason}", timeout=60)
    assert wl["spec"]["active"] is False
    held = await _held(client, ns, "stuck")
    assert held["spec"]["suspend"] is True

    # Nothing of the operator's fights Kueue: the TrainJob, its Jobs and the Workload settle (Kueue
    # releasing the quota, the Job controller's status) and then nobody writes them any more.
    settled = await _settled(client, ns, "stuck")
    log_settled = size(operator.log_path)
    for _ in range(20):
        await asyncio.sleep(0.25)
        assert await _versions(client, ns, "stuck") == settled
    assert _writes(operator, ns, "stuck", log_settled) == [], "the operator wrote after the job was held"
    # Its writes over the whole test: the Job made once, then at most two updates of it for each of
    # Kueue's four turns (admitted, evicted, admitted again, deactivated): suspend or resume, and
    # the pod template once Kueue wrote its node selector in or restored the runtime's.
    writes = _writes(operator, ns, "stuck", log_start)
    updates = [w for w in writes if w.startswith("updated Job")]
    assert writes.count("created Job stuck-node-0") == 1 and len(updates) <= 8, writes
    final = _states(await workload_of(client, ns, "stuck"))
    assert final["QuotaReserved"][0] == "False" and final["Requeued"] == ("False", reason), final


async def _held(client: Client, ns: str, name: str) -> JSON:
    """The TrainJob once it is suspended with its condition ``Suspended`` True, every Job of it
    suspended and no pod of it left."""

    async def probe() -> JSON | None:
        tj = await client.trainjob(ns, name)
        c = condition(tj, "Suspended")
        if not tj or not c or c["status"] != "True":
            return None
        jobs = await client.jobs(ns, name)
        if not jobs or not all(j["spec"].get("suspend") is True for j in jobs):
            return None
        return None if await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={name}") else tj

    return await wait_for(probe, f"TrainJob {name} Suspended with its Jobs suspended and no pods", timeout=60)


def _writes(operator: Operator, ns: str, name: str, offset: int) -> list[str]:
    """The children the operator created, updated or deleted for TrainJob ``name`` since byte
    ``offset`` of its log (``"<created|updated|deleted> <Kind> <name>"``, in order)."""
    out: list[str] = []
    for event in log_events(operator.log_path, offset):
        if event.get("trainjob") != f"{ns}/{name}":
            continue
        if event.get("event") == "applied":
            out += [f"{verb} {child}" for verb in ("created", "updated") for child in event.get(verb) or []]
        elif event.get("event") == "deleted":
            out.append(f"deleted {event.get('kind')} {event.get('name')}")
    return out


async def _settled(client: Client, ns: str, name: str, quiet: int = 12) -> dict[str, Any]:
    """The :func:`_versions` of job ``name`` once ``quiet`` reads 0.25 s apart found them unchanged;
    ``AssertionError`` when they keep changing for 60 s (something writes in a loop)."""
    seen: list[dict[str, Any]] = []

    async def probe() -> dict[str, Any] | None:
        seen.append(await _versions(client, ns, name))
        recent = seen[-quiet:]
        return recent[0] if len(recent) == quiet and all(v == recent[0] for v in recent) else None

    return await wait_for(probe, f"the objects of {name} to stop changing", timeout=60)


async def _versions(client: Client, ns: str, name: str) -> dict[str, Any]:
    """The resourceVersions of TrainJob ``name``, its Jobs and its Workload."""
    tj = await client.trainjob(ns, name)
    wl = await workload_of(client, ns, name)
    versions: dict[str, Any] = {
        "TrainJob": (tj or {}).get("metadata", {}).get("resourceVersion"),
        "Workload": (wl or {}).get("metadata", {}).get("resourceVersion"),
    }
    for job in await client.jobs(ns, name):
        versions[f"Job {job['metadata']['name']}"] = job["metadata"]["resourceVersion"]
    return versions
