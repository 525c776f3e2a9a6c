"""What a reconcile writes, and no more: its own writes read back before the cache has them, progress
coalesced, one event per batch of creations, repeated events as a series."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.harness import World, complete_condition
from tests.kube_double import RecordingKube
from trainer.api.kinds import CONFIGMAPS, EVENTS, JOBS, SECRETS, SERVICES, TRAINJOBS
from trainer.framework.controller import Reader
from trainer.framework.json_codec import JSON
from trainer.framework.kube.events import SERIES_FINISH, SERIES_REFRESH, EventRecorder
from trainer.jobs.features.own_writes import OwnWrites


def events(w: World, reason: str | None = None) -> list[JSON]:
    return [o for (res, _), o in w.kube.objects.items() if res == EVENTS and reason in (None, o["reason"])]


async def test_a_reconcile_on_a_cache_behind_its_own_writes_writes_nothing_again() -> None:
    w = World("torch", "none")
    w.kube.hold = True  # the watch delivers nothing of what the first reconcile writes
    first = await w.reconcile()
    assert first == 3, "the runtime snapshot, the Service, the Job; no status: startTime waits for counts"
    assert await w.reconcile() == 0, "the second reconcile sees its own writes, not the stale cache"
    w.kube.release()
    (job,) = w.jobs()
    w.set_status(JOBS, job, {"active": 2})  # the cache has the Job's new status
    w.kube.hold = True  # but will not see the TrainJob's status write
    assert await w.reconcile() == 1, "jobsStatus and startTime written together"
    assert await w.reconcile() == 0, "and not again, although the cached TrainJob has no status yet"
    w.kube.release()
    assert await w.reconcile() == 0
    assert w.kube.count("create", JOBS.kind) == w.kube.count("create", SERVICES.kind) == 1, "created with POST"
    assert w.kube.count("apply", JOBS.kind) == w.kube.count("apply", SERVICES.kind) == 0
    assert w.kube.count("patch_status", TRAINJOBS.kind) == 1, "startTime rode with the first counts"
    assert w.tj["status"]["startTime"] and w.tj["status"]["jobsStatus"][0]["active"] == 1


async def test_a_child_deleted_after_the_cache_caught_up_is_created_again() -> None:
    w = World("torch", "none")
    await w.settle()
    (job,) = w.jobs()
    await w.kube.delete(JOBS, job["metadata"]["namespace"], job["metadata"]["name"])  # someone deletes it
    await w.settle()
    assert [j["metadata"]["name"] for j in w.jobs()] == [job["metadata"]["name"]]
    assert w.kube.count("create", JOBS.kind) == 2


def test_own_writes_are_read_until_the_cache_has_them() -> None:
    kube = RecordingKube()
    own = OwnWrites(limit=2)

    class Store:
        def __init__(self) -> None:
            self.objects: dict[tuple[str, str], JSON] = {}
            self.rv = 0
            self.absent = False

        def get(self, namespace: str | None, name: str) -> JSON | None:
            return self.objects.get((namespace or "", name))

        def items(self) -> list[JSON]:
            return list(self.objects.values())

        def owned_by(self, uid: str) -> list[JSON]:
            return []

        def seen(self, resource_version: int) -> bool:
            return self.rv >= resource_version

        def add_handler(self, handler: Callable[[JSON | None, JSON | None], None]) -> None:
            pass

    store = Store()
    reader = Reader("test", {CONFIGMAPS: store})
    written = {"metadata": {"namespace": "ns", "name": "a", "resourceVersion": "7", "managedFields": [{}]}}
    own.remember(CONFIGMAPS, written)
    kept = own.latest(reader, CONFIGMAPS, "ns", "a")
    assert kept == written, "our answer"
    store.objects[("ns", "a")] = {"metadata": {"namespace": "ns", "name": "a", "resourceVersion": "5"}}
    assert own.latest(reader, CONFIGMAPS, "ns", "a") == kept, "an older cached object loses"
    store.objects[("ns", "a")] = newer = {"metadata": {"namespace": "ns", "name": "a", "resourceVersion": "9"}}
    assert own.latest(reader, CONFIGMAPS, "ns", "a") is newer and len(own) == 0, "a newer one wins, for good"

    own.remember(CONFIGMAPS, {"metadata": {"namespace": "ns", "name": "b", "resourceVersion": "11"}})
    del store.objects[("ns", "a")]
    assert own.latest(reader, CONFIGMAPS, "ns", "b") is not None, "not in the cache yet: ours"
    store.rv = 12  # the cache has seen rv 11 and more, and has no b: deleted since
    assert own.latest(reader, CONFIGMAPS, "ns", "b") is None
    for name in "cde":
        own.remember(CONFIGMAPS, {"metadata": {"namespace": "ns", "name": name, "resourceVersion": "20"}})
    assert len(own) == 2, "bounded"
    own.remember(CONFIGMAPS, {"metadata": {"namespace": "ns", "name": "x", "resourceVersion": "not-a-number"}})
    assert own.latest(reader, CONFIGMAPS, "ns", "x") is None, "an opaque resourceVersion: the cache decides"
    assert kube.writes == []


def test_a_settled_write_is_told_from_its_echo_once() -> None:
    own = OwnWrites()
    stored = {"metadata": {"namespace": "ns", "name": "a", "resourceVersion": "7"}}
    own.remember(TRAINJOBS, stored, settled=True)
    other = {"metadata": {"namespace": "ns", "name": "a", "resourceVersion": "8"}}
    assert not own.settled_echo(TRAINJOBS, other), "another version: someone else's write"
    assert not own.settled_echo(CONFIGMAPS, stored), "another resource"
    assert own.settled_echo(TRAINJOBS, copy.deepcopy(stored))
    assert not own.settled_echo(TRAINJOBS, stored), "once"
    own.remember(TRAINJOBS, stored, settled=True)
    own.remember(TRAINJOBS, {"metadata": {**stored["metadata"], "resourceVersion": "9"}})
    assert not own.settled_echo(TRAINJOBS, stored), "a later write that is not settled replaces it"


async def drained(w: World) -> int:
    """Hand out and finish every key waiting in the controller's queue; returns how many there were."""
    queue, n = w.manager.queues[w.controller], 0
    while len(queue):
        queue.done(await queue.get())
        n += 1
    return n


