"""Kubeflow Trainer's own examples (``examples/yaml/*.yaml`` of ``github.com/kubeflow/trainer/v2`` at
:data:`e2e.upstream.TRAINER_VERSION`, fetched from the Go module proxy at test time) applied as
published with ``kubectl apply -n <test namespace> -f <file>``, each with what it presupposes:
upstream's default ``torch-distributed`` ClusterTrainingRuntime from the same module
(``manifests/base/runtimes``, as its README asks), and per example what its comments name (Kueue's
``training-queue`` LocalQueue and a ClusterQueue with quota; Volcano's scheduler and its ``default``
queue) or what its runtime patch asks of the cluster (ServiceAccount ``training-sa``, a node labelled
``node-type: training``, tainted ``training-workload=true:NoSchedule`` here so that only pods with the
example's toleration land on it). Each then shows upstream's intended outcome, read on the Jobs where
upstream has a JobSet. Pods run on KWOK nodes and complete at once.

The operator serves its admission webhooks; it runs with ``--gang-scheduler-name=none`` for the
examples that need no gang scheduler, ``kueue`` for the Kueue one and ``volcano`` for the Volcano one
(one gang scheduler per operator, where upstream's single install serves both). The Volcano example
under ``none`` runs without a PodGroup and says so with a ``Misconfigured`` condition (asserted)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.helpers import kueue_sees_runtime, webhook_ca_patched
from e2e.test_trainjob import env
from e2e.upstream import default_runtimes, documents, examples_dir
from localcluster import ExternalCluster, LocalCluster
from localcluster.client import Client, condition, wait_for
from localcluster.cluster import reserved_ports
from localcluster.kueue import cluster_queue, local_queue, resource_flavor
from localcluster.operator_process import Operator, running_operator
from trainer.api.kinds import (
    CLUSTER_TRAINING_RUNTIMES,
    KUEUE_CLUSTER_QUEUES,
    KUEUE_WORKLOADS,
    NODES,
    SERVICE_ACCOUNTS,
    TRAINJOBS,
    VOLCANO_PODGROUPS,
)
from trainer.framework.json_codec import JSON

pytestmark = pytest.mark.e2e

(PORT,) = reserved_ports(1)
OPERATOR_ARGS = ["--webhook-port", str(PORT), "--webhook-host", "127.0.0.1"]
RANK = {
    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
}
"""``PET_NODE_RANK``'s ``valueFrom`` on a pod (the apiserver defaults the fieldRef's apiVersion)."""
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINING_NODE = "kwok-training"
TRAINING_TAINT = {"key": "training-workload", "value": "true", "effect": "NoSchedule"}


class Operators:
    """One operator process at a time, (re)started with the gang scheduler a test asks for."""

    def __init__(self, cluster: LocalCluster | ExternalCluster, workdir: Path) -> None:
        self.cluster, self.workdir = cluster, workdir
        self.gang: str | None = None
        self.stack = contextlib.ExitStack()

    async def use(self, gang: str, client: Client) -> Operator:
        """The operator run with ``--gang-scheduler-name=<gang>``, its webhooks serving."""
        if self.gang != gang:
            self.close()
            workdir = self.workdir / gang
            workdir.mkdir(parents=True, exist_ok=True)
            log = f"operator-test_upstream_examples-{gang}.log"
            self.op = self.stack.enter_context(running_operator(self.cluster, gang, OPERATOR_ARGS, log, workdir))
            self.gang = gang
            await wait_for(lambda: webhook_ca_patched(client.kube), "webhook configurations patched")
            await asyncio.sleep(1)
        return self.op

    def close(self) -> None:
        self.gang = None
        self.stack.close()
        self.stack = contextlib.ExitStack()


@pytest.fixture(scope="module")
def operator(cluster: LocalCluster | ExternalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operators]:
    """Replaces the module's single operator (see :class:`Operators`)."""
    operators = Operators(cluster, tmp_path_factory.mktemp("operators"))
    try:
        yield operators
    finally:
        operators.close()


@pytest.fixture(scope="module")
def examples() -> Path:
    """Upstream's ``examples/yaml``, from the module proxy."""
    try:
        return examples_dir()
    except RuntimeError as e:
        pytest.fail(str(e))


def published(examples: Path, name: str) -> dict[str, JSON]:
    """The objects of one example file, by kind."""
    return {doc["kind"]: doc for doc in documents(examples / name)}


