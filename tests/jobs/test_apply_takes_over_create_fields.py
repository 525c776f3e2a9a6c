"""Taking over a create's fields for server-side apply: the managedFields rewrite, the cache's mark,
and the reconciler doing it once, before the first apply to a child it created with POST."""

from __future__ import annotations

import copy
from typing import Any

from tests.harness import World
from trainer.api.kinds import JOBS, SERVICES, TRAINJOBS
from trainer.framework.json_codec import JSON
from trainer.framework.kube.projection import UPDATE_MARK, owned_by_update, projection
from trainer.jobs.child_writer import taken_over, union
from trainer.jobs.reconcile import kept_job

CREATED: JSON = {
    "manager": "trainer",
    "operation": "Update",
    "apiVersion": "batch/v1",
    "fieldsV1": {"f:spec": {"f:suspend": {}, "f:template": {"f:spec": {"f:schedulingGates": {}}}}},
}
STATUS = {"manager": "trainer", "operation": "Update", "apiVersion": "batch/v1", "subresource": "status"}
OTHER = {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "batch/v1", "fieldsV1": {}}


def test_the_creates_entry_becomes_the_apply_entry() -> None:
    out = taken_over([OTHER, CREATED, STATUS], "trainer")
    assert out == [OTHER, {**CREATED, "operation": "Apply"}, STATUS], "in place; others and status untouched"
    assert CREATED["operation"] == "Update", "the entries given are not changed"


def test_the_creates_fields_join_an_existing_apply_entry() -> None:
    applied: JSON = {
        "manager": "trainer",
        "operation": "Apply",
        "apiVersion": "batch/v1",
        "fieldsV1": {"f:metadata": {}},
    }
    out = taken_over([CREATED, applied], "trainer")
    assert out is not None and len(out) == 1
    assert out[0]["operation"] == "Apply" and out[0]["fieldsV1"] == {"f:metadata": {}, **CREATED["fieldsV1"]}
    other_version = {**applied, "apiVersion": "batch/v2"}
    assert taken_over([CREATED, other_version], "trainer") is None, "two versions are not merged"


def test_nothing_to_take_over() -> None:
    assert taken_over([OTHER, STATUS], "trainer") is None
    assert taken_over([{**CREATED, "manager": "kubectl"}], "trainer") is None
    assert union({"f:a": {"f:b": {}}}, {"f:a": {"f:c": {}}, ".": {}}) == {"f:a": {"f:b": {}, "f:c": {}}, ".": {}}


def test_the_cache_keeps_only_the_mark_of_a_create() -> None:
    job: JSON = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "managedFields": [OTHER, CREATED]}}
    kept = projection(kept_job)(job)
    assert kept["metadata"]["managedFields"] == UPDATE_MARK and owned_by_update(kept)
    applied = {**CREATED, "operation": "Apply"}
    job["metadata"]["managedFields"] = [OTHER, applied, STATUS]
    kept = projection(kept_job)(job)
    assert "managedFields" not in kept["metadata"] and not owned_by_update(kept)


async def test_a_child_created_with_post_is_taken_over_once_before_its_first_apply() -> None:
    w = World("torch", "none")
    await w.settle()
    (job,) = w.jobs()
    assert [e["operation"] for e in job["metadata"]["managedFields"]] == ["Update"], "created with POST"
    tj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    tj["spec"]["suspend"] = True  # the Job must be suspended: an apply
    w.kube.put(tj)
    await w.settle()
    verbs = [x.verb for x in w.kube.writes if x.kind == JOBS.kind]
    assert verbs == ["create", "json_patch", "apply"], verbs
    (job,) = w.jobs()
    assert job["spec"]["suspend"] is True
    assert [(e["manager"], e["operation"]) for e in job["metadata"]["managedFields"]] == [("trainer", "Apply")]
    tj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    tj["spec"]["suspend"] = False
    w.kube.put(tj)
    await w.settle()
    verbs = [x.verb for x in w.kube.writes if x.kind == JOBS.kind]
    assert verbs[3:] == ["apply"], "taken over once"
    assert w.kube.count("json_patch", SERVICES.kind) == 0, "an unchanged child is not touched"


async def test_a_take_over_that_lost_a_race_is_retried() -> None:
    from trainer.framework.kube.client import ApiError

    w = World("torch", "none")
    await w.settle()
    patch = w.kube.json_patch

    async def raced(*args: Any, **kwargs: Any) -> JSON:
        (job,) = w.jobs()
        w.set_status(JOBS, job, {"active": 1})  # the Job controller writes in between
        return await patch(*args, **kwargs)

    w.kube.json_patch = raced  # type: ignore[method-assign]
    tj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    tj["spec"]["suspend"] = True
    w.kube.put(tj)
    try:
        await w.reconcile()
        raise AssertionError("a take-over on a changed object must fail")
    except ApiError as e:
        assert e.conflict
    w.kube.json_patch = patch  # type: ignore[method-assign]
    await w.settle()
    (job,) = w.jobs()
    assert job["spec"]["suspend"] is True
    assert [e["operation"] for e in job["metadata"]["managedFields"]] == ["Apply"]


async def test_a_new_child_of_the_job_that_exists_already_is_applied() -> None:
    w = World("torch", "none")
    ns = w.key[0]
    uid = w.kube.objects[(TRAINJOBS, w.key)]["metadata"]["uid"]
    ref = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": w.key[1], "uid": uid}
    ours = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"namespace": ns, "name": w.key[1], "ownerReferences": [{**ref, "controller": True}]},
        "spec": {},
    }
    w.kube.objects[(SERVICES, (ns, w.key[1]))] = ours  # in the apiserver, not yet in the cache
    await w.reconcile()
    assert [x.verb for x in w.kube.writes if x.kind == SERVICES.kind] == ["create", "apply"]
    assert w.kube.objects[(SERVICES, (ns, w.key[1]))]["spec"]["clusterIP"] == "None"
