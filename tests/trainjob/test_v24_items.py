"""Trainer v2.4 and master items on a TrainJob's Jobs: a TrainJob of 0 nodes (kubeflow/trainer#3809:
``numNodes`` ``Minimum=0``, as JobSet's replicas) runs a trainer Job of no pod, which completes, and so does
the TrainJob; ``spec.trainer.env`` reaches the MPI workers, not only the launcher (kubeflow/trainer#3931)."""

from __future__ import annotations

import copy

from tests.harness import World, complete_condition, env_of, job
from trainer.api.kinds import CLUSTER_TRAINING_RUNTIMES, TRAINJOBS


def _sized(job_obj: dict[str, object]) -> tuple[object, object]:
    spec = job_obj["spec"]
    assert isinstance(spec, dict)
    return spec.get("parallelism"), spec.get("completions")


async def test_a_trainjob_of_zero_nodes_runs_no_pod_and_completes() -> None:
    w = World("torch", "none")
    tj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    tj["spec"]["trainer"]["numNodes"] = 0
    w.kube.put(tj)
    await w.settle()
    assert w.condition("Failed") is None and w.condition("Misconfigured") is None, w.obj.get("status")
    node = job(w, "node")
    assert _sized(node) == (0, 0), "the trainer's Job runs no pod"
    done = copy.deepcopy(node)
    done["status"] = {"succeeded": 0, "conditions": [complete_condition()]}  # the Job controller, at once
    w.kube.put(done)
    await w.settle()
    complete = w.condition("Complete")
    assert complete is not None and complete["status"] == "True", w.obj.get("status")


async def test_a_runtime_of_zero_nodes_sizes_the_trainer_job_to_no_pod() -> None:
    w = World("torch", "none")
    (key,) = [k for (res, k) in w.kube.objects if res == CLUSTER_TRAINING_RUNTIMES]
    runtime = copy.deepcopy(w.kube.objects[(CLUSTER_TRAINING_RUNTIMES, key)])
    runtime["spec"]["mlPolicy"]["numNodes"] = 0
    w.kube.put(runtime)
    tj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    del tj["spec"]["trainer"]["numNodes"]
    w.kube.put(tj)
    await w.settle()
    assert _sized(job(w, "node")) == (0, 0), "0 is not read as unset (1)"


async def test_the_trainer_env_reaches_the_mpi_workers_as_well_as_the_launcher() -> None:
    w = World("deepspeed-mpi", "none")
    tj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    tj["spec"]["trainer"]["env"] = [
        {"name": "MODEL", "value": "tiny"},
        {"name": "R", "value": "mine"},
    ]
    w.kube.put(tj)
    await w.settle()
    launcher, node = env_of(job(w, "launcher")), env_of(job(w, "node"))
    assert launcher["MODEL"] == "tiny" and node["MODEL"] == "tiny", node
    assert node["R"] == "mine"
    assert not any(k.startswith(("OMPI_MCA_", "PRTE_MCA_")) for k in node), "the workers run sshd, not mpirun"
