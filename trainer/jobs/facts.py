"""Facts about jobs, each read one way everywhere: whether a job has started, a batch/v1 Job's restart
attempt and the pods it misses, the seconds left of a TTL or a deadline, whose ``managedBy`` it is.

The reconcilers, their status logic and admission ask here rather than reading the objects themselves,
so a rule has one spelling; whether a job or a batch/v1 Job has finished (and when), or failed, is read
from its conditions by :mod:`trainer.jobs.conditions`. A batch/v1 Job is JSON as the caches keep it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from trainer.api.jobkinds import RunPolicyAt
from trainer.api.labels import JOB_RESTART_ATTEMPT, RESTART_ATTEMPT
from trainer.framework.clock import parse_time
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta
from trainer.jobs.conditions import JOB_TERMINAL, finished


def attempt_of(job: JSON) -> int:
    """The restart attempt a batch/v1 Job belongs to (label ``jobset.sigs.k8s.io/restart-attempt``; 0
    when unset), as JobSet reads it."""
    return _count_label(job, RESTART_ATTEMPT)


def job_attempt_of(job: JSON) -> int:
    """How many times a batch/v1 Job's index was recreated alone before it (label
    ``jobset.sigs.k8s.io/job-restart-attempt``; 0 when unset)."""
    return _count_label(job, JOB_RESTART_ATTEMPT)


def _count_label(job: JSON, key: str) -> int:
    value = meta(job).labels.get(key) or "0"
    return int(value) if str(value).isdigit() else 0


def pods_wanted(job: JSON) -> int:
    """Pods a batch/v1 Job runs at once when all are there: ``parallelism`` (default 1), at most
    ``completions`` when set."""
    spec = job.get("spec") or {}
    count = int(spec["parallelism"]) if spec.get("parallelism") is not None else 1
    completions = spec.get("completions")
    return min(count, int(completions)) if completions is not None else count


def pods_missing(job: JSON) -> int:
    """Pods a running batch/v1 Job wants and does not have: :func:`pods_wanted` less its ``active`` and
    ``succeeded`` pods (0 when it has them all, is suspended or finished). The Job controller counts a
    pod ``active`` from its creation on (pending or running), so a Job with none missing has created
    every pod it wants now."""
    if not started([job]) or finished(job, JOB_TERMINAL) is not None:
        return 0
    status = job.get("status") or {}
    have = int(status.get("active") or 0) + int(status.get("succeeded") or 0)
    return max(pods_wanted(job) - have, 0)


def pod_ready(jobs: Iterable[JSON]) -> bool:
    """Whether a pod of these batch/v1 Jobs runs: a Job's ``status.ready`` (its pods with the ``Ready``
    condition, which a running container without a readiness probe has) above 0."""
    return any(int((j.get("status") or {}).get("ready") or 0) > 0 for j in jobs)


def started(jobs: Iterable[JSON]) -> bool:
    """Whether any of a job's batch/v1 Jobs is not suspended (its pods may run or have run); of one
    Job, ``started([job])``: whether it runs (or ran)."""
    return any(not (j.get("spec") or {}).get("suspend") for j in jobs)


def seconds_left(seconds: float | None, since: str | None, now: datetime) -> float | None:
    """Seconds until ``seconds`` have passed since the RFC 3339 time ``since`` (<= 0: passed), or None
    when either is unset: what is left of a ``ttlSecondsAfterFinished`` or an ``activeDeadlineSeconds``.
    Raises ``ValueError`` when ``since`` is set but not an RFC 3339 time (the reconcile fails and is retried)."""
    if seconds is None or not since:
        return None
    when = parse_time(since)
    if when is None:
        raise ValueError(f"not an RFC 3339 time: {since!r}")
    return seconds - (now - when).total_seconds()


def managed_by_us(obj: JSON, run_policy: RunPolicyAt) -> bool:
    """Whether this operator reconciles ``obj``, read before its spec is parsed: its ``managedBy``
    (where the kind's facts say it is) is unset, empty or this operator's (upstream's controller name,
    ``trainer.kubeflow.org/trainjob-controller`` or ``kubeflow.org/mpi-operator``)."""
    return run_policy.managed_by(obj) in (None, "", run_policy.ours)
