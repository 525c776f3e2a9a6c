"""Multi-cluster dispatch with Kueue's MultiKueue on real clusters (:mod:`localcluster.multicluster`):
a manager whose ClusterQueue holds the workers' sum (9 CPU) and two workers, worker-a with a 1-CPU
queue and worker-b with an 8-CPU one, every cluster running this operator under
``--gang-scheduler-name=kueue``.

A job submitted to the manager for MultiKueue runs on the one worker with room, through this
operator there; the manager's copy stays untouched by the operator (no children, no status writes)
and gets its status from Kueue. What fits no single worker is never split: it stays pending
everywhere. Progress (``trainerStatus``) written on the worker shows on the manager, carried back
by Kueue with the rest of the status (Kueue 0.19). Kueue's admission webhook gives a job queued at
creation the ``managedBy`` of MultiKueue; one that gets its queue label later, without it, is
refused by Kueue, and ``trainer describe`` says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import yaml

from e2e.helpers import ROOT, kueue_sees_runtime
from e2e.test_trainjob import rjob, runtime, trainjob
from localcluster import LocalCluster
from localcluster.client import condition, wait_for
from localcluster.multicluster import MANAGER, QUEUE, MultiCluster
from localcluster.operator_sa import operator_kubeconfig
from trainer.api.kinds import CONFIGMAPS, JOBS, KUEUE_WORKLOADS, MPIJOBS, NAMESPACES, PODS, SECRETS, TRAINJOBS, Resource
from trainer.api.labels import KUEUE_QUEUE_LABEL
from trainer.api.trainer_v1alpha1 import MANAGED_BY_TRAINER
from trainer.client import AsyncTrainerClient, for_multicluster
from trainer.client.jobs import observe
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import Kube

pytestmark = pytest.mark.e2e
RUN_8S = {"pod-complete.stage.kwok.x-k8s.io/delay": "8s", "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "9s"}
STAMP = "2026-01-02T03:04:05Z"
RUN_30S = {"pod-complete.stage.kwok.x-k8s.io/delay": "30s", "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "31s"}
OPERATOR_STATUS_MANAGER = "trainer"
"""The field manager of the operator's status patches (its HTTP client's user agent)."""


@pytest.fixture(scope="module", autouse=True)
def operator() -> Iterator[None]:
    """No operator on the suite's single cluster: this module's clusters run their own."""
    yield None


def _service_account_kubeconfig(cluster: LocalCluster) -> Path:
    """A kubeconfig of the operator's ServiceAccount on ``cluster``, with the kueue overlay's RBAC."""
    return operator_kubeconfig(cluster, "kueue", cluster.state_dir / "operator-sa")


@pytest.fixture(scope="module")
def mc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MultiCluster]:
    """A manager and two workers, started for this module (``multicluster up``) and stopped after it.
    With ``TRAINER_E2E_OPERATOR_SA=1`` the operators run as their ServiceAccount (overlay kueue)."""
    as_sa = _service_account_kubeconfig if os.environ.get("TRAINER_E2E_OPERATOR_SA") else None
    clusters = MultiCluster(tmp_path_factory.mktemp("multicluster"), operator_kubeconfig=as_sa)
    began = time.monotonic()
    clusters.start()
    print(f"multicluster up: {time.monotonic() - began:.1f}s", file=sys.stderr)
    try:
        yield clusters
    finally:
        if not os.environ.get("TRAINER_E2E_KEEP_CLUSTER"):
            clusters.stop()


@pytest.fixture(scope="module")
async def kubes(mc: MultiCluster) -> AsyncIterator[dict[str, Kube]]:
    """An admin connection to every cluster, by name."""
    out = {name: await Kube.connect(str(c.kubeconfig)) for name, c in mc.clusters.items()}
    try:
        yield out
    finally:
        for kube in out.values():
            await kube.close()


@pytest.fixture
async def ns(mc: MultiCluster, kubes: dict[str, Kube]) -> AsyncIterator[str]:
    """A fresh namespace on every cluster, with the LocalQueue ``user-queue`` and a runtime ``rt``
    whose pods run about 8 s (the same on every cluster: Kueue sizes the job on the manager, the
    operator runs it on the worker)."""
    name = f"mc-{uuid.uuid4().hex[:8]}"
    mc.add_namespace(name)
    rt = runtime("rt", rjob("node", "trainer", RUN_8S))
    for kube in kubes.values():
        await kube.apply({**rt, "metadata": {"name": "rt", "namespace": name}}, "e2e")
    await kueue_sees_runtime(kubes[MANAGER], name, "rt", QUEUE)
    try:
        yield name
    finally:
        for kube in kubes.values():
            await kube.delete(NAMESPACES, None, name)


class Seen:
    """Every object of ``res`` in ``namespace`` of one cluster that a list+watch reported, in its
    last version, including those deleted since (MultiKueue removes a worker's copy once the job
    finishes); ``history`` holds every version reported, by name, oldest first."""

    def __init__(self, kube: Kube, res: Resource, namespace: str) -> None:
        self.kube, self.res, self.namespace = kube, res, namespace
        self.objects: dict[str, JSON] = {}
        self.history: dict[str, list[JSON]] = {}
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Seen:
        listed = asyncio.Event()

        async def run() -> None:
            async for items in observe(self.kube, self.res, self.namespace):
                for name, obj in items.items():
                    versions = self.history.setdefault(name, [])
                    if not versions or versions[-1] is not obj:
                        versions.append(obj)
                self.objects.update(items)
                listed.set()

        self._task = asyncio.create_task(run())
        await asyncio.wait_for(listed.wait(), 30)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


def trainer_cli(kubeconfig: Path, ns: str, *args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    """``python -m trainer.cli --kubeconfig K -n NS ...``, as a user runs it."""
    cmd = [sys.executable, "-m", "trainer.cli", "--kubeconfig", str(kubeconfig), "-n", ns, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def sized(name: str, nodes: int, cpu: str) -> JSON:
    """A TrainJob on ``rt`` of ``nodes`` nodes of ``cpu`` CPUs each."""
    resources = {"requests": {"cpu": cpu, "memory": "1Gi"}}
    return trainjob(name, "rt", trainer={"numNodes": nodes, "resourcesPerNode": resources})


def status_managers(obj: JSON) -> set[str]:
    """The field managers that wrote the object's status subresource."""
    return {m["manager"] for m in obj["metadata"].get("managedFields") or [] if m.get("subresource") == "status"}


