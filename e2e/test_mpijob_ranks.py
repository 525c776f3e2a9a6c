"""MPIJob pods as Kueue's Topology Aware Scheduling reads them, on the real local cluster with the
admission webhook served: each worker pod carries ``training.kubeflow.org/replica-index`` (its index,
one more when the launcher runs as a worker and holds 0). A module of its own, since the webhook
would refuse at admission the invalid MPIJobs :mod:`e2e.test_mpijob` sends to the controller."""

from __future__ import annotations

import asyncio

import pytest

from e2e.helpers import webhook_ca_patched
from e2e.test_mpijob import LONG, _n_running, mpijob, pods
from localcluster.client import Client, wait_for
from localcluster.cluster import reserved_ports
from localcluster.operator_process import Operator

pytestmark = pytest.mark.e2e
(PORT,) = reserved_ports(1)
OPERATOR_ARGS = ["--webhook-port", str(PORT), "--webhook-host", "127.0.0.1"]
REPLICA_INDEX = "training.kubeflow.org/replica-index"


@pytest.fixture(scope="module", autouse=True)
async def webhook_installed(client: Client, operator: Operator) -> None:
    """Wait for the operator to patch the caBundle of the webhook configurations the ``operator``
    fixture applied."""
    await wait_for(lambda: webhook_ca_patched(client.kube), "webhook configurations patched")
    await asyncio.sleep(1)


@pytest.mark.parametrize("as_worker", [False, True])
async def test_pods_carry_the_replica_index_kueue_orders_ranks_by(client: Client, ns: str, as_worker: bool) -> None:
    job = mpijob("ranks", runLauncherAsWorker=as_worker)
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["metadata"] = {"annotations": LONG}
    await client.apply(job, ns)
    workers = await wait_for(lambda: _n_running(client, ns, "ranks", 2), "2 running workers")
    by_host = {p["spec"]["hostname"]: p["metadata"]["labels"].get(REPLICA_INDEX) for p in workers}
    first = 1 if as_worker else 0
    assert by_host == {"ranks-worker-0": str(first), "ranks-worker-1": str(first + 1)}
    (launcher,) = await wait_for(lambda: pods(client, ns, "ranks", "launcher"), "the launcher pod")
    assert launcher["metadata"]["labels"].get(REPLICA_INDEX) == ("0" if as_worker else None)
