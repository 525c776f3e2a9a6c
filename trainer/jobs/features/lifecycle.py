"""The jobs' metrics, one feature in one module: their families, the rules of a job's lifecycle as they
read it, and the one observer that counts what a status write records.

The families (:class:`JobMetrics`, registered once per registry through
:meth:`~trainer.framework.metrics.Metrics.families`), after kubeflow/trainer#3429 (its
``kubeflow_trainer_`` prefix; names otherwise after Prometheus' conventions, the unit in the name):
``kubeflow_trainer_jobs{kind,gang_scheduler,state}`` (a gauge computed from the caches at scrape time,
:meth:`JobMetrics.job_states`), ``kubeflow_trainer_job_admission_wait_seconds``,
``kubeflow_trainer_job_startup_seconds`` and ``kubeflow_trainer_job_run_seconds`` (histograms,
:data:`LIFECYCLE_BUCKETS`), ``kubeflow_trainer_job_restarts_total``, ``kubeflow_trainer_job_failures_total``
and ``kubeflow_trainer_job_refusals_total`` (counters): no job or namespace as a label, reasons folded
into ``other`` beyond the fixed sets below (:func:`~trainer.framework.metrics.bounded`). Besides, the
jobs' outcomes by namespace and runtime, as JobSet's ``jobset_completed_total``/``jobset_failed_total``
and mpi-operator's ``mpi_operator_jobs_{created,successful,failed}_total`` count them:
``trainer_jobs_{created,succeeded}_total{kind,namespace,runtime}``, and the deprecated
``trainer_jobs_failed_total{kind,namespace,runtime,reason}`` and
``trainer_jobs_restarted_total{kind,namespace,runtime}`` (they count what
``kubeflow_trainer_job_failures_total`` and ``kubeflow_trainer_job_restarts_total`` count, by other
labels; removed in the next minor release).

The rules are pure: a job (JSON as the caches keep it) or its old and new status in, facts out: its
state (:func:`state_of`, handed by :func:`trainer.jobs.reconcile.declare` to
:meth:`JobMetrics.job_states`), whether its status says it runs, and what one status write records
(:func:`admitted`, :func:`finish`, :func:`restart_reason`, :func:`restart_turned`, :func:`refusals`).
The states are those the State column shows (kubeflow/trainer#3963 for a TrainJob, mpi-operator's
``conditions[-1:]`` for an MPIJob), one set for both kinds: an MPIJob's ``Succeeded`` is ``Complete``.

:class:`LifecycleObserver` is told of every :meth:`~trainer.jobs.status_writer.StatusWriter.write`
(the status as stored before, the status written if any, whether a pod of the job is ready: the kinds'
``info.pod_ready``, :func:`trainer.jobs.facts.pod_ready`) and alone decides what to count. A reconcile
that writes nothing counts nothing, and an operator restarted over settled jobs neither. A creation, a
success, a finish, a failure, a restart and a refusal are transitions of the status itself (no status
before, a terminal condition turned True, ``restarts`` grown or a restart condition turned True, a
refusal's condition turned True): each is counted once, and a second write of the same transition from
a cache that had not seen the first is recognised by ``(job uid, event, marker)`` remembered
(:data:`MAX_COUNTED` of them), one memory for every counter. The first start (admission wait) and the
first ready pod (startup, looked for at every write, changed or not) are not kept in the status (a
suspend clears ``startTime``), so they are observed only for a job this process saw without a status,
once each (remembered, for :data:`MAX_COUNTED` jobs): a job an earlier process (or leader) saw born is
never observed twice, at the price of its milestones that fall after the restart not being observed at
all.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from trainer.api.conditions import (
    COND_MISCONFIGURED,
    COND_REPLICA_FAILURE,
    COND_RESTARTING,
    COND_WAITING_FOR_GANG,
    REASON_CREATION_FAILED,
    REASON_FAILED_CREATE,
    REASON_RESOURCE_EXISTS,
    true_condition,
)
from trainer.api.jobkinds import KindFacts
from trainer.api.kubeflow_v2beta1 import COND_RESTARTING as COND_MPI_RESTARTING
from trainer.api.trainer_v1alpha1 import COND_FAILED, COND_RUNNING, COND_SUSPENDED
from trainer.framework.bounded import BoundedDict
from trainer.framework.clock import parse_time
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import key_of
from trainer.framework.metrics import Metrics, bounded
from trainer.jobs.conditions import finished

CREATED, SUSPENDED, RUNNING, COMPLETE, FAILED = "Created", "Suspended", "Running", "Complete", "Failed"
"""The states (:data:`JOB_STATES`)."""
JOB_STATES = (CREATED, SUSPENDED, RUNNING, COMPLETE, FAILED)
"""The ``state`` values of ``kubeflow_trainer_jobs``, each always exported (0 when no job is in it)."""
LIFECYCLE_BUCKETS = (1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800, 86400, 172800)
"""Seconds, for the lifecycle histograms: a second to two days (queues can hold a job for hours)."""
MAX_COUNTED = 100_000
"""Transitions remembered as counted at most, and jobs remembered as seen born (the oldest go first)."""
StateCounts = Callable[[], Mapping[str, int]]
"""A source of ``kubeflow_trainer_jobs``: how many jobs of a kind are in each state (one of
:data:`JOB_STATES`) now."""

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
        "AllTrialsFailed",
    }
)
"""The reasons of a ``Failed`` condition the failure counter names (TrainJob: kubeflow/trainer's and
JobSet's; MPIJob: mpi-operator's; OptimizationJob: ``AllTrialsFailed``, ``InvalidSpec``); any other is
``other``."""
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
    ``--trainjob-running-condition``), a Job of it with every pod ready (a ``jobsStatus`` entry's
    ``ready``, a TrainJob's) or, of a job whose children are jobs, a child running (an OptimizationJob's
    ``trialsRunning``)."""
    if true_condition(_conditions(status), COND_RUNNING) is not None:
        return True
    if isinstance(status.get("trialsRunning"), int) and status["trialsRunning"] > 0:
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


