"""End-to-end fixtures: a real local cluster, the CRDs, the operator process, and a client.

The cluster is started once per test session from the cached binaries (built on first use by
``localcluster/build.sh``); the operator runs as its own process, exactly as ``python -m trainer`` runs.
Each test works in a namespace of its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from e2e.helpers import ROOT
from localcluster import ExternalCluster, LocalCluster
from localcluster.client import Client
from localcluster.operator_process import Operator, running_operator
from localcluster.realnode.node import RealNodes

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster | ExternalCluster]:
    """The local cluster, or the one ``TRAINER_E2E_KUBECONFIG`` names."""
    chosen = os.environ.get("TRAINER_E2E_CLUSTER_DIR")
    lane = os.environ.get("PYTEST_XDIST_WORKER")  # one cluster per lane (conftest.py)
    state = Path(f"{chosen}-{lane}" if chosen and lane else chosen or tmp_path_factory.mktemp("cluster"))
    external = os.environ.get("TRAINER_E2E_KUBECONFIG")
    local: LocalCluster | ExternalCluster
    if external:
        local = ExternalCluster(Path(external), state)
    else:
        # 4 nodes x 6 CPU: small enough that the gang and queue scenarios contend for it.
        local = LocalCluster(
            state, nodes=4, node_cpu="6", volcano=True, kueue=True, extra_crds=[ROOT / "config" / "crd" / "bases"]
        )
        local.start()
    try:
        local.run_kubectl("apply", "--server-side", "-f", str(ROOT / "config" / "crd" / "bases"))
        local.run_kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        yield local
    finally:
        if not os.environ.get("TRAINER_E2E_KEEP_CLUSTER"):
            local.stop()


@pytest.fixture(scope="module", autouse=True)
def operator(
    request: pytest.FixtureRequest, cluster: LocalCluster | ExternalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    """The operator process for one test module, started with the module's ``GANG_SCHEDULER``
    (default ``none``) as ``--gang-scheduler-name`` and its ``OPERATOR_ARGS``; it logs JSON to
    ``<cluster state>/logs/operator-<module>.log``. One module runs at a time, so one operator.
    Webhook configurations (with ``--webhook-host`` and ``--webhook-port``) and the operator's own
    ServiceAccount (``TRAINER_E2E_OPERATOR_SA=1``): see :func:`localcluster.operator_process.running_operator`.
    A module with ``QUIET_LOG = True`` fails when its operator logged an error or a line that is not JSON."""
    gang = getattr(request.module, "GANG_SCHEDULER", "none")
    extra = list(getattr(request.module, "OPERATOR_ARGS", []))
    log_name = f"operator-{request.module.__name__.rsplit('.', 1)[-1]}.log"
    with running_operator(cluster, gang, extra, log_name, tmp_path_factory.mktemp("webhook")) as op:
        yield op
    if getattr(request.module, "QUIET_LOG", False):
        loud = quiet_log_problems(op.log_path)
        assert not loud, f"{len(loud)} lines of a healthy run's log are not JSON or say error: {loud[:5]}"


def quiet_log_problems(path: Path) -> list[str]:
    """The lines of an operator's log that are not JSON objects or are logged at ``error`` (or above):
    none in a healthy run (a module sets ``QUIET_LOG = True`` to have its operator's log checked)."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        if not isinstance(event, dict) or event.get("level") in ("error", "critical", "exception"):
            out.append(line)
    return out


@pytest.fixture(scope="session")
def real_node_store() -> Iterator[Path]:
    """The containerd roots every module's real nodes share (``RealNodes(store=...)``): an image is
    imported into a node once per session, not once per module."""
    store = Path(tempfile.mkdtemp(prefix="rnstore-"))  # short: overlay mount options hold these paths
    try:
        yield store
    finally:
        if not os.environ.get("TRAINER_E2E_KEEP_CLUSTER"):
            shutil.rmtree(store, ignore_errors=True)


@pytest.fixture(scope="module")
def real_nodes(
    request: pytest.FixtureRequest, cluster: LocalCluster | ExternalCluster, real_node_store: Path
) -> Iterator[RealNodes]:
    """Two real nodes (kubelet + containerd) with the module's ``REAL_NODE_IMAGES`` (default: the training
    image), for one module; stopped, and their pods gone, after it. Modules that ask for it skip
    themselves where real nodes cannot run (:func:`localcluster.realnode.node.unavailable`)."""
    if not isinstance(cluster, LocalCluster):
        pytest.skip("real nodes join only the local cluster")
    work = Path(tempfile.mkdtemp(prefix="realnodes-"))  # short: containerd's socket paths must fit
    images = tuple(getattr(request.module, "REAL_NODE_IMAGES", ("training",)))
    nodes = RealNodes(cluster, 2, work, images, store=real_node_store)
    nodes.start()
    try:
        yield nodes
    finally:
        nodes.stop()
        if not os.environ.get("TRAINER_E2E_KEEP_CLUSTER"):
            shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="session")
async def client(cluster: LocalCluster | ExternalCluster) -> AsyncIterator[Client]:
    c = await Client.connect(cluster)
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture(scope="session")
async def samples(client: Client) -> None:
    """The sample ClusterTrainingRuntime, installed once."""
    await client.apply_file(ROOT / "config" / "samples" / "torch-distributed.yaml")


@pytest.fixture
async def ns(client: Client) -> AsyncIterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    await client.create_namespace(name)
    try:
        yield name
    finally:
        await client.delete_namespace(name)
        await asyncio.sleep(0)
