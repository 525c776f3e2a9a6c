"""The official kubeflow SDK (PyPI ``kubeflow==0.5.0``, ``kubeflow.trainer.TrainerClient``) against
this operator, unchanged: list_runtimes, train (a CustomTrainer, with the SDK's RuntimePatch and
Labels options; a BuiltinTrainer on upstream's torchtune runtime), get_job, wait_for_job_status,
get_job_logs, get_job_events, list_jobs, delete_job.

What the SDK needs, read from its source (``kubeflow/trainer/backends/kubernetes/backend.py`` and
``utils.py``, ``kubeflow/trainer/options/kubernetes.py``):

* a runtime with label ``trainer.kubeflow.org/framework``, ``spec.mlPolicy``, and a replicated job
  labelled ``trainer.kubeflow.org/trainjob-ancestor-step`` with a container ``node`` that has an
  image (the sample ``torch-distributed`` ClusterTrainingRuntime);
* TrainJob ``spec.trainer`` {command, numNodes, resourcesPerNode, image, env}, ``spec.runtimePatches``
  (manager ``trainer.kubeflow.org/kubeflow-sdk``) and, with its ActiveDeadlineSeconds option,
  ``spec.activeDeadlineSeconds``;
* status ``Complete``/``Failed`` from the conditions of those types; ``Running`` only while
  ``status.conditions`` is *empty* and every ``node`` pod is Running or Succeeded;
* pods found by ``jobset.sigs.k8s.io/jobset-name=<job>,jobset.sigs.k8s.io/replicatedjob-name in
  (dataset-initializer, model-initializer, launcher, node)``, step ``node-<i>`` from label
  ``batch.kubernetes.io/job-completion-index``, logs of container ``node`` of a non-Pending pod;
* events whose involvedObject is the TrainJob, or a Job/Pod of it;
* optionally the ConfigMap ``kubeflow-trainer-public`` (key ``kubeflow_trainer_version``) in
  ``kubeflow-system``: without it the SDK only logs a warning.

Every test here passes against this operator with its default settings. The last one runs one
script, written for that SDK, unchanged with ``kubeflow.trainer`` and with ``trainer.client``, and
compares what each saw.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import kubeflow.trainer
import pytest
import yaml
from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import BuiltinTrainer, CustomTrainer, DataType, LoraConfig, TorchTuneConfig, TrainerClient
from kubeflow.trainer.options import (
    ActiveDeadlineSeconds,
    JobSetSpecPatch,
    JobSetTemplatePatch,
    JobSpecPatch,
    JobTemplatePatch,
    Labels,
    Name,
    PodSpecPatch,
    PodTemplatePatch,
    ReplicatedJobPatch,
    RuntimePatch,
    TrainingRuntimeSpecPatch,
)

import trainer.client
from e2e.helpers import LLAMA3_2_1B_LORA_COMMAND, ROOT
from e2e.test_sdk import RUN_FOR, LogsNodes, logs_nodes_fixture  # noqa: F401 (logs_nodes fixture)
from localcluster.client import Client, condition, wait_for
from trainer.api.kinds import CLUSTER_TRAINING_RUNTIMES, JOBS, TRAINJOBS
from trainer.framework.json_codec import JSON

pytestmark = pytest.mark.e2e
SDK_MANAGER = "trainer.kubeflow.org/kubeflow-sdk"


def train_fn() -> None:
    """The training function the SDK ships in the container command."""
    print("training")


def node_patch(
    node_selector: dict[str, str] | None = None,
    tolerations: list[JSON] | None = None,
    annotations: dict[str, str] | None = None,
) -> RuntimePatch:
    """The SDK's RuntimePatch option for the pods of replicated job ``node``."""
    pod = PodTemplatePatch(
        metadata={"annotations": annotations} if annotations else None,
        spec=PodSpecPatch(node_selector=node_selector, tolerations=tolerations),
    )
    rjob = ReplicatedJobPatch(name="node", template=JobTemplatePatch(spec=JobSpecPatch(template=pod)))
    return RuntimePatch(
        training_runtime_spec=TrainingRuntimeSpecPatch(
            template=JobSetTemplatePatch(spec=JobSetSpecPatch(replicated_jobs=[rjob]))
        )
    )


def pinned(nodes: LogsNodes, node: str, annotations: dict[str, str] | None = None) -> RuntimePatch:
    """A RuntimePatch putting the ``node`` pods on one of the log nodes."""
    toleration = {"key": nodes.taint, "operator": "Exists", "effect": "NoSchedule"}
    return node_patch({"kubernetes.io/hostname": node}, [toleration], annotations)


