"""A TrainJob resized while suspended, on the real local cluster (KWOK nodes): ``spec.trainer.numNodes``
and ``spec.trainer.resourcesPerNode`` change while ``spec.suspend`` is true, and the resumed job runs at
the new size (its Jobs, pods and ``PET_NNODES``); the same change while it runs is refused at admission
by the CRD's rule, naming the field, and any other field of ``spec.trainer`` by the operator's webhook
(served in this module as in e2e/test_admission.py)."""

from __future__ import annotations

import pytest

from e2e.test_admission import OPERATOR_ARGS, webhook_installed
from e2e.test_trainjob import RUN_FOR, env, rjob, runtime, trainjob
from localcluster.client import Client, wait_for
from trainer.api.kinds import TRAINJOBS
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError

pytestmark = pytest.mark.e2e
__all__ = ["OPERATOR_ARGS", "webhook_installed"]  # the operator serves its webhook, installed before the tests


async def n_pods(client: Client, ns: str, name: str, n: int) -> tuple[bool, list[JSON]] | None:
    """``(True, pods)`` when the TrainJob has exactly ``n`` pods, none terminating, else None."""
    pods = await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={name}")
    return (True, pods) if len(pods) == n and not any(p["metadata"].get("deletionTimestamp") for p in pods) else None


async def no_active_pods(client: Client, ns: str, name: str) -> bool:
    """Whether every Job of the TrainJob counts no active pod (what admission checks)."""
    return all(not (j.get("status") or {}).get("active") for j in await client.jobs(ns, name))


async def test_a_suspended_trainjob_resized_runs_at_its_new_size_and_a_running_one_refuses(
    client: Client, ns: str
) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer", RUN_FOR)), ns)
    two = {"numNodes": 2, "resourcesPerNode": {"requests": {"cpu": "1"}}}
    await client.apply(trainjob("rs", "rt", trainer=two), ns)
    await wait_for(lambda: n_pods(client, ns, "rs", 2), "2 pods running")
    await client.kube.merge_patch(TRAINJOBS, ns, "rs", {"spec": {"suspend": True}})
    await client.wait_condition(ns, "rs", "Suspended")
    await wait_for(lambda: n_pods(client, ns, "rs", 0), "the pods gone while suspended")
    await wait_for(lambda: no_active_pods(client, ns, "rs"), "the Job counting no active pod")

    resized = {"spec": {"trainer": {"numNodes": 1, "resourcesPerNode": {"requests": {"cpu": "2"}}}}}
    await client.kube.merge_patch(TRAINJOBS, ns, "rs", resized)
    await client.kube.merge_patch(TRAINJOBS, ns, "rs", {"spec": {"suspend": False}})
    _, (pod,) = await wait_for(lambda: n_pods(client, ns, "rs", 1), "1 pod after the resume", timeout=60)
    node = pod["spec"]["containers"][0]
    assert env(node)["PET_NNODES"] == "1"
    assert node["resources"]["requests"]["cpu"] == "2"
    (job,) = await client.jobs(ns, "rs")
    assert (job["spec"]["parallelism"], job["spec"]["completions"]) == (1, 1)
    assert job["spec"]["suspend"] is False
    events = await client.wait_events(ns, "rs", lambda es: any(e["reason"] == "Resized" for e in es), "Resized")
    resized_events = [e for e in events if e["reason"] == "Resized"]
    assert resized_events and "from 2 to 1 pods" in resized_events[0]["message"], [e["reason"] for e in events]
    assert "RecreatingJob" not in {e["reason"] for e in events}, "resized on purpose, not after a refused update"

    with pytest.raises(ApiError) as refused:
        await client.kube.merge_patch(TRAINJOBS, ns, "rs", {"spec": {"trainer": {"numNodes": 3}}})
    assert refused.value.status == 422
    assert "spec.trainer.numNodes" in refused.value.message and "suspend" in refused.value.message
    with pytest.raises(ApiError) as refused:
        more = {"spec": {"trainer": {"resourcesPerNode": {"requests": {"cpu": "3"}}}}}
        await client.kube.merge_patch(TRAINJOBS, ns, "rs", more)
    assert "spec.trainer.resourcesPerNode" in refused.value.message
    # The webhook holds every other field of spec.trainer the same way.
    with pytest.raises(ApiError) as refused:
        await client.kube.merge_patch(TRAINJOBS, ns, "rs", {"spec": {"trainer": {"image": "busybox:2"}}})
    assert "spec.trainer.image: may change only while the TrainJob is suspended" in refused.value.message
