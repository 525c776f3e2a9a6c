"""A gang TrainJob's PodDisruptionBudget (kubeflow/trainer#3657) and, under ``--trainjob-network-policy``,
each TrainJob's NetworkPolicy (kubeflow/trainer#4020): their shape, when they exist, that they go once
the job finished (or the switch is off), that a settled job writes neither again, and that an object of
their name someone else made is left as it is, the job saying so."""

from __future__ import annotations

import copy

import pytest

from tests.harness import RuntimeWrapper, TrainJobWrapper, World
from trainer.api.conditions import REASON_RESOURCE_EXISTS
from trainer.api.kinds import CLUSTER_TRAINING_RUNTIMES, NETWORK_POLICIES, POD_DISRUPTION_BUDGETS, Resource
from trainer.api.labels import JOBSET_NAME, TRAINJOB_NAME
from trainer.framework.json_codec import JSON
from trainer.wiring import Settings, new_manager


def stored(w: World, res: Resource) -> JSON | None:
    return w.kube.objects.get((res, w.key))


def with_pod_group_policy(nodes: int = 2) -> list[JSON]:
    """The sample runtime with a Volcano ``podGroupPolicy`` and a TrainJob of ``nodes`` nodes on it."""
    runtime = RuntimeWrapper().obj()
    runtime["spec"]["podGroupPolicy"] = {"volcano": {}}
    assert runtime["kind"] == CLUSTER_TRAINING_RUNTIMES.kind
    return [runtime, TrainJobWrapper().num_nodes(nodes).obj()]


@pytest.mark.parametrize("scheduler", ["volcano", "scheduler-plugins", "kueue"])
async def test_a_gang_trainjob_gets_a_budget_of_its_trainer_pods_owned_by_it(scheduler: str) -> None:
    w = World("torch", scheduler)
    await w.settle()
    pdb = stored(w, POD_DISRUPTION_BUDGETS)
    assert pdb is not None
    name, uid = w.key[1], w.obj["metadata"]["uid"]
    assert pdb["metadata"]["name"] == name and pdb["metadata"]["labels"] == {JOBSET_NAME: name}
    (ref,) = pdb["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == ("TrainJob", name, uid, True)
    assert pdb["spec"] == {"minAvailable": 2, "selector": {"matchLabels": {JOBSET_NAME: name}}}
    pods = [j["spec"]["template"]["metadata"]["labels"] for j in w.jobs()]
    assert pods and all(p[JOBSET_NAME] == name for p in pods), "the selector selects the job's pods"
    assert await w.reconcile() == 0, "a settled job writes nothing"


async def test_no_budget_without_a_gang_or_for_one_trainer_pod() -> None:
    w = World("torch", "none")
    await w.settle()
    assert w.jobs() and stored(w, POD_DISRUPTION_BUDGETS) is None
    # The runtime's podGroupPolicy makes it a gang job (upstream's trigger), whatever the operator's flag.
    w = World("torch", "none", objects=with_pod_group_policy())
    await w.settle()
    assert (stored(w, POD_DISRUPTION_BUDGETS) or {}).get("spec", {}).get("minAvailable") == 2
    w = World("torch", "volcano", objects=with_pod_group_policy(nodes=1))
    await w.settle()
    assert w.jobs() and stored(w, POD_DISRUPTION_BUDGETS) is None, "a budget of one pod only blocks maintenance"


async def test_the_budget_counts_the_trainer_pods_only() -> None:
    w = World("torch", "volcano", objects=[RuntimeWrapper().obj(), TrainJobWrapper().num_nodes(5).obj()])
    await w.settle()
    assert (stored(w, POD_DISRUPTION_BUDGETS) or {})["spec"]["minAvailable"] == 5


async def test_a_finished_trainjob_has_no_budget_nor_network_policy() -> None:
    w = World("torch", "volcano", trainjob_network_policy=True)
    await w.settle()
    assert stored(w, POD_DISRUPTION_BUDGETS) is not None and stored(w, NETWORK_POLICIES) is not None
    w.complete_jobs()
    await w.settle()
    assert w.condition("Complete") is not None
    assert stored(w, POD_DISRUPTION_BUDGETS) is None and stored(w, NETWORK_POLICIES) is None
    assert w.kube.count("delete", POD_DISRUPTION_BUDGETS.kind) == 1
    assert await w.reconcile() == 0, "nothing is made again"


async def test_no_network_policy_and_no_label_by_default() -> None:
    w = World("torch", "none")
    await w.settle()
    assert stored(w, NETWORK_POLICIES) is None
    assert all(TRAINJOB_NAME not in (j["spec"]["template"]["metadata"].get("labels") or {}) for j in w.jobs())


async def test_the_switch_gives_each_trainjob_a_policy_letting_in_only_its_own_pods() -> None:
    w = World("torch", "none", trainjob_network_policy=True)
    await w.settle()
    policy = stored(w, NETWORK_POLICIES)
    assert policy is not None
    name = w.key[1]
    pods = {"matchLabels": {TRAINJOB_NAME: name}}
    assert policy["spec"] == {
        "podSelector": pods,
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": pods}]}],
    }
    assert policy["metadata"]["labels"] == {JOBSET_NAME: name}
    assert policy["metadata"]["ownerReferences"][0]["uid"] == w.obj["metadata"]["uid"]
    jobs = w.jobs()
    assert jobs and all(j["spec"]["template"]["metadata"]["labels"][TRAINJOB_NAME] == name for j in jobs), (
        "every pod, initializers too, carries the label the policy selects"
    )
    assert stored(w, POD_DISRUPTION_BUDGETS) is None, "no gang: no budget"
    assert await w.reconcile() == 0, "a settled job writes nothing"


async def test_the_switch_turned_off_deletes_the_policies_the_operator_made() -> None:
    w = World("torch", "none", trainjob_network_policy=True)
    await w.settle()
    assert stored(w, NETWORK_POLICIES) is not None
    # The operator restarted without the switch, on the same cluster.
    w.manager = new_manager(w.kube, Settings(gang_scheduler_name="none", status_coalesce_seconds=0))
    w.kube.connect(w.manager.informers)
    await w.settle()
    assert stored(w, NETWORK_POLICIES) is None
    assert w.kube.count("delete", NETWORK_POLICIES.kind) == 1


@pytest.mark.parametrize(
    ("res", "settings"), [(POD_DISRUPTION_BUDGETS, {}), (NETWORK_POLICIES, {"trainjob_network_policy": True})]
)
async def test_an_object_of_its_name_that_is_someone_elses_is_left_and_said(res: Resource, settings: JSON) -> None:
    w = World("torch", "volcano", **settings)
    ns, name = w.key
    spec: JSON = {"podSelector": {}} if res == NETWORK_POLICIES else {"maxUnavailable": 1}
    theirs = {
        "apiVersion": res.api_version,
        "kind": res.kind,
        "metadata": {"namespace": ns, "name": name, "labels": {JOBSET_NAME: name}},
        "spec": spec,
    }
    w.kube.put(theirs)
    before = copy.deepcopy(stored(w, res))
    await w.reconcile()
    assert stored(w, res) == before, "kept as it was"
    cond = w.condition("Misconfigured")
    assert cond is not None and cond["reason"] == REASON_RESOURCE_EXISTS
    assert f"{res.kind} {name}" in cond["message"] and "not controlled by" in cond["message"]
