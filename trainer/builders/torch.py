"""The torch ML policy: torchrun's ``PET_*`` environment on the trainer's ``node`` container.

Mirrors kubeflow/trainer ``pkg/runtime/framework/plugins/torch/torch.go`` (v2.0): PET_NNODES,
PET_NPROC_PER_NODE, PET_NODE_RANK (the Job completion index), PET_MASTER_ADDR (the first pod of
the trainer's first Job, ``<trainjob>-<rjob>-0-0.<subdomain>``) and PET_MASTER_PORT with a
matching containerPort.
"""

from __future__ import annotations

from api.trainer_v1alpha1 import NODE_CONTAINER, TorchMLPolicySource, TrainJob
from trainer.builders.labels import COMPLETION_INDEX_ANNOTATION
from trainer.builders.merge import JSON, find_named, upsert_env

MASTER_PORT = 29500
RESERVED_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")


def num_proc_per_node(job: TrainJob, policy: TorchMLPolicySource) -> str:
    """The value of PET_NPROC_PER_NODE: the TrainJob's ``trainer.numProcPerNode`` if set, else the
    runtime's (default ``auto``). torchrun itself resolves ``auto``, ``cpu`` and ``gpu``."""
    value = job.spec.trainer.num_proc_per_node if job.spec.trainer else None
    if value is None:
        value = policy.num_proc_per_node if policy.num_proc_per_node is not None else "auto"
    return str(value)


def apply_torch(
    job: TrainJob, policy: TorchMLPolicySource, rjob: str, subdomain: str, num_nodes: int, pod: JSON
) -> None:
    """Add the torchrun environment and port to the ``node`` container of ``pod`` (in place)."""
    node = find_named(pod.get("spec", {}).get("containers"), NODE_CONTAINER)
    if node is None:
        return
    name = job.metadata.name
    upsert_env(
        node,
        [
            {"name": "PET_NNODES", "value": str(num_nodes)},
            {"name": "PET_NPROC_PER_NODE", "value": num_proc_per_node(job, policy)},
            {
                "name": "PET_NODE_RANK",
                "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"}},
            },
            {"name": "PET_MASTER_ADDR", "value": f"{name}-{rjob}-0-0.{subdomain}"},
            {"name": "PET_MASTER_PORT", "value": str(MASTER_PORT)},
        ],
    )
    ports = node.setdefault("ports", [])
    if not any(p.get("containerPort") == MASTER_PORT for p in ports):
        ports.append({"containerPort": MASTER_PORT, "protocol": "TCP"})