class JobCache(Protocol):
    """The cache of one kind of job, as :class:`JobStates` reads it (a :class:`trainer.framework.controller.Store`)."""

    def items(self) -> list[JSON]: ...

    def get(self, namespace: str | None, name: str) -> JSON | None: ...

    def add_handler(self, handler: Callable[[JSON | None, JSON | None], None]) -> None: ...


MAX_CHANGED = 100_000
"""Jobs :class:`JobStates` remembers as changed between two scrapes at most; beyond, the next scrape reads
every job again (so an operator never scraped holds no growing set)."""


class JobStates:
    """A :data:`StateCounts` of one kind: how many jobs of ``cache`` that ``counted(job)`` accepts are in
    each state (:func:`state_of`). The cache tells it which jobs changed (a handler: one set insertion per
    change), and a scrape derives the state of those only, so it costs what changed since the last one,
    not a walk of every job (19 ms at 20,000 TrainJobs). The first scrape, and one after more than
    :data:`MAX_CHANGED` changes, reads every job. What it keeps: each counted job's state and the count
    per state."""

    def __init__(self, cache: JobCache, facts: KindFacts, counted: Callable[[JSON], bool]) -> None:
        self.cache, self.facts, self.counted = cache, facts, counted
        self._states: dict[tuple[str, str], str] = {}
        self._counts: Tally[str] = Tally()
        self._changed: set[tuple[str, str]] | None = None
        """Jobs changed since the last scrape; None: read every job at the next."""
        cache.add_handler(self._change)

    def _change(self, old: JSON | None, new: JSON | None) -> None:
        changed = self._changed
        if changed is None:
            return
        obj = new if new is not None else old
        if obj is not None:
            changed.add(key_of(obj))
        if len(changed) > MAX_CHANGED:
            self._changed = None

    def __call__(self) -> dict[str, int]:
        if self._changed is None:
            self._states.clear()
            self._counts.clear()
            keys: Iterable[tuple[str, str]] = [key_of(o) for o in self.cache.items()]
        else:
            keys = self._changed
        self._changed = set()
        for key in keys:
            was = self._states.pop(key, None)
            if was is not None:
                self._counts[was] -= 1
            obj = self.cache.get(*key)
            if obj is not None and self.counted(obj):
                state = self._states[key] = state_of(obj, self.facts)
                self._counts[state] += 1
        return {state: count for state, count in self._counts.items() if count}


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


def restart_turned(old: JSON, new: JSON) -> list[str]:
    """The transition times of restart conditions (JobSet's ``RestartingJobSet``, an MPIJob's
    ``Restarting``) True in ``new`` and not in ``old``."""
    out = []
    for type_ in RESTART_CONDITIONS:
        now = true_condition(_conditions(new), type_)
        if now is not None and true_condition(_conditions(old), type_) is None:
            out.append(str(now.get("lastTransitionTime") or ""))
    return out


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


