"""Switching a live cluster from kubeflow/mpi-operator v0.8 (and from training-operator v1) to this operator
never duplicates or loses an MPIJob, on a cluster of its own (2 KWOK nodes), following docs/migration.md's
``mpi-operator-switch`` and ``mpijob-v1-crd`` blocks as written (:mod:`e2e.doc_blocks`; ``kubectl scale`` of
mpi-operator's Deployment stands for stopping its process, and the chart's install adds ``replicas=0`` and no
webhook or status server: this operator runs as a process).

- mpi-operator v0.8.2 (built from the module proxy, :mod:`localcluster.mpi_operator`, with its own MPIJob
  CRD) starts two MPIJobs: one running (its launcher runs ~40 s) and one suspended. It is stopped, this
  operator's CRDs applied over its own (same name and version) and this operator started. The running
  one never has two sets of workers (worker pods and Jobs sampled every 0.5 s throughout: never more
  than its 2 workers, never a worker Job) and ends ``Succeeded`` under its launcher Job, its worker pods
  then deleted (``cleanPodPolicy: Running``); the suspended one's launcher Job is replaced by this
  operator's, and resumed it runs under this operator and succeeds.
- training-operator v1's ``mpijobs.kubeflow.org`` (serving ``v1`` only, a v1 MPIJob stored): ``helm install``
  of ``charts/trainer`` prints its WARNING line, this operator logs its one error line and stays ready;
  the chart's CRD cannot be applied over it (the apiserver's refusal is printed), and the documented
  path (the v1 MPIJobs deleted, the CRD deleted, the chart's CRDs applied) serves ``v2beta1``, whose
  MPIJobs this operator then runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from e2e import doc_blocks
from e2e.helpers import ROOT, connected, log_events, own_cluster, shell_env
from localcluster import LocalCluster
from localcluster.binaries import ensure
from localcluster.client import Client, condition, wait_for
from localcluster.cluster import free_ports
from localcluster.mpi_operator import CRD, MpiOperator, ensure_mpi_operator
from localcluster.operator_process import Operator
from trainer.api.kinds import JOBS, MPIJOBS, PODS
from trainer.framework.json_codec import JSON
from trainer.jobs.child_writer import HASH_ANNOTATION

pytestmark = [pytest.mark.e2e, pytest.mark.builds("helm", "mpi_operator")]
CRDS = ROOT / "config" / "crd" / "bases"
CHART = ROOT / "charts" / "trainer"
DOC = ROOT / "docs" / "migration.md"
NS = "migration"
AFTER = "migration-crd"
SAMPLE: JSON = yaml.safe_load((ROOT / "config" / "samples" / "mpijob.yaml").read_text())
LAUNCHER_RUNS = {
    "pod-complete.stage.kwok.x-k8s.io/delay": "40s",
    "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "41s",
}
LAUNCHER_SHORT = {"pod-complete.stage.kwok.x-k8s.io/delay": "3s", "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "4s"}
V1_CRD: JSON = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "mpijobs.kubeflow.org"},
    "spec": {
        "group": "kubeflow.org",
        "names": {"kind": "MPIJob", "listKind": "MPIJobList", "plural": "mpijobs", "singular": "mpijob"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                "subresources": {"status": {}},
            }
        ],
    },
}
"""training-operator v1's MPIJob CRD as far as the apiserver cares: ``kubeflow.org/v1`` served and stored only."""
WARNING = "WARNING: CustomResourceDefinition mpijobs.kubeflow.org serves v1, not v2beta1"
LOGGED = "CustomResourceDefinition mpijobs.kubeflow.org serves v1, not v2beta1"
FIGURES: dict[str, Any] = {}


@pytest.fixture(scope="module")
def mig_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """This module's cluster: 2 KWOK nodes, this operator's CRDs but mpi-operator's MPIJob CRD (as a
    cluster that ran mpi-operator has it)."""
    directory = ensure_mpi_operator()
    state = tmp_path_factory.mktemp("mpijob-migration")
    with own_cluster(LocalCluster(state, nodes=2, extra_crds=[CRDS, directory / CRD])) as cluster:
        yield cluster
    print(f"\nmpijob migration figures: {json.dumps(FIGURES)}")


