"""Each job kind's facts, declared once: what the reconciler, admission, the SDK and the CLI all read of a
TrainJob or an MPIJob without knowing which it is.

A kind's logic (how it expands, what children it wants, its conditions and status) is the kind's own
(``trainer/trainjob/``, ``trainer/mpijob/``); these are the facts about it: where it lives, how its
objects parse, how its children and pods are labelled, which conditions end it, whether this operator
manages one, where it is suspended, and how it says it cannot be read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from trainer.api import kubeflow_v2beta1 as mpi
from trainer.api import labels
from trainer.api import optimizationjob as opt
from trainer.api import trainer_v1alpha1 as trainer
from trainer.api.base import Model
from trainer.api.kinds import MPIJOBS, OPTIMIZATION_JOBS, TRAINJOBS, Resource


class RunPolicyAt(NamedTuple):
    """Where a kind's run policy fields (``managedBy``, ``suspend``) are: a path of keys under the object
    (``spec``, or an MPIJob's ``spec.runPolicy``), and the ``managedBy`` value (besides unset or empty)
    that makes this operator the job's manager."""

    path: tuple[str, ...]
    ours: str

    def _field(self, obj: dict[str, Any], name: str) -> Any:
        value: Any = obj
        for key in (*self.path, name):
            value = value.get(key) if isinstance(value, dict) else None
        return value

    def managed_by(self, obj: dict[str, Any]) -> str | None:
        """The object's ``managedBy`` value (None when unset or not a string), read before it is parsed."""
        value = self._field(obj, "managedBy")
        return value if isinstance(value, str) else None

    def suspended(self, obj: dict[str, Any]) -> bool:
        """Whether the object's ``suspend`` is true, read before it is parsed."""
        return bool(self._field(obj, "suspend"))


@dataclass(frozen=True, kw_only=True)
class KindFacts:
    """The facts of one job kind (:data:`TRAINJOB`, :data:`MPIJOB`)."""

    resource: Resource
    """Its group, version, kind and REST collection."""
    model: type[Model]
    """The pydantic model its objects parse into."""
    child_label: str
    """The label every child (Jobs, Service, ConfigMaps, Secrets) and every pod carries, holding the job's
    name; the operator's caches of children list only objects that have it."""
    step_label: str
    """The pod label holding the step: the replicated job (TrainJob) or the replica type (MPIJob)."""
    succeeded: str
    """The condition type of success."""
    terminal: tuple[str, ...]
    """The condition types that, True, end the job, in the order that says which one a job that somehow
    carries two reports (``Failed`` first for a TrainJob, as kubeflow/trainer ``trainjob_types.go``)."""
    run_policy: RunPolicyAt
    """Where its ``managedBy`` and ``suspend`` are, and which ``managedBy`` makes this operator reconcile
    a job (another value leaves it to another controller, MultiKueue's)."""
    invalid_reason: str
    """The reason of the ``Failed`` condition of a job whose spec cannot be read."""
    objective: Callable[[dict[str, Any]], tuple[str, float] | None] | None = None
    """A search's best objective so far, ``(metric, value)`` read from a stored object (an OptimizationJob's:
    :func:`trainer.api.optimizationjob.best_objective`); None for a kind that optimizes nothing."""


TRAINJOB = KindFacts(
    resource=TRAINJOBS,
    model=trainer.TrainJob,
    child_label=labels.JOBSET_NAME,
    step_label=labels.REPLICATED_JOB_NAME,
    succeeded=trainer.COND_COMPLETE,
    terminal=(trainer.COND_FAILED, trainer.COND_COMPLETE),
    run_policy=RunPolicyAt(("spec",), trainer.MANAGED_BY_TRAINER),
    invalid_reason=trainer.REASON_RESOURCES_CREATION_FAILED,
)
"""TrainJob (``trainer.kubeflow.org/v1alpha1``): children and pods labelled as JobSet labels them
(kubeflow/trainer ``pkg/runtime/framework/plugins/jobset``)."""

MPIJOB = KindFacts(
    resource=MPIJOBS,
    model=mpi.MPIJob,
    child_label=labels.JOB_NAME_LABEL,
    step_label=labels.REPLICA_TYPE_LABEL,
    succeeded=mpi.COND_SUCCEEDED,
    terminal=(mpi.COND_SUCCEEDED, mpi.COND_FAILED),
    run_policy=RunPolicyAt(("spec", "runPolicy"), mpi.MANAGED_BY_MPI_OPERATOR),
    invalid_reason="InvalidSpec",
)
"""MPIJob (``kubeflow.org/v2beta1``): children and pods labelled as mpi-operator labels them
(kubeflow/mpi-operator ``pkg/controller/mpi_job_controller.go``)."""

OPTIMIZATIONJOB = KindFacts(
    resource=OPTIMIZATION_JOBS,
    model=opt.OptimizationJob,
    child_label=labels.OPTIMIZATION_JOB_NAME,
    step_label=labels.TRIAL_INDEX,
    succeeded=opt.COND_COMPLETE,
    terminal=(opt.COND_FAILED, opt.COND_COMPLETE),
    run_policy=RunPolicyAt(("spec",), ""),
    invalid_reason="InvalidSpec",
    objective=opt.best_objective,
)
"""OptimizationJob (``trainer.kubeflow.org/v1alpha1``, KEP-3562): its children are its trials, TrainJobs
labelled with its name and their index; it has no ``managedBy``. Not one of :data:`JOB_KINDS`: it runs no
pods of its own."""

JOB_KINDS: tuple[KindFacts, ...] = (TRAINJOB, MPIJOB)
"""Every job kind this operator runs."""


def facts_of(kind: str) -> KindFacts | None:
    """The facts of the job kind named ``kind`` (``TrainJob``, ``MPIJob``), or None."""
    return next((k for k in JOB_KINDS if k.resource.kind == kind), None)