class JobMetrics:
    """The jobs' families (see the module docstring) in ``registry``; one per registry: take it with
    :meth:`of`. Raises ``ValueError`` when ``registry`` has them already."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._outcome_families(registry)
        self._lifecycle_families(registry)
        self._states = _JobStates()
        registry.register(self._states)
        self._objectives = _BestObjectives()
        registry.register(self._objectives)

    @staticmethod
    def of(metrics: Metrics) -> JobMetrics:
        """The job families of ``metrics``' registry, registered at the first call."""
        return metrics.families(JobMetrics)

    def _outcome_families(self, r: CollectorRegistry) -> None:
        """``trainer_jobs_*_total``, by ``kind``, ``namespace`` and ``runtime``; ``failed`` and
        ``restarted`` deprecated (the module docstring)."""
        outcome = ["kind", "namespace", "runtime"]
        self.jobs_created = Counter(
            "trainer_jobs_created_total", "Jobs (TrainJob, MPIJob) the operator started", outcome, registry=r
        )
        self.jobs_succeeded = Counter(
            "trainer_jobs_succeeded_total", "Jobs that finished successfully", outcome, registry=r
        )
        self.jobs_failed = Counter(
            "trainer_jobs_failed_total", "Jobs that failed, by reason", [*outcome, "reason"], registry=r
        )
        self.jobs_restarted = Counter(
            "trainer_jobs_restarted_total", "Restarts of a whole job by its failure policy", outcome, registry=r
        )

    def _lifecycle_families(self, r: CollectorRegistry) -> None:
        """``kubeflow_trainer_job_*``, by ``kind`` and ``gang_scheduler`` (refusals by ``kind`` only)."""
        lifecycle = ["kind", "gang_scheduler"]
        self.admission_wait = Histogram(
            "kubeflow_trainer_job_admission_wait_seconds",
            "Seconds from a job's creation to its first start (not suspended, its gang admitted)",
            lifecycle,
            buckets=LIFECYCLE_BUCKETS,
            registry=r,
        )
        self.startup = Histogram(
            "kubeflow_trainer_job_startup_seconds",
            "Seconds from a job's creation to its first running pod (a Job counting a ready pod)",
            lifecycle,
            buckets=LIFECYCLE_BUCKETS,
            registry=r,
        )
        self.run = Histogram(
            "kubeflow_trainer_job_run_seconds",
            "Seconds from a job's status.startTime to its completionTime, by result",
            [*lifecycle, "result"],
            buckets=LIFECYCLE_BUCKETS,
            registry=r,
        )
        self.restarts = Counter(
            "kubeflow_trainer_job_restarts_total",
            "Restarts of whole jobs, by reason",
            [*lifecycle, "reason"],
            registry=r,
        )
        self.failures = Counter(
            "kubeflow_trainer_job_failures_total", "Jobs that failed, by reason", [*lifecycle, "reason"], registry=r
        )
        self.refusals = Counter(
            "kubeflow_trainer_job_refusals_total",
            "Children of jobs refused (a name taken, the apiserver's refusal, pods the Job controller cannot create)",
            ["kind", "reason"],
            registry=r,
        )

    def outcome(self, event: str, kind: str, namespace: str, runtime: str, reason: str = "") -> None:
        """Count a job's ``event``: ``created``, ``succeeded``, ``failed`` (with ``reason``) or
        ``restarted``. Labels are bounded: kind, namespace, runtime name, condition reason. Raises
        ``KeyError`` for another ``event``."""
        if event == "failed":
            self.jobs_failed.labels(kind, namespace, runtime, reason).inc()
            return
        counter = {"created": self.jobs_created, "succeeded": self.jobs_succeeded, "restarted": self.jobs_restarted}
        counter[event].labels(kind, namespace, runtime).inc()

    def job_states(self, kind: str, gang_scheduler: str, source: StateCounts) -> None:
        """Export ``kubeflow_trainer_jobs{kind,gang_scheduler,state}`` of ``kind`` from ``source``, called
        at each scrape (a second call for ``kind`` replaces the first)."""
        self._states.sources[kind] = (gang_scheduler, source)

    def best_objectives(self, kind: str, source: ObjectiveSource) -> None:
        """Export ``kubeflow_trainer_optimizationjob_best_objective{namespace,name,metric}`` of ``kind``'s
        jobs from ``source`` at each scrape (a second call for ``kind`` replaces the first)."""
        self._objectives.sources[kind] = source