Apply = Callable[[str, str], Awaitable[dict[str, JSON]]]
"""``await apply(gang, file)``: the operator run with ``--gang-scheduler-name=<gang>``, then
``kubectl apply -n <test namespace> -f <file>`` (the example's own command); returns its objects."""


@pytest.fixture
def apply(
    cluster: LocalCluster | ExternalCluster, client: Client, operator: Operators, examples: Path, ns: str
) -> Apply:
    """See :data:`Apply`."""

    async def run(gang: str, name: str) -> dict[str, JSON]:
        await operator.use(gang, client)
        done = cluster.run_kubectl("apply", "-n", ns, "-f", str(examples / name), check=False)
        assert done.returncode == 0, f"kubectl apply -f {name}: {done.stderr}"
        return published(examples, name)

    return run


@pytest.fixture(scope="module")
async def runtimes(client: Client, examples: Path) -> AsyncIterator[None]:
    """Upstream's default ClusterTrainingRuntimes that an example names without defining (its README's
    prerequisite: "the default ClusterTrainingRuntimes installed"), taken from the same module; a
    runtime of the same name the session had before is put back afterwards."""
    docs = [doc for path in sorted(examples.glob("*.yaml")) for doc in documents(path)]
    defined = {d["metadata"]["name"] for d in docs if d["kind"] == "ClusterTrainingRuntime"}
    named = {
        d["spec"]["runtimeRef"]["name"]
        for d in docs
        if d["kind"] == "TrainJob" and d["spec"]["runtimeRef"].get("kind") == "ClusterTrainingRuntime"
    }
    defaults = default_runtimes()
    assert named - defined <= defaults.keys(), f"no upstream runtime for {sorted(named - defined - defaults.keys())}"
    before = {name: await client.kube.get_or_none(CLUSTER_TRAINING_RUNTIMES, None, name) for name in named - defined}
    for name in before:
        await put(client, defaults[name])
    try:
        yield
    finally:
        for name, old in before.items():
            if old is None:
                await client.kube.delete(CLUSTER_TRAINING_RUNTIMES, None, name)
            else:
                meta = {k: old["metadata"][k] for k in ("name", "labels", "annotations") if k in old["metadata"]}
                await put(
                    client,
                    {"apiVersion": old["apiVersion"], "kind": old["kind"], "metadata": meta, "spec": old["spec"]},
                )


async def put(client: Client, runtime: JSON) -> None:
    """Make the ClusterTrainingRuntime exactly ``runtime``: created, or its stored object replaced (PUT).
    Not an apply: the session's runtime of that name was applied by the same field manager, and an apply of
    upstream's ``torch: {}`` over its ``torch: {numProcPerNode: auto}`` leaves ``torch`` null, which the
    CRD's schema refuses."""
    stored = await client.kube.get_or_none(CLUSTER_TRAINING_RUNTIMES, None, runtime["metadata"]["name"])
    if stored is None:
        await client.kube.create(CLUSTER_TRAINING_RUNTIMES, None, runtime)
        return
    version = {"resourceVersion": stored["metadata"]["resourceVersion"]}
    await client.kube.update(
        CLUSTER_TRAINING_RUNTIMES, None, {**runtime, "metadata": {**runtime["metadata"], **version}}
    )


async def complete(client: Client, ns: str, name: str, timeout: float = 90) -> JSON:
    """The TrainJob once ``Complete``, with JobSet's reason and message (which upstream's e2e checks)."""
    tj = await client.wait_condition(ns, name, "Complete", timeout=timeout)
    done = condition(tj, "Complete")
    assert done is not None and (done["reason"], done["message"]) == (
        "AllJobsCompleted",
        "jobset completed successfully",
    ), done
    assert condition(tj, "Failed") is None
    return tj


async def pods_of(client: Client, ns: str, name: str, count: int, rjob: str = "node") -> list[JSON]:
    """The ``count`` pods of replicated job ``rjob`` of TrainJob ``name``. (The examples' ``kubectl
    logs -l trainer.kubeflow.org/trainjob-ancestor-step=...`` lines select no pod, here as upstream:
    JobSet copies a replicated job's template labels to its Jobs, not to their pods.)"""

    async def probe() -> list[JSON] | None:
        pods = await client.pods(
            ns, f"jobset.sigs.k8s.io/jobset-name={name},jobset.sigs.k8s.io/replicatedjob-name={rjob}"
        )
        return pods if len(pods) == count else None

    return await wait_for(probe, f"{count} {rjob} pods of {name}", timeout=60)


