"""What :class:`trainer.client.TrainerClient` returns, in the shapes of the kubeflow SDK's
(``kubeflow/trainer/types/types.py``, kubeflow 0.5.0): :class:`Runtime` with its
:class:`RuntimeTrainer`, :class:`TrainJob` with its :class:`Step` list. Field names, order and
defaults are upstream's; what this client knows beyond them is in extra attributes after those
(``namespace``, ``trainjob``/``object``: the :mod:`trainer.api` model the shape was read from).

The readers are pure: :func:`runtime_of` reads a runtime object, :func:`steps_of` a TrainJob's pods,
:func:`trainjob_of` puts them together the way upstream's ``backends/kubernetes/backend.py`` and
``utils.py`` describe them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum, StrEnum
from typing import Any

from trainer.api.base import ObjectMeta
from trainer.api.labels import REPLICATED_JOB_NAME
from trainer.api.trainer_v1alpha1 import (
    ANCESTOR_LABEL,
    FRAMEWORK_LABEL,
    NODE_CONTAINER,
    ClusterTrainingRuntime,
    TrainingRuntime,
    TrainJobSpec,
)
from trainer.api.trainer_v1alpha1 import TrainJob as TrainJobObject
from trainer.client.types import COMPLETION_INDEX_LABEL, trainjob_num_nodes, trainjob_status
from trainer.framework.clock import EARLIEST, parse_time
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta

UNKNOWN = "Unknown"
"""Upstream's value for what cannot be told (``kubeflow/common/constants.py``)."""
TORCH_TUNE = "torchtune"
"""The framework label of runtimes that run a builtin trainer instead of a function."""
LAUNCHER = "launcher"
DATASET_INITIALIZER = "dataset-initializer"
MODEL_INITIALIZER = "model-initializer"
STEP_NAMES = (DATASET_INITIALIZER, MODEL_INITIALIZER, LAUNCHER, NODE_CONTAINER)
"""Replicated jobs whose pods are steps of a :class:`TrainJob` (upstream's ``POD_LABEL_SELECTOR``)."""


class RuntimeKind(StrEnum):
    """The kind of a runtime. A ``str`` too, so ``kind == "ClusterTrainingRuntime"`` holds as it did
    when runtimes were returned as :mod:`trainer.api` objects."""

    CLUSTER_TRAINING_RUNTIME = "ClusterTrainingRuntime"
    TRAINING_RUNTIME = "TrainingRuntime"


class TrainerType(Enum):
    """Whether a runtime runs a function (``CustomTrainer``) or a builtin trainer."""

    CUSTOM_TRAINER = "CustomTrainer"
    BUILTIN_TRAINER = "BuiltinTrainer"


@dataclass
class RuntimeTrainer:
    """The trainer of a runtime: fields of upstream's ``RuntimeTrainer``. ``command`` is the
    container command a function is run with (see :func:`trainer.client.trainers.function_command`):
    ``("torchrun",)`` for torch runtimes, ``("mpirun", "--hostfile", "/etc/mpi/hostfile")`` for MPI,
    ``("tune", "run")`` for torchtune, else ``("python",)``."""

    trainer_type: TrainerType
    framework: str
    image: str
    num_nodes: int = 1
    device: str = UNKNOWN
    device_count: str = UNKNOWN
    _command: tuple[str, ...] = field(default=("python",), repr=False)

    @property
    def command(self) -> tuple[str, ...]:
        """The launcher program of the runtime's trainer (see the class docstring)."""
        return self._command

    def set_command(self, command: tuple[str, ...]) -> None:
        """Replace :attr:`command`."""
        self._command = tuple(command)


@dataclass
class Runtime:
    """A TrainingRuntime or ClusterTrainingRuntime: upstream's ``Runtime`` fields, then ``object``,
    the :mod:`trainer.api` runtime it was read from (None when built by hand)."""

    name: str
    trainer: RuntimeTrainer
    kind: RuntimeKind
    pretrained_model: str | None = None
    object: TrainingRuntime | ClusterTrainingRuntime | None = field(default=None, repr=False, compare=False)

    @property
    def metadata(self) -> ObjectMeta:
        """The runtime's metadata (as on the :mod:`trainer.api` object; only ``name`` when built by hand)."""
        return self.object.metadata if self.object is not None else ObjectMeta(name=self.name)


