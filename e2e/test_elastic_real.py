"""An elastic digits TrainJob keeps training when a member goes, on two real nodes (kubelet + containerd):
the preemptible digits sample (``config/samples/digits-preemptible``: a checkpoint volume, ``CHECKPOINT_DIR``)
on a runtime with ``mlPolicy.torch.elasticPolicy`` (``minNodes: 1``, ``maxNodes: 2``, ``maxRestarts: 3``)
trains on 2 nodes; the second node's pod (not the rendezvous host's) is deleted mid-training; torchrun's
c10d rendezvous goes on (the workers restart from the newest checkpoint, the Job makes the pod again and
it joins), the epochs continue to the last, the held-out accuracy is above 0.85, and the TrainJob is never
Failed. The same job without the policy starts its whole group over: its runtime's failurePolicy
(``maxRestarts: 2``) with ``backoffLimit: 0`` fails the member's Job at the deleted pod and makes every
Job again, and the new group resumes from the checkpoint (why the static job needs those two fields: the
It's docstring).

The claim binds to a hostPath PersistentVolume the test makes (both real nodes run on this machine).
Runs where real nodes can (:func:`localcluster.realnode.node.unavailable`), else is skipped with its
reason; ``TRAINER_E2E_REAL=0`` skips it."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from e2e.helpers import host_path_volume, what_happened
from e2e.test_checkpoints_real import (
    SAMPLE,
    checkpointed,
    digits_job,
    ended,
    kubectl_apply,
    logs,
)
from localcluster import LocalCluster
from localcluster.client import Client, condition, wait_for
from localcluster.cluster import reserved_ports
from localcluster.realnode.node import RealNodes, status_server_args, unavailable
from trainer.api.kinds import TRAINING_RUNTIMES, TRAINJOBS
from trainer.api.labels import RESTART_ATTEMPT
from trainer.framework.json_codec import JSON

WHY_NOT = "TRAINER_E2E_REAL=0" if os.environ.get("TRAINER_E2E_REAL") == "0" else unavailable()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(WHY_NOT is not None, reason=f"real pods: {WHY_NOT}")]
(STATUS_PORT,) = reserved_ports(1)
OPERATOR_ARGS = status_server_args(STATUS_PORT)
EPOCHS = 30
ELASTIC = {"minNodes": 1, "maxNodes": 2, "maxRestarts": 3}
STARTS_OVER: JSON = {"failurePolicy": {"maxRestarts": 2}, "backoffLimit": 0}
"""The static job's runtime: a failed Job restarts every Job (JobSet's failurePolicy), and a Job fails at
its first failed pod."""
INDEX = "batch.kubernetes.io/job-completion-index"


async def lose_the_second_member(
    client: Client,
    ns: str,
    cluster: LocalCluster,
    tmp_path: Path,
    name: str,
    elastic: JSON | None,
    restarts: JSON | None = None,
) -> tuple[Path, dict[str, str | None]]:
    """The preemptible digits TrainJob ``name`` (its runtime with ``elastic`` as its elasticPolicy, and
    ``restarts``' failurePolicy and Job backoffLimit, when given) on the real nodes, its claim on a new
    hostPath directory; once it checkpointed epoch 4, its second node's pod (not the rendezvous host's)
    is deleted. The directory and that pod's env."""
    cluster.run_kubectl("apply", "-n", ns, "-k", str(SAMPLE))
    if elastic is not None:
        policy = {"spec": {"mlPolicy": {"torch": {"elasticPolicy": elastic}}}}
        await client.kube.merge_patch(TRAINING_RUNTIMES, ns, "torch-digits", policy)
    if restarts is not None:
        runtime = await client.kube.get(TRAINING_RUNTIMES, ns, "torch-digits")
        template = runtime["spec"]["template"]["spec"]
        template["failurePolicy"] = restarts["failurePolicy"]
        template["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] = restarts["backoffLimit"]
        await client.kube.update(TRAINING_RUNTIMES, ns, runtime)
    storage = Path(tempfile.mkdtemp(prefix="checkpoints-"))
    kubectl_apply(cluster, [host_path_volume(ns, f"checkpoints-{name}", storage)], tmp_path)
    await client.kube.create(TRAINJOBS, ns, digits_job(name, None, epochs=EPOCHS))
    await wait_for(lambda: checkpointed(client, ns, name, 4), "the job's epoch 4", timeout=300, interval=0.5)
    pods = await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={name}")
    (second,) = [p for p in pods if p["metadata"]["labels"].get(INDEX) == "1"]
    cluster.run_kubectl("delete", "pod", "-n", ns, second["metadata"]["name"], "--wait=false")
    return storage, {e["name"]: e.get("value") for e in second["spec"]["containers"][0]["env"]}


async def until_ended(client: Client, ns: str, cluster: LocalCluster, name: str) -> JSON:
    """TrainJob ``name`` once Complete or Failed; after 500 s an ``AssertionError`` that tells what its
    Jobs, pods and containers did."""
    try:
        return await wait_for(lambda: ended(client, ns, name), f"TrainJob {name} to end", timeout=500, interval=0.5)
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}\n{what_happened(cluster, ns, name)}") from None


