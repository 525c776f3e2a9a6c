"""Kueue's own extended end-to-end suites (``test/e2e/singlecluster/extended`` and ``test/e2e/tas/extended``
of ``sigs.k8s.io/kueue`` at ``KUEUE_VERSION`` in ``localcluster/versions.env``, ginkgo v2), compiled from the
Go module proxy by ``localcluster/build.sh kueue_e2e`` and run unchanged, with the label filter
``feature:trainjob || feature:mpijob``, against this operator's TrainJob and MPIJob, on one cluster.

What the suite's ``BeforeSuite`` waits for is deployed for real, under the names it waits for:

- ``kueue-system/kueue-controller-manager``: Kueue itself, from its own kustomization for these suites
  (``test/e2e/config/extended``), its webhooks and the leader Lease (:mod:`localcluster.peers`);
- ``jobset-system/jobset-controller-manager``: JobSet's own controller at the version Kueue requires,
  from its ``config/default`` (the filter's ``feature:trainjob`` also selects the JobSet Its labelled so;
  none of this operator's objects is a JobSet);
- ``kubeflow-system/kubeflow-trainer-controller-manager``: this operator, the chart installed as release
  ``kubeflow-trainer`` with ``operatorName`` set to that name, one replica, ``gangScheduler: kueue``;
- ``mpi-operator/mpi-operator``: this operator again, release ``mpi-operator`` (``operatorName:
  mpi-operator``), a warm standby of the first: both elect their leader on one Lease
  (``--leader-election-namespace=kubeflow-system``, the chart's Role there bound to its ServiceAccount),
  so one reconciles; the first serves admission (the webhook configurations are one per cluster), the
  second has ``webhook.enabled=false`` and no public ConfigMap (also one per cluster).

Every one of those pods runs on one real node (kubelet + containerd), tainted so that only they go there;
the suites' pods go to KWOK nodes: two labelled ``instance-type`` ``on-demand`` and ``spot`` as the workers
of Kueue's kind cluster are (``hack/testing/kind-cluster.yaml``), and the eight of its TAS kind cluster
(``hack/testing/kind-cluster-tas.yaml``: node group ``tas-group``, 2 blocks x 2 racks x 2 nodes), under
the names kind gives them (``kind-worker``, ``kind-worker2``, ... ``kind-worker8``), since the TAS Its
assert which pod lands on which node by name; the TAS suite's ``BeforeSuite`` gives each of them one
``example.com/gpu``. KWOK pods are Ready after 1 s; a Job's pod succeeds 5 s later unless
it runs agnhost's ``netexec`` (``BehaviorWaitForDeletion``), which serves until deleted
(``localcluster/kwok-stages.yaml``). Upstream's ClusterTrainingRuntimes (``torch-distributed``, which the
TrainJob Its name) are applied from Trainer's kustomization, as Kueue's e2e setup installs them.

Each suite runs once, with a JSON report (``--ginkgo.json-report``): each selected It's state and time is
printed; a suite's test fails unless every selected It ran and passed. Runs where real nodes can
(:func:`localcluster.realnode.node.unavailable`); ``TRAINER_E2E_REAL=0`` skips it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.helpers import ROOT
from localcluster.binaries import component_dir, ensure
from localcluster.cluster import LocalCluster
from localcluster.incluster import Release
from localcluster.peers import JOBSET, KUEUE, deploy, kueue_source, rolled_out
from localcluster.realnode.node import RealNodes, unavailable

WHY_NOT = "TRAINER_E2E_REAL=0" if os.environ.get("TRAINER_E2E_REAL") == "0" else unavailable()
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(WHY_NOT is not None, reason=f"in-cluster peers: {WHY_NOT}"),
    pytest.mark.builds("trainer_e2e", "kueue_e2e"),
]

SUITES = ("singlecluster", "tas")
"""The extended suites, each a binary ``<suite>-extended.test`` run from its package directory."""
LABEL_FILTER = "feature:trainjob || feature:mpijob"
TAINT = ("trainer.kubeflow.org/operator-only", "NoSchedule")
"""The real node's taint (key, effect), tolerated by the controllers' pods only."""
TOLERATION = {"key": TAINT[0], "operator": "Exists", "effect": TAINT[1]}
INSTANCE_TYPES = ("on-demand", "spot")
"""The ``instance-type`` label of each KWOK node, as on the workers of Kueue's kind cluster."""
TRAINER = ("kubeflow-system", "kubeflow-trainer-controller-manager")
MPI = ("mpi-operator", "mpi-operator")
"""The namespace and name of each of this operator's Deployments the suite waits for."""
TAS_LABEL = "cloud.provider.com/node-group"
TAS_NODES = {
    f"kind-worker{i + 1 if i else ''}": {
        TAS_LABEL: "tas-group",
        "cloud.provider.com/topology-block": f"b{i // 4 + 1}",
        "cloud.provider.com/topology-rack": f"r{i // 2 % 2 + 1}",
    }
    for i in range(8)
}
"""The TAS kind cluster's workers, by name, with their labels."""
SUITE_TIMEOUT = 1200.0
FIGURES: dict[str, object] = {}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The suite's own cluster: 2 KWOK nodes (labelled :data:`INSTANCE_TYPES`), ServiceAccount admission,
    pods Ready after 1 s and a Job's done 5 s later, this project's CRDs; replaces the session's cluster."""
    if os.environ.get("TRAINER_E2E_KUBECONFIG"):
        pytest.skip("Kueue's suite runs on a local cluster of its own (Kueue, JobSet and two operators in it)")
    local = LocalCluster(
        Path(tmp_path_factory.mktemp("kueue-e2e-cluster")),
        nodes=len(INSTANCE_TYPES),
        node_cpu="16",
        service_account_admission=True,
        pod_ready_delay=1.0,
        pod_complete_delay=5.0,
        extra_crds=[ROOT / "config" / "crd" / "bases"],
    )
    t = time.monotonic()
    local.start()
    for i, kind in enumerate(INSTANCE_TYPES):
        local.run_kubectl("label", "node", f"kwok-node-{i}", f"instance-type={kind}", "--overwrite")
    api = local.api()
    for name, labels in TAS_NODES.items():
        node = local.node_manifest(name)
        node["metadata"]["labels"].update(labels)
        status, body = api.create("/api/v1/nodes", node)
        assert status == 201, (name, status, body)
    FIGURES["cluster"] = round(time.monotonic() - t, 1)
    try:
        yield local
    finally:
        print(f"\nKueue e2e figures (s): {json.dumps(FIGURES)}")
        if not os.environ.get("TRAINER_E2E_KEEP_CLUSTER"):
            local.stop()


