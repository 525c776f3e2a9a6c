"""What :meth:`trainer.client.TrainerClient.train` takes, in the kubeflow SDK's shapes
(``kubeflow/trainer/types/types.py``, kubeflow 0.5.0): :class:`CustomTrainer` (a Python function),
:class:`CustomTrainerContainer` (an image), :class:`BuiltinTrainer` (a :class:`TorchTuneConfig` for
a torchtune runtime), :class:`Initializer` with its dataset and model initializers; and how they
become a TrainJob's ``spec.trainer`` and ``spec.initializer``, as the SDK's Kubernetes backend
builds them (``kubeflow/trainer/backends/kubernetes/utils.py``).

A function becomes a container command (:func:`function_command`): its source (``inspect``),
dedented, followed by a call with ``func_args`` as keyword arguments, is written by ``bash`` to a
file named after the function's module and run with the runtime's launcher (``torchrun``,
``mpirun ... python``, ``python``), after an optional ``pip install`` of ``packages_to_install``.
The function must therefore be self-contained: imports inside its body, no closures.
"""

from __future__ import annotations

import inspect
import os
import posixpath
import random
import shlex
import string
import textwrap
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any, TypeAlias
from urllib.parse import urlparse

from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainingRuntime, TrainJob
from trainer.client.shapes import Runtime, TrainerType
from trainer.framework.json_codec import JSON

DEFAULT_PIP_INDEX_URLS: list[str] = os.getenv("DEFAULT_PIP_INDEX_URLS", "https://pypi.org/simple").split(",")
"""Where packages are installed from: the first is pip's index URL, the rest extra ones (environment
variable ``DEFAULT_PIP_INDEX_URLS``, comma-separated, as upstream)."""
DEFAULT_IGNORE_PATTERNS: list[str] = ["*.msgpack", "*.h5", "*.bin", "*.pt", "*.pth"]
"""Files a model initializer skips unless told otherwise (upstream's default)."""
Option: TypeAlias = Callable[[JSON, Any, Any], None]
"""A ``train`` option, called as the kubeflow SDK calls its options: ``option(job_spec, trainer, client)``."""
RuntimeChoice: TypeAlias = str | Runtime | TrainingRuntime | ClusterTrainingRuntime | None
"""The runtime ``train`` is given: a name, a :class:`Runtime`, an :mod:`trainer.api` runtime, or None (the default)."""
MPI_HOME = os.getenv("DEFAULT_MPI_USER_HOME", "/home/mpiuser")
"""Where an MPI runtime's function file is written (the MPI user's home, as upstream)."""
DATASET_PATH = "/workspace/dataset"
"""Where the dataset initializer puts the dataset (upstream's ``constants.DATASET_PATH``)."""
TORCH_TUNE_INSTRUCT_DATASET = "torchtune.datasets.instruct_dataset"
"""The torchtune dataset class :class:`TorchTuneInstructDataset` selects."""


@dataclass
class CustomTrainer:
    """A self-contained training function and how to run it; upstream's ``CustomTrainer``.

    ``func`` is called with ``func_args`` as keyword arguments (no arguments when None).
    ``resources_per_node`` maps ``cpu``, ``memory``, ``gpu`` (``nvidia.com/gpu``), ``storage``
    (``ephemeral-storage``), ``mig-<profile>`` (``nvidia.com/mig-<profile>``) or any extended
    resource to a quantity, set as both requests and limits.
    """

    func: Callable[..., Any]
    func_args: dict[str, Any] | None = None
    image: str | None = None
    packages_to_install: list[str] | None = None
    pip_index_urls: list[str] = field(default_factory=lambda: list(DEFAULT_PIP_INDEX_URLS))
    num_nodes: int | None = None
    resources_per_node: dict[str, Any] | None = None
    env: dict[str, str] | None = None


@dataclass
class CustomTrainerContainer:
    """An image that trains on its own (its entrypoint is kept); upstream's ``CustomTrainerContainer``."""

    image: str
    num_nodes: int | None = None
    resources_per_node: dict[str, Any] | None = None
    env: dict[str, str] | None = None


class Loss(Enum):
    """Loss function of the torchtune trainer; upstream's ``Loss``."""

    CEWithChunkedOutputLoss = "torchtune.modules.loss.CEWithChunkedOutputLoss"


class DataType(Enum):
    """Data type of the model and optimizer parameters; upstream's ``DataType``."""

    BF16 = "bf16"
    FP32 = "fp32"


