"""What a TrainJob's child Jobs are doing, derived once per reconcile: the attempt in progress.

The Jobs of the current restart attempt and of earlier ones, those restarted alone, their counts
(``jobsStatus``), the restarts so far, what the failed Jobs call for (failurePolicy), the deadline and the
TTL left. Mirrors the status side of kubeflow/trainer ``pkg/controller/trainjob_controller.go`` and
kubernetes-sigs/jobset ``pkg/controllers/jobset_controller.go`` (restart attempts, failure policy,
deadline, TTL). What the runtime says is :class:`~trainer.trainjob.runtime.info.RuntimeInfo`. Pure but for
the clock passed in.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from trainer.api.conditions import JOB_COMPLETE, JOB_FAILED
from trainer.api.jobset_v1alpha2 import ReplicatedJob
from trainer.api.labels import JOB_INDEX, REPLICATED_JOB_NAME
from trainer.api.trainer_v1alpha1 import JobStatus
from trainer.framework.clock import format_time
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta
from trainer.jobs.conditions import JOB_TERMINAL, TRAINJOB_TERMINAL, job_failed
from trainer.jobs.conditions import finished as is_finished
from trainer.jobs.facts import attempt_of, job_attempt_of, pod_ready, pods_wanted, started
from trainer.trainjob.runtime.info import RuntimeInfo
from trainer.trainjob.spec.failure_policy import Decision, decide
from trainer.trainjob.spec.run_policy import deadline_left, ttl_left


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """The TrainJob's child Jobs and what they call for, as this reconcile sees them."""

    observed: list[JSON]
    """The TrainJob's Jobs of the current restart attempt, as cached (without those ``replaced``)."""
    previous: list[JSON]
    """Jobs of earlier restart attempts, to be deleted before the current attempt's are created."""
    replaced: list[JSON]
    """Jobs of the current attempt restarted alone (their ``jobset.sigs.k8s.io/job-restart-attempt``
    behind their index's ``jobRestarts``), to be deleted before each is created again."""
    statuses: list[JobStatus]
    """``jobsStatus`` of the observed Jobs, in runtime order."""
    finished: bool
    """The TrainJob already has Complete or Failed True."""
    started: bool
    """Some Job of the TrainJob is not suspended (it was released at least once)."""
    restarts: int
    """``status.restarts``: the current restart attempt."""
    counted_restarts: int
    """``status.restartsCountTowardsMax``."""
    job_restarts: dict[str, list[int]]
    """Replicated job -> ``jobRestarts`` (``status.replicatedJobsStatus``): per index, its restarts alone."""
    job_restarts_counted: dict[str, list[int]]
    """Replicated job -> ``jobRestartsCountTowardsMax``: per index, its restarts alone that count."""
    decision: Decision | None
    """What the current attempt's failed Jobs call for (failurePolicy), None when none failed."""
    deadline_left: float | None
    """Seconds left of ``spec.activeDeadlineSeconds`` (counted from creation or the last resume;
    <= 0: exceeded), None when it does not apply (unset, suspended or finished)."""
    ttl_left: float | None
    """Seconds until ``ttlSecondsAfterFinished`` deletes (<= 0: due), None when it does not apply."""
    now: str
    """The time of this reconcile (RFC 3339): ``status.startTime`` when the job becomes active now."""

    def job_restart_attempt(self, rjob: str, index: int) -> int:
        """``jobRestarts[index]`` of replicated job ``rjob`` (0 when none was recorded)."""
        counts = self.job_restarts.get(rjob, [])
        return counts[index] if index < len(counts) else 0

    @property
    def over(self) -> bool:
        """The TrainJob finished, or ran past its active deadline: nothing of it runs on."""
        return self.finished or (self.deadline_left is not None and self.deadline_left <= 0)

    @property
    def ttl_due(self) -> bool:
        """The TTL that holds for the finished TrainJob has passed."""
        return self.ttl_left is not None and self.ttl_left <= 0

    @property
    def restarting(self) -> bool:
        """The failed Jobs call for a restart of the whole group now."""
        return self.decision is not None and self.decision.restarts_group

    @property
    def requeue_after(self) -> float | None:
        """Seconds until the active deadline or the TTL passes, whichever comes first; None: neither."""
        waits = [t for t in (self.deadline_left, self.ttl_left) if t is not None and t > 0]
        return min(waits) if waits else None

    @property
    def pod_ready(self) -> bool:
        """Whether a pod of the current attempt's Jobs runs (:func:`trainer.jobs.facts.pod_ready`)."""
        return pod_ready(self.observed)


