"""torchtune's BuiltinTrainer (``spec.trainer.command: [tune, run]``) on upstream's torchtune runtimes
(config/samples/upstream): the trainer pod's command and environment, and the admission refusals, are
those kubeflow/trainer ``pkg/runtime/framework/plugins/torch/torchtune.go`` and ``torch.go`` give. The
expected values are worked out from upstream's code and its tests (``torchtune_test.go``, ``torch_test.go``,
``pkg/runtime/core/trainingruntime_test.go``)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.conftest import SAMPLES, info
from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainJob
from trainer.framework.json_codec import JSON
from trainer.framework.merge import find_named
from trainer.trainjob.children import build_children
from trainer.trainjob.policies import torchtune as tt
from trainer.trainjob.validation import trainjob_errors

RANK = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
RDZV = "--rdzv_endpoint=tj-node-0-0.tj:29500"
LLAMA_TAIL = [
    "output_dir=/workspace/output",
    "tokenizer.path=/workspace/model/original/tokenizer.model",
    "checkpointer.checkpoint_dir=/workspace/model",
]
QWEN_TAIL = [
    "output_dir=/workspace/output",
    "tokenizer.path=/workspace/model/vocab.json",
    "tokenizer.merges_file=/workspace/model/merges.txt",
    "checkpointer.checkpoint_dir=/workspace/model",
]
RUNTIMES = {
    "torchtune-llama3.2-1b": ("llama3_2/1B", LLAMA_TAIL),
    "torchtune-llama3.2-3b": ("llama3_2/3B", LLAMA_TAIL),
    "torchtune-qwen2.5-1.5b": ("qwen2_5/1.5B", QWEN_TAIL),
}
LORA = [
    "model.apply_lora_to_mlp=True",
    "model.lora_attn_modules=[q_proj,k_proj,v_proj,output_proj]",
    "dataset=torchtune.datasets.instruct_dataset",
]
QLORA = [*LORA, "model.quantize_base=True"]
ONE_GPU = {"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 1}}


def runtime(name: str) -> ClusterTrainingRuntime:
    return ClusterTrainingRuntime.model_validate(yaml.safe_load((SAMPLES / "upstream" / f"{name}.yaml").read_text()))


def trainjob(runtime_name: str, command: list[str] | None = None, **trainer: Any) -> TrainJob:
    spec = {"command": ["tune", "run"] if command is None else command, **trainer}
    return TrainJob.model_validate(
        {
            "metadata": {"name": "tj", "namespace": "ns", "uid": "u-1"},
            "spec": {"runtimeRef": {"name": runtime_name}, "trainer": spec},
        }
    )


def done(rjob: str) -> JSON:
    return {
        "metadata": {"name": f"tj-{rjob}-0", "labels": {"jobset.sigs.k8s.io/replicatedjob-name": rjob}},
        "status": {"conditions": [{"type": "Complete", "status": "True"}]},
    }


INITIALIZED = [done("dataset-initializer"), done("model-initializer")]


def errors(rt: ClusterTrainingRuntime, tj: TrainJob) -> list[str]:
    return trainjob_errors(info(tj, rt).info)


def node(rt: ClusterTrainingRuntime, tj: TrainJob) -> JSON:
    """The trainer's ``node`` container as its Job gets it (the initializers done)."""
    built = build_children(info(tj, rt, INITIALIZED), suspend=False)
    job = next(j for j in built.jobs if j["metadata"]["name"] == "tj-node-0")
    container = find_named(job["spec"]["template"]["spec"]["containers"], "node")
    assert container is not None
    return container


def env_of(container: JSON) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