@pytest.fixture(scope="module", autouse=True)
def operator() -> Iterator[None]:
    """No session operator: each test starts this operator itself (:func:`our_operator`)."""
    yield None


@pytest.fixture
async def mig_client(mig_cluster: LocalCluster) -> AsyncIterator[Client]:
    async with connected(mig_cluster) as c:
        yield c


@contextlib.contextmanager
def our_operator(cluster: LocalCluster, log_name: str) -> Iterator[tuple[Operator, str]]:
    """This operator as its own process (``--gang-scheduler-name none``), with its ``/readyz`` URL."""
    (port,) = free_ports(1)
    log = cluster.state_dir / "logs" / log_name
    op = Operator(
        cluster.kubeconfig, log, ["--gang-scheduler-name", "none", "--health-probe-bind-address", f"127.0.0.1:{port}"]
    )
    op.start()
    try:
        yield op, f"http://127.0.0.1:{port}/readyz"
    finally:
        op.stop()


async def ready(url: str, timeout: float = 60.0) -> float:
    """Seconds until ``url`` answers 200."""
    start = time.monotonic()

    async def probe() -> bool:
        try:
            async with aiohttp.ClientSession() as session, session.get(url, timeout=aiohttp.ClientTimeout(2)) as r:
                return r.status == 200
        except (aiohttp.ClientError, OSError, TimeoutError):
            return False

    await wait_for(probe, f"{url} answering 200", timeout)
    return time.monotonic() - start


def mpijob(name: str, launcher: dict[str, str], suspend: bool = False) -> JSON:
    """The sample MPIJob (2 workers, ``cleanPodPolicy: Running``) named ``name``, its launcher pod running
    as KWOK's ``launcher`` annotations say."""
    obj = copy.deepcopy(SAMPLE)
    obj["metadata"] = {"name": name, "namespace": NS}
    obj["spec"]["runPolicy"]["suspend"] = suspend
    obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["metadata"] = {"annotations": launcher}
    return obj


async def mpijob_cond(client: Client, name: str, type_: str, timeout: float = 60, ns: str = NS) -> JSON:
    async def probe() -> JSON | None:
        obj = await client.kube.get_or_none(MPIJOBS, ns, name)
        c = condition(obj, type_)
        return obj if c and c["status"] == "True" else None

    return await wait_for(probe, f"MPIJob {ns}/{name} {type_}", timeout)


async def workers_of(client: Client, name: str) -> list[JSON]:
    return await client.pods(NS, f"training.kubeflow.org/job-name={name},training.kubeflow.org/job-role=worker")


