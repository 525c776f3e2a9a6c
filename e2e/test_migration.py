"""Switching a live cluster from Kubeflow Trainer v2 to this operator, and back, as docs/migration.md
writes it (its ``switch`` and ``rollback`` blocks, run as written by :mod:`e2e.doc_blocks`).

Its own cluster: 2 KWOK nodes, Kueue, upstream's CRDs (Trainer v2.3.0, JobSet v0.12.0), upstream's
Trainer controller manager and JobSet controller built from the module proxy (:mod:`bench.upstream`).
Before the switch, upstream runs three TrainJobs and a TrainingRuntime: ``running`` (its pods run 50 s),
``queued`` (suspended by Kueue in a queue without quota) and ``done`` (Complete). After it:

- no TrainJob is lost; ``running`` never has two sets of pods (its pods are counted every 0.5 s from
  before the switch to its end: never more than its 2 nodes, each pod a Job of its JobSet's) and ends
  ``Complete`` with the JobSet's reason; ``queued`` runs under this operator once Kueue admits it (its
  Jobs controlled by the TrainJob, no JobSet) and completes; ``done`` is untouched (same
  resourceVersion);
- the rollback restores upstream: every TrainJob present and as it was, and a new TrainJob gets a JobSet.

Stood in for, because upstream runs here as processes, not in a Deployment, and the cluster has no
internet: ``kubectl scale deployment kubeflow-trainer-controller-manager --replicas=0`` stops the Trainer
process (JobSet's keeps running); ``helm install`` adds ``replicas=0`` and no webhook, and this operator
runs as a process with ``--gang-scheduler-name kueue`` (after ``rollout status``, which the chart's
Deployment passes at once); ``helm uninstall`` stops that process first; the rollback's ``kubectl apply -k
github.com/kubeflow/trainer/manifests/overlays/manager?ref=v2.3.0`` applies the same version's CRDs from
the module source and starts the Trainer process again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.upstream import Upstream, ensure_upstream
from e2e import doc_blocks
from e2e.helpers import ROOT, connected, own_cluster, shell_env
from e2e.test_trainjob import rjob, runtime, trainjob
from localcluster import LocalCluster
from localcluster.client import Client, condition, wait_for
from localcluster.kueue import cluster_queue, local_queue, resource_flavor
from localcluster.operator_process import running_operator
from localcluster.pki import Pki
from trainer.api.kinds import JOBS, JOBSETS, PODS, TRAINJOBS
from trainer.framework.json_codec import JSON

pytestmark = [pytest.mark.e2e, pytest.mark.builds("helm", "upstream")]
DOC = ROOT / "docs" / "migration.md"
NS = "team"
RUN_50S = {"pod-complete.stage.kwok.x-k8s.io/delay": "50s", "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "51s"}
RUN_5S = {"pod-complete.stage.kwok.x-k8s.io/delay": "5s", "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "6s"}


@pytest.fixture(scope="module")
def upstream_dir() -> Path:
    return ensure_upstream()


@pytest.fixture(scope="module")
def mg_cluster(tmp_path_factory: pytest.TempPathFactory, upstream_dir: Path) -> Iterator[LocalCluster]:
    """This module's cluster: 2 KWOK nodes, Kueue, upstream's CRDs."""
    cluster = LocalCluster(
        tmp_path_factory.mktemp("migration"), nodes=2, node_cpu="8", kueue=True, extra_crds=[upstream_dir / "crds"]
    )
    with own_cluster(cluster):
        yield cluster


@pytest.fixture(scope="module", autouse=True)
def operator() -> Iterator[None]:
    """No operator process on the session's cluster: this module runs its own on its own cluster."""
    yield None


@pytest.fixture(scope="module")
def upstream(mg_cluster: LocalCluster, upstream_dir: Path) -> Iterator[Upstream]:
    up = Upstream(upstream_dir, mg_cluster.kubeconfig, mg_cluster.state_dir, Pki(mg_cluster.state_dir / "pki"))
    up.start(mg_cluster.api())
    try:
        yield up
    finally:
        up.stop()


@pytest.fixture(scope="module")
async def kube(mg_cluster: LocalCluster) -> AsyncIterator[Client]:
    async with connected(mg_cluster) as client:
        yield client


