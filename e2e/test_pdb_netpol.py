"""A gang TrainJob's PodDisruptionBudget and, with ``--trainjob-network-policy``, each TrainJob's
NetworkPolicy, on the real apiserver, disruption controller, garbage collector and Volcano, with the
operator run as ``--gang-scheduler-name=volcano``: ``kubectl drain`` of a node running a pod of the
running gang is refused (the budget allows no eviction) and the budget goes with the job; a finished job
keeps neither. The local cluster has no network plugin, so the policy is checked as written, not as
enforced."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

import pytest

from e2e.test_trainjob import RUN_FOR, rjob, runtime, trainjob
from localcluster.client import Client, condition, wait_for
from trainer.api.kinds import NETWORK_POLICIES, POD_DISRUPTION_BUDGETS, TRAINJOBS, Resource
from trainer.api.labels import JOBSET_NAME, TRAINJOB_NAME
from trainer.framework.json_codec import JSON

pytestmark = pytest.mark.e2e
GANG_SCHEDULER = "volcano"
OPERATOR_ARGS = ["--trainjob-network-policy=true"]
SHORT_RUN = {  # KWOK completes these pods after 10-11 s Running
    "pod-complete.stage.kwok.x-k8s.io/delay": "10s",
    "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "11s",
}


def nodes(name: str, count: int) -> JSON:
    return trainjob(name, "rt", trainer={"numNodes": count, "resourcesPerNode": {"requests": {"cpu": "1"}}})


async def ready_pods(client: Client, ns: str, name: str, count: int) -> list[JSON]:
    async def probe() -> list[JSON] | None:
        pods = await client.pods(ns, f"{JOBSET_NAME}={name}")
        ready = [p for p in pods if (condition(p, "Ready") or {}).get("status") == "True"]
        return ready if len(ready) == count else None

    return await wait_for(probe, f"{count} ready pods of {name}", timeout=90)


async def gone(client: Client, ns: str, name: str) -> None:
    """Wait until the job's PodDisruptionBudget and NetworkPolicy are gone."""
    for res in (POD_DISRUPTION_BUDGETS, NETWORK_POLICIES):
        await wait_for(partial(absent, client, res, ns, name), f"{res.kind} {name} gone", timeout=60)


async def absent(client: Client, res: Resource, ns: str, name: str) -> bool | None:
    return (await client.kube.get_or_none(res, ns, name) is None) or None


async def test_a_drain_cannot_evict_a_pod_of_a_running_gang_and_the_budget_goes_with_the_job(
    client: Client, cluster: Any, ns: str
) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer", RUN_FOR)), ns)
    await client.apply(nodes("gang", 3), ns)
    pdb = await wait_for(lambda: client.kube.get_or_none(POD_DISRUPTION_BUDGETS, ns, "gang"), "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 3
    assert pdb["spec"]["selector"] == {"matchLabels": {JOBSET_NAME: "gang"}}
    (ref,) = pdb["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["controller"]) == ("TrainJob", "gang", True)
    pods = await ready_pods(client, ns, "gang", 3)

    async def counted() -> JSON | None:
        got = await client.kube.get(POD_DISRUPTION_BUDGETS, ns, "gang")
        status = got.get("status") or {}
        return got if status.get("currentHealthy") == 3 and status.get("disruptionsAllowed") == 0 else None

    await wait_for(counted, "the disruption controller counts 3 healthy pods, 0 disruptions allowed")
    node = pods[0]["spec"]["nodeName"]
    uids = {p["metadata"]["uid"] for p in pods}
    try:
        drained = await asyncio.to_thread(
            cluster.run_kubectl,
            "drain",
            node,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout=20s",
            f"--pod-selector={JOBSET_NAME}=gang",  # only this job's pods: other modules' stay
            check=False,
        )
    finally:
        await asyncio.to_thread(cluster.run_kubectl, "uncordon", node)
    assert drained.returncode != 0, drained.stdout
    assert "disruption budget" in drained.stderr, drained.stderr
    after = await client.pods(ns, f"{JOBSET_NAME}=gang")
    assert {p["metadata"]["uid"] for p in after} == uids, "no pod was evicted"
    assert not any(p["metadata"].get("deletionTimestamp") for p in after)
    tj = await client.kube.get(TRAINJOBS, ns, "gang")
    assert condition(tj, "Failed") is None and condition(tj, "Complete") is None

    # The NetworkPolicy of the switch: the job's pods, from the job's pods only.
    policy = await client.kube.get(NETWORK_POLICIES, ns, "gang")
    selector = {"matchLabels": {TRAINJOB_NAME: "gang"}}
    assert policy["spec"]["podSelector"] == selector and policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["ingress"] == [{"from": [{"podSelector": selector}]}]
    assert all(p["metadata"]["labels"][TRAINJOB_NAME] == "gang" for p in after)

    await client.kube.delete(TRAINJOBS, ns, "gang")
    await gone(client, ns, "gang")


async def test_a_finished_gang_keeps_neither_budget_nor_policy(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer", SHORT_RUN)), ns)
    await client.apply(nodes("short", 2), ns)
    pdb = await wait_for(lambda: client.kube.get_or_none(POD_DISRUPTION_BUDGETS, ns, "short"), "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 2
    assert await client.kube.get_or_none(NETWORK_POLICIES, ns, "short") is not None
    await client.wait_condition(ns, "short", "Complete", timeout=90)
    await gone(client, ns, "short")
    assert await client.trainjob(ns, "short") is not None, "the TrainJob stays"