class DataFormat(Enum):
    """Format of the dataset files; upstream's ``DataFormat``."""

    JSON = "json"
    CSV = "csv"
    PARQUET = "parquet"
    ARROW = "arrow"
    TEXT = "text"
    XML = "xml"


@dataclass
class TorchTuneInstructDataset:
    """A dataset of instruction prompts and responses (torchtune's ``instruct_dataset``);
    upstream's ``TorchTuneInstructDataset``."""

    source: DataFormat | None = None
    split: str | None = None
    train_on_input: bool | None = None
    new_system_prompt: str | None = None
    column_map: dict[str, str] | None = None


@dataclass
class LoraConfig:
    """LoRA, QLoRA (``quantize_base``) or DoRA (``use_dora``) fine-tuning; upstream's ``LoraConfig``."""

    apply_lora_to_mlp: bool | None = None
    apply_lora_to_output: bool | None = None
    lora_attn_modules: list[str] = field(default_factory=lambda: ["q_proj", "v_proj", "output_proj"])
    lora_rank: int | None = None
    lora_alpha: int | None = None
    lora_dropout: float | None = None
    quantize_base: bool | None = None
    use_dora: bool | None = None


@dataclass
class TorchTuneConfig:
    """Overrides of a torchtune runtime's recipe configuration; upstream's ``TorchTuneConfig``.
    ``resources_per_node`` as :class:`CustomTrainer`'s."""

    dtype: DataType | None = None
    batch_size: int | None = None
    epochs: int | None = None
    loss: Loss | None = None
    num_nodes: int | None = None
    peft_config: LoraConfig | None = None
    dataset_preprocess_config: TorchTuneInstructDataset | None = None
    resources_per_node: dict[str, Any] | None = None


@dataclass
class BuiltinTrainer:
    """A trainer the runtime's image already holds (torchtune), configured by ``config``;
    upstream's ``BuiltinTrainer``."""

    config: TorchTuneConfig


@dataclass
class BaseInitializer:
    """Where an initializer downloads from."""

    storage_uri: str


def _require_scheme(uri: str, scheme: str) -> None:
    if not uri.startswith(scheme):
        raise ValueError(f"storage_uri must start with {scheme!r}, got {uri}")


@dataclass
class HuggingFaceDatasetInitializer(BaseInitializer):
    """A dataset from HuggingFace Hub (``storage_uri``: ``hf://<repo>`` or ``<repo>``)."""

    ignore_patterns: list[str] | None = None
    access_token: str | None = None


@dataclass
class S3Initializer(BaseInitializer):
    """What both S3 initializers take. Raises ``ValueError`` unless ``storage_uri`` is ``s3://...``."""

    ignore_patterns: list[str] | None = None
    endpoint: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    region: str | None = None
    role_arn: str | None = None

    def __post_init__(self) -> None:
        _require_scheme(self.storage_uri, "s3://")


@dataclass
class S3DatasetInitializer(S3Initializer):
    """A dataset from S3-compatible storage (``s3://bucket/path``)."""


@dataclass
class DataCacheInitializer(BaseInitializer):
    """A distributed data cache (``storage_uri``: ``cache://<schema>/<table>``) of ``num_data_nodes``
    (more than 1) data nodes. Raises ``ValueError`` for another URI or too few nodes."""

    metadata_loc: str
    num_data_nodes: int
    head_cpu: str | None = None
    head_mem: str | None = None
    worker_cpu: str | None = None
    worker_mem: str | None = None
    iam_role: str | None = None

    def __post_init__(self) -> None:
        if self.num_data_nodes <= 1:
            raise ValueError(f"num_data_nodes must be greater than 1, got {self.num_data_nodes}")
        _require_scheme(self.storage_uri, "cache://")
        if len(self.storage_uri.removeprefix("cache://").split("/")) != 2:
            raise ValueError(f"storage_uri must be 'cache://<SCHEMA_NAME>/<TABLE_NAME>', got {self.storage_uri}")


@dataclass
class HuggingFaceModelInitializer(BaseInitializer):
    """A model from HuggingFace Hub."""

    ignore_patterns: list[str] | None = field(default_factory=lambda: list(DEFAULT_IGNORE_PATTERNS))
    access_token: str | None = None


