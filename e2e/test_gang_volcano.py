"""Gang scheduling on the real Volcano scheduler, with the operator run as
``--gang-scheduler-name=volcano``. The cluster has 4 KWOK nodes of 6 CPU (24 CPU in all)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from e2e.test_trainjob import RUN_FOR, rjob, runtime, trainjob
from localcluster.client import Client, condition, wait_for
from trainer.api.kinds import (
    CRDS,
    NODES,
    TRAINJOBS,
    VOLCANO_COMMANDS,
    VOLCANO_HYPERNODES,
    VOLCANO_PODGROUPS,
    VOLCANO_QUEUES,
)
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError

pytestmark = pytest.mark.e2e
GANG_SCHEDULER = "volcano"


def sized(name: str, nodes: int, cpu: str, **extra: Any) -> JSON:
    return trainjob(name, "rt", trainer={"numNodes": nodes, "resourcesPerNode": {"requests": {"cpu": cpu}}}, **extra)


def with_queue(obj: JSON, queue: str) -> JSON:
    return {**obj, "metadata": {**obj["metadata"], "annotations": {"scheduling.volcano.sh/queue-name": queue}}}


async def make_queue(client: Client, name: str, weight: int = 1, parent: str | None = None) -> JSON:
    spec: JSON = {"weight": weight, "reclaimable": True}
    if parent:
        spec["parent"] = parent
    await client.kube.apply(
        {"apiVersion": VOLCANO_QUEUES.api_version, "kind": "Queue", "metadata": {"name": name}, "spec": spec}, "e2e"
    )

    async def open_() -> JSON | None:
        q = await client.kube.get_or_none(VOLCANO_QUEUES, None, name)
        return q if q and (q.get("status") or {}).get("state") == "Open" else None

    return await wait_for(open_, f"Volcano queue {name} Open")


async def pods(client: Client, ns: str, name: str) -> list[JSON]:
    return await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={name}")


async def test_a_gang_that_cannot_fit_binds_no_pod_and_one_that_fits_runs(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    # 8 x 6 CPU = 48 CPU: more than the 24 CPU of the cluster, even with the 1.5 overcommit
    # factor the local Volcano is configured with.
    await client.apply(sized("big", 8, "6"), ns)
    tj = await client.wait_condition(ns, "big", "WaitingForGang")
    assert "minMember 8" in condition(tj, "WaitingForGang")["message"]  # type: ignore[index]
    pg = await wait_for(lambda: client.kube.get_or_none(VOLCANO_PODGROUPS, ns, "big"), "PodGroup big")
    assert pg["spec"]["minMember"] == 8 and pg["spec"]["minResources"] == {"cpu": "48"}
    assert pg["spec"]["queue"] == "default"
    await asyncio.sleep(5)  # several Volcano scheduling sessions
    pg = await client.kube.get(VOLCANO_PODGROUPS, ns, "big")
    assert pg["status"]["phase"] == "Pending", pg["status"]
    assert await pods(client, ns, "big") == [], "no pod may exist, let alone be bound, while the gang cannot start"
    (job,) = await client.jobs(ns, "big")
    assert job["spec"]["suspend"] is True

    # A gang that fits: 3 x 2 CPU.
    await client.apply(sized("fits", 3, "2"), ns)
    tj = await client.wait_condition(ns, "fits", "Complete", timeout=90)
    assert condition(tj, "WaitingForGang") is None
    for pod in await pods(client, ns, "fits"):
        assert pod["spec"]["schedulerName"] == "volcano"
        assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "fits"
        assert pod["metadata"]["annotations"]["volcano.sh/task-spec"] == "node"
    # Finished: its PodGroup is deleted so it stops holding queue quota; the big one still waits.
    await wait_for(
        lambda: _absent(client.kube.get_or_none(VOLCANO_PODGROUPS, ns, "fits")), "PodGroup of the finished job deleted"
    )
    assert (await client.kube.get(VOLCANO_PODGROUPS, ns, "big"))["status"]["phase"] == "Pending"


async def _absent(obj: Any) -> bool:
    return await obj is None


async def _phase(client: Client, ns: str, name: str, phase: str) -> bool:
    pg = await client.kube.get_or_none(VOLCANO_PODGROUPS, ns, name)
    return pg is not None and pg.get("status", {}).get("phase") == phase


async def test_the_queue_reaches_the_pod_group_and_deletion_removes_it(client: Client, ns: str) -> None:
    """Seed 000: a job naming queue `production` must land in `production`, not in `default`."""
    await make_queue(client, "production")
    await client.apply(runtime("rt", rjob("node", "trainer", RUN_FOR)), ns)
    await client.apply(with_queue(sized("prod", 2, "1"), "production"), ns)
    tj = await client.wait_running(ns, "prod", timeout=60)
    pg = await client.kube.get(VOLCANO_PODGROUPS, ns, "prod")
    assert pg["spec"]["queue"] == "production"
    assert pg["spec"]["minMember"] == 2
    # vc-scheduler writes the phase at the close of a session after the pods run, so it may lag the Jobs.
    await wait_for(lambda: _phase(client, ns, "prod", "Running"), "PodGroup prod Running")
    for pod in await pods(client, ns, "prod"):
        assert pod["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "production"
    # No per-pod PodGroup of Volcano's own (podgroup-<uid>, minMember 1, queue default).
    items, _ = await client.kube.list(VOLCANO_PODGROUPS, ns)
    assert [p["metadata"]["name"] for p in items] == ["prod"]
    assert condition(tj, "Misconfigured") is None

    await client.kube.delete(TRAINJOBS, ns, "prod")
    await wait_for(
        lambda: _absent(client.kube.get_or_none(VOLCANO_PODGROUPS, ns, "prod")), "PodGroup deleted with its job"
    )


async def test_missing_closed_and_parent_queues_hold_the_job_with_a_named_condition(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer")), ns)
    closed = await make_queue(client, "closing-time")
    await client.kube.create(
        VOLCANO_COMMANDS,
        ns,
        {
            "apiVersion": VOLCANO_COMMANDS.api_version,
            "kind": "Command",
            "metadata": {"generateName": "close-"},
            "action": "CloseQueue",
            "target": {
                "apiVersion": VOLCANO_QUEUES.api_version,
                "kind": "Queue",
                "name": "closing-time",
                "uid": closed["metadata"]["uid"],
                "controller": True,
            },
        },
    )

    async def queue_closed() -> bool:
        q = await client.kube.get(VOLCANO_QUEUES, None, "closing-time")
        return (q.get("status") or {}).get("state") == "Closed"

    await wait_for(queue_closed, "queue closing-time Closed")
    cases = {"nowhere": ("no-such-queue", "QueueNotFound"), "shut": ("closing-time", "QueueNotOpen")}
    queue_crd = await client.kube.get(CRDS, None, "queues.scheduling.volcano.sh")
    parent_supported = (
        "parent" in queue_crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    )
    if parent_supported:
        await make_queue(client, "team")
        await make_queue(client, "team-a", parent="team")
        cases["parent"] = ("team", "QueueNotLeaf")
    for name, (queue, _) in cases.items():
        await client.apply(with_queue(sized(name, 1, "1"), queue), ns)
    for name, (queue, reason) in cases.items():
        tj = await client.wait_condition(ns, name, "Misconfigured")
        cond = condition(tj, "Misconfigured")
        assert cond is not None and cond["reason"] == reason, cond
        assert repr(queue) in cond["message"] and "scheduling.volcano.sh/queue-name" in cond["message"]
        await client.wait_events(ns, name, warned(reason), f"a Warning event {reason}")
    await asyncio.sleep(3)
    for name in cases:
        assert await pods(client, ns, name) == []
        assert await client.kube.get_or_none(VOLCANO_PODGROUPS, ns, name) is None
    if not parent_supported:
        pytest.skip("this Volcano's Queue CRD has no spec.parent: the non-leaf case is covered by unit tests only")


async def test_weighted_queues_share_a_saturated_cluster_about_one_to_two(client: Client, ns: str) -> None:
    await make_queue(client, "light", weight=1)
    await make_queue(client, "heavy", weight=2)
    await client.apply(runtime("rt", rjob("node", "trainer", RUN_FOR)), ns)
    # 20 one-CPU jobs per queue: 40 CPU asked of a 24-CPU cluster.
    for i in range(20):
        for queue in ("light", "heavy"):
            await client.apply(with_queue(sized(f"{queue}-{i}", 1, "1"), queue), ns)

    async def settled() -> dict[str, int] | None:
        running = await client.pods(ns, "jobset.sigs.k8s.io/replicatedjob-name=node")
        counts = {"light": 0, "heavy": 0}
        for p in running:
            if (p.get("status") or {}).get("phase") == "Running":
                counts[p["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"]] += 1
        return counts if sum(counts.values()) >= 22 else None

    counts = await wait_for(settled, "the cluster to fill up", timeout=120)
    print(f"running pods per queue once the cluster is full: {counts}")

    async def weighted() -> dict[str, int] | None:
        now = await settled()
        return now if now and 1.5 <= now["heavy"] / max(now["light"], 1) <= 2.5 else None

    # Volcano's reclaim action moves pods from the queue over its share to the one under it.
    counts = await wait_for(weighted, "running pods to follow the queue weights", timeout=120, interval=1)
    print(f"running pods per queue (weights light=1, heavy=2, 24 CPU): {counts}")
    assert counts["heavy"] > counts["light"], counts
    assert 1.5 <= counts["heavy"] / max(counts["light"], 1) <= 2.5, counts


async def test_seed_000_mpijob_lands_in_its_queue_with_workers_and_launcher_in_the_gang(
    client: Client, ns: str
) -> None:
    """kubeflow/trainer#2325: an MPIJob with schedulingPolicy.queue production and pods asking for
    Volcano must get a PodGroup in production counting every worker and the launcher."""
    from e2e.test_mpijob import LONG, mpijob, wait_cond

    await make_queue(client, "production")
    job = mpijob("seed", runPolicy={"schedulingPolicy": {"queue": "production"}})
    for role in ("Launcher", "Worker"):
        job["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]["schedulerName"] = "volcano"
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["metadata"] = {"annotations": LONG}
    await client.apply(job, ns)
    obj = await wait_cond(client, ns, "seed", "Running", timeout=90)
    assert condition(obj, "Misconfigured") is None
    pg = await client.kube.get(VOLCANO_PODGROUPS, ns, "seed")
    assert pg["spec"]["queue"] == "production"
    assert pg["spec"]["minMember"] == 3, "2 workers + the launcher"
    await wait_for(lambda: _phase(client, ns, "seed", "Running"), "PodGroup seed Running")
    items, _ = await client.kube.list(VOLCANO_PODGROUPS, ns)
    assert [p["metadata"]["name"] for p in items] == ["seed"], "no per-pod PodGroup of Volcano's own"
    for pod in await client.pods(ns, "training.kubeflow.org/job-name=seed"):
        assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "seed"


async def test_a_native_sidecar_counts_in_the_pod_group_min_resources(client: Client, ns: str) -> None:
    """A 1-CPU trainer container beside a 1-CPU native sidecar (an init container with
    ``restartPolicy: Always``) is 2 CPU per pod, as kube-scheduler counts it: 2 nodes ask 4 CPU of
    the queue, not the 2 CPU that max(containers, largest init container) would say."""
    node = rjob("node", "trainer", RUN_FOR)
    node["template"]["spec"]["template"]["spec"]["initContainers"] = [
        {"name": "proxy", "image": "busybox", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}
    ]
    await client.apply(runtime("rt", node), ns)
    await client.apply(sized("sidecar", 2, "1"), ns)
    pg = await wait_for(lambda: client.kube.get_or_none(VOLCANO_PODGROUPS, ns, "sidecar"), "PodGroup sidecar")
    assert pg["spec"]["minMember"] == 2
    assert pg["spec"]["minResources"] == {"cpu": "4"}
    await client.wait_running(ns, "sidecar", timeout=60)
    await wait_for(lambda: _phase(client, ns, "sidecar", "Running"), "PodGroup sidecar Running")
    running = await pods(client, ns, "sidecar")
    assert len(running) == 2
    for pod in running:
        (sidecar,) = pod["spec"]["initContainers"]
        assert sidecar["restartPolicy"] == "Always" and sidecar["resources"]["requests"] == {"cpu": "1"}
        assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}


async def test_a_restart_keeps_the_pod_group_and_the_gang(client: Client, ns: str) -> None:
    """failurePolicy under Volcano: every Job is recreated, the PodGroup (same uid) stays, and the new
    attempt's pods are gang scheduled again before the restarts run out."""
    node = rjob("node", "trainer", RUN_FOR)
    node["template"]["spec"]["activeDeadlineSeconds"] = 3
    rt = runtime("rt", node)
    rt["spec"]["template"]["spec"]["failurePolicy"] = {"maxRestarts": 1}
    await client.apply(rt, ns)
    await client.apply(sized("again", 2, "1"), ns)
    pg = await wait_for(lambda: client.kube.get_or_none(VOLCANO_PODGROUPS, ns, "again"), "PodGroup again")

    async def attempt_one_pods() -> list[JSON] | None:
        found = [
            p
            for p in await pods(client, ns, "again")
            if p["metadata"]["labels"].get("jobset.sigs.k8s.io/restart-attempt") == "1" and p["spec"].get("nodeName")
        ]
        return found if len(found) == 2 else None

    restarted = await wait_for(attempt_one_pods, "both pods of attempt 1 bound", timeout=60)
    assert all(p["spec"]["schedulerName"] == "volcano" for p in restarted)
    assert all(p["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "again" for p in restarted)
    now = await client.kube.get(VOLCANO_PODGROUPS, ns, "again")
    assert now["metadata"]["uid"] == pg["metadata"]["uid"], "the PodGroup stays across the restart"
    tj = await client.wait_condition(ns, "again", "Failed", timeout=60)
    assert condition(tj, "Failed")["reason"] == "ReachedMaxRestarts"  # type: ignore[index]
    assert tj["status"]["restarts"] == 1


def topology_runtime(name: str, mode: str, tier: int) -> JSON:
    """A runtime whose Volcano PodGroup asks for ``networkTopology`` {mode, highestTierAllowed: tier}."""
    rt = runtime(name, rjob("node", "trainer"))
    rt["spec"]["podGroupPolicy"] = {"volcano": {"networkTopology": {"mode": mode, "highestTierAllowed": tier}}}
    return rt


def hyper_node(name: str, tier: int, member_type: str, members: list[str]) -> JSON:
    """A ``topology.volcano.sh/v1alpha1`` HyperNode of ``tier`` whose members are the Nodes or
    HyperNodes named (``exactMatch``)."""
    return {
        "apiVersion": VOLCANO_HYPERNODES.api_version,
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {
            "tier": tier,
            "members": [{"type": member_type, "selector": {"exactMatch": {"name": m}}} for m in members],
        },
    }


async def test_network_topology_reaches_the_pod_group_and_hard_tier_1_keeps_the_gang_in_one_hyper_node(
    client: Client, ns: str
) -> None:
    # Two tier-1 HyperNodes of two KWOK nodes each (6 CPU a node, 12 CPU each) under one tier-2.
    nodes, _ = await client.kube.list(NODES, None, "type=kwok")
    names = sorted(n["metadata"]["name"] for n in nodes)[:4]
    assert len(names) == 4, names
    tier1 = {"e2e-leaf-a": names[:2], "e2e-leaf-b": names[2:]}
    topology = [hyper_node(leaf, 1, "Node", members) for leaf, members in tier1.items()]
    topology.append(hyper_node("e2e-spine", 2, "HyperNode", list(tier1)))
    for hn in topology:
        await client.kube.apply(hn, "e2e")
    try:
        # Admission: what Volcano's PodGroup would refuse is refused on the runtime, naming the field.
        with pytest.raises(ApiError) as refused:
            await client.apply(topology_runtime("rt-bad", "strict", 1), ns)
        assert "networkTopology.mode" in refused.value.message, refused.value.message

        await client.apply(topology_runtime("rt-t1", "hard", 1), ns)
        await client.apply(topology_runtime("rt-t2", "hard", 2), ns)

        # 4 x 3 CPU = 12 CPU: fits one tier-1 HyperNode exactly. The PodGroup carries the constraint
        # as upstream builds it, and every pod lands in one tier-1 HyperNode.
        await client.apply(sized("near", 4, "3", runtimeRef={"name": "rt-t1", "kind": "TrainingRuntime"}), ns)
        pg = await wait_for(lambda: client.kube.get_or_none(VOLCANO_PODGROUPS, ns, "near"), "PodGroup near")
        assert pg["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}, pg["spec"]
        await client.wait_condition(ns, "near", "Complete", timeout=90)
        placed = {p["spec"]["nodeName"] for p in await pods(client, ns, "near")}
        assert any(placed <= set(members) for members in tier1.values()), (placed, tier1)

        # 5 x 3 CPU = 15 CPU: more than any tier-1 HyperNode holds, though the cluster has 24 CPU.
        # With highestTierAllowed 1 no pod is bound; with 2 the gang spans the spine and runs.
        await client.apply(sized("far-t1", 5, "3", runtimeRef={"name": "rt-t1", "kind": "TrainingRuntime"}), ns)
        await wait_for(lambda: _count(client, ns, "far-t1", 5), "far-t1's 5 pods")
        await asyncio.sleep(5)  # several Volcano scheduling sessions
        # Volcano's enqueue action counts the queue's room, not the topology: the PodGroup is Inqueue,
        # so the operator releases the Jobs; the allocate action then finds no tier-1 HyperNode for
        # the gang, binds none of its pods and says so on the PodGroup.
        far = await pods(client, ns, "far-t1")
        assert len(far) == 5 and [p for p in far if p["spec"].get("nodeName")] == [], far
        pg = await client.kube.get(VOLCANO_PODGROUPS, ns, "far-t1")
        unschedulable = condition(pg, "Unschedulable")
        assert unschedulable and unschedulable["status"] == "True", pg["status"]
        assert unschedulable["message"].startswith("5/5 tasks in gang unschedulable"), unschedulable
        await client.kube.delete(TRAINJOBS, ns, "far-t1")
        await wait_for(lambda: _none_left(client, ns, "far-t1"), "far-t1's pods gone")

        await client.apply(sized("far-t2", 5, "3", runtimeRef={"name": "rt-t2", "kind": "TrainingRuntime"}), ns)
        await client.wait_condition(ns, "far-t2", "Complete", timeout=90)
        placed = {p["spec"]["nodeName"] for p in await pods(client, ns, "far-t2")}
        assert not any(placed <= set(members) for members in tier1.values()), (placed, tier1)
    finally:
        for hn in reversed(topology):
            await client.kube.delete(VOLCANO_HYPERNODES, None, hn["metadata"]["name"])


async def _none_left(client: Client, ns: str, name: str) -> bool:
    return not await pods(client, ns, name)


async def _count(client: Client, ns: str, name: str, n: int) -> bool:
    return len(await pods(client, ns, name)) == n


def warned(reason: str) -> Callable[[list[JSON]], bool]:
    """Whether events hold a Warning with ``reason``."""
    return lambda events: any(e["type"] == "Warning" and e["reason"] == reason for e in events)
