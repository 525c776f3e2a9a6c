"""Pure glue between a TrainJob and the gang scheduler modules: the gang's input and its decorations.

* :func:`trainjob_gang_input` describes a TrainJob's gang: the pod sets that must run at the same
  time, its queue (in one documented order of precedence), and the runtime's podGroupPolicy.
* :func:`decorate` applies a plan's schedulerName, labels and annotations to desired Jobs.
* :func:`gang_conditions` folds a plan's conditions into the job's condition list.

Replicated jobs that others wait for with ``dependsOn: Complete`` (initializers) are not in the
gang: they finish before the rest start, so counting them would make the gang impossible to
satisfy (the deadlock of mpi-operator#608). They run without gang scheduling.
"""

from __future__ import annotations

import copy

from api.base import Condition
from api.trainer_v1alpha1 import TrainingRuntimeSpec, TrainJob
from trainer.builders.jobs import pod_count, pod_template
from trainer.builders.labels import REPLICATED_JOB_NAME
from trainer.gang.base import (
    COND_MISCONFIGURED,
    JSON,
    KUEUE_QUEUE_LABEL,
    VOLCANO_QUEUE_ANNOTATION,
    GangInput,
    GangPlan,
    PodSet,
    QueueChoice,
)


def completed_first(runtime: TrainingRuntimeSpec) -> set[str]:
    """Replicated jobs some other replicated job waits to be Complete."""
    rjobs = (runtime.template.spec.replicated_jobs if runtime.template.spec else None) or []
    return {d.name for r in rjobs for d in r.depends_on or [] if d.status == "Complete"}


def trainjob_pod_sets(job: TrainJob, runtime: TrainingRuntimeSpec) -> list[PodSet]:
    """The gang's pod sets: every replicated job except those completed first."""
    rjobs = (runtime.template.spec.replicated_jobs if runtime.template.spec else None) or []
    skip = completed_first(runtime)
    out = []
    for r in rjobs:
        if r.name in skip:
            continue
        spec = r.template.get("spec") or {}
        counted = pod_count(job, runtime, r)
        if counted is not None:
            pods = counted
        else:
            parallelism = int(spec.get("parallelism", 1))
            completions = spec.get("completions")
            pods = min(parallelism, int(completions)) if completions is not None else parallelism
        out.append(PodSet(name=r.name, jobs=r.replicas, pods_per_job=pods, template=pod_template(job, runtime, r)))
    return out


def resolve_queue(job: TrainJob, runtime: TrainingRuntimeSpec, gang: str) -> QueueChoice:
    """The TrainJob's queue. Precedence: the TrainJob's label ``kueue.x-k8s.io/queue-name`` or
    annotation ``scheduling.volcano.sh/queue-name`` (the one the running gang scheduler reads first),
    then the runtime template's annotation ``scheduling.volcano.sh/queue-name``; else none (the
    scheduler's default)."""
    labels = job.metadata.labels or {}
    annotations = job.metadata.annotations or {}
    candidates = []
    if KUEUE_QUEUE_LABEL in labels:
        candidates.append(QueueChoice(labels[KUEUE_QUEUE_LABEL], f"label {KUEUE_QUEUE_LABEL}", "kueue"))
    if VOLCANO_QUEUE_ANNOTATION in annotations:
        candidates.append(
            QueueChoice(annotations[VOLCANO_QUEUE_ANNOTATION], f"annotation {VOLCANO_QUEUE_ANNOTATION}", "volcano")
        )
    template_annotations = (runtime.template.metadata or {}).get("annotations") or {}
    if VOLCANO_QUEUE_ANNOTATION in template_annotations:
        candidates.append(
            QueueChoice(
                template_annotations[VOLCANO_QUEUE_ANNOTATION],
                f"runtime template annotation {VOLCANO_QUEUE_ANNOTATION}",
                "volcano",
            )
        )
    for c in candidates:
        if c.scheduler == gang:
            return c
    return candidates[0] if candidates else QueueChoice(None)


def trainjob_gang_input(
    obj: JSON, job: TrainJob, runtime: TrainingRuntimeSpec, gang: str, finished: bool, started: bool
) -> GangInput:
    """The gang description of a TrainJob (``obj`` is its JSON, for owner references)."""
    policy = runtime.pod_group_policy
    runtime_policy = None
    if policy is not None and policy.volcano is not None:
        runtime_policy = "volcano"
    elif policy is not None and policy.coscheduling is not None:
        runtime_policy = "coscheduling"
    return GangInput(
        owner=obj,
        pod_sets=trainjob_pod_sets(job, runtime),
        queue=resolve_queue(job, runtime, gang),
        schedule_timeout_seconds=(
            policy.coscheduling.schedule_timeout_seconds if policy and policy.coscheduling else None
        ),
        network_topology=(policy.volcano.network_topology if policy and policy.volcano else None),
        runtime_policy=runtime_policy,
        finished=finished,
        started=started,
    )


def decorate(jobs: list[JSON], plan: GangPlan, skip: set[str], set_label: str = REPLICATED_JOB_NAME) -> list[JSON]:
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
