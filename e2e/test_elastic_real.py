"""An elastic digits TrainJob keeps training when a member goes, on two real nodes (kubelet + containerd):
the preemptible digits sample (``config/samples/digits-preemptible``: a checkpoint volume, ``CHECKPOINT_DIR``)
on a runtime with ``mlPolicy.torch.elasticPolicy`` (``minNodes: 1``, ``maxNodes: 2``, ``maxRestarts: 3``)
trains on 2 nodes; the second node's pod (not the rendezvous host's) is deleted mid-training; torchrun's
c10d rendezvous goes on (the workers restart from the newest checkpoint, the Job makes the pod again and
it joins), the epochs continue to the last, the held-out accuracy is above 0.85, and the TrainJob is never
Failed. The same job without the policy recovers only by starting over: the rendezvous host's torchrun
exits when its peer goes (a static rendezvous cannot shrink), its container is restarted, and the whole
group rendezvous again and resumes from the checkpoint.

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

from e2e.test_checkpoints_real import (
    SAMPLE,
    checkpointed,
    digits_job,
    ended,
    kubectl_apply,
    logs,
    volume,
    what_happened,
)
from localcluster import LocalCluster
from localcluster.client import Client, condition, wait_for
from localcluster.cluster import reserved_ports
from localcluster.realnode.node import RealNodes, status_server_args, unavailable
from trainer.api.kinds import TRAINING_RUNTIMES, TRAINJOBS
from trainer.framework.json_codec import JSON

WHY_NOT = "TRAINER_E2E_REAL=0" if os.environ.get("TRAINER_E2E_REAL") == "0" else unavailable()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(WHY_NOT is not None, reason=f"real pods: {WHY_NOT}")]
(STATUS_PORT,) = reserved_ports(1)
OPERATOR_ARGS = status_server_args(STATUS_PORT)
EPOCHS = 30
ELASTIC = {"minNodes": 1, "maxNodes": 2, "maxRestarts": 3}
INDEX = "batch.kubernetes.io/job-completion-index"


async def lose_the_second_member(
    client: Client, ns: str, cluster: LocalCluster, tmp_path: Path, name: str, elastic: JSON | None
) -> tuple[Path, dict[str, str | None]]:
    """The preemptible digits TrainJob ``name`` (its runtime with ``elastic`` as its elasticPolicy, when
    given) on the real nodes, its claim on a new hostPath directory; once it checkpointed epoch 4, its
    second node's pod (not the rendezvous host's) is deleted. The directory and that pod's env."""
    cluster.run_kubectl("apply", "-n", ns, "-k", str(SAMPLE))
    if elastic is not None:
        policy = {"spec": {"mlPolicy": {"torch": {"elasticPolicy": elastic}}}}
        await client.kube.merge_patch(TRAINING_RUNTIMES, ns, "torch-digits", policy)
    storage = Path(tempfile.mkdtemp(prefix="checkpoints-"))
    kubectl_apply(cluster, [volume(ns, f"checkpoints-{name}", storage)], tmp_path)
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


@pytest.mark.xfail(
    reason=(
        "debt: flaky. In 3 of about 10 runs on real nodes (one full CI, two runs of this module alone) the static"
        " job did not end within 500 s after its second member's pod was deleted; the cause is not found yet"
        " (a guess to check: the recreated member's torchrun waits out static rendezvous' 900 s timeout on"
        " the old group's store). The elastic It above is not affected."
    ),
    strict=False,
)
async def test_a_static_job_whose_member_goes_starts_its_group_over(
    client: Client, ns: str, cluster: LocalCluster, real_nodes: RealNodes, tmp_path: Path
) -> None:
    """The difference the elastic policy makes, on the same job without it."""
    storage, env = await lose_the_second_member(client, ns, cluster, tmp_path, "st", None)
    assert env["PET_NNODES"] == "2" and "PET_RDZV_BACKEND" not in env, env

    tj = await until_ended(client, ns, cluster, "st")
    pods = await client.pods(ns, "jobset.sigs.k8s.io/jobset-name=st")
    (host,) = [p for p in pods if p["metadata"]["labels"].get(INDEX) == "0"]
    text = "\n".join(logs(cluster, ns, p["metadata"]["name"]) for p in pods)
    # The rendezvous host's container itself was restarted: the group started over, from the checkpoint.
    assert host["status"]["containerStatuses"][0]["restartCount"] >= 1, (host["status"], tj["status"], text)
    assert "resuming from" in logs(cluster, ns, host["metadata"]["name"]), text
    assert condition(tj, "Complete"), (tj["status"], text)
    cluster.run_kubectl("delete", "pv", f"{ns}-checkpoints-st", "--wait=false")
    shutil.rmtree(storage, ignore_errors=True)
