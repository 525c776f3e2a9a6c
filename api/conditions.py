"""Condition types and reasons this operator sets on its jobs beyond upstream's, as kubeflow/trainer
``pkg/constants/constants.go`` holds its own; and the batch/v1 Job condition types it reads.

Upstream's own are beside their kinds: a TrainJob's in :mod:`api.trainer_v1alpha1` (kubeflow/trainer
``trainjob_types.go``), an MPIJob's in :mod:`api.kubeflow_v2beta1` (kubeflow/mpi-operator
``mpi_job_controller.go``). The rules over conditions (which is True, when a job has finished, how a
problem folds into ``Misconfigured``) are in :mod:`trainer.jobs.conditions`.
"""

from __future__ import annotations

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