class Stand:
    """What the test does where the docs' command cannot run here (see the module docstring)."""

    def __init__(self, cluster: LocalCluster, up: Upstream, env: dict[str, str], workdir: Path) -> None:
        self.cluster, self.up, self.env, self.workdir = cluster, up, env, workdir
        self.ours = contextlib.ExitStack()

    def __call__(self, command: str) -> doc_blocks.Step | None:
        if command.startswith("kubectl -n kubeflow-system scale deployment kubeflow-trainer-controller-manager"):
            return self._named("stop upstream's Trainer process", lambda: self.up.stop("trainer"))
        if command.startswith("helm install trainer "):
            return f"{command} --set replicas=0 --set webhook.enabled=false"
        if command.startswith("kubectl -n trainer-system rollout status"):
            return self._named("rollout status, then this operator as a process", lambda: self._ours(command))
        if command.startswith("helm uninstall trainer"):
            return f"{self._stop_ours()} && {command}"
        if command.startswith("kubectl apply --server-side --force-conflicts -k") and "kubeflow/trainer" in command:
            crds = self.up.directory / "crds"
            return self._named(
                "upstream's CRDs, then its Trainer process",
                lambda: (
                    self._shell(f"kubectl apply --server-side --force-conflicts -f {crds}") + self._start_upstream()
                ),
            )
        return command

    @staticmethod
    def _named(name: str, fn: Callable[[], Any]) -> Callable[[], str]:
        def step() -> str:
            out = fn()
            return out if isinstance(out, str) else ""

        step.__name__ = name
        return step

    def _shell(self, line: str) -> str:
        (ran,) = doc_blocks.run([line], lambda c: c, self.env, ROOT)
        assert ran.rc == 0, ran.output
        return ran.output

    def _ours(self, command: str) -> str:
        out = self._shell(command)
        self.ours.enter_context(running_operator(self.cluster, "kueue", [], "operator-migration.log", self.workdir))
        return out

    def _stop_ours(self) -> str:
        self.ours.close()
        return "true"

    def _start_upstream(self) -> str:
        self.up.start(None, only="trainer")
        asyncio.run(self.up.wait_ready(60))
        return ""


