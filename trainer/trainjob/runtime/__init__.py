"""A TrainJob on its runtime: which runtime (:mod:`.snapshot`), its shape (:mod:`.shape`), its pod
templates (:mod:`.pod_template`) under its ML policy (:mod:`.policies`), all gathered once per
reconcile in a :class:`~trainer.trainjob.runtime.info.RuntimeInfo` by :func:`runtime_info` (:mod:`.expand`).

Mirrors kubeflow/trainer ``pkg/runtime`` (``runtime.go``'s ``Info``, ``core/trainingruntime.go`` and
``framework/plugins``).
"""

from __future__ import annotations

from trainer.trainjob.runtime.expand import runtime_info
from trainer.trainjob.runtime.info import RuntimeInfo
from trainer.trainjob.runtime.snapshot import (
    SNAPSHOT_SUFFIX,
    runtime_of_snapshot,
    runtime_ref,
    snapshot_config_map,
    snapshot_name,
)

__all__ = [
    "SNAPSHOT_SUFFIX",
    "RuntimeInfo",
    "runtime_info",
    "runtime_of_snapshot",
    "runtime_ref",
    "snapshot_config_map",
    "snapshot_name",
]
