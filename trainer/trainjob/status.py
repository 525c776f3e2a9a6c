"""A TrainJob's status, pure: its conditions and the fields written with them.

``jobsStatus`` is the attempt's counts (:func:`trainer.trainjob.runtime.attempt.jobs_status`, as JobSet's
``calculateReplicatedJobStatuses``, since Kueue reads them). Conditions follow kubeflow/trainer
``trainjob_types.go`` (Suspended/Resumed, Complete, Failed) plus ``Running`` and ``RuntimeNotFound``, and
JobSet's ``RestartingJobSet`` while the whole group restarts (see :func:`restarting_condition`).
"""

from __future__ import annotations

from trainer.api.base import Condition
from trainer.api.conditions import COND_RESTARTING, COND_RUNTIME_NOT_FOUND, is_true
from trainer.api.trainer_v1alpha1 import (
    COND_COMPLETE,
    COND_FAILED,
    COND_RUNNING,
    COND_SUSPENDED,
    REASON_DEADLINE_EXCEEDED,
    REASON_RESUMED,
    REASON_SUSPENDED,
    TrainJobStatus,
)
from trainer.framework.json_codec import JSON
from trainer.jobs.conditions import TRAINJOB_TERMINAL, finished
from trainer.trainjob.runtime.view import TrainJobView

__all__ = [
    "deadline_exceeded",
    "desired_conditions",
    "finished_condition",
    "job_restarts_status",
    "restarting_condition",
    "runtime_not_found",
    "status",
    "times",
]

REASON_JOBS_READY, MESSAGE_JOBS_READY = "JobsReady", "all jobs are ready"
REASON_JOBSET_FAILED, MESSAGE_JOBSET_FAILED = "JobSetFailed", "jobset failed"
REASON_JOBSET_COMPLETED, MESSAGE_JOBSET_COMPLETED = "JobSetCompleted", "jobset completed successfully"
REASON_JOBSET_SUSPENDED, MESSAGE_JOBSET_SUSPENDED = "JobSetSuspended", "jobset is suspended"


def job_restarts_status(view: TrainJobView) -> list[JSON] | None:
    """``status.replicatedJobsStatus``: per replicated job (runtime order) with a Job restarted alone,
    ``{name, jobRestarts, jobRestartsCountTowardsMax}`` as JobSet keeps them (lists of ``replicas``
    entries, by Job index; the second only once a counted restart was made), with the restart the
    failed Jobs call for now added; None when no Job was ever restarted alone."""
    info, attempt = view.info, view.attempt
    restarts = {k: list(v) for k, v in attempt.job_restarts.items()}
    counted = {k: list(v) for k, v in attempt.job_restarts_counted.items()}
    d = attempt.decision
    if d is not None and not d.fail and d.rjob is not None and d.index is not None:
        replicas = next((r.replicas for r in info.rjobs if r.name == d.rjob), d.index + 1)
        for counts, add in ((restarts, 1), (counted, int(d.counted))):
            row = counts.setdefault(d.rjob, [])
            row += [0] * (max(replicas, d.index + 1) - len(row))
            row[d.index] += add
    out: list[JSON] = []
    for r in info.rjobs:
        entry: JSON = {"name": r.name}
        if any(restarts.get(r.name, [])):
            entry["jobRestarts"] = restarts[r.name]
        if any(counted.get(r.name, [])):
            entry["jobRestartsCountTowardsMax"] = counted[r.name]
        if len(entry) > 1:
            out.append(entry)
    return out or None


def restarting_condition(view: TrainJobView, have: dict[str, Condition], keep_false: bool) -> Condition | None:
    """JobSet's ``RestartingJobSet`` (kubernetes-sigs/jobset ``pkg/controllers/failure_policy.go``,
    ``jobset_controller.go``): True, with reason ``FailurePolicy_<rule>`` or ``DefaultFailurePolicy``
    and the restart's message, from a restart of the whole group until every Job is ready again
    (ready or succeeded Jobs equal the replicas). Then False (``JobsReady``: ``all jobs are ready``, or
    ``JobSetSuspended``) when ``keep_false``; else the condition goes. A Job restarted alone sets none,
    as JobSet sets none."""
    d = view.attempt.decision
    if d is not None and d.restarts_group:
        return Condition(type=COND_RESTARTING, status="True", reason=d.restarting_reason, message=d.message)
    cur = have.get(COND_RESTARTING)
    if cur is None or not is_true([cur], COND_RESTARTING):
        return cur if keep_false else None
    if view.info.suspended:
        done = (REASON_JOBSET_SUSPENDED, MESSAGE_JOBSET_SUSPENDED)
    elif sum(s.ready + s.succeeded for s in view.attempt.statuses) >= sum(r.replicas for r in view.info.rjobs):
        done = (REASON_JOBS_READY, MESSAGE_JOBS_READY)
    else:
        return cur
    return Condition(type=COND_RESTARTING, status="False", reason=done[0], message=done[1]) if keep_false else None


