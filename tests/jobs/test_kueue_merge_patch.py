"""The reconcile of a TrainJob that Kueue starts and stops with JSON merge patches
(kubernetes-sigs/kueue#14836, :mod:`localcluster.kueue`): admission fills Kueue's ``runtimePatches``
entry and sets ``suspend: false`` in one request; the Jobs resume with its assignment in their Pod
templates (node selector, tolerations, scheduling gates, annotations), as JobSet resumes its Jobs with
the TrainJob's patched template (kubeflow/trainer ``pkg/runtime/framework/plugins/jobset/jobset.go``);
a stop suspends them, and the restored entry takes the assignment out of their templates."""

from __future__ import annotations

from localcluster.kueue import (
    QUEUE_LABEL,
    PodSetInfo,
    admission_patch,
    kueue_runtime_patch,
    restore_patch,
    suspend_patch,
)
from tests.harness import RuntimeWrapper, TrainJobWrapper, World
from trainer.api.kinds import JOBS, TRAINJOBS
from trainer.framework.json_codec import JSON

GATE = "kueue.x-k8s.io/topology"
KWOK = PodSetInfo(
    "node",
    node_selector={"type": "kwok"},
    annotations={"kueue.x-k8s.io/podset-unconstrained-topology": "true"},
    tolerations=[{"key": "team", "operator": "Equal", "value": "a", "effect": "NoSchedule"}],
    scheduling_gates=[GATE],
)


def queued() -> JSON:
    job = TrainJobWrapper().obj()
    job["metadata"]["labels"] = {QUEUE_LABEL: "lq"}
    job["spec"]["suspend"] = True
    job["spec"]["runtimePatches"] = [kueue_runtime_patch()]
    return job


def pod(job: JSON) -> JSON:
    out: JSON = job["spec"]["template"]
    return out


async def patch(w: World, body: JSON) -> None:
    await w.kube.merge_patch(TRAINJOBS, *w.key, body)
    await w.settle()


async def test_kueues_merge_patches_start_the_jobs_with_its_assignment_and_stop_them() -> None:
    w = World(objects=[RuntimeWrapper().obj(), queued()], scheduler="kueue")
    await w.settle()
    assert w.jobs() and all(j["spec"]["suspend"] for j in w.jobs()), "held suspended until Kueue admits"

    await patch(w, admission_patch(w.tj, [KWOK]))
    assert w.tj["spec"]["suspend"] is False
    for job in w.jobs():
        spec = pod(job)["spec"]
        assert job["spec"]["suspend"] is False, job["metadata"]["name"]
        assert spec["nodeSelector"]["type"] == "kwok"
        assert {"name": GATE} in spec["schedulingGates"]
        assert KWOK.tolerations is not None and KWOK.tolerations[0] in spec["tolerations"]
        assert pod(job)["metadata"]["annotations"]["kueue.x-k8s.io/podset-unconstrained-topology"] == "true"

    await patch(w, suspend_patch(w.tj))
    assert all(j["spec"]["suspend"] for j in w.jobs()), "stopped"
    for job in w.jobs():
        w.set_status(JOBS, job, {"active": 0})
    await patch(w, restore_patch(w.tj))
    for job in w.jobs():
        spec = pod(job)["spec"]
        assert job["spec"]["suspend"] is True
        assert "type" not in (spec.get("nodeSelector") or {}), "the assignment is taken back"
        assert {"name": GATE} not in (spec.get("schedulingGates") or [])