@dataclass
class Step:
    """One pod of a TrainJob: upstream's ``Step``. ``name`` is ``node-<i>`` for trainer nodes (an MPI
    job's launcher is ``node-0`` and its nodes follow), else the initializer's name; ``status`` the
    pod's phase."""

    name: str
    status: str | None
    pod_name: str
    device: str = UNKNOWN
    device_count: str = UNKNOWN


@dataclass
class TrainJob:
    """A TrainJob: upstream's ``TrainJob`` fields, then what this client adds.

    ``status`` is one of ``Created``, ``Suspended``, ``Running``, ``Complete``, ``Failed``
    (:func:`trainer.client.trainjob_status`; upstream has no ``Suspended``). ``runtime`` is None when
    the job's runtime does not exist (upstream's ``get_job`` raises then). ``namespace`` is the job's
    namespace and ``trainjob`` the :mod:`trainer.api` object it was read from; ``metadata`` and ``spec``
    are that object's.
    """

    name: str
    runtime: Runtime | None
    steps: list[Step]
    num_nodes: int
    creation_timestamp: datetime
    status: str = UNKNOWN
    namespace: str = ""
    trainjob: TrainJobObject | None = field(default=None, repr=False, compare=False)

    @property
    def metadata(self) -> ObjectMeta:
        """The TrainJob's metadata."""
        return self.trainjob.metadata if self.trainjob is not None else ObjectMeta(name=self.name)

    @property
    def spec(self) -> TrainJobSpec | None:
        """The TrainJob's spec (None when built by hand)."""
        return self.trainjob.spec if self.trainjob is not None else None


