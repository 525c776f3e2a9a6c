"""Helpers of the end-to-end tests beyond :mod:`localcluster.client`: a module's own cluster and its
client, Kueue's view of a runtime, the operator's JSON log, deeply nested objects, the webhook
configurations' caBundle, a TrainJob's end and, for a failure, its story."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import yaml

from localcluster import LocalCluster
from localcluster.binaries import component_dir, ensure
from localcluster.client import Client, condition, wait_for
from localcluster.realnode.node import RealNodes
from trainer.api.kinds import MUTATING_WEBHOOKS, TRAINJOBS, VALIDATING_WEBHOOKS
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError, Kube
from trainer.webhook.server import CONFIG_NAME

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def own_cluster(cluster: LocalCluster) -> Iterator[LocalCluster]:
    """``cluster`` started for one module (not the session's) and stopped after it, unless
    ``TRAINER_E2E_KEEP_CLUSTER`` is set."""
    cluster.start()
    try:
        yield cluster
    finally:
        if not os.environ.get("TRAINER_E2E_KEEP_CLUSTER"):
            cluster.stop()


def shell_env(cluster: LocalCluster, tmp: Path) -> dict[str, str]:
    """The environment the blocks run in: the cluster's kubeconfig, kubectl and helm on PATH, Helm's
    state under ``tmp``."""
    tools = ensure("kubectl", "helm")
    path = ":".join([str(tools["kubectl"].parent), str(tools["helm"].parent), str(Path(sys.executable).parent)])
    return {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "PATH": f"{path}:{os.environ.get('PATH', '')}",
        "HELM_CACHE_HOME": str(tmp / "helm" / "cache"),
        "HELM_CONFIG_HOME": str(tmp / "helm" / "config"),
        "HELM_DATA_HOME": str(tmp / "helm" / "data"),
    }


@contextlib.asynccontextmanager
async def connected(cluster: LocalCluster) -> AsyncIterator[Client]:
    """A :class:`~localcluster.client.Client` of ``cluster``, closed after the block."""
    client = await Client.connect(cluster)
    try:
        yield client
    finally:
        await client.close()


async def kueue_sees_runtime(
    kube: Kube, ns: str, runtime: str, queue: str, timeout: float = 30.0, kind: str = "TrainingRuntime"
) -> None:
    """Wait until Kueue's TrainJob webhook admits a job of ``runtime`` (of ``kind``, or a
    ``ClusterTrainingRuntime``) queued to ``queue`` in ``ns``
    (a dry-run create through the admission chain): it looks the runtime up in its informer cache,
    and refuses "runtime '<name>' not found" until that has the runtime just applied. Raises
    ``AssertionError`` after ``timeout`` seconds, :class:`trainer.framework.kube.client.ApiError` on any
    other refusal."""
    probe = {
        "apiVersion": TRAINJOBS.api_version,
        "kind": "TrainJob",
        "metadata": {"generateName": "kueue-probe-", "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"runtimeRef": {"name": runtime, "kind": kind}, "suspend": True},
    }

    async def admitted() -> bool:
        try:
            await kube.request("POST", TRAINJOBS.path(ns), {"dryRun": "All"}, body=probe)
        except ApiError as e:
            if f"runtime '{runtime}' not found" not in e.message:
                raise
            return False
        return True

    await wait_for(admitted, f"Kueue's webhook to know runtime {runtime} in {ns}", timeout)


def log_events(path: Path, offset: int = 0) -> list[JSON]:
    """The JSON log lines of an operator from byte ``offset``."""
    if not path.exists():
        return []
    with path.open("rb") as f:
        f.seek(offset)
        lines = f.read().decode(errors="replace").splitlines()
    out = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            out.append(event)
    return out


def size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def nested(levels: int) -> JSON:
    """``{"x": {"x": ... {}}}``: ``levels`` objects, each inside the one before (built without recursion)."""
    root: JSON = {}
    node = root
    for _ in range(levels - 1):
        node["x"] = {}
        node = node["x"]
    return root


@contextlib.contextmanager
def deep_json() -> Iterator[None]:
    """Let this process encode JSON nested about a thousand levels (a tenant's object, as kubectl
    sends it): orjson stops at 255, and the standard library at the interpreter's recursion limit."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10000))
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


async def webhook_ca_patched(kube: Kube) -> bool:
    """Whether both webhook configurations exist and every webhook of theirs carries a caBundle (the
    operator patched them)."""
    for res in (VALIDATING_WEBHOOKS, MUTATING_WEBHOOKS):
        config = await kube.get_or_none(res, None, CONFIG_NAME)
        if config is None or not all(h.get("clientConfig", {}).get("caBundle") for h in config.get("webhooks") or []):
            return False
    return True


