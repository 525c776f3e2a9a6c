"""The TrainJob controller: its declaration and what its reconcile does that MPIJob's does not.

Declared once (:func:`controller`): TrainJobs; the Jobs, Services, ConfigMaps and Secrets it owns,
each carrying ``jobset.sigs.k8s.io/jobset-name``; the gang scheduler's owned objects (PodGroups);
the (Cluster)TrainingRuntimes, mapped to the TrainJobs that reference them; cluster objects the gang
scheduler reads (Volcano Queues), mapped to every TrainJob. The reconcile is
:class:`~trainer.controllers.reconciler.Reconciler`'s; this module supplies the runtime info
(:func:`trainer.runtime_info.runtime_info`), the children (:func:`trainer.builders.jobs.build_children`,
the MPI SSH Secret made once) and the conditions (:mod:`trainer.status`). Children carry a
controller owner reference, so deleting the TrainJob lets the garbage collector remove them.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from pydantic import ValidationError

from api.base import Condition
from api.kinds import (
    CLUSTER_TRAINING_RUNTIMES,
    JOBS,
    SECRETS,
    TRAINING_RUNTIMES,
    TRAINJOBS,
)
from api.trainer_v1alpha1 import (
    COND_FAILED,
    REASON_RESOURCES_CREATION_FAILED,
    TrainingRuntime,
    TrainJob,
    TrainJobStatus,
    runtime_from_dict,
)
from trainer.builders import trainjob_mpi
from trainer.builders.jobs import build_children
from trainer.builders.labels import JOBSET_NAME
from trainer.builders.mpi import new_ssh_secret
from trainer.controller import Controller, Key, Reader, Watches
from trainer.controllers.reconciler import Blocked, Desired, Once, Reconciler, declare, first_error
from trainer.gang.base import COND_MISCONFIGURED, GangInput, GangPlan, GangScheduler, decorate, gang_conditions
from trainer.kube.cache import key_of
from trainer.kube.client import JSON
from trainer.runtime_info import RuntimeInfo, runtime_info, runtime_ref
from trainer.status import COND_RUNTIME_NOT_FOUND, desired_conditions, job_finished, runtime_not_found


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

    def invalid(self, obj: JSON, message: str) -> list[Condition]:
        kept = [
            Condition.model_validate(c)
            for c in (obj.get("status") or {}).get("conditions") or []
            if c.get("type") != COND_FAILED
        ]
        failed = Condition(type=COND_FAILED, status="True", reason=REASON_RESOURCES_CREATION_FAILED, message=message)
        return [*kept, failed]

    def info(self, obj: JSON, job: TrainJob) -> RuntimeInfo | Blocked:
        runtime_obj = runtime_of(obj, self.reader)
        kind, name = runtime_ref(obj)
        if runtime_obj is None:
            ns = job.metadata.namespace if kind == TrainingRuntime.KIND else None
            return Blocked([runtime_not_found(kind, name, ns)])
        try:
            runtime = runtime_from_dict(runtime_obj)
        except ValidationError as e:
            return Blocked(self.invalid(obj, f"runtime {name!r} is invalid: {first_error(e)}"))
        observed = self.reader.owned(JOBS, str(job.metadata.uid))
        return runtime_info(obj, job, runtime.spec, runtime_obj, observed, self.gang.name)

    def gang_input(self, info: RuntimeInfo) -> GangInput:
        return info.gang_input()

    def desired(self, info: RuntimeInfo, plan: GangPlan) -> Desired:
        out = Desired(delete=list(plan.delete))
        if info.finished:
            # As JobSet does: a finished TrainJob's Jobs that still run are deleted, so their pods
            # stop holding nodes (e.g. MPI workers once the launcher is done).
            out.delete += [(JOBS, *key_of(j)) for j in info.observed if job_finished(j) is None]
            return out
        children = build_children(info, info.suspended or plan.hold)
        out.apply += plan.apply
        mpi = info.runtime.ml_policy.mpi if info.runtime.ml_policy else None
        if mpi is not None:
            name, labels = trainjob_mpi.secret_name(info.job), {JOBSET_NAME: str(info.job.metadata.name)}
            make = partial(new_ssh_secret, info.obj, name, labels)
            out.once.append(Once(SECRETS, str(info.job.metadata.namespace), name, make))
        out.apply += children.config_maps
        if children.service is not None:
            out.apply.append(children.service)
        out.apply += decorate(children.jobs, plan, info.not_in_gang)
        return out

    def conditions(self, info: RuntimeInfo, plan: GangPlan) -> list[Condition]:
        current = (info.job.status.conditions if info.job.status else None) or []
        out = desired_conditions(info, current)
        return out if info.finished else out + gang_conditions(plan)

    def status(self, obj: JSON, info: RuntimeInfo | None, conditions: list[JSON] | None) -> JSON:
        if info is None:
            return {"conditions": conditions}
        jobs_status = TrainJobStatus(jobs_status=info.statuses).to_dict().get("jobsStatus")
        return {"conditions": conditions, "jobsStatus": jobs_status}


def controller(gang: GangScheduler) -> Controller:
    """The TrainJob controller's declaration under gang scheduler ``gang``: also watches the
    (Cluster)TrainingRuntimes, each mapped to the TrainJobs that reference it."""
    runtimes = (
        Watches(TRAINING_RUNTIMES, trainjobs_of_runtime),
        Watches(CLUSTER_TRAINING_RUNTIMES, trainjobs_of_runtime),
    )
    return declare("trainjob", TrainJobReconciler, JOBSET_NAME, gang, runtimes)
