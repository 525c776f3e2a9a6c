"""A job's lifecycle as metrics read it, each rule once: its state (the ``state`` of
``kubeflow_trainer_jobs``), whether its status says it runs, and what one status write records
(admitted, finished, failed, restarted, refused), with the bounded reasons each metric is labelled by.

Everything here is pure: a job (JSON as the caches keep it) or its old and new status in, facts out.
:class:`~trainer.jobs.status_writer.StatusWriter` observes what :func:`admitted`, :func:`finish`,
:func:`restart_reason` and :func:`refusals` find after the write that records it (the first ready pod
is the kinds' ``info.pod_ready``, :func:`trainer.jobs.facts.pod_ready`), and
:func:`trainer.jobs.reconcile.declare` hands :func:`state_of` to
:meth:`~trainer.framework.metrics.Metrics.job_states`. The states are those the State column shows
(kubeflow/trainer#3963 for a TrainJob, mpi-operator's ``conditions[-1:]`` for an MPIJob), one set for
both kinds: an MPIJob's ``Succeeded`` is ``Complete``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from api.conditions import (
    COND_MISCONFIGURED,
    COND_REPLICA_FAILURE,
    COND_RESTARTING,
    COND_WAITING_FOR_GANG,
    REASON_CREATION_FAILED,
    REASON_FAILED_CREATE,
    REASON_RESOURCE_EXISTS,
)
from api.jobkinds import KindFacts
from api.kubeflow_v2beta1 import COND_RESTARTING as COND_MPI_RESTARTING
from api.trainer_v1alpha1 import COND_FAILED, COND_RUNNING, COND_SUSPENDED
from trainer.framework.clock import parse_time
from trainer.framework.json_codec import JSON
from trainer.framework.metrics import bounded
from trainer.jobs.conditions import finished, true_condition

CREATED, SUSPENDED, RUNNING, COMPLETE, FAILED = "Created", "Suspended", "Running", "Complete", "Failed"
"""The states (:data:`trainer.framework.metrics.JOB_STATES`)."""

FAILURE_REASONS = frozenset(
    {
        "FailedJobs",
        "ReachedMaxRestarts",
        "FailJobSetFailurePolicyAction",
        "DeadlineExceeded",
        "ResourcesCreationFailed",
        "InvalidSpec",
        "MPIJobFailed",
        "BackoffLimitExceeded",
        "MPIJobEvicted",
    }
)
"""The reasons of a ``Failed`` condition the failure counter names (TrainJob: kubeflow/trainer's and
JobSet's; MPIJob: mpi-operator's); any other is ``other``."""
RESTART_REASONS = frozenset({"DefaultFailurePolicy", "FailurePolicy", "MPIJobRestarting"})
"""The reasons a restart is counted by: JobSet's ``DefaultFailurePolicy``, ``FailurePolicy`` for every
``FailurePolicy_<rule>`` (the rule's name is the user's), mpi-operator's ``MPIJobRestarting``."""
REFUSAL_REASONS = frozenset({REASON_RESOURCE_EXISTS, REASON_CREATION_FAILED, REASON_FAILED_CREATE})
"""A child refused: its name taken (``ErrResourceExists``), the apiserver's refusal
(``TrainJobResourcesCreationFailed``), pods the Job controller cannot create (``FailedCreate``)."""
FAILURE_POLICY_PREFIX = "FailurePolicy_"
RESTART_CONDITIONS = (COND_RESTARTING, COND_MPI_RESTARTING)
"""The condition types that say a whole job restarts (JobSet's ``RestartingJobSet``, an MPIJob's ``Restarting``)."""


def _conditions(status: JSON) -> list[JSON]:
    return list(status.get("conditions") or [])


def running(status: JSON) -> bool:
    """Whether a job's status says it runs: a ``Running`` condition True (an MPIJob's; a TrainJob's under
    ``--trainjob-running-condition``) or a Job of it with every pod ready (a ``jobsStatus`` entry's
    ``ready``, a TrainJob's)."""
    if true_condition(_conditions(status), COND_RUNNING) is not None:
        return True
    return any(isinstance(e, dict) and int(e.get("ready") or 0) > 0 for e in status.get("jobsStatus") or [])