async def test_mpijobs_mpi_operator_started_are_finished_or_handed_over_never_run_twice(
    mig_cluster: LocalCluster, mig_client: Client
) -> None:
    client, start = mig_client, time.monotonic()
    await client.create_namespace(NS)
    upstream = MpiOperator(ensure_mpi_operator(), mig_cluster.kubeconfig, mig_cluster.state_dir)
    upstream.start()
    try:
        await client.apply(mpijob("running", LAUNCHER_RUNS))
        await client.apply(mpijob("parked", LAUNCHER_SHORT, suspend=True))
        await mpijob_cond(client, "running", "Running", timeout=60)
        await mpijob_cond(client, "parked", "Suspended", timeout=60)
    except BaseException:
        print(upstream.log_tail())
        upstream.stop()
        raise
    FIGURES["mpi_operator_running_s"] = round(time.monotonic() - start, 1)
    upstream_parked = await client.kube.get(JOBS, NS, "parked-launcher")
    assert upstream_parked["spec"]["suspend"] is True
    assert HASH_ANNOTATION not in (upstream_parked["metadata"].get("annotations") or {})
    assert upstream_parked["metadata"]["labels"] == {"app": "parked"}, "mpi-operator labels its launcher Job app only"
    assert len(await workers_of(client, "running")) == 2

    # docs/migration.md's switch, as written: mpi-operator stopped (a process here, not a Deployment), this
    # operator's CRDs over its own, the chart (replicas 0, no webhook: this operator runs as a process below).
    def stop_mpi_operator() -> str:
        upstream.stop()
        return "mpi-operator stopped"

    def substitute(command: str) -> doc_blocks.Step | None:
        if command.startswith("kubectl -n mpi-operator scale deployment mpi-operator"):
            return stop_mpi_operator
        if command.startswith("helm install trainer "):
            return f"{command} --set replicas=0 --set webhook.enabled=false --set statusServer.enabled=false"
        return command

    written = doc_blocks.commands(DOC.read_text(), "mpi-operator-switch")
    try:
        ran = doc_blocks.run(written, substitute, shell_env(mig_cluster, mig_cluster.state_dir), ROOT)
    finally:
        upstream.stop()  # also when the block failed before it
    for r in ran:
        print(f"$ {r.written}\n{r.output}")
    assert [r.rc for r in ran] == [0] * len(written), ran[-1].output

    seen: list[tuple[int, list[str]]] = []
    sampling = True

    async def sample() -> None:
        while sampling:
            pods = await workers_of(client, "running")  # terminating ones too: no overlap, however brief
            jobs, _ = await client.kube.list(JOBS, NS)
            seen.append((len(pods), [j["metadata"]["name"] for j in jobs if j["metadata"]["name"] == "running-worker"]))
            await asyncio.sleep(0.5)

    sampler = asyncio.create_task(sample())
    with our_operator(mig_cluster, "operator-mpijob-migration.log") as (_, readyz):
        FIGURES["operator_ready_s"] = round(await ready(readyz), 1)
        try:
            done = await mpijob_cond(client, "running", "Succeeded", timeout=90)
            assert condition(done, "Succeeded")["reason"] == "MPIJobSucceeded"  # type: ignore[index]
            assert condition(done, "Running")["status"] == "False"  # type: ignore[index]
            assert done["status"]["completionTime"] and done["status"]["replicaStatuses"]["Launcher"]["succeeded"] == 1
            await wait_for(
                lambda: _no_workers(client, "running"), "running's workers deleted (cleanPodPolicy Running)", 30
            )
        finally:
            sampling = False
            await sampler
        assert seen and max(n for n, _ in seen) <= 2, f"two sets of workers: {seen}"
        assert not any(jobs for _, jobs in seen), "a worker Job of ours beside mpi-operator's worker pods"
        FIGURES["samples"] = len(seen)
        launcher = await client.kube.get(JOBS, NS, "running-launcher")
        assert HASH_ANNOTATION not in (launcher["metadata"].get("annotations") or {}), "mpi-operator's, finished"

        # The suspended one: mpi-operator's launcher Job replaced by ours, then resumed and run by us.
        async def ours() -> JSON | None:
            job = await client.kube.get_or_none(JOBS, NS, "parked-launcher")
            return job if job and HASH_ANNOTATION in (job["metadata"].get("annotations") or {}) else None

        replaced = await wait_for(ours, "parked's launcher Job replaced by this operator's", 30)
        assert replaced["metadata"]["uid"] != upstream_parked["metadata"]["uid"] and replaced["spec"]["suspend"]
        await client.kube.merge_patch(MPIJOBS, NS, "parked", {"spec": {"runPolicy": {"suspend": False}}})
        await mpijob_cond(client, "parked", "Succeeded", timeout=60)
        worker = await client.kube.get(JOBS, NS, "parked-worker")
        assert HASH_ANNOTATION in worker["metadata"]["annotations"]
        pods, _ = await client.kube.list(PODS, NS, "training.kubeflow.org/job-name=parked")
        assert all((p["metadata"]["ownerReferences"][0]["kind"]) == "Job" for p in pods), "no Pod of mpi-operator's"
    FIGURES["scenario_s"] = round(time.monotonic() - start, 1)
    await client.delete_namespace(NS)


async def _no_workers(client: Client, name: str) -> bool:
    return not await workers_of(client, name)


