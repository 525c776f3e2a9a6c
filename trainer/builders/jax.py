"""The JAX ML policy: ``jax.distributed.initialize()``'s environment on the trainer's ``node`` container.

Mirrors kubeflow/trainer ``pkg/runtime/framework/plugins/jax/jax.go`` (v2.3): JAX_NUM_PROCESSES (the
number of nodes), JAX_PROCESS_ID (the pod's Job completion index) and JAX_COORDINATOR_ADDRESS
(``<rank-0 pod>:29500``).
"""

from __future__ import annotations

from trainer.builders.merge import JSON
from trainer.builders.torch import MASTER_PORT, RANK_FROM_INDEX

RESERVED_ENV = ("JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "JAX_COORDINATOR_ADDRESS")


def jax_env(master: str, num_nodes: int) -> list[JSON]:
    """The three ``JAX_*`` variables; ``master``: the rank-0 pod's host name."""
    return [
        {"name": "JAX_NUM_PROCESSES", "value": str(num_nodes)},
        {"name": "JAX_PROCESS_ID", "valueFrom": RANK_FROM_INDEX},
        {"name": "JAX_COORDINATOR_ADDRESS", "value": f"{master}:{MASTER_PORT}"},
    ]