@pytest.fixture(scope="module", autouse=True)
def operator() -> Iterator[None]:
    """No operator process on the host: the chart's pods are the operator here."""
    yield None


def chart_values(name: str, **more: str) -> dict[str, str]:
    """The chart's values for this operator's Deployment ``name`` on the real node, plus ``more``."""
    return {
        "operatorName": name,
        "replicas": "1",
        "gangScheduler": "kueue",
        **{f"tolerations[0].{k}": v for k, v in TOLERATION.items()},
        **more,
    }


@pytest.fixture(scope="module")
def deployed(cluster: LocalCluster, real_node_store: Path) -> Iterator[list[Release]]:
    """One real node (tainted: :data:`TAINT`) running Kueue, JobSet and the operator twice (see the
    module docstring), and upstream's runtimes; yields the two releases."""
    work = Path(tempfile.mkdtemp(prefix="kueuenodes-"))  # short: containerd's socket paths must fit
    nodes = RealNodes(cluster, 1, work, store=real_node_store)
    t = time.monotonic()
    nodes.start()
    FIGURES["real node"] = round(time.monotonic() - t, 1)
    releases: list[Release] = []
    try:
        for name in nodes.names:
            cluster.run_kubectl("taint", "node", name, f"{TAINT[0]}=:{TAINT[1]}", "--overwrite")
        # Kueue first: its webhooks (failurePolicy Fail) guard Deployments too. JobSet's pod waits for the
        # certificate its manager writes to reach its volume; the operator is installed meanwhile.
        FIGURES[KUEUE.name] = deploy(cluster, nodes, KUEUE, work, [TOLERATION])
        FIGURES[JOBSET.name] = deploy(cluster, nodes, JOBSET, work, [TOLERATION], wait=False)
        trainer_ns, trainer_name = TRAINER
        first = Release(cluster, nodes, "kubeflow-trainer", trainer_ns, chart_values(trainer_name))
        releases.append(first)
        t = time.monotonic()
        first.install()
        FIGURES["kubeflow-trainer"] = {**first.timings, "total": round(time.monotonic() - t, 1)}
        mpi_ns, mpi_name = MPI
        share_lease(cluster, work, f"{first.release}-leader-election", mpi_ns, mpi_name)
        second = Release(
            cluster,
            nodes,
            "mpi-operator",
            mpi_ns,
            chart_values(
                mpi_name,
                **{
                    "webhook.enabled": "false",
                    "publicConfigMap.enabled": "false",
                    "extraArgs[0]": f"--leader-election-namespace={trainer_ns}",
                },
            ),
        )
        releases.append(second)
        t = time.monotonic()
        second.install()
        FIGURES["mpi-operator"] = {**second.timings, "total": round(time.monotonic() - t, 1)}
        FIGURES["jobset rollout, after the operator's"] = rolled_out(cluster, JOBSET)
        ensure("e2e.test")
        runtimes = component_dir("trainer_e2e") / "runtimes"
        cluster.run_kubectl("apply", "--server-side", "-k", str(runtimes))
        yield releases
    finally:
        for release in reversed(releases):
            release.uninstall()
        nodes.stop()
        if not os.environ.get("TRAINER_E2E_KEEP_CLUSTER"):
            shutil.rmtree(work, ignore_errors=True)


