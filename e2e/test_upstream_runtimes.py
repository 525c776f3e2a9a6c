"""Upstream Trainer v2.3's runtimes on the real apiserver: each (config/samples/upstream, created here as a
TrainingRuntime of the test namespace) is stored and read back with no field lost, and a TrainJob on it
gets the pods, environment, labels, hostfile, Flux children and claims upstream's plugins and JobSet would
give it.
Fields this operator does not implement are refused by the apiserver with a message naming them; with
the webhook off, a runtime the webhook would refuse ends the TrainJob with a condition naming the field.
Pods run on KWOK nodes."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from e2e.helpers import ROOT
from e2e.test_admission import refused
from e2e.test_trainjob import env, rjob, runtime, trainjob
from localcluster.client import Client, wait_for
from trainer.api.kinds import CONFIGMAPS, PERSISTENT_VOLUME_CLAIMS, SECRETS, SERVICES, TRAINING_RUNTIMES
from trainer.framework.json_codec import JSON

pytestmark = pytest.mark.e2e
UPSTREAM = ROOT / "config" / "samples" / "upstream"
FILES = sorted(p.name for p in UPSTREAM.glob("*.yaml") if p.name != "kustomization.yaml")
RANK = {
    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
}
"""A rank's ``valueFrom`` on a pod (the apiserver defaults the fieldRef's apiVersion)."""


def contains(big: Any, small: Any) -> bool:
    """Every key and value of ``small`` is in ``big`` (defaults may have been added)."""
    if isinstance(small, dict):
        return isinstance(big, dict) and all(k in big and contains(big[k], v) for k, v in small.items())
    if isinstance(small, list):
        return isinstance(big, list) and len(big) == len(small) and all(map(contains, big, small))
    return bool(big == small)


def upstream(name: str) -> JSON:
    """The upstream runtime as a TrainingRuntime of the test namespace."""
    data: JSON = yaml.safe_load((UPSTREAM / name).read_text())
    return {**data, "kind": "TrainingRuntime"}


async def trainer_pods(client: Client, ns: str, tj: str, rjob_name: str, count: int) -> list[JSON]:
    async def probe() -> list[JSON] | None:
        pods = await client.pods(
            ns, f"jobset.sigs.k8s.io/jobset-name={tj},jobset.sigs.k8s.io/replicatedjob-name={rjob_name}"
        )
        return pods if len(pods) == count else None

    return await wait_for(probe, f"{count} pods of {tj}/{rjob_name}", 60)


def node_of(pod: JSON) -> JSON:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "node")


@pytest.mark.parametrize("name", FILES)
async def test_upstream_runtime_is_kept_whole_and_its_trainjob_gets_upstreams_pods(
    client: Client, ns: str, name: str
) -> None:
    raw = upstream(name)
    rt_name = raw["metadata"]["name"]
    for spec in _pod_specs(raw):  # the cache runtime's initializer runs under its own service account
        if "serviceAccountName" in spec:
            sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": spec["serviceAccountName"]}}
            await client.apply(sa, ns)
    await client.apply(raw, ns)
    stored = await client.kube.get(TRAINING_RUNTIMES, ns, rt_name)
    assert contains(stored["spec"], raw["spec"]), f"{name}: a field was lost on the way through the apiserver"
    assert contains(stored["metadata"]["labels"], raw["metadata"]["labels"])
    await client.apply(trainjob("tj", rt_name, trainer={"numNodes": 2}), ns)
    framework = raw["metadata"]["labels"]["trainer.kubeflow.org/framework"]
    if framework in ("torch", "jax", "xgboost") and "dataset-initializer" not in str(raw):
        (pod, _) = await trainer_pods(client, ns, "tj", "node", 2)
        got = env(node_of(pod))
        if framework == "torch":
            assert {k: got[k] for k in got if k.startswith("PET_")} == {
                "PET_NNODES": "2",
                "PET_NPROC_PER_NODE": "1",  # auto without GPUs: the CPUs of the node, at least 1
                "PET_NODE_RANK": RANK,
                "PET_MASTER_ADDR": "tj-node-0-0.tj",
                "PET_MASTER_PORT": "29500",
            }
        elif framework == "jax":
            assert {k: got[k] for k in got if k.startswith("JAX_")} == {
                "JAX_NUM_PROCESSES": "2",
                "JAX_PROCESS_ID": RANK,
                "JAX_COORDINATOR_ADDRESS": "tj-node-0-0.tj:29500",
            }
        else:
            assert {k: got[k] for k in got if k.startswith("DMLC_")} == {
                "DMLC_TRACKER_URI": "tj-node-0-0.tj",
                "DMLC_TRACKER_PORT": "29500",
                "DMLC_TASK_ID": RANK,
                "DMLC_NUM_WORKER": "2",
            }
        labels = pod["metadata"]["labels"]
        assert labels["jobset.sigs.k8s.io/group-name"] == "default"
        assert labels["jobset.sigs.k8s.io/job-global-index"] == "0"
        assert pod["spec"]["subdomain"] == "tj"
    elif framework in ("deepspeed", "mlx"):
        # runLauncherAsNode: one node pod, then (once it is ready) the launcher; the success policy
        # targets the launcher.
        await client.wait_condition(ns, "tj", "Complete", timeout=90)
        hostfile = await client.kube.get(CONFIGMAPS, ns, "tj-mpi-hostfile")
        assert hostfile["data"]["hostfile"] == "tj-node-0-0.tj slots=1\ntj-launcher-0-0.tj slots=1\n"
        assert await client.kube.get_or_none(SECRETS, ns, "tj-mpi-ssh-auth") is not None
        (launcher,) = await trainer_pods(client, ns, "tj", "launcher", 1)
        mounts = {m["mountPath"] for m in node_of(launcher)["volumeMounts"]}
        assert {"/home/mpiuser/.ssh", "/etc/mpi"} <= mounts
    elif framework == "torchtune":
        claim = await wait_for(
            lambda: client.kube.get_or_none(PERSISTENT_VOLUME_CLAIMS, ns, "initializer-tj"), "claim", 30
        )
        assert claim["spec"]["resources"]["requests"]["storage"] == "20Gi"
        assert claim["metadata"]["ownerReferences"][0]["name"] == "tj"
        jobs = await wait_for(lambda: _jobs_named(client, ns, 2), "the two initializer Jobs", 30)
        for job in jobs:
            volumes = job["spec"]["template"]["spec"]["volumes"]
            assert {"name": "initializer", "persistentVolumeClaim": {"claimName": "initializer-tj"}} in volumes
        assert {j["metadata"]["name"] for j in jobs} == {"tj-dataset-initializer-0", "tj-model-initializer-0"}
    elif framework == "flux":
        # A broker per pod: the installer init container, the entrypoint ConfigMap and the curve Secret.
        await client.wait_condition(ns, "tj", "Complete", timeout=90)
        (pod, _) = await trainer_pods(client, ns, "tj", "node", 2)
        assert [c["name"] for c in pod["spec"]["initContainers"]] == ["flux-installer"]
        assert node_of(pod)["command"][:2] == ["/bin/bash", "/etc/flux-config/entrypoint.sh"]
        for res, child in ((CONFIGMAPS, "tj-flux-entrypoint"), (SECRETS, "tj-flux-curve")):
            obj = await client.kube.get(res, ns, child)
            assert obj["metadata"]["ownerReferences"][0]["name"] == "tj"
    else:  # torch-distributed-with-cache: the dataset initializer first, the trainer once it completed
        await client.wait_condition(ns, "tj", "Complete", timeout=90)
        (pod, _) = await trainer_pods(client, ns, "tj", "node", 2)
        assert env(node_of(pod))["TRAIN_JOB_NAME"] == {
            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels['jobset.sigs.k8s.io/jobset-name']"}
        }
        assert pod["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == "tj"


def _pod_specs(rt: JSON) -> list[JSON]:
    return [r["template"]["spec"]["template"]["spec"] for r in rt["spec"]["template"]["spec"]["replicatedJobs"]]


async def _jobs_named(client: Client, ns: str, count: int, tj: str = "tj") -> list[JSON] | None:
    jobs = await client.jobs(ns, tj)
    return jobs if len(jobs) == count else None


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("torchtune-llama3.2-1b.yaml", "llama3_2/1B"),
        ("torchtune-llama3.2-3b.yaml", "llama3_2/3B"),
        ("torchtune-qwen2.5-1.5b.yaml", "qwen2_5/1.5B"),
    ],
)
async def test_torchtunes_entrypoint_is_admitted_on_one_node_and_fails_on_two(
    client: Client, ns: str, name: str, model: str
) -> None:
    """``command: [tune, run]`` (what the kubeflow SDK's BuiltinTrainer sends) is torchtune's BuiltinTrainer:
    on one node its initializers start, as upstream's; where upstream's webhook refuses it, the reconcile
    (no webhook here) fails the TrainJob with upstream's words and creates nothing."""
    raw = upstream(name)
    await client.apply(raw, ns)
    rt_name = raw["metadata"]["name"]
    tune = {"command": ["tune", "run"], "args": ["dtype=bf16"]}
    await client.apply(trainjob("tune", rt_name, trainer={**tune, "numNodes": 1}), ns)
    jobs = await wait_for(lambda: _jobs_named(client, ns, 2, "tune"), "the two initializer Jobs", 30)
    assert {j["metadata"]["name"] for j in jobs} == {"tune-dataset-initializer-0", "tune-model-initializer-0"}
    for tj, trainer, named in [
        ("tune2", {**tune, "numNodes": 2}, f"spec.trainer.numNodes: must be 1 for {model} model"),
        (
            "tune3",
            {**tune, "args": ["output_dir=/tmp"]},
            'spec.trainer.args[0]: must not set immutable config "output_dir"',
        ),
    ]:
        await client.apply(trainjob(tj, rt_name, trainer=trainer), ns)
        failed = await client.wait_condition(ns, tj, "Failed", timeout=30)
        assert named in next(c["message"] for c in failed["status"]["conditions"] if c["type"] == "Failed")
        assert await client.jobs(ns, tj) == []


@pytest.mark.parametrize(
    ("where", "value", "named"),
    [
        (
            ("spec", "mlPolicy", "torch", "elasticPolicy"),
            {"maxNodes": 2, "metrics": [{"type": "Resource", "resource": {"name": "cpu"}}]},
            "mlPolicy.torch.elasticPolicy.metrics is not supported",
        ),
        (("spec", "template", "spec", "managedBy"), "example.com/other", "template.spec.managedBy"),
        (
            ("spec", "template", "spec", "startupPolicy"),
            {"startupPolicyOrder": "InOrder"},
            "StartupPolicy and DependsOn APIs are mutually exclusive",
        ),
    ],
)
async def test_fields_not_implemented_are_refused_naming_them(
    client: Client, ns: str, where: tuple[str, ...], value: Any, named: str
) -> None:
    rt = upstream("deepspeed-distributed.yaml") if "startupPolicy" in where else upstream("torch-distributed.yaml")
    target = rt
    for key in where[:-1]:
        target = target.setdefault(key, {})
    target[where[-1]] = value
    assert named in await refused(client, rt, ns)


async def test_a_runtime_template_that_suspends_does_not_suspend_its_trainjobs(client: Client, ns: str) -> None:
    """As upstream's JobSet plugin: the TrainJob's spec.suspend replaces the template's (admitted with a
    warning, tests/webhook/test_admission.py)."""
    rt = runtime("rt", rjob("node", "trainer"))
    rt["spec"]["template"]["spec"]["suspend"] = True
    await client.apply(rt, ns)
    await client.apply(trainjob("runs", "rt"), ns)
    await client.wait_condition(ns, "runs", "Complete", timeout=60)


async def test_dns_hostnames_disabled_gives_pods_no_subdomain_and_no_service(client: Client, ns: str) -> None:
    rt = runtime("rt", rjob("node", "trainer"))
    rt["spec"]["template"]["spec"]["network"] = {"enableDNSHostnames": False}
    await client.apply(rt, ns)
    stored = await client.kube.get(TRAINING_RUNTIMES, ns, "rt")
    assert stored["spec"]["template"]["spec"]["network"] == {"enableDNSHostnames": False}
    await client.apply(trainjob("nodns", "rt", trainer={"numNodes": 2}), ns)
    await client.wait_condition(ns, "nodns", "Complete", timeout=60)
    pods = await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=nodns")
    assert len(pods) == 2 and all("subdomain" not in p["spec"] for p in pods)
    assert await client.kube.get_or_none(SERVICES, ns, "nodns") is None


async def test_without_the_webhook_a_trainer_with_replicas_fails_naming_replicas(client: Client, ns: str) -> None:
    await client.apply(runtime("rt", rjob("node", "trainer", replicas=2)), ns)
    await client.apply(trainjob("twice", "rt", trainer={"numNodes": 4}), ns)
    tj = await client.wait_condition(ns, "twice", "Failed", timeout=10)
    failed = next(c for c in tj["status"]["conditions"] if c["type"] == "Failed")
    assert "replicatedJobs[0].replicas: always must be 1" in failed["message"]
    assert await client.jobs(ns, "twice") == []


async def test_a_runtime_ref_to_another_api_group_is_refused_naming_it(client: Client, ns: str) -> None:
    other = trainjob("elsewhere", "rt")
    other["spec"]["runtimeRef"]["apiGroup"] = "example.com"
    assert "apiGroup: unsupported runtime group" in await refused(client, other, ns)
