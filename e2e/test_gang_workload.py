"""Gang scheduling by the kube-scheduler itself, through the Workload API (``--gang-scheduler-name=workload``,
kubeflow/trainer KEP-3015), on the local cluster's real kube-apiserver, kube-scheduler and
kube-controller-manager (Kubernetes 1.37, feature gate GenericWorkload): no Volcano, Kueue or
scheduler-plugins takes part.

Three KWOK nodes of 6 CPU of this module's own (tainted, so no other pod lands there) have room for three
of the four 4-CPU pods of a 4-node TrainJob: on the gang runtime no pod is bound, on the same runtime
without ``spec.scheduling`` three are; a fourth node lets the gang bind all four at once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from e2e.helpers import kueue_sees_runtime, webhook_ca_patched
from e2e.test_gang_kueue import kueue_queues
from e2e.test_trainjob import RUN_FOR, rjob, runtime, trainjob
from localcluster.client import Client, condition, wait_for
from localcluster.cluster import reserved_ports
from localcluster.operator_process import Operator
from trainer.api.kinds import NODES, POD_GROUPS, PODS, TRAINING_RUNTIMES, TRAINJOBS, WORKLOADS, Resource
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError

pytestmark = pytest.mark.e2e
GANG_SCHEDULER = "workload"
(PORT,) = reserved_ports(1)
OPERATOR_ARGS = ["--webhook-port", str(PORT), "--webhook-host", "127.0.0.1"]
TAG = uuid.uuid4().hex[:6]
TAINT = f"trainer.e2e/workload-gang-{TAG}"
LABEL = "trainer.e2e/workload-gang"


def node(name: str) -> JSON:
    """A KWOK node of 6 CPU, labelled and tainted for this module's pods only."""
    resources = {"cpu": "6", "memory": "64Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"type": "kwok", "kubernetes.io/hostname": name, LABEL: TAG},
        },
        "spec": {"taints": [{"key": TAINT, "effect": "NoSchedule"}]},
        "status": {"allocatable": resources, "capacity": resources},
    }


def placed_runtime(name: str, scheduling: JSON | None) -> JSON:
    """A torch runtime whose pods go only to this module's nodes and run for a while."""
    node_rjob = rjob("node", "trainer", run_for=RUN_FOR)
    pod = node_rjob["template"]["spec"]["template"]["spec"]
    pod["nodeSelector"] = {LABEL: TAG}
    pod["tolerations"] = [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}]
    out = runtime(name, node_rjob)
    if scheduling is not None:
        out["spec"]["scheduling"] = scheduling
    return out


def four_nodes(name: str, rt: str) -> JSON:
    return trainjob(name, rt, trainer={"numNodes": 4, "resourcesPerNode": {"requests": {"cpu": "4"}}})


@pytest.fixture(scope="module", autouse=True)
async def webhook_installed(client: Client, operator: Operator) -> None:
    """The operator's admission webhook serves this module (its configurations' caBundle patched)."""
    await wait_for(lambda: webhook_ca_patched(client.kube), "webhook configurations patched")
    await asyncio.sleep(1)


@pytest.fixture(name="nodes")
async def nodes_fixture(client: Client) -> AsyncIterator[list[str]]:
    """Three nodes of this test (``<prefix>-0..2``), Ready; deleted afterwards with any fourth one
    (``<prefix>-3``)."""
    prefix = f"wl-gang-{uuid.uuid4().hex[:6]}"
    names = [f"{prefix}-{i}" for i in range(3)]
    for name in names:
        await client.kube.create(NODES, None, node(name))
    await wait_for(lambda: ready(client, names), "the gang test's nodes Ready", 60)
    try:
        yield names
    finally:
        for name in [*names, f"{prefix}-3"]:
            await client.kube.delete(NODES, None, name)


async def ready(client: Client, names: list[str]) -> bool | None:
    for name in names:
        n = await client.kube.get_or_none(NODES, None, name)
        c = condition(n, "Ready")
        if not c or c.get("status") != "True":
            return None
    return True


async def pods(client: Client, ns: str, job: str) -> list[JSON]:
    return await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={job}")


def bound(ps: list[JSON]) -> list[JSON]:
    return [p for p in ps if (p.get("spec") or {}).get("nodeName")]