class _JobStates(Collector):
    """``kubeflow_trainer_jobs``: jobs by kind, gang scheduler and state, counted from each kind's
    source when scraped (so it is never out of step with the caches, and a new leader needs no history)."""

    def __init__(self) -> None:
        self.sources: dict[str, tuple[str, StateCounts]] = {}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["kind", "gang_scheduler", "state"]
        family = GaugeMetricFamily("kubeflow_trainer_jobs", "Jobs by kind, gang scheduler and state", labels=labels)
        for kind, (gang_scheduler, source) in sorted(self.sources.items()):
            counts = dict.fromkeys(JOB_STATES, 0)
            for state, count in source().items():
                label = bounded(state, JOB_STATES)
                counts[label] = counts.get(label, 0) + count
            for state, count in counts.items():
                family.add_metric([kind, gang_scheduler, state], count)
        yield family


ObjectiveSource = Callable[[], Iterable[tuple[str, str, str, float]]]
"""``(namespace, name, metric, value)`` of each search's best objective so far, read at scrape time."""
MAX_OBJECTIVE_SERIES = 1000
"""At most this many series of ``kubeflow_trainer_optimizationjob_best_objective`` (by namespace and name);
beyond, the rest are left out and ``kubeflow_trainer_optimizationjob_best_objective_dropped`` says how many."""


class _BestObjectives(Collector):
    """``kubeflow_trainer_optimizationjob_best_objective``: each existing search's best objective value, one
    series per job (the job's own name: bounded by the jobs that exist, and at most
    :data:`MAX_OBJECTIVE_SERIES`, by namespace and name), computed from the caches when scraped, so a
    deleted job's series goes with it."""

    def __init__(self) -> None:
        self.sources: dict[str, ObjectiveSource] = {}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "kubeflow_trainer_optimizationjob_best_objective",
            "The objective value of each OptimizationJob's best trial so far",
            labels=["namespace", "name", "metric"],
        )
        dropped = GaugeMetricFamily(
            "kubeflow_trainer_optimizationjob_best_objective_dropped",
            f"OptimizationJobs whose best objective is not exported (beyond {MAX_OBJECTIVE_SERIES} series)",
        )
        rows = sorted(row for _, source in sorted(self.sources.items()) for row in source())
        for namespace, name, metric, value in rows[:MAX_OBJECTIVE_SERIES]:
            family.add_metric([namespace, name, metric], value)
        dropped.add_metric([], max(0, len(rows) - MAX_OBJECTIVE_SERIES))
        yield family
        yield dropped


class Observed(Protocol):
    """What the observer reads of a reconcile's view of a job (the kinds' info)."""

    @property
    def pod_ready(self) -> bool:
        """Whether a pod of the job runs now (:func:`trainer.jobs.facts.pod_ready` of its Jobs)."""
        ...


Count = tuple[str, "int | str", Callable[[], None]]
"""What a status write records: ``(event, marker, count it)``; counted once per ``(job uid, event, marker)``."""


MILESTONES: dict[frozenset[str], frozenset[str]] = {
    s: s for s in (frozenset(), frozenset({"admitted"}), frozenset({"running"}), frozenset({"admitted", "running"}))
}
"""Every set of milestones a job can have observed, each held once."""


