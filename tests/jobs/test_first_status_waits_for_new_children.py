"""A job's first status waits behind the children of newer jobs (trainer/jobs/status_writer.py):
in a burst every new job gets its children before any first status is patched; alone, or once the new
jobs are served, the first status and its event are written as before."""

from __future__ import annotations

import asyncio

import pytest

from tests.harness import RuntimeWrapper, TrainJobWrapper, World
from trainer.api.kinds import TRAINJOBS
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import Key, key_of
from trainer.framework.kube.queue import IDLE_QUIET, WorkQueue
from trainer.jobs import status_writer

NEWER = ("default", "newer")


def suspended(*names: str) -> World:
    """A World of the torch runtime and suspended TrainJobs of these names (the first is ``w.key``)."""
    jobs: list[JSON] = []
    for name in names:
        tj = TrainJobWrapper().obj()
        tj["metadata"]["name"] = name
        tj["spec"]["suspend"] = True
        jobs.append(tj)
    w = World(objects=[RuntimeWrapper().obj(), *jobs])
    w.key = key_of(jobs[0])
    return w


def statuses(w: World) -> int:
    return w.kube.count("patch_status", TRAINJOBS.kind)


def events(w: World) -> int:
    return w.kube.count(kind="Event")


def queue(w: World) -> WorkQueue[Key]:
    return w.manager.queues[w.controller]


async def test_the_first_status_waits_while_a_new_job_waits_then_is_written_with_its_event() -> None:
    w = suspended("first")
    q, now = queue(w), [100.0]
    q.clock = lambda: now[0]
    while len(q):  # what the informers queued
        q.done(await q.get())
    q.add(NEWER, urgent=True)
    assert await w.reconciler().reconcile(w.key) is None
    assert w.jobs(), "the children are written"
    assert statuses(w) == 0 and events(w) == 0, w.kube.writes
    assert "status" not in w.obj
    assert q.idle_waiting() == 1, "left in the idle lane"
    assert await w.reconcile() == 0, "again while the new job waits: nothing"

    assert await q.get() == NEWER  # the new job is handed out ...
    q.done(NEWER)
    assert await w.reconcile() == 0, "... but it came less than a second ago: more may be on their way"
    now[0] += IDLE_QUIET
    await asyncio.sleep(IDLE_QUIET + 0.1)  # the lane's check
    assert q.idle_waiting() == 0 and len(q) == 1 and await q.get() == w.key, "queued again once idle"
    assert await w.reconcile() == 2, "then the status and its event"
    assert statuses(w) == 1 and events(w) == 1
    assert [c["type"] for c in w.obj["status"]["conditions"]] == ["Suspended"], w.obj["status"]
    assert await w.reconcile() == 0, "settled"


async def test_the_idle_lane_lets_a_job_go_at_its_bound_while_new_jobs_keep_coming() -> None:
    q: WorkQueue[Key] = WorkQueue()
    now = [100.0]
    q.clock = lambda: now[0]
    q.add(NEWER, urgent=True)
    q.add_when_idle(("default", "old"), at_most=0.5)
    assert q.busy(("default", "old")) and not q.busy(NEWER)
    now[0] += 0.5
    await asyncio.sleep(IDLE_QUIET + 0.1)
    assert q.idle_waiting() == 0, "gone at its bound although a new job still waits"
    assert {await q.get(), await q.get()} == {NEWER, ("default", "old")}
    q.shutdown()


async def test_a_job_does_not_wait_for_itself() -> None:
    w = suspended("first")
    queue(w).add(w.key, urgent=True)  # its own key, not yet handed out, counts for nothing
    await w.settle()
    assert statuses(w) == 1


async def test_a_first_status_that_tells_of_a_problem_is_not_held() -> None:
    w = World(objects=[TrainJobWrapper().obj()])  # its runtime does not exist
    queue(w).add(NEWER, urgent=True)
    await w.settle()
    conditions = {c["type"]: c["status"] for c in w.obj["status"]["conditions"]}
    assert "True" in conditions.values() and statuses(w) == 1, conditions
    assert events(w) >= 1


async def test_a_first_status_waits_at_most_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    w = suspended("first")
    now = [100.0]
    w.reconciler().status._first.now = lambda: now[0]
    queue(w).add(NEWER, urgent=True)
    assert await w.reconciler().reconcile(w.key) is None and statuses(w) == 0
    now[0] += status_writer.FIRST_STATUS_MAX_WAIT - 1
    assert await w.reconcile() == 0
    now[0] += 1
    assert await w.reconcile() == 2, "the bound passed: written although the new job still waits"


async def test_later_statuses_are_not_held() -> None:
    w = suspended("first")
    await w.settle()
    queue(w).add(NEWER, urgent=True)
    w.kube.put({**w.obj, "spec": {**w.obj["spec"], "suspend": False}})
    await w.settle()
    assert statuses(w) == 2, "resumed: written although a new job waits"
    assert not w.obj["status"].get("conditions"), w.obj["status"]


async def test_in_a_burst_one_worker_writes_every_child_before_any_first_status() -> None:
    w = suspended("burst-0", "burst-1", "burst-2")
    worker = asyncio.create_task(w.manager._worker(w.controller))
    try:
        for _ in range(1000):
            if statuses(w) == 3 and len(queue(w)) == 0 and not w.manager._busy:
                break
            await asyncio.sleep(0.01)
    finally:
        worker.cancel()
    kinds = [x.kind if x.verb != "patch_status" else "status" for x in w.kube.writes]
    assert kinds.count("status") == 3, kinds
    first_status = kinds.index("status")
    assert kinds.count("Job") == 3 and kinds[:first_status].count("Job") == 3, kinds