# (trainer fields, recipe, config suffix, rendezvous): what upstream derives on its runtimes (2 GPUs each).
ADMITTED: dict[str, tuple[dict[str, Any], str, str, bool]] = {
    "full, one node of two GPUs": ({}, "full_finetune_distributed", "_full", True),
    "full, one GPU": ({"resourcesPerNode": ONE_GPU}, "full_finetune_single_device", "_full_single_device", False),
    "full, numProcPerNode 1 on two GPUs": (
        {"numProcPerNode": 1},
        "full_finetune_single_device",
        "_full_single_device",
        False,
    ),
    "LoRA, two GPUs": ({"args": LORA}, "lora_finetune_distributed", "_lora", True),
    "LoRA, one GPU": (
        {"args": LORA, "resourcesPerNode": ONE_GPU},
        "lora_finetune_single_device",
        "_lora_single_device",
        False,
    ),
    "DoRA with quantize_base, two GPUs": (
        {"args": [*QLORA, "model.use_dora=True"]},
        "lora_finetune_distributed",
        "_lora",
        True,
    ),
    "quantize_base=False is not QLoRA": (
        {"args": [*LORA, "model.quantize_base=False"]},
        "lora_finetune_distributed",
        "_lora",
        True,
    ),
}


@pytest.mark.parametrize("case", list(ADMITTED))
@pytest.mark.parametrize("name", list(RUNTIMES))
def test_the_trainer_gets_upstreams_recipe_config_and_command(name: str, case: str) -> None:
    fields, recipe, suffix, rendezvous = ADMITTED[case]
    model, tail = RUNTIMES[name]
    rt, tj = runtime(name), trainjob(name, **fields)
    assert errors(rt, tj) == []
    container = node(rt, tj)
    head = ["tune", "run", *([RDZV] if rendezvous else [])]
    assert container["command"] == [*head, recipe, "--config", f"{model}{suffix}", *tail]
    assert container.get("args") == fields.get("args")  # the TrainJob's args, unchanged
    assert env_of(container) == {
        "PET_NNODES": "1",
        "PET_NPROC_PER_NODE": str(fields.get("numProcPerNode", "auto")),
        "PET_NODE_RANK": RANK,
    }  # no PET_MASTER_ADDR / PET_MASTER_PORT: torchtune is given --rdzv_endpoint
    assert {"containerPort": 29500, "protocol": "TCP"} in container["ports"]


@pytest.mark.parametrize("name", ["torchtune-llama3.2-1b", "torchtune-llama3.2-3b"])
def test_qlora_on_one_gpu_runs_the_single_device_recipe(name: str) -> None:
    model, tail = RUNTIMES[name]
    rt, tj = runtime(name), trainjob(name, args=QLORA, resourcesPerNode=ONE_GPU)
    assert errors(rt, tj) == []
    config = f"{model}_qlora_single_device"
    assert node(rt, tj)["command"] == ["tune", "run", "lora_finetune_single_device", "--config", config, *tail]


@pytest.mark.parametrize("name", ["torchtune-llama3.2-1b", "torchtune-llama3.2-3b"])
def test_qlora_on_more_than_one_device_is_refused_for_llama_3_2(name: str) -> None:
    model, _ = RUNTIMES[name]
    rt = runtime(name)
    expected = [
        f"spec.trainer.numProcPerNode: must be auto or 1 for {model} model when using QLoRA",
        f"spec.trainer.resourcesPerNode: must have gpu resource with value 1 for {model} model when using QLoRA",
    ]
    assert errors(rt, trainjob(name, args=QLORA)) == expected
    assert errors(rt, trainjob(name, args=QLORA, numProcPerNode=2)) == expected


@pytest.mark.parametrize("fields", [{}, {"resourcesPerNode": ONE_GPU}], ids=["two GPUs", "one GPU"])
def test_qlora_is_refused_for_qwen(fields: dict[str, Any]) -> None:
    name = "torchtune-qwen2.5-1.5b"
    assert errors(runtime(name), trainjob(name, args=QLORA, **fields)) == [
        "spec.runtimeRef.name: QLoRA is not supported for qwen2_5/1.5B model"
    ]


