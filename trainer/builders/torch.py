"""The torch ML policy: torchrun's ``PET_*`` environment.

Mirrors kubeflow/trainer ``pkg/runtime/framework/plugins/torch/torch.go`` (v2.3, with v2.0-v2.1's
string values of ``numProcPerNode``): PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK (the Job completion
index), PET_MASTER_ADDR (the first pod of the trainer's first Job, ``<trainjob>-<rjob>-0-0.<subdomain>``)
and PET_MASTER_PORT, on the trainer's ``node`` container and on every ``envInjection`` target.
"""

from __future__ import annotations

from api.trainer_v1alpha1 import TorchMLPolicySource, TrainJob
from trainer.builders.labels import COMPLETION_INDEX_ANNOTATION
from trainer.builders.merge import JSON, find_named, upsert_env
from trainer.resources import cpus_per_node, gpus_per_node

MASTER_PORT = 29500
"""``ContainerTrainerPort``: the rendezvous port of torch, JAX and XGBoost."""
RESERVED_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
TORCHTUNE_ENTRYPOINT = ["tune", "run"]
RANK_FROM_INDEX = {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"}}
"""``valueFrom`` of a rank: the pod's Job completion index."""


def num_proc_per_node(job: TrainJob, policy: TorchMLPolicySource, resources: JSON | None) -> str:
    """PET_NPROC_PER_NODE: ``trainer.numProcPerNode``, else the runtime's (v2.0-v2.1), else ``auto``;
    ``cpu``, and ``auto`` on a node without GPUs, become the CPUs per node (at least 1) of
    ``resources`` (the node's ``{requests, limits}``), as upstream's torch plugin resolves them;
    ``auto`` with GPUs and ``gpu`` are left to torchrun."""
    value = job.spec.trainer.num_proc_per_node if job.spec.trainer else None
    if value is None:
        value = policy.num_proc_per_node if policy.num_proc_per_node is not None else "auto"
    if value == "cpu" or (value == "auto" and gpus_per_node(resources) == 0):
        return str(max(1, cpus_per_node(resources)))
    return str(value)


def torch_env(
    job: TrainJob, policy: TorchMLPolicySource, master: str, num_nodes: int, resources: JSON | None
) -> list[JSON]:
    """The five ``PET_*`` variables; ``master``: the rank-0 pod's host name."""
    return [
        {"name": "PET_NNODES", "value": str(num_nodes)},
        {"name": "PET_NPROC_PER_NODE", "value": num_proc_per_node(job, policy, resources)},
        {"name": "PET_NODE_RANK", "valueFrom": RANK_FROM_INDEX},
        {"name": "PET_MASTER_ADDR", "value": master},
        {"name": "PET_MASTER_PORT", "value": str(MASTER_PORT)},
    ]


def inject(pod: JSON, container_names: list[str], env: list[JSON]) -> list[str]:
    """Upsert ``env`` into the named containers of ``pod`` (containers first, then init containers),
    in place, as ``envInjection`` does. Returns the names not found."""
    spec = pod.get("spec") or {}
    missing = []
    for name in container_names:
        container = find_named(spec.get("containers"), name) or find_named(spec.get("initContainers"), name)
        if container is None:
            missing.append(name)
        else:
            upsert_env(container, env)
    return missing


def add_rendezvous(pod: JSON, container: str, env: list[JSON]) -> None:
    """Upsert ``env`` and the rendezvous containerPort 29500 on ``container`` of ``pod``, in place;
    no-op when the pod has no such container."""
    node = find_named((pod.get("spec") or {}).get("containers"), container)
    if node is None:
        return
    upsert_env(node, env)
    ports = node.setdefault("ports", [])
    if not any(p.get("containerPort") == MASTER_PORT for p in ports):
        ports.append({"containerPort": MASTER_PORT, "protocol": "TCP"})