async def test_an_elastic_job_whose_member_goes_keeps_training_to_complete(
    client: Client, ns: str, cluster: LocalCluster, real_nodes: RealNodes, tmp_path: Path
) -> None:
    storage, env = await lose_the_second_member(client, ns, cluster, tmp_path, "el", ELASTIC)
    assert env["PET_NNODES"] == "1:2" and env["PET_RDZV_BACKEND"] == "c10d", env
    lost_at = int(((await client.trainjob(ns, "el")) or {})["status"]["trainerStatus"]["lastCheckpoint"]["epoch"])

    tj = await until_ended(client, ns, cluster, "el")
    pods = await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=el")
    text = "\n".join(logs(cluster, ns, p["metadata"]["name"]) for p in pods)
    assert condition(tj, "Failed") is None, (tj["status"], text)
    assert condition(tj, "Complete"), (tj["status"], text)
    epochs = [int(e) for e in re.findall(rf"^epoch (\d+)/{EPOCHS} ", text, re.M)]
    assert epochs and epochs[-1] == EPOCHS and any(e > lost_at for e in epochs), (lost_at, epochs)
    metrics = {m["name"]: float(m["value"]) for m in tj["status"]["trainerStatus"]["metrics"]}
    assert metrics["accuracy"] > 0.85, metrics
    # The rendezvous host's torchrun agent stayed up (its container never restarted) and restarted its
    # workers, which resumed from a checkpoint taken at or after the loss: torchrun's elastic restart.
    (host,) = [p for p in pods if p["metadata"]["labels"].get(INDEX) == "0"]
    assert host["status"]["containerStatuses"][0]["restartCount"] == 0, host["status"]
    host_log = logs(cluster, ns, host["metadata"]["name"])
    resumed = [int(e) for e in re.findall(r"^resuming from \S+: epoch (\d+),", host_log, re.M)]
    assert resumed and max(resumed) >= lost_at, (lost_at, resumed, host_log)
    held_out = re.search(r"held-out accuracy (\d\.\d+)", text)
    assert held_out and float(held_out.group(1)) > 0.85, text
    cluster.run_kubectl("delete", "pv", f"{ns}-checkpoints-el", "--wait=false")
    shutil.rmtree(storage, ignore_errors=True)


async def test_a_static_job_whose_member_goes_starts_its_group_over(
    client: Client, ns: str, cluster: LocalCluster, real_nodes: RealNodes, tmp_path: Path
) -> None:
    """The difference the elastic policy makes, on the same job without it: a static rendezvous cannot
    take a member back in place, so the runtime says how the group starts over, with a failurePolicy
    (``maxRestarts: 2``) and Jobs that fail at their first failed pod (``backoffLimit: 0``). The member's
    pod deleted fails its Job; every Job is made again (restart attempt 1), and the new group resumes from
    the checkpoint. Without those two fields torch's own recovery is left to chance: the recreated
    member's torchrun joins the old rendezvous host's store while that torchrun waits out its exit
    barrier (300 s); in about 3 runs of 10 here the job did not end within 500 s, and in the run looked
    into, the member's workers spun on the closed store's socket (torch 1.13, Debian's build)."""
    storage, env = await lose_the_second_member(client, ns, cluster, tmp_path, "st", None, STARTS_OVER)
    assert env["PET_NNODES"] == "2" and "PET_RDZV_BACKEND" not in env, env

    tj = await until_ended(client, ns, cluster, "st")
    pods = await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=st")
    text = "\n".join(logs(cluster, ns, p["metadata"]["name"]) for p in pods)
    assert condition(tj, "Complete") and condition(tj, "Failed") is None, (tj["status"], text)
    # Every pod that finished the job is of attempt 1: the whole group started over, from the checkpoint.
    attempts = {p["metadata"]["labels"].get(RESTART_ATTEMPT) for p in pods}
    assert attempts == {"1"}, [p["metadata"]["labels"] for p in pods]
    (host,) = [p for p in pods if p["metadata"]["labels"].get(INDEX) == "0"]
    assert "resuming from" in logs(cluster, ns, host["metadata"]["name"]), text
    cluster.run_kubectl("delete", "pv", f"{ns}-checkpoints-st", "--wait=false")
    shutil.rmtree(storage, ignore_errors=True)
