"""Kueue's writes to a TrainJob as JSON merge patches (kubernetes-sigs/kueue#14836) on the real
apiserver, through the operator's webhooks (URL mode) under ``--gang-scheduler-name=kueue``.

The local cluster runs Kueue v0.19.2, which still writes a TrainJob with full updates
(``e2e/test_gang_kueue.py``); here the test plays the newer Kueue for a TrainJob without a queue label
(so the running Kueue leaves it alone): ``kubectl patch --type=merge`` with the bodies of
:mod:`localcluster.kueue`, as Kueue's ServiceAccount (impersonated, with the TrainJob rules of Kueue's
ClusterRole). Admission is one request (``spec.runtimePatches`` whole with ``suspend: false``): the Jobs
resume and their pods carry the assignment (node selector, scheduling gate, annotation), another
manager's entry is kept. A stop is two: ``suspend: true``, then, once ``status.jobsStatus`` counts no
active pod, ``spec.runtimePatches`` with Kueue's entry emptied; doing both at once while pods are active
is refused, as upstream refuses it. The CRD the apiserver serves passes Kueue's check for
``spec.runtimePatches`` (kubernetes-sigs/kueue#14886)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from e2e.helpers import webhook_ca_patched
from e2e.test_trainjob import RUN_FOR, gated, rjob, runtime, trainjob
from localcluster import ExternalCluster, LocalCluster
from localcluster.client import Client, wait_for
from localcluster.cluster import reserved_ports
from localcluster.kueue import (
    KUEUE_MANAGER,
    PodSetInfo,
    admission_patch,
    kueue_runtime_patch,
    kueue_sees_runtime_patches,
    restore_patch,
    suspend_patch,
)
from localcluster.operator_process import Operator
from trainer.api.kinds import PODS
from trainer.framework.json_codec import JSON

pytestmark = pytest.mark.e2e

(PORT,) = reserved_ports(1)
GANG_SCHEDULER = "kueue"
OPERATOR_ARGS = ["--webhook-port", str(PORT), "--webhook-host", "127.0.0.1"]
KUEUE_USER = "system:serviceaccount:kueue-system:kueue-controller-manager"
"""Kueue's ServiceAccount in its release manifests (``config/components/rbac``)."""
GATE = "kueue.x-k8s.io/topology"
TAS = PodSetInfo(
    "node",
    node_selector={"type": "kwok"},
    annotations={"kueue.x-k8s.io/podset-unconstrained-topology": "true"},
    scheduling_gates=[GATE],
)
PLATFORM: JSON = {
    "manager": "example.com/platform",
    "trainingRuntimeSpec": {"template": {"metadata": {"labels": {"example.com/team": "a"}}}},
}

Patch = Callable[[Callable[[JSON], JSON]], tuple[bool, str]]


@pytest.fixture(scope="module", autouse=True)
async def webhook_installed(client: Client, operator: Operator) -> None:
    """Wait for the operator to patch the caBundle of the webhook configurations of this module's port."""
    await wait_for(lambda: webhook_ca_patched(client.kube), "webhook configurations patched")
    await asyncio.sleep(1)


@pytest.fixture
def as_kueue(cluster: LocalCluster | ExternalCluster, ns: str) -> Iterator[Patch]:
    """``patch(build)``: ``kubectl patch --type=merge`` of TrainJob ``tj`` in ``ns`` with ``build`` of the
    TrainJob read, as Kueue's ServiceAccount, allowed what Kueue's ClusterRole allows on TrainJobs
    (``trainjob_controller.go`` kubebuilder markers: get, list, watch, update, patch); read and sent
    again on a conflict (the body carries the resourceVersion read), as Kueue's next reconcile would.
    Returns (admitted, kubectl's output)."""
    name = f"kueue-trainjobs-{ns}"
    rbac = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": [
                {
                    "apiGroups": ["trainer.kubeflow.org"],
                    "resources": ["trainjobs"],
                    "verbs": ["get", "list", "watch", "update", "patch"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": "kueue-controller-manager", "namespace": "kueue-system"}],
        },
    ]
    path = cluster.state_dir / f"{name}.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": rbac}))
    cluster.run_kubectl("apply", "--server-side", "-f", str(path))

    def patch(build: Callable[[JSON], JSON]) -> tuple[bool, str]:
        kind = ("trainjobs.trainer.kubeflow.org", "tj", "-n", ns, f"--as={KUEUE_USER}")
        for _ in range(5):
            read = json.loads(cluster.run_kubectl("get", *kind, "-o", "json").stdout)
            body = json.dumps(build(read))
            done = cluster.run_kubectl("patch", *kind, "--type=merge", "-p", body, "-o", "name", check=False)
            out = (done.stdout + done.stderr).strip()
            if "the object has been modified" not in out:
                return done.returncode == 0, out
        raise AssertionError(f"a conflict at every try: {out}")

    try:
        yield patch
    finally:
        cluster.run_kubectl("delete", "--ignore-not-found", "-f", str(path), check=False)


