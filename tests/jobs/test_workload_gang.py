"""The Workload API gang (``--gang-scheduler-name=workload``, kubeflow/trainer KEP-3015): the groups a
runtime's ``spec.scheduling`` resolves to, their ``minCount``, the Workload and PodGroups created once
before any Pod, the Pods' ``spec.schedulingGroup``, suspend and finish keeping the objects, and what is
refused (admission and the reconcile's own check)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.conftest import load_sample
from tests.harness import World, complete_condition
from trainer.api.kinds import CLUSTER_TRAINING_RUNTIMES, JOBS, POD_GROUPS, TRAINJOBS, WORKLOADS
from trainer.framework.json_codec import JSON
from trainer.jobs.gang.base import PodSet
from trainer.jobs.gang.workload import groups, pod_group_name, scheduling_errors, workload_name
from trainer.webhook import rules

MPI = [PodSet("launcher", 1, 1, {}), PodSet("node", 1, 4, {})]
INIT = [PodSet("dataset-initializer", 1, 1, {}), PodSet("model-initializer", 1, 1, {}), PodSet("node", 1, 8, {})]


def test_level_1_is_one_gang_of_every_pod_named_like_the_job() -> None:
    (g,) = groups({}, MPI, sequenced=False, job_name="my-job")
    assert (g.template, g.policy) == ("my-job", {"gang": {"minCount": 5}})
    assert g.members == (("launcher", None), ("node", None))


def test_level_1_of_a_sequenced_runtime_is_a_gang_per_replicated_job() -> None:
    out = groups({"schedulingPolicy": {"gang": {}}}, INIT, sequenced=True, job_name="my-job")
    assert [(g.template, g.policy) for g in out] == [
        ("dataset-initializer", {"gang": {"minCount": 1}}),
        ("model-initializer", {"gang": {"minCount": 1}}),
        ("node", {"gang": {"minCount": 8}}),
    ]


def test_level_2_groups_entries_and_defaults_to_gang() -> None:
    scheduling = {
        "replicatedJobs": [
            {"targetReplicatedJobs": ["dataset-initializer", "model-initializer"], "schedulingPolicy": {"basic": {}}},
            {"targetReplicatedJobs": ["node"], "disruptionMode": {"all": {}}},
        ]
    }
    init, node = groups(scheduling, INIT, sequenced=True, job_name="my-job")
    assert (init.template, init.policy) == ("dataset-initializer-model-initializer", {"basic": {}})
    assert (node.template, node.policy, node.disruption) == ("node", {"gang": {"minCount": 8}}, {"all": {}})
    assert node.template_spec() == {
        "name": "node",
        "schedulingPolicy": {"gang": {"minCount": 8}},
        "disruptionMode": {"all": {}},
    }


def test_level_3_is_a_gang_per_job_sized_to_its_pods() -> None:
    scheduling = {"replicatedJobs": [{"targetReplicatedJobs": ["node"], "job": {"resourceClaims": [{"name": "s"}]}}]}
    out = groups(scheduling, [PodSet("node", 3, 4, {})], sequenced=False, job_name="j")
    assert [(g.template, g.members, g.policy["gang"]["minCount"]) for g in out] == [
        ("node-0", (("node", 0),), 4),
        ("node-1", (("node", 1),), 4),
        ("node-2", (("node", 2),), 4),
    ]
    assert out[0].claims == ({"name": "s"},)


def test_a_group_of_no_pod_is_left_out() -> None:
    assert groups({}, [PodSet("node", 1, 0, {})], sequenced=False, job_name="j") == []


@pytest.mark.parametrize(
    ("scheduling", "fragment"),
    [
        (
            {"schedulingPolicy": {"gang": {}}, "replicatedJobs": [{"targetReplicatedJobs": ["node"]}]},
            "spec.scheduling: schedulingPolicy (level 1, the whole TrainJob) and replicatedJobs (level 2) are mutually",
        ),
        (
            {"schedulingPolicy": {"gang": {"minCount": 3}}},
            "spec.scheduling.schedulingPolicy.gang.minCount: gang.minCount",
        ),
        (
            {"replicatedJobs": [{"targetReplicatedJobs": ["launcher", "node"]}, {"targetReplicatedJobs": ["node"]}]},
            "spec.scheduling.replicatedJobs[1].targetReplicatedJobs: a ReplicatedJob must not be targeted by more",
        ),
        (
            {"replicatedJobs": [{"targetReplicatedJobs": ["launcher", "node", "nope"]}]},
            "replicated job 'nope' is not in the runtime template (it has launcher, node)",
        ),
        (
            {"replicatedJobs": [{"targetReplicatedJobs": ["node"]}]},
            "every replicated job of the runtime template must be targeted by one entry",
        ),
        (
            {"replicatedJobs": [{"targetReplicatedJobs": ["launcher", "node"], "job": {}}]},
            "replicatedJobs[0].targetReplicatedJobs: with job set, name exactly one replicated job",
        ),
        (
            {
                "replicatedJobs": [
                    {"targetReplicatedJobs": ["launcher"]},
                    {"targetReplicatedJobs": ["node"], "schedulingPolicy": {"gang": {}}, "job": {}},
                ]
            },
            "spec.scheduling.replicatedJobs[1]: schedulingPolicy and job are mutually exclusive",
        ),
        (
            {"replicatedJobs": [{"targetReplicatedJobs": ["launcher"]}, {"targetReplicatedJobs": ["node"], "job": {}}]},
            "resolves to 10 PodGroup templates, more than the 8 a Workload holds",
        ),
    ],
)
def test_scheduling_errors_name_the_field(scheduling: JSON, fragment: str) -> None:
    errors = scheduling_errors(scheduling, [("launcher", 1), ("node", 9)], sequenced=False)
    assert any(fragment in e for e in errors), errors


def test_a_buildable_scheduling_has_no_error() -> None:
    ok = {"replicatedJobs": [{"targetReplicatedJobs": ["launcher", "node"]}]}
    assert scheduling_errors(ok, [("launcher", 1), ("node", 9)], sequenced=False) == []
    assert scheduling_errors({}, [("launcher", 1), ("node", 9)], sequenced=False) == []


def test_names_are_stable_and_within_63_characters() -> None:
    long = "a" * 63
    wl = workload_name(long, "uid-1")
    assert wl == workload_name(long, "uid-1") != workload_name(long, "uid-2")
    assert len(wl) <= 63
    pg = pod_group_name(wl, "dataset-initializer-model-initializer", long)
    assert len(pg) <= 63 and "-dataset-initializer" in pg
    assert len(pod_group_name(wl, long, long)) <= 63
    short = workload_name("my-job", "u")
    assert short.startswith("my-job-") and pod_group_name(short, "my-job", "my-job").startswith(short + "-")


# ----------------------------------------------------------------------------- the reconcile


def gang_runtime(scheduling: JSON | None = None) -> JSON:
    runtime = load_sample("torch-distributed.yaml")
    runtime["spec"]["scheduling"] = scheduling if scheduling is not None else {"schedulingPolicy": {"gang": {}}}
    return runtime


def world(scheduling: JSON | None = None, **kw: Any) -> World:
    return World("torch", "workload", objects=[gang_runtime(scheduling), load_sample("trainjob.yaml")], **kw)


def objects(w: World, res: Any) -> list[JSON]:
    return [o for (r, _), o in w.kube.objects.items() if r == res]


async def test_the_workload_and_pod_groups_come_before_any_running_job() -> None:
    w = world()
    await w.reconcile()
    (wl,) = objects(w, WORKLOADS)
    assert objects(w, POD_GROUPS) == [], "a PodGroup needs the Workload's uid first"
    assert all(j["spec"]["suspend"] for j in w.jobs()), "Jobs wait suspended for their groups"
    waiting = w.condition("WaitingForGang")
    assert waiting is not None and waiting["reason"] == "WorkloadPending"
    await w.settle()
    (pg,) = objects(w, POD_GROUPS)
    tj = w.obj
    assert wl["metadata"]["ownerReferences"][0]["uid"] == tj["metadata"]["uid"]
    assert wl["spec"] == {
        "controllerRef": {"apiGroup": "trainer.kubeflow.org", "kind": "TrainJob", "name": "pytorch-simple"},
        "podGroupTemplates": [{"name": "pytorch-simple", "schedulingPolicy": {"gang": {"minCount": 2}}}],
    }
    owners = pg["metadata"]["ownerReferences"]
    assert [(o["kind"], o.get("controller")) for o in owners] == [("TrainJob", True), ("Workload", None)]
    assert owners[1]["uid"] == wl["metadata"]["uid"]
    assert pg["spec"] == {
        "workloadRef": {"workloadName": wl["metadata"]["name"], "templateName": "pytorch-simple"},
        "schedulingPolicy": {"gang": {"minCount": 2}},
    }
    (job,) = w.jobs()
    assert not job["spec"]["suspend"], "released once every group exists"
    assert job["spec"]["template"]["spec"]["schedulingGroup"] == {"podGroupName": pg["metadata"]["name"]}
    assert "schedulerName" not in job["spec"]["template"]["spec"], "the default scheduler"
    assert w.condition("WaitingForGang") is None
    assert await w.reconcile() == 0, "settled: nothing written again"
    assert w.kube.count("create", WORKLOADS.kind) == 1 and w.kube.count("create", POD_GROUPS.kind) == 1


async def test_suspend_and_finish_keep_the_workload_and_pod_groups() -> None:
    w = world()
    await w.settle()
    before = {(o["kind"], o["metadata"]["resourceVersion"]) for o in objects(w, WORKLOADS) + objects(w, POD_GROUPS)}
    tj = copy.deepcopy(w.obj)
    tj["spec"]["suspend"] = True
    w.kube.put(tj)
    await w.settle()
    assert all(j["spec"]["suspend"] for j in w.jobs())
    tj = copy.deepcopy(w.obj)
    tj["spec"]["suspend"] = False
    w.kube.put(tj)
    await w.settle()
    for job in w.jobs():
        w.set_status(JOBS, job, {"succeeded": 2, "conditions": [complete_condition()]})
    await w.settle()
    assert w.condition("Complete") is not None
    after = {(o["kind"], o["metadata"]["resourceVersion"]) for o in objects(w, WORKLOADS) + objects(w, POD_GROUPS)}
    assert after == before, "never rewritten nor deleted: the garbage collector takes them with the TrainJob"


ZONE = {"topology": [{"key": "topology.kubernetes.io/zone"}]}
CLAIMS = [
    {"name": "nic", "resourceClaimName": "shared-nic"},
    {"name": "scratch", "resourceClaimTemplateName": "scratch-per-group"},
]


@pytest.mark.parametrize(
    ("scheduling", "settings"),
    [
        (
            {"schedulingConstraints": ZONE, "disruptionMode": {"single": {}}},
            {"schedulingConstraints": ZONE, "disruptionMode": {"single": {}}},
        ),
        (
            {
                "replicatedJobs": [
                    {
                        "targetReplicatedJobs": ["node"],
                        "job": {"schedulingConstraints": ZONE, "disruptionMode": {"all": {}}, "resourceClaims": CLAIMS},
                    }
                ]
            },
            {"schedulingConstraints": ZONE, "disruptionMode": {"all": {}}, "resourceClaims": CLAIMS},
        ),
    ],
    ids=["level-1", "level-3"],
)
async def test_constraints_disruption_mode_and_claims_reach_the_workload_and_the_pod_group(
    scheduling: JSON, settings: JSON
) -> None:
    """``schedulingConstraints``, ``disruptionMode`` (``single``, ``all``) and level 3's ``resourceClaims`` (by
    ``resourceClaimName`` or ``resourceClaimTemplateName``) reach the ``PodGroupTemplate`` and its ``PodGroup``
    whole, beside the computed policy (kubernetes/api ``scheduling/v1beta1``)."""
    w = world(scheduling)
    await w.settle()
    (wl,) = objects(w, WORKLOADS)
    (template,) = wl["spec"]["podGroupTemplates"]
    assert template == {**settings, "name": template["name"], "schedulingPolicy": {"gang": {"minCount": 2}}}
    (pg,) = objects(w, POD_GROUPS)
    assert {k: v for k, v in pg["spec"].items() if k != "workloadRef"} == {
        **settings,
        "schedulingPolicy": {"gang": {"minCount": 2}},
    }


async def test_a_cluster_without_the_workload_api_holds_the_job_and_says_why() -> None:
    w = world()
    for res in (WORKLOADS, POD_GROUPS):
        for informer in w.manager.informers:
            if getattr(informer, "res", None) == res:
                informer.absent = True
    await w.settle()
    problem = w.condition("Misconfigured")
    assert problem is not None and problem["reason"] == "WorkloadAPINotServed"
    assert "scheduling.k8s.io/v1beta1" in problem["message"] and "GenericWorkload" in problem["message"]
    assert objects(w, WORKLOADS) == [] and all(j["spec"]["suspend"] for j in w.jobs())


async def test_a_runtime_without_scheduling_gets_no_workload() -> None:
    w = World("torch", "workload")
    await w.settle()
    assert objects(w, WORKLOADS) == [] and objects(w, POD_GROUPS) == []
    assert all("schedulingGroup" not in j["spec"]["template"]["spec"] for j in w.jobs())


async def test_scheduling_under_another_gang_scheduler_is_said_on_the_job() -> None:
    w = World("torch", "none", objects=[gang_runtime(), load_sample("trainjob.yaml")])
    await w.settle()
    problem = w.condition("Misconfigured")
    assert problem is not None and problem["reason"] == "PodGroupPolicyMismatch"
    assert "spec.scheduling" in problem["message"] and "--gang-scheduler-name=workload" in problem["message"]


async def test_an_mpijob_is_one_gang_of_its_launcher_and_workers() -> None:
    w = World("mpijob", "workload")
    await w.settle()
    (wl,) = objects(w, WORKLOADS)
    (template,) = wl["spec"]["podGroupTemplates"]
    assert template["schedulingPolicy"]["gang"]["minCount"] == sum(
        int(j["spec"].get("parallelism") or 1) for j in w.jobs()
    )
    (pg,) = objects(w, POD_GROUPS)
    assert all(
        j["spec"]["template"]["spec"]["schedulingGroup"]["podGroupName"] == pg["metadata"]["name"] for j in w.jobs()
    )


# ----------------------------------------------------------------------------- admission


def facts(gang: str = "workload", served: bool | None = True, runtime: JSON | None = None) -> rules.AdmissionFacts:
    return rules.AdmissionFacts(
        runtime=lambda _kind, _name, _ns: runtime,
        active_pods=lambda _k, _ns, _n: 0,
        volcano_queues=lambda: None,
        local_queue_exists=lambda _ns, _n: None,
        gang=gang,
        workload_api=lambda: served,
    )


def test_admission_refuses_scheduling_the_operator_or_the_cluster_cannot_serve() -> None:
    runtime = {**gang_runtime(), "kind": CLUSTER_TRAINING_RUNTIMES.kind}
    assert rules.validate_runtime(runtime, None, facts()).allowed
    (error,) = rules.validate_runtime(runtime, None, facts(gang="volcano")).errors
    assert error.startswith("spec.scheduling: the operator runs with --gang-scheduler-name=volcano")
    (error,) = rules.validate_runtime(runtime, None, facts(served=False)).errors
    assert error.startswith("spec.scheduling: the cluster does not serve scheduling.k8s.io/v1beta1")


def test_admission_refuses_scheduling_beside_pod_group_policy_and_a_pod_scheduling_group() -> None:
    runtime = gang_runtime()
    runtime["spec"]["podGroupPolicy"] = {"volcano": {}}
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["schedulingGroup"] = {"podGroupName": "mine"}
    errors = rules.validate_runtime(runtime, None, facts()).errors
    assert "spec.scheduling: scheduling and podGroupPolicy are mutually exclusive: remove one" in errors
    assert any("schedulingGroup: Pod schedulingGroup must not be set" in e for e in errors), errors


def test_num_nodes_is_immutable_while_the_workload_gang_applies() -> None:
    runtime = gang_runtime()
    old = {**load_sample("trainjob.yaml"), "kind": TRAINJOBS.kind}
    new = copy.deepcopy(old)
    new["spec"]["trainer"]["numNodes"] = 3
    for o in (old, new):
        o["spec"]["suspend"] = True  # a resize is allowed while suspended, but not of a Workload gang
    errors = rules.validate_trainjob(new, old, facts(runtime=runtime)).errors
    assert any(e.startswith("spec.trainer.numNodes: cannot change from 2 to 3") for e in errors), errors
    assert rules.validate_trainjob(new, old, facts(gang="none", runtime=load_sample("torch-distributed.yaml"))).allowed