def deadline_exceeded(seconds: int, where: str = "spec.activeDeadlineSeconds") -> Condition:
    """``Failed`` with reason ``DeadlineExceeded``: the TrainJob ran past ``activeDeadlineSeconds``
    (``seconds``, set at ``where``: the TrainJob's field or its runtime's ``runPolicy``)."""
    return Condition(
        type=COND_FAILED,
        status="True",
        reason=REASON_DEADLINE_EXCEEDED,
        message=f"TrainJob exceeded its active deadline of {seconds} seconds ({where})",
    )


def finished_condition(view: TrainJobView) -> Condition | None:
    """The terminal condition the Jobs call for (Failed wins over Complete), or None. Completion
    follows JobSet's ``successPolicy`` (kubernetes-sigs/jobset ``pkg/controllers/jobset_controller.go``):
    operator ``All`` (default) or ``Any`` over ``targetReplicatedJobs`` (default: every one). A
    failed Job decides through the runtime's failurePolicy (:mod:`trainer.trainjob.spec.failure_policy`); the
    TrainJob's own ``activeDeadlineSeconds`` fails it with ``DeadlineExceeded``."""
    info, attempt = view.info, view.attempt
    if attempt.deadline_left is not None and attempt.deadline_left <= 0:
        own = bool(info.job.spec.active_deadline_seconds)
        where = "spec.activeDeadlineSeconds" if own else "runPolicy.activeDeadlineSeconds of its runtime"
        return deadline_exceeded(int(info.deadline_seconds or 0), where)
    decision = attempt.decision
    if decision is not None:
        # A failed Job: the failure policy fails the TrainJob, or restarts it (then it is neither).
        if not decision.fail:
            return None
        return Condition(type=COND_FAILED, status="True", reason=decision.reason, message=decision.message)
    policy = info.template.success_policy
    rjobs = info.rjobs
    targets = set((policy.target_replicated_jobs if policy else None) or [r.name for r in rjobs])
    by_name = {s.name: s for s in attempt.statuses}
    replicas = {r.name: r.replicas for r in rjobs if r.name in targets}
    if not replicas:
        return None
    if policy is not None and policy.operator == "Any":
        done = any(by_name[n].succeeded > 0 for n in replicas)
    else:
        done = all(by_name[n].succeeded >= want for n, want in replicas.items())
    if done:
        # JobSet's words, which Trainer copies onto the TrainJob (its e2e asserts them).
        return Condition(
            type=COND_COMPLETE, status="True", reason="AllJobsCompleted", message="jobset completed successfully"
        )
    return None


def desired_conditions(
    view: TrainJobView, current: list[Condition], running_condition: bool = False
) -> list[Condition]:
    """The conditions the TrainJob should carry now (without timestamps; see :func:`merge_conditions`).

    By default only upstream's (kubeflow/trainer ``trainjob_types.go``): ``Suspended`` while suspended,
    ``Complete``/``Failed`` at the end, and nothing while it runs, so the official kubeflow SDK, which
    reports ``Running`` only while a TrainJob has no condition at all, sees it run; unlike upstream the
    ``Suspended`` condition goes once the job is resumed (upstream keeps ``Suspended=False``, after which
    that SDK never reports ``Running`` again: kubeflow/sdk#803); likewise JobSet's ``RestartingJobSet``
    shows only while the whole group restarts. ``running_condition`` (the richer shape):
    ``Suspended=False``/``Resumed`` and ``RestartingJobSet=False`` stay, and ``Running`` tells whether
    every trainer pod is ready.
    """
    have = {c.type: c for c in current}
    done = finished(current, TRAINJOB_TERMINAL)
    if done is not None:
        # Finished is final: the outcome stays, Running turns False, gang conditions go.
        reason = "Completed" if done == COND_COMPLETE else "Failed"  # as when it finished: no flapping
        stopped = Condition(type=COND_RUNNING, status="False", reason=reason, message=f"TrainJob {done}")
        kept = (COND_SUSPENDED, COND_COMPLETE, COND_FAILED, COND_RESTARTING)
        return [stopped if c.type == COND_RUNNING else c for c in current if c.type in (*kept, COND_RUNNING)]
    out: list[Condition] = []
    suspended = view.info.suspended
    if suspended:
        out.append(
            Condition(type=COND_SUSPENDED, status="True", reason=REASON_SUSPENDED, message="TrainJob is suspended")
        )
    elif COND_SUSPENDED in have and running_condition:
        out.append(Condition(type=COND_SUSPENDED, status="False", reason=REASON_RESUMED, message="TrainJob is resumed"))
    ending = finished_condition(view)
    if ending is not None:
        out.append(ending)
        if COND_RUNNING in have:
            reason = "Completed" if ending.type == COND_COMPLETE else "Failed"
            out.append(Condition(type=COND_RUNNING, status="False", reason=reason, message=f"TrainJob {ending.type}"))
        if COND_RESTARTING in have and running_condition:
            ended = (
                (REASON_JOBSET_COMPLETED, MESSAGE_JOBSET_COMPLETED)
                if ending.type == COND_COMPLETE
                else (REASON_JOBSET_FAILED, MESSAGE_JOBSET_FAILED)
            )
            out.append(Condition(type=COND_RESTARTING, status="False", reason=ended[0], message=ended[1]))
        return out
    restarting = restarting_condition(view, have, running_condition)
    if restarting is not None:
        out.append(restarting)
    return out + running_conditions(view, have) if running_condition else out