async def started(w: World) -> None:
    """Settle ``w``, hand out what its queue holds, then have the Job controller count two active pods."""
    await w.settle()
    await drained(w)
    (job,) = w.jobs()
    w.set_status(JOBS, job, {"active": 2})


async def test_the_echo_of_a_progress_only_status_write_is_not_reconciled() -> None:
    w = World("torch", "none", children_batch_seconds=0)
    await started(w)
    assert await drained(w) == 1, "the Job's change is reconciled"
    w.kube.hold = True  # the watch reports the write after its answer came back
    assert await w.reconcile() == 1, "jobsStatus and startTime written together"
    w.kube.release()
    assert await drained(w) == 0, "its echo is not reconciled: a reconcile of it writes nothing"
    assert await w.reconcile() == 0
    tj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    tj["metadata"].setdefault("annotations", {})["touch"] = "1"
    w.kube.put(tj)
    assert await drained(w) == 1, "a later write by someone else is"
    (job,) = w.jobs()
    w.set_status(JOBS, job, {"active": 0, "succeeded": 2, "conditions": [complete_condition()]})
    await drained(w)
    w.kube.hold = True
    assert await w.reconcile() == 2, "Complete written, and its event"
    w.kube.release()
    assert await drained(w) == 1, "a condition's echo is reconciled (e.g. the TTL counts from it)"


