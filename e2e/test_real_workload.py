"""The digits sample (``config/samples/digits``) gang-scheduled by the kube-scheduler itself, through the
Workload API (``--gang-scheduler-name=workload``, the runtime's ``spec.scheduling``), on two real nodes
(kubelet + containerd): torchrun DDP over gloo, 2 nodes x 2 processes, trains and completes; its two pods
joined the one PodGroup of the TrainJob's Workload, made before them.

Runs where real nodes can (:func:`localcluster.realnode.node.unavailable`, ``make test`` included), else is
skipped with its reason; ``TRAINER_E2E_REAL=0`` skips it."""

from __future__ import annotations

import os

import pytest
import yaml

from e2e.helpers import ROOT, trainjob_ended
from localcluster import LocalCluster
from localcluster.client import Client, condition
from localcluster.realnode.node import NODE_SELECTOR, RealNodes, unavailable
from trainer.api.kinds import POD_GROUPS, TRAINING_RUNTIMES, TRAINJOBS, WORKLOADS

WHY_NOT = "TRAINER_E2E_REAL=0" if os.environ.get("TRAINER_E2E_REAL") == "0" else unavailable()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(WHY_NOT is not None, reason=f"real pods: {WHY_NOT}")]
GANG_SCHEDULER = "workload"
DIGITS = ROOT / "config" / "samples" / "digits"


async def test_the_digits_sample_trains_as_one_gang_on_two_real_nodes(
    client: Client, ns: str, cluster: LocalCluster, real_nodes: RealNodes
) -> None:
    cluster.run_kubectl("apply", "-n", ns, "-k", str(DIGITS))
    rt = await client.kube.get(TRAINING_RUNTIMES, ns, "torch-digits")
    await client.kube.merge_patch(TRAINING_RUNTIMES, ns, "torch-digits", {"spec": {"scheduling": {}}})
    job = yaml.safe_load((DIGITS / "trainjob.yaml").read_text())
    job["spec"]["trainer"]["env"] = [{"name": "EPOCHS", "value": "8"}]
    # This cluster has KWOK nodes too: the real ones only.
    job["spec"]["podTemplateOverrides"] = [{"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": NODE_SELECTOR}}]
    name = (await client.kube.create(TRAINJOBS, ns, job))["metadata"]["name"]

    tj = await trainjob_ended(client, ns, name)
    pods = await client.pods(ns, f"jobset.sigs.k8s.io/jobset-name={name}")
    logs = "\n".join(cluster.run_kubectl("logs", "-n", ns, p["metadata"]["name"], check=False).stdout for p in pods)
    assert condition(tj, "Complete"), (tj.get("status"), logs)
    assert {p["spec"]["nodeName"] for p in pods} == set(real_nodes.names)
    assert "held-out accuracy" in logs and all(f"rank {r}/4" in logs for r in range(4)), logs

    (workload,) = (await client.kube.list(WORKLOADS, ns))[0]
    (group,) = (await client.kube.list(POD_GROUPS, ns))[0]
    assert rt["metadata"]["name"] == "torch-digits"
    assert workload["spec"]["podGroupTemplates"][0]["schedulingPolicy"] == {"gang": {"minCount": 2}}
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {group["metadata"]["name"]}
    first = min(p["metadata"]["creationTimestamp"] for p in pods)
    assert group["metadata"]["creationTimestamp"] <= first, "the PodGroup came before the pods"
