"""torchtune's BuiltinTrainer on an ``mlPolicy.torch`` runtime: a TrainJob whose ``spec.trainer.command`` is
exactly ``[tune, run]`` gets its recipe, its config file and its rendezvous from the operator. Pure.

Follows kubeflow/trainer ``pkg/runtime/framework/plugins/torch/torchtune.go`` and ``torch.go``
(``EnforceMLPolicy``, ``Validate``), with the names and figures of ``pkg/constants/constants.go``:

* the model is read from the runtime's name (:func:`model_of`: ``torchtune-llama3.2-1b`` ->
  ``llama3_2/1B``); upstream supports :data:`SUPPORTED_MODELS`;
* the recipe and config (:func:`recipe_and_config`) follow from the node count, the processes and GPUs per
  node and the LoRA/QLoRA overrides in ``spec.trainer.args`` (:func:`lora`, :func:`qlora`);
* the command (:func:`command`) is ``tune run [--rdzv_endpoint=<rank-0 pod>:29500] <recipe> --config
  <config>`` and the items of the runtime's ``node`` command that set :data:`IMMUTABLE_CONFIGS`; the
  TrainJob's ``args`` stay its container's args;
* :func:`errors` gives upstream's admission rules, its messages word for word after the field's path.

The one difference: the rules are checked against what the pods get (the node count the job runs with,
``numProcPerNode`` resolved as ``PET_NPROC_PER_NODE`` is, the GPUs of the merged ``resourcesPerNode`` and of
DRA claims), where upstream's webhook reads the TrainJob's own ``numNodes``, ``numProcPerNode`` and
``resourcesPerNode`` alone; a job whose pods would get a config torchtune lacks is refused at admission.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from trainer.trainjob.policies.base import MASTER_PORT

ENTRYPOINT = ["tune", "run"]
"""``TorchTuneEntrypoint``: the trainer command that selects all of this."""

LLAMA3_2_1B = "llama3_2/1B"
LLAMA3_2_3B = "llama3_2/3B"
LLAMA3_3_70B = "llama3_3/70B"
QWEN2_5_1_5B = "qwen2_5/1.5B"
SUPPORTED_MODELS = frozenset({LLAMA3_2_1B, LLAMA3_2_3B, LLAMA3_3_70B, QWEN2_5_1_5B})
"""``TorchTuneSupportedPretrainedModels``."""
MULTI_NODE_MODELS = frozenset({LLAMA3_3_70B})
"""The models that may run on more than one node."""

FULL_SINGLE_DEVICE = "full_finetune_single_device"
FULL_DISTRIBUTED = "full_finetune_distributed"
LORA_SINGLE_DEVICE = "lora_finetune_single_device"
LORA_DISTRIBUTED = "lora_finetune_distributed"
"""torchtune's recipes."""

FULL_SINGLE_DEVICE_SUFFIX = "_full_single_device"
FULL_MULTI_DEVICES_SUFFIX = "_full"
FULL_MULTI_NODES_SUFFIX = "_full_multinode"
LORA_SINGLE_DEVICE_SUFFIX = "_lora_single_device"
QLORA_SINGLE_DEVICE_SUFFIX = "_qlora_single_device"
LORA_DISTRIBUTED_SUFFIX = "_lora"
QLORA_DISTRIBUTED_SUFFIX = "_qlora"
"""Config file suffixes: the config is ``<model><suffix>``."""

LORA_ATTN_MODULES = "model.lora_attn_modules"
QUANTIZE_BASE = "model.quantize_base"
USE_DORA = "model.use_dora"
"""The config keys that select LoRA and QLoRA."""

IMMUTABLE_CONFIGS = ("output_dir", "tokenizer.path", "checkpointer.checkpoint_dir", "tokenizer.merges_file")
"""``TorchTuneImmutableConfigs``: set by the runtime's command, never by ``spec.trainer.args``."""

RDZV_ENDPOINT = "--rdzv_endpoint"
CONFIG = "--config"


def model_of(runtime_name: str) -> str:
    """The model a runtime's name says: ``<framework>-<family>-<size>`` -> ``<family, '.' as '_'>/<SIZE>``
    (``torchtune-qwen2.5-1.5b`` -> ``qwen2_5/1.5B``); "" unless the name has exactly three ``-`` fields."""
    fields = runtime_name.split("-")
    if len(fields) != 3:
        return ""
    return f"{fields[1].replace('.', '_')}/{fields[2].upper()}"


def lora(args: Sequence[str] | None) -> bool:
    """LoRA: an argument contains ``model.lora_attn_modules``."""
    return any(LORA_ATTN_MODULES in arg for arg in args or [])


def _enabled(args: Sequence[str] | None, key: str) -> bool:
    """An argument ``k=v`` whose ``k`` contains ``key`` and whose ``v`` is ``true`` (any case, spaces
    around it ignored)."""
    for arg in args or []:
        name, found, value = arg.partition("=")
        if found and key in name and value.strip().lower() == "true":
            return True
    return False


def qlora(args: Sequence[str] | None) -> bool:
    """QLoRA: ``model.quantize_base=True`` unless ``model.use_dora=True`` (DoRA is not QLoRA)."""
    return not _enabled(args, USE_DORA) and _enabled(args, QUANTIZE_BASE)