@dataclass
class S3ModelInitializer(S3Initializer):
    """A model from S3-compatible storage (``s3://bucket/path``); skips :data:`DEFAULT_IGNORE_PATTERNS`
    unless told otherwise."""

    ignore_patterns: list[str] | None = field(default_factory=lambda: list(DEFAULT_IGNORE_PATTERNS))


@dataclass
class Initializer:
    """Dataset and model initialization of a TrainJob; upstream's ``Initializer``."""

    dataset: HuggingFaceDatasetInitializer | S3DatasetInitializer | DataCacheInitializer | None = None
    model: HuggingFaceModelInitializer | S3ModelInitializer | None = None


RESOURCE_ALIASES = {"gpu": "nvidia.com/gpu", "storage": "ephemeral-storage"}
STANDARD_RESOURCES = {"cpu", "memory", "gpu", "storage", "ephemeral-storage"}


def resources_per_node(resources: Mapping[str, Any]) -> JSON:
    """``corev1.ResourceRequirements`` with ``resources`` as both requests and limits (see
    :class:`CustomTrainer`). Raises ``ValueError`` for two MIG profiles, or MIG with whole GPUs."""
    out: dict[str, str] = {}
    for key, value in resources.items():
        name = key.lower() if key.lower() in STANDARD_RESOURCES or key.lower().startswith("mig-") else key
        name = RESOURCE_ALIASES.get(name, name)
        if name.startswith("mig-"):
            name = "nvidia.com/" + name
        out[name] = str(value)
    migs = sorted(k for k in out if k.startswith("nvidia.com/mig-"))
    if len(migs) > 1:
        raise ValueError(f"only one MIG profile can be requested, got {migs}")
    if migs and "nvidia.com/gpu" in out:
        raise ValueError(f"whole GPUs (nvidia.com/gpu) and a MIG profile ({migs[0]}) cannot be requested together")
    return {"requests": dict(out), "limits": dict(out)}


def pip_install_script(packages: list[str], index_urls: list[str]) -> str:
    """Shell lines installing ``packages`` from ``index_urls`` (the first as ``--index-url``), for the
    user first, else for everyone; pip's output is shown only when both fail."""
    args = " ".join(shlex.quote(p) for p in packages)
    urls = [f"--index-url {shlex.quote(index_urls[0])}"] if index_urls else []
    urls += [f"--extra-index-url {shlex.quote(u)}" for u in index_urls[1:]]
    pip = f"PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1 python -m pip install --quiet {' '.join(urls)}"
    log = "/tmp/pip-install.log"
    return (
        "command -v pip >/dev/null || python -m ensurepip --user >/dev/null 2>&1 || true\n"
        f"{pip} --user {args} >{log} 2>&1 || {pip} {args} >>{log} 2>&1 || {{ cat {log} >&2; exit 1; }}\n"
    )


def function_source(func: Callable[..., Any], func_args: Mapping[str, Any] | None) -> str:
    """The source of ``func`` (dedented) followed by a call of it with ``func_args`` as keyword
    arguments. Raises ``ValueError`` when ``func`` is not a function whose source Python can read."""
    if not callable(func):
        raise ValueError(f"the training function must be callable, got {type(func).__name__}")
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError) as e:
        raise ValueError(f"cannot read the source of {func!r}: {e}") from None
    call = f"{func.__name__}(**{dict(func_args)!r})" if func_args is not None else f"{func.__name__}()"
    return f"{source}\n{call}\n"


def function_command(
    runtime: Runtime,
    func: Callable[..., Any],
    func_args: Mapping[str, Any] | None = None,
    packages_to_install: list[str] | None = None,
    pip_index_urls: list[str] | None = None,
) -> list[str]:
    """The container command that runs ``func`` with the runtime's launcher (see the module
    docstring): ``[<launcher...>, "bash", "-c", script]`` for MPI (every rank writes and runs the
    file), else ``["bash", "-c", script]`` whose last line runs ``<launcher> <file>``. The source is
    written through a quoted here-document, so ``$`` and backquotes in it stay as they are.
    Raises ``ValueError`` as :func:`function_source` does."""
    source = function_source(func, func_args)
    launcher = runtime.trainer.command
    mpi = launcher[:1] == ("mpirun",)
    filename = Path(inspect.getsourcefile(func) or "train.py").name
    path = f"{MPI_HOME}/{filename}" if mpi else filename
    marker = "TRAINER_FUNCTION_EOF"
    while marker in source:
        marker += "_"
    script = (
        pip_install_script(packages_to_install, pip_index_urls or DEFAULT_PIP_INDEX_URLS) if packages_to_install else ""
    )
    script += f"cat > {shlex.quote(path)} <<'{marker}'\n{source}{marker}\n"
    if mpi:
        return [*launcher, "bash", "-c", script + f"exec python {shlex.quote(path)}"]
    return ["bash", "-c", script + f"exec {' '.join(shlex.quote(a) for a in launcher)} {shlex.quote(path)}"]