async def workload(kube: Kube, ns: str) -> list[JSON]:
    items, _ = await kube.list(KUEUE_WORKLOADS, ns)
    return items


async def test_a_trainjob_runs_on_the_worker_with_room_and_its_status_comes_back(
    mc: MultiCluster, kubes: dict[str, Kube], ns: str, tmp_path: Path
) -> None:
    manager, kubeconfig = kubes[MANAGER], mc.manager.kubeconfig
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(sized("wide", nodes=2, cpu="2")))  # 4 CPU: only worker-b has room
    async with (
        Seen(kubes["worker-a"], TRAINJOBS, ns) as on_a,
        Seen(kubes["worker-b"], TRAINJOBS, ns) as on_b,
        Seen(kubes["worker-b"], JOBS, ns) as jobs_b,
    ):
        began = time.monotonic()
        applied = trainer_cli(kubeconfig, ns, "apply", "--multicluster", "--queue", QUEUE, "-f", str(path))
        assert applied.returncode == 0, applied.stderr
        waited = trainer_cli(kubeconfig, ns, "wait", "wide", "--timeout", "120")
        assert (waited.returncode, waited.stdout) == (0, "wide Complete\n"), waited.stderr
        print(f"submit-to-Complete on the manager: {time.monotonic() - began:.1f}s", file=sys.stderr)
        await asyncio.sleep(1)  # let the watches catch up with the worker's last writes

    # It ran on worker-b, through this operator: its Jobs carry our labels and our field manager.
    remote = on_b.objects["wide"]
    assert remote["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"]
    assert remote["spec"].get("managedBy") in (None, MANAGED_BY_TRAINER)  # Kueue clears it on the copy
    (job,) = jobs_b.objects.values()
    assert job["metadata"]["name"] == "wide-node-0"
    assert job["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == "wide"
    assert job["spec"]["parallelism"] == 2
    assert "trainer" in {m["manager"] for m in job["metadata"]["managedFields"]}
    assert on_a.objects == {}, "the job appeared on worker-a"

    # The manager's TrainJob: Complete with the worker's status, written by Kueue, not the operator.
    tj = await manager.get(TRAINJOBS, ns, "wide")
    assert condition(tj, "Complete")["reason"] == "AllJobsCompleted"  # type: ignore[index]
    assert tj["status"]["jobsStatus"] == remote["status"]["jobsStatus"]
    assert [(s["name"], s["succeeded"]) for s in tj["status"]["jobsStatus"]] == [("node", 1)]
    assert OPERATOR_STATUS_MANAGER in status_managers(remote)
    assert status_managers(tj) == {"kueue"}, status_managers(tj)
    assert (await manager.list(JOBS, ns))[0] == [] and (await manager.list(PODS, ns))[0] == []

    # Where it ran: the manager Workload's status.clusterName, in the SDK and in describe.
    async with AsyncTrainerClient(manager, ns) as sdk:
        placed = await sdk.get_workload("wide")
    assert placed is not None and placed.cluster_name == "worker-b"
    described = trainer_cli(kubeconfig, ns, "describe", "wide")
    assert described.returncode == 0, described.stderr
    assert ["Cluster:", "worker-b"] in [line.split() for line in described.stdout.splitlines()]


async def test_progress_on_the_worker_shows_on_the_manager(kubes: dict[str, Kube], ns: str) -> None:
    manager, worker = kubes[MANAGER], kubes["worker-b"]
    job = sized("progress", nodes=1, cpu="2")
    # A runtime patch of the job's own makes its pod run ~30 s (runtime patches travel to the worker).
    pod_patch = {"spec": {"template": {"metadata": {"annotations": RUN_30S}}}}
    rjob_patch = {"name": "node", "template": pod_patch}
    runtime_patch = {"template": {"spec": {"replicatedJobs": [rjob_patch]}}}
    job["spec"]["runtimePatches"] = [{"manager": "e2e.example.com/longer", "trainingRuntimeSpec": runtime_patch}]
    async with AsyncTrainerClient(manager, ns) as sdk:
        await sdk.create_job(job, queue=QUEUE, multicluster=True)

        async def running_on_worker() -> JSON | None:
            tj = await worker.get_or_none(TRAINJOBS, ns, "progress")
            counts = [(s["name"], s.get("ready")) for s in ((tj or {}).get("status") or {}).get("jobsStatus") or []]
            return tj if counts == [("node", 1)] else None

        remote = await wait_for(running_on_worker, "the job's Job ready on worker-b", timeout=60)
        patches = [p["manager"] for p in remote["spec"]["runtimePatches"]]
        assert patches == ["e2e.example.com/longer", "kueue.x-k8s.io/manager"], patches
        # What the worker's status server writes when the trainer pod posts its progress.
        progress = {"progressPercentage": 42, "estimatedRemainingSeconds": 17, "lastUpdatedTime": STAMP}
        await worker.patch_status(TRAINJOBS, ns, "progress", {"trainerStatus": progress}, manager="e2e")

        async def progress_on_manager() -> JSON | None:
            tj = await manager.get(TRAINJOBS, ns, "progress")
            return tj if (tj.get("status") or {}).get("trainerStatus") == progress else None

        tj = await wait_for(progress_on_manager, "the worker's trainerStatus on the manager", timeout=20)
        assert condition(tj, "Complete") is None, "the job finished before its progress came back"
        assert status_managers(tj) == {"kueue"}, status_managers(tj)
        await sdk.wait_for_job_status("progress", timeout=90)


async def test_an_mpijob_runs_on_the_worker_with_room_and_its_status_comes_back(
    kubes: dict[str, Kube], ns: str
) -> None:
    manager = kubes[MANAGER]
    sample: JSON = yaml.safe_load((ROOT / "config" / "samples" / "mpijob.yaml").read_text())
    sample["metadata"] = {"name": "pi", "namespace": ns}
    sample["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"] = RUN_8S
    job = for_multicluster(sample, QUEUE)  # 3 CPU (launcher 1, workers 2 x 1): only worker-b has room
    async with (
        Seen(kubes["worker-a"], MPIJOBS, ns) as on_a,
        Seen(kubes["worker-b"], MPIJOBS, ns) as on_b,
        Seen(kubes["worker-b"], JOBS, ns) as jobs_b,
    ):
        await manager.apply(job, "e2e")

        async def succeeded() -> JSON | None:
            obj = await manager.get_or_none(MPIJOBS, ns, "pi")
            c = condition(obj, "Succeeded")
            return obj if c and c["status"] == "True" else None

        await wait_for(succeeded, "the manager's MPIJob Succeeded", timeout=120)

        async def copied_back() -> JSON | None:
            # Kueue copies the worker's status while the job runs and stops once it has finished (the
            # worker's own count goes on as its workers end): the manager holds one the worker had.
            obj = await manager.get_or_none(MPIJOBS, ns, "pi")
            ours = ((obj or {}).get("status") or {}).get("replicaStatuses")
            theirs = [(v.get("status") or {}).get("replicaStatuses") for v in on_b.history.get("pi", [])]
            return obj if ours and ours in theirs else None

        mpi = await wait_for(copied_back, "a replicaStatuses the worker had, copied back to the manager", timeout=30)

    assert {j["metadata"]["name"] for j in jobs_b.objects.values()} == {"pi-launcher", "pi-worker"}
    for j in jobs_b.objects.values():
        assert j["metadata"]["labels"]["training.kubeflow.org/job-name"] == "pi"
        assert "trainer" in {m["manager"] for m in j["metadata"]["managedFields"]}
    assert on_a.objects == {}, "the MPIJob appeared on worker-a"
    assert mpi["status"]["replicaStatuses"]["Launcher"]["succeeded"] == 1
    assert status_managers(mpi) == {"kueue"}, status_managers(mpi)
    # No children on the manager: no Jobs, hostfile ConfigMap nor SSH Secret.
    assert (await manager.list(JOBS, ns))[0] == []
    assert await manager.get_or_none(CONFIGMAPS, ns, "pi-config") is None
    assert await manager.get_or_none(SECRETS, ns, "pi-ssh") is None
    (wl,) = await workload(manager, ns)
    assert wl["status"]["clusterName"] == "worker-b"


async def test_a_job_no_worker_can_hold_stays_pending_everywhere(
    mc: MultiCluster, kubes: dict[str, Kube], ns: str
) -> None:
    manager = kubes[MANAGER]
    # 3 x 3 CPU: the manager's 9 CPU hold it, neither worker (1, 8) does, and it is never split.
    async with (
        Seen(kubes["worker-a"], TRAINJOBS, ns) as on_a,
        Seen(kubes["worker-b"], TRAINJOBS, ns) as on_b,
        AsyncTrainerClient(manager, ns) as sdk,
    ):
        await sdk.create_job(sized("huge", nodes=3, cpu="3"), queue=QUEUE, multicluster=True)

        async def pending_on_both_workers() -> bool:
            for worker in ("worker-a", "worker-b"):
                items = await workload(kubes[worker], ns)
                reserved = condition(items[0], "QuotaReserved") if len(items) == 1 else None
                if not reserved or reserved["status"] != "False":
                    return False
            return True

        await wait_for(pending_on_both_workers, "the Workload offered to both workers and pending on both", 60)
        for _ in range(12):  # and it stays so
            tj = await manager.get(TRAINJOBS, ns, "huge")
            assert tj["spec"]["suspend"] is True
            for kube in kubes.values():
                assert (await kube.list(JOBS, ns))[0] == []
            await asyncio.sleep(0.25)
        assert on_a.objects == {} and on_b.objects == {}
        info = await sdk.get_workload("huge")
        assert info is not None and info.cluster_name is None
        assert [c.state for c in info.admission_checks] == ["Pending"]
        await sdk.delete_job("huge", wait=True)


async def test_a_job_queued_without_managed_by_gets_multikueue_s_from_kueue_and_runs_on_a_worker(
    kubes: dict[str, Kube], ns: str
) -> None:
    manager = kubes[MANAGER]
    async with Seen(kubes["worker-b"], TRAINJOBS, ns) as on_b, AsyncTrainerClient(manager, ns) as sdk:
        await sdk.create_job(sized("plain", nodes=1, cpu="2"), queue=QUEUE)  # 2 CPU: worker-b's
        tj = await manager.get(TRAINJOBS, ns, "plain")
        # Kueue's defaulting webhook (v0.19): MultiKueue's managedBy, suspended, its runtime patch.
        assert tj["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
        assert tj["spec"]["suspend"] is True
        assert [p["manager"] for p in tj["spec"]["runtimePatches"]] == ["kueue.x-k8s.io/manager"]
        await sdk.wait_for_job_status("plain", timeout=120)
    assert "plain" in on_b.objects
    assert (await manager.list(JOBS, ns))[0] == [] and (await manager.list(PODS, ns))[0] == []


async def test_a_job_labelled_for_the_queue_after_creation_is_refused_by_kueue_and_describe_says_why(
    mc: MultiCluster, kubes: dict[str, Kube], ns: str
) -> None:
    manager = kubes[MANAGER]
    async with Seen(kubes["worker-b"], TRAINJOBS, ns) as on_b, AsyncTrainerClient(manager, ns) as sdk:
        # Kueue's webhook defaults managedBy only at creation: a queue label added later leaves
        # the job without it, for MultiKueue to refuse.
        job = sized("local", nodes=1, cpu="1")
        job["spec"]["suspend"] = True
        await sdk.create_job(job)
        await manager.merge_patch(TRAINJOBS, ns, "local", {"metadata": {"labels": {KUEUE_QUEUE_LABEL: QUEUE}}})

        async def rejected() -> bool:
            info = await sdk.get_workload("local")
            return bool(info and [c.state for c in info.admission_checks] == ["Rejected"])

        await wait_for(rejected, "Kueue to reject the job's MultiKueue admission check", timeout=60)
        described = trainer_cli(mc.manager.kubeconfig, ns, "describe", "local")
        assert described.returncode == 0, described.stderr
        text = " ".join(described.stdout.split())
        assert 'Expecting spec.managedBy to be "kueue.x-k8s.io/multikueue"' in text, described.stdout
        assert "Cluster: <rejected by multikueue>" in text
        tj = await manager.get(TRAINJOBS, ns, "local")
        assert tj["spec"]["suspend"] is True and (await manager.list(PODS, ns))[0] == []
        assert on_b.objects == {}
