"""Admission by the real Kueue (its TrainJob integration), with the operator run as
``--gang-scheduler-name=kueue``: Kueue flips ``suspend`` and writes the flavor's node selector into
the TrainJob's overrides; the operator honours both."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from api.kinds import KUEUE_CLUSTER_QUEUES
from e2e.helpers import Client, condition, wait_for
from e2e.test_trainjob import rjob, runtime, trainjob

pytestmark = pytest.mark.e2e
GANG_SCHEDULER = "kueue"
JSON = dict[str, Any]
KUEUE = "kueue.x-k8s.io"
RUN_15S = {
    "pod-complete.stage.kwok.x-k8s.io/delay": "15s",
    "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "16s",
}


async def kueue_queues(client: Client, ns: str, cpu: str) -> None:
    """A flavor selecting the KWOK nodes, a ClusterQueue with ``cpu`` CPUs, a LocalQueue ``lq`` in ``ns``."""
    apply = client.kube.apply
    await apply(
        {
            "apiVersion": f"{KUEUE}/v1beta1",
            "kind": "ResourceFlavor",
            "metadata": {"name": "kwok"},
            "spec": {"nodeLabels": {"type": "kwok"}},
        },
        "e2e",
    )
    await apply(
        {
            "apiVersion": f"{KUEUE}/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": f"cq-{ns}"},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": "kwok",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": cpu},
                                    {"name": "memory", "nominalQuota": "64Gi"},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        "e2e",
    )
    await apply(
        {
            "apiVersion": f"{KUEUE}/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": ns},
            "spec": {"clusterQueue": f"cq-{ns}"},
        },
        "e2e",
    )

    async def active() -> bool:
        cq = await client.kube.get_or_none(KUEUE_CLUSTER_QUEUES, None, f"cq-{ns}")
        return bool(condition(cq, "Active") and condition(cq, "Active")["status"] == "True")  # type: ignore[index]

    await wait_for(active, f"ClusterQueue cq-{ns} active")


def kueue_runtime() -> JSON:
    """A 2-node runtime. Kueue 0.14.5 sizes a TrainJob's pod sets from the runtime template's
    parallelism (it ignores numNodes), so the template carries it too."""
    rt = runtime("rt", rjob("node", "trainer", RUN_15S))
    rt["spec"]["mlPolicy"]["numNodes"] = 2
    rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"].update(parallelism=2, completions=2)
    return rt


def queued(name: str) -> JSON:
    job = trainjob(name, "rt", suspend=True, trainer={"resourcesPerNode": {"requests": {"cpu": "2", "memory": "1Gi"}}})
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
    return job


async def test_a_quota_for_one_job_admits_one_and_holds_the_other_until_it_finishes(client: Client, ns: str) -> None:
    await kueue_queues(client, ns, cpu="4")
    await client.apply(kueue_runtime(), ns)
    await client.apply(queued("first"), ns)
    await client.apply(queued("second"), ns)

    async def one_admitted() -> tuple[str, str] | None:
        a, b = await client.trainjob(ns, "first"), await client.trainjob(ns, "second")
        states = {n: (tj or {}).get("spec", {}).get("suspend") for n, tj in (("first", a), ("second", b))}
        admitted = [n for n, s in states.items() if s is False]
        return (admitted[0], "second" if admitted[0] == "first" else "first") if len(admitted) == 1 else None

    winner, waiting = await wait_for(one_admitted, "Kueue to admit exactly one TrainJob", timeout=60)
    pods = await wait_for(
        lambda: _running(client, ns, winner, 2), f"pods of the admitted TrainJob {winner} running", timeout=30
    )
    for pod in pods:
        # The flavor's node labels, written by Kueue into the TrainJob, reach the pods.
        assert pod["spec"].get("nodeSelector", {}).get("type") == "kwok", pod["spec"].get("nodeSelector")
    tj = await client.trainjob(ns, waiting)
    assert tj is not None and tj["spec"]["suspend"] is True
    assert await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={waiting}") == []
    assert condition(tj, "Suspended")["status"] == "True"  # type: ignore[index]

    await client.wait_condition(ns, winner, "Complete", timeout=60)
    await wait_for(lambda: _running(client, ns, waiting, 2), f"{waiting} admitted after {winner} finished", timeout=60)
    await client.wait_condition(ns, waiting, "Complete", timeout=60)


async def _running(client: Client, ns: str, name: str, n: int) -> list[JSON] | None:
    pods = await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={name}")
    running = [p for p in pods if (p.get("status") or {}).get("phase") in ("Running", "Succeeded")]
    await asyncio.sleep(0)
    return running if len(running) >= n else None
