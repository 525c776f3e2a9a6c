"""What ``kubectl get trainjobs`` and the official kubeflow SDK (0.5.0) say of a resumed TrainJob, on
the session cluster with Kueue (``--gang-scheduler-name=kueue``) and the operator's default settings.

kubeflow/trainer#3666 (PR #3963): the State column is the first True condition, so a resumed job no
longer shows ``Suspended``; kubeflow/sdk#803: SDK 0.5.0 reports ``Running`` only for a TrainJob without
any condition, which a resumed job here is (``Suspended`` goes on resume). A TrainJob Kueue suspended at
creation and admitted later, and one a user suspends and resumes, read the same. With
``--trainjob-running-condition`` State shows ``Running``: ``e2e/test_state_running.py``. The ConfigMap
``kubeflow-trainer-public`` of ``config/manager`` is what the SDK reads at start."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import TrainerClient

from e2e.helpers import ROOT, kueue_sees_runtime
from e2e.test_gang_kueue import kueue_queues
from e2e.test_sdk import RUN_FOR, sample
from localcluster.client import Client, wait_for
from localcluster.kueue import local_queue, resource_flavor
from trainer.api.kinds import TRAINJOBS
from trainer.framework.json_codec import JSON

pytestmark = pytest.mark.e2e
GANG_SCHEDULER = "kueue"


def columns(cluster: Any, ns: str, name: str) -> dict[str, str]:
    """The row of ``kubectl get trainjobs <name>``, by column header ("" for an empty cell): cells are
    cut at the columns' offsets in the header line, as kubectl aligns them."""
    header, row = cluster.run_kubectl("get", "trainjobs", "-n", ns, name).stdout.splitlines()[:2]
    names = header.split()
    starts = [header.index(f" {n} ") + 1 if i else 0 for i, n in enumerate(names[:-1])] + [header.rindex(names[-1])]
    ends = [*starts[1:], None]
    return {n: row[a:b].strip() for n, a, b in zip(names, starts, ends, strict=True)}


def long_running(name: str, queue: str | None = None) -> JSON:
    """The sample TrainJob (2 nodes of the torch-distributed runtime), suspended, whose pods run 600 s;
    in LocalQueue ``queue`` when given. The pods' annotations are a ``runtimePatches`` entry (v2.2+):
    Kueue, which reads a TrainJob as Trainer v2.2's types, drops v2.1's ``podTemplateOverrides`` when it
    admits the job (docs/api.md), and the pods would complete at once."""
    job = sample(name)
    del job["metadata"]["namespace"]
    job["spec"]["suspend"] = True
    pod = {"metadata": {"annotations": RUN_FOR}}
    node = {"name": "node", "template": {"spec": {"template": pod}}}
    patch = {"replicatedJobs": [node]}
    job["spec"]["runtimePatches"] = [
        {"manager": "e2e.example.com/state", "trainingRuntimeSpec": {"template": {"spec": patch}}}
    ]
    if queue:
        job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    return job


def sdk(cluster: Any, ns: str) -> TrainerClient:
    return TrainerClient(KubernetesBackendConfig(namespace=ns, config_file=str(cluster.kubeconfig)))


async def sdk_status(cluster: Any, ns: str, name: str, want: str) -> str | None:
    """The SDK's ``get_job(name).status`` when it is ``want``, else None."""
    status = await asyncio.to_thread(lambda: sdk(cluster, ns).get_job(name).status)
    return status if status == want else None


async def shows(cluster: Any, ns: str, name: str, state: str, suspended: str) -> dict[str, str] | None:
    row = await asyncio.to_thread(columns, cluster, ns, name)
    return row if (row["STATE"], row["SUSPENDED"]) == (state, suspended) else None


async def test_a_job_kueue_admitted_reads_running_to_the_sdk_and_not_suspended_to_kubectl(
    cluster: Any, client: Client, samples: None, ns: str
) -> None:
    # The LocalQueue's ClusterQueue comes later: the job waits suspended until then.
    await client.apply(resource_flavor("kwok", {"type": "kwok"}))
    await client.apply(local_queue(ns, "lq", f"cq-{ns}"))
    await kueue_sees_runtime(client.kube, ns, "torch-distributed", "lq", kind="ClusterTrainingRuntime")
    await client.apply(long_running("queued", "lq"), ns)
    await wait_for(lambda: shows(cluster, ns, "queued", "Suspended", "true"), "State Suspended while queued")
    assert await sdk_status(cluster, ns, "queued", "Created")

    await kueue_queues(client, ns, cpu="4")  # admitted now: Kueue resumes it
    await wait_for(lambda: sdk_status(cluster, ns, "queued", "Running"), "the SDK to report Running", timeout=90)
    row = await shows(cluster, ns, "queued", "", "false")
    assert row, columns(cluster, ns, "queued")
    tj = await client.trainjob(ns, "queued")
    assert tj and not (tj.get("status") or {}).get("conditions"), "no condition while it runs"


async def test_a_job_a_user_suspends_and_resumes_reads_the_same(
    cluster: Any, client: Client, samples: None, ns: str
) -> None:
    await client.apply(long_running("paused"), ns)
    await wait_for(lambda: shows(cluster, ns, "paused", "Suspended", "true"), "State Suspended")
    for _ in range(2):
        await client.kube.merge_patch(TRAINJOBS, ns, "paused", {"spec": {"suspend": False}})
        await wait_for(lambda: sdk_status(cluster, ns, "paused", "Running"), "the SDK to report Running", timeout=90)
        assert await shows(cluster, ns, "paused", "", "false"), columns(cluster, ns, "paused")
        await client.kube.merge_patch(TRAINJOBS, ns, "paused", {"spec": {"suspend": True}})
        await wait_for(lambda: shows(cluster, ns, "paused", "Suspended", "true"), "State Suspended again")
        assert await sdk_status(cluster, ns, "paused", "Created")


async def test_the_sdk_reads_the_trainer_version_from_the_public_configmap(
    cluster: Any, ns: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cluster.run_kubectl("apply", "-n", ns, "-f", str(ROOT / "config" / "manager" / "public_configmap.yaml"))
    monkeypatch.setenv("KUBEFLOW_SYSTEM_NAMESPACE", ns)  # where the SDK looks; kubeflow-system by default
    with caplog.at_level(logging.WARNING, logger="kubeflow.trainer.backends.kubernetes.backend"):
        client = sdk(cluster, ns)
    assert "version info is not available" not in caplog.text
    version = client.backend.core_api.read_namespaced_config_map("kubeflow-trainer-public", ns)
    assert version.data == {"kubeflow_trainer_version": "v2.3.0"}
    monkeypatch.setenv("KUBEFLOW_SYSTEM_NAMESPACE", f"{ns}-none")
    with caplog.at_level(logging.WARNING, logger="kubeflow.trainer.backends.kubernetes.backend"):
        sdk(cluster, ns)
    assert "version info is not available" in caplog.text, "without it the SDK warns (and goes on)"
