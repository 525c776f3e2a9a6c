"""Condition types and reasons this operator sets on its jobs beyond upstream's, as kubeflow/trainer
``pkg/constants/constants.go`` holds its own; and the batch/v1 Job condition types it reads.

Upstream's own are beside their kinds: a TrainJob's in :mod:`trainer.api.trainer_v1alpha1` (kubeflow/trainer
``trainjob_types.go``), an MPIJob's in :mod:`trainer.api.kubeflow_v2beta1` (kubeflow/mpi-operator
``mpi_job_controller.go``). Which condition is True is read here once (:func:`true_condition`,
:func:`is_true`), for the operator and the SDK alike; the operator's other rules over conditions (when a
job has finished, how a problem folds into ``Misconfigured``) are in the operator's conditions module.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, Protocol, TypeAlias, TypeVar, overload

# batch/v1 Job condition types (k8s.io/api ``batch/v1`` ``JobConditionType``), the two that end a Job.
JOB_COMPLETE = "Complete"
JOB_FAILED = "Failed"

# Condition types of either kind.
COND_MISCONFIGURED = "Misconfigured"
"""The job asks for what cannot be made now (reason says what: a refused child, a queue no scheduler
carries, a node limit); one per job, its problems folded into one message."""
COND_WAITING_FOR_GANG = "WaitingForGang"
"""The job's Jobs stay suspended until its gang scheduler admits its PodGroup."""
COND_REPLICA_FAILURE = "ReplicaFailure"
"""The Job controller cannot create a pod of one of the job's Jobs: apps/v1's
``ReplicaSetReplicaFailure`` / ``DeploymentReplicaFailure``."""

# Condition types of a TrainJob.
COND_RUNTIME_NOT_FOUND = "RuntimeNotFound"
"""The TrainJob's (Cluster)TrainingRuntime does not exist (its reason too)."""
COND_RESTARTING = "RestartingJobSet"
"""JobSet's condition while the set restarts (``JobSetRestarting``, kubernetes-sigs/jobset
``api/jobset/v1alpha2/jobset_types.go``)."""

# Reasons.
REASON_CREATION_FAILED = "TrainJobResourcesCreationFailed"
"""``Misconfigured``, and a Warning event: the apiserver refuses a child (422, 403)."""
REASON_RESOURCE_EXISTS = "ErrResourceExists"
"""A child's name is taken by an object the job does not control (mpi-operator's event reason)."""
REASON_PREVIOUS = "WaitingForPreviousChildren"
"""A child's name is still taken by the child of an earlier job of the same kind and name."""
REASON_RECONCILE_ERROR = "ReconcileError"
"""Reason of the ``Misconfigured`` condition that says an unexpected exception stopped the reconcile."""
REASON_NODE_LIMIT = "NodeLimitExceeded"
"""Reason of the ``Misconfigured`` condition of a started job whose spec asks for more pods than
``--max-nodes-per-job`` allows (a new one fails instead, as admission refuses it)."""
REASON_FAILED_CREATE = "FailedCreate"
"""The Job controller's Event reason (``FailedCreatePodReason``), the ``ReplicaFailure`` condition's
reason too."""


class ConditionLike(Protocol):
    """A condition as a model: :class:`trainer.api.base.Condition`, or another API's with a type and a status
    (a Kueue Workload's)."""

    @property
    def type(self) -> str: ...

    @property
    def status(self) -> str: ...


C = TypeVar("C", bound=ConditionLike)
Conditions: TypeAlias = dict[str, Any] | Iterable[ConditionLike | dict[str, Any]]
"""Conditions as models or as JSON, or an object (JSON) whose ``status.conditions`` are meant."""


def listed_conditions(conditions: Conditions) -> Iterable[ConditionLike | dict[str, Any]]:
    """The conditions themselves: an object's ``status.conditions`` (none when unset), else as given."""
    if isinstance(conditions, dict):
        return list((conditions.get("status") or {}).get("conditions") or [])
    return conditions


def condition_true(c: ConditionLike | dict[str, Any], types: Collection[str] | None = None) -> bool:
    """Whether ``c`` is True (and, unless ``types`` is None, of one of ``types``): the one test of a
    condition's status."""
    type_, status = (c.get("type"), c.get("status")) if isinstance(c, dict) else (c.type, c.status)
    return status == "True" and (types is None or type_ in types)


def first_true(conditions: Conditions, types: Iterable[str]) -> ConditionLike | dict[str, Any] | None:
    """The first condition of ``conditions`` (as :func:`true_condition` takes them) of one of ``types``
    that is True, or None."""
    wanted = set(types)
    return next((c for c in listed_conditions(conditions) if condition_true(c, wanted)), None)


@overload
def true_condition(conditions: Iterable[C], *types: str) -> C | None: ...


@overload
def true_condition(conditions: dict[str, Any] | Iterable[dict[str, Any]], *types: str) -> dict[str, Any] | None: ...


def true_condition(conditions: Conditions, *types: str) -> ConditionLike | dict[str, Any] | None:
    """The first condition of one of ``types`` whose status is ``"True"``, or None. ``conditions``: a list
    of :class:`~trainer.api.base.Condition` (or other :class:`ConditionLike` models), a list of conditions as
    JSON, or an object (JSON) whose ``status.conditions`` are read; the condition comes back in the
    shape it was found in."""
    return first_true(conditions, types)


def is_true(conditions: Conditions, *types: str) -> bool:
    """Whether a condition of one of ``types`` is True (``conditions`` as :func:`true_condition` takes them)."""
    return first_true(conditions, types) is not None