def kubectl(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return cluster.run_kubectl(*args, check=False)


def ok(cluster: LocalCluster, *args: str) -> str:
    """``kubectl args...``'s output; fails the test with kubectl's error when it fails."""
    done = kubectl(cluster, *args)
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


async def crd_gone(cluster: LocalCluster) -> bool:
    """Whether the MPIJob CRD is gone (its deletion waits for its objects to be deleted first)."""
    got = kubectl(cluster, "get", "crd", "mpijobs.kubeflow.org", "--ignore-not-found", "-oname")
    return got.returncode == 0 and not got.stdout.strip()


def helm(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = shell_env(cluster, cluster.state_dir)
    argv = [str(ensure("helm")["helm"]), f"--kubeconfig={cluster.kubeconfig}", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=False)


async def test_training_operator_v1s_mpijob_crd_is_said_never_silent_and_the_documented_path_fixes_it(
    mig_cluster: LocalCluster, mig_client: Client, tmp_path: Path
) -> None:
    client = mig_client
    # A cluster that ran training-operator v1: its CRD, and a v1 MPIJob stored.
    ok(mig_cluster, "delete", "crd", "mpijobs.kubeflow.org")
    await wait_for(lambda: crd_gone(mig_cluster), "the MPIJob CRD gone", 60)
    crd_file = tmp_path / "v1-crd.yaml"
    crd_file.write_text(yaml.safe_dump(V1_CRD))
    ok(mig_cluster, "apply", "--server-side", "-f", str(crd_file))
    ok(mig_cluster, "wait", "--for=condition=Established", "--timeout=60s", "crd/mpijobs.kubeflow.org")
    v1_job = tmp_path / "v1-mpijob.yaml"
    v1_job.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "MPIJob",
                "metadata": {"name": "old", "namespace": "default"},
                "spec": {},
            }
        )
    )
    ok(mig_cluster, "apply", "--server-side", "-f", str(v1_job))

    # helm install says it (lookup of the CRD in NOTES.txt), in one line.
    sets = ["--set", "replicas=0", "--set", "webhook.enabled=false", "--set", "statusServer.enabled=false"]
    installed = helm(
        mig_cluster, "install", "mig", str(CHART), "--namespace", "trainer-mig", "--create-namespace", *sets
    )
    assert installed.returncode == 0, installed.stderr
    warnings = [line for line in installed.stdout.splitlines() if line.startswith(WARNING)]
    print(f"\nhelm install: {warnings}")
    assert len(warnings) == 1, installed.stdout
    rendered = helm(mig_cluster, "template", "mig", str(CHART), *sets)
    assert "WARNING" not in rendered.stdout, "helm template has no cluster to look up: nothing said"

    with our_operator(mig_cluster, "operator-mpijob-crd.log") as (op, readyz):
        await ready(readyz)  # the absent v2beta1 does not hold readiness back
        await asyncio.sleep(1)
        logged = [e for e in log_events(op.log_path) if LOGGED in str(e.get("event"))]
        assert len(logged) == 1 and logged[0]["level"] == "error", logged
        print(f"operator: {logged[0]['event']}")

        # The chart's CRD cannot go over it while v1 objects are stored.
        refused = kubectl(mig_cluster, "apply", "--server-side", "--force-conflicts", "-f", str(CHART / "crds"))
        assert refused.returncode != 0 and "storedVersions" in refused.stderr, refused.stdout + refused.stderr
        FIGURES["crd_swap_refused"] = refused.stderr.strip()
        print(f"apiserver: {refused.stderr.strip()}")

        # The documented path, as docs/migration.md writes it.
        written = doc_blocks.commands(DOC.read_text(), "mpijob-v1-crd")
        env = shell_env(mig_cluster, tmp_path)
        ran = await asyncio.to_thread(doc_blocks.run, written, lambda c: c, env, ROOT)
        for r in ran:
            print(f"$ {r.written}\n{r.output}")
        assert [r.rc for r in ran] == [0] * len(written), ran[-1].output
        await client.create_namespace(AFTER)
        after = mpijob("after", LAUNCHER_SHORT)
        after["metadata"]["namespace"] = AFTER
        await client.apply(after)
        await mpijob_cond(client, "after", "Created", timeout=60, ns=AFTER)  # the operator's informer lists it again
        await ready(readyz)
    helm(mig_cluster, "uninstall", "mig", "--namespace", "trainer-mig")
