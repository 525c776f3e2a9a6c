"""MPIJob, API group ``kubeflow.org/v2beta1``.

Field for field with kubeflow/mpi-operator ``pkg/apis/kubeflow/v2beta1/types.go`` (and its
defaults in ``default.go``): slotsPerWorker (1), runLauncherAsWorker (false), sshAuthMountPath
(/root/.ssh), launcherCreationPolicy (AtStartup), mpiImplementation (OpenMPI), mpiReplicaSpecs
{Launcher, Worker}, runPolicy {cleanPodPolicy (None), ttlSecondsAfterFinished,
activeDeadlineSeconds, backoffLimit, suspend (false), managedBy, schedulingPolicy}.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from trainer.api.base import KubeObject, Model, ObjectMeta, Quantity, cel
from trainer.api.kinds import KUBEFLOW_GROUP, KUBEFLOW_VERSION, MPIJOBS

GROUP, VERSION = KUBEFLOW_GROUP, KUBEFLOW_VERSION
API_VERSION = f"{GROUP}/{VERSION}"

MANAGED_BY_MPI_OPERATOR = "kubeflow.org/mpi-operator"
MANAGED_BY_MULTIKUEUE = "kueue.x-k8s.io/multikueue"
LAUNCHER = "Launcher"
WORKER = "Worker"

# Condition types and reasons (mpi-operator pkg/controller/mpi_job_controller.go).
COND_CREATED = "Created"
COND_RUNNING = "Running"
COND_RESTARTING = "Restarting"
COND_SUCCEEDED = "Succeeded"
COND_FAILED = "Failed"
COND_SUSPENDED = "Suspended"


class ReplicaSpec(Model):
    """One replica type (kubeflow/common ``ReplicaSpec``)."""

    replicas: int | None = Field(default=None, ge=0)
    """Number of pods. Defaults to 1 for the launcher, 0 for workers."""
    template: KubeObject
    """The Pod template (``corev1.PodTemplateSpec``)."""
    restart_policy: Literal["Always", "OnFailure", "Never", "ExitCode"] | None = None
    """Restart policy of the pods: Never (launcher) or Always (workers) when unset; pods of a
    batch/v1 Job can only use Never or OnFailure, so Always and ExitCode run as OnFailure."""


class MPIReplicaSpecs(Model):
    """The launcher and the workers."""

    launcher: ReplicaSpec | None = Field(default=None, alias="Launcher")
    """The launcher: exactly one pod that runs mpirun."""
    worker: ReplicaSpec | None = Field(default=None, alias="Worker")
    """The workers: the pods mpirun reaches over SSH."""


class SchedulingPolicy(Model):
    """Gang scheduling settings."""

    min_available: int | None = Field(default=None, ge=1)
    """minMember of the PodGroup; defaults to every pod of the gang."""
    queue: str | None = cel(("self == oldSelf", "queue is immutable"), default=None)
    """The queue of the PodGroup (Volcano) or the Kueue LocalQueue. Immutable."""
    min_resources: dict[str, Quantity] | None = None
    """minResources of the PodGroup; defaults to the sum of the pods' requests."""
    priority_class: str | None = None
    """priorityClassName of the PodGroup."""
    schedule_timeout_seconds: int | None = Field(default=None, ge=0)
    """scheduleTimeoutSeconds of a scheduler-plugins PodGroup."""


class RunPolicy(Model):
    """Runtime policies of the job."""

    clean_pod_policy: Literal["All", "Running", "None"] | None = "None"
    """Pods to delete when the job finishes: All, Running (pods still running) or None. Defaults to None."""
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0)
    """Seconds after finishing until the MPIJob is deleted."""
    active_deadline_seconds: int | None = Field(default=None, ge=1)
    """Seconds the job may be active before it fails with reason DeadlineExceeded."""
    backoff_limit: int | None = Field(default=None, ge=0)
    """Retries of the launcher before the job fails."""
    scheduling_policy: SchedulingPolicy | None = None
    """Gang scheduling settings."""
    suspend: bool | None = False
    """Keep every pod from being created. Defaults to false."""
    managed_by: str | None = cel(
        (
            f"self in ['{MANAGED_BY_MPI_OPERATOR}', '{MANAGED_BY_MULTIKUEUE}']",
            f"managedBy must be {MANAGED_BY_MPI_OPERATOR} or {MANAGED_BY_MULTIKUEUE}",
        ),
        ("self == oldSelf", "managedBy is immutable"),
        default=None,
    )
    """The controller that reconciles the job: unset or ``kubeflow.org/mpi-operator`` (this operator)
    or ``kueue.x-k8s.io/multikueue``. Immutable."""


class MPIJobSpec(Model):
    """Specification of an MPIJob."""

    slots_per_worker: int | None = Field(default=1, ge=1)
    """Slots of each worker in the hostfile. Defaults to 1."""
    run_launcher_as_worker: bool | None = False
    """Let the launcher also run processes (it is listed in the hostfile). Defaults to false."""
    ssh_auth_mount_path: str | None = "/root/.ssh"
    """Where the SSH keys are mounted. Defaults to /root/.ssh."""
    launcher_creation_policy: Literal["AtStartup", "WaitForWorkersReady"] | None = "AtStartup"
    """When the launcher is created: at once, or once every worker is ready. Defaults to AtStartup."""
    mpi_implementation: Literal["OpenMPI", "Intel", "MPICH"] | None = "OpenMPI"
    """MPI implementation: OpenMPI, Intel or MPICH. Defaults to OpenMPI."""
    mpi_replica_specs: MPIReplicaSpecs
    """The launcher and worker replicas."""
    run_policy: RunPolicy | None = Field(default_factory=RunPolicy)
    """Runtime policies."""


class ReplicaStatus(Model):
    """Observed pods of one replica type."""

    active: int = 0
    """Pods pending or running."""
    succeeded: int = 0
    """Pods that succeeded."""
    failed: int = 0
    """Pods that failed."""
    selector: str | None = None
    """Label selector of the pods."""


class JobCondition(Model):
    """A condition of an MPIJob (kubeflow/common ``JobCondition``)."""

    type: str
    """Created, Running, Restarting, Succeeded, Failed or Suspended."""
    status: Literal["True", "False", "Unknown"]
    """Status of the condition."""
    reason: str | None = None
    """Why the condition has this status."""
    message: str | None = None
    """A human-readable explanation."""
    last_update_time: str | None = None
    """When the condition was last written."""
    last_transition_time: str | None = None
    """When the status last changed."""


class MPIJobStatus(Model):
    """Observed state of an MPIJob."""

    conditions: list[JobCondition] | None = Field(
        default=None, json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}
    )
    """Conditions of the job."""
    replica_statuses: dict[str, ReplicaStatus] | None = None
    """Pods per replica type (Launcher, Worker)."""
    start_time: str | None = None
    """When the job started (RFC 3339)."""
    completion_time: str | None = None
    """When the job finished (RFC 3339)."""
    last_reconcile_time: str | None = None
    """When the job was last reconciled: never written, as mpi-operator v0.8.2 declares it and never writes it
    (a write at every reconcile would be a status write, and another reconcile, without end)."""


class MPIJob(Model):
    """An MPI job: one launcher running mpirun over SSH against a set of workers."""

    KIND: ClassVar[str] = MPIJOBS.kind
    PLURAL: ClassVar[str] = MPIJOBS.plural
    api_version: str = API_VERSION
    kind: str = MPIJOBS.kind
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: MPIJobSpec
    status: MPIJobStatus | None = None
