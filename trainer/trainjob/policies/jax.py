"""The JAX ML policy: ``jax.distributed.initialize()``'s environment on the trainer's ``node`` container.

Mirrors kubeflow/trainer ``pkg/runtime/framework/plugins/jax/jax.go`` (v2.3): JAX_NUM_PROCESSES (the
number of nodes), JAX_PROCESS_ID (the pod's Job completion index) and JAX_COORDINATOR_ADDRESS
(``<rank-0 pod>:29500``). Admission does not reserve these names.
"""

from __future__ import annotations

from trainer.api.trainer_v1alpha1 import JAXMLPolicySource, TrainingRuntimeSpec
from trainer.framework.json_codec import JSON
from trainer.trainjob.policies.base import MASTER_PORT, RANK_FROM_INDEX, Expansion, Policy


def jax_env(master: str, num_nodes: int) -> list[JSON]:
    """The three ``JAX_*`` variables; ``master``: the rank-0 pod's host name."""
    return [
        {"name": "JAX_NUM_PROCESSES", "value": str(num_nodes)},
        {"name": "JAX_PROCESS_ID", "valueFrom": RANK_FROM_INDEX},
        {"name": "JAX_COORDINATOR_ADDRESS", "value": f"{master}:{MASTER_PORT}"},
    ]


class Jax(Policy):
    """``mlPolicy.jax``."""

    field = "jax"

    def source(self, runtime: TrainingRuntimeSpec) -> JAXMLPolicySource | None:
        return runtime.ml_policy.jax if runtime.ml_policy is not None else None

    def env(self, x: Expansion) -> list[JSON]:
        """:func:`jax_env` (``EnforceMLPolicy``)."""
        return jax_env(x.master, x.num_nodes or 1)


JAX = Jax()