@pytest.mark.parametrize("name", list(RUNTIMES))
def test_more_than_one_node_is_refused_for_the_shipped_models_and_lora_on_several_nodes_too(name: str) -> None:
    model, _ = RUNTIMES[name]
    rt = runtime(name)
    one = f"spec.trainer.numNodes: must be 1 for {model} model"
    lora = "spec.trainer.numNodes: LoRA fine-tuning is not supported for multi-node training in TorchTune"
    assert errors(rt, trainjob(name, numNodes=2)) == [one]
    assert errors(rt, trainjob(name, numNodes=2, args=LORA)) == [one, lora]
    assert errors(rt, trainjob(name, numNodes=2, args=QLORA)) == [one, lora]


def llama_70b() -> ClusterTrainingRuntime:
    """Upstream's llama3.2-1b runtime named for Llama 3.3 70B (upstream ships none; its unit test
    ``trainingruntime_test.go`` builds one like it)."""
    raw = yaml.safe_load((SAMPLES / "upstream" / "torchtune-llama3.2-1b.yaml").read_text())
    raw["metadata"]["name"] = "torchtune-llama3.3-70b"
    return ClusterTrainingRuntime.model_validate(raw)


def test_llama_3_3_70b_runs_on_several_nodes_with_the_multinode_config() -> None:
    rt = llama_70b()
    tj = trainjob("torchtune-llama3.3-70b", numNodes=30, numProcPerNode=3, args=["dtype=fp16", "batch_size=32"])
    assert errors(rt, tj) == []
    container = node(rt, tj)
    assert container["command"] == [
        "tune",
        "run",
        RDZV,
        "full_finetune_distributed",
        "--config",
        "llama3_3/70B_full_multinode",
        *LLAMA_TAIL,
    ]
    assert env_of(container) == {"PET_NNODES": "30", "PET_NPROC_PER_NODE": "3", "PET_NODE_RANK": RANK}
    lora = "spec.trainer.numNodes: LoRA fine-tuning is not supported for multi-node training in TorchTune"
    assert errors(rt, trainjob("torchtune-llama3.3-70b", numNodes=2, args=LORA)) == [lora]


@pytest.mark.parametrize(
    ("runtime_name", "model"),
    [("torchtune-gpt-20b", "gpt/20B"), ("torchtune-llama3.2", ""), ("my-torchtune-llama3.2-1b", "")],
)
def test_a_runtime_name_without_a_supported_model_is_refused(runtime_name: str, model: str) -> None:
    raw = yaml.safe_load((SAMPLES / "upstream" / "torchtune-llama3.2-1b.yaml").read_text())
    raw["metadata"]["name"] = runtime_name
    rt = ClusterTrainingRuntime.model_validate(raw)
    assert errors(rt, trainjob(runtime_name)) == [
        f"spec.runtimeRef.name: must have a supported pretrained model, invalid model configured: {model}"
    ]


def test_immutable_configs_in_args_are_refused_each_at_its_index() -> None:
    name = "torchtune-qwen2.5-1.5b"
    args = ["dtype=bf16", "output_dir=/tmp/out", "tokenizer.path=x", "checkpointer.checkpoint_dir=y"]
    args += ["tokenizer.merges_file=z", "output_dir_extra=1"]
    got = errors(runtime(name), trainjob(name, args=args))
    assert got == [
        f'spec.trainer.args[{i}]: must not set immutable config "{key}" in trainer args; it is managed by the runtime'
        for i, key in [
            (1, "output_dir"),
            (2, "tokenizer.path"),
            (3, "checkpointer.checkpoint_dir"),
            (4, "tokenizer.merges_file"),
        ]
    ]


