"""The run policy values that hold for a TrainJob: its active deadline and its TTL after it finished.

KEP-2899 value resolution (kubeflow/trainer#3824, #4052): the TrainJob's own field, else its runtime's
``runPolicy``; the TTL falls back to the runtime template's JobSet ``ttlSecondsAfterFinished``. Pure.
"""

from __future__ import annotations

from datetime import datetime

from trainer.api.trainer_v1alpha1 import COND_SUSPENDED, TrainingRuntimeSpec, TrainJob
from trainer.framework.clock import format_time
from trainer.jobs.conditions import TRAINJOB_TERMINAL, finished_at
from trainer.jobs.facts import seconds_left


def deadline_seconds(job: TrainJob, runtime: TrainingRuntimeSpec | None = None) -> int | None:
    """The ``activeDeadlineSeconds`` that holds for ``job``: its own, else its runtime's
    ``runPolicy.activeDeadlineSeconds`` (KEP-2899 value resolution, kubeflow/trainer#3824), else None."""
    if job.spec.active_deadline_seconds:
        return job.spec.active_deadline_seconds
    return runtime.run_policy.active_deadline_seconds if runtime and runtime.run_policy else None


def deadline_left(
    job: TrainJob, finished: bool, now: datetime, runtime: TrainingRuntimeSpec | None = None
) -> float | None:
    """As upstream ``reconcileDeadline`` (kubeflow/trainer ``pkg/controller/trainjob_controller.go``):
    one budget for the whole TrainJob (:func:`deadline_seconds`) from ``status.startTime`` (JobSet's
    KEP-1186: the last time it became active); before that is written, from its last resume (the
    ``Suspended`` condition turning False) or its creation, and from ``now`` when it starts in this very
    reconcile. Seconds left (<= 0: past), None when no deadline holds, or it is finished or suspended."""
    seconds = deadline_seconds(job, runtime)
    if not seconds or finished or job.spec.suspend or not job.metadata.creation_timestamp:
        return None
    start = job.status.start_time if job.status else None
    if not start:
        start = str(job.metadata.creation_timestamp)
        for c in (job.status.conditions if job.status else None) or []:
            if c.type == COND_SUSPENDED and c.last_transition_time:
                # Resumed (False), or suspended until now: it becomes active in this reconcile.
                start = c.last_transition_time if c.status == "False" else format_time(now)
    return seconds_left(seconds, start, now)


def ttl_of(job: TrainJob, runtime: TrainingRuntimeSpec) -> tuple[int | None, bool]:
    """The ``ttlSecondsAfterFinished`` that holds for ``job`` and whether it deletes the TrainJob itself:
    its own ``spec.ttlSecondsAfterFinished``, else its runtime's ``runPolicy.ttlSecondsAfterFinished``
    (both delete the TrainJob, KEP-2899, kubeflow/trainer#3824 and #4052), else the runtime template's
    JobSet ``ttlSecondsAfterFinished`` (deletes the children, the TrainJob stays, as JobSet deletes
    its JobSet); ``(None, False)`` when none is set."""
    if job.spec.ttl_seconds_after_finished is not None:
        return job.spec.ttl_seconds_after_finished, True
    if runtime.run_policy is not None and runtime.run_policy.ttl_seconds_after_finished is not None:
        return runtime.run_policy.ttl_seconds_after_finished, True
    return (runtime.template.spec.ttl_seconds_after_finished if runtime.template.spec else None), False


def ttl_left(job: TrainJob, runtime: TrainingRuntimeSpec, now: datetime) -> float | None:
    """Seconds until the TTL of :func:`ttl_of` deletes (<= 0: due), counted from the time ``job`` finished;
    None when no TTL holds or it has not finished."""
    ttl, _ = ttl_of(job, runtime)
    conditions = (job.status.conditions if job.status else None) or []
    return seconds_left(ttl, finished_at(conditions, TRAINJOB_TERMINAL), now)