def recipe_and_config(
    runtime_name: str, num_nodes: int, procs: int | str, gpus: int, args: Sequence[str] | None
) -> tuple[str, str]:
    """(recipe, config file) for ``num_nodes`` nodes of ``procs`` processes (an integer, or a string such
    as ``auto``) and ``gpus`` GPUs each, and the overrides ``args``: one device (one node with one process
    or one GPU) runs a single-device recipe, full, LoRA or QLoRA; one node with more runs the distributed
    LoRA or QLoRA recipe, or the distributed full one; more nodes run full fine-tuning on the multi-node
    config."""
    recipe, suffix = FULL_DISTRIBUTED, FULL_MULTI_DEVICES_SUFFIX
    if num_nodes == 1 and (procs == 1 or gpus == 1):
        if qlora(args):
            recipe, suffix = LORA_SINGLE_DEVICE, QLORA_SINGLE_DEVICE_SUFFIX
        elif lora(args):
            recipe, suffix = LORA_SINGLE_DEVICE, LORA_SINGLE_DEVICE_SUFFIX
        else:
            recipe, suffix = FULL_SINGLE_DEVICE, FULL_SINGLE_DEVICE_SUFFIX
    elif num_nodes == 1 and qlora(args):
        recipe, suffix = LORA_DISTRIBUTED, QLORA_DISTRIBUTED_SUFFIX
    elif num_nodes == 1 and lora(args):
        recipe, suffix = LORA_DISTRIBUTED, LORA_DISTRIBUTED_SUFFIX
    elif num_nodes > 1:
        suffix = FULL_MULTI_NODES_SUFFIX
    return recipe, f"{model_of(runtime_name)}{suffix}"


def immutable_overrides(runtime_command: Sequence[str] | None) -> list[str]:
    """The items of the runtime's ``node`` command that set one of :data:`IMMUTABLE_CONFIGS`, in order."""
    return [item for item in runtime_command or [] if item.split("=")[0] in IMMUTABLE_CONFIGS]


def distributed(num_nodes: int, procs: int | str, gpus: int) -> bool:
    """Whether torchtune needs a rendezvous: several nodes, several processes per node, or a string
    ``procs`` (``auto``) on a node with several GPUs."""
    return num_nodes > 1 or (isinstance(procs, int) and procs > 1) or (isinstance(procs, str) and gpus > 1)


def command(
    runtime_name: str,
    master: str,
    num_nodes: int,
    procs: int | str,
    gpus: int,
    args: Sequence[str] | None,
    runtime_command: Sequence[str] | None,
) -> list[str]:
    """The trainer's ``node`` command: ``tune run``, ``--rdzv_endpoint=<master>:29500`` when
    :func:`distributed` (``master``: the rank-0 pod's host name), ``<recipe> --config <config>``
    (:func:`recipe_and_config`), then :func:`immutable_overrides` of ``runtime_command``."""
    out = list(ENTRYPOINT)
    if distributed(num_nodes, procs, gpus):
        out.append(f"{RDZV_ENDPOINT}={master}:{MASTER_PORT}")
    recipe, config = recipe_and_config(runtime_name, num_nodes, procs, gpus, args)
    return [*out, recipe, CONFIG, config, *immutable_overrides(runtime_command)]


def errors(runtime_name: str, num_nodes: int, procs: int | str, gpus: int, args: Sequence[str] | None) -> list[str]:
    """What upstream's webhook refuses of a torchtune TrainJob on runtime ``runtime_name`` with
    ``num_nodes`` nodes of ``procs`` processes and ``gpus`` GPUs each and the overrides ``args``, one
    message per problem: a model not in :data:`SUPPORTED_MODELS`; more than one node but for a multi-node
    model; QLoRA for Qwen2.5 1.5B, and QLoRA on more than one device for Llama 3.2 (two messages, at
    ``numProcPerNode`` and ``resourcesPerNode``); LoRA or QLoRA on more than one node; an immutable config
    in ``args``."""
    model = model_of(runtime_name)
    out = []
    if model not in SUPPORTED_MODELS:
        out.append(f"spec.runtimeRef.name: must have a supported pretrained model, invalid model configured: {model}")
    if num_nodes > 1 and model not in MULTI_NODE_MODELS:
        out.append(f"spec.trainer.numNodes: must be 1 for {model} model")
    _, config = recipe_and_config(runtime_name, num_nodes, procs, gpus, args)
    if QLORA_DISTRIBUTED_SUFFIX in config:
        if model == QWEN2_5_1_5B:
            out.append(f"spec.runtimeRef.name: QLoRA is not supported for {model} model")
        if QLORA_SINGLE_DEVICE_SUFFIX not in config and model in (LLAMA3_2_1B, LLAMA3_2_3B):
            out.append(f"spec.trainer.numProcPerNode: must be auto or 1 for {model} model when using QLoRA")
            out.append(
                f"spec.trainer.resourcesPerNode: must have gpu resource with value 1 for {model} model when using QLoRA"
            )
    if num_nodes > 1 and (lora(args) or qlora(args)):
        out.append("spec.trainer.numNodes: LoRA fine-tuning is not supported for multi-node training in TorchTune")
    for i, arg in enumerate(args or []):
        key = arg.split("=", 1)[0]
        if key in IMMUTABLE_CONFIGS:
            out.append(
                f"spec.trainer.args[{i}]: must not set immutable config {json.dumps(key)} in trainer args; "
                "it is managed by the runtime"
            )
    return out