def jobs_status(rjobs: Iterable[ReplicatedJob], jobs: Iterable[JSON]) -> list[JobStatus]:
    """Counts of child Jobs per replicated job, in the runtime's order."""
    counts = {r.name: JobStatus(name=r.name) for r in rjobs}
    for job in jobs:
        st = counts.get(meta(job).labels.get(REPLICATED_JOB_NAME, ""))
        if st is None:
            continue
        status = job.get("status") or {}
        done = is_finished(job, JOB_TERMINAL)
        if done == JOB_COMPLETE:
            st.succeeded += 1
        elif done == JOB_FAILED:
            st.failed += 1
        else:
            if int(status.get("succeeded") or 0) + int(status.get("ready") or 0) >= pods_wanted(job):
                st.ready += 1
            if int(status.get("active") or 0) > 0:
                st.active += 1
            if (job.get("spec") or {}).get("suspend"):
                st.suspended += 1
    return list(counts.values())


def _target(job_restarts: dict[str, list[int]], job: JSON) -> int:
    """``jobRestarts`` of a Job's index: the job restart attempt it must carry to be current."""
    labels = meta(job).labels
    counts = job_restarts.get(str(labels.get(REPLICATED_JOB_NAME) or ""), [])
    index = str(labels.get(JOB_INDEX) or "")
    return counts[int(index)] if index.isdigit() and int(index) < len(counts) else 0


def attempt(info: RuntimeInfo, observed: list[JSON], now: datetime) -> Attempt:
    """The attempt in progress of the TrainJob of ``info``, given every Job it owns (``observed``) at
    ``now``: the Jobs of earlier attempts (``restart-attempt`` behind ``status.restarts``) apart, those
    restarted alone (behind their index's ``jobRestarts``) replaced, the failurePolicy's decision on the
    failed ones, the deadline and the TTL left."""
    job, runtime = info.job, info.runtime
    status = job.status
    finished = is_finished((status.conditions if status else None) or [], TRAINJOB_TERMINAL) is not None
    restarts = (status.restarts if status else None) or 0
    counted = (status.restarts_count_towards_max if status else None) or 0
    per_job = (status.replicated_jobs_status if status else None) or []
    job_restarts = {e.name: list(e.job_restarts or []) for e in per_job}
    job_counted = {e.name: list(e.job_restarts_count_towards_max or []) for e in per_job}
    current = [j for j in observed if attempt_of(j) >= restarts]
    # As JobSet: a Job behind its index's jobRestarts was restarted alone, and is replaced.
    replaced = [j for j in current if job_attempt_of(j) < _target(job_restarts, j)]
    current = [j for j in current if job_attempt_of(j) >= _target(job_restarts, j)]
    failed = [j for j in current if job_failed(j) is not None]
    total_counted = counted + sum(sum(c) for c in job_counted.values())
    return Attempt(
        observed=current,
        previous=[j for j in observed if attempt_of(j) < restarts],
        replaced=replaced,
        statuses=jobs_status(info.rjobs, current),
        finished=finished,
        started=started(observed),
        restarts=restarts,
        counted_restarts=counted,
        job_restarts=job_restarts,
        job_restarts_counted=job_counted,
        decision=None if finished else decide(info.template.failure_policy, failed, total_counted),
        deadline_left=deadline_left(job, finished, now, runtime),
        ttl_left=ttl_left(job, runtime, now) if finished else None,
        now=format_time(now),
    )