LLAMA3_2_1B_LORA_COMMAND = [
    "tune",
    "run",
    "lora_finetune_single_device",
    "--config",
    "llama3_2/1B_lora_single_device",
    "output_dir=/workspace/output",
    "tokenizer.path=/workspace/model/original/tokenizer.model",
    "checkpointer.checkpoint_dir=/workspace/model",
]
"""The ``node`` command the operator makes of upstream's torchtune-llama3.2-1b command for LoRA on one
process (docs/api.md, torchtune BuiltinTrainer)."""


def torch_runtime_image() -> str:
    """The image of the trainer container of upstream's ``torch-distributed`` runtime, as containerd
    names it (``docker.io/`` added to a Docker Hub name)."""
    ensure("e2e.test")  # the trainer_e2e component keeps upstream's runtimes
    runtime = yaml.safe_load((component_dir("trainer_e2e") / "runtimes" / "torch_distributed.yaml").read_text())
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    image: str = pod["containers"][0]["image"]
    first = image.split("/", 1)[0]
    return image if "/" in image and ("." in first or ":" in first) else f"docker.io/{image}"


def host_path_volume(ns: str, claim: str, where: Path) -> JSON:
    """A hostPath PersistentVolume (``where/claim``) bound in advance to claim ``ns/claim`` (a TrainJob's,
    from its runtime's ``volumeClaimPolicies``), as an administrator provisions storage: real nodes run
    on one machine, so one directory is the same volume on all of them."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"{ns}-{claim}"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce", "ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": {"namespace": ns, "name": claim},
            "hostPath": {"path": str(where / claim), "type": "DirectoryOrCreate"},
        },
    }


def what_happened(cluster: LocalCluster, ns: str, name: str, nodes: RealNodes | None = None) -> str:
    """For an assertion's message: TrainJob ``name``'s Jobs and pods (phase, restarts, node), the
    namespace's events, the last 40 lines of every pod's containers (this run's and the one before) and,
    given real ``nodes``, their kubelets' and containerds' logs (:meth:`RealNodes.log_tails`)."""
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"
    parts = [
        cluster.run_kubectl("get", "trainjob", name, "-n", ns, "-o", "yaml", check=False).stdout,
        cluster.run_kubectl("get", "jobs,pods", "-n", ns, "-l", selector, "-o", "wide", check=False).stdout,
        cluster.run_kubectl("get", "events", "-n", ns, "--sort-by=.lastTimestamp", check=False).stdout,
    ]
    pods = cluster.run_kubectl("get", "pods", "-n", ns, "-l", selector, "-o", "name", check=False).stdout.split()
    for pod in pods:
        for which in ("--previous=true", "--previous=false"):
            logs = cluster.run_kubectl("logs", "-n", ns, pod, which, "--all-containers", "--tail=40", check=False)
            parts.append(f"--- {pod} {which}\n{logs.stdout}{logs.stderr}")
    if nodes is not None:
        parts.append(nodes.log_tails())
    return "\n".join(parts)


async def trainjob_ended(client: Client, ns: str, name: str, timeout: float = 400) -> JSON:
    """TrainJob ``ns/name`` once its ``Complete`` or ``Failed`` condition is True, read every 0.5 s;
    ``AssertionError`` after ``timeout`` seconds."""

    async def ended() -> JSON | None:
        tj = await client.trainjob(ns, name) or {}
        done = condition(tj, "Complete") or condition(tj, "Failed")
        return tj if done and done.get("status") == "True" else None

    return await wait_for(ended, f"TrainJob {ns}/{name} to end", timeout=timeout, interval=0.5)


@contextlib.asynccontextmanager
async def trainer_dashboard(cluster: LocalCluster, ns: str, port: int, log: Path, *flags: str) -> AsyncIterator[str]:
    """``trainer dashboard -n ns --port port`` with ``flags``, as a user runs it (its output in ``log``): its
    URL once it serves its jobs page; stopped after."""
    cmd = [sys.executable, "-m", "trainer.cli", "--kubeconfig", str(cluster.kubeconfig), "-n", ns, "dashboard"]
    url = f"http://127.0.0.1:{port}"
    with log.open("w") as out:
        proc = subprocess.Popen([*cmd, "--port", str(port), *flags], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)

    async def serving() -> bool:
        assert proc.poll() is None, log.read_text()
        try:
            async with aiohttp.ClientSession() as session, session.get(f"{url}/") as resp:
                return resp.status == 200
        except aiohttp.ClientError:
            return False

    try:
        await wait_for(serving, f"the dashboard on {url}", timeout=60)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
