"""The MPIJob controller: its declaration and the functions of its :class:`~trainer.jobs.kind.Kind`.

Declared once (:func:`controller`): MPIJobs; the Jobs, Services, ConfigMaps and Secrets they own,
each carrying ``training.kubeflow.org/job-name``; the gang scheduler's owned and watched objects.
The reconcile is :meth:`trainer.jobs.reconcile.Reconciler.reconcile`; this module supplies the
children (:mod:`trainer.mpijob.children`; the SSH Secret made once) and ``runPolicy``: when the job
finishes, ``cleanPodPolicy`` (All: the worker Job and all its pods go; Running: the worker Job is
suspended, which stops its running pods and keeps finished ones; None: nothing), the PodGroup is
released, and after ``ttlSecondsAfterFinished`` the MPIJob itself is deleted. MPIJobs mpi-operator
started finish under their launcher Job or are handed over (:mod:`trainer.mpijob.upstream`). Follows
kubeflow/mpi-operator ``pkg/controller/mpi_job_controller.go``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial

from trainer.api.base import Condition
from trainer.api.conditions import COND_MISCONFIGURED, COND_REPLICA_FAILURE, REASON_NODE_LIMIT
from trainer.api.jobkinds import MPIJOB
from trainer.api.kinds import JOBS, MPIJOBS, SECRETS
from trainer.api.kubeflow_v2beta1 import (
    COND_FAILED,
    COND_RUNNING,
    JobCondition,
    MPIJob,
)
from trainer.api.labels import JOB_NAME_LABEL, JOB_ROLE_LABEL, KUEUE_QUEUE_LABEL
from trainer.api.queues import QueueChoice, resolve_queue
from trainer.framework.clock import now_rfc3339
from trainer.framework.controller import Controller, Reader
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import key_of
from trainer.framework.permissions import Permission
from trainer.jobs import reconcile
from trainer.jobs.child_writer import Desired, Once
from trainer.jobs.conditions import MPIJOB_TERMINAL, finished, finished_at, kept_conditions, problem
from trainer.jobs.facts import pod_ready, seconds_left, started
from trainer.jobs.features.limits import DEFAULT_MAX_NODES_PER_JOB
from trainer.jobs.gang.base import GangInput, GangPlan, GangScheduler, PodSet, decorate, gang_conditions
from trainer.jobs.kind import Blocked, Kind
from trainer.jobs.mpi import new_ssh_secret
from trainer.jobs.reconcile import declare
from trainer.jobs.status_writer import Telling
from trainer.mpijob import upstream
from trainer.mpijob.children import build_mpijob_children, names, validate, worker_replicas
from trainer.mpijob.status import desired_conditions, replica_statuses
from trainer.mpijob.validation import mpijob_errors, mpijob_worker_limit_errors


@dataclass(frozen=True)
class MPIJobInfo:
    """One MPIJob as this reconcile sees it, derived once."""

    obj: JSON
    job: MPIJob
    observed: dict[str, JSON]
    """The launcher and worker Jobs, by role."""
    current: list[Condition]
    queue: QueueChoice
    invalid: list[str]
    """Why the spec cannot run (each naming the field), empty when it can."""
    finished: bool
    started: bool
    ttl_left: float | None
    """Seconds until ``ttlSecondsAfterFinished`` passes (<= 0: passed), None when it does not apply."""

    @property
    def gang(self) -> GangInput:
        """The gang of the MPIJob (:func:`mpijob_gang_input`)."""
        return mpijob_gang_input(self)

    @property
    def pod_ready(self) -> bool:
        """Whether a pod of its launcher or workers runs (:func:`trainer.jobs.facts.pod_ready`)."""
        return pod_ready(self.observed.values())

    @property
    def requeue_after(self) -> float | None:
        """Seconds until ``ttlSecondsAfterFinished`` passes, or None."""
        return self.ttl_left if self.ttl_left is not None and self.ttl_left > 0 else None


def mpijob_gang_input(info: MPIJobInfo) -> GangInput:
    """The gang of an MPIJob: the workers, plus the launcher unless it waits for the workers (then it
    is created after the gang is admitted, so counting it would deadlock: mpi-operator#608)."""
    job = info.job
    specs = job.spec.mpi_replica_specs
    sets = []
    if specs.worker is not None and worker_replicas(job) > 0:
        sets.append(PodSet("worker", 1, worker_replicas(job), specs.worker.template))
    if specs.launcher is not None and job.spec.launcher_creation_policy != "WaitForWorkersReady":
        sets.append(PodSet("launcher", 1, 1, specs.launcher.template))
    policy = job.spec.run_policy.scheduling_policy if job.spec.run_policy else None
    return GangInput(
        owner=info.obj,
        pod_sets=sets,
        queue=info.queue,
        priority_class=policy.priority_class if policy else None,
        min_available=policy.min_available if policy else None,
        min_resources={k: str(v) for k, v in policy.min_resources.items()} if policy and policy.min_resources else None,
        schedule_timeout_seconds=policy.schedule_timeout_seconds if policy else None,
        finished=info.finished or bool(info.invalid),
        started=info.started,
        scheduling=LEVEL_1_GANG,
        all_pod_sets=tuple(sets),
    )


LEVEL_1_GANG: JSON = {"schedulingPolicy": {"gang": {}}}
"""What an MPIJob asks of the Workload API (``--gang-scheduler-name=workload``): one gang of its launcher and
workers, ``minCount`` its ``schedulingPolicy.minAvailable`` or every Pod, as mpi-operator's PodGroups."""


@dataclass(frozen=True, kw_only=True)
class MPIJobOptions:
    """The MPIJob controller's settings (command-line flags)."""

    max_nodes_per_job: int = DEFAULT_MAX_NODES_PER_JOB
    """``--max-nodes-per-job``: the most workers an MPIJob may have; 0: no limit."""
    status_coalesce_seconds: float = 1.0
    """``--status-coalesce-seconds``: how long a change of only ``replicaStatuses`` may wait to be written."""


def invalid(obj: JSON, message: str) -> list[Condition]:
    """``Failed`` (``InvalidSpec``): the MPIJob's spec cannot be read or run."""
    return reconcile.invalid(obj, MPIJOB, message)


PERMISSIONS = (
    Permission(MPIJOBS, ("patch",), "under Kueue, schedulingPolicy.queue carried to Kueue's queue label"),
    Permission(MPIJOBS, ("delete",), "ttlSecondsAfterFinished"),
)
TELLING = Telling(
    warnings=frozenset({COND_FAILED, COND_MISCONFIGURED, COND_REPLICA_FAILURE}),
    progress_fields=frozenset({"replicaStatuses"}),
    quiet=frozenset({(COND_RUNNING, "False")}),
)
"""How an MPIJob's changes are told: its problems as Warning events; ``replicaStatuses`` coalesced; as
mpi-operator, no event when it stops running."""


def expand(options: MPIJobOptions, gang_name: str, reader: Reader, obj: JSON, job: MPIJob) -> MPIJobInfo | Blocked:
    """The MPIJob as this reconcile sees it (:func:`info`), unless mpi-operator started it
    (:func:`trainer.mpijob.upstream.handover`)."""
    handed = upstream.handover(reader, obj, job)
    if handed is not None:
        return handed  # a launcher Job mpi-operator made runs it, or goes first
    return info(options, gang_name, reader, obj, job)


def kind(options: MPIJobOptions, gang_name: str) -> Kind[MPIJob, MPIJobInfo]:
    """The MPIJob kind under ``options`` and the gang scheduler named ``gang_name``. It does not read its
    child writes back (no ``settle``): their echoes bring the reconcile that counts them."""
    return Kind(
        facts=MPIJOB,
        expand=partial(expand, options, gang_name),
        desired=lambda _reader, info, plan: desired(info, plan),
        conditions=conditions,
        status=status,
    )


def info(options: MPIJobOptions, gang_name: str, reader: Reader, obj: JSON, job: MPIJob) -> MPIJobInfo | Blocked:
    """The MPIJob as this reconcile sees it (:class:`MPIJobInfo`); :class:`Blocked` with a label patch
    while Kueue needs ``schedulingPolicy.queue`` carried to its queue label."""
    queue = resolve_queue(obj, gang_name)
    labels = job.metadata.labels or {}
    if gang_name == "kueue" and queue.name and queue.scheduler == "" and KUEUE_QUEUE_LABEL not in labels:
        # Kueue reads only its label: carry schedulingPolicy.queue over.
        patch = {"metadata": {"labels": {KUEUE_QUEUE_LABEL: queue.name}}}
        return Blocked(None, Desired(patch=[(MPIJOBS, *key_of(obj), patch)]))
    current = [Condition.model_validate(c) for c in (obj.get("status") or {}).get("conditions") or []]
    observed = {str(j["metadata"]["labels"].get(JOB_ROLE_LABEL)): j for j in reader.owned(JOBS, str(job.metadata.uid))}
    ttl = job.spec.run_policy.ttl_seconds_after_finished if job.spec.run_policy else None
    if observed and finished(current, MPIJOB_TERMINAL) is None:
        # The node limit holds for a started job too (the webhook may not run): it grows by nothing.
        parallelism = ((observed.get("worker") or {}).get("spec") or {}).get("parallelism")
        running = parallelism if isinstance(parallelism, int) else 0
        grown = mpijob_worker_limit_errors(job, options.max_nodes_per_job, running)
        if grown:
            return Blocked([*kept_conditions(obj), problem(REASON_NODE_LIMIT, "; ".join(grown))])
    return MPIJobInfo(
        obj=obj,
        job=job,
        observed=observed,
        current=current,
        queue=queue,
        # The operator's own limits only before anything was created: a started job is left be.
        invalid=[*validate(job), *([] if observed else mpijob_errors(job, options.max_nodes_per_job))],
        finished=finished(current, MPIJOB_TERMINAL) is not None,
        started=started(observed.values()),
        ttl_left=seconds_left(ttl, finished_at(current, MPIJOB_TERMINAL), datetime.now(UTC)),
    )


def desired(info: MPIJobInfo, plan: GangPlan) -> Desired:
    """The MPIJob's writes now: its SSH Secret (once), Service, hostfile ConfigMap and Jobs while it
    runs; once finished, ``cleanPodPolicy`` on the worker Job and, after ``ttlSecondsAfterFinished``,
    the MPIJob's own delete."""
    out = Desired(delete=list(plan.delete))
    job = info.job
    if info.finished:
        worker = info.observed.get("worker")
        policy = (job.spec.run_policy.clean_pod_policy if job.spec.run_policy else None) or "None"
        if worker is not None and policy == "All":
            out.delete.append((JOBS, *key_of(worker)))
        elif worker is not None and policy == "Running" and started([worker]):
            out.patch.append((JOBS, *key_of(worker), {"spec": {"suspend": True}}))
        if info.ttl_left is not None and info.ttl_left <= 0:
            out.delete.append((MPIJOBS, *key_of(info.obj)))
        return out
    if info.invalid:
        return out
    suspend = bool(job.spec.run_policy and job.spec.run_policy.suspend)
    children = build_mpijob_children(info.obj, job, info.observed, suspend or plan.hold)
    name, labels = names(job)["ssh"], {JOB_NAME_LABEL: str(job.metadata.name)}
    out.once.append(Once(SECRETS, str(job.metadata.namespace), name, partial(new_ssh_secret, info.obj, name, labels)))
    out.apply += [*plan.apply, children.service, children.config_map]
    out.once += plan.create
    jobs = [j for j in (children.worker_job, children.launcher_job) if j is not None]
    out.apply += decorate(jobs, plan, set(), set_label=JOB_ROLE_LABEL)
    return out


def conditions(info: MPIJobInfo, plan: GangPlan) -> list[Condition] | None:
    """The MPIJob's conditions (:func:`trainer.mpijob.status.desired_conditions`) and, while it runs,
    the gang's; None once its TTL has passed (it is being deleted)."""
    if info.ttl_left is not None and info.ttl_left <= 0:
        return None  # deleted
    obs = info.observed
    out = desired_conditions(info.job, obs.get("launcher"), obs.get("worker"), info.current, info.invalid)
    return out if info.finished or info.invalid else out + gang_conditions(plan)


def status(obj: JSON, info: MPIJobInfo | None, conditions: list[JSON] | None) -> JSON:
    """The MPIJob's status as mpi-operator spells it: conditions with ``lastUpdateTime``,
    ``replicaStatuses``, ``startTime`` and ``completionTime``. Not ``lastReconcileTime``: mpi-operator v0.8.2
    declares it (``pkg/apis/kubeflow/v2beta1/types.go``) and never writes it, and a time written at every
    reconcile would be a status write that brings another reconcile, without end."""
    rendered = [
        JobCondition(
            type=c["type"],
            status=c["status"],
            reason=c.get("reason"),
            message=c.get("message"),
            last_transition_time=c.get("lastTransitionTime"),
            last_update_time=c.get("lastTransitionTime"),
        ).to_dict()
        for c in conditions or []
    ]
    old = obj.get("status") or {}
    job = info.job if info else None
    obs = info.observed if info else {}
    now = now_rfc3339()
    suspended = bool(job and job.spec.run_policy and job.spec.run_policy.suspend)
    merged = [Condition.model_validate(c) for c in conditions or []]
    replicas = (
        {k: v.to_dict() for k, v in replica_statuses(job, obs.get("launcher"), obs.get("worker")).items()}
        if job is not None
        else None
    )
    return {
        "conditions": rendered or None,
        "replicaStatuses": replicas or None,
        "startTime": old.get("startTime") or (None if suspended or job is None else now),
        "completionTime": old.get("completionTime") or (now if finished_at(merged, MPIJOB_TERMINAL) else None),
    }


def controller(gang: GangScheduler, options: MPIJobOptions | None = None) -> Controller:
    """The MPIJob controller's declaration under gang scheduler ``gang``; it also watches the Pods labelled
    as mpi-operator labels them, for the worker Pods of MPIJobs mpi-operator started
    (:mod:`trainer.mpijob.upstream`)."""
    options = options or MPIJobOptions()
    return declare(
        "mpijob",
        kind(options, gang.name),
        gang,
        telling=TELLING,
        watches=(upstream.WATCHES,),
        status_coalesce_seconds=options.status_coalesce_seconds,
    )
