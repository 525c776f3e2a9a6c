"""The TrainJob reconciler: cache -> builders -> apply what differs -> status.

``reconcile(key)`` is level-triggered and idempotent: it reads only caches, computes the desired
children with the pure builders, writes the ones that differ with server-side apply (field manager
``trainer``), and derives the status from the observed Jobs. Children carry a controller owner
reference, so deleting the TrainJob lets the garbage collector remove them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import structlog
from pydantic import ValidationError

from api.base import Condition
from api.trainer_v1alpha1 import (
    COND_COMPLETE,
    COND_FAILED,
    REASON_RESOURCES_CREATION_FAILED,
    ClusterTrainingRuntime,
    JobSetSpec,
    JobStatus,
    TrainingRuntime,
    TrainJob,
    TrainJobStatus,
    runtime_from_dict,
)
from trainer.builders import trainjob_mpi
from trainer.builders.gang import completed_first, decorate, gang_conditions, trainjob_gang_input
from trainer.builders.jobs import build_children, trainer_rjob
from trainer.builders.labels import JOBSET_NAME
from trainer.builders.mpi import generate_ssh_keypair, ssh_secret
from trainer.controllers.apply import Applier
from trainer.gang.base import COND_MISCONFIGURED, Facts, GangScheduler
from trainer.kube.cache import Informer, Key, key_of
from trainer.kube.client import JOBS, JSON, TRAINJOBS, Kube, Resource, resource_of
from trainer.kube.events import EventRecorder, now_rfc3339
from trainer.status import (
    COND_RUNTIME_NOT_FOUND,
    Observed,
    desired_conditions,
    job_finished,
    jobs_status,
    merge_conditions,
    runtime_not_found,
    transitions,
)

log = structlog.get_logger("trainer.trainjob")

WARNING_CONDITIONS = {COND_FAILED, COND_RUNTIME_NOT_FOUND, COND_MISCONFIGURED}


@dataclass
class Caches:
    """The informers the reconciler reads."""

    trainjobs: Informer
    runtimes: Informer
    cluster_runtimes: Informer
    jobs: Informer
    services: Informer
    configmaps: Informer
    secrets: Informer
    gang: dict[Resource, Informer] = field(default_factory=dict)
    """The informers the gang scheduler watches, by resource."""

    def facts(self) -> Facts:
        """A read-only view of the gang scheduler's caches."""

        def get(res: Resource, namespace: str | None, name: str) -> JSON | None:
            informer = self.gang.get(res)
            return informer.get(namespace, name) if informer else None

        def items(res: Resource) -> list[JSON]:
            informer = self.gang.get(res)
            return informer.items() if informer else []

        return Facts(get=get, items=items)


