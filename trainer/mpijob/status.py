"""Pure status logic of an MPIJob: observed launcher and worker Jobs -> conditions and replicaStatuses.

Follows kubeflow/mpi-operator ``pkg/controller/mpi_job_controller.go`` (``updateMPIJobStatus``):
conditions Created, Running, Restarting, Succeeded, Failed and Suspended with the reasons
``MPIJobCreated``, ``MPIJobRunning``, ``MPIJobRestarting``, ``MPIJobSucceeded``,
``MPIJobSuspended``/``MPIJobResumed``; a failed launcher passes its Job's reason on
(``BackoffLimitExceeded``, ``DeadlineExceeded``).

Once the job is finished ``Running`` is never ``True`` again (mpi-operator v0.8.1, #787): as
``filterOutCondition`` does, ``Succeeded``/``Failed`` turn a ``Running`` condition ``False`` keeping its
reason and message, and a job that finished before it was seen running gets ``Running=False``
(``MPIJobRunning``, ``MPIJob <ns>/<name> is finished but Running condition was never set.``), so that
whoever computes a duration from the conditions still finds one.
"""

from __future__ import annotations

from trainer.api.base import Condition
from trainer.api.conditions import JOB_COMPLETE, JOB_FAILED
from trainer.api.kubeflow_v2beta1 import (
    COND_CREATED,
    COND_FAILED,
    COND_RESTARTING,
    COND_RUNNING,
    COND_SUCCEEDED,
    COND_SUSPENDED,
    LAUNCHER,
    WORKER,
    MPIJob,
    ReplicaStatus,
)
from trainer.api.labels import JOB_NAME_LABEL, JOB_ROLE_LABEL
from trainer.framework.json_codec import JSON
from trainer.jobs.conditions import JOB_TERMINAL, MPIJOB_TERMINAL, finished, job_failed
from trainer.mpijob.children import worker_replicas


def replica_statuses(job: MPIJob, launcher: JSON | None, worker: JSON | None) -> dict[str, ReplicaStatus]:
    """Pod counts of the launcher and the workers, from their Jobs' status."""
    out = {}
    for role, obs in ((LAUNCHER, launcher), (WORKER, worker)):
        st = (obs or {}).get("status") or {}
        out[role] = ReplicaStatus(
            active=int(st.get("active") or 0),
            succeeded=int(st.get("succeeded") or 0),
            failed=int(st.get("failed") or 0),
            selector=f"{JOB_NAME_LABEL}={job.metadata.name},{JOB_ROLE_LABEL}={role.lower()}",
        )
    return out


def _stopped(name: str, running: Condition | None) -> Condition:
    """``Running=False`` of a finished job: the ``Running`` condition it had, turned ``False`` with its
    reason and message (mpi-operator's ``filterOutCondition``), or, when it never had one, mpi-operator's
    ``MPIJobRunning`` / ``MPIJob <ns>/<name> is finished but Running condition was never set.``"""
    if running is not None:
        return running.model_copy(update={"status": "False"})
    message = f"MPIJob {name} is finished but Running condition was never set."
    return Condition(type=COND_RUNNING, status="False", reason="MPIJobRunning", message=message)


def desired_conditions(
    job: MPIJob, launcher: JSON | None, worker: JSON | None, current: list[Condition], invalid: list[str]
) -> list[Condition]:
    """The conditions the MPIJob should carry now (timestamps are added by ``merge_conditions``): once
    finished, those it has (``Running`` turned False); else ``Created``, then an invalid spec's ``Failed``
    alone, or the suspension, the end the launcher or workers Jobs record (:func:`_ended`), or the
    restart and running conditions (:func:`_restarting`, :func:`_running`). Follows
    ``updateMPIJobStatus``."""
    have = {c.type: c for c in current}
    name = f"{job.metadata.namespace}/{job.metadata.name}"
    if finished(current, MPIJOB_TERMINAL) is not None:
        kept = (COND_CREATED, COND_SUSPENDED, COND_SUCCEEDED, COND_FAILED)
        return [c for c in current if c.type in kept] + [_stopped(name, have.get(COND_RUNNING))]
    out = [Condition(type=COND_CREATED, status="True", reason="MPIJobCreated", message=f"MPIJob {name} is created.")]
    if invalid:
        out.append(Condition(type=COND_FAILED, status="True", reason="InvalidSpec", message="; ".join(invalid)))
        return out
    suspended = bool(job.spec.run_policy and job.spec.run_policy.suspend)
    out += _suspension(name, suspended, have)
    ended = _ended(name, launcher, worker)
    if ended is not None:
        return [*out, ended, _stopped(name, have.get(COND_RUNNING))]
    launcher_status = (launcher or {}).get("status") or {}
    return [
        *out,
        *_restarting(name, launcher_status, have),
        *_running(name, job, launcher_status, worker, suspended, have),
    ]


