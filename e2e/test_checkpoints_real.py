"""No work lost to preemption, on two real nodes (kubelet + containerd) with the real Kueue: the
preemptible digits sample (``config/samples/digits-preemptible``: a checkpoint volume per TrainJob from
the runtime's ``volumeClaimPolicies``, ``CHECKPOINT_DIR``, 30 s of grace) trains at low priority; a
high-priority TrainJob preempts it (Kueue suspends it, the Job controller stops its pods with SIGTERM);
its last checkpoint is in ``status.trainerStatus.lastCheckpoint``; once the high-priority job is done it
is admitted again and continues from that checkpoint (its first epoch is the checkpoint's + 1) to
Complete, never Failed.

The claims bind to hostPath PersistentVolumes the test makes, as an administrator provisions storage:
the two real nodes run on one machine, so one directory is the same volume on both.

Runs where real nodes can (:func:`localcluster.realnode.node.unavailable`, ``make test`` included), else is
skipped with its reason; ``TRAINER_E2E_REAL=0`` skips it."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from api.kinds import KUEUE_CLUSTER_QUEUES, TRAINJOBS
from e2e.helpers import ROOT, kueue_sees_runtime
from localcluster import LocalCluster
from localcluster.client import Client, condition, wait_for
from localcluster.cluster import reserved_ports
from localcluster.kueue import KUEUE_API_VERSION, QUEUE_LABEL, cluster_queue, local_queue, resource_flavor
from localcluster.realnode.node import NODE_SELECTOR, RealNodes, status_server_args, unavailable
from trainer.framework.json_codec import JSON

WHY_NOT = "TRAINER_E2E_REAL=0" if os.environ.get("TRAINER_E2E_REAL") == "0" else unavailable()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(WHY_NOT is not None, reason=f"real pods: {WHY_NOT}")]
GANG_SCHEDULER = "kueue"
(STATUS_PORT,) = reserved_ports(1)
OPERATOR_ARGS = status_server_args(STATUS_PORT)
SAMPLE = ROOT / "config" / "samples" / "digits-preemptible"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


def kubectl_apply(cluster: LocalCluster, objects: list[JSON], tmp: Path) -> None:
    """``kubectl apply`` of objects our client does not declare (PersistentVolume, WorkloadPriorityClass)."""
    path = tmp / "objects.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    cluster.run_kubectl("apply", "-f", str(path))


def volume(ns: str, claim: str, where: Path) -> JSON:
    """A hostPath PersistentVolume bound in advance to claim ``ns/claim`` (the TrainJob's)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"{ns}-{claim}"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": {"namespace": ns, "name": claim},
            "hostPath": {"path": str(where / claim), "type": "DirectoryOrCreate"},
        },
    }


def priority(name: str, value: int) -> JSON:
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def digits_job(name: str, priority_class: str, epochs: int) -> JSON:
    job: JSON = yaml.safe_load((ROOT / "config" / "samples" / "digits" / "trainjob.yaml").read_text())
    del job["metadata"]["generateName"]
    job["metadata"]["name"] = name
    job["metadata"]["labels"] = {QUEUE_LABEL: "lq", PRIORITY_LABEL: priority_class}
    job["spec"]["trainer"]["env"] = [{"name": "EPOCHS", "value": str(epochs)}]
    return job


async def ended(client: Client, ns: str, name: str) -> JSON | None:
    """The TrainJob once it is Complete or Failed, else None."""
    tj = await client.trainjob(ns, name) or {}
    done = condition(tj, "Complete") or condition(tj, "Failed")
    return tj if done and done.get("status") == "True" else None


def logs(cluster: LocalCluster, ns: str, pod: str) -> str:
    return cluster.run_kubectl("logs", "-n", ns, pod, check=False).stdout


