"""Gang scheduler modules: PodGroups, holds, queue precedence and loud misconfiguration."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

import pytest

from tests.conftest import info, multi_step_runtime
from tests.kube_double import reader
from trainer.api.kinds import COSCHEDULING_PODGROUPS, VOLCANO_PODGROUPS, VOLCANO_QUEUES
from trainer.api.queues import resolve_queue
from trainer.api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainJob
from trainer.framework.controller import Reader
from trainer.framework.json_codec import JSON
from trainer.framework.resources import parse_quantity, pod_requests
from trainer.jobs import gang
from trainer.jobs.gang.base import GangInput, PodSet, decorate, gang_conditions
from trainer.jobs.gang.coscheduling import POD_GROUP_LABEL
from trainer.trainjob.children import build_children


def facts(pod_group: JSON | None = None, queues: list[JSON] | None = None) -> Reader:
    pod_groups = [] if pod_group is None else [{**pod_group, "metadata": {"namespace": "ns", "name": "t"}}]
    return reader(
        {
            VOLCANO_PODGROUPS: pod_groups,
            COSCHEDULING_PODGROUPS: [],
            VOLCANO_QUEUES: list(queues or []),
        }
    )


def queue(name: str, state: str = "Open", parent: str | None = None) -> JSON:
    return {"metadata": {"name": name}, "spec": {"parent": parent} if parent else {}, "status": {"state": state}}


OPEN = [queue("root"), queue("default", parent="root"), queue("production", parent="root")]


def tj(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, **spec: Any) -> TrainJob:
    return TrainJob.model_validate(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "t", "namespace": "ns", "uid": "u", "labels": labels, "annotations": annotations},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec},
        }
    )


def gang_input(job: TrainJob, runtime: ClusterTrainingRuntime, name: str = "volcano", **kw: Any) -> GangInput:
    gi = info(job, runtime, [], name).gang
    return dataclasses.replace(gi, finished=kw.get("finished", False), started=kw.get("started", False))


def test_quantities() -> None:
    assert parse_quantity("500m") == Decimal("0.5")
    assert parse_quantity("2Gi") == 2 * 2**30
    assert parse_quantity(3) == 3
    with pytest.raises(ValueError):
        parse_quantity("lots")


def test_pod_request_is_max_of_containers_and_init_plus_overhead() -> None:
    template = {
        "spec": {
            "containers": [{"resources": {"requests": {"cpu": "1"}}}, {"resources": {"limits": {"cpu": "500m"}}}],
            "initContainers": [{"resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}],
            "overhead": {"cpu": "100m"},
        }
    }
    assert pod_requests(template) == {"cpu": Decimal("2.1"), "memory": 2**30}


def test_volcano_pod_group_leaves_out_empty_min_resources(runtime: ClusterTrainingRuntime) -> None:
    """Pods that request nothing: no minResources (an empty map applied over an earlier one reaches the
    apiserver as null, which Volcano's CRD refuses)."""
    job = tj(annotations={"scheduling.volcano.sh/queue-name": "production"}, trainer={"numNodes": 2})
    (pg,) = gang.get("volcano").plan(gang_input(job, runtime), facts(None, OPEN)).apply
    assert pg["spec"] == {"minMember": 2, "queue": "production"}


def test_volcano_pod_group_holds_until_inqueue(trainjob: TrainJob, runtime: ClusterTrainingRuntime) -> None:
    job = tj(
        annotations={"scheduling.volcano.sh/queue-name": "production"},
        trainer={"numNodes": 3, "resourcesPerNode": {"requests": {"cpu": "2", "memory": "1Gi"}}},
    )
    plan = gang.get("volcano").plan(gang_input(job, runtime), facts(None, OPEN))
    (pg,) = plan.apply
    assert pg["kind"] == "PodGroup" and pg["metadata"]["name"] == "t"
    # Printed as upstream's Volcano plugin prints its sum of Quantities: 3 x 1Gi is "3Gi".
    assert pg["spec"] == {"minMember": 3, "minResources": {"cpu": "6", "memory": "3Gi"}, "queue": "production"}
    assert pg["metadata"]["ownerReferences"][0]["uid"] == "u"
    assert plan.hold is True
    assert [c.reason for c in plan.conditions] == ["PodGroupPending"]
    pending = {
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "Unschedulable", "status": "True", "message": "3/3 tasks in gang unschedulable"}],
        }
    }
    plan = gang.get("volcano").plan(gang_input(job, runtime), facts(pending, OPEN))
    assert plan.hold and "3/3 tasks in gang unschedulable" in plan.conditions[0].message
    plan = gang.get("volcano").plan(gang_input(job, runtime), facts({"status": {"phase": "Inqueue"}}, OPEN))
    assert plan.hold is False and plan.conditions == []
    # Pods: schedulerName volcano where unset, group and task annotations.
    jobs = build_children(info(job, runtime, []), suspend=plan.hold).jobs
    (decorated,) = decorate(jobs, plan, set())
    pod = decorated["spec"]["template"]
    assert pod["spec"]["schedulerName"] == "volcano"
    assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "t"
    assert pod["metadata"]["annotations"]["volcano.sh/task-spec"] == "node"
    assert pod["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "production"


@pytest.mark.parametrize(
    ("given", "carried"),
    [
        ({"mode": "hard", "highestTierAllowed": 1}, {"mode": "hard", "highestTierAllowed": 1}),
        ({"mode": "soft", "highestTierAllowed": 2}, {"mode": "soft", "highestTierAllowed": 2}),
        # The API defaults (hard, 1), as upstream's CRD has them; other fields are not carried.
        ({}, {"mode": "hard", "highestTierAllowed": 1}),
        ({"mode": "soft", "highestTierName": "spine"}, {"mode": "soft", "highestTierAllowed": 1}),
    ],
)
def test_volcano_network_topology_goes_to_the_pod_group(
    runtime: ClusterTrainingRuntime, given: JSON, carried: JSON
) -> None:
    data = runtime.to_dict()
    data["spec"]["podGroupPolicy"] = {"volcano": {"networkTopology": given}}
    plan = gang.get("volcano").plan(gang_input(tj(), ClusterTrainingRuntime.model_validate(data)), facts(None, OPEN))
    (pg,) = plan.apply
    assert pg["spec"]["networkTopology"] == carried
    # Without one the PodGroup has none.
    data["spec"]["podGroupPolicy"] = {"volcano": {}}
    plan = gang.get("volcano").plan(gang_input(tj(), ClusterTrainingRuntime.model_validate(data)), facts(None, OPEN))
    assert "networkTopology" not in plan.apply[0]["spec"]


@pytest.mark.parametrize(
    ("given", "field"), [({"mode": "strict"}, "mode"), ({"highestTierAllowed": -1}, "highestTierAllowed")]
)
def test_volcano_network_topology_refuses_what_volcano_would(
    runtime: ClusterTrainingRuntime, given: JSON, field: str
) -> None:
    data = runtime.to_dict()
    data["spec"]["podGroupPolicy"] = {"volcano": {"networkTopology": given}}
    with pytest.raises(ValueError, match=field):
        ClusterTrainingRuntime.model_validate(data)


def test_volcano_started_job_is_not_held_again_and_finished_job_drops_its_pod_group(
    runtime: ClusterTrainingRuntime,
) -> None:
    job = tj()
    plan = gang.get("volcano").plan(
        gang_input(job, runtime, started=True), facts({"status": {"phase": "Pending"}}, OPEN)
    )
    assert not plan.hold
    plan = gang.get("volcano").plan(gang_input(job, runtime, finished=True), facts({"metadata": {"name": "t"}}, OPEN))
    assert plan.delete == [(VOLCANO_PODGROUPS, "ns", "t")] and not plan.apply


@pytest.mark.parametrize(
    ("queues", "name", "reason"),
    [
        (OPEN, "missing", "QueueNotFound"),
        ([*OPEN, queue("closed", "Closed", "root")], "closed", "QueueNotOpen"),
        ([*OPEN, queue("team", parent="root"), queue("team-a", parent="team")], "team", "QueueNotLeaf"),
        (OPEN, "root", "QueueNotLeaf"),
    ],
)
def test_volcano_bad_queue_holds_without_pod_group(
    runtime: ClusterTrainingRuntime, queues: list[JSON], name: str, reason: str
) -> None:
    job = tj(annotations={"scheduling.volcano.sh/queue-name": name})
    plan = gang.get("volcano").plan(gang_input(job, runtime), facts(None, queues))
    assert plan.hold and not plan.apply
    (cond,) = gang_conditions(plan)
    assert (cond.type, cond.reason) == ("Misconfigured", reason)
    assert repr(name) in cond.message and "scheduling.volcano.sh/queue-name" in cond.message


def test_volcano_leaf_under_parent_is_fine(runtime: ClusterTrainingRuntime) -> None:
    queues = [*OPEN, queue("team", parent="root"), queue("team-a", parent="team")]
    plan = gang.get("volcano").plan(
        gang_input(tj(annotations={"scheduling.volcano.sh/queue-name": "team-a"}), runtime), facts(None, queues)
    )
    assert plan.apply[0]["spec"]["queue"] == "team-a"


def test_none_names_the_flag_for_a_volcano_queue_and_scheduler_name(runtime: ClusterTrainingRuntime) -> None:
    rt = runtime.model_copy(deep=True)
    assert rt.spec.template.spec and rt.spec.template.spec.replicated_jobs
    rt.spec.template.spec.replicated_jobs[0].template["spec"]["template"]["spec"]["schedulerName"] = "volcano"
    job = tj(annotations={"scheduling.volcano.sh/queue-name": "production"})
    plan = gang.get("none").plan(gang_input(job, rt, "none"), facts())
    assert not plan.apply and not plan.hold
    (cond,) = gang_conditions(plan)
    assert cond.reason == "QueueIgnored"
    assert "--gang-scheduler-name=volcano" in cond.message and "'production'" in cond.message
    assert "schedulerName 'volcano'" in cond.message


def test_none_carries_a_kueue_label_and_kueue_flags_a_volcano_podgroup_policy(runtime: ClusterTrainingRuntime) -> None:
    job = tj(labels={"kueue.x-k8s.io/queue-name": "lq"})
    assert gang.get("none").plan(gang_input(job, runtime, "none"), facts()).conditions == []
    data = runtime.to_dict()
    data["spec"]["podGroupPolicy"] = {"volcano": {}}
    rt = ClusterTrainingRuntime.model_validate(data)
    (cond,) = gang.get("kueue").plan(gang_input(job, rt, "kueue"), facts()).conditions
    assert cond.reason == "PodGroupPolicyMismatch" and "--gang-scheduler-name=kueue" in cond.message


def test_queue_precedence_prefers_the_running_schedulers_convention() -> None:
    rt = ClusterTrainingRuntime.model_validate(
        {
            "metadata": {"name": "r"},
            "spec": {
                "template": {
                    "metadata": {"annotations": {"scheduling.volcano.sh/queue-name": "from-runtime"}},
                    "spec": {"replicatedJobs": []},
                }
            },
        }
    )
    both = tj(labels={"kueue.x-k8s.io/queue-name": "lq"}, annotations={"scheduling.volcano.sh/queue-name": "vq"})
    assert resolve_queue(both.to_dict(), "kueue", rt.to_dict()).name == "lq"
    assert resolve_queue(both.to_dict(), "volcano", rt.to_dict()).name == "vq"
    assert resolve_queue(tj().to_dict(), "volcano", rt.to_dict()).name == "from-runtime"
    assert resolve_queue(tj().to_dict(), "volcano", rt.to_dict()).source.startswith("spec.template.metadata")


def test_initializers_completed_first_are_outside_the_gang() -> None:
    rt = multi_step_runtime()
    job = TrainJob.model_validate(
        {"metadata": {"name": "t", "namespace": "ns", "uid": "u"}, "spec": {"runtimeRef": {"name": "with-init"}}}
    )
    gi = info(job, rt, [], "volcano").gang
    assert [(p.name, p.count) for p in gi.pod_sets] == [("node", 3)]


def test_scheduler_plugins_pod_group_and_label(runtime: ClusterTrainingRuntime) -> None:
    job = tj(trainer={"numNodes": 2, "resourcesPerNode": {"requests": {"cpu": "1"}}})
    plan = gang.get("scheduler-plugins").plan(gang_input(job, runtime, "scheduler-plugins"), facts())
    (pg,) = plan.apply
    assert pg["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert pg["spec"] == {"minMember": 2, "minResources": {"cpu": "2"}, "scheduleTimeoutSeconds": 60}
    assert plan.pod_labels == {POD_GROUP_LABEL: "t"}
    assert plan.scheduler_name == "scheduler-plugins-scheduler"


def test_min_available_overrides_min_member() -> None:
    gi = GangInput(
        owner={"apiVersion": "v", "kind": "K", "metadata": {"name": "m", "namespace": "n", "uid": "x"}},
        pod_sets=[PodSet("worker", 1, 4, {"spec": {}})],
        min_available=2,
    )
    (pg,) = gang.get("volcano").plan(gi, facts(None, OPEN)).apply
    assert pg["spec"]["minMember"] == 2


def test_unknown_gang_scheduler_names_the_choices() -> None:
    with pytest.raises(ValueError, match="volcano"):
        gang.get("yunikorn")
