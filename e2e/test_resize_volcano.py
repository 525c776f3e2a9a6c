"""A gang too big for the cluster, resized while suspended, on the real Volcano scheduler with the operator
run as ``--gang-scheduler-name=volcano`` (4 KWOK nodes of 6 CPU): its PodGroup's ``minMember`` and
``minResources`` follow ``spec.trainer.numNodes`` and ``resourcesPerNode``, and Volcano admits the
smaller gang."""

from __future__ import annotations

import pytest

from e2e.test_gang_volcano import sized
from e2e.test_resize import n_pods
from e2e.test_trainjob import RUN_FOR, env, rjob, runtime
from localcluster.client import Client, condition, wait_for
from trainer.api.kinds import TRAINJOBS, VOLCANO_PODGROUPS
from trainer.framework.json_codec import JSON

pytestmark = pytest.mark.e2e
GANG_SCHEDULER = "volcano"


async def test_a_gang_that_cannot_fit_resized_while_suspended_gets_its_podgroup_resized_and_runs(
    client: Client, ns: str
) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer", RUN_FOR)), ns)
    await client.apply(sized("big", 8, "6"), ns)  # 48 CPU: more than the cluster's 24
    tj = await client.wait_condition(ns, "big", "WaitingForGang")
    assert "minMember 8" in condition(tj, "WaitingForGang")["message"]  # type: ignore[index]

    await client.kube.merge_patch(TRAINJOBS, ns, "big", {"spec": {"suspend": True}})
    await client.wait_condition(ns, "big", "Suspended")
    resized = {"suspend": False, "trainer": {"numNodes": 2, "resourcesPerNode": {"requests": {"cpu": "1"}}}}
    await client.kube.merge_patch(TRAINJOBS, ns, "big", {"spec": resized})  # resized as it resumes

    async def podgroup_resized() -> JSON | None:
        pg = await client.kube.get_or_none(VOLCANO_PODGROUPS, ns, "big")
        return pg if pg and pg["spec"]["minMember"] == 2 else None

    pg = await wait_for(podgroup_resized, "the PodGroup's minMember 2")
    assert pg["spec"]["minResources"] == {"cpu": "2"}
    _, pods = await wait_for(lambda: n_pods(client, ns, "big", 2), "the 2 pods of the resized gang", timeout=60)
    assert {env(p["spec"]["containers"][0])["PET_NNODES"] for p in pods} == {"2"}
    assert all(p["spec"]["schedulerName"] == "volcano" for p in pods)
    await wait_for(lambda: client.wait_gone(ns, "big", "WaitingForGang"), "the gang admitted")