def owners(obj: JSON) -> set[str]:
    return {str(r.get("kind")) for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")}


class PodCount:
    """Samples ``running``'s pods every 0.5 s: the most alive at once, and the kinds controlling their Jobs."""

    def __init__(self, kube: Client) -> None:
        self.kube, self.most, self.job_owners, self.samples = kube, 0, set[str](), 0

    async def run(self) -> None:
        while True:
            pods, _ = await self.kube.kube.list(PODS, NS, "jobset.sigs.k8s.io/jobset-name=running")
            alive = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
            self.most, self.samples = max(self.most, len(alive)), self.samples + 1
            jobs, _ = await self.kube.kube.list(JOBS, NS, "jobset.sigs.k8s.io/jobset-name=running")
            for job in jobs:
                self.job_owners |= owners(job)
            await asyncio.sleep(0.5)


async def complete(kube: Client, name: str, timeout: float = 120) -> JSON:
    async def probe() -> JSON | None:
        tj = await kube.trainjob(NS, name)
        cond = condition(tj, "Complete")
        return tj if cond and cond["status"] == "True" else None

    result: JSON = await wait_for(probe, f"TrainJob {name} Complete", timeout=timeout)
    return result


async def test_a_live_cluster_switches_from_upstream_and_back_as_the_docs_write_it(
    mg_cluster: LocalCluster, upstream: Upstream, kube: Client, tmp_path: Path
) -> None:
    await upstream.wait_ready(120)
    # Upstream runs three TrainJobs in a namespace with a Kueue queue that has no quota yet.
    await kube.create_namespace(NS)
    await kube.apply(resource_flavor("kwok", {"type": "kwok"}))
    await kube.apply(cluster_queue("cq", "kwok", "0", "0", namespaces=[NS]))
    await kube.apply(local_queue(NS, "lq", "cq"))
    for name, run_for in (("slow", RUN_50S), ("quick", RUN_5S)):
        rt = runtime(name, rjob("node", "trainer", run_for), torch=False)
        rt["spec"]["mlPolicy"] = {"numNodes": 1, "torch": {}}  # v2.3's torch policy has no numProcPerNode
        await kube.apply(rt, NS)
    await kube.apply(trainjob("done", "quick", trainer={"numNodes": 1}), NS)
    await complete(kube, "done")
    await kube.apply(trainjob("running", "slow", trainer={"numNodes": 2}), NS)
    one_cpu = {"requests": {"cpu": "1", "memory": "1Gi"}}  # more than the queue's quota: held
    queued = trainjob("queued", "quick", trainer={"numNodes": 1, "resourcesPerNode": one_cpu})
    queued["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
    await kube.apply(queued, NS)

    async def two_running() -> bool:
        pods, _ = await kube.kube.list(PODS, NS, "jobset.sigs.k8s.io/jobset-name=running")
        return bool(sum((p.get("status") or {}).get("phase") == "Running" for p in pods) == 2)

    await wait_for(two_running, "upstream's 2 pods of TrainJob running", timeout=60)

    async def suspended_jobset() -> bool:
        js = await kube.kube.get_or_none(JOBSETS, NS, "queued")
        return bool(js and js["spec"].get("suspend"))

    await wait_for(suspended_jobset, "upstream's suspended JobSet of TrainJob queued", timeout=60)
    before = {tj["metadata"]["name"]: tj for tj in (await kube.kube.list(TRAINJOBS, NS))[0]}
    assert sorted(before) == ["done", "queued", "running"]

    # The switch, as written.
    count = PodCount(kube)
    sampler = asyncio.create_task(count.run())
    stand = Stand(mg_cluster, upstream, shell_env(mg_cluster, tmp_path), tmp_path)
    try:
        switch = doc_blocks.commands(DOC.read_text(), "switch")
        ran = await asyncio.to_thread(doc_blocks.run, switch, stand, stand.env, ROOT)
        for r in ran:
            print(f"$ {r.written}\n{r.output}")
        assert ran and all(r.rc == 0 for r in ran), ran[-1]
        assert len(ran) == len(switch)

        # running: finishes under its JobSet, never two sets of pods.
        tj = await complete(kube, "running", timeout=150)
        done = condition(tj, "Complete")
        assert done is not None and done["reason"] == "AllJobsCompleted", done
        assert tj["status"]["jobsStatus"][0]["succeeded"] >= 1, tj["status"]
        sampler.cancel()
        assert count.samples > 20 and count.most == 2, (count.most, count.samples)
        assert count.job_owners == {"JobSet"}, count.job_owners

        # queued: its JobSet deleted; under this operator once admitted.
        async def gone() -> bool:
            return await kube.kube.get_or_none(JOBSETS, NS, "queued") is None

        await wait_for(gone, "TrainJob queued's JobSet deleted", timeout=60)
        await kube.apply(cluster_queue("cq", "kwok", "8", "64Gi", namespaces=[NS]))
        await complete(kube, "queued")
        jobs, _ = await kube.kube.list(JOBS, NS, "jobset.sigs.k8s.io/jobset-name=queued")
        assert jobs and all(owners(j) == {"TrainJob"} for j in jobs), [j["metadata"] for j in jobs]

        # done: untouched.
        now = await kube.trainjob(NS, "done")
        assert now is not None
        assert now["metadata"]["resourceVersion"] == before["done"]["metadata"]["resourceVersion"]
        assert await kube.kube.get_or_none(JOBSETS, NS, "done") is not None

        # The rollback, as written.
        ran = await asyncio.to_thread(
            doc_blocks.run, doc_blocks.commands(DOC.read_text(), "rollback"), stand, stand.env, ROOT
        )
        for r in ran:
            print(f"$ {r.written}\n{r.output}")
        assert ran and all(r.rc == 0 for r in ran), ran[-1]
        after = {tj["metadata"]["name"]: tj for tj in (await kube.kube.list(TRAINJOBS, NS))[0]}
        assert sorted(after) == ["done", "queued", "running"]
        for name in after:
            assert condition(after[name], "Complete") is not None, after[name]["status"]
        await kube.apply(trainjob("again", "quick", trainer={"numNodes": 1}), NS)

        async def jobset() -> bool:
            return await kube.kube.get_or_none(JOBSETS, NS, "again") is not None

        await wait_for(jobset, "upstream's JobSet of a new TrainJob after the rollback", timeout=60)
        await complete(kube, "again")
    finally:
        sampler.cancel()
        stand.ours.close()