class TrainJobReconciler:
    """Reconciles one TrainJob per call. Raise to retry with backoff; return seconds to requeue after."""

    def __init__(self, kube: Kube, caches: Caches, events: EventRecorder, gang: GangScheduler) -> None:
        self.kube, self.caches, self.events, self.gang = kube, caches, events, gang
        self.applier = Applier(kube, events)

    def runtime_for(self, job: TrainJob) -> JSON | None:
        """The cached runtime the job references, or None."""
        ref = job.spec.runtime_ref
        if ref.kind == TrainingRuntime.KIND:
            return self.caches.runtimes.get(job.metadata.namespace, ref.name)
        return self.caches.cluster_runtimes.get(None, ref.name)

    async def reconcile(self, key: Key) -> float | None:
        """Bring the children and status of TrainJob ``key`` in line with its spec."""
        obj = self.caches.trainjobs.get(*key)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            return None
        try:
            job = TrainJob.model_validate(obj)
        except ValidationError as e:
            await self._fail_invalid(obj, f"invalid TrainJob: {_first_error(e)}")
            return None
        if not job.managed_by_us:
            return None
        runtime_obj = self.runtime_for(job)
        if runtime_obj is None:
            kind = job.spec.runtime_ref.kind or ClusterTrainingRuntime.KIND
            ns = job.metadata.namespace if kind == TrainingRuntime.KIND else None
            await self._write_status(obj, job, [runtime_not_found(kind, job.spec.runtime_ref.name, ns)], None)
            return None
        try:
            runtime = runtime_from_dict(runtime_obj)
        except ValidationError as e:
            await self._fail_invalid(obj, f"runtime {job.spec.runtime_ref.name!r} is invalid: {_first_error(e)}")
            return None

        current = (job.status.conditions if job.status else None) or []
        finished = any(c.type in (COND_COMPLETE, COND_FAILED) and c.status == "True" for c in current)
        observed = self.caches.jobs.owned_by(str(job.metadata.uid))
        started = any(not (j.get("spec") or {}).get("suspend") for j in observed)
        gang_input = trainjob_gang_input(obj, job, runtime.spec, self.gang.name, finished, started)
        plan = self.gang.plan(gang_input, self.caches.facts())
        for res, ns, name in plan.delete:
            if await self.kube.delete(res, ns, name):
                log.info("deleted", kind=res.kind, name=name)
        suspend = bool(job.spec.suspend)
        children = build_children(job, runtime.spec, observed, suspend or plan.hold)
        if finished:
            # As JobSet does: a finished TrainJob's Jobs that still run are deleted, so their pods
            # stop holding nodes (e.g. MPI workers once the launcher is done).
            for child in observed:
                if job_finished(child) is None and await self.kube.delete(JOBS, *key_of(child)):
                    log.info("deleted the active Job of a finished TrainJob", name=child["metadata"]["name"])
        else:
            for pod_group in plan.apply:
                informer = self.caches.gang.get(resource_of(pod_group))
                await self.applier.apply(obj, pod_group, informer.get(*key_of(pod_group)) if informer else None)
            if runtime.spec.ml_policy is not None and runtime.spec.ml_policy.mpi is not None:
                await self._ensure_ssh_secret(obj, job)
            for cm in children.config_maps:
                await self.applier.apply(obj, cm, self.caches.configmaps.get(*key_of(cm)))
            if children.service is not None:
                await self.applier.apply(obj, children.service, self.caches.services.get(*key_of(children.service)))
            for desired in decorate(children.jobs, plan, completed_first(runtime.spec)):
                await self.applier.apply_job(obj, desired, self.caches.jobs.get(*key_of(desired)))
            for rjob, why in children.waiting.items():
                log.debug("replicated job waiting", rjob=rjob, why=why)

        rjobs = (runtime.spec.template.spec.replicated_jobs if runtime.spec.template.spec else None) or []
        statuses = jobs_status(rjobs, observed)
        trainer = trainer_rjob(runtime.spec)
        obs = Observed(
            suspended=suspend,
            jobs=observed,
            template=runtime.spec.template.spec or JobSetSpec(),
            trainer_rjob=trainer.name if trainer else None,
        )
        conditions = desired_conditions(obs, statuses, current)
        if not finished:
            conditions += gang_conditions(plan)
        await self._write_status(obj, job, conditions, statuses)
        return None

    async def _ensure_ssh_secret(self, owner: JSON, job: TrainJob) -> None:
        """Create the MPI SSH Secret once: a new key pair on every reconcile would break the job."""
        name = trainjob_mpi.secret_name(job)
        if self.caches.secrets.get(job.metadata.namespace, name) is not None:
            return
        private, public = generate_ssh_keypair()
        secret = ssh_secret(owner, name, private, public)
        secret["metadata"]["labels"] = {JOBSET_NAME: str(job.metadata.name)}
        await self.applier.apply(owner, secret, None)

    async def _write_status(
        self, obj: JSON, job: TrainJob, desired: list[Condition], statuses: list[JobStatus] | None
    ) -> None:
        current = (job.status.conditions if job.status else None) or []
        merged = merge_conditions(current, desired, now_rfc3339(), job.metadata.generation)
        new = TrainJobStatus(conditions=merged or None, jobs_status=statuses)
        old_status = obj.get("status") or {}
        new_status = new.to_dict()
        comparable_old = {k: old_status.get(k) for k in ("conditions", "jobsStatus")}
        comparable_new = {k: new_status.get(k) for k in ("conditions", "jobsStatus")}
        if comparable_old == comparable_new:
            return
        ns, name = str(job.metadata.namespace), str(job.metadata.name)
        # Events first: whoever sees the new condition finds its event too.
        for cond in transitions(current, merged):
            warning = cond.type in WARNING_CONDITIONS and cond.status == "True"
            await self.events.emit(obj, "Warning" if warning else "Normal", cond.reason, cond.message)
        await self.kube.patch_status(
            TRAINJOBS,
            ns,
            name,
            {"conditions": new_status.get("conditions"), "jobsStatus": new_status.get("jobsStatus")},
        )

    async def _fail_invalid(self, obj: JSON, message: str) -> None:
        meta = obj.get("metadata") or {}
        cond = Condition(type=COND_FAILED, status="True", reason=REASON_RESOURCES_CREATION_FAILED, message=message)
        status = obj.get("status") or {}
        if any(c.get("type") == COND_FAILED and c.get("message") == message for c in status.get("conditions") or []):
            return
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != COND_FAILED]
        conditions.append({**cond.model_copy(update={"last_transition_time": now_rfc3339()}).to_dict()})
        await self.events.emit(obj, "Warning", cond.reason, message)
        await self.kube.patch_status(TRAINJOBS, meta.get("namespace"), meta["name"], {"conditions": conditions})


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    loc = ".".join(str(x) for x in err["loc"])
    return f"{loc}: {err['msg']}"
