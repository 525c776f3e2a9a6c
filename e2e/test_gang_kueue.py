"""Admission by the real Kueue (its TrainJob integration), with the operator run as
``--gang-scheduler-name=kueue``: Kueue sizes a TrainJob's quota from every node, flips ``suspend``
and writes the flavor's node selector into the TrainJob's overrides; the operator honours both.
Kueue (0.19: ``waitForPodsReady`` on by default) sees each admitted job's pods ready from its
``jobsStatus`` (``ready`` + ``succeeded`` against the runtime's Jobs): the Workload's
``PodsReady`` turns True."""

from __future__ import annotations

import asyncio

import pytest

from api.kinds import KUEUE_CLUSTER_QUEUES, KUEUE_WORKLOADS
from e2e.cluster.kueue import cluster_queue, local_queue, resource_flavor
from e2e.helpers import Client, condition, kueue_sees_runtime, wait_for
from e2e.test_trainjob import rjob, runtime, trainjob
from trainer.json_codec import JSON

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

    async def pending_for_quota() -> JSON | None:
        wl = await workload_of(client, ns, "big")
        reserved = condition(wl, "QuotaReserved")
        return wl if reserved and reserved["status"] == "False" and "insufficient" in reserved["message"] else None

    wl = await wait_for(pending_for_quota, "the 2-node job's Workload pending for quota", timeout=30)
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
