"""The XGBoost ML policy: the collective's (Rabit) tracker environment on the trainer's ``node`` container.

Mirrors kubeflow/trainer ``pkg/runtime/framework/plugins/xgboost/xgboost.go`` (v2.3):
DMLC_TRACKER_URI (the rank-0 pod), DMLC_TRACKER_PORT (29500), DMLC_TASK_ID (the pod's Job completion
index) and DMLC_NUM_WORKER (nodes x GPUs per node, or nodes when there are no GPUs); the four names
are reserved.
"""

from __future__ import annotations

from trainer.api.trainer_v1alpha1 import TrainingRuntimeSpec, XGBoostMLPolicySource
from trainer.framework.json_codec import JSON
from trainer.trainjob.policies.base import MASTER_PORT, RANK_FROM_INDEX, Expansion, Policy


def xgboost_env(master: str, num_nodes: int, gpus: int) -> list[JSON]:
    """The four ``DMLC_*`` variables; ``master``: the rank-0 pod's host name; ``gpus``: one node's GPUs
    (:attr:`~trainer.trainjob.policies.base.Expansion.gpus`, extended or claimed through DRA)."""
    workers = num_nodes * (gpus or 1)
    return [
        {"name": "DMLC_TRACKER_URI", "value": master},
        {"name": "DMLC_TRACKER_PORT", "value": str(MASTER_PORT)},
        {"name": "DMLC_TASK_ID", "valueFrom": RANK_FROM_INDEX},
        {"name": "DMLC_NUM_WORKER", "value": str(workers)},
    ]


class XGBoost(Policy):
    """``mlPolicy.xgboost``."""

    field = "xgboost"
    reserved_env = ("DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER")

    def source(self, runtime: TrainingRuntimeSpec) -> XGBoostMLPolicySource | None:
        return runtime.ml_policy.xgboost if runtime.ml_policy is not None else None

    def env(self, x: Expansion) -> list[JSON]:
        """:func:`xgboost_env` (``EnforceMLPolicy``)."""
        return xgboost_env(x.master, x.num_nodes or 1, x.gpus)


XGBOOST = XGBoost()
