"""The TrainJob controller: its declaration and what its reconcile does that MPIJob's does not.

Declared once (:func:`controller`): TrainJobs; the Jobs, Services, ConfigMaps, Secrets and
PersistentVolumeClaims (``volumeClaimPolicies``) it owns,
each carrying ``jobset.sigs.k8s.io/jobset-name``; the gang scheduler's owned objects (PodGroups);
the (Cluster)TrainingRuntimes, mapped to the TrainJobs that reference them; cluster objects the gang
scheduler reads (Volcano Queues), mapped to every TrainJob. The reconcile is
:class:`~trainer.controllers.reconciler.Reconciler`'s; this module supplies the runtime info
(:func:`trainer.runtime.runtime_info`), the children (:func:`trainer.builders.jobs.build_children`,
the MPI SSH Secret made once) and the conditions (:mod:`trainer.status`). Children carry a
controller owner reference, so deleting the TrainJob lets the garbage collector remove them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from functools import partial

from pydantic import ValidationError

from api.base import Condition
from api.kinds import (
    CLUSTER_TRAINING_RUNTIMES,
    CONFIGMAPS,
    JOBS,
    PERSISTENT_VOLUME_CLAIMS,
    SECRETS,
    SERVICES,
    TRAINING_RUNTIMES,
    TRAINJOBS,
)
from api.trainer_v1alpha1 import (
    COND_COMPLETE,
    COND_FAILED,
    COND_SUSPENDED,
    MANAGED_BY_TRAINER,
    REASON_RESOURCES_CREATION_FAILED,
    REASON_RESUMED,
    TrainingRuntime,
    TrainJob,
    TrainJobStatus,
    runtime_from_dict,
)
from trainer.builders import volume_claims
from trainer.builders.jobs import build_children
from trainer.builders.labels import JOBSET_NAME
from trainer.controller import Controller, Key, Reader, Watches
from trainer.controllers.reconciler import Blocked, Desired, Once, Reconciler, declare, first_error
from trainer.gang.base import COND_MISCONFIGURED, GangInput, GangPlan, GangScheduler, decorate, gang_conditions
from trainer.kube.cache import key_of
from trainer.kube.client import JSON
from trainer.runtime import (
    SNAPSHOT_SUFFIX,
    RuntimeInfo,
    runtime_info,
    runtime_of_snapshot,
    runtime_ref,
    snapshot_config_map,
    snapshot_name,
)
from trainer.runtime_validation import runtime_errors, trainjob_errors
from trainer.status import COND_RUNTIME_NOT_FOUND, desired_conditions, job_finished, jobs_status, runtime_not_found

TTL_CHILDREN = (SERVICES, CONFIGMAPS, SECRETS, PERSISTENT_VOLUME_CLAIMS)
"""Children besides Jobs that ``ttlSecondsAfterFinished`` deletes (those the TrainJob owns: a claim its
``volumeClaimPolicies`` retain has no owner reference and stays)."""


def trainjobs_of_runtime(runtime: JSON, reader: Reader) -> Iterable[Key]:
    """The TrainJobs that reference ``runtime`` (a TrainingRuntime only from its own namespace)."""
    ns, name = key_of(runtime)
    kind = runtime.get("kind", "")
    for tj in reader.items(TRAINJOBS):
        if runtime_ref(tj) == (kind, name) and (kind != TrainingRuntime.KIND or key_of(tj)[0] == ns):
            yield key_of(tj)


def runtime_of(obj: JSON, reader: Reader) -> JSON | None:
    """The cached runtime a TrainJob references, or None."""
    kind, name = runtime_ref(obj)
    if kind == TrainingRuntime.KIND:
        return reader.get(TRAINING_RUNTIMES, key_of(obj)[0], name)
    return reader.get(CLUSTER_TRAINING_RUNTIMES, None, name)


class TrainJobReconciler(Reconciler[TrainJob, RuntimeInfo]):
    """Reconciles one TrainJob per call."""

    resource = TRAINJOBS
    model = TrainJob
    warning_conditions = frozenset({COND_FAILED, COND_RUNTIME_NOT_FOUND, COND_MISCONFIGURED})
    succeeded_condition = COND_COMPLETE
    progress_fields = frozenset({"jobsStatus"})
    creation_event = False  # as JobSet and Trainer: the Job controller tells each pod it creates
    settles_children = True  # written() reads the Jobs just written into jobsStatus

    def invalid(self, obj: JSON, message: str) -> list[Condition]:
        failed = Condition(type=COND_FAILED, status="True", reason=REASON_RESOURCES_CREATION_FAILED, message=message)
        return [*self._kept(obj, COND_FAILED), failed]

    def managed_by_us(self, obj: JSON) -> bool:
        return (obj.get("spec") or {}).get("managedBy") in (None, "", MANAGED_BY_TRAINER)

    def info(self, obj: JSON, job: TrainJob) -> RuntimeInfo | Blocked:
        ns = str(job.metadata.namespace)
        snapshot = self.reader.get(CONFIGMAPS, ns, snapshot_name(str(job.metadata.name)))
        runtime_obj = runtime_of_snapshot(snapshot) if snapshot is not None else runtime_of(obj, self.reader)
        kind, name = runtime_ref(obj)
        if runtime_obj is None:
            if any(c.type in (COND_COMPLETE, COND_FAILED) and c.status == "True" for c in _conditions(job)):
                return Blocked(None)  # finished without a snapshot (made before them): the outcome stays
            return Blocked([runtime_not_found(kind, name, ns if kind == TrainingRuntime.KIND else None)])
        try:
            runtime = runtime_from_dict(runtime_obj)
        except ValidationError as e:
            return Blocked(self.invalid(obj, f"runtime {name!r} is invalid: {first_error(e)}"))
        observed = self.reader.owned(JOBS, str(job.metadata.uid))
        # What the webhook refuses is said here when it does not run; a started or finished job is left be.
        settled = bool(observed) or any(
            c.type in (COND_COMPLETE, COND_FAILED) and c.status == "True" for c in _conditions(job)
        )
        problems = [] if settled else runtime_errors(runtime.spec)
        if problems:
            return Blocked(self.invalid(obj, f"runtime {name!r} is invalid: {'; '.join(problems)}"))
        info = runtime_info(obj, job, runtime.spec, runtime_obj, observed, self.gang.name, injection=self.injection)
        problems = [] if settled else trainjob_errors(info, self.max_nodes_per_job)
        if problems:
            return Blocked(self.invalid(obj, "; ".join(problems)))
        return info

    def gang_input(self, info: RuntimeInfo) -> GangInput:
        return info.gang_input()

    def desired(self, info: RuntimeInfo, plan: GangPlan) -> Desired:
        ns, uid = str(info.job.metadata.namespace), str(info.job.metadata.uid)
        out = Desired(delete=list(plan.delete))
        out.once.append(Once(CONFIGMAPS, ns, snapshot_name(str(info.job.metadata.name)), self._snapshot(info)))
        jobs = [*info.previous, *info.observed]
        if info.finished or (info.deadline_left is not None and info.deadline_left <= 0):
            # As JobSet does: a finished TrainJob's Jobs that still run are deleted, so their pods
            # stop holding nodes (e.g. MPI workers once the launcher is done); so does a deadline.
            out.delete += [(JOBS, *key_of(j)) for j in jobs if job_finished(j) is None and not _deleting(j)]
            if info.ttl_left is not None and info.ttl_left <= 0:
                # ttlSecondsAfterFinished: the group goes (JobSet deletes the JobSet); the TrainJob and
                # its runtime snapshot stay, with their outcome.
                out.delete += [(JOBS, *key_of(j)) for j in jobs if job_finished(j) is not None and not _deleting(j)]
                for res in TTL_CHILDREN:
                    out.delete += [
                        (res, *key_of(o))
                        for o in self.reader.owned(res, uid)
                        if not o["metadata"]["name"].endswith(SNAPSHOT_SUFFIX) and not _deleting(o)
                    ]
            return out
        if info.previous:
            # A restart: every Job of the earlier attempt goes, with its Pods (foreground), before
            # any Job of the new attempt is created: two attempts never run at once.
            out.delete_foreground += [(JOBS, *key_of(j)) for j in info.previous if not _deleting(j)]
        restarting = info.decision is not None and not info.decision.fail
        children = build_children(info, info.suspended or plan.hold)
        out.apply += plan.apply
        for child in info.policy.created_once(info):
            out.once.append(Once(child.resource, ns, child.name, child.make))
        for claim in volume_claims.claims(info.obj, info.template.volume_claim_policies or []):
            meta = claim["metadata"]
            out.once.append(Once(PERSISTENT_VOLUME_CLAIMS, meta["namespace"], meta["name"], partial(dict, claim)))
        out.apply += children.config_maps
        if children.service is not None:
            out.apply.append(children.service)
        if not info.previous and not restarting:
            out.apply += decorate(children.jobs, plan, info.not_in_gang)
        return out

    def written(self, info: RuntimeInfo, desired: Desired) -> RuntimeInfo:
        # The Jobs just created or changed count in jobsStatus at once (a new suspended Job is
        # ``suspended: 1``), not only once the watch brings them back.
        jobs = {key_of(j): j for j in info.observed}
        changed = False
        for obj in desired.apply:
            if obj.get("kind") != JOBS.kind:
                continue
            key = key_of(obj)
            latest = self.own_writes.latest(self.reader, JOBS, *key)
            if latest is not None and latest is not jobs.get(key):
                jobs[key], changed = latest, True
        if not changed:
            return info
        observed = list(jobs.values())
        return dataclasses.replace(info, observed=observed, statuses=jobs_status(info.rjobs, observed))

    def _snapshot(self, info: RuntimeInfo) -> Callable[[], JSON]:
        runtime_obj = info.runtime_obj or {}
        return lambda: snapshot_config_map(info.obj, runtime_obj)

    def events(self, info: RuntimeInfo | None) -> list[tuple[str, str, str]]:
        out = []
        if info is not None and info.decision is not None and not info.decision.fail:
            out.append(("Warning", info.decision.reason, info.decision.message))
        suspended = next((c for c in _conditions(info.job) if c.type == COND_SUSPENDED), None) if info else None
        if info is not None and not self.running_condition and not info.suspended and suspended is not None:
            out.append(("Normal", REASON_RESUMED, "TrainJob is resumed"))  # no Resumed condition to tell it
        return out

    def requeue_after(self, info: RuntimeInfo) -> float | None:
        waits = [t for t in (info.deadline_left, info.ttl_left) if t is not None and t > 0]
        return min(waits) if waits else None

    def conditions(self, info: RuntimeInfo, plan: GangPlan) -> list[Condition]:
        current = (info.job.status.conditions if info.job.status else None) or []
        out = desired_conditions(info, current, self.running_condition)
        return out if info.finished else out + gang_conditions(plan)

    def status(self, obj: JSON, info: RuntimeInfo | None, conditions: list[JSON] | None) -> JSON:
        if info is None:
            return {"conditions": conditions}
        old = obj.get("status") or {}
        if info.finished:  # the outcome is final, jobsStatus included (the Jobs may go by TTL)
            jobs_status = old.get("jobsStatus")
        else:
            jobs_status = TrainJobStatus(jobs_status=info.statuses).to_dict().get("jobsStatus")
        restarts, counted = info.restarts, info.counted_restarts
        if info.decision is not None and not info.decision.fail:
            restarts, counted = restarts + 1, counted + int(info.decision.counted)
        return {
            "conditions": conditions,
            "jobsStatus": jobs_status,
            "restarts": restarts or None,
            "restartsCountTowardsMax": counted or None,
        }


def _conditions(job: TrainJob) -> list[Condition]:
    return list((job.status.conditions if job.status else None) or [])


def _deleting(obj: JSON) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def controller(gang: GangScheduler) -> Controller:
    """The TrainJob controller's declaration under gang scheduler ``gang``: also watches the
    (Cluster)TrainingRuntimes, each mapped to the TrainJobs that reference it."""
    runtimes = (
        Watches(TRAINING_RUNTIMES, trainjobs_of_runtime),
        Watches(CLUSTER_TRAINING_RUNTIMES, trainjobs_of_runtime),
    )
    return declare("trainjob", TrainJobReconciler, JOBSET_NAME, gang, runtimes, (PERSISTENT_VOLUME_CLAIMS,))