def _suspension(name: str, suspended: bool, have: dict[str, Condition]) -> list[Condition]:
    """``Suspended=True`` (``MPIJobSuspended``) while ``suspended``; ``Suspended=False``
    (``MPIJobResumed``) once resumed when the job had the condition; else nothing."""
    if suspended:
        message = f"MPIJob {name} is suspended."
        return [Condition(type=COND_SUSPENDED, status="True", reason="MPIJobSuspended", message=message)]
    if COND_SUSPENDED in have:
        message = f"MPIJob {name} is resumed."
        return [Condition(type=COND_SUSPENDED, status="False", reason="MPIJobResumed", message=message)]
    return []


def _ended(name: str, launcher: JSON | None, worker: JSON | None) -> Condition | None:
    """The terminal condition the Jobs record, or None: ``Failed`` with the reason of the first failed
    Job (launcher, then workers), else ``Succeeded`` (``MPIJobSucceeded``) once the launcher's Job is
    complete."""
    for role, obs in (("launcher", launcher), ("workers", worker)):
        failed = job_failed(obs) if obs is not None else None
        if failed is not None:
            reason, message = str(failed.get("reason") or JOB_FAILED), str(failed.get("message") or "")
            message = f"{role} of MPIJob {name} failed: {message}"
            return Condition(type=COND_FAILED, status="True", reason=reason, message=message)
    if launcher is not None and finished(launcher, JOB_TERMINAL) == JOB_COMPLETE:
        message = f"MPIJob {name} successfully completed."
        return Condition(type=COND_SUCCEEDED, status="True", reason="MPIJobSucceeded", message=message)
    return None


def _restarting(name: str, launcher_status: JSON, have: dict[str, Condition]) -> list[Condition]:
    """``Restarting=True`` (``MPIJobRestarting``) while the launcher's Job has failed pods and an active
    one; ``Restarting=False`` (``MPIJobRunning``) after, when the job had the condition; else nothing."""
    if int(launcher_status.get("failed") or 0) > 0 and int(launcher_status.get("active") or 0) > 0:
        message = f"launcher of MPIJob {name} is restarting"
        return [Condition(type=COND_RESTARTING, status="True", reason="MPIJobRestarting", message=message)]
    if COND_RESTARTING in have:
        message = "launcher running again"
        return [Condition(type=COND_RESTARTING, status="False", reason="MPIJobRunning", message=message)]
    return []


def _running(
    name: str, job: MPIJob, launcher_status: JSON, worker: JSON | None, suspended: bool, have: dict[str, Condition]
) -> list[Condition]:
    """``Running=True`` (``MPIJobRunning``) while not suspended with the launcher's pod and every worker
    ready; ``Running=False`` (``MPIJobNotRunning``) otherwise when the job had the condition; else nothing."""
    workers_ready = int(((worker or {}).get("status") or {}).get("ready") or 0) >= worker_replicas(job)
    launcher_ready = int(launcher_status.get("ready") or 0) >= 1
    if not suspended and launcher_ready and workers_ready:
        message = f"MPIJob {name} is running."
        return [Condition(type=COND_RUNNING, status="True", reason="MPIJobRunning", message=message)]
    if COND_RUNNING in have:
        message = "launcher or workers not ready"
        return [Condition(type=COND_RUNNING, status="False", reason="MPIJobNotRunning", message=message)]
    return []