@pytest.fixture
def kf(cluster: Any, ns: str, samples: None) -> Iterator[TrainerClient]:
    """The SDK's client, configured as a user configures it: a kubeconfig file and a namespace (the
    SDK takes a missing namespace from the *default* kubeconfig's context, not from config_file)."""
    yield TrainerClient(KubernetesBackendConfig(namespace=ns, config_file=str(cluster.kubeconfig)))


async def test_list_and_get_runtimes_show_the_sample(kf: TrainerClient) -> None:
    runtimes = await asyncio.to_thread(kf.list_runtimes)
    torch = next(r for r in runtimes if r.name == "torch-distributed")
    assert (torch.kind.value, torch.trainer.framework, torch.trainer.num_nodes) == (
        "ClusterTrainingRuntime",
        "torch",
        1,
    )
    assert torch.trainer.image == "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"
    assert torch.trainer.command[0] == "bash"  # the SDK's torchrun wrapper, chosen from mlPolicy.torch
    assert (await asyncio.to_thread(kf.get_runtime, "torch-distributed")).name == "torch-distributed"


async def test_train_wait_logs_events_list_delete(
    kf: TrainerClient, client: Client, ns: str, logs_nodes: LogsNodes
) -> None:
    trainer = CustomTrainer(func=train_fn, num_nodes=2, resources_per_node={"cpu": 1})
    options = [Name("kf-train"), Labels({"team": "a"}), pinned(logs_nodes, logs_nodes.served)]
    name = await asyncio.to_thread(kf.train, runtime="torch-distributed", trainer=trainer, options=options)
    assert name == "kf-train"

    job = await asyncio.to_thread(kf.wait_for_job_status, name, {"Complete"}, 90, 1)
    assert job.status == "Complete" and job.num_nodes == 2
    assert [(s.name, s.status, s.device, s.device_count) for s in job.steps] == [
        ("node-0", "Succeeded", "cpu", "1"),
        ("node-1", "Succeeded", "cpu", "1"),
    ]

    # What the SDK wrote, as the operator stored and used it.
    stored = await client.trainjob(ns, name)
    assert stored is not None
    assert [p["manager"] for p in stored["spec"]["runtimePatches"]] == [SDK_MANAGER]
    assert (
        "torchrun" in stored["spec"]["trainer"]["command"][-1]
        and "def train_fn" in stored["spec"]["trainer"]["command"][-1]
    )
    pods = await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={name}")
    assert {p["spec"]["nodeName"] for p in pods} == {logs_nodes.served}  # the RuntimePatch reached the pods
    assert {p["spec"]["containers"][0]["resources"]["limits"]["cpu"] for p in pods} == {"1"}

    logs = await asyncio.to_thread(lambda: list(kf.get_job_logs(name)))
    assert logs == logs_nodes.lines
    assert await asyncio.to_thread(lambda: list(kf.get_job_logs(name, step="node-1"))) == logs_nodes.lines

    # The SDK keeps events of the TrainJob and its pods (not of the Jobs: it matches step names). An
    # event follows the status that tells the same by a moment (written in the background, as client-go's).
    wanted = {("TrainJob", "AllJobsCompleted"), ("Pod", "Created")}

    async def told() -> bool:
        events = await asyncio.to_thread(kf.get_job_events, name)
        return wanted <= {(e.involved_object_kind, e.reason) for e in events}

    await wait_for(told, f"the SDK's events of {name}: {wanted}", timeout=30)
    assert [j.name for j in await asyncio.to_thread(kf.list_jobs)] == [name]

    await asyncio.to_thread(kf.delete_job, name)
    await wait_for(lambda: _gone(client, ns, name), f"TrainJob {name} deleted")
    with pytest.raises(RuntimeError, match="Failed to get TrainJob"):
        await asyncio.to_thread(kf.get_job, name)


async def _gone(client: Client, ns: str, name: str) -> bool:
    return await client.trainjob(ns, name) is None


async def test_wait_for_job_status_raises_when_the_job_fails(kf: TrainerClient, client: Client, ns: str) -> None:
    options = [Name("kf-fails"), node_patch(annotations=RUN_FOR)]
    trainer = CustomTrainer(func=train_fn, num_nodes=1)
    name = await asyncio.to_thread(kf.train, runtime="torch-distributed", trainer=trainer, options=options)
    (job,) = await wait_for(lambda: client.jobs(ns, name), "the Job")
    await client.kube.merge_patch(JOBS, ns, job["metadata"]["name"], {"spec": {"activeDeadlineSeconds": 1}})
    with pytest.raises(RuntimeError, match=f"TrainJob {name} is Failed"):
        await asyncio.to_thread(kf.wait_for_job_status, name, {"Complete"}, 60, 1)
    assert (await asyncio.to_thread(kf.get_job, name)).status == "Failed"


