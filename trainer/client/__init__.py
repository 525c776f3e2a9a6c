"""Python SDK of the trainer operator: train, submit, watch, read and delete TrainJobs.

:class:`TrainerClient` is a drop-in for the kubeflow SDK's ``kubeflow.trainer.TrainerClient``
(``kubeflow/trainer/api/trainer_client.py``, kubeflow 0.5.0): the same methods, positional
arguments and return shapes (:mod:`trainer.client.shapes`), the same ``CustomTrainer``,
``CustomTrainerContainer`` and ``Initializer`` (:mod:`trainer.client.trainers`), plus manifests
(dicts, YAML paths or strings, :mod:`trainer.api` objects), Kueue and Volcano queues and MultiKueue.
:class:`AsyncTrainerClient` is the asyncio client underneath, with the same methods, arguments and
shapes as coroutines; :class:`AsyncJobClient` returns the :mod:`trainer.api` objects of any job kind
(TrainJob, MPIJob)::

    from trainer.client import CustomTrainer, TrainerClient

    def train():
        print("training")

    client = TrainerClient(namespace="team-a")
    name = client.train("torch-distributed", trainer=CustomTrainer(func=train, num_nodes=2))
    job = client.wait_for_job_status(name, {"Complete"}, 600)  # job.status == "Complete"
    for line in client.get_job_logs(name, "node-0", True):
        print(line)
    client.delete_job(name)
"""

from trainer.api.waiting import Waiting
from trainer.client.aio import AsyncTrainerClient, default_namespace
from trainer.client.errors import (
    AlreadyExistsError,
    ApiServerError,
    Cause,
    ConflictError,
    ForbiddenError,
    InvalidError,
    JobFailedError,
    JobFinishedError,
    JobWaitingError,
    LogsUnavailableError,
    ManifestError,
    NotFoundError,
    PodCannotStartError,
    TrainerClientError,
    TrainerError,
    UnknownNodeError,
    UnknownStepError,
    WaitTimeoutError,
)
from trainer.client.jobs import AsyncJobClient
from trainer.client.manifest import Manifest, load_manifests, load_trainjob
from trainer.client.multicluster import CheckState, WorkloadInfo, for_multicluster
from trainer.client.optimize import (
    GridSearch,
    MedianStopping,
    Objective,
    RandomSearch,
    Search,
    TPESearch,
    TrainJobTemplate,
    Trial,
    TrialConfig,
    optimization_status,
)
from trainer.client.shapes import Runtime, RuntimeKind, RuntimeTrainer, Step, TrainerType, TrainJob
from trainer.client.sync import KubernetesBackendConfig, TrainerClient
from trainer.client.trainers import (
    BuiltinTrainer,
    CustomTrainer,
    CustomTrainerContainer,
    DataCacheInitializer,
    DataFormat,
    DataType,
    HuggingFaceDatasetInitializer,
    HuggingFaceModelInitializer,
    Initializer,
    LoraConfig,
    Loss,
    S3DatasetInitializer,
    S3ModelInitializer,
    TorchTuneConfig,
    TorchTuneInstructDataset,
)
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
    "ApiServerError",
    "AsyncJobClient",
    "AsyncTrainerClient",
    "BuiltinTrainer",
    "Cause",
    "CheckState",
    "ConflictError",
    "CustomTrainer",
    "CustomTrainerContainer",
    "DataCacheInitializer",
    "DataFormat",
    "DataType",
    "Event",
    "ForbiddenError",
    "GridSearch",
    "HuggingFaceDatasetInitializer",
    "HuggingFaceModelInitializer",
    "Initializer",
    "InvalidError",
    "JobFailedError",
    "JobFinishedError",
    "JobKind",
    "JobWaitingError",
    "KubernetesBackendConfig",
    "LogsUnavailableError",
    "LoraConfig",
    "Loss",
    "Manifest",
    "ManifestError",
    "MedianStopping",
    "NotFoundError",
    "Objective",
    "PodCannotStartError",
    "RandomSearch",
    "Runtime",
    "RuntimeKind",
    "RuntimeTrainer",
    "S3DatasetInitializer",
    "S3ModelInitializer",
    "Search",
    "Step",
    "TPESearch",
    "TorchTuneConfig",
    "TorchTuneInstructDataset",
    "TrainJob",
    "TrainJobTemplate",
    "TrainerClient",
    "TrainerClientError",
    "TrainerError",
    "TrainerType",
    "Trial",
    "TrialConfig",
    "UnknownNodeError",
    "UnknownStepError",
    "WaitTimeoutError",
    "Waiting",
    "WorkloadInfo",
    "default_namespace",
    "for_multicluster",
    "load_manifests",
    "load_trainjob",
    "optimization_status",
    "queue_of",
    "runtime_framework",
    "trainjob_status",
]
