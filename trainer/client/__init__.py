"""Python SDK of the trainer operator: submit, watch, read and delete TrainJobs.

:class:`TrainerClient` blocks; :class:`AsyncTrainerClient` is its asyncio face. Both take
manifests as dicts, YAML paths or strings, or :mod:`api` objects, and return :mod:`api` objects.
Names and semantics follow the kubeflow SDK's ``TrainerClient`` where they overlap, so code
written for it reads the same::

    from trainer.client import TrainerClient

    with TrainerClient(namespace="team-a") as client:
        # Created in the namespace argument, else the manifest's own, else the client's (team-a).
        job = client.create_job("config/samples/trainjob.yaml", namespace="team-a")
        client.wait_for_job_status(job.metadata.name, {"Complete"}, timeout=600)
        for line in client.get_job_logs(job.metadata.name, step="node", node=0):
            print(line)
"""

from trainer.client.aio import AsyncJobClient, AsyncTrainerClient, default_namespace
from trainer.client.errors import (
    AlreadyExistsError,
    JobFailedError,
    JobFinishedError,
    LogsUnavailableError,
    ManifestError,
    NotFoundError,
    TrainerClientError,
    UnknownStepError,
    WaitTimeoutError,
)
from trainer.client.manifest import Manifest, load_manifests, load_trainjob
from trainer.client.multicluster import CheckState, WorkloadInfo, for_multicluster
from trainer.client.sync import TrainerClient
from trainer.client.types import (
    COMPLETE,
    CREATED,
    FAILED,
    RUNNING,
    STATUSES,
    SUSPENDED,
    TRAINJOB,
    Event,
    JobKind,
    queue_of,
    runtime_framework,
    trainjob_status,
)

__all__ = [
    "COMPLETE",
    "CREATED",
    "FAILED",
    "RUNNING",
    "STATUSES",
    "SUSPENDED",
    "TRAINJOB",
    "AlreadyExistsError",
    "AsyncJobClient",
    "AsyncTrainerClient",
    "CheckState",
    "Event",
    "JobFailedError",
    "JobFinishedError",
    "JobKind",
    "LogsUnavailableError",
    "Manifest",
    "ManifestError",
    "NotFoundError",
    "TrainerClient",
    "TrainerClientError",
    "UnknownStepError",
    "WaitTimeoutError",
    "WorkloadInfo",
    "default_namespace",
    "for_multicluster",
    "load_manifests",
    "load_trainjob",
    "queue_of",
    "runtime_framework",
    "trainjob_status",
]
