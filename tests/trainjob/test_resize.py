"""A TrainJob resized while suspended (:mod:`trainer.trainjob.features.resize`): the pure decision, the
desired objects at the new size, and the reconcile over the recording double (the suspended Job goes and
comes back at the new size, told once; a second reconcile writes nothing)."""

from __future__ import annotations

import copy
from typing import Any

from tests.conftest import info
from tests.harness import World, env_of, job
from trainer.api.kinds import COSCHEDULING_PODGROUPS, JOBS, TRAINJOBS, VOLCANO_PODGROUPS
from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainJob
from trainer.framework.json_codec import JSON
from trainer.trainjob.children import build_children
from trainer.trainjob.features.resize import REASON_RESIZED, resize


def sized(name: str, parallelism: int, suspend: bool = True, deleting: bool = False) -> JSON:
    meta: JSON = {"name": name, "namespace": "ns"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"parallelism": parallelism, "completions": parallelism, "suspend": suspend}}


def test_a_suspended_job_of_another_size_is_recreated_and_told() -> None:
    out = resize([sized("a", 2), sized("b", 1)], [sized("a", 1), sized("b", 1)])
    assert out.delete == [("ns", "a")] and out.hold == {("ns", "a")}
    assert out.message == "Resized while suspended: Job a from 2 to 1 pods; recreated at the new size"


def test_a_running_job_a_job_of_the_same_size_or_one_no_longer_wanted_is_left() -> None:
    assert resize([sized("a", 2, suspend=False)], [sized("a", 1, suspend=False)]).delete == []
    assert resize([sized("a", 2)], [sized("a", 2)]) == resize([], [])
    assert resize([sized("a", 2)], []).delete == []


def test_a_job_being_deleted_is_held_not_deleted_again() -> None:
    out = resize([sized("a", 2, deleting=True)], [sized("a", 1)])
    assert out.delete == [] and out.hold == {("ns", "a")} and out.message == ""


def test_the_children_of_a_resized_trainjob_are_built_at_the_new_size(
    trainjob: TrainJob, runtime: ClusterTrainingRuntime
) -> None:
    spec = trainjob.spec.trainer
    assert spec is not None and spec.num_nodes == 2
    spec.num_nodes = 1
    spec.resources_per_node = {"requests": {"cpu": "3"}}
    (built,) = build_children(info(trainjob, runtime, []), suspend=False).jobs
    assert (built["spec"]["parallelism"], built["spec"]["completions"]) == (1, 1)
    (node,) = built["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in node["env"]}
    assert env["PET_NNODES"] == "1"
    assert node["resources"]["requests"]["cpu"] == "3"


def patch_spec(w: World, **spec: Any) -> None:
    """The user updates the TrainJob's spec (``trainer`` merged into its own)."""
    tj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    trainer = spec.pop("trainer", {})
    tj["spec"].update(spec)
    tj["spec"]["trainer"].update(trainer)
    w.kube.put(tj)


def resized_events(w: World) -> list[JSON]:
    return [x.body for x in w.kube.writes if x.kind == "Event" and x.body.get("reason") == REASON_RESIZED]


async def test_a_suspended_trainjob_resized_is_rebuilt_at_its_new_size_once() -> None:
    w = World("torch", "volcano")
    patch_spec(w, suspend=True)
    await w.settle()
    old = job(w, "node")
    assert old["spec"]["suspend"] is True and old["spec"]["parallelism"] == 2
    (group,) = [o for (res, _), o in w.kube.objects.items() if res == VOLCANO_PODGROUPS]
    assert group["spec"]["minMember"] == 2

    patch_spec(w, trainer={"numNodes": 1, "resourcesPerNode": {"requests": {"cpu": "2"}}})
    await w.settle()
    new = job(w, "node")
    assert new["metadata"]["uid"] != old["metadata"]["uid"], "recreated, not updated"
    assert (new["spec"]["parallelism"], new["spec"]["completions"], new["spec"]["suspend"]) == (1, 1, True)
    assert env_of(new)["PET_NNODES"] == "1"
    (node,) = new["spec"]["template"]["spec"]["containers"]
    assert node["resources"]["requests"]["cpu"] == "2"
    (group,) = [o for (res, _), o in w.kube.objects.items() if res == VOLCANO_PODGROUPS]
    assert group["spec"]["minMember"] == 1
    assert group["spec"]["minResources"]["cpu"] == "2"
    (event,) = resized_events(w)
    assert event["type"] == "Normal"
    message = "Resized while suspended: Job pytorch-simple-node-0 from 2 to 1 pods; recreated at the new size"
    assert event["message"] == message
    deletes = [x for x in w.kube.writes if x.verb == "delete" and x.kind == JOBS.kind]
    assert len(deletes) == 1

    before = len(w.kube.writes)
    assert await w.reconcile() == 0, w.kube.writes[before:]

    patch_spec(w, suspend=False)  # resumed: the Job runs at its new size, and nothing is resized again
    w.set_status(VOLCANO_PODGROUPS, group, {"phase": "Inqueue"})  # Volcano admits the gang of 1
    await w.settle()
    resumed = job(w, "node")
    assert resumed["metadata"]["uid"] == new["metadata"]["uid"] and resumed["spec"]["suspend"] is False
    assert len(resized_events(w)) == 1
    before = len(w.kube.writes)
    assert await w.reconcile() == 0, w.kube.writes[before:]


async def test_an_mpi_trainjob_resized_gets_its_hostfile_and_node_job_at_the_new_size() -> None:
    def hosts() -> list[str]:
        (hostfile,) = [
            o
            for (res, _), o in w.kube.objects.items()
            if res.kind == "ConfigMap" and "hostfile" in (o.get("data") or {})
        ]
        return [line.split()[0].split(".")[0] for line in hostfile["data"]["hostfile"].splitlines() if line.strip()]

    w = World("deepspeed-mpi", "none")
    patch_spec(w, suspend=True)
    await w.settle()
    assert job(w, "node")["spec"]["parallelism"] == 2  # 3 nodes, the launcher the first
    assert hosts() == ["deepspeed-simple-launcher-0-0", "deepspeed-simple-node-0-0", "deepspeed-simple-node-0-1"]
    patch_spec(w, trainer={"numNodes": 2})
    await w.settle()
    assert job(w, "node")["spec"]["parallelism"] == 1
    assert hosts() == ["deepspeed-simple-launcher-0-0", "deepspeed-simple-node-0-0"]
    (event,) = resized_events(w)
    assert "Job deepspeed-simple-node-0 from 2 to 1 pods" in event["message"]
    before = len(w.kube.writes)
    assert await w.reconcile() == 0, w.kube.writes[before:]


async def test_a_scheduler_plugins_podgroup_follows_a_resize() -> None:
    w = World("torch", "scheduler-plugins")
    patch_spec(w, suspend=True)
    await w.settle()

    def min_member() -> int:
        (group,) = [o for (res, _), o in w.kube.objects.items() if res == COSCHEDULING_PODGROUPS]
        return int(group["spec"]["minMember"])

    assert min_member() == 2
    patch_spec(w, trainer={"numNodes": 3})
    await w.settle()
    assert min_member() == 3 and job(w, "node")["spec"]["parallelism"] == 3
    assert "from 2 to 3 pods" in resized_events(w)[0]["message"]