async def settled_pods(client: Client, ns: str, job: str, count: int, bound_count: int, hold: float = 8) -> list[JSON]:
    """Wait until ``job`` has ``count`` pods of which ``bound_count`` are bound, then check it stays so for
    ``hold`` seconds (a gang binding later would be a partial gang)."""

    async def probe() -> list[JSON] | None:
        ps = await pods(client, ns, job)
        return ps if len(ps) == count and len(bound(ps)) == bound_count else None

    await wait_for(probe, f"{job}: {count} pods, {bound_count} bound", 60)
    await asyncio.sleep(hold)
    ps = await pods(client, ns, job)
    assert (len(ps), len(bound(ps))) == (count, bound_count), [p["spec"].get("nodeName") for p in ps]
    return ps


async def created_at(client: Client, res: Resource, ns: str, since: str) -> int:
    """The resourceVersion at which the first ``res`` of ``ns`` was created after ``since``: the ``ADDED``
    event of a watch replayed from ``since`` carries the object as it was created."""

    async def first() -> int:
        async for kind, obj in client.kube.watch(res, ns, since, timeout_seconds=20):
            if kind == "ADDED":
                return int(obj["metadata"]["resourceVersion"])
        raise AssertionError(f"no {res.kind} created in {ns} since {since}")

    return await asyncio.wait_for(first(), 30)


async def scheduling_objects(client: Client, ns: str) -> tuple[JSON, list[JSON]]:
    (workload,) = (await client.kube.list(WORKLOADS, ns))[0]
    groups, _ = await client.kube.list(POD_GROUPS, ns)
    return workload, groups


async def test_a_gang_binds_all_of_its_pods_or_none(client: Client, ns: str, nodes: list[str]) -> None:
    await client.apply(placed_runtime("gang", {"schedulingPolicy": {"gang": {}}}), ns)
    await client.apply(placed_runtime("plain", None), ns)
    _, since = await client.kube.list(TRAINJOBS, ns)
    await client.apply(four_nodes("gang", "gang"), ns)

    # No pod is bound: three fit, the gang needs four.
    ps = await settled_pods(client, ns, "gang", 4, 0)
    for p in ps:
        scheduled = condition(p, "PodScheduled")
        assert scheduled is not None and scheduled["status"] == "False", p.get("status")
        assert scheduled.get("reason") == "Unschedulable" and scheduled.get("message"), scheduled

    # The Workload and its PodGroup were made before the first pod, as KEP-3015 orders them.
    workload, groups = await scheduling_objects(client, ns)
    (group,) = groups
    tj = await client.trainjob(ns, "gang")
    assert tj is not None
    uid = tj["metadata"]["uid"]
    assert workload["metadata"]["ownerReferences"][0]["uid"] == uid
    (template,) = workload["spec"]["podGroupTemplates"]
    assert {k: v for k, v in template.items() if v is not None} == {
        "name": "gang",
        "schedulingPolicy": {"gang": {"minCount": 4}},
    }
    assert [r["kind"] for r in group["metadata"]["ownerReferences"]] == ["TrainJob", "Workload"]
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}
    # The resourceVersions at which each was created, replayed by watches from before the TrainJob.
    seen = {res.kind: await created_at(client, res, ns, since) for res in (WORKLOADS, POD_GROUPS, PODS)}
    assert seen["Workload"] < seen["PodGroup"] < seen["Pod"], seen
    first_pod = min(p["metadata"]["creationTimestamp"] for p in ps)
    for obj in (workload, group):
        assert obj["metadata"]["creationTimestamp"] <= first_pod
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in ps} == {group["metadata"]["name"]}

    # The same job without spec.scheduling: three bound, one pending (a partial gang holding nodes).
    await client.apply(four_nodes("plain", "plain"), ns)
    await settled_pods(client, ns, "plain", 4, 3, hold=3)
    await client.kube.delete(TRAINJOBS, ns, "plain")
    await wait_for(lambda: gone(client, ns, "plain"), "the plain job's pods gone", 60)

    # A fourth node: all four bound at once, within 30 s.
    await client.kube.create(NODES, None, node(nodes[0][:-1] + "3"))
    await settled_pods_within(client, ns, "gang", 30)

    # Suspend: the pods go, the Workload and PodGroup stay as they were; resume: all four again.
    before = {o["metadata"]["name"]: kept(o) for o in (workload, group)}
    await client.kube.merge_patch(TRAINJOBS, ns, "gang", {"spec": {"suspend": True}})
    await wait_for(lambda: gone(client, ns, "gang"), "the gang's pods gone on suspend", 60)
    workload, groups = await scheduling_objects(client, ns)
    assert {o["metadata"]["name"]: kept(o) for o in (workload, *groups)} == before
    # numNodes stays immutable while suspended too (a resize elsewhere): the groups' minCount never changes.
    with pytest.raises(ApiError) as refused:
        await client.kube.merge_patch(TRAINJOBS, ns, "gang", {"spec": {"trainer": {"numNodes": 3}}})
    assert "spec.trainer.numNodes: cannot change from 4 to 3" in str(refused.value), refused.value
    await client.kube.merge_patch(TRAINJOBS, ns, "gang", {"spec": {"suspend": False}})
    await settled_pods_within(client, ns, "gang", 60)
    workload, groups = await scheduling_objects(client, ns)
    assert {o["metadata"]["name"]: kept(o) for o in (workload, *groups)} == before