def test_the_trainjob_crd_the_apiserver_serves_passes_kueues_runtime_patches_check(
    cluster: LocalCluster | ExternalCluster,
) -> None:
    crd = json.loads(cluster.run_kubectl("get", "crd", "trainjobs.trainer.kubeflow.org", "-o", "json").stdout)
    assert kueue_sees_runtime_patches(crd)


async def test_kueues_merge_patches_start_a_trainjob_with_its_assignment_and_stop_it(
    client: Client, ns: str, as_kueue: Patch
) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer", RUN_FOR)), ns)
    patches = [PLATFORM, kueue_runtime_patch()]
    await client.apply(trainjob("tj", "rt", suspend=True, trainer={"numNodes": 2}, runtimePatches=patches), ns)
    created = await wait_for(lambda: _held(client, ns), "the suspended TrainJob's Jobs, suspended")
    platform_time = _entry(created, "example.com/platform")["time"]

    admitted, out = as_kueue(lambda tj: admission_patch(tj, [TAS]))
    assert admitted, out
    pods = await wait_for(lambda: _pods(client, ns, 2), "the admitted TrainJob's 2 pods")
    for pod in pods:
        assert pod["spec"]["nodeSelector"]["type"] == "kwok", pod["spec"].get("nodeSelector")
        assert pod["spec"]["schedulingGates"] == [{"name": GATE}], pod["spec"].get("schedulingGates")
        assert pod["metadata"]["annotations"]["kueue.x-k8s.io/podset-unconstrained-topology"] == "true"
    await wait_for(lambda: _all(client, ns, gated), "the pods held by Kueue's scheduling gate")
    tj = await client.trainjob(ns, "tj")
    assert tj is not None and tj["spec"]["suspend"] is False
    assert all(job["spec"]["suspend"] is False for job in await client.jobs(ns, "tj"))
    assert _entry(tj, "example.com/platform")["time"] == platform_time, "another manager's entry is kept"
    assert _entry(tj, KUEUE_MANAGER)["time"] >= platform_time

    # Kueue's topology ungater lifts the gate; the pods run on the flavor's nodes.
    for pod in pods:
        await client.kube.merge_patch(PODS, ns, pod["metadata"]["name"], {"spec": {"schedulingGates": None}})
    await wait_for(lambda: _all(client, ns, _running), "the pods running once ungated")

    # Suspending and taking the assignment back in one request while pods are active: refused.
    admitted, out = as_kueue(lambda tj: {**suspend_patch(tj), "spec": {**restore_patch(tj)["spec"], "suspend": True}})
    assert not admitted and "spec.runtimePatches: cannot change while" in out and "active pods" in out, out

    # Kueue's stop: suspend; once no pod is active, restore its entry.
    admitted, out = as_kueue(suspend_patch)
    assert admitted, out
    await wait_for(lambda: _inactive(client, ns), "jobsStatus with no active pod after the stop", 60)
    admitted, out = as_kueue(restore_patch)
    assert admitted, out
    await wait_for(lambda: _restored(client, ns), "the suspended Jobs' templates without Kueue's assignment")

    # Admitted again, on a flavor without topology: the pods run at once.
    admitted, out = as_kueue(lambda tj: admission_patch(tj, [PodSetInfo("node", node_selector={"type": "kwok"})]))
    assert admitted, out
    await wait_for(lambda: _all(client, ns, _running), "the pods running after the second admission")


def _entry(tj: JSON, manager: str) -> JSON:
    found: list[JSON] = [p for p in tj["spec"]["runtimePatches"] if p["manager"] == manager]
    (out,) = found
    return out


async def _held(client: Client, ns: str) -> JSON | None:
    jobs = await client.jobs(ns, "tj")
    if not jobs or not all(j["spec"].get("suspend") for j in jobs):
        return None
    return await client.trainjob(ns, "tj")


async def _pods(client: Client, ns: str, n: int) -> list[JSON] | None:
    pods = [
        p
        for p in await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=tj")
        if not p["metadata"].get("deletionTimestamp")
    ]
    return pods if len(pods) == n else None


async def _all(client: Client, ns: str, check: Callable[[JSON], bool]) -> bool:
    pods = await _pods(client, ns, 2)
    return bool(pods) and all(check(p) for p in pods or [])


def _running(pod: JSON) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


async def _restored(client: Client, ns: str) -> bool:
    jobs = await client.jobs(ns, "tj")
    specs = [j["spec"]["template"]["spec"] for j in jobs if j["spec"].get("suspend")]
    return len(specs) == len(jobs) > 0 and not any(
        s.get("schedulingGates") or "type" in (s.get("nodeSelector") or {}) for s in specs
    )


async def _inactive(client: Client, ns: str) -> JSON | None:
    """The TrainJob once its ``status.jobsStatus`` counts no active pod (what Kueue's ``IsActive`` reads)."""
    tj: Any = await client.trainjob(ns, "tj")
    statuses = (tj or {}).get("status", {}).get("jobsStatus") or []
    return tj if statuses and all(not s.get("active") for s in statuses) else None
