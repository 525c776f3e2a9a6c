"""DRA devices per training node (kubeflow/trainer KEP-2782) on the local cluster, whose Kubernetes
serves ``resource.k8s.io/v1``: no DRA driver runs, the test publishes a ResourceSlice per KWOK node
(driver ``gpu.example.com``, made up) and a DeviceClass selecting that driver. The real kube-scheduler
allocates each pod's ResourceClaim, which the kube-controller-manager made from the TrainJob's
``resourceClaimsPerNode`` template; KWOK runs the pods. A cluster without DRA is the unit tests' (the
refusal needs the discovery answer this cluster does not give)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from e2e.helpers import webhook_ca_patched
from e2e.test_trainjob import RUN_FOR, rjob, runtime, trainjob
from localcluster.client import Client, wait_for
from localcluster.cluster import NODE_PREFIX, LocalCluster, reserved_ports
from localcluster.operator_process import Operator
from trainer.api.kinds import TRAINJOBS, Resource
from trainer.api.trainer_v1alpha1 import CLAIMS_IN_RESOURCES_MESSAGE
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError

pytestmark = pytest.mark.e2e

(PORT,) = reserved_ports(1)
OPERATOR_ARGS = ["--webhook-port", str(PORT), "--webhook-host", "127.0.0.1"]
RESOURCE_SLICES = Resource("resource.k8s.io", "v1", "ResourceSlice", "resourceslices", namespaced=False)
DEVICE_CLASSES = Resource("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", namespaced=False)
RESOURCE_CLAIMS = Resource("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims")
DRIVER = "gpu.example.com"
DEVICES_PER_NODE = 2


@pytest.fixture(scope="module", autouse=True)
async def webhook_installed(client: Client, operator: Operator) -> None:
    """The operator's admission webhooks, patched with its CA (the ``operator`` fixture applied them)."""
    await wait_for(lambda: webhook_ca_patched(client.kube), "webhook configurations patched")
    await asyncio.sleep(1)


@pytest.fixture(scope="module")
async def devices(client: Client, cluster: LocalCluster) -> AsyncIterator[list[str]]:
    """A DeviceClass of driver ``gpu.example.com`` and a ResourceSlice of ``DEVICES_PER_NODE`` devices on
    every KWOK node; deleted after the module. Yields the node names."""
    nodes = [f"{NODE_PREFIX}{i}" for i in range(cluster.nodes)]
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DRIVER},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }
    await client.kube.create(DEVICE_CLASSES, None, device_class)
    for node in nodes:
        await client.kube.create(RESOURCE_SLICES, None, resource_slice(node))
    try:
        yield nodes
    finally:
        for node in nodes:
            await client.kube.delete(RESOURCE_SLICES, None, f"{node}-{DRIVER}")
        await client.kube.delete(DEVICE_CLASSES, None, DRIVER)


def resource_slice(node: str) -> JSON:
    """The slice a driver of ``gpu.example.com`` would publish for ``node``: one pool named after it."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}"} for i in range(DEVICES_PER_NODE)],
        },
    }


def claim_template(name: str, count: int) -> JSON:
    """A ResourceClaimTemplate of ``count`` devices of the class, in one request named ``gpu`` (KEP-2782
    counts requests whose name contains ``gpu``)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": count}}]}}
        },
    }


def tj(name: str, **trainer: Any) -> JSON:
    """A TrainJob on the TrainingRuntime ``rt`` (:func:`rt`) with these ``spec.trainer`` settings."""
    return trainjob(name, "rt", trainer=trainer)


def rt() -> JSON:
    """A torch TrainingRuntime whose ``node`` container asks for no CPU (``auto`` without GPUs: 1) and whose
    pods run for 10 minutes."""
    return runtime("rt", rjob("node", "trainer", RUN_FOR))


def env(container: JSON) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