def node_container(pod: JSON) -> JSON:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "node")


def pet_env(container: JSON) -> dict[str, Any]:
    got = env(container)
    return {k: got[k] for k in got if k.startswith("PET_")}


def torch_env(name: str, nodes: int, procs: int) -> dict[str, Any]:
    """Upstream's torch plugin's ``PET_*`` (``pkg/runtime/framework/plugins/torch/torch.go``)."""
    return {
        "PET_NNODES": str(nodes),
        "PET_NPROC_PER_NODE": str(procs),  # "auto" without GPUs: the CPU request, at least 1
        "PET_NODE_RANK": RANK,
        "PET_MASTER_ADDR": f"{name}-node-0-0.{name}",
        "PET_MASTER_PORT": "29500",
    }


# ----------------------------------------------------------------------------- under --gang-scheduler-name=none


async def test_01_multi_node_runs_torchrun_on_three_nodes_of_upstreams_runtime(
    client: Client, runtimes: None, apply: Apply, ns: str
) -> None:
    job = (await apply("none", "01-multi-node.yaml"))["TrainJob"]
    await complete(client, ns, "multi-node-example")
    pods = await pods_of(client, ns, "multi-node-example", 3)
    for pod in pods:
        node = node_container(pod)
        assert node["image"] == "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"  # the runtime's
        assert node["command"] == job["spec"]["trainer"]["command"]
        assert pet_env(node) == torch_env("multi-node-example", 3, 1)
        assert {"containerPort": 29500, "protocol": "TCP"} in node["ports"]
        assert pod["spec"]["subdomain"] == "multi-node-example"
    (trainer_job,) = await client.jobs(ns, "multi-node-example")
    assert trainer_job["metadata"]["name"] == "multi-node-example-node-0"
    assert (trainer_job["spec"]["parallelism"], trainer_job["spec"]["completions"]) == (3, 3)


@pytest.fixture
async def training_node(client: Client) -> AsyncIterator[str]:
    """A KWOK node like the cluster's, labelled ``node-type: training`` and tainted
    :data:`TRAINING_TAINT` (not part of the cluster's ``type: kwok`` set); deleted afterwards."""
    items, _ = await client.kube.list(NODES, None, "type=kwok")
    base = items[0]
    labels = {k: v for k, v in base["metadata"]["labels"].items() if k != "type"}
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": TRAINING_NODE,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {**labels, "kubernetes.io/hostname": TRAINING_NODE, "node-type": "training"},
        },
        "spec": {"taints": [TRAINING_TAINT]},
        "status": {k: base["status"][k] for k in ("allocatable", "capacity")},
    }
    await client.kube.create(NODES, None, node)

    async def ready() -> bool:
        got = await client.kube.get(NODES, None, TRAINING_NODE)
        ok = condition(got, "Ready")
        return bool(ok and ok["status"] == "True" and got["spec"].get("taints") == [TRAINING_TAINT])

    try:
        await wait_for(ready, f"node {TRAINING_NODE} Ready with only its own taint")
        yield TRAINING_NODE
    finally:
        await client.kube.delete(NODES, None, TRAINING_NODE)


async def test_02_runtime_patches_reach_the_jobs_and_pods_and_the_trainer_env_the_node(
    client: Client, runtimes: None, apply: Apply, ns: str, training_node: str
) -> None:
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "training-sa", "namespace": ns}}
    await client.kube.create(SERVICE_ACCOUNTS, ns, sa)
    job = (await apply("none", "02-runtime-patches.yaml"))["TrainJob"]
    tj = await complete(client, ns, "runtime-patches-example")
    (patch,) = tj["spec"]["runtimePatches"]
    assert patch["manager"] == "example.io/platform-team"
    assert patch.get("time"), "the defaulting webhook stamps runtimePatches[].time (upstream #3363)"

    # The JobSet-level template metadata of the patch, read on the Jobs (there is no JobSet).
    (trainer_job,) = await client.jobs(ns, "runtime-patches-example")
    assert {"team": "ml-platform", "cost-center": "research"}.items() <= trainer_job["metadata"]["labels"].items()
    annotations = trainer_job["metadata"]["annotations"]
    assert {"prometheus.io/scrape": "true", "prometheus.io/port": "8080"}.items() <= annotations.items()

    trainer = job["spec"]["trainer"]
    for pod in await pods_of(client, ns, "runtime-patches-example", 2):
        spec = pod["spec"]
        assert spec["serviceAccountName"] == "training-sa"
        assert spec["nodeSelector"] == {"node-type": "training"}
        assert {**TRAINING_TAINT, "operator": "Equal"} in spec["tolerations"]
        assert spec["nodeName"] == training_node, "only the tainted training node matches the selector"
        node = node_container(pod)
        got = env(node)
        assert {"CUSTOM_VAR": "custom-value", "PYTHONUNBUFFERED": "1"}.items() <= got.items()
        assert pet_env(node) == torch_env("runtime-patches-example", 2, 2)
        assert node["resources"] == trainer["resourcesPerNode"]
        assert node["command"] == trainer["command"]


