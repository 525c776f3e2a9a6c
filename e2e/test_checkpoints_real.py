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

import glob
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from e2e.helpers import ROOT, host_path_volume, kueue_sees_runtime
from localcluster import LocalCluster
from localcluster.client import Client, condition, wait_for
from localcluster.cluster import reserved_ports
from localcluster.kueue import KUEUE_API_VERSION, QUEUE_LABEL, cluster_queue, local_queue, resource_flavor
from localcluster.realnode.node import NODE_SELECTOR, RealNodes, status_server_args, unavailable
from trainer.api.kinds import KUEUE_CLUSTER_QUEUES, TRAINJOBS
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError

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


def priority(name: str, value: int) -> JSON:
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def digits_job(name: str, priority_class: str | None, epochs: int) -> JSON:
    """The sample's TrainJob named ``name`` with ``epochs``: queued to ``lq`` at ``priority_class``, or,
    without one, not queued (Kueue leaves it alone) and kept on the real nodes by an override."""
    job: JSON = yaml.safe_load((ROOT / "config" / "samples" / "digits" / "trainjob.yaml").read_text())
    del job["metadata"]["generateName"]
    job["metadata"]["name"] = name
    if priority_class:
        job["metadata"]["labels"] = {QUEUE_LABEL: "lq", PRIORITY_LABEL: priority_class}
    else:
        job["spec"]["podTemplateOverrides"] = [
            {"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": NODE_SELECTOR}}
        ]
    job["spec"]["trainer"]["env"] = [{"name": "EPOCHS", "value": str(epochs)}]
    return job


def last_checkpoint(tj: JSON) -> JSON:
    """TrainJob ``tj``'s ``status.trainerStatus.lastCheckpoint``, {} when it reported none."""
    return ((tj.get("status") or {}).get("trainerStatus") or {}).get("lastCheckpoint") or {}


async def checkpointed(client: Client, ns: str, name: str, at_least: int) -> JSON | None:
    """TrainJob ``name`` once it reported a checkpoint of epoch ``at_least`` or later."""
    tj = await client.trainjob(ns, name) or {}
    return tj if last_checkpoint(tj).get("epoch", 0) >= at_least else None


async def stopped(client: Client, ns: str, name: str) -> bool:
    """TrainJob ``name`` is suspended and its pods are gone."""
    tj = await client.trainjob(ns, name) or {}
    pods = await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={name}")
    return tj["spec"].get("suspend") is True and not pods


async def ended(client: Client, ns: str, name: str, seen: list[int] | None = None) -> JSON | None:
    """TrainJob ``name`` once Complete or Failed; each new progress it reports is added to ``seen``."""
    tj = await client.trainjob(ns, name) or {}
    reported = ((tj.get("status") or {}).get("trainerStatus") or {}).get("progressPercentage")
    if seen is not None and reported is not None and (not seen or seen[-1] != reported):
        seen.append(reported)
    done = condition(tj, "Complete") or condition(tj, "Failed")
    return tj if done and done.get("status") == "True" else None


async def settled_checkpoint(client: Client, ns: str, name: str, storage: Path) -> JSON | None:
    """TrainJob ``name``'s ``lastCheckpoint`` once it names the newest checkpoint file on its volume
    (``storage``/checkpoints-``name``). The status server answers a post at once and writes the last
    one of every ``--status-write-interval`` seconds later, so a checkpoint saved as the pods stop is
    on the TrainJob a few seconds after they are gone."""
    files = glob.glob(str(storage / f"checkpoints-{name}" / "epoch-*.pt"))
    newest = max((int(Path(f).name[6:-3]) for f in files), default=None)
    saved = last_checkpoint(await client.trainjob(ns, name) or {})
    return saved if newest is not None and saved.get("epoch") == newest else None