async def test_a_suspended_trainjob_gets_its_conditions_and_counts_in_one_status_write() -> None:
    w = World("torch", "none")
    tj = copy.deepcopy(w.kube.objects[(TRAINJOBS, w.key)])
    tj["spec"]["suspend"] = True
    w.kube.put(tj)
    w.kube.hold = True  # the watch brings the new Job back only after the reconcile
    await w.reconcile()
    w.kube.release()
    await w.settle()
    assert w.kube.count("patch_status", TRAINJOBS.kind) == 1, [x for x in w.kube.writes if x.verb == "patch_status"]
    status = w.kube.objects[(TRAINJOBS, w.key)]["status"]
    assert [(s["name"], s["suspended"]) for s in status["jobsStatus"]] == [("node", 1)], "the Job just created"
    assert any(c["type"] == "Suspended" and c["status"] == "True" for c in status["conditions"])


async def test_changes_of_children_are_reconciled_together_after_the_batch_period() -> None:
    w = World("torch", "none", children_batch_seconds=0.05)
    await w.settle()
    await asyncio.sleep(0.1)
    await drained(w)
    (job,) = w.jobs()
    w.set_status(JOBS, job, {"active": 2})
    (job,) = w.jobs()
    w.set_status(JOBS, job, {"ready": 2})
    assert await drained(w) == 0, "not at once"
    await asyncio.sleep(0.1)
    assert await drained(w) == 1, "both changes, one reconcile"
    w.manager.queues[w.controller].shutdown()


async def test_progress_only_status_changes_wait_and_a_finished_job_is_written_at_once() -> None:
    w = World("torch", "none", status_coalesce_seconds=30)
    await w.settle()
    assert w.jobs(), "children are created at once"
    assert w.kube.count("patch_status", TRAINJOBS.kind) == 0, "counts that are all zero tell nothing"
    for job in w.jobs():  # pods start: only progress
        w.set_status(JOBS, job, {"active": 2, "ready": 2})
    requeue = await w.manager.reconcilers[w.controller](w.key)
    assert w.kube.count("patch_status", TRAINJOBS.kind) == 0, "progress waits"
    assert requeue is not None and 0 < requeue <= 30, "and is looked at again within the delay"
    for job in w.jobs():
        w.set_status(JOBS, job, {"active": 0, "ready": 0, "succeeded": 2, "conditions": [complete_condition()]})
    await w.settle()
    assert w.kube.count("patch_status", TRAINJOBS.kind) == 1, "one write: Complete, with the final counts"
    status = w.kube.objects[(TRAINJOBS, w.key)]["status"]
    assert status["jobsStatus"][0]["succeeded"] == 1
    assert [c["type"] for c in status["conditions"]] == ["Complete"]


async def test_one_event_per_batch_of_creations_of_an_mpijob() -> None:
    w = World("mpijob", "none")
    await w.settle()
    (created,) = events(w, "SuccessfulCreate")
    assert created["message"].startswith("Created ") and created["message"].count(", ") >= 2, created["message"]
    assert created["involvedObject"]["kind"] == "MPIJob" and created["action"] == "Create"
    assert created["reportingComponent"] == "trainer" and created["eventTime"]


async def test_a_trainjob_tells_its_completion_not_its_creations() -> None:
    w = World("torch", "none")
    await w.settle()
    assert events(w) == [], "as JobSet: the Job controller tells each pod it creates"
    done = copy.deepcopy(w.jobs()[0])
    w.set_status(JOBS, done, {"succeeded": 2, "conditions": [complete_condition()]})
    await w.settle()
    assert [e["reason"] for e in events(w)] == ["AllJobsCompleted"]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_repeated_event_becomes_a_series_written_twice_then_per_refresh() -> None:
    kube, clock = RecordingKube(), Clock()
    recorder = EventRecorder(kube, "replica-a", clock=clock)
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "ns", "name": "p", "uid": "u1"}}

    async def emit(message: str = "no") -> None:
        recorder.emit(obj, "Warning", "Refused", message)
        await recorder.flush()  # each occurrence's writes done before the next occurs

    async def refresh() -> None:
        recorder.refresh()
        await recorder.flush()

    for _ in range(5):
        await emit()
    assert [w.verb for w in kube.writes] == ["create", "merge_patch"], "created, then made a series once"
    (event,) = [o for (res, _), o in kube.objects.items() if res == EVENTS]
    assert event["series"]["count"] == 2 and event["reportingInstance"] == "replica-a"
    await emit("another message")
    assert kube.writes[-1].verb == "create", "a different note is another event"

    clock.now += 60
    await refresh()
    assert len(kube.writes) == 3, "a series is not rewritten before its refresh"
    clock.now += SERIES_FINISH
    await refresh()
    assert kube.writes[-1].verb == "merge_patch" and event_count(kube) == 5, "the ended series, written once"
    writes = len(kube.writes)
    await emit()
    assert len(kube.writes) == writes + 1 and kube.writes[-1].verb == "create", "after it ended: a new event"

    start, writes = clock.now, len(kube.writes)
    while clock.now - start < SERIES_REFRESH + 120:  # repeats every minute for 32 minutes
        clock.now += 60
        await emit()
        await refresh()
    verbs = [w.verb for w in kube.writes[writes:]]
    assert verbs == ["merge_patch", "merge_patch"], "made a series, then written once per refresh"
    assert event_count(kube) >= 32