async def test_05_multi_step_runs_the_dataset_initializer_then_the_trainer(
    client: Client, apply: Apply, ns: str
) -> None:
    await apply("none", "05-multi-step.yaml")
    await complete(client, ns, "multi-step-example")
    init, trainer_job = await client.jobs(ns, "multi-step-example")
    assert init["metadata"]["name"] == "multi-step-example-dataset-initializer-0"
    assert trainer_job["metadata"]["name"] == "multi-step-example-node-0"
    (container,) = init["spec"]["template"]["spec"]["containers"]
    assert env(container)["STORAGE_URI"] == "hf://tatsu-lab/alpaca"
    # dependsOn dataset-initializer Complete: the trainer's Job was created once the initializer's
    # had completed (both stamps are whole seconds).
    assert condition(init, "Complete")["status"] == "True"  # type: ignore[index]
    assert trainer_job["metadata"]["creationTimestamp"] >= init["status"]["completionTime"], (init, trainer_job)
    assert init["metadata"]["labels"][ANCESTOR] == "dataset-initializer"
    assert trainer_job["metadata"]["labels"][ANCESTOR] == "trainer"
    (init_pod,) = await pods_of(client, ns, "multi-step-example", 1, rjob="dataset-initializer")
    assert env(init_pod["spec"]["containers"][0])["STORAGE_URI"] == "hf://tatsu-lab/alpaca"
    for pod in await pods_of(client, ns, "multi-step-example", 2):
        assert pet_env(node_container(pod)) == torch_env("multi-step-example", 2, 2)
        assert pod["metadata"]["creationTimestamp"] >= init["status"]["completionTime"]


@pytest.fixture
async def volcano_runtime(client: Client) -> AsyncIterator[None]:
    """Deletes the ClusterTrainingRuntime example 04 creates (its own ``Clean:`` line)."""
    yield
    await client.kube.delete(CLUSTER_TRAINING_RUNTIMES, None, "torch-distributed-volcano")


async def test_04_volcano_under_no_gang_scheduler_runs_without_a_podgroup_and_says_so(
    client: Client, apply: Apply, ns: str, volcano_runtime: None
) -> None:
    await apply("none", "04-volcano-integration.yaml")
    tj = await client.wait_condition(ns, "volcano-example", "Misconfigured")
    said = condition(tj, "Misconfigured")
    assert said is not None and (said["reason"], said["message"]) == (
        "PodGroupPolicyMismatch",
        "the runtime's podGroupPolicy is 'volcano', but the operator runs with --gang-scheduler-name=none; "
        "its gang settings are ignored. Start the operator with --gang-scheduler-name=volcano or change "
        "spec.podGroupPolicy of the runtime",
    )
    await complete(client, ns, "volcano-example")
    assert await client.kube.get_or_none(VOLCANO_PODGROUPS, ns, "volcano-example") is None


# ----------------------------------------------------------------------------- under --gang-scheduler-name=kueue


@pytest.fixture
async def training_queue(client: Client, ns: str) -> AsyncIterator[None]:
    """What example 03 presupposes: a LocalQueue ``training-queue`` in the namespace (its reference
    one, on ClusterQueue ``cluster-queue``) and that ClusterQueue with quota for the example (3 nodes
    x 2 CPU, 4Gi) on a flavor of the KWOK nodes; Active before the example is applied."""
    await client.apply(resource_flavor("kwok", {"type": "kwok"}))
    await client.apply(cluster_queue("cluster-queue", "kwok", "6", "12Gi", namespaces=[ns]))
    await client.apply(local_queue(ns, "training-queue", "cluster-queue"))

    async def active() -> bool:
        cq = await client.kube.get_or_none(KUEUE_CLUSTER_QUEUES, None, "cluster-queue")
        return bool(condition(cq, "Active") and condition(cq, "Active")["status"] == "True")  # type: ignore[index]

    try:
        await wait_for(active, "ClusterQueue cluster-queue Active")
        yield
    finally:
        await client.kube.delete(KUEUE_CLUSTER_QUEUES, None, "cluster-queue")