def test_another_command_is_plain_torchrun_with_the_master_address() -> None:
    name = "torchtune-llama3.2-1b"
    rt = runtime(name)
    tj = trainjob(name, command=["tune", "run", "full_finetune_distributed", "--config", "llama3_2/1B_full"])
    assert errors(rt, tj) == []
    container = node(rt, tj)
    assert container["command"] == ["tune", "run", "full_finetune_distributed", "--config", "llama3_2/1B_full"]
    assert env_of(container)["PET_MASTER_ADDR"] == "tj-node-0-0.tj"
    # no trainer command: the runtime's own, whole
    own = node(rt, TrainJob.model_validate(trainjob(name).to_dict() | {"spec": {"runtimeRef": {"name": name}}}))
    assert own["command"][:3] == ["tune", "run", "--rdzv_endpoint=localhost:29500"]


def test_env_injection_targets_still_get_the_master_address() -> None:
    name = "torchtune-llama3.2-1b"
    raw = yaml.safe_load((SAMPLES / "upstream" / f"{name}.yaml").read_text())
    raw["spec"]["mlPolicy"]["torch"] = {"envInjection": {"targets": [{"jobName": "node", "containerNames": ["check"]}]}}
    pod = raw["spec"]["template"]["spec"]["replicatedJobs"][2]["template"]["spec"]["template"]["spec"]
    pod["initContainers"] = [{"name": "check", "image": "busybox"}]
    rt = ClusterTrainingRuntime.model_validate(raw)
    built = build_children(info(trainjob(name), rt, INITIALIZED), suspend=False)
    job = next(j for j in built.jobs if j["metadata"]["name"] == "tj-node-0")
    check = env_of(job["spec"]["template"]["spec"]["initContainers"][0])
    assert check["PET_MASTER_ADDR"] == "tj-node-0-0.tj" and check["PET_MASTER_PORT"] == "29500"
    main = find_named(job["spec"]["template"]["spec"]["containers"], "node")
    assert main is not None and "PET_MASTER_ADDR" not in env_of(main)


def test_an_elastic_runtime_refuses_the_torchtune_entrypoint() -> None:
    name = "torchtune-llama3.2-1b"
    raw = yaml.safe_load((SAMPLES / "upstream" / f"{name}.yaml").read_text())
    raw["spec"]["mlPolicy"]["torch"] = {"elasticPolicy": {"minNodes": 1, "maxNodes": 2}}
    (message,) = errors(ClusterTrainingRuntime.model_validate(raw), trainjob(name))
    assert message.startswith("spec.trainer.command: the torchtune entrypoint [tune, run] is not supported with ")
    assert "mlPolicy.torch.elasticPolicy" in message


# ----------------------------------------------------------------- the pure pieces, as upstream's unit tests


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("torchtune-llama3.2-1b", "llama3_2/1B"),
        ("torchtune-qwen2.5-1.5b", "qwen2_5/1.5B"),
        ("torchtune-llama3.2", ""),
        ("torchtune-llama3.2-1b-extra", ""),
        ("", ""),
    ],
)
def test_model_of(name: str, model: str) -> None:
    assert tt.model_of(name) == model


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (["model.quantize_base=True"], True),
        (["model.quantize_base=False"], False),
        (["model.quantize_base=True", "model.use_dora=True"], False),
        (["model.quantize_base=True", "model.use_dora=False"], True),
        (["model.quantize_base= TRUE "], True),
        (["batch_size=32"], False),
        (None, False),
    ],
)
def test_qlora(args: list[str] | None, want: bool) -> None:
    assert tt.qlora(args) is want


def test_lora() -> None:
    assert tt.lora(["batch_size=32", "model.lora_attn_modules=['q_proj','v_proj']"])
    assert not tt.lora(["batch_size=32", "epochs=10"])
    assert not tt.lora(None)


LORA1 = ["model.lora_attn_modules=['q_proj']"]
QLORA1 = ["model.quantize_base=True"]