TEN_SECONDS = {  # KWOK completes pods carrying these after about 10 s
    "pod-complete.stage.kwok.x-k8s.io/delay": "10s",
    "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "11s",
}


async def test_wait_for_running_then_complete(kf: TrainerClient, client: Client, ns: str) -> None:
    """The SDK derives Running only while a TrainJob has no condition: by default the operator writes
    none while it runs, as upstream."""
    options = [Name("kf-runs"), node_patch(annotations=TEN_SECONDS)]
    trainer = CustomTrainer(func=train_fn, num_nodes=2)
    name = await asyncio.to_thread(kf.train, runtime="torch-distributed", trainer=trainer, options=options)
    job = await asyncio.to_thread(kf.wait_for_job_status, name, {"Running"}, 30, 1)
    assert job.status == "Running"
    job = await asyncio.to_thread(kf.wait_for_job_status, name, {"Complete"}, 60, 1)
    assert job.status == "Complete"


async def test_wait_for_running_after_a_suspend_and_resume(kf: TrainerClient, client: Client, ns: str) -> None:
    """Better than upstream (kubeflow/sdk#803): once resumed, no Suspended=False condition stays behind,
    so the SDK sees the job run."""
    tj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "kf-resumed"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "suspend": True,
            "trainer": {"numNodes": 1},
            "annotations": TEN_SECONDS,
        },
    }
    await client.apply(tj, ns)
    job = await asyncio.to_thread(kf.wait_for_job_status, "kf-resumed", {"Created"}, 30, 1)
    await client.wait_condition(ns, "kf-resumed", "Suspended")
    await client.kube.merge_patch(TRAINJOBS, ns, "kf-resumed", {"spec": {"suspend": False}})
    job = await asyncio.to_thread(kf.wait_for_job_status, "kf-resumed", {"Running"}, 30, 1)
    assert job.status == "Running"
    job = await asyncio.to_thread(kf.wait_for_job_status, "kf-resumed", {"Complete"}, 60, 1)
    assert job.status == "Complete"


async def test_active_deadline_seconds_fails_the_job(kf: TrainerClient, client: Client, ns: str) -> None:
    options = [Name("kf-deadline"), ActiveDeadlineSeconds(seconds=2), node_patch(annotations=RUN_FOR)]
    trainer = CustomTrainer(func=train_fn, num_nodes=1)
    name = await asyncio.to_thread(kf.train, runtime="torch-distributed", trainer=trainer, options=options)
    job = await asyncio.to_thread(kf.wait_for_job_status, name, {"Failed"}, 20, 1)
    assert job.status == "Failed"
    failed = condition(await client.trainjob(ns, name), "Failed")
    assert failed is not None and failed["reason"] == "DeadlineExceeded"


def sdk_script(sdk: ModuleType, namespace: str, kubeconfig: str, runtime: str) -> JSON:
    """One user script, written against the kubeflow SDK, run unchanged with ``sdk`` being
    ``kubeflow.trainer`` or ``trainer.client``: train a function, wait, read logs, delete. Returns
    what it saw."""
    client = sdk.TrainerClient(sdk.KubernetesBackendConfig(namespace=namespace, config_file=kubeconfig))
    framework = next(r.trainer.framework for r in client.list_runtimes() if r.name == runtime)
    name = client.train(runtime, trainer=sdk.CustomTrainer(func=train_fn, num_nodes=2))
    job = client.wait_for_job_status(name, {"Complete"}, 90, 1)
    logs = list(client.get_job_logs(name, "node-1", False))
    got = client.get_job(name)
    listed = [j.name for j in client.list_jobs()]
    events = {e.involved_object_kind for e in client.get_job_events(name)}
    client.delete_job(name)
    return {
        "name": (type(name).__name__, len(name), name == job.name == got.name, listed == [name]),
        "framework": framework,
        "status": (job.status, got.status),
        "num_nodes": (job.num_nodes, got.num_nodes),
        "runtime": (job.runtime.name, job.runtime.kind.value, job.runtime.trainer.framework),
        "steps": [(s.name, s.status, s.pod_name.startswith(f"{name}-node-")) for s in job.steps],
        "created": type(job.creation_timestamp).__name__,
        "logs": logs,
        "events": "TrainJob" in events and "Pod" in events,
    }