def _nodes_spec(num_nodes: int | None, resources: Mapping[str, Any] | None) -> JSON:
    """``numNodes`` and ``resourcesPerNode`` (:func:`resources_per_node`) of ``spec.trainer``, when set
    (``numNodes`` 0 too: a TrainJob may have no node, kubeflow/trainer#3809)."""
    spec: JSON = {}
    if num_nodes is not None:
        spec["numNodes"] = num_nodes
    if resources:
        spec["resourcesPerNode"] = resources_per_node(resources)
    return spec


def trainer_spec(runtime: Runtime, trainer: CustomTrainer | CustomTrainerContainer) -> JSON:
    """``spec.trainer`` of a TrainJob for ``trainer`` on ``runtime``: numNodes, resourcesPerNode,
    command (a :class:`CustomTrainer`'s function), image, env. Raises ``ValueError`` when the runtime
    runs a builtin trainer, or as :func:`function_command` and :func:`resources_per_node` do."""
    if runtime.trainer.trainer_type != TrainerType.CUSTOM_TRAINER:
        raise ValueError(f"{type(trainer).__name__} can't be used with runtime {runtime.name} (a builtin trainer)")
    spec = _nodes_spec(trainer.num_nodes, trainer.resources_per_node)
    if isinstance(trainer, CustomTrainer):
        spec["command"] = function_command(
            runtime, trainer.func, trainer.func_args, trainer.packages_to_install, trainer.pip_index_urls
        )
    if trainer.image:
        spec["image"] = trainer.image
    if trainer.env:
        spec["env"] = [{"name": k, "value": v} for k, v in trainer.env.items()]
    return spec


def _enum_value(value: Any, kind: type[Enum], where: str) -> str:
    """``value.value`` of a member of ``kind``. Raises ``ValueError`` naming ``where`` otherwise."""
    if not isinstance(value, kind):
        choices = ", ".join(f"{kind.__name__}.{m.name}" for m in kind)
        raise ValueError(f"{where} must be one of {choices}; got {value!r}")
    return str(value.value)


def dataset_path_args(initializer: Initializer | None) -> list[str]:
    """``dataset.data_files=`` (a path with a file name) or ``dataset.data_dir=`` under
    :data:`DATASET_PATH`, from the path after the repository of a HuggingFace dataset's
    ``storage_uri`` (``.`` without one); nothing for another dataset."""
    dataset = initializer.dataset if initializer else None
    if not isinstance(dataset, HuggingFaceDatasetInitializer):
        return []
    uri = dataset.storage_uri if dataset.storage_uri.startswith("hf://") else "hf://" + dataset.storage_uri
    parts = urlparse(uri).path.strip("/").split("/")
    relative = "/".join(parts[1:]) if len(parts) > 1 else "."
    if relative != "." and "." in relative:
        return [f"dataset.data_files={posixpath.join(DATASET_PATH, relative)}"]
    return [f"dataset.data_dir={posixpath.join(DATASET_PATH, relative)}"]


LORA_ARGS = {
    "apply_lora_to_mlp": "model.apply_lora_to_mlp",
    "apply_lora_to_output": "model.apply_lora_to_output",
    "lora_rank": "model.lora_rank",
    "lora_alpha": "model.lora_alpha",
    "lora_dropout": "model.lora_dropout",
    "quantize_base": "model.quantize_base",
    "use_dora": "model.use_dora",
}
"""The torchtune config keys the fields of :class:`LoraConfig` override."""


