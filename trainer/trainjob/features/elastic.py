"""The status fields of a TrainJob's ``/scale`` subresource and of its elastic bounds, pure.

The TrainJob CRD serves ``/scale`` (``kubectl scale trainjob/<name> --replicas=N``, a
HorizontalPodAutoscaler's ``scaleTargetRef``): ``spec.trainer.numNodes`` is its ``spec.replicas``,
``status.replicas`` (the trainer's active pods) its ``status.replicas`` and ``status.selector`` (the
trainer's pods, as a label selector string) the selector an HPA reads pod metrics with; both are written
for an elastic TrainJob only (another one may be scaled while suspended: a resize). It also reports
``status.elastic`` (its runtime's ``minNodes`` and ``maxNodes``), which the CRD's
rules read to admit a change of ``numNodes`` while it runs, within those bounds, from any client,
``/scale`` included (a webhook sees a ``Scale``, not the TrainJob). These fields are this operator's, not
upstream's (kubeflow/trainer KEP-2903 proposes no ``/scale``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from api.labels import JOBSET_NAME, REPLICATED_JOB_NAME
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta

if TYPE_CHECKING:
    from trainer.trainjob.runtime.info import RuntimeInfo


def scale_status(info: RuntimeInfo) -> JSON:
    """``{replicas, selector, elastic}`` of an elastic TrainJob's status (each None for a TrainJob that is
    not elastic or has no trainer): ``replicas``, the active pods of the trainer's Jobs (0 when none);
    ``selector``, ``jobset-name=<trainjob>,replicatedjob-name=<trainer>``; ``elastic``, ``{minNodes,
    maxNodes}`` of the runtime's elastic policy."""
    trainer, policy = info.trainer, info.elastic
    if trainer is None or policy is None or policy.max_nodes is None:
        return {"replicas": None, "selector": None, "elastic": None}
    active = sum(
        int((job.get("status") or {}).get("active") or 0)
        for job in info.observed
        if meta(job).labels.get(REPLICATED_JOB_NAME) == trainer
    )
    bounds = {"minNodes": policy.lowest, "maxNodes": policy.max_nodes}
    return {
        "replicas": active,
        "selector": f"{JOBSET_NAME}={info.job.metadata.name},{REPLICATED_JOB_NAME}={trainer}",
        "elastic": bounds,
    }
