"""A queued TrainJob resized while Kueue holds it, on the real Kueue (its TrainJob integration) with the
operator run as ``--gang-scheduler-name=kueue``: a 2-node job too big for its ClusterQueue waits
suspended; ``spec.trainer.numNodes`` patched to 1 makes Kueue build its Workload again with the new pod
count, which fits and is admitted; the job runs one pod with ``PET_NNODES=1``."""

from __future__ import annotations

import pytest

from e2e.helpers import kueue_sees_runtime
from e2e.test_gang_kueue import kueue_queues, kueue_runtime, pending_for_quota, queued, workload_of
from e2e.test_resize import n_pods
from e2e.test_trainjob import env
from localcluster.client import Client, condition, wait_for
from trainer.api.kinds import TRAINJOBS
from trainer.framework.json_codec import JSON

pytestmark = pytest.mark.e2e
GANG_SCHEDULER = "kueue"


async def test_a_queued_job_resized_to_fit_gets_a_new_workload_and_is_admitted(client: Client, ns: str) -> None:
    await kueue_queues(client, ns, cpu="2")
    await client.apply(kueue_runtime(), ns)
    await kueue_sees_runtime(client.kube, ns, "rt", "lq")
    await client.apply(queued("big", nodes=2, cpu="1500m"), ns)

    before = await wait_for(lambda: pending_for_quota(client, ns, "big"), "the 2-node job's Workload pending", 30)
    assert [ps["count"] for ps in before["spec"]["podSets"]] == [2]

    await client.kube.merge_patch(TRAINJOBS, ns, "big", {"spec": {"trainer": {"numNodes": 1}}})

    async def admitted() -> JSON | None:
        wl = await workload_of(client, ns, "big")
        ok = wl and condition(wl, "Admitted") and condition(wl, "Admitted")["status"] == "True"  # type: ignore[index]
        return wl if ok else None

    after = await wait_for(admitted, "Kueue to admit the resized job", timeout=60)
    assert [ps["count"] for ps in after["spec"]["podSets"]] == [1], after["spec"]["podSets"]
    (assigned,) = after["status"]["admission"]["podSetAssignments"]
    assert assigned["count"] == 1 and assigned["resourceUsage"]["cpu"] == "1500m", assigned
    _, (pod,) = await wait_for(lambda: n_pods(client, ns, "big", 1), "the resized job's one pod", timeout=60)
    assert env(pod["spec"]["containers"][0])["PET_NNODES"] == "1"
    (job,) = await client.jobs(ns, "big")
    assert (job["spec"]["parallelism"], job["spec"]["completions"]) == (1, 1)
