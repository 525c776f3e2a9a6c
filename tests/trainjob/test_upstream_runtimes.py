"""Upstream Trainer v2.3's runtimes (config/samples/upstream) expand as upstream's plugins would:
nothing of them is dropped by the models, and a TrainJob on each gets the environment, labels,
hostfile and claims that kubeflow/trainer ``pkg/runtime/framework/plugins`` and JobSet set."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.conftest import SAMPLES, info
from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainJob
from trainer.framework.json_codec import JSON
from trainer.framework.merge import find_named
from trainer.trainjob.children import build_children
from trainer.trainjob.spec.volume_claims import claims
from trainer.trainjob.validation import runtime_errors, trainjob_errors

UPSTREAM = sorted(p.name for p in (SAMPLES / "upstream").glob("*.yaml") if p.name != "kustomization.yaml")
RANK = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}


def runtime(name: str) -> ClusterTrainingRuntime:
    return ClusterTrainingRuntime.model_validate(yaml.safe_load((SAMPLES / "upstream" / name).read_text()))


def trainjob(runtime_name: str, nodes: int = 2, **trainer: Any) -> TrainJob:
    return TrainJob.model_validate(
        {
            "metadata": {"name": "tj", "namespace": "ns", "uid": "u-1"},
            "spec": {"runtimeRef": {"name": runtime_name}, "trainer": {"numNodes": nodes, **trainer}},
        }
    )


def contains(big: Any, small: Any) -> bool:
    """``small`` is ``big`` with at most defaults added (every key and value of ``small`` is in ``big``)."""
    if isinstance(small, dict):
        return isinstance(big, dict) and all(k in big and contains(big[k], v) for k, v in small.items())
    if isinstance(small, list):
        return isinstance(big, list) and len(big) == len(small) and all(map(contains, big, small))
    return bool(big == small)


def node_env(job: JSON) -> dict[str, Any]:
    node = find_named(job["spec"]["template"]["spec"]["containers"], "node")
    assert node is not None
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in node.get("env") or []}


def children(rt: ClusterTrainingRuntime, tj: TrainJob, observed: list[JSON] | None = None) -> dict[str, JSON]:
    built = build_children(info(tj, rt, observed or []), suspend=False)
    return {j["metadata"]["name"]: j for j in built.jobs} | {cm["metadata"]["name"]: cm for cm in built.config_maps}


@pytest.mark.parametrize("name", UPSTREAM)
def test_every_field_of_the_upstream_runtime_is_kept_and_valid(name: str) -> None:
    raw = yaml.safe_load((SAMPLES / "upstream" / name).read_text())
    rt = runtime(name)
    assert contains(rt.to_dict(), raw), "a field of the upstream runtime was dropped"
    assert runtime_errors(rt.spec) == []
    assert trainjob_errors(info(trainjob(rt.metadata.name or ""), rt).info) == []


def test_torch_distributed_sets_torchruns_environment() -> None:
    rt = runtime("torch-distributed.yaml")
    jobs = children(rt, trainjob("torch-distributed", resourcesPerNode={"requests": {"cpu": "1500m"}}))
    env = node_env(jobs["tj-node-0"])
    assert env == {
        "PET_NNODES": "2",
        "PET_NPROC_PER_NODE": "2",  # auto without GPUs: the CPU request rounded up
        "PET_NODE_RANK": RANK,
        "PET_MASTER_ADDR": "tj-node-0-0.tj",
        "PET_MASTER_PORT": "29500",
    }
    assert jobs["tj-node-0"]["spec"]["parallelism"] == jobs["tj-node-0"]["spec"]["completions"] == 2


def test_num_proc_per_node_auto_with_gpus_is_left_to_torchrun_and_an_int_wins() -> None:
    rt = runtime("torch-distributed.yaml")
    gpu = {"limits": {"nvidia.com/gpu": 4}}
    assert node_env(children(rt, trainjob("t", resourcesPerNode=gpu))["tj-node-0"])["PET_NPROC_PER_NODE"] == "auto"
    fixed = trainjob("t", resourcesPerNode=gpu, numProcPerNode=3)
    assert node_env(children(rt, fixed)["tj-node-0"])["PET_NPROC_PER_NODE"] == "3"
    cpu = trainjob("t", resourcesPerNode={"limits": {"cpu": "3"}}, numProcPerNode="cpu")
    assert node_env(children(rt, cpu)["tj-node-0"])["PET_NPROC_PER_NODE"] == "3"


def test_resources_per_node_merge_into_the_runtimes_key_by_key() -> None:
    rt = runtime("torchtune-llama3.2-1b.yaml")
    tj = trainjob("torchtune-llama3.2-1b", 1, resourcesPerNode={"limits": {"memory": "8Gi"}})
    inits = [done("dataset-initializer"), done("model-initializer")]
    node = find_named(children(rt, tj, inits)["tj-node-0"]["spec"]["template"]["spec"]["containers"], "node")
    assert node is not None
    assert node["resources"]["limits"] == {"nvidia.com/gpu": 2, "memory": "8Gi"}


def test_jax_distributed_sets_the_coordinator_environment() -> None:
    env = node_env(children(runtime("jax-distributed.yaml"), trainjob("jax-distributed", 3))["tj-node-0"])
    assert env == {
        "JAX_NUM_PROCESSES": "3",
        "JAX_PROCESS_ID": RANK,
        "JAX_COORDINATOR_ADDRESS": "tj-node-0-0.tj:29500",
    }


def test_xgboost_distributed_sets_the_tracker_environment() -> None:
    rt = runtime("xgboost-distributed.yaml")
    env = node_env(children(rt, trainjob("xgboost-distributed", 3))["tj-node-0"])
    assert env == {
        "DMLC_TRACKER_URI": "tj-node-0-0.tj",
        "DMLC_TRACKER_PORT": "29500",
        "DMLC_TASK_ID": RANK,
        "DMLC_NUM_WORKER": "3",
    }
    gpus = trainjob("xgboost-distributed", 3, resourcesPerNode={"limits": {"nvidia.com/gpu": 2}})
    assert node_env(children(rt, gpus)["tj-node-0"])["DMLC_NUM_WORKER"] == "6"


@pytest.mark.parametrize("name", ["deepspeed-distributed.yaml", "mlx-distributed.yaml"])
def test_mpi_runtimes_list_every_node_in_runtime_order_and_mount_the_keys(name: str) -> None:
    rt = runtime(name)
    ready = {"status": {"ready": 2, "active": 2}, "spec": {"parallelism": 2, "completions": 2}}
    node_job = {"metadata": {"name": "tj-node-0", "labels": {"jobset.sigs.k8s.io/replicatedjob-name": "node"}}}
    jobs = children(rt, trainjob(rt.metadata.name or "", 3), [node_job | ready])
    assert jobs["tj-mpi-hostfile"]["data"]["hostfile"] == (
        "tj-node-0-0.tj slots=1\ntj-node-0-1.tj slots=1\ntj-launcher-0-0.tj slots=1\n"
    )
    assert jobs["tj-node-0"]["spec"]["parallelism"] == 2  # runLauncherAsNode: numNodes - 1
    launcher = jobs["tj-launcher-0"]["spec"]["template"]["spec"]
    node = find_named(launcher["containers"], "node")
    assert node is not None
    mounts = {m["mountPath"] for m in node["volumeMounts"]}
    assert {"/home/mpiuser/.ssh", "/etc/mpi"} <= mounts
    env = node_env(jobs["tj-launcher-0"])
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert env["OMPI_MCA_orte_set_default_slots"] == "1"


def test_the_launcher_waits_for_the_nodes_to_be_ready() -> None:
    built = build_children(info(trainjob("deepspeed-distributed", 3), runtime("deepspeed-distributed.yaml")), False)
    assert [j["metadata"]["name"] for j in built.jobs] == ["tj-node-0"]
    assert "'node' to be Ready (0/1 Jobs)" in built.waiting["launcher"]


@pytest.mark.parametrize("name", ["torchtune-llama3.2-1b.yaml", "torchtune-qwen2.5-1.5b.yaml"])
def test_torchtune_runtimes_share_one_claim_and_start_the_trainer_after_the_initializers(name: str) -> None:
    rt = runtime(name)
    tj = trainjob(rt.metadata.name or "", 1)
    assert rt.spec.template.spec is not None
    owner = tj.to_dict() | {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob"}
    (claim,) = claims(owner, rt.spec.template.spec.volume_claim_policies or [])
    assert claim["metadata"]["name"] == "initializer-tj"
    assert claim["spec"]["resources"]["requests"]["storage"] == "20Gi"
    assert claim["metadata"]["ownerReferences"][0]["name"] == "tj"  # whenDeleted defaults to Delete
    built = build_children(info(tj, rt), False)
    assert sorted(j["metadata"]["name"] for j in built.jobs) == ["tj-dataset-initializer-0", "tj-model-initializer-0"]
    for job in built.jobs:
        volumes = job["spec"]["template"]["spec"]["volumes"]
        assert {"name": "initializer", "persistentVolumeClaim": {"claimName": "initializer-tj"}} in volumes
    env = node_env(children(rt, tj, [done("dataset-initializer"), done("model-initializer")])["tj-node-0"])
    assert env["PET_NPROC_PER_NODE"] == "auto"  # two GPUs: torchrun counts them
    assert env["PET_MASTER_ADDR"] == "tj-node-0-0.tj"


def done(rjob: str) -> JSON:
    return {
        "metadata": {"name": f"tj-{rjob}-0", "labels": {"jobset.sigs.k8s.io/replicatedjob-name": rjob}},
        "status": {"conditions": [{"type": "Complete", "status": "True"}]},
    }


def test_jobset_labels_on_jobs_and_pods() -> None:
    job = children(runtime("torch-distributed.yaml"), trainjob("torch-distributed"))["tj-node-0"]
    for meta in (job["metadata"], job["spec"]["template"]["metadata"]):
        for where in ("labels", "annotations"):
            got = meta[where]
            assert got["jobset.sigs.k8s.io/jobset-uid"] == "u-1"
            assert got["jobset.sigs.k8s.io/group-name"] == "default"
            assert got["jobset.sigs.k8s.io/group-replicas"] == got["jobset.sigs.k8s.io/global-replicas"] == "1"
            assert got["jobset.sigs.k8s.io/job-group-index"] == got["jobset.sigs.k8s.io/job-global-index"] == "0"
            assert len(got["jobset.sigs.k8s.io/job-key"]) == 40