async def workload_of(client: Client, ns: str, tj: JSON) -> JSON | None:
    """The Workload Kueue made for the TrainJob (the one it owns)."""
    items, _ = await client.kube.list(KUEUE_WORKLOADS, ns)
    uid = tj["metadata"]["uid"]
    owned = [w for w in items if any(o.get("uid") == uid for o in w["metadata"].get("ownerReferences") or [])]
    return owned[0] if owned else None


async def test_03_kueue_admits_the_suspended_trainjob_within_quota_and_it_completes(
    client: Client, runtimes: None, apply: Apply, ns: str, training_queue: None
) -> None:
    await kueue_sees_runtime(client.kube, ns, "torch-distributed", "training-queue", kind="ClusterTrainingRuntime")
    await apply("kueue", "03-kueue-integration.yaml")

    async def unsuspended() -> JSON | None:
        tj = await client.trainjob(ns, "kueue-example")
        return tj if tj and tj["spec"].get("suspend") is False else None

    tj = await wait_for(unsuspended, "Kueue to unsuspend kueue-example", timeout=60)
    managers = [p["manager"] for p in tj["spec"]["runtimePatches"]]
    assert managers == ["kueue.x-k8s.io/manager"], "Kueue's webhook adds its own runtime patch"

    async def admitted() -> JSON | None:
        wl = await workload_of(client, ns, tj)
        c = condition(wl, "Admitted")
        return wl if c and c["status"] == "True" else None

    wl = await wait_for(admitted, "the Workload Admitted", timeout=30)
    assert [ps["count"] for ps in wl["spec"]["podSets"]] == [3]
    admission = wl["status"]["admission"]
    assert admission["clusterQueue"] == "cluster-queue"
    (assigned,) = admission["podSetAssignments"]
    assert (assigned["count"], assigned["resourceUsage"]) == (3, {"cpu": "6", "memory": "12Gi"}), assigned
    for pod in await pods_of(client, ns, "kueue-example", 3):
        assert pod["spec"]["nodeSelector"] == {"type": "kwok"}, "the flavor's node labels, written by Kueue"
        assert node_container(pod)["image"] == "python:3.11-slim"  # the TrainJob's, over the runtime's
    await complete(client, ns, "kueue-example")

    async def finished() -> JSON | None:
        got = await workload_of(client, ns, tj)
        c = condition(got, "Finished")
        return got if c and c["status"] == "True" else None

    await wait_for(finished, "Kueue to mark the Workload Finished", timeout=30)


# ----------------------------------------------------------------------------- under --gang-scheduler-name=volcano


async def test_04_volcano_gang_gets_a_podgroup_of_four_in_the_default_queue_and_completes(
    client: Client, apply: Apply, ns: str, volcano_runtime: None
) -> None:
    await apply("volcano", "04-volcano-integration.yaml")
    tj = await wait_for(lambda: client.trainjob(ns, "volcano-example"), "TrainJob volcano-example")
    # The PodGroup goes once the job finishes (it would hold queue quota): read it while it exists.
    pg = await wait_for(
        lambda: client.kube.get_or_none(VOLCANO_PODGROUPS, ns, "volcano-example"), "PodGroup volcano-example", 30, 0.05
    )
    assert pg["spec"]["minMember"] == 4
    assert pg["spec"]["minResources"] == {"cpu": "4", "memory": "8Gi"}
    assert pg["spec"]["queue"] == "default"
    (owner,) = pg["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "TrainJob",
        "volcano-example",
        tj["metadata"]["uid"],
        True,
    )
    await complete(client, ns, "volcano-example")
    tj = await client.kube.get(TRAINJOBS, ns, "volcano-example")
    assert condition(tj, "Misconfigured") is None
    for pod in await pods_of(client, ns, "volcano-example", 4):
        assert pod["spec"]["schedulerName"] == "volcano"
        assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "volcano-example"
    (trainer_job,) = await client.jobs(ns, "volcano-example")
    assert trainer_job["spec"]["parallelism"] == 4