def kept(obj: JSON) -> tuple[str, int | None, str]:
    """What shows an object was neither recreated nor changed by anyone: its uid, generation and spec (its
    status and finalizers are the scheduler's and the PodGroup protection controller's)."""
    m = obj["metadata"]
    return m["uid"], m.get("generation"), repr(sorted(obj["spec"].items()))


async def settled_pods_within(client: Client, ns: str, job: str, timeout: float) -> None:
    async def all_bound() -> bool | None:
        ps = await pods(client, ns, job)
        return True if len(ps) == 4 and len(bound(ps)) == 4 else None

    await wait_for(all_bound, f"{job}: all 4 pods bound", timeout)


async def gone(client: Client, ns: str, job: str) -> bool | None:
    return True if not await pods(client, ns, job) else None


@pytest.mark.parametrize(
    ("scheduling", "extra", "fragment"),
    [
        ({"schedulingPolicy": {"gang": {}}}, {"podGroupPolicy": {"volcano": {}}}, "scheduling and podGroupPolicy"),
        ({"schedulingPolicy": {"gang": {"minCount": 2}}}, {}, "gang.minCount is computed from numNodes"),
        (
            {"replicatedJobs": [{"targetReplicatedJobs": ["node"], "job": {}}]},
            {"template": {"spec": {"replicatedJobs": [{**rjob("node", "trainer"), "replicas": 9}]}}},
            "9 PodGroup templates, more than the 8 a Workload holds",
        ),
    ],
)
async def test_bad_scheduling_is_refused_naming_the_field(
    client: Client, ns: str, scheduling: JSON, extra: dict[str, Any], fragment: str
) -> None:
    rt = placed_runtime("bad", scheduling)
    rt["spec"].update(extra)
    with pytest.raises(ApiError) as refused:
        await client.kube.create(TRAINING_RUNTIMES, ns, {**rt, "metadata": {"name": "bad", "namespace": ns}})
    assert "scheduling" in str(refused.value) and fragment in str(refused.value), refused.value


async def test_kueue_admits_a_workload_gang_and_the_scheduler_places_it(
    client: Client, ns: str, nodes: list[str]
) -> None:
    """Kueue (its queue label, carried under ``workload`` as under ``none``) admits the TrainJob by quota and
    flips ``suspend``; the kube-scheduler then binds the gang, whose Workload and PodGroup were made while
    Kueue held the job."""
    await kueue_queues(client, ns, cpu="8")
    await client.apply(placed_runtime("rt", {"schedulingPolicy": {"gang": {}}}), ns)
    await kueue_sees_runtime(client.kube, ns, "rt", "lq")
    job = trainjob(
        "queued", "rt", suspend=True, trainer={"numNodes": 4, "resourcesPerNode": {"requests": {"cpu": "1"}}}
    )
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
    await client.apply(job, ns)

    async def admitted() -> JSON | None:
        tj = await client.trainjob(ns, "queued")
        return tj if tj and tj["spec"].get("suspend") is False else None

    await wait_for(admitted, "Kueue to admit the 4 x 1 CPU TrainJob into 8 CPUs", timeout=60)
    await settled_pods_within(client, ns, "queued", 60)
    workload, groups = await scheduling_objects(client, ns)
    (group,) = groups
    ps = await pods(client, ns, "queued")
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in ps} == {group["metadata"]["name"]}
    assert {p["spec"]["nodeSelector"].get("type") for p in ps} == {"kwok"}, "Kueue's flavor reached the pods"
    assert {p["spec"]["nodeName"] for p in ps} <= set(nodes)
    assert workload["spec"]["podGroupTemplates"][0]["schedulingPolicy"] == {"gang": {"minCount": 4}}
