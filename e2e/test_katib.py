"""Katib, as users run it today, with this operator's TrainJobs as its trials: Katib's controller, DB
manager, metrics collector and Goptuna suggestion service (built from Katib's module, its
``katib-external-db`` install, MariaDB as the database: :mod:`localcluster.katib`) on a cluster whose only
nodes are two real ones (kubelet + containerd), and the official kubeflow SDK's ``OptimizerClient``
(unchanged) creating an Experiment over a learning rate (log-uniform) and a momentum (uniform), random
search, 3 trials, 2 at a time, objective ``accuracy`` maximized. Each trial is a TrainJob on upstream's
``torch-distributed`` runtime that this operator runs; Katib's webhook puts its StdOut metrics collector
into the trial's pod (found through the pod's owners: Job, TrainJob, Trial), which reads the
``accuracy=<value>`` the training function prints.

Runs where real nodes can (:func:`localcluster.realnode.node.unavailable`, ``make test`` included), else is
skipped with its reason; ``TRAINER_E2E_REAL=0`` skips it."""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.optimizer import Objective, OptimizerClient, RandomSearch, Search, TrialConfig
from kubeflow.optimizer.types.optimization_types import Direction
from kubeflow.trainer import CustomTrainer, TrainJobTemplate

from e2e.helpers import ROOT, own_cluster, torch_runtime_image
from localcluster import LocalCluster
from localcluster.katib import INJECTION_LABEL, MariaDB, install
from localcluster.realnode import images
from localcluster.realnode.node import RealNodes, unavailable

WHY_NOT = "TRAINER_E2E_REAL=0" if os.environ.get("TRAINER_E2E_REAL") == "0" else unavailable()
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(WHY_NOT is not None, reason=f"real pods: {WHY_NOT}"),
    pytest.mark.builds("trainer_e2e", "katib"),
]
REAL_NODE_IMAGES = ("training",)
RUNTIME = ROOT / "config" / "samples" / "upstream" / "torch-distributed.yaml"
NS = "katib-trials"
COLLECTOR = "metrics-logger-and-collector"


def train(lr: str, momentum: str) -> None:
    """A trial: the accuracy a model would reach, highest at lr 0.01 and momentum 0.9."""
    import math

    accuracy = 0.99 - (math.log10(float(lr)) + 2) ** 2 / 20 - (float(momentum) - 0.9) ** 2
    print(f"accuracy={accuracy:.6f}", flush=True)


def accuracy(parameters: dict[str, str]) -> float:
    return 0.99 - (math.log10(float(parameters["lr"])) + 2) ** 2 / 20 - (float(parameters["momentum"]) - 0.9) ** 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A cluster of its own without KWOK nodes, so that every pod Katib makes (its suggestion service's
    too, which it places nowhere in particular) runs on a real node; replaces the session's cluster for
    this module (so the ``operator`` fixture runs against it)."""
    if os.environ.get("TRAINER_E2E_KUBECONFIG"):
        pytest.skip("Katib runs on a local cluster of its own, with real nodes only")
    local = LocalCluster(
        Path(tmp_path_factory.mktemp("katib-cluster")),
        nodes=0,
        service_account_admission=True,
        extra_crds=[ROOT / "config" / "crd" / "bases"],
    )
    with own_cluster(local):
        yield local


@pytest.fixture(scope="module")
def katib(cluster: LocalCluster, real_nodes: RealNodes) -> Iterator[MariaDB]:
    """Katib installed (:func:`localcluster.katib.install`) with its MariaDB, upstream's ``torch-distributed``
    runtime (its image: the training image under that name) and namespace :data:`NS`, labelled for
    Katib's metrics collector; yields the database."""
    for node in real_nodes.nodes:
        node.ctr("images", "tag", "--force", images.TRAINING_IMAGE, torch_runtime_image())
    work = Path(tempfile.mkdtemp(prefix="katib-"))
    db = MariaDB(work / "db")
    db.start()
    try:
        install(cluster, real_nodes, db, work)
        cluster.run_kubectl("apply", "--server-side", "-f", str(RUNTIME))
        cluster.run_kubectl("create", "namespace", NS)
        cluster.run_kubectl("label", "namespace", NS, f"{INJECTION_LABEL}=enabled")
        yield db
    finally:
        db.stop()
        if not os.environ.get("TRAINER_E2E_KEEP_CLUSTER"):
            shutil.rmtree(work, ignore_errors=True)


