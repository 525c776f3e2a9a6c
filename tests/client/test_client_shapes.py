"""The kubeflow SDK's shapes in :mod:`trainer.client`: runtimes, TrainJobs and their steps read
from objects, a function turned into a container command (run here with ``bash``), ``train``,
the client's namespace over a manifest's, and the positional arguments of the waits and logs.
No cluster needed: the asyncio client runs over the in-memory Kube double."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import kubeflow.trainer as upstream
import pytest
import yaml

import trainer.client as sdk
from tests.conftest import SAMPLES
from tests.kube_double import RecordingKube
from trainer.api.kinds import PODS, TRAINJOBS
from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainJob, runtime_from_dict
from trainer.client import AsyncTrainerClient, NotFoundError, TrainerClient, jobs, trainjob_status
from trainer.client import TrainJob as JobShape
from trainer.client.errors import LogsUnavailableError
from trainer.client.shapes import Runtime, RuntimeKind, RuntimeTrainer, TrainerType, runtime_of, steps_of, trainjob_of
from trainer.client.trainers import function_command, initializer_spec, resources_per_node, trainer_spec
from trainer.client.types import Event
from trainer.framework.kube.client import Kube


def sample_runtime() -> ClusterTrainingRuntime:
    rt = runtime_from_dict(yaml.safe_load((SAMPLES / "torch-distributed.yaml").read_text()))
    assert isinstance(rt, ClusterTrainingRuntime)
    return rt


def pod(
    name: str, role: str, index: int, phase: str, created: str, cpu: str | None = None, job: str = "j"
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "node" if role in ("node", "launcher") else role}
    if cpu:
        container["resources"] = {"limits": {"cpu": cpu}}
    return {
        "metadata": {
            "name": name,
            "creationTimestamp": created,
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": job,
                "jobset.sigs.k8s.io/replicatedjob-name": role,
                "batch.kubernetes.io/job-completion-index": str(index),
            },
        },
        "spec": {"containers": [container]},
        "status": {"phase": phase},
    }


# --------------------------------------------------------------------------- shapes


def test_shapes_have_upstreams_fields_in_upstreams_order_then_ours() -> None:
    import dataclasses

    pairs: list[tuple[type[Any], type[Any]]] = [
        (JobShape, upstream.types.types.TrainJob),
        (Runtime, upstream.Runtime),
        (RuntimeTrainer, upstream.RuntimeTrainer),
        (sdk.CustomTrainer, upstream.CustomTrainer),
        (sdk.CustomTrainerContainer, upstream.CustomTrainerContainer),
        (sdk.Initializer, upstream.Initializer),
        (sdk.S3DatasetInitializer, upstream.S3DatasetInitializer),
        (sdk.DataCacheInitializer, upstream.DataCacheInitializer),
        (sdk.HuggingFaceModelInitializer, upstream.HuggingFaceModelInitializer),
        (sdk.BuiltinTrainer, upstream.BuiltinTrainer),
        (sdk.TorchTuneConfig, upstream.TorchTuneConfig),
        (sdk.LoraConfig, upstream.LoraConfig),
        (sdk.TorchTuneInstructDataset, upstream.TorchTuneInstructDataset),
    ]
    for shape, theirs in pairs:
        names = [f.name for f in dataclasses.fields(theirs) if not f.name.startswith("_")]
        assert [f.name for f in dataclasses.fields(shape)][: len(names)] == names, shape
    assert {k.value for k in RuntimeKind} == {k.value for k in upstream.RuntimeKind}
    assert {t.value for t in TrainerType} == {t.value for t in upstream.TrainerType}
    for enum in (sdk.Loss, sdk.DataType, sdk.DataFormat):
        assert {(m.name, m.value) for m in enum} == {(m.name, m.value) for m in getattr(upstream, enum.__name__)}
    for method in ("list_runtimes", "get_runtime", "get_runtime_packages", "train", "list_jobs", "get_job"):
        assert hasattr(TrainerClient, method)
    methods = [m for m in vars(upstream.TrainerClient) if not m.startswith("_")]
    assert "get_job" in methods and "train" in methods
    for client in (TrainerClient, AsyncTrainerClient):
        for method in methods:
            upstream_args = list(inspect.signature(getattr(upstream.TrainerClient, method)).parameters)
            our_args = list(inspect.signature(getattr(client, method)).parameters)
            assert our_args[: len(upstream_args)] == upstream_args, (client, method)
            ours = getattr(client, method)
            assert client is TrainerClient or inspect.iscoroutinefunction(ours) or inspect.isasyncgenfunction(ours)


def test_a_runtime_reads_as_the_sdk_reads_it() -> None:
    rt = runtime_of(sample_runtime())
    assert (rt.name, rt.kind, rt.kind.value, rt.trainer.framework, rt.trainer.num_nodes) == (
        "torch-distributed",
        RuntimeKind.CLUSTER_TRAINING_RUNTIME,
        "ClusterTrainingRuntime",
        "torch",
        1,
    )
    assert rt.kind == "ClusterTrainingRuntime" and rt.metadata.name == "torch-distributed"
    assert rt.trainer.trainer_type == TrainerType.CUSTOM_TRAINER and rt.trainer.command == ("torchrun",)
    assert rt.trainer.image == "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"


def test_steps_and_status_of_a_trainjob() -> None:
    pods = [
        pod("j-node-0-1-old", "node", 1, "Failed", "2026-01-01T00:00:00Z"),
        pod("j-node-0-1-new", "node", 1, "Running", "2026-01-01T00:01:00Z", cpu="2"),
        pod("j-node-0-0-a", "node", 0, "Running", "2026-01-01T00:00:00Z"),
        pod("j-init", "dataset-initializer", 0, "Succeeded", "2026-01-01T00:00:00Z"),
        pod("j-other", "something-else", 0, "Running", "2026-01-01T00:00:00Z"),
    ]
    steps = steps_of(pods)
    assert [(s.name, s.status, s.pod_name, s.device, s.device_count) for s in steps] == [
        ("dataset-initializer", "Succeeded", "j-init", "Unknown", "Unknown"),
        ("node-0", "Running", "j-node-0-0-a", "Unknown", "Unknown"),
        ("node-1", "Running", "j-node-0-1-new", "cpu", "2"),
    ]
    mpi = steps_of([pod("l", "launcher", 0, "Running", "t"), pod("n", "node", 0, "Running", "t")], mpi=True)
    assert [s.name for s in mpi] == ["node-0", "node-1"]

    obj = TrainJob.model_validate(yaml.safe_load((SAMPLES / "trainjob.yaml").read_text()))
    obj.metadata.creation_timestamp = "2026-01-01T00:00:00Z"
    job = trainjob_of(obj, runtime_of(sample_runtime()), pods)
    assert (job.name, job.status, job.num_nodes, job.creation_timestamp.year) == ("pytorch-simple", "Created", 2, 2026)
    assert job.trainjob is obj and job.metadata.name == "pytorch-simple" and trainjob_status(job) == "Created"
    assert trainjob_of(obj, None, []).runtime is None


def test_events_have_the_sdks_event_time() -> None:
    event = Event.from_dict({"reason": "Created", "firstTimestamp": "2026-01-01T00:00:03Z"})
    assert event.event_time.second == 3


def test_errors_are_the_builtins_the_sdk_raises() -> None:
    assert isinstance(NotFoundError("TrainJob", "ns", "j"), RuntimeError | LookupError)
    assert issubclass(LogsUnavailableError, RuntimeError)


# --------------------------------------------------------------------------- trainers


def train_with(lr: float = 0.0, label: str = "") -> None:
    print(f"lr={lr} label={label} $HOME `x`")


def test_a_function_becomes_a_command_that_runs_it(tmp_path: Path) -> None:
    rt = runtime_of(sample_runtime())
    rt.trainer.set_command((sys.executable,))  # run it here with this Python instead of torchrun
    command = function_command(rt, train_with, {"lr": 0.5, "label": "a b"})
    assert command[:2] == ["bash", "-c"] and "def train_with" in command[2]
    out = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout == "lr=0.5 label=a b $HOME `x`\n"
    assert (tmp_path / "test_client_shapes.py").exists()

    mpi = Runtime("mpi", RuntimeTrainer(TrainerType.CUSTOM_TRAINER, "mpi", "img"), RuntimeKind.TRAINING_RUNTIME)
    mpi.trainer.set_command(("mpirun", "--hostfile", "/etc/mpi/hostfile"))
    cmd = function_command(mpi, train_with, None, ["numpy"], ["https://a/simple", "https://b/simple"])
    assert cmd[:5] == ["mpirun", "--hostfile", "/etc/mpi/hostfile", "bash", "-c"]
    assert "--index-url https://a/simple --extra-index-url https://b/simple" in cmd[-1]
    assert cmd[-1].endswith("exec python /home/mpiuser/test_client_shapes.py")
    with pytest.raises(ValueError, match="callable"):
        function_command(rt, cast(Any, "not a function"))


def test_trainer_and_initializer_specs() -> None:
    rt = runtime_of(sample_runtime())
    spec = trainer_spec(
        rt, sdk.CustomTrainerContainer(image="img", num_nodes=3, resources_per_node={"GPU": 2}, env={"A": "1"})
    )
    assert spec == {
        "numNodes": 3,
        "resourcesPerNode": {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}},
        "image": "img",
        "env": [{"name": "A", "value": "1"}],
    }
    assert trainer_spec(rt, sdk.CustomTrainerContainer(image="img", num_nodes=0))["numNodes"] == 0  # #3809
    assert "numNodes" not in trainer_spec(rt, sdk.CustomTrainerContainer(image="img"))
    assert resources_per_node({"mig-1g.5gb": 1, "Example.com/NPU": 1})["limits"] == {
        "nvidia.com/mig-1g.5gb": "1",
        "Example.com/NPU": "1",
    }
    with pytest.raises(ValueError, match="together"):
        resources_per_node({"gpu": 1, "mig-1g.5gb": 1})
    tune = Runtime("t", RuntimeTrainer(TrainerType.BUILTIN_TRAINER, "torchtune", "img"), RuntimeKind.TRAINING_RUNTIME)
    with pytest.raises(ValueError, match="builtin"):
        trainer_spec(tune, sdk.CustomTrainerContainer(image="img"))
    init = sdk.Initializer(
        dataset=sdk.HuggingFaceDatasetInitializer(storage_uri="hf://org/data", access_token="t"),
        model=sdk.HuggingFaceModelInitializer(storage_uri="hf://org/model"),
    )
    assert initializer_spec(init) == {
        "dataset": {"storageUri": "hf://org/data", "env": [{"name": "ACCESS_TOKEN", "value": "t"}]},
        "model": {
            "storageUri": "hf://org/model",
            "env": [{"name": "IGNORE_PATTERNS", "value": "*.msgpack,*.h5,*.bin,*.pt,*.pth"}],
        },
    }
    assert initializer_spec(sdk.Initializer()) is None
    with pytest.raises(ValueError, match="s3://"):
        sdk.S3DatasetInitializer(storage_uri="http://x")
    with pytest.raises(ValueError, match="greater than 1"):
        sdk.DataCacheInitializer(storage_uri="cache://a/b", metadata_loc="m", num_data_nodes=1)


# --------------------------------------------------------------------------- the client over the double


def client(namespace: str | None) -> tuple[AsyncTrainerClient, RecordingKube]:
    kube = RecordingKube()
    kube.put(yaml.safe_load((SAMPLES / "torch-distributed.yaml").read_text()))
    return AsyncTrainerClient(cast(Kube, kube), namespace), kube


async def test_train_creates_the_trainjob_in_the_clients_namespace() -> None:
    c, kube = client("team-a")
    labels = {"team": "a"}

    def name_option(job_spec: dict[str, Any], trainer: Any, backend: Any) -> None:
        job_spec.setdefault("metadata", {}).update({"name": "mine", "labels": labels})

    trainer = sdk.CustomTrainer(func=train_with, func_args={"lr": 1}, num_nodes=2, env={"E": "1"})
    name = await c.train("torch-distributed", trainer=trainer, options=[name_option])
    stored = await kube.get(TRAINJOBS, "team-a", "mine")
    assert name == "mine" and stored["metadata"]["labels"] == labels
    assert stored["spec"]["runtimeRef"] == {"name": "torch-distributed", "kind": "ClusterTrainingRuntime"}
    assert stored["spec"]["trainer"]["numNodes"] == 2 and "exec torchrun" in stored["spec"]["trainer"]["command"][-1]
    generated = await c.train()
    assert len(generated) == 12 and generated[0].isalpha()
    assert (await kube.get(TRAINJOBS, "team-a", generated))["spec"].get("trainer") is None
    with pytest.raises(NotFoundError):
        await c.train("no-such-runtime")
    with pytest.raises(ValueError, match="not supported"):
        await c.train(trainer=cast(Any, object()))

    running = pod("mine-node-0-0-x", "node", 0, "Running", "t", job="mine")
    running["metadata"]["namespace"] = "team-a"
    await kube.create(PODS, "team-a", running)
    view = await c.get_job("mine")
    assert (view.name, view.num_nodes, view.runtime and view.runtime.name, [s.name for s in view.steps]) == (
        "mine",
        2,
        "torch-distributed",
        ["node-0"],
    )
    assert [r.name for r in await c.list_runtimes()] == ["torch-distributed"]
    assert sorted(j.name for j in await c.list_jobs(await c.get_runtime("torch-distributed"))) == sorted(
        ["mine", generated]
    )
    assert isinstance(view.trainjob, TrainJob) and view.trainjob.metadata.name == "mine"


async def test_a_given_namespace_wins_over_the_manifests() -> None:
    manifest = yaml.safe_load((SAMPLES / "trainjob.yaml").read_text())
    assert manifest["metadata"]["namespace"] == "default"
    given, _ = client("team-a")
    assert (await given.create_job(manifest)).metadata.namespace == "team-a"
    assert (await given.create_job(manifest | {"metadata": {"name": "b"}}, "team-b")).metadata.namespace == "team-b"
    defaulted, _ = client(None)
    assert (await defaulted.create_job(manifest)).metadata.namespace == "default"


async def test_create_and_delete_take_every_kind_where_the_namespace_rule_puts_them() -> None:
    c, kube = client("team-a")
    runtime = yaml.safe_load((SAMPLES / "torch-distributed.yaml").read_text())
    runtime["metadata"]["name"] = "other"
    job = yaml.safe_load((SAMPLES / "trainjob.yaml").read_text())
    created = await c.create([runtime, job])
    assert [(o.kind, o.metadata.namespace) for o in created] == [
        ("ClusterTrainingRuntime", None),
        ("TrainJob", "team-a"),
    ]
    assert (await kube.get(TRAINJOBS, "team-a", "pytorch-simple"))["spec"]["runtimeRef"]["name"] == "torch-distributed"
    with pytest.raises(sdk.AlreadyExistsError, match="TrainJob team-a/pytorch-simple already exists"):
        await c.create(job)

    generated = {**job, "metadata": {"generateName": "pytorch-"}}
    for refuse in (c.apply, c.delete):
        with pytest.raises(sdk.ManifestError, match=r"generateName 'pytorch-' has no metadata\.name"):
            await refuse(generated)
    assert [o.metadata.name for o in await c.delete([job, runtime])] == ["pytorch-simple", "other"]
    assert await kube.get_or_none(TRAINJOBS, "team-a", "pytorch-simple") is None
    with pytest.raises(NotFoundError, match="ClusterTrainingRuntime other not found"):
        await c.delete(runtime)


def put_done_job(kube: RecordingKube, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Complete TrainJob ``team-a/done`` in ``kube``, which a wait sees at once (the double has no
    watch: :func:`trainer.client.jobs.observe` yields it)."""
    done = yaml.safe_load((SAMPLES / "trainjob.yaml").read_text())
    done["metadata"] = {"name": "done", "namespace": "team-a"}
    done["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    kube.put(done)

    async def observe(*_: Any, **__: Any) -> AsyncIterator[dict[str, Any]]:
        yield {"done": await kube.get(TRAINJOBS, "team-a", "done")}

    monkeypatch.setattr(jobs, "observe", observe)


async def test_old_positional_arguments_warn_and_still_work(monkeypatch: pytest.MonkeyPatch) -> None:
    c, kube = client("team-a")
    put_done_job(kube, monkeypatch)
    seen: list[str] = []
    with pytest.warns(DeprecationWarning, match="polling_interval"):
        await c.wait_for_job_status("done", {"Complete"}, 5, [lambda j: seen.append(trainjob_status(j))])
    assert seen == ["Complete"]
    await c.wait_for_job_status("done", {"Complete"}, 5, 1, [lambda j: seen.append("new")])
    assert seen[-1] == "new"
    with pytest.raises(ValueError, match="polling_interval"):
        await c.wait_for_job_status("done", {"Complete"}, 5, 0)
    with pytest.warns(DeprecationWarning, match="follow"), pytest.raises(NotFoundError):
        [line async for line in c.get_job_logs("missing", "node", 1, pod_timeout=1)]


# --------------------------------------------------------------------------- BuiltinTrainer


TORCHTUNE = SAMPLES / "upstream" / "torchtune-llama3.2-1b.yaml"


def upstream_runtime(doc: dict[str, Any]) -> Any:
    """The kubeflow SDK's ``Runtime`` of a ClusterTrainingRuntime, read by the SDK's own reader."""
    from kubeflow.trainer.backends.kubernetes import utils
    from kubeflow_trainer_api import models

    cr = models.TrainerV1alpha1ClusterTrainingRuntime.from_dict(doc)
    assert cr is not None and cr.spec.template.spec is not None and cr.metadata is not None
    framework = cr.metadata.labels["trainer.kubeflow.org/framework"]
    trainer = utils.get_runtime_trainer(framework, cr.spec.template.spec.replicated_jobs, cr.spec.ml_policy)
    return upstream.Runtime(name=doc["metadata"]["name"], trainer=trainer, kind=upstream.RuntimeKind(doc["kind"]))


def upstream_spec(runtime: Any, trainer: Any, initializer: Any = None) -> dict[str, Any]:
    """The TrainJob spec the kubeflow SDK's Kubernetes backend builds (``_get_trainjob_spec``, no cluster needed)."""
    from kubeflow.trainer.backends.kubernetes.backend import KubernetesBackend

    backend = object.__new__(KubernetesBackend)  # its __init__ loads a kubeconfig; the builder reads none
    spec: dict[str, Any] = backend._get_trainjob_spec(
        runtime=runtime, initializer=initializer, trainer=trainer
    ).to_dict()
    return spec


def as_upstream(obj: Any) -> Any:
    """The kubeflow SDK's object of the same type name and fields (enums by value)."""
    import dataclasses
    import enum

    if isinstance(obj, enum.Enum):
        return getattr(upstream, type(obj).__name__)(obj.value)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {f.name: as_upstream(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        return getattr(upstream, type(obj).__name__)(**fields)
    return obj


def wire(data: Any) -> Any:
    """``data`` as the apiserver stores it: without empty lists (the SDK sends ``env: []``), numbers
    as quantity strings (it sends ``cpu: 8.0`` where this client sends ``"8"``)."""
    if isinstance(data, dict):
        return {k: wire(v) for k, v in data.items() if v != []}
    if isinstance(data, list):
        return [wire(v) for v in data]
    if isinstance(data, float) and data.is_integer():
        return str(int(data))
    return str(data) if isinstance(data, int) and not isinstance(data, bool) else data


BUILTIN_CASES = [
    sdk.BuiltinTrainer(sdk.TorchTuneConfig()),
    sdk.BuiltinTrainer(
        sdk.TorchTuneConfig(
            dtype=sdk.DataType.BF16,
            batch_size=8,
            epochs=2,
            loss=sdk.Loss.CEWithChunkedOutputLoss,
            num_nodes=2,
            peft_config=sdk.LoraConfig(lora_rank=8, lora_alpha=16, lora_dropout=0.1, apply_lora_to_mlp=True),
            dataset_preprocess_config=sdk.TorchTuneInstructDataset(
                source=sdk.DataFormat.PARQUET,
                split="train[:10%]",
                train_on_input=False,
                new_system_prompt="Be brief.",
                column_map={"input": "question", "output": "answer"},
            ),
            resources_per_node={"gpu": 2, "cpu": 8, "memory": "64Gi"},
        )
    ),
]
INITIALIZERS = [
    None,
    sdk.Initializer(dataset=sdk.HuggingFaceDatasetInitializer(storage_uri="hf://tatsu-lab/alpaca/data")),
    sdk.Initializer(
        dataset=sdk.HuggingFaceDatasetInitializer(storage_uri="tatsu-lab/alpaca/data/train.parquet"),
        model=sdk.HuggingFaceModelInitializer(storage_uri="hf://meta-llama/Llama-3.2-1B-Instruct"),
    ),
    sdk.Initializer(dataset=sdk.HuggingFaceDatasetInitializer(storage_uri="hf://tatsu-lab")),
]


@pytest.mark.parametrize("initializer", INITIALIZERS)
@pytest.mark.parametrize("builtin", BUILTIN_CASES)
async def test_a_builtin_trainer_makes_the_trainjob_the_kubeflow_sdk_makes(
    builtin: sdk.BuiltinTrainer, initializer: sdk.Initializer | None
) -> None:
    doc = yaml.safe_load(TORCHTUNE.read_text())
    c, kube = client("team-a")
    kube.put(doc)
    name = await c.train("torchtune-llama3.2-1b", initializer, builtin)
    ours = (await kube.get(TRAINJOBS, "team-a", name))["spec"]
    theirs = upstream_spec(upstream_runtime(doc), as_upstream(builtin), as_upstream(initializer))
    assert wire(ours) == wire(theirs)
    assert ours["trainer"]["command"] == ["tune", "run"]


async def test_a_builtin_trainer_is_refused_where_it_cannot_run() -> None:
    c, _ = client("team-a")
    builtin = sdk.BuiltinTrainer(sdk.TorchTuneConfig())
    with pytest.raises(ValueError, match="BuiltinTrainer can't be used with runtime torch-distributed"):
        await c.train("torch-distributed", trainer=builtin)
    with pytest.raises(ValueError, match=re.escape("CustomTrainer can't be used with runtime torchtune-llama3.2-1b")):
        runtime = runtime_of(runtime_from_dict(yaml.safe_load(TORCHTUNE.read_text())))
        await c.train(runtime, trainer=sdk.CustomTrainer(func=train_with))
    for config, field in [
        (sdk.TorchTuneConfig(dtype=cast(Any, "bf16")), "config.dtype must be one of DataType.BF16"),
        (sdk.TorchTuneConfig(loss=cast(Any, "ce")), "config.loss must be one of"),
        (sdk.TorchTuneConfig(peft_config=cast(Any, {"lora_rank": 8})), "config.peft_config must be a LoraConfig"),
        (
            sdk.TorchTuneConfig(dataset_preprocess_config=sdk.TorchTuneInstructDataset(source=cast(Any, "csv"))),
            "config.dataset_preprocess_config.source must be one of",
        ),
    ]:
        with pytest.raises(ValueError, match=re.escape(field)):
            await c.train(runtime, trainer=sdk.BuiltinTrainer(config))
    with pytest.raises(ValueError, match=re.escape("BuiltinTrainer.config must be a TorchTuneConfig")):
        await c.train(runtime, trainer=sdk.BuiltinTrainer(cast(Any, {"epochs": 1})))