def _node_container(template: JSON) -> JSON | None:
    """The ``node`` container of the replicated job labelled as the trainer's ancestor."""
    for rjob in (((template.get("spec") or {}).get("replicatedJobs")) or []) if isinstance(template, dict) else []:
        job_template = rjob.get("template") or {}
        if ANCESTOR_LABEL not in meta(job_template).labels:
            continue
        pod = ((job_template.get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in pod.get("containers") or []:
            if container.get("name") == NODE_CONTAINER:
                return dict(container)
    return None


def devices(resources: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """``(device, count)`` from a container's resource limits: ``gpu``, ``tpu``, a MIG profile such as
    ``mig-1g.5gb``, ``npu`` (Ascend 910) or ``cpu``, as upstream reads them; None without limits."""
    limits = (resources or {}).get("limits") or {}
    if not limits:
        return None
    for key, device in (("nvidia.com/gpu", "gpu"), ("google.com/tpu", "tpu")):
        if key in limits:
            return device, str(limits[key])
    migs = [k for k in limits if str(k).startswith("nvidia.com/mig-")]
    if migs:
        return migs[0].split("/", 1)[1], str(limits[migs[0]])
    if "huawei.com/Ascend910" in limits:
        return "npu", str(limits["huawei.com/Ascend910"])
    if "cpu" in limits:
        return "cpu", str(limits["cpu"])
    return None


def runtime_of(runtime: TrainingRuntime | ClusterTrainingRuntime) -> Runtime:
    """The :class:`Runtime` an :mod:`trainer.api` runtime is. Its framework is the label
    ``trainer.kubeflow.org/framework`` (``Unknown`` without it); image, devices from the ``node``
    container of the replicated job labelled ``trainer.kubeflow.org/trainjob-ancestor-step``
    (``Unknown`` without one); devices times ``mlPolicy.numNodes`` (an MPI runtime counts
    ``numProcPerNode`` per node)."""
    wire = runtime.to_dict()
    spec = wire.get("spec") or {}
    policy = spec.get("mlPolicy") or {}
    framework = (runtime.metadata.labels or {}).get(FRAMEWORK_LABEL) or UNKNOWN
    container = _node_container(spec.get("template") or {}) or {}
    trainer = RuntimeTrainer(
        trainer_type=TrainerType.BUILTIN_TRAINER if framework == TORCH_TUNE else TrainerType.CUSTOM_TRAINER,
        framework=framework,
        image=str(container.get("image") or UNKNOWN),
        num_nodes=int(policy.get("numNodes") or 1),
    )
    found = devices(container.get("resources"))
    if found:
        trainer.device, trainer.device_count = found
    if policy.get("mpi") and (policy["mpi"] or {}).get("numProcPerNode"):
        trainer.device_count = str(policy["mpi"]["numProcPerNode"])
    if trainer.device_count.isdigit() and policy.get("numNodes"):
        trainer.device_count = str(int(trainer.device_count) * int(policy["numNodes"]))
    if framework == TORCH_TUNE:
        trainer.set_command(("tune", "run"))
    elif "torch" in policy:
        trainer.set_command(("torchrun",))
    elif "mpi" in policy:
        trainer.set_command(("mpirun", "--hostfile", "/etc/mpi/hostfile"))
    return Runtime(
        name=runtime.metadata.name or "",
        trainer=trainer,
        kind=RuntimeKind(runtime.kind),
        object=runtime,
    )


def _pod_container(pod: JSON, names: Iterable[str]) -> JSON:
    containers = (pod.get("spec") or {}).get("containers") or []
    wanted = set(names)
    return next((c for c in containers if c.get("name") in wanted), containers[0] if containers else {})


def steps_of(pods: Iterable[JSON], mpi: bool = False) -> list[Step]:
    """The steps of a TrainJob from its pods (newest pod first wins a step): one per initializer,
    ``node-<index>`` per trainer node; with ``mpi`` the launcher is ``node-0`` and node ``i`` is
    ``node-<i+1>``. A pod's ``PET_NPROC_PER_NODE`` (a number) is its device count."""
    newest = sorted(pods, key=lambda p: str(meta(p).creation_timestamp or ""), reverse=True)
    out: dict[str, Step] = {}
    for pod in newest:
        labels = meta(pod).labels
        role = labels.get(REPLICATED_JOB_NAME)
        if role not in STEP_NAMES:
            continue
        if role in (LAUNCHER, NODE_CONTAINER):
            index = int(labels.get(COMPLETION_INDEX_LABEL) or 0)
            name = f"{NODE_CONTAINER}-{index + 1 if mpi and role == NODE_CONTAINER else index}"
            container = _pod_container(pod, [NODE_CONTAINER, LAUNCHER])
        else:
            name = str(role)
            container = _pod_container(pod, [str(role)])
        if name in out:
            continue
        step = Step(name=name, status=(pod.get("status") or {}).get("phase"), pod_name=str(pod["metadata"]["name"]))
        found = devices(container.get("resources"))
        if found:
            step.device, step.device_count = found
        for env in container.get("env") or []:
            value = str(env.get("value") or "")
            if env.get("name") == "PET_NPROC_PER_NODE" and value.isdigit():
                step.device_count = value
        out[name] = step
    return sorted(out.values(), key=_step_order)


def _step_order(step: Step) -> tuple[int, int, str]:
    match = re.fullmatch(rf"{NODE_CONTAINER}-(\d+)", step.name)
    return (1, int(match.group(1)), "") if match else (0, 0, step.name)


def trainjob_of(job: TrainJobObject, runtime: Runtime | None, pods: Iterable[JSON]) -> TrainJob:
    """The :class:`TrainJob` of an :mod:`trainer.api` TrainJob, its runtime (None: not found) and its pods.
    ``num_nodes`` is ``spec.trainer.numNodes``, else the runtime's, else 1."""
    num_nodes = trainjob_num_nodes(job, runtime.trainer.num_nodes if runtime else None)
    mpi = runtime is not None and runtime.trainer.command[:1] == ("mpirun",)
    return TrainJob(
        name=job.metadata.name or "",
        runtime=runtime,
        steps=steps_of(pods, mpi),
        num_nodes=num_nodes,
        creation_timestamp=parse_time(job.metadata.creation_timestamp) or EARLIEST,
        status=trainjob_status(job),
        namespace=job.metadata.namespace or "",
        trainjob=job,
    )