def what_happened(cluster: LocalCluster) -> str:
    """For a failure: the experiment's objects, the trials, Katib's controller's and DB manager's logs and
    every trial pod's metrics collector's."""
    kubectl = cluster.run_kubectl
    parts = [
        kubectl("get", "experiments,trials,trainjobs,pods", "-n", NS, "-o", "wide", check=False).stdout,
        kubectl("get", "trials,trainjobs", "-n", NS, "-o", "yaml", check=False).stdout,
        kubectl("logs", "-n", "kubeflow", "deployment/katib-controller", "--tail=200", check=False).stdout,
        kubectl("logs", "-n", "kubeflow", "deployment/katib-db-manager", "--tail=30", check=False).stdout,
    ]
    for pod in kubectl("get", "pods", "-n", NS, "-o", "name", check=False).stdout.split():
        for container in ("node", COLLECTOR):
            logs = kubectl("logs", "-n", NS, pod, "-c", container, "--tail=30", check=False)
            parts.append(f"--- {pod} {container}\n{logs.stdout}{logs.stderr}")
    return "\n".join(parts)


def objects(cluster: LocalCluster, kind: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(cluster.run_kubectl("get", kind, "-n", NS, "-o", "json").stdout)["items"]
    return items


def test_the_kubeflow_sdks_optimizer_runs_a_katib_experiment_whose_trials_are_this_operators_trainjobs(
    cluster: LocalCluster, katib: MariaDB
) -> None:
    optimizer = OptimizerClient(KubernetesBackendConfig(namespace=NS, config_file=str(cluster.kubeconfig)))
    name = optimizer.optimize(
        TrainJobTemplate(
            trainer=CustomTrainer(func=train, func_args={}, num_nodes=1, resources_per_node={"cpu": "1"}),
            runtime="torch-distributed",
        ),
        search_space={"lr": Search.loguniform(0.001, 0.1), "momentum": Search.uniform(0.5, 0.99)},
        objectives=[Objective(metric="accuracy", direction=Direction.MAXIMIZE)],
        algorithm=RandomSearch(random_state=7),
        trial_config=TrialConfig(num_trials=3, parallel_trials=2, max_failed_trials=1),
    )
    try:
        optimizer.wait_for_job_status(name, status={"Complete", "Failed"}, timeout=300)
    finally:
        print(what_happened(cluster))
    job = optimizer.get_job(name)
    assert job.status == "Complete", (job, cluster.run_kubectl("describe", "experiment", name, "-n", NS).stdout)

    trials = {t["metadata"]["name"]: t for t in objects(cluster, "trials")}
    trainjobs = {tj["metadata"]["name"]: tj for tj in objects(cluster, "trainjobs")}
    assert len(trials) == 3 and set(trainjobs) == set(trials), (sorted(trials), sorted(trainjobs))
    for trial_name, trial in trials.items():
        conditions = {c["type"]: c["status"] for c in trial["status"]["conditions"]}
        assert conditions.get("Succeeded") == "True", trial["status"]
        tj = trainjobs[trial_name]
        owner = tj["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner.get("controller")) == ("Trial", trial_name, True), owner
        complete = [c for c in tj["status"]["conditions"] if c["type"] == "Complete"]
        assert complete and complete[0]["status"] == "True", tj["status"]
        parameters = {a["name"]: a["value"] for a in trial["spec"]["parameterAssignments"]}
        observed = {m["name"]: float(m["latest"]) for m in trial["status"]["observation"]["metrics"]}
        assert observed["accuracy"] == pytest.approx(accuracy(parameters), abs=1e-6), (parameters, observed)

    pods = [
        p for p in objects(cluster, "pods") if p["metadata"]["labels"].get("jobset.sigs.k8s.io/jobset-name") in trials
    ]
    assert pods and all(COLLECTOR in [c["name"] for c in p["spec"]["containers"]] for p in pods), [
        [c["name"] for c in p["spec"]["containers"]] for p in pods
    ]

    best = optimizer.get_best_results(name)
    assert best is not None
    best_accuracy = max(
        accuracy({a["name"]: a["value"] for a in t["spec"]["parameterAssignments"]}) for t in trials.values()
    )
    assert float(next(m.latest for m in best.metrics if m.name == "accuracy")) == pytest.approx(best_accuracy, abs=1e-6)
