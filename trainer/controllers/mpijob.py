"""The MPIJob reconciler: cache -> builders -> apply what differs -> runPolicy -> status.

Level-triggered like the TrainJob reconciler, sharing its apply path and gang schedulers. The SSH
Secret is generated once (a new key pair on every reconcile would break running jobs); everything
else is computed by the pure builders of :mod:`trainer.builders.mpijob`. When the job finishes,
``cleanPodPolicy`` is applied (All: the worker Job and all its pods go; Running: the worker Job is
suspended, which stops its running pods and keeps finished ones; None: nothing), the PodGroup is
released, and after ``ttlSecondsAfterFinished`` the MPIJob itself is deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import structlog
from pydantic import ValidationError

from api.base import Condition
from api.kubeflow_v2beta1 import COND_FAILED, JobCondition, MPIJob
from trainer.builders.gang import decorate, gang_conditions
from trainer.builders.mpi import generate_ssh_keypair, ssh_secret
from trainer.builders.mpijob import (
    JOB_NAME_LABEL,
    JOB_ROLE_LABEL,
    build_mpijob_children,
    names,
    validate,
    worker_replicas,
)
from trainer.controllers.apply import Applier
from trainer.gang.base import (
    KUEUE_QUEUE_LABEL,
    VOLCANO_QUEUE_ANNOTATION,
    Facts,
    GangInput,
    GangScheduler,
    PodSet,
    QueueChoice,
)
from trainer.kube.cache import Informer, Key, key_of
from trainer.kube.client import JOBS, JSON, Kube, Resource, register, resource_of
from trainer.kube.events import EventRecorder, now_rfc3339
from trainer.mpijob_status import TERMINAL, desired_conditions, finished_at, replica_statuses
from trainer.status import merge_conditions, transitions

log = structlog.get_logger("trainer.mpijob")
MPIJOBS = register(Resource("kubeflow.org", "v2beta1", "MPIJob", "mpijobs"))
WARNING_REASONS_TYPES = {COND_FAILED, "Misconfigured"}


@dataclass
class MPICaches:
    """The informers the MPIJob reconciler reads (children selected by ``training.kubeflow.org/job-name``)."""

    mpijobs: Informer
    jobs: Informer
    services: Informer
    configmaps: Informer
    secrets: Informer
    facts: Facts


def _parse_time(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def mpijob_gang_input(obj: JSON, job: MPIJob, observed: dict[str, JSON], finished: bool, started: bool) -> GangInput:
    """The gang of an MPIJob: the workers, plus the launcher unless it waits for the workers (then it
    is created after the gang is admitted, so counting it would deadlock: mpi-operator#608).

    Queue precedence: ``runPolicy.schedulingPolicy.queue``, then the label
    ``kueue.x-k8s.io/queue-name`` or the annotation ``scheduling.volcano.sh/queue-name``.
    """
    specs = job.spec.mpi_replica_specs
    sets = []
    if specs.worker is not None and worker_replicas(job) > 0:
        sets.append(PodSet("worker", 1, worker_replicas(job), specs.worker.template))
    if specs.launcher is not None and job.spec.launcher_creation_policy != "WaitForWorkersReady":
        sets.append(PodSet("launcher", 1, 1, specs.launcher.template))
    policy = job.spec.run_policy.scheduling_policy if job.spec.run_policy else None
    labels, annotations = job.metadata.labels or {}, job.metadata.annotations or {}
    if policy is not None and policy.queue:
        queue = QueueChoice(policy.queue, "runPolicy.schedulingPolicy.queue", "")
    elif KUEUE_QUEUE_LABEL in labels:
        queue = QueueChoice(labels[KUEUE_QUEUE_LABEL], f"label {KUEUE_QUEUE_LABEL}", "kueue")
    elif VOLCANO_QUEUE_ANNOTATION in annotations:
        queue = QueueChoice(annotations[VOLCANO_QUEUE_ANNOTATION], f"annotation {VOLCANO_QUEUE_ANNOTATION}", "volcano")
    else:
        queue = QueueChoice(None)
    return GangInput(
        owner=obj,
        pod_sets=sets,
        queue=queue,
        priority_class=policy.priority_class if policy else None,
        min_available=policy.min_available if policy else None,
        min_resources={k: str(v) for k, v in policy.min_resources.items()} if policy and policy.min_resources else None,
        schedule_timeout_seconds=policy.schedule_timeout_seconds if policy else None,
        finished=finished,
        started=started,
    )


class MPIJobReconciler:
    """Reconciles one MPIJob per call. Raise to retry with backoff; return seconds to requeue after."""

    def __init__(self, kube: Kube, caches: MPICaches, events: EventRecorder, gang: GangScheduler) -> None:
        self.kube, self.caches, self.events, self.gang = kube, caches, events, gang
        self.applier = Applier(kube, events)

    async def reconcile(self, key: Key) -> float | None:
        """Bring the children and status of MPIJob ``key`` in line with its spec."""
        obj = self.caches.mpijobs.get(*key)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return None
        try:
            job = MPIJob.model_validate(obj)
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(x) for x in err["loc"])
            await self._write_status(
                obj,
                None,
                [Condition(type=COND_FAILED, status="True", reason="InvalidSpec", message=f"{field}: {err['msg']}")],
                {},
            )
            return None
        if not job.managed_by_us:
            return None
        policy = job.spec.run_policy
        current = [Condition.model_validate(c.to_dict()) for c in (job.status.conditions if job.status else None) or []]
        finished = any(c.type in TERMINAL and c.status == "True" for c in current)

        queue = policy.scheduling_policy.queue if policy and policy.scheduling_policy else None
        if self.gang.name == "kueue" and queue and KUEUE_QUEUE_LABEL not in (job.metadata.labels or {}):
            # Kueue reads only its label: carry schedulingPolicy.queue over.
            await self.kube.merge_patch(MPIJOBS, *key, {"metadata": {"labels": {KUEUE_QUEUE_LABEL: queue}}})
            return None

        invalid = validate(job)
        observed = {
            str(j["metadata"]["labels"].get(JOB_ROLE_LABEL)): j
            for j in self.caches.jobs.owned_by(str(job.metadata.uid))
        }
        started = any(not (j.get("spec") or {}).get("suspend") for j in observed.values())
        plan = self.gang.plan(
            mpijob_gang_input(obj, job, observed, finished or bool(invalid), started), self.caches.facts
        )
        for res, ns, name in plan.delete:
            await self.kube.delete(res, ns, name)

        requeue: float | None = None
        if finished:
            await self._clean_pods(job, observed)
            requeue = await self._ttl(job, current)
            if requeue == 0:
                return None
        elif not invalid:
            await self._ensure_secret(obj, job)
            suspend = bool(policy and policy.suspend)
            children = build_mpijob_children(obj, job, observed, suspend or plan.hold)
            for pod_group in plan.apply:
                informer_obj = self.caches.facts.get(resource_of(pod_group), *key_of(pod_group))
                await self.applier.apply(obj, pod_group, informer_obj)
            await self.applier.apply(obj, children.service, self.caches.services.get(*key_of(children.service)))
            await self.applier.apply(obj, children.config_map, self.caches.configmaps.get(*key_of(children.config_map)))
            jobs = [j for j in (children.worker_job, children.launcher_job) if j is not None]
            for desired in decorate(jobs, plan, set(), set_label=JOB_ROLE_LABEL):
                await self.applier.apply_job(obj, desired, self.caches.jobs.get(*key_of(desired)))

        conditions = desired_conditions(job, observed.get("launcher"), observed.get("worker"), current, invalid)
        if not finished and not invalid:
            conditions += gang_conditions(plan)
        statuses = {
            k: v.to_dict() for k, v in replica_statuses(job, observed.get("launcher"), observed.get("worker")).items()
        }
        await self._write_status(obj, job, conditions, statuses)
        return requeue

    async def _ensure_secret(self, owner: JSON, job: MPIJob) -> None:
        name = names(job)["ssh"]
        if self.caches.secrets.get(job.metadata.namespace, name) is not None:
            return
        private, public = generate_ssh_keypair()
        secret = ssh_secret(owner, name, private, public)
        secret["metadata"]["labels"] = {JOB_NAME_LABEL: str(job.metadata.name)}
        await self.applier.apply(owner, secret, None)

    async def _clean_pods(self, job: MPIJob, observed: dict[str, JSON]) -> None:
        policy = (job.spec.run_policy.clean_pod_policy if job.spec.run_policy else None) or "None"
        worker = observed.get("worker")
        if worker is None or policy == "None":
            return
        ns, name = key_of(worker)
        if policy == "All":
            if await self.kube.delete(JOBS, ns, name):
                log.info("cleanPodPolicy All: deleted the worker Job", name=name)
        elif not (worker.get("spec") or {}).get("suspend"):
            await self.kube.merge_patch(JOBS, ns, name, {"spec": {"suspend": True}})
            log.info("cleanPodPolicy Running: suspended the worker Job, its running pods stop", name=name)

    async def _ttl(self, job: MPIJob, current: list[Condition]) -> float | None:
        """Delete the job once its TTL after finishing has passed (returns 0); else seconds to wait."""
        ttl = job.spec.run_policy.ttl_seconds_after_finished if job.spec.run_policy else None
        done = finished_at(current)
        if ttl is None or done is None:
            return None
        left = ttl - (datetime.now(UTC) - _parse_time(done)).total_seconds()
        if left > 0:
            return left
        await self.kube.delete(MPIJOBS, job.metadata.namespace, str(job.metadata.name))
        log.info("ttlSecondsAfterFinished passed: deleted the MPIJob")
        return 0

    async def _write_status(
        self, obj: JSON, job: MPIJob | None, desired: list[Condition], replicas: dict[str, JSON]
    ) -> None:
        old = obj.get("status") or {}
        current = [Condition.model_validate(c) for c in old.get("conditions") or []]
        now = now_rfc3339()
        merged = merge_conditions(current, desired, now)
        conditions = [
            JobCondition(
                type=c.type,
                status=c.status,
                reason=c.reason,
                message=c.message,
                last_transition_time=c.last_transition_time,
                last_update_time=c.last_transition_time,
            ).to_dict()
            for c in merged
        ]
        status: JSON = {"conditions": conditions or None, "replicaStatuses": replicas or None}
        suspended = bool(job and job.spec.run_policy and job.spec.run_policy.suspend)
        status["startTime"] = old.get("startTime") or (None if suspended or job is None else now)
        status["completionTime"] = old.get("completionTime") or (now if finished_at(merged) else None)
        keys = ("conditions", "replicaStatuses", "startTime", "completionTime")
        if {k: old.get(k) for k in keys} == {k: status.get(k) for k in keys}:
            return
        meta = obj["metadata"]
        # Events first: whoever sees the new condition finds its event too.
        for cond in transitions(current, merged):
            warning = cond.type in WARNING_REASONS_TYPES and cond.status == "True"
            await self.events.emit(obj, "Warning" if warning else "Normal", cond.reason, cond.message)
        await self.kube.patch_status(MPIJOBS, meta.get("namespace"), meta["name"], status)