def resumed_from(text: str, checkpoint: JSON, epochs: int) -> list[int]:
    """The epochs a resumed run logged, checked to start at the checkpoint's + 1 (the checkpoint
    ``path`` and ``epoch`` it names) and to end at ``epochs``."""
    resumed = re.search(r"resuming from (\S+): epoch (\d+), step (\d+)", text)
    assert resumed, text
    assert (resumed.group(1), int(resumed.group(2))) == (checkpoint["path"], checkpoint["epoch"]), checkpoint
    logged = [int(e) for e in re.findall(rf"^epoch (\d+)/{epochs} ", text, re.M)]
    assert logged and logged[0] == checkpoint["epoch"] + 1 and logged[-1] == epochs, logged
    return logged


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
        [
            priority(low, 100),
            priority(high, 1000),
            *(host_path_volume(ns, f"checkpoints-{j}", storage) for j in ("low", "high")),
        ],
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

    await wait_for(lambda: checkpointed(client, ns, "low", 10), "the low job's epoch 10", timeout=300, interval=0.5)
    await client.kube.create(TRAINJOBS, ns, digits_job("high", high, epochs=4))
    await wait_for(lambda: stopped(client, ns, "low"), "Kueue to preempt the low-priority job", timeout=120)
    checkpoint = await wait_for(lambda: settled_checkpoint(client, ns, "low", storage), "the last checkpoint's report")
    held = await client.trainjob(ns, "low") or {}
    assert checkpoint["path"] == f"/checkpoints/epoch-{checkpoint['epoch']}.pt", checkpoint
    assert checkpoint["epoch"] >= 10 and checkpoint["step"] > 0, checkpoint
    assert condition(held, "Failed") is None, held["status"]

    high_done = await client.wait_condition(ns, "high", "Complete", timeout=300)
    assert condition(high_done, "Complete"), high_done["status"]

    tj = await wait_for(lambda: ended(client, ns, "low"), "the low job to resume and end", timeout=400, interval=0.5)
    pods = await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=low")
    text = "\n".join(logs(cluster, ns, p["metadata"]["name"]) for p in pods)
    assert condition(tj, "Complete"), (tj["status"], text)
    assert condition(tj, "Failed") is None
    resumed_from(text, checkpoint, 60)  # from the checkpoint the status reported, at its epoch + 1
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


async def test_a_job_suspended_and_resized_continues_from_its_checkpoint_on_fewer_nodes(
    client: Client, ns: str, cluster: LocalCluster, real_nodes: RealNodes, tmp_path: Path
) -> None:
    """kubeflow/trainer#3995 with a checkpoint: a 2-node job suspended at 40% or more, resized to 1 node
    and resumed, continues from its checkpoint on 1 node; resizing it while it runs is refused."""
    cluster.run_kubectl("apply", "-n", ns, "-k", str(SAMPLE))
    storage = Path(tempfile.mkdtemp(prefix="checkpoints-"))
    kubectl_apply(cluster, [host_path_volume(ns, "checkpoints-resized", storage)], tmp_path)
    await client.kube.create(TRAINJOBS, ns, digits_job("resized", None, epochs=40))
    await wait_for(lambda: checkpointed(client, ns, "resized", 16), "epoch 16 of 40", timeout=300, interval=0.5)

    with pytest.raises(ApiError) as refused:
        await client.kube.merge_patch(TRAINJOBS, ns, "resized", {"spec": {"trainer": {"numNodes": 1}}})
    assert refused.value.status == 422 and "spec.trainer.numNodes" in refused.value.message, refused.value.message

    await client.kube.merge_patch(TRAINJOBS, ns, "resized", {"spec": {"suspend": True}})
    await wait_for(lambda: stopped(client, ns, "resized"), "the suspended job's pods to stop", timeout=120)
    checkpoint = await wait_for(
        lambda: settled_checkpoint(client, ns, "resized", storage), "the last checkpoint's report"
    )
    at = checkpoint["epoch"] * 100 // 40
    assert at >= 40, checkpoint
    await client.kube.merge_patch(TRAINJOBS, ns, "resized", {"spec": {"trainer": {"numNodes": 1}}})
    await client.kube.merge_patch(TRAINJOBS, ns, "resized", {"spec": {"suspend": False}})

    seen: list[int] = []
    tj = await wait_for(lambda: ended(client, ns, "resized", seen), "the resized job to end", timeout=400, interval=0.5)
    pods = await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=resized")
    text = "\n".join(logs(cluster, ns, p["metadata"]["name"]) for p in pods)
    assert condition(tj, "Complete") and condition(tj, "Failed") is None, (tj["status"], text)
    assert len(pods) == 1 and "held-out accuracy" in text and "2 processes" in text, text
    resumed_from(text, checkpoint, 40)
    # Progress as reported after the resume never went below the checkpoint's.
    assert seen and min(seen) >= at and seen[-1] == 100, (seen, at)
    metrics = {m["name"]: float(m["value"]) for m in tj["status"]["trainerStatus"]["metrics"]}
    assert metrics["accuracy"] > 0.85, metrics
    cluster.run_kubectl("delete", "pv", f"{ns}-checkpoints-resized", "--wait=false")
    shutil.rmtree(storage, ignore_errors=True)
