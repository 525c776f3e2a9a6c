"""``kubectl get trainjobs`` under ``--trainjob-running-condition`` (Kueue, the session cluster): the
State column (the first True condition, kubeflow/trainer#3963) shows ``Running`` for a TrainJob Kueue
admitted and for one a user resumed, once every trainer pod is ready, where ``conditions[-1:]`` showed
``Suspended`` (its ``Suspended=False``/``Resumed`` condition, kubeflow/trainer#3666). The kubeflow SDK
0.5.0 reads such a job as ``Created`` (it reports ``Running`` only without conditions: kubeflow/sdk#803);
the default settings suit it, see ``e2e/test_state.py``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from e2e.helpers import kueue_sees_runtime
from e2e.test_gang_kueue import kueue_queues
from e2e.test_sdk import RUN_FOR
from e2e.test_state import columns, long_running, shows
from localcluster.client import Client, condition, wait_for
from localcluster.kueue import local_queue, resource_flavor
from trainer.api.kinds import TRAINJOBS

pytestmark = pytest.mark.e2e
GANG_SCHEDULER = "kueue"
OPERATOR_ARGS = ["--trainjob-running-condition"]


async def running_never_suspended(client: Client, cluster: Any, ns: str, name: str) -> None:
    """Wait for State ``Running``; on the way, State is never ``Suspended`` once the operator has
    turned the condition to ``Suspended=False`` (``conditions[-1:]`` showed it until the pods were
    ready: kubeflow/trainer#3666)."""
    seen: list[tuple[str, str | None]] = []

    async def probe() -> dict[str, str] | None:
        # The condition is read before the row: the row is then at least as new as the condition
        # (read the other way round, a row from before the resume met a condition from after it).
        suspended = condition(await client.trainjob(ns, name), "Suspended")
        row = await asyncio.to_thread(columns, cluster, ns, name)
        seen.append((row["STATE"], suspended["status"] if suspended else None))
        return row if (row["STATE"], row["SUSPENDED"]) == ("Running", "false") else None

    try:
        await wait_for(probe, f"State Running of {name}", timeout=120)
    except AssertionError as e:
        raise AssertionError(f"{e}; (State, Suspended condition) last seen: {seen[-3:]}") from None
    wrong = [s for s in seen if s == ("Suspended", "False")]
    assert not wrong, seen


async def test_a_job_kueue_admitted_shows_running(cluster: Any, client: Client, samples: None, ns: str) -> None:
    await client.apply(resource_flavor("kwok", {"type": "kwok"}))
    await client.apply(local_queue(ns, "lq", f"cq-{ns}"))
    await kueue_sees_runtime(client.kube, ns, "torch-distributed", "lq", kind="ClusterTrainingRuntime")
    await client.apply(long_running("queued", "lq"), ns)
    await wait_for(lambda: shows(cluster, ns, "queued", "Suspended", "true"), "State Suspended while queued")
    await kueue_queues(client, ns, cpu="4")
    await running_never_suspended(client, cluster, ns, "queued")
    # The pods run for long: the runtimePatches entry that says so outlived Kueue's update of the job.
    pods = await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=queued")
    assert len(pods) == 2 and all(p["metadata"]["annotations"].items() >= RUN_FOR.items() for p in pods), pods
    tj = await client.trainjob(ns, "queued")
    assert [c["type"] for c in tj["status"]["conditions"]] == ["Suspended", "Running"], tj  # type: ignore[index]
    assert condition(tj, "Suspended")["reason"] == "Resumed"  # type: ignore[index]


async def test_a_job_a_user_resumes_shows_running(cluster: Any, client: Client, samples: None, ns: str) -> None:
    await client.apply(long_running("paused"), ns)
    await wait_for(lambda: shows(cluster, ns, "paused", "Suspended", "true"), "State Suspended")
    await client.kube.merge_patch(TRAINJOBS, ns, "paused", {"spec": {"suspend": False}})
    await running_never_suspended(client, cluster, ns, "paused")
    await client.kube.merge_patch(TRAINJOBS, ns, "paused", {"spec": {"suspend": True}})
    await wait_for(lambda: shows(cluster, ns, "paused", "Suspended", "true"), "State Suspended again")
    await client.kube.merge_patch(TRAINJOBS, ns, "paused", {"spec": {"suspend": False}})
    await running_never_suspended(client, cluster, ns, "paused")
    assert columns(cluster, ns, "paused")["STATE"] == "Running"