async def test_a_preempted_job_saves_a_checkpoint_and_continues_from_it(
    client: Client, ns: str, cluster: LocalCluster, real_nodes: RealNodes, tmp_path: Path
) -> None:
    cluster.run_kubectl("apply", "-n", ns, "-k", str(SAMPLE))
    storage = Path(tempfile.mkdtemp(prefix="checkpoints-"))
    low, high = f"low-{ns}", f"high-{ns}"
    kubectl_apply(
        cluster,
        [priority(low, 100), priority(high, 1000), *(volume(ns, f"checkpoints-{j}", storage) for j in ("low", "high"))],
        tmp_path,
    )
    # One job's quota (2 nodes x 500m): the high-priority job needs the low one's.
    await client.apply(resource_flavor("realnode", NODE_SELECTOR))
    queue = cluster_queue(f"cq-{ns}", "realnode", "1", "4Gi", namespaces=[ns])
    queue["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    await client.apply(queue)
    await client.apply(local_queue(ns, "lq", f"cq-{ns}"))
    await wait_for(lambda: _active(client, ns), f"ClusterQueue cq-{ns} active")
    await kueue_sees_runtime(client.kube, ns, "torch-digits", "lq")

    await client.kube.create(TRAINJOBS, ns, digits_job("low", low, epochs=60))

    async def checkpointed(at_least: int) -> JSON | None:
        tj = await client.trainjob(ns, "low") or {}
        saved = ((tj.get("status") or {}).get("trainerStatus") or {}).get("lastCheckpoint") or {}
        return tj if saved.get("epoch", 0) >= at_least else None

    await wait_for(lambda: checkpointed(10), "the low-priority job to checkpoint epoch 10", timeout=300, interval=0.5)
    await client.kube.create(TRAINJOBS, ns, digits_job("high", high, epochs=4))

    async def preempted() -> bool:
        tj = await client.trainjob(ns, "low") or {}
        pods = await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=low")
        return tj["spec"].get("suspend") is True and not pods

    await wait_for(preempted, "Kueue to preempt the low-priority job and its pods to stop", timeout=120)
    held = await client.trainjob(ns, "low") or {}
    checkpoint = held["status"]["trainerStatus"]["lastCheckpoint"]
    assert checkpoint["path"] == f"/checkpoints/epoch-{checkpoint['epoch']}.pt", checkpoint
    assert checkpoint["epoch"] >= 10 and checkpoint["step"] > 0, checkpoint
    assert condition(held, "Failed") is None, held["status"]

    high_done = await client.wait_condition(ns, "high", "Complete", timeout=300)
    assert condition(high_done, "Complete"), high_done["status"]

    tj = await wait_for(
        lambda: ended(client, ns, "low"), "the low-priority job to resume and end", timeout=400, interval=0.5
    )
    pods = await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=low")
    text = "\n".join(logs(cluster, ns, p["metadata"]["name"]) for p in pods)
    assert condition(tj, "Complete"), (tj["status"], text)
    assert condition(tj, "Failed") is None
    # The resumed run starts from the checkpoint the status reported, at its epoch + 1.
    resumed = re.search(r"resuming from (\S+): epoch (\d+), step (\d+)", text)
    assert resumed, text
    assert resumed.group(1) == checkpoint["path"] and int(resumed.group(2)) == checkpoint["epoch"], (
        resumed,
        checkpoint,
    )
    epochs = [int(e) for e in re.findall(r"^epoch (\d+)/60 ", text, re.M)]
    assert epochs and epochs[0] == checkpoint["epoch"] + 1 and epochs[-1] == 60, epochs
    metrics = {m["name"]: float(m["value"]) for m in tj["status"]["trainerStatus"]["metrics"]}
    assert metrics["accuracy"] > 0.85, metrics
    assert tj["status"]["trainerStatus"]["progressPercentage"] == 100
    assert tj["status"]["trainerStatus"]["lastCheckpoint"]["epoch"] == 60
    cluster.run_kubectl("delete", "pv", f"{ns}-checkpoints-low", f"{ns}-checkpoints-high", "--wait=false")
    shutil.rmtree(storage, ignore_errors=True)


async def _active(client: Client, ns: str) -> bool:
    cq = await client.kube.get_or_none(KUEUE_CLUSTER_QUEUES, None, f"cq-{ns}")
    active = condition(cq, "Active")
    return bool(active and active["status"] == "True")