@pytest.mark.parametrize(
    ("nodes", "procs", "gpus", "args", "recipe", "suffix"),
    [
        (1, "auto", 1, None, "full_finetune_single_device", "_full_single_device"),
        (1, "auto", 1, LORA1, "lora_finetune_single_device", "_lora_single_device"),
        (1, "auto", 1, QLORA1, "lora_finetune_single_device", "_qlora_single_device"),
        (1, "auto", 4, None, "full_finetune_distributed", "_full"),
        (1, "auto", 4, LORA1, "lora_finetune_distributed", "_lora"),
        (1, "auto", 4, QLORA1, "lora_finetune_distributed", "_qlora"),
        (2, "auto", 8, None, "full_finetune_distributed", "_full_multinode"),
        (1, 1, 4, None, "full_finetune_single_device", "_full_single_device"),
        (1, 4, 4, None, "full_finetune_distributed", "_full"),
    ],
)
def test_recipe_and_config(
    nodes: int, procs: int | str, gpus: int, args: list[str] | None, recipe: str, suffix: str
) -> None:
    got = tt.recipe_and_config("torchtune-llama3.2-1b", nodes, procs, gpus, args)
    assert got == (recipe, f"llama3_2/1B{suffix}")


def test_immutable_overrides_keep_only_the_runtime_managed_items() -> None:
    assert tt.immutable_overrides(["output_dir=/out", "tokenizer.path=/tok", "batch_size=32"]) == [
        "output_dir=/out",
        "tokenizer.path=/tok",
    ]
    assert tt.immutable_overrides(None) == []


@pytest.mark.parametrize(
    ("nodes", "procs", "gpus", "want"),
    [
        (1, "auto", 1, False),
        (1, "auto", 2, True),
        (1, 1, 8, False),
        (1, 2, 0, True),
        (2, 1, 1, True),
        (1, "auto", 0, False),
    ],
)
def test_the_rendezvous_endpoint_only_where_several_processes_meet(
    nodes: int, procs: int | str, gpus: int, want: bool
) -> None:
    assert tt.distributed(nodes, procs, gpus) is want


# ----------------------------------------------------------------- what the official kubeflow SDK sends


@pytest.mark.parametrize(
    ("name", "gpus", "peft", "recipe", "config"),
    [
        ("torchtune-llama3.2-1b", 2, None, "full_finetune_distributed", "llama3_2/1B_full"),
        ("torchtune-llama3.2-3b", 1, {}, "lora_finetune_single_device", "llama3_2/3B_lora_single_device"),
        (
            "torchtune-llama3.2-1b",
            1,
            {"quantize_base": True},
            "lora_finetune_single_device",
            "llama3_2/1B_qlora_single_device",
        ),
        ("torchtune-qwen2.5-1.5b", 2, {}, "lora_finetune_distributed", "qwen2_5/1.5B_lora"),
    ],
)
def test_the_kubeflow_sdks_builtin_trainer_is_admitted_and_gets_its_recipe(
    name: str, gpus: int, peft: dict[str, Any] | None, recipe: str, config: str
) -> None:
    import kubeflow.trainer as upstream

    from tests.client.test_client_shapes import upstream_runtime, upstream_spec

    doc = yaml.safe_load((SAMPLES / "upstream" / f"{name}.yaml").read_text())
    lora = upstream.LoraConfig(**peft) if peft is not None else None
    tune = upstream.TorchTuneConfig(
        dtype=upstream.DataType.BF16, epochs=1, peft_config=lora, resources_per_node={"gpu": gpus}
    )
    spec = upstream_spec(upstream_runtime(doc), upstream.BuiltinTrainer(config=tune))
    tj = TrainJob.model_validate({"metadata": {"name": "tj", "namespace": "ns", "uid": "u-1"}, "spec": spec})
    rt = ClusterTrainingRuntime.model_validate(doc)
    assert errors(rt, tj) == []
    container = node(rt, tj)
    head = ["tune", "run", *([RDZV] if gpus > 1 else [])]
    assert container["command"] == [*head, recipe, "--config", config, *RUNTIMES[name][1]]
    assert container["args"] == spec["trainer"]["args"]