class LifecycleObserver:
    """Counts and observes, in ``metrics``, what the status writes of the jobs of kind ``facts`` record
    (see the module docstring); ``gang_scheduler`` is the label of the lifecycle families
    (``--gang-scheduler-name``). One per status writer: its memory is its own."""

    def __init__(self, metrics: JobMetrics, facts: KindFacts, gang_scheduler: str = "none") -> None:
        self.metrics, self.facts, self.gang_scheduler = metrics, facts, gang_scheduler
        self._counted: BoundedDict[tuple[str, str, int | str], None] = BoundedDict(MAX_COUNTED)
        """Transitions already counted: (job uid, event, marker)."""
        self._born: BoundedDict[str, frozenset[str]] = BoundedDict(MAX_COUNTED)
        """Jobs whose first status this process wrote: uid -> milestones observed (admitted, running), one
        of :data:`MILESTONES` (shared: a set of its own would cost every job 216 bytes)."""

    def observed(self, obj: JSON, old: JSON, written: JSON | None, info: Observed | None) -> None:
        """A status write of job ``obj`` is over: ``old`` its status as stored before (``{}`` when it had
        none), ``written`` the status written (None when nothing was: unchanged, deferred, or the write
        failed), ``info`` what its reconcile observed (None: the job could not be expanded). Count each
        transition ``written`` records over ``old`` once, and the milestones of a job seen born."""
        uid = str(obj["metadata"].get("uid") or "")
        self._startup(obj, uid, old, info)
        if written is None:
            return
        self._admission(obj, uid, written)
        for event, marker, count in [*self._outcomes(obj, old, written), *self._transitions(old, written)]:
            key = (uid, event, marker)
            if key not in self._counted:
                self._counted[key] = None
                count()

    def _startup(self, obj: JSON, uid: str, old: JSON, info: Observed | None) -> None:
        """Remember the job as born when it has no status yet; observe its startup (creation to its first
        ready pod) once, when it was seen born. Asked on every write, changed or not: a pod turning ready
        need not change the status."""
        if not old:
            self._born.setdefault(uid, MILESTONES[frozenset()])
        born = self._born.get(uid)
        if born is None or "running" in born or info is None or not info.pod_ready:
            return
        self._born[uid] = MILESTONES[born | {"running"}]
        startup = seconds_between(obj["metadata"].get("creationTimestamp"), datetime.now(UTC))
        if startup is not None:
            self.metrics.startup.labels(self.facts.resource.kind, self.gang_scheduler).observe(startup)

    def _admission(self, obj: JSON, uid: str, new: JSON) -> None:
        """Observe the admission wait (creation to ``startTime``) of a job seen born, once, when ``new``
        says it started (:func:`admitted`)."""
        born = self._born.get(uid)
        if born is None or "admitted" in born or not admitted(obj, new, self.facts):
            return
        self._born[uid] = MILESTONES[born | {"admitted"}]
        wait = seconds_between(obj["metadata"].get("creationTimestamp"), new.get("startTime"))
        if wait is not None:
            self.metrics.admission_wait.labels(self.facts.resource.kind, self.gang_scheduler).observe(wait)

    def _outcomes(self, obj: JSON, old: JSON, new: JSON) -> list[Count]:
        """The outcomes by namespace and runtime the write of ``new`` over ``old`` records: the first
        status, a success, a failure, ``restarts`` grown."""
        kind, ns = self.facts.resource.kind, str(obj["metadata"].get("namespace") or "")
        runtime = str(((obj.get("spec") or {}).get("runtimeRef") or {}).get("name") or "")
        succeeded, failed = self.facts.succeeded, true_condition(_conditions(new), COND_FAILED)  # an MPIJob's too
        restarts = int(new.get("restarts") or 0)
        happened = [
            ("created", 0, "", not old),
            ("succeeded", 0, "", _turned_true(old, new, succeeded)),
            ("failed", 0, str((failed or {}).get("reason") or ""), _turned_true(old, new, COND_FAILED)),
            ("restarted", restarts, "", restarts > int(old.get("restarts") or 0)),
        ]
        outcome = self.metrics.outcome
        return [
            (event, marker, partial(outcome, event, kind, ns, runtime, reason))
            for event, marker, reason, yes in happened
            if yes
        ]

    def _transitions(self, old: JSON, new: JSON) -> list[Count]:
        """The lifecycle transitions the write of ``new`` over ``old`` records: a finish (its run time,
        and a failure), a restart (``restarts`` grown or a restart condition turned True), refusals."""
        m, kind, gs = self.metrics, self.facts.resource.kind, self.gang_scheduler
        out: list[Count] = []
        end = finish(old, new, self.facts)
        if end is not None:
            out.append(("finished", 0, partial(self._finished, end)))
        restarts, turned = int(new.get("restarts") or 0), restart_turned(old, new)
        if restarts > int(old.get("restarts") or 0) or turned:
            marker = f"{restarts}/{turned[0] if turned else ''}"
            out.append(("restart", marker, partial(_inc, m.restarts, kind, gs, restart_reason(new))))
        for reason, marker in refusals(old, new):
            out.append(("refused:" + reason, marker, partial(_inc, m.refusals, kind, reason)))
        return out

    def _finished(self, end: Finish) -> None:
        """Observe a job's end: its run time, and its failure."""
        kind, gs = self.facts.resource.kind, self.gang_scheduler
        if end.run_seconds is not None:
            self.metrics.run.labels(kind, gs, end.result).observe(end.run_seconds)
        if end.result == "failed":
            self.metrics.failures.labels(kind, gs, end.reason).inc()


def _turned_true(old: JSON, new: JSON, type_: str) -> bool:
    """Whether condition ``type_`` is True in ``new`` and not in ``old``."""
    return true_condition(_conditions(new), type_) is not None and true_condition(_conditions(old), type_) is None


def _inc(counter: Counter, *labels: str) -> None:
    """Count one in ``counter``'s series of ``labels`` (created only when counted)."""
    counter.labels(*labels).inc()