def share_lease(cluster: LocalCluster, work: Path, role: str, namespace: str, service_account: str) -> None:
    """Bind the first release's leader-election Role (in its namespace, :data:`TRAINER`'s) to the second
    release's ServiceAccount, so that both elect on the one Lease there."""
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": f"{service_account}-shared-leader-election", "namespace": TRAINER[0]},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}],
    }
    manifest = work / "shared-lease.json"
    manifest.write_text(json.dumps(binding))
    cluster.run_kubectl("apply", "--server-side", "-f", str(manifest))


def suite_dir(suite: str) -> Path:
    """Where a suite runs (where ``go test`` runs it): its package in Kueue's module copy, whose
    ``hack/testing/*/Dockerfile`` name its images."""
    return kueue_source() / "test/e2e" / suite / "extended"


def specs(report: Path) -> list[dict[str, Any]]:
    """The Its of a ginkgo v2 JSON report (``--ginkgo.json-report``), each as ``name`` (container texts
    and leaf text), ``state`` and ``seconds``, and ``failure`` (its message and location) when it failed."""
    out = []
    for suite in json.loads(report.read_text()):
        for spec in suite.get("SpecReports") or []:
            if spec.get("LeafNodeType") != "It":
                continue
            failure = spec.get("Failure") or {}
            where = failure.get("Location") or {}
            out.append(
                {
                    "name": " ".join([*(spec.get("ContainerHierarchyTexts") or []), spec.get("LeafNodeText", "")]),
                    "state": spec.get("State"),
                    "seconds": round((spec.get("RunTime") or 0) / 1e9, 1),
                    "failure": (
                        f"{failure.get('Message', '')} at {where.get('FileName', '')}:{where.get('LineNumber', '')}"
                        if failure
                        else ""
                    ),
                }
            )
    return out


@pytest.mark.parametrize("suite", SUITES)
def test_kueue_extended_suite_passes(
    suite: str, cluster: LocalCluster, deployed: list[Release], tmp_path: Path
) -> None:
    name = f"{suite}-extended.test"
    binary = ensure(name)[name]
    for release in deployed:
        got = release.kubectl("get", "deployment", release.values["operatorName"], "-o", "json").stdout
        image = json.loads(got)["spec"]["template"]["spec"]["containers"][0]["image"]
        assert image.startswith("trainer-operator:"), image  # the operator's own image under the peer's name
    report = tmp_path / "report.json"
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    began = time.monotonic()
    run = subprocess.run(
        [
            str(binary),
            f"--ginkgo.label-filter={LABEL_FILTER}",
            f"--ginkgo.json-report={report}",
            "--ginkgo.no-color",
            "--ginkgo.v",
        ],
        env=env,
        cwd=suite_dir(suite),
        capture_output=True,
        text=True,
        check=False,
        timeout=SUITE_TIMEOUT,
    )
    FIGURES[suite] = round(time.monotonic() - began, 1)
    assert report.exists(), f"no report; exit {run.returncode}\n{run.stdout[-6000:]}\n{run.stderr[-3000:]}"
    ran = specs(report)
    selected = [s for s in ran if s["state"] != "skipped"]
    for spec in selected:
        print(f"{spec['state']:>8}  {spec['name']} ({spec['seconds']}s)")
    print(f"Kueue {binary.parent.name} {name} [{LABEL_FILTER}]: {len(selected)} of {len(ran)} selected")
    failed = [f"{s['name']}: {s['failure']}" for s in selected if s["state"] != "passed"]
    assert not failed, "\n".join(failed) + f"\n{run.stdout[-8000:]}"
    assert selected and run.returncode == 0, run.stdout[-6000:]