def torchtune_args(config: TorchTuneConfig, initializer: Initializer | None = None) -> list[str]:
    """The ``key=value`` overrides of a torchtune recipe's configuration that ``config`` (and a
    HuggingFace dataset of ``initializer``: :func:`dataset_path_args`) make, in upstream's order:
    ``dtype``, ``batch_size``, ``epochs``, ``loss``, the dataset path, ``model.*`` of
    ``peft_config`` (``model.lora_attn_modules=[q_proj,...]`` last), ``dataset=`` and
    ``dataset.*`` of ``dataset_preprocess_config``. Raises ``ValueError`` naming the field
    (``config.dtype``, ``config.loss``, ``config.peft_config``, ...) whose value is not of its type."""
    args = []
    if config.dtype:
        args.append(f"dtype={_enum_value(config.dtype, DataType, 'config.dtype')}")
    if config.batch_size:
        args.append(f"batch_size={config.batch_size}")
    if config.epochs:
        args.append(f"epochs={config.epochs}")
    if config.loss:
        args.append(f"loss={_enum_value(config.loss, Loss, 'config.loss')}")
    args += dataset_path_args(initializer)
    peft = config.peft_config
    if peft:
        if not isinstance(peft, LoraConfig):
            raise ValueError(f"config.peft_config must be a LoraConfig; got {type(peft).__name__}")
        args += [f"{key}={getattr(peft, name)}" for name, key in LORA_ARGS.items() if getattr(peft, name) is not None]
        if peft.lora_attn_modules:
            args.append(f"model.lora_attn_modules=[{','.join(peft.lora_attn_modules)}]")
    data = config.dataset_preprocess_config
    if data:
        if not isinstance(data, TorchTuneInstructDataset):
            raise ValueError(
                f"config.dataset_preprocess_config must be a TorchTuneInstructDataset; got {type(data).__name__}"
            )
        args.append(f"dataset={TORCH_TUNE_INSTRUCT_DATASET}")
        if data.source:
            args.append(
                f"dataset.source={_enum_value(data.source, DataFormat, 'config.dataset_preprocess_config.source')}"
            )
        if data.split:
            args.append(f"dataset.split={data.split}")
        if data.train_on_input is not None:
            args.append(f"dataset.train_on_input={data.train_on_input}")
        if data.new_system_prompt:
            args.append(f"dataset.new_system_prompt={data.new_system_prompt}")
        if data.column_map:
            args.append(f"dataset.column_map={data.column_map}")
    return args


def builtin_trainer_spec(runtime: Runtime, trainer: BuiltinTrainer, initializer: Initializer | None = None) -> JSON:
    """``spec.trainer`` of a TrainJob for a :class:`BuiltinTrainer` on a torchtune runtime, as the
    kubeflow SDK builds it (``get_trainer_cr_from_builtin_trainer``): ``numNodes`` and
    ``resourcesPerNode`` of the config, ``command`` the runtime's launcher (``[tune, run]``) and
    ``args`` :func:`torchtune_args`. The recipe and its config file are left to the operator, which
    derives them from the runtime (Kubeflow Trainer's torchtune plugin). Raises ``ValueError`` when
    the runtime does not run a builtin trainer (framework label ``torchtune``), ``trainer.config``
    is not a :class:`TorchTuneConfig`, or as :func:`torchtune_args` does."""
    if runtime.trainer.trainer_type != TrainerType.BUILTIN_TRAINER:
        raise ValueError(
            f"BuiltinTrainer can't be used with runtime {runtime.name} (framework {runtime.trainer.framework}); "
            "use a runtime labelled trainer.kubeflow.org/framework: torchtune, or CustomTrainer"
        )
    config = trainer.config
    if not isinstance(config, TorchTuneConfig):
        raise ValueError(f"BuiltinTrainer.config must be a TorchTuneConfig; got {type(config).__name__}")
    spec = _nodes_spec(config.num_nodes, config.resources_per_node)
    spec["command"] = list(runtime.trainer.command)
    spec["args"] = torchtune_args(config, initializer)
    return spec


def _initializer_env(init: BaseInitializer, skip: set[str]) -> list[JSON]:
    """One variable per set field but ``skip``: its name upper-cased, a list joined by commas."""
    env = []
    for f in fields(init):
        value = getattr(init, f.name)
        if f.name in skip or value is None:
            continue
        env.append(
            {"name": f.name.upper(), "value": ",".join(map(str, value)) if isinstance(value, list) else str(value)}
        )
    return env