async def test_the_same_script_runs_with_this_sdk_and_the_kubeflow_sdk(
    cluster: Any, client: Client, ns: str, samples: None, logs_nodes: LogsNodes
) -> None:
    """The script above gives the same answers with both SDKs. Its jobs run on the log node through
    a TrainingRuntime of the namespace (a copy of the sample, pinned there), which both SDKs prefer
    to the ClusterTrainingRuntime of the same name."""
    runtime = await client.kube.get(CLUSTER_TRAINING_RUNTIMES, None, "torch-distributed")
    runtime = {
        "apiVersion": runtime["apiVersion"],
        "kind": "TrainingRuntime",
        "metadata": {"name": "torch-distributed", "labels": runtime["metadata"]["labels"]},
        "spec": runtime["spec"],
    }
    for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        pod = rjob["template"]["spec"]["template"]["spec"]
        pod["nodeSelector"] = {"kubernetes.io/hostname": logs_nodes.served}
        pod["tolerations"] = [{"key": logs_nodes.taint, "operator": "Exists", "effect": "NoSchedule"}]
    await client.apply(runtime, ns)
    kubeconfig = str(cluster.kubeconfig)
    theirs = await asyncio.to_thread(sdk_script, kubeflow.trainer, ns, kubeconfig, "torch-distributed")
    ours = await asyncio.to_thread(sdk_script, trainer.client, ns, kubeconfig, "torch-distributed")
    assert theirs == ours
    assert ours == {
        "name": ("str", 12, True, True),
        "framework": "torch",
        "status": ("Complete", "Complete"),
        "num_nodes": (2, 2),
        "runtime": ("torch-distributed", "TrainingRuntime", "torch"),
        "steps": [("node-0", "Succeeded", True), ("node-1", "Succeeded", True)],
        "created": "datetime",
        "logs": logs_nodes.lines,
        "events": True,
    }


def torchtune_runtime() -> JSON:
    """Upstream's ``torchtune-llama3.2-1b`` runtime (config/samples/upstream) as a TrainingRuntime of the
    namespace, which the SDK prefers to a ClusterTrainingRuntime of that name, with its trainer alone: no
    initializers and no claim (the local cluster binds no volume), the ``node`` command as upstream's."""
    rt: JSON = yaml.safe_load((ROOT / "config" / "samples" / "upstream" / "torchtune-llama3.2-1b.yaml").read_text())
    spec = rt["spec"]["template"]["spec"]
    del spec["volumeClaimPolicies"]
    (node,) = [r for r in spec["replicatedJobs"] if r["name"] == "node"]
    del node["dependsOn"]
    del node["template"]["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    spec["replicatedJobs"] = [node]
    return {**rt, "kind": "TrainingRuntime"}


async def test_a_builtin_trainer_gets_upstreams_torchtune_recipe_and_command(
    kf: TrainerClient, client: Client, ns: str
) -> None:
    """``train(runtime="torchtune-llama3.2-1b", trainer=BuiltinTrainer(config=TorchTuneConfig(...)))``: the
    SDK sends ``command: [tune, run]`` and its overrides as args; the operator admits it and gives the
    trainer's Job upstream's recipe and config (LoRA on one GPU), and fails what upstream refuses."""
    await client.apply(torchtune_runtime(), ns)
    tune = TorchTuneConfig(
        dtype=DataType.BF16, epochs=1, peft_config=LoraConfig(lora_rank=8), resources_per_node={"gpu": 1}
    )
    builtin = BuiltinTrainer(config=tune)
    name = await asyncio.to_thread(
        kf.train, runtime="torchtune-llama3.2-1b", trainer=builtin, options=[Name("kf-tune")]
    )
    stored = await client.trainjob(ns, name)
    assert stored is not None and stored["spec"]["trainer"]["command"] == ["tune", "run"]
    (job,) = await wait_for(lambda: _jobs_of(client, ns, name), f"the Job of {name}", 30)
    (node,) = job["spec"]["template"]["spec"]["containers"]
    assert node["command"] == LLAMA3_2_1B_LORA_COMMAND
    assert node["args"] == stored["spec"]["trainer"]["args"]
    assert "model.lora_rank=8" in node["args"]
    assert sorted(e["name"] for e in node["env"] if e["name"].startswith("PET_")) == [
        "PET_NNODES",
        "PET_NODE_RANK",
        "PET_NPROC_PER_NODE",
    ]

    # Without the webhook (this module runs none) the reconcile applies the same rules: the job fails
    # naming them, and nothing is created.
    two_nodes = BuiltinTrainer(config=TorchTuneConfig(num_nodes=2, peft_config=LoraConfig()))
    name = await asyncio.to_thread(kf.train, runtime="torchtune-llama3.2-1b", trainer=two_nodes)
    failed = await client.wait_condition(ns, name, "Failed", timeout=30)
    message = next(c["message"] for c in failed["status"]["conditions"] if c["type"] == "Failed")
    assert "spec.trainer.numNodes: must be 1 for llama3_2/1B model" in message
    assert "LoRA fine-tuning is not supported for multi-node training in TorchTune" in message
    assert await client.jobs(ns, name) == []


async def _jobs_of(client: Client, ns: str, name: str) -> list[JSON] | None:
    jobs = await client.jobs(ns, name)
    return jobs or None
