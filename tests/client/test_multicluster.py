"""Multi-cluster dispatch on the client side, without a cluster: marking TrainJobs and MPIJobs for
MultiKueue, reading a Workload's placement, and the CLI's ``apply --multicluster`` and ``describe``."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from tests.conftest import SAMPLES, load_sample
from trainer import cli
from trainer.api.base import ObjectMeta
from trainer.api.trainer_v1alpha1 import RuntimeRef, TrainJob, TrainJobSpec
from trainer.cli import describe, errors
from trainer.client import ManifestError, WorkloadInfo, for_multicluster
from trainer.client.multicluster import owned_workload

NOW = datetime(2026, 1, 1, 0, 10, 0, tzinfo=UTC)
MK = "kueue.x-k8s.io/multikueue"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def render(tables: list[Any]) -> str:
    console = Console(width=300, record=True, markup=False, highlight=False)
    for t in tables:
        console.print(t)
    return console.export_text()


def test_a_trainjob_is_marked_in_spec_and_the_input_is_left_alone() -> None:
    sample = load_sample("trainjob.yaml")
    marked = for_multicluster(sample, "user-queue")
    assert (marked["spec"]["managedBy"], marked["spec"]["suspend"]) == (MK, True)
    assert marked["metadata"]["labels"][QUEUE_LABEL] == "user-queue"
    assert "managedBy" not in sample["spec"] and "labels" not in sample["metadata"]
    assert {k: v for k, v in marked["spec"].items() if k not in ("managedBy", "suspend")} == sample["spec"]


def test_an_mpijob_is_marked_in_run_policy_and_keeps_the_queue_it_names() -> None:
    sample = load_sample("mpijob.yaml")
    sample.setdefault("metadata", {})["labels"] = {QUEUE_LABEL: "team"}
    marked = for_multicluster(sample)
    assert marked["spec"]["runPolicy"]["managedBy"] == MK and marked["spec"]["runPolicy"]["suspend"] is True
    assert "managedBy" not in marked["spec"] and marked["metadata"]["labels"][QUEUE_LABEL] == "team"
    # An explicit queue wins over the label, and marking twice changes nothing more.
    assert for_multicluster(for_multicluster(sample, "other"))["metadata"]["labels"][QUEUE_LABEL] == "other"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda o: o, "needs a Kueue LocalQueue: give a queue (--queue) or the label kueue.x-k8s.io/queue-name"),
        (
            lambda o: o["spec"].update(managedBy="trainer.kubeflow.org/trainjob-controller") or o,
            "spec.managedBy is 'trainer.kubeflow.org/trainjob-controller'; MultiKueue needs kueue.x-k8s.io/multikueue",
        ),
        (lambda o: o.update(kind="ConfigMap") or o, "ConfigMap cannot be dispatched by MultiKueue here"),
    ],
)
def test_what_cannot_be_dispatched_is_refused_with_the_reason(change: Any, message: str) -> None:
    queue = None if "LocalQueue" in message else "user-queue"
    with pytest.raises(ManifestError) as err:
        for_multicluster(change(load_sample("trainjob.yaml")), queue)
    assert message in str(err.value)


def workload(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "trainjob-pytorch-simple-3f1a2",
            "creationTimestamp": "2026-01-01T00:05:01Z",
            "ownerReferences": [{"kind": "TrainJob", "name": "pytorch-simple", "uid": "u-1"}],
        },
        "spec": {"queueName": "user-queue", "podSets": [{"name": "node", "count": 2}]},
        "status": status,
    }


def test_the_workload_says_which_worker_runs_the_job() -> None:
    wl = workload(
        admission={"clusterQueue": "cluster-queue", "podSetAssignments": []},
        clusterName="worker-b",
        conditions=[{"type": "Admitted", "status": "True", "reason": "Admitted", "message": "ok"}],
        admissionChecks=[
            {"name": "multikueue", "state": "Ready", "message": 'The workload got reservation on "worker-b"'}
        ],
    )
    info = WorkloadInfo.from_dict(wl)
    assert (info.cluster_name, info.cluster_queue, info.queue, info.admitted) == (
        "worker-b",
        "cluster-queue",
        "user-queue",
        True,
    )
    assert info.where() == "worker-b"
    assert info.to_dict()["clusterName"] == "worker-b"


@pytest.mark.parametrize(
    ("status", "where"),
    [
        ({"nominatedClusterNames": ["worker-a", "worker-b"]}, "<pending on worker-a, worker-b>"),
        (
            {"admissionChecks": [{"name": "multikueue", "state": "Rejected", "message": "no"}]},
            "<rejected by multikueue>",
        ),
        ({"conditions": [{"type": "Admitted", "status": "True"}]}, "<this cluster>"),
        ({}, "<not dispatched>"),
    ],
)
def test_where_a_job_is_before_a_worker_takes_it(status: dict[str, Any], where: str) -> None:
    assert WorkloadInfo.from_dict(workload(**status)).where() == where


def test_the_owned_workload_is_found_by_uid_and_the_newest_wins() -> None:
    old, new, other = workload(), workload(), workload()
    new["metadata"] = {**new["metadata"], "name": "new", "creationTimestamp": "2026-01-01T00:06:00Z"}
    other["metadata"] = {**other["metadata"], "name": "other", "ownerReferences": [{"uid": "u-2"}]}
    assert owned_workload([old, new, other], "u-1") is new
    assert owned_workload([other], "u-1") is None


def job() -> TrainJob:
    return TrainJob(
        metadata=ObjectMeta(name="pytorch-simple", namespace="team-a", creation_timestamp="2026-01-01T00:05:00Z"),
        spec=TrainJobSpec(runtime_ref=RuntimeRef(name="torch-distributed"), managed_by=MK, suspend=True),
    )


def test_describe_shows_the_cluster_the_checks_and_their_messages() -> None:
    rejected = WorkloadInfo.from_dict(
        workload(
            admissionChecks=[
                {"name": "multikueue", "state": "Rejected", "message": "The owner is not managed by Kueue: x"}
            ],
            conditions=[{"type": "Evicted", "status": "True", "reason": "Deactivated", "message": "rejected: x"}],
        )
    )
    text = render(describe.describe_tables(job(), None, [], NOW, workload=rejected))
    for expected in (
        "Managed by:",
        MK,
        "Cluster:",
        "<rejected by multikueue>",
        "Admission checks:",
        "The owner is not managed by Kueue: x",
        "Workload conditions:",
        "rejected: x",
    ):
        assert expected in text, expected
    placed = WorkloadInfo.from_dict(workload(clusterName="worker-b"))
    head = render(describe.describe_tables(job(), None, [], NOW, workload=placed)[:1])
    assert [line.split() for line in head.splitlines() if line.startswith("Cluster:")] == [["Cluster:", "worker-b"]]
    data = describe.describe_data(job(), None, [], placed)
    assert (data["managedBy"], data["workload"]["clusterName"]) == (MK, "worker-b")
    # Without Kueue there is no Workload section at all.
    assert "Workload:" not in render(describe.describe_tables(job(), None, [], NOW))


def test_apply_multicluster_refuses_a_job_without_a_queue_before_contacting_a_cluster(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli.app,
        ["--kubeconfig", "/nonexistent/kubeconfig", "apply", "--multicluster", "-f", str(SAMPLES / "trainjob.yaml")],
    )
    assert result.exit_code == errors.EXIT_ERROR
    assert result.stderr.startswith("error: TrainJob pytorch-simple: multi-cluster dispatch needs a Kueue LocalQueue")
    path = tmp_path / "queued.yaml"
    doc = yaml.safe_load((SAMPLES / "trainjob.yaml").read_text())
    doc["metadata"]["labels"] = {QUEUE_LABEL: "user-queue"}
    path.write_text(yaml.safe_dump(doc))
    result = CliRunner().invoke(
        cli.app, ["--kubeconfig", "/nonexistent/kubeconfig", "apply", "--multicluster", "-f", str(path)]
    )
    # Marked fine: it got as far as connecting.
    assert result.stderr == "error: kubeconfig not found: /nonexistent/kubeconfig\n"