def initializer_spec(initializer: Initializer) -> JSON | None:
    """``spec.initializer`` of a TrainJob: ``storageUri`` and the other fields as environment
    (``DataCacheInitializer`` adds ``CLUSTER_SIZE``, data nodes plus the head, and ``METADATA_LOC``);
    None when neither dataset nor model is set. Raises ``ValueError`` for another type."""
    out: JSON = {}
    dataset = initializer.dataset
    if isinstance(dataset, DataCacheInitializer):
        env = [
            {"name": "CLUSTER_SIZE", "value": str(dataset.num_data_nodes + 1)},
            {"name": "METADATA_LOC", "value": dataset.metadata_loc},
            *_initializer_env(dataset, {"storage_uri", "metadata_loc", "num_data_nodes"}),
        ]
        out["dataset"] = {"storageUri": dataset.storage_uri, "env": env}
    elif isinstance(dataset, HuggingFaceDatasetInitializer | S3DatasetInitializer):
        out["dataset"] = {"storageUri": dataset.storage_uri, "env": _initializer_env(dataset, {"storage_uri"})}
    elif dataset is not None:
        raise ValueError(f"dataset initializer type is invalid: {type(dataset).__name__}")
    model = initializer.model
    if isinstance(model, HuggingFaceModelInitializer | S3ModelInitializer):
        out["model"] = {"storageUri": model.storage_uri, "env": _initializer_env(model, {"storage_uri"})}
    elif model is not None:
        raise ValueError(f"model initializer type is invalid: {type(model).__name__}")
    for part in out.values():
        if not part["env"]:
            del part["env"]
    return out or None


def _train_spec(
    runtime: Runtime,
    initializer: Initializer | None,
    trainer: CustomTrainer | CustomTrainerContainer | BuiltinTrainer | None,
    given: JSON,
) -> JSON:
    """The ``spec`` of :func:`trainjob_manifest`, but ``ttlSecondsAfterFinished``."""
    spec: JSON = {"runtimeRef": {"name": runtime.name, "kind": runtime.kind.value}}
    if isinstance(trainer, CustomTrainer | CustomTrainerContainer):
        trainer_fields = trainer_spec(runtime, trainer)
    elif isinstance(trainer, BuiltinTrainer):
        trainer_fields = builtin_trainer_spec(runtime, trainer, initializer)
    elif trainer is None:
        trainer_fields = {}
    else:
        raise ValueError(
            f"trainer {type(trainer).__name__} is not supported; "
            "use CustomTrainer, CustomTrainerContainer or BuiltinTrainer"
        )
    trainer_fields.update({k: v for k, v in (given.get("trainer") or {}).items() if k in ("command", "args")})
    if trainer_fields:
        spec["trainer"] = trainer_fields
    init = initializer_spec(initializer) if initializer else None
    if init:
        spec["initializer"] = init
    for key in ("runtimePatches", "activeDeadlineSeconds"):
        if given.get(key):
            spec[key] = given[key]
    return spec


def trainjob_manifest(
    runtime: Runtime,
    initializer: Initializer | None,
    trainer: CustomTrainer | CustomTrainerContainer | BuiltinTrainer | None,
    job_spec: JSON,
    ttl_seconds_after_finished: int | None = None,
) -> JSON:
    """The TrainJob (JSON) :meth:`trainer.client.AsyncTrainerClient.train` creates: ``spec.runtimeRef``
    naming ``runtime``, ``spec.trainer`` (:func:`trainer_spec`, :func:`builtin_trainer_spec`) and
    ``spec.initializer`` (:func:`initializer_spec`); from ``job_spec``, the dict the options filled,
    ``metadata.name``/``labels``/``annotations`` and ``spec.trainer.command``/``args``,
    ``spec.runtimePatches``, ``spec.activeDeadlineSeconds`` and ``spec.ttlSecondsAfterFinished``
    (``ttl_seconds_after_finished`` wins over it). Without a name: a letter and 11 hex digits.
    Raises ``ValueError`` for a trainer of another type or one the runtime cannot run."""
    meta = job_spec.get("metadata") or {}
    given = job_spec.get("spec") or {}
    spec = _train_spec(runtime, initializer, trainer, given)
    ttl = ttl_seconds_after_finished if ttl_seconds_after_finished is not None else given.get("ttlSecondsAfterFinished")
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    name = str(meta.get("name") or random.choice(string.ascii_lowercase) + uuid.uuid4().hex[:11])
    metadata: JSON = {"name": name}
    for key in ("labels", "annotations"):
        if meta.get(key):
            metadata[key] = dict(meta[key])
    api_version = TrainJob.model_fields["api_version"].default
    return {"apiVersion": api_version, "kind": TrainJob.KIND, "metadata": metadata, "spec": spec}