def running_conditions(view: TrainJobView, have: dict[str, Condition]) -> list[Condition]:
    """``Running`` of the richer shape (``--trainjob-running-condition``): True once every trainer pod is
    ready, False (``Suspended`` or ``TrainerPodsNotReady``) once it was there; nothing before."""
    info = view.info
    trainer = next((s for s in view.attempt.statuses if s.name == info.trainer), None)
    rjob = next((r for r in info.rjobs if r.name == info.trainer), None)
    ready = trainer is not None and rjob is not None and rjob.replicas > 0 and trainer.ready >= rjob.replicas
    if ready and not info.suspended:
        return [
            Condition(
                type=COND_RUNNING, status="True", reason="TrainerPodsRunning", message="All trainer pods are running"
            )
        ]
    if COND_RUNNING in have:
        reason = "Suspended" if info.suspended else "TrainerPodsNotReady"
        return [Condition(type=COND_RUNNING, status="False", reason=reason, message="Not all trainer pods are running")]
    return []


def runtime_not_found(kind: str, name: str, namespace: str | None) -> Condition:
    """The condition of a TrainJob whose runtime does not exist."""
    where = f" in namespace {namespace!r}" if namespace else ""
    return Condition(
        type=COND_RUNTIME_NOT_FOUND,
        status="True",
        reason=COND_RUNTIME_NOT_FOUND,
        message=(
            f"{kind} {name!r} not found{where}: create it, or change spec.runtimeRef to an existing runtime; "
            "the TrainJob is reconciled again when it appears"
        ),
    )


def status(obj: JSON, view: TrainJobView | None, conditions: list[JSON] | None) -> JSON:
    """The TrainJob's status: conditions, jobsStatus (kept as it was once finished), restarts of the
    whole group and of single Jobs (``replicatedJobsStatus``), the ML policy's ``/scale`` fields
    (:meth:`~trainer.trainjob.policies.base.Policy.scale_status`), ``startTime`` and ``completionTime``."""
    if view is None:
        return {"conditions": conditions}
    info, attempt = view.info, view.attempt
    old = obj.get("status") or {}
    if attempt.finished:  # the outcome is final, jobsStatus included (the Jobs may go by TTL)
        statuses = old.get("jobsStatus")
    else:
        statuses = TrainJobStatus(jobs_status=attempt.statuses).to_dict().get("jobsStatus")
    restarts, counted = attempt.restarts, attempt.counted_restarts
    if attempt.decision is not None and attempt.decision.restarts_group:
        restarts, counted = restarts + 1, counted + int(attempt.decision.counted)
    return {
        "conditions": conditions,
        "jobsStatus": statuses,
        "restarts": restarts or None,
        "restartsCountTowardsMax": counted or None,
        "replicatedJobsStatus": job_restarts_status(view),
        **info.policy.scale_status(info, attempt.observed),
        **times(old, view, conditions),
    }


def times(old: JSON, view: TrainJobView, conditions: list[JSON] | None) -> JSON:
    """``startTime`` and ``completionTime`` (RFC 3339). ``startTime`` as JobSet keeps it
    (kubernetes-sigs/jobset KEP-1186, ``keps/1186-active-deadline-seconds``): set to now when the
    TrainJob is not suspended and has none, cleared while it is suspended, set to now again on a restart
    of the whole group (failurePolicy ``RestartJobSet``), unchanged by a Job restarted alone, kept once
    finished. ``completionTime``: the time of the ``Complete`` or ``Failed`` condition, once."""
    start, done = old.get("startTime"), old.get("completionTime")
    terminal = next(
        (c for c in conditions or [] if c.get("type") in TRAINJOB_TERMINAL and c.get("status") == "True"), None
    )
    if terminal is not None:
        done = done or terminal.get("lastTransitionTime") or view.attempt.now
        start = start or None
    elif view.info.suspended:
        start = None
    elif not start or view.attempt.restarting:
        start = view.attempt.now
    return {"startTime": start, "completionTime": done}
