"""Which scheduler queue a job asks for: the one rule that admission, both reconcilers and the SDK use.

Precedence (first that is set wins):

1. an MPIJob's ``spec.runPolicy.schedulingPolicy.queue`` (kubeflow/mpi-operator
   ``pkg/apis/kubeflow/v2beta1/types.go``; neutral: every gang scheduler carries it);
2. the job's label ``kueue.x-k8s.io/queue-name`` (Kueue's convention, kubernetes-sigs/kueue
   ``pkg/controller/constants``) or annotation ``scheduling.volcano.sh/queue-name`` (Volcano's,
   volcano-sh/apis ``pkg/apis/scheduling/v1beta1/labels.go``). When both are set, the convention of
   the running gang scheduler wins; otherwise the Kueue label comes first;
3. for a TrainJob, the annotation ``scheduling.volcano.sh/queue-name`` on its runtime's JobSet
   template (``spec.template.metadata.annotations``), where upstream runtimes put a default queue;
4. none: the scheduler's default queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainer.api.jobkinds import MPIJOB
from trainer.api.labels import KUEUE_QUEUE_LABEL, VOLCANO_QUEUE_ANNOTATION


def _metadata(obj: dict[str, Any], key: str) -> dict[str, Any]:
    """The labels or annotations (``key``) of an object as JSON; empty when unset."""
    metadata = obj.get("metadata")
    value = metadata.get(key) if isinstance(metadata, Mapping) else None
    return value or {}


@dataclass(frozen=True)
class QueueChoice:
    """The queue a job asks for, where that came from, and whose convention named it."""

    name: str | None
    source: str = ""
    """The field that named it, as a path for messages (e.g. ``metadata.labels[kueue.x-k8s.io/queue-name]``)."""
    scheduler: str = ""
    """The convention: ``volcano``, ``kueue``, or "" (neutral, MPIJob ``schedulingPolicy.queue``)."""


NO_QUEUE = QueueChoice(None)
"""No queue named: the scheduler's default."""


def resolve_queue(obj: dict[str, Any], gang: str, runtime: dict[str, Any] | None = None) -> QueueChoice:
    """The queue of a TrainJob or MPIJob.

    ``obj`` is the job as JSON (its ``kind`` tells TrainJob from MPIJob), ``gang`` the running
    ``--gang-scheduler-name`` ("" when unknown, e.g. in the SDK), ``runtime`` the TrainJob's
    (Cluster)TrainingRuntime as JSON when known. Pure; never raises on missing fields.
    """
    spec = obj.get("spec") or {}
    if obj.get("kind") == MPIJOB.resource.kind:
        neutral = ((spec.get("runPolicy") or {}).get("schedulingPolicy") or {}).get("queue")
        if neutral:
            return QueueChoice(str(neutral), "spec.runPolicy.schedulingPolicy.queue", "")
    labels, annotations = _metadata(obj, "labels"), _metadata(obj, "annotations")
    candidates = []
    if labels.get(KUEUE_QUEUE_LABEL):
        candidates.append(QueueChoice(str(labels[KUEUE_QUEUE_LABEL]), f"metadata.labels[{KUEUE_QUEUE_LABEL}]", "kueue"))
    if annotations.get(VOLCANO_QUEUE_ANNOTATION):
        candidates.append(
            QueueChoice(
                str(annotations[VOLCANO_QUEUE_ANNOTATION]),
                f"metadata.annotations[{VOLCANO_QUEUE_ANNOTATION}]",
                "volcano",
            )
        )
    for choice in candidates:
        if choice.scheduler == gang:
            return choice
    if candidates:
        return candidates[0]
    template = ((runtime or {}).get("spec") or {}).get("template") or {}
    default = _metadata(template, "annotations").get(VOLCANO_QUEUE_ANNOTATION)
    if default:
        where = f"spec.template.metadata.annotations[{VOLCANO_QUEUE_ANNOTATION}] of the runtime"
        return QueueChoice(str(default), where, "volcano")
    return NO_QUEUE
