"""Pure glue between a gang plan and a job's children (TrainJob or MPIJob).

* :func:`decorate` applies a plan's schedulerName, labels and annotations to desired Jobs.
* :func:`gang_conditions` folds a plan's conditions into the job's condition list.

The gang's input is built once per reconcile: :meth:`trainer.runtime_info.RuntimeInfo.gang_input`
for a TrainJob, :func:`trainer.controllers.mpijob.mpijob_gang_input` for an MPIJob.
"""

from __future__ import annotations

import copy

from api.base import Condition
from trainer.builders.labels import REPLICATED_JOB_NAME
from trainer.gang.base import COND_MISCONFIGURED, JSON, GangPlan


def decorate(
    jobs: list[JSON], plan: GangPlan, skip: frozenset[str] | set[str], set_label: str = REPLICATED_JOB_NAME
) -> list[JSON]:
    """Copies of ``jobs`` whose pod templates carry the plan's schedulerName (where unset), labels
    and annotations. A Job's pod set is named by its label ``set_label``; Jobs of sets in ``skip``
    (not in the gang) are left as they are."""
    out = []
    for job in jobs:
        rjob = job["metadata"]["labels"].get(set_label, "")
        if rjob in skip:
            out.append(job)
            continue
        job = copy.deepcopy(job)
        pod = job["spec"]["template"]
        meta = pod.setdefault("metadata", {})
        if plan.pod_labels:
            meta["labels"] = {**(meta.get("labels") or {}), **plan.pod_labels}
        extra = {**plan.pod_annotations.get("*", {}), **plan.pod_annotations.get(rjob, {})}
        if extra:
            meta["annotations"] = {**(meta.get("annotations") or {}), **extra}
        spec = pod.setdefault("spec", {})
        if plan.scheduler_name and not spec.get("schedulerName"):
            spec["schedulerName"] = plan.scheduler_name
        out.append(job)
    return out


def gang_conditions(plan: GangPlan) -> list[Condition]:
    """The plan's conditions, with every ``Misconfigured`` problem folded into one condition (reason of
    the first, messages of all)."""
    problems = [c for c in plan.conditions if c.type == COND_MISCONFIGURED]
    others = [c for c in plan.conditions if c.type != COND_MISCONFIGURED]
    if not problems:
        return others
    merged = problems[0].model_copy(update={"message": "; ".join(dict.fromkeys(p.message for p in problems))})
    return [merged, *others]