async def test_a_transition_is_told_once_its_status_is_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainer.framework.kube.client import ApiError

    w = World("torch", "none")
    await w.settle()
    w.complete_jobs()
    refused = 0
    patch_status = w.kube.patch_status

    async def refuse_once(*args: Any, **kwargs: Any) -> JSON:
        nonlocal refused
        if not refused:
            refused += 1
            raise ApiError(500, {"reason": "InternalError", "message": "etcdserver: request timed out"})
        return await patch_status(*args, **kwargs)

    monkeypatch.setattr(w.kube, "patch_status", refuse_once)
    with pytest.raises(ApiError):
        await w.reconcile()
    assert events(w) == [], "the status was not stored: nothing told"
    await w.settle()
    assert [e["reason"] for e in events(w)] == ["AllJobsCompleted"]
    assert events(w)[0]["count"] == 1, "told once, by the write that stored it"


def event_count(kube: RecordingKube) -> int:
    counts = [
        (o.get("series") or {}).get("count", 1)
        for (res, _), o in kube.objects.items()
        if res == EVENTS and o["message"] == "no"
    ]
    return int(max(counts))


async def test_a_created_once_child_the_cache_has_not_seen_yet_is_kept_and_given_the_childs_label() -> None:
    w = World("mpijob", "none")
    ns, name = w.key[0], w.key[1] + "-ssh"
    ref = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": w.key[1], "controller": True}
    meta = {"namespace": ns, "name": name, "ownerReferences": [{**ref, "uid": w.obj["metadata"]["uid"]}]}
    ours = {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": {}}
    w.kube.objects[(SECRETS, (ns, name))] = ours  # in the apiserver, not yet in the cache (a restart)
    await w.reconcile()
    assert w.kube.count("create", SECRETS.kind) == 1, "created once: the apiserver says it exists (409)"
    stored = w.kube.objects[(SECRETS, (ns, name))]
    assert w.kube.count("apply", SECRETS.kind) == 0 and stored["data"] == {}, "not rewritten"
    assert stored["metadata"]["labels"] == {"training.kubeflow.org/job-name": w.key[1]}, "labelled: the cache sees it"
    assert w.kube.count("merge_patch", SECRETS.kind) == 1
    assert [k for r, k in w.kube.objects if r == SECRETS] == [(ns, name)], "no other Secret"
    assert w.jobs(), "and the reconcile goes on"


async def test_the_children_of_a_stage_are_written_together_and_jobs_last(monkeypatch: Any) -> None:
    w = World("deepspeed-mpi", "volcano")
    applied = w.kube.apply
    in_flight: list[str] = []
    seen: list[tuple[str, int]] = []  # (kind, how many writes were in flight when it started)

    async def slow_apply(obj: JSON, manager: str, force: bool = True) -> JSON:
        in_flight.append(obj["kind"])
        seen.append((obj["kind"], len(in_flight)))
        await asyncio.sleep(0.01)
        in_flight.remove(obj["kind"])
        return await applied(obj, manager, force)

    created = w.kube.create

    async def slow_create(res: Any, namespace: str | None, obj: JSON, manager: str | None = None) -> JSON:
        if res == EVENTS:
            return await created(res, namespace, obj, manager)
        in_flight.append(obj["kind"])
        seen.append((obj["kind"], len(in_flight)))
        await asyncio.sleep(0.01)
        in_flight.remove(obj["kind"])
        return await created(res, namespace, obj, manager)

    monkeypatch.setattr(w.kube, "apply", slow_apply)
    monkeypatch.setattr(w.kube, "create", slow_create)  # the runtime snapshot and the SSH Secret: created once
    await w.reconcile()
    kinds = [kind for kind, _ in seen]
    assert kinds.count(JOBS.kind) == 2 and set(kinds[-2:]) == {JOBS.kind}, "the Jobs are written last"
    before_jobs = seen[:-2]
    assert {"ConfigMap", "Secret", "Service", "PodGroup"} <= {kind for kind, _ in before_jobs}
    assert max(n for _, n in before_jobs) == len(before_jobs), "everything but the Jobs is sent at once"
    assert max(n for _, n in seen[-2:]) == 2, "both Jobs are sent at once"
    assert not in_flight, "every write finished with the reconcile"


async def test_a_failed_write_of_a_stage_is_raised_as_it_is() -> None:
    from trainer.framework.kube.client import ApiError

    w = World("torch", "none")
    w.kube.refuse["Service"] = (500, "etcdserver: request timed out")
    with pytest.raises(ApiError) as raised:
        await w.reconcile()
    assert raised.value.status == 500
    assert not w.jobs(), "no Job is written while what it needs failed"


async def test_the_echo_of_a_trainjobs_own_child_writes_is_not_reconciled() -> None:
    w = World("torch", "none", children_batch_seconds=0)
    await drained(w)
    w.kube.hold = True  # the watch reports the children after the answers came back
    assert await w.reconcile() == 3, "the runtime snapshot, the Service, the Job"
    w.kube.release()
    assert await drained(w) == 0, "the echoes of its own creates: the reconcile counted them already"
    (job,) = w.jobs()
    w.set_status(JOBS, job, {"active": 2})
    assert await drained(w) == 1, "the Job controller's change of the Job is reconciled"


async def test_an_mpijobs_child_echoes_are_reconciled() -> None:
    w = World("mpijob", "none", children_batch_seconds=0)
    await drained(w)
    w.kube.hold = True
    await w.reconcile()
    w.kube.release()
    assert await drained(w) == 1, "its reconcile does not read its writes back: the echoes bring one more"


async def test_a_progress_change_seen_after_the_batch_period_is_written_by_that_reconcile() -> None:
    w = World("torch", "none", children_batch_seconds=0.05, status_coalesce_seconds=0.05)
    await w.settle()
    await asyncio.sleep(0.1)
    await drained(w)
    (job,) = w.jobs()
    w.set_status(JOBS, job, {"active": 2})  # the progress clock starts at this change
    await asyncio.sleep(0.1)
    queue = w.manager.queues[w.controller]
    key = await queue.get()
    requeue = await w.manager.reconcilers[w.controller](key)
    queue.done(key)
    assert requeue is None, "the change has waited the coalescing period already: not deferred"
    assert w.kube.count("patch_status", TRAINJOBS.kind) == 1, "written by the reconcile the batch brought"
    assert w.kube.objects[(TRAINJOBS, w.key)]["status"]["jobsStatus"][0]["active"] == 1
    queue.shutdown()


async def test_a_job_that_finishes_is_reconciled_at_once_not_after_the_batch() -> None:
    w = World("torch", "none", children_batch_seconds=30)
    await started(w)
    assert await drained(w) == 0, "progress waits for the batch"
    (job,) = w.jobs()
    w.set_status(JOBS, job, {"active": 0, "succeeded": 2, "conditions": [complete_condition()]})
    assert await drained(w) == 1, "a finished Job at once, with the batch's change"
    queue = w.manager.queues[w.controller]
    assert not queue._timers, "the batch's timer is cancelled"
    queue.shutdown()
