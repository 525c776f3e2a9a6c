"""JobSet's exclusive placement on the real scheduler: the KWOK nodes labelled into two zones, a
TrainJob whose runtime template carries ``alpha.jobset.sigs.k8s.io/exclusive-topology`` gets one zone
per Job, and another such TrainJob waits until a zone is free."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from e2e.test_trainjob import RUN_FOR, rjob, runtime, trainjob
from localcluster.client import Client, condition, wait_for
from localcluster.cluster import NODE_PREFIX
from trainer.api.kinds import TRAINJOBS, Resource
from trainer.framework.json_codec import JSON

pytestmark = pytest.mark.e2e
NODES = Resource("", "v1", "Node", "nodes", namespaced=False)
ZONE = "topology.kubernetes.io/zone"
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"


@pytest.fixture
async def zones(client: Client) -> AsyncIterator[dict[str, str]]:
    """The KWOK nodes labelled into zones ``a`` (the first half) and ``b``; unlabelled afterwards."""
    items, _ = await client.kube.list(NODES, None, "type=kwok")
    names = sorted(n["metadata"]["name"] for n in items if n["metadata"]["name"].startswith(NODE_PREFIX))
    assert len(names) >= 2, names
    zone = {name: "a" if i < len(names) // 2 else "b" for i, name in enumerate(names)}
    try:
        for name, z in zone.items():
            await client.kube.merge_patch(NODES, None, name, {"metadata": {"labels": {ZONE: z}}})
        yield zone
    finally:
        for name in zone:
            await client.kube.merge_patch(NODES, None, name, {"metadata": {"labels": {ZONE: None}}})


def exclusive_runtime(name: str, replicas: int, pods: int) -> JSON:
    """A runtime of one replicated job ``worker`` (``replicas`` Jobs of ``pods`` pods that run on), one
    zone per Job."""
    worker = rjob("worker", None, RUN_FOR, replicas=replicas)
    worker["template"]["spec"].update(parallelism=pods, completions=pods)
    rt = runtime(name, worker, torch=False)
    rt["spec"]["template"]["metadata"] = {"annotations": {EXCLUSIVE: ZONE}}
    return rt


async def scheduled_pods(client: Client, ns: str, trainjob_name: str, n: int) -> list[JSON] | None:
    pods = await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={trainjob_name}")
    placed = [p for p in pods if (p.get("spec") or {}).get("nodeName")]
    return placed if len(placed) == n else None


async def test_each_job_gets_a_zone_of_its_own(client: Client, ns: str, zones: dict[str, str]) -> None:
    await client.apply(exclusive_runtime("two-by-two", replicas=2, pods=2), ns)
    await client.apply(trainjob("spread", "two-by-two"), ns)

    async def all_placed() -> list[JSON] | None:
        return await scheduled_pods(client, ns, "spread", 4)

    pods = await wait_for(all_placed, "4 pods of TrainJob spread scheduled", timeout=90)
    by_job: dict[str, set[str]] = {}
    for pod in pods:
        job = pod["metadata"]["labels"]["batch.kubernetes.io/job-name"]
        by_job.setdefault(job, set()).add(zones[pod["spec"]["nodeName"]])
        assert pod["metadata"]["annotations"][EXCLUSIVE] == ZONE
    assert sorted(by_job) == ["spread-worker-0", "spread-worker-1"]
    assert all(len(z) == 1 for z in by_job.values()), by_job  # a Job's pods share one zone
    assert by_job["spread-worker-0"] != by_job["spread-worker-1"], by_job  # and no zone holds two Jobs

    # Both zones are taken: a third Job (of another TrainJob) is not scheduled until one is free.
    await client.apply(exclusive_runtime("one", replicas=1, pods=1), ns)
    await client.apply(trainjob("late", "one"), ns)

    async def unschedulable() -> JSON | None:
        pods = await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=late")
        c = condition(pods[0], "PodScheduled") if pods else None
        return pods[0] if c and c.get("status") == "False" and c.get("reason") == "Unschedulable" else None

    late = await wait_for(unschedulable, "the late TrainJob's pod Unschedulable", timeout=60)
    assert "anti-affinity" in str(condition(late, "PodScheduled")), late["status"]
    assert not late["spec"].get("nodeName")

    await client.kube.delete(TRAINJOBS, ns, "spread", propagation="Foreground")

    async def late_placed() -> list[JSON] | None:
        return await scheduled_pods(client, ns, "late", 1)

    await wait_for(late_placed, "the late TrainJob's pod scheduled once a zone is free", timeout=90)
