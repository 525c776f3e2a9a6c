"""Chaos on the real local cluster. A TrainJob created as soon as a restarted kube-apiserver answers
again is served by the operator within 5 s: its Jobs created and, once they are Complete, its own
Complete (the operator's steps; the rest of the way is the cluster's controllers' and KWOK's). The
operator killed with ``kill -9`` and the kube-apiserver restarted while TrainJobs and MPIJobs are
created and run: afterwards every job succeeded with exactly the children it should have, each created
once (the checks of :mod:`localcluster.chaos`). Last, every component of the cluster works again by
itself (the cluster is shared by every module).

The first test runs first on purpose: client-go's reflectors (kube-controller-manager, kube-scheduler,
kwok, Volcano, Kueue) back off from 0.8 s, doubling with jitter up to 30 s, and forget it only after
2 minutes without failures, so each restart within 2 minutes of another slows their resumption."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from functools import partial

import pytest

from e2e.test_trainjob import trainjob
from localcluster import ExternalCluster, LocalCluster, chaos
from localcluster.chaos import TORCH_RUNTIME, retrying, runtimes, workload
from localcluster.client import Client, condition
from localcluster.kueue import cluster_queue, local_queue, resource_flavor
from localcluster.operator_process import Operator
from trainer.api.kinds import JOBS, KUEUE_CLUSTER_QUEUES, NAMESPACES, PODS, TRAINJOBS, VOLCANO_PODGROUPS, Resource
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import Kube

pytestmark = pytest.mark.e2e
TRAINJOBS_N = 60  # a third of them on the mpi runtime
MPIJOBS_N = 4
KILLS = 3
RESUME_BOUND = 5.0  # seconds of the operator's own steps for a TrainJob created as the apiserver answers again
COMPONENTS_BOUND = 120.0  # seconds for every component to work again (client-go backs off up to 60 s)
NODES = Resource("", "v1", "Node", "nodes", namespaced=False)


@pytest.fixture
def local(cluster: LocalCluster | ExternalCluster) -> Iterator[LocalCluster]:
    """The local cluster: these tests restart its kube-apiserver."""
    if not isinstance(cluster, LocalCluster):
        pytest.skip("restarts the kube-apiserver of the local cluster")
    yield cluster


@pytest.fixture
async def fresh(local: LocalCluster) -> AsyncIterator[Kube]:
    """A connection of its own (the session client's pooled connections die with the apiserver)."""
    kube = await Kube.connect(str(local.kubeconfig))
    try:
        yield kube
    finally:
        await kube.close()


RESTARTS: list[float] = []
"""When the apiserver answered again after each restart of this module (``time.monotonic()``)."""


def _restart_blocking(local: LocalCluster) -> float:
    answered = local.restart_apiserver()
    RESTARTS.append(answered)
    return answered


async def restart(local: LocalCluster) -> float:
    """Restart the apiserver (in a thread: the event loop goes on); returns when it answered again."""
    return await asyncio.to_thread(_restart_blocking, local)


async def reconnected(client: Client) -> None:
    """Once the apiserver is back: the session client answers again (stale connections dropped)."""
    await retrying(partial(client.kube.list, NAMESPACES, None), "the session client after the restart")


async def test_a_trainjob_created_as_the_apiserver_answers_again_is_served_within_5s(
    local: LocalCluster, client: Client, samples: None, ns: str, operator: Operator
) -> None:
    # Settled: the operator has run a TrainJob end to end and gone quiet.
    await client.apply(trainjob("before", TORCH_RUNTIME, kind="ClusterTrainingRuntime"), ns)
    await client.wait_condition(ns, "before", "Complete", timeout=60)
    await asyncio.sleep(3)

    stopped = time.monotonic()
    answered = await restart(local)
    kube = await Kube.connect(str(local.kubeconfig))
    try:
        job = trainjob("after", TORCH_RUNTIME, kind="ClusterTrainingRuntime")
        job["metadata"]["namespace"] = ns
        await retrying(partial(kube.apply, job, "e2e"), "creating the TrainJob")
        created = time.monotonic() - answered
        seen = await _milestones(kube, ns, "after", answered, until=answered + 60)
    finally:
        await kube.close()
    await reconnected(client)

    lines = [
        f"apiserver down {answered - stopped:.1f}s; TrainJob created at +{created:.2f}s after it answered",
        *(f"  {step}: +{at:.2f}s" for step, at in seen.items()),
    ]
    print("\n".join(lines))
    assert "TrainJob Complete (operator)" in seen, "\n".join(["TrainJob not Complete within 60s:", *lines])
    # The operator's steps: the TrainJob to its Jobs, and its Jobs' Complete to its own. The steps between
    # are kube-controller-manager's, the kube-scheduler's and KWOK's, slower on a busy machine.
    operators = (seen["Job created (operator)"] - created) + (
        seen["TrainJob Complete (operator)"] - seen["Job Complete (kube-controller-manager)"]
    )
    assert operators <= RESUME_BOUND, "\n".join(
        [f"the operator's steps took {operators:.2f}s (more than {RESUME_BOUND:.0f}s):", *lines]
    )


async def _milestones(kube: Kube, ns: str, name: str, since: float, until: float) -> dict[str, float]:
    """Poll the TrainJob ``name``, its Jobs and Pods every 0.1 s until it is Complete or ``until``;
    returns when each step was first seen, in seconds since ``since`` (``time.monotonic()``)."""
    seen: dict[str, float] = {}
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"

    def mark(step: str, reached: bool) -> None:
        if reached and step not in seen:
            seen[step] = time.monotonic() - since

    while time.monotonic() < until and "TrainJob Complete (operator)" not in seen:
        # Each step follows the ones before it, so each object is read before those of the steps before
        # it: the read that finds the TrainJob Complete is followed by reads that find its Jobs Complete
        # and its Pods Succeeded, so no step is missing when the loop ends.
        tj = await retrying(partial(kube.get, TRAINJOBS, ns, name), "reading the TrainJob")
        jobs, _ = await retrying(partial(kube.list, JOBS, ns, selector), "listing the Jobs")
        pods, _ = await retrying(partial(kube.list, PODS, ns, selector), "listing the Pods")
        phases = {p.get("status", {}).get("phase") for p in pods}
        mark("Job created (operator)", bool(jobs))
        mark("Pod created (kube-controller-manager)", bool(pods))
        mark("Pod bound (kube-scheduler)", any(p["spec"].get("nodeName") for p in pods))
        mark("Pod Running (kwok)", bool(phases & {"Running", "Succeeded"}))
        mark("Pod Succeeded (kwok)", "Succeeded" in phases)
        mark("Job Complete (kube-controller-manager)", any(_true(j, "Complete") for j in jobs))
        mark("TrainJob Complete (operator)", _true(tj, "Complete"))
        await asyncio.sleep(0.1)
    return seen


def _true(obj: JSON | None, type_: str) -> bool:
    c = condition(obj, type_)
    return bool(c and c.get("status") == "True")


async def test_a_burst_survives_operator_kills_and_an_apiserver_restart_without_duplicates_or_orphans(
    local: LocalCluster, client: Client, fresh: Kube, samples: None, ns: str, operator: Operator
) -> None:
    for rt in runtimes():
        await client.apply(rt)
    parents = workload(TRAINJOBS_N, mpi_share=1 / 3, mpijobs=MPIJOBS_N, run=(2, 5))
    result = await chaos.run(
        client.kube, fresh, ns, parents, operator, partial(_restart_blocking, local), KILLS, 1, timeout=150
    )
    await reconnected(client)
    print("\n".join(result.lines))
    assert not result.failures(), "\n".join([*result.lines, *result.failures()])


async def test_every_component_works_again_after_the_apiserver_restarts(
    local: LocalCluster, client: Client, ns: str
) -> None:
    """After this module's restarts (one of its own when run alone) each component has reconnected by
    itself: kwok (node heartbeats, pods), kube-controller-manager and kube-scheduler (a Job completes),
    Volcano (a pod it schedules, in a PodGroup its controller made), Kueue (a ClusterQueue it makes
    Active, a suspended Job it admits)."""
    answered = RESTARTS[-1] if RESTARTS else await restart(local)
    began = time.monotonic() - answered
    kube = await Kube.connect(str(local.kubeconfig))
    try:
        objects = [
            resource_flavor("kwok", {"type": "kwok"}),
            cluster_queue(f"cq-{ns}", "kwok", "2", "8Gi", namespaces=[ns]),
            local_queue(ns, "lq", f"cq-{ns}"),
            _job("plain", suspend=False),
            _job("queued", suspend=True),
            _volcano_pod("gang"),
        ]
        for obj in objects:
            if obj["kind"] in ("Job", "Pod"):
                obj["metadata"]["namespace"] = ns
            await retrying(partial(kube.apply, obj, "e2e"), f"creating {obj['kind']} {obj['metadata']['name']}")
        seen: dict[str, float] = {}
        deadline = time.monotonic() + COMPONENTS_BOUND
        checks = {
            "nodes Ready (kwok heartbeats)": partial(_nodes_ready, kube, local.nodes),
            "ClusterQueue Active (kueue)": partial(_cq_active, kube, f"cq-{ns}"),
            "Job Complete (controller-manager, scheduler, kwok)": partial(_job_complete, kube, ns, "plain"),
            "Job admitted (kueue)": partial(_admitted, kube, ns, "queued"),
            "Pod bound in a PodGroup (volcano)": partial(_volcano_bound, kube, ns, "gang"),
        }
        while time.monotonic() < deadline and len(seen) < len(checks):
            for what, probe in checks.items():
                if what not in seen and await retrying(probe, what):
                    seen[what] = time.monotonic() - answered
            await asyncio.sleep(0.2)
    finally:
        await kube.close()
    await reconnected(client)
    print(f"checked from +{began:.1f}s after the last restart answered:")
    print("\n".join(f"  {what}: +{at:.1f}s" for what, at in seen.items()))
    missing = sorted(set(checks) - set(seen))
    assert not missing, f"not working again {COMPONENTS_BOUND:.0f}s after this test began: {missing}"
    assert all(local.status()[name] for name in ("etcd", "kube-apiserver", "kwok", "vc-scheduler", "kueue"))


def _job(name: str, suspend: bool) -> JSON:
    labels = {"kueue.x-k8s.io/queue-name": "lq"} if suspend else {}
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {"suspend": suspend, "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
    }


def _volcano_pod(name: str) -> JSON:
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"schedulerName": "volcano", "containers": [container]},
    }


async def _nodes_ready(kube: Kube, n: int) -> bool:
    nodes, _ = await kube.list(NODES, None, "type=kwok")
    return sum(_true(node, "Ready") and not node["spec"].get("taints") for node in nodes) >= n


async def _cq_active(kube: Kube, name: str) -> bool:
    return _true(await kube.get_or_none(KUEUE_CLUSTER_QUEUES, None, name), "Active")


async def _job_complete(kube: Kube, ns: str, name: str) -> bool:
    return _true(await kube.get_or_none(JOBS, ns, name), "Complete")


async def _admitted(kube: Kube, ns: str, name: str) -> bool:
    job = await kube.get_or_none(JOBS, ns, name)
    return bool(job and job["spec"].get("suspend") is False)


async def _volcano_bound(kube: Kube, ns: str, name: str) -> bool:
    pod = await kube.get_or_none(PODS, ns, name)
    groups, _ = await kube.list(VOLCANO_PODGROUPS, ns)
    return bool(pod and pod["spec"].get("nodeName") and groups)