def state_of(obj: JSON, facts: KindFacts) -> str:
    """The state of job ``obj`` of kind ``facts``: ``Complete`` or ``Failed`` once finished, ``Suspended``
    while suspended (its spec, or a ``Suspended`` condition True), ``Running`` while :func:`running`,
    else ``Created``."""
    status = obj.get("status") or {}
    done = finished(_conditions(status), facts.terminal)
    if done is not None:
        return FAILED if done == COND_FAILED else COMPLETE
    if facts.run_policy.suspended(obj) or true_condition(_conditions(status), COND_SUSPENDED) is not None:
        return SUSPENDED
    return RUNNING if running(status) else CREATED


def admitted(obj: JSON, status: JSON, facts: KindFacts) -> bool:
    """Whether the job has started: not suspended, its gang not waiting, and a ``startTime`` written."""
    waiting = true_condition(_conditions(status), COND_WAITING_FOR_GANG) is not None
    return bool(status.get("startTime")) and not waiting and not facts.run_policy.suspended(obj)


def restart_reason(status: JSON) -> str:
    """The bounded reason of a restart the status records (:data:`RESTART_REASONS`, else ``other``)."""
    cond = true_condition(_conditions(status), *RESTART_CONDITIONS)
    reason = str((cond or {}).get("reason") or "")
    if reason.startswith(FAILURE_POLICY_PREFIX):
        reason = "FailurePolicy"
    return bounded(reason, RESTART_REASONS)


def refusals(old: JSON, new: JSON) -> list[tuple[str, str]]:
    """The refusals the write of ``new`` over ``old`` records: ``(reason, marker)`` for each
    ``Misconfigured`` or ``ReplicaFailure`` condition True in ``new`` with a reason of
    :data:`REFUSAL_REASONS` that ``old`` did not carry True with that reason; the marker (the old
    condition's transition time) tells a repeated write of the same transition from a new one."""
    out = []
    for type_ in (COND_MISCONFIGURED, COND_REPLICA_FAILURE):
        now = true_condition(_conditions(new), type_)
        if now is None or now.get("reason") not in REFUSAL_REASONS:
            continue
        before = next((c for c in _conditions(old) if c.get("type") == type_), None)
        if before is not None and before.get("status") == "True" and before.get("reason") == now.get("reason"):
            continue
        out.append((str(now["reason"]), str((before or {}).get("lastTransitionTime") or "")))
    return out


def seconds_between(start: object, end: object) -> float | None:
    """Seconds from RFC 3339 time ``start`` to ``end`` (each a string or a datetime), None when either
    is unset or unreadable, or ``end`` is before ``start``."""
    a = start if isinstance(start, datetime) else parse_time(start)
    b = end if isinstance(end, datetime) else parse_time(end)
    if a is None or b is None or b < a:
        return None
    return (b - a).total_seconds()


@dataclass(frozen=True)
class Finish:
    """A job's end as its status records it: ``result`` (``succeeded``/``failed``), the failure's bounded
    reason, and the seconds from ``startTime`` to ``completionTime`` (None when it never started)."""

    result: str
    reason: str
    run_seconds: float | None


def finish(old: JSON, new: JSON, facts: KindFacts) -> Finish | None:
    """The end the write of ``new`` over ``old`` records (a terminal condition turned True), or None."""
    done = finished(_conditions(new), facts.terminal)
    if done is None or finished(_conditions(old), facts.terminal) is not None:
        return None
    cond = true_condition(_conditions(new), done) or {}
    end = new.get("completionTime") or cond.get("lastTransitionTime")
    failed = done == COND_FAILED
    reason = bounded(str(cond.get("reason") or ""), FAILURE_REASONS) if failed else ""
    return Finish("failed" if failed else "succeeded", reason, seconds_between(new.get("startTime"), end))