async def test_each_node_gets_its_own_claim_allocated_by_the_scheduler(
    client: Client, ns: str, devices: list[str]
) -> None:
    await client.apply(claim_template("gpus", DEVICES_PER_NODE), ns)
    await client.apply(rt(), ns)
    claims = [{"name": "gpu", "resourceClaimTemplateName": "gpus"}]
    await client.apply(tj("dra", numNodes=3, resourceClaimsPerNode=claims), ns)

    async def running() -> list[JSON] | None:
        pods = await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=dra")
        return pods if len(pods) == 3 and all(p["status"].get("phase") == "Running" for p in pods) else None

    pods = await wait_for(running, "3 trainer pods Running", timeout=90)
    nodes = [p["spec"]["nodeName"] for p in pods]
    # Each node has DEVICES_PER_NODE devices and each pod claims them all: three distinct nodes.
    assert len(set(nodes)) == 3 and set(nodes) <= set(devices)
    generated = set()
    for pod in pods:
        assert pod["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "gpus"}]
        (node,) = pod["spec"]["containers"]
        assert node["resources"]["claims"] == [{"name": "gpu"}]
        assert env(node)["PET_NPROC_PER_NODE"] == str(DEVICES_PER_NODE)  # auto: the template's devices
        (status,) = pod["status"]["resourceClaimStatuses"]
        assert status["name"] == "gpu"
        claim = await client.kube.get(RESOURCE_CLAIMS, ns, status["resourceClaimName"])
        assert claim["metadata"]["ownerReferences"][0]["name"] == pod["metadata"]["name"]
        results = claim["status"]["allocation"]["devices"]["results"]
        assert {(r["driver"], r["pool"]) for r in results} == {(DRIVER, pod["spec"]["nodeName"])}
        assert sorted(r["device"] for r in results) == [f"gpu-{i}" for i in range(DEVICES_PER_NODE)]
        assert [r["name"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["name"]]
        generated.add(claim["metadata"]["name"])
    assert len(generated) == 3, "one claim per pod"


async def test_more_nodes_than_devices_leave_the_rest_pending(client: Client, ns: str, devices: list[str]) -> None:
    await client.apply(claim_template("gpus", DEVICES_PER_NODE), ns)
    await client.apply(rt(), ns)
    claims = [{"name": "gpu", "resourceClaimTemplateName": "gpus"}]
    await client.apply(tj("big", numNodes=len(devices) + 1, resourceClaimsPerNode=claims), ns)

    async def settled() -> list[JSON] | None:
        pods = await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=big")
        running = [p for p in pods if p["status"].get("phase") == "Running"]
        return pods if len(pods) == len(devices) + 1 and len(running) == len(devices) else None

    pods = await wait_for(settled, "every node's devices taken, one pod left", timeout=90)
    (pending,) = [p for p in pods if p["status"].get("phase") == "Pending"]
    assert not pending["spec"].get("nodeName")


async def test_resources_per_node_claims_are_refused_by_the_schema(client: Client, ns: str) -> None:
    await client.apply(rt(), ns)
    bad = tj("bad", resourcesPerNode={"claims": [{"name": "gpu"}]})
    with pytest.raises(ApiError) as e:
        await client.apply(bad, ns)
    assert e.value.status == 422 and CLAIMS_IN_RESOURCES_MESSAGE in str(e.value)


async def test_a_dangling_container_claim_is_refused_at_admission(client: Client, ns: str) -> None:
    await client.apply(rt(), ns)
    patched = tj("dangling")
    pod_spec = {"containers": [{"name": "node", "resources": {"claims": [{"name": "nic"}]}}]}
    rjobs = [{"name": "node", "template": {"spec": {"template": {"spec": pod_spec}}}}]
    patched["spec"]["runtimePatches"] = [
        {"manager": "user", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": rjobs}}}}
    ]
    with pytest.raises(ApiError) as e:
        await client.apply(patched, ns)
    assert "spec.runtimePatches: replicated job 'node', pod spec.containers[node].resources.claims" in str(e.value)


async def test_a_suspended_job_counts_the_template_made_after_it(client: Client, ns: str, devices: list[str]) -> None:
    """A TrainJob created, suspended, before its ResourceClaimTemplate: its Job counts no GPU (auto: 1
    process); resumed once the template is there, its pods run as many processes as the template has devices."""
    await client.apply(rt(), ns)
    claims = [{"name": "gpu", "resourceClaimTemplateName": "later"}]
    suspended = tj("later", numNodes=1, resourceClaimsPerNode=claims)
    suspended["spec"]["suspend"] = True
    await client.apply(suspended, ns)

    async def job_env() -> dict[str, Any] | None:
        jobs = await client.jobs(ns, "later")
        return env(jobs[0]["spec"]["template"]["spec"]["containers"][0]) if jobs else None

    assert (await wait_for(job_env, "the suspended Job"))["PET_NPROC_PER_NODE"] == "1"
    await client.apply(claim_template("later", DEVICES_PER_NODE), ns)
    await client.kube.merge_patch(TRAINJOBS, ns, "later", {"spec": {"suspend": False}})

    async def running() -> JSON | None:
        pods = await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=later")
        return pods[0] if len(pods) == 1 and pods[0]["status"].get("phase") == "Running" else None

    pod = await wait_for(running, "the resumed pod Running", timeout=90)
    assert env(pod["spec"]["containers"][0])["PET_NPROC_PER_NODE"] == str(DEVICES_PER_NODE)
    assert pod["status"]["resourceClaimStatuses"][0]["name"] == "gpu"
