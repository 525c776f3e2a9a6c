"""The event recorder queues and returns; its senders write, a bounded number at once, each series by one
writer at a time; a full queue drops and counts; a flush writes what is queued, within its bound; the
manager's graceful stop flushes."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.kube_double import RecordingKube
from trainer.api.kinds import EVENTS, TRAINJOBS
from trainer.framework.controller import Context, Controller, Reconcile
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import Key
from trainer.framework.kube.events import QUEUE_SIZE, SERIES_FINISH, EventRecorder
from trainer.wiring import Settings, new_manager


def pod(uid: str = "u1") -> JSON:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "ns", "name": "p", "uid": uid}}


def stored_events(kube: RecordingKube) -> list[JSON]:
    return [o for (res, _), o in kube.objects.items() if res == EVENTS]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class GatedKube(RecordingKube):
    """Writes of Events wait for :attr:`gate`; :attr:`in_flight` counts those waiting, :attr:`most` the
    most at once."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.in_flight = self.most = 0

    async def _through_gate(self) -> None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await self.gate.wait()
        finally:
            self.in_flight -= 1

    async def create(self, res: Any, namespace: str | None, obj: JSON, *args: Any, **kwargs: Any) -> JSON:
        if res == EVENTS:
            await self._through_gate()
        return await super().create(res, namespace, obj, *args, **kwargs)

    async def merge_patch(self, res: Any, namespace: str | None, name: str, patch: JSON) -> JSON:
        if res == EVENTS:
            await self._through_gate()
        return await super().merge_patch(res, namespace, name, patch)


async def until(condition: Any) -> None:
    """Let the loop run until ``condition()`` holds (at most 1,000 turns)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("never happened")


async def test_emit_queues_and_returns_the_senders_write() -> None:
    kube = RecordingKube()
    recorder = EventRecorder(kube, "replica-a")
    recorder.emit(pod(), "Normal", "Suspended", "TrainJob is suspended")
    assert kube.writes == [] and recorder.queued == 1, "nothing written by emit itself"
    run = asyncio.create_task(recorder.run())
    try:
        await until(lambda: stored_events(kube))
    finally:
        run.cancel()
    (event,) = stored_events(kube)
    assert event["reason"] == "Suspended" and event["count"] == 1 and "series" not in event
    assert event["involvedObject"]["uid"] == "u1" and event["firstTimestamp"]


async def test_repeats_before_the_create_is_written_fold_into_it() -> None:
    kube, clock = RecordingKube(), Clock()
    recorder = EventRecorder(kube, clock=clock)
    for _ in range(3):
        recorder.emit(pod(), "Warning", "Refused", "no")
    assert recorder.queued == 1, "one series is queued once"
    await recorder.flush()
    assert [w.verb for w in kube.writes] == ["create"], "one write for three occurrences"
    (event,) = stored_events(kube)
    assert event["series"]["count"] == 3 and event["count"] == 3
    recorder.emit(pod(), "Warning", "Refused", "no")
    await recorder.flush()
    assert len(kube.writes) == 1, "already a series: counted in memory until the refresh"
    clock.now += SERIES_FINISH
    recorder.refresh()
    await recorder.flush()
    assert [w.verb for w in kube.writes] == ["create", "merge_patch"] and stored_events(kube)[0]["count"] == 4


async def test_a_repeat_while_the_create_is_in_flight_is_patched_after_it() -> None:
    kube = GatedKube()
    recorder = EventRecorder(kube)
    recorder.emit(pod(), "Warning", "Refused", "no")
    flush = asyncio.create_task(recorder.flush())
    await until(lambda: kube.in_flight == 1)
    recorder.emit(pod(), "Warning", "Refused", "no")  # the create is being written
    assert recorder.queued == 0, "not queued again while its write is in flight"
    kube.gate.set()
    await flush
    assert [w.verb for w in kube.writes] == ["create", "merge_patch"], "the series after its Event, never before"
    assert kube.most == 1
    (event,) = stored_events(kube)
    assert event["series"]["count"] == 2 and event["count"] == 2


async def test_writes_at_once_are_bounded_by_the_senders() -> None:
    kube = GatedKube()
    recorder = EventRecorder(kube, senders=3)
    for i in range(10):
        recorder.emit(pod(f"u{i}"), "Normal", "Suspended", "suspended")
    run = asyncio.create_task(recorder.run())
    flush = asyncio.create_task(recorder.flush())
    try:
        await until(lambda: kube.in_flight == 3)
        for _ in range(20):
            await asyncio.sleep(0)
        assert kube.in_flight == 3, "the run's senders and the flush share the bound"
        kube.gate.set()
        await flush
    finally:
        run.cancel()
    assert kube.most == 3 and len(stored_events(kube)) == 10


async def test_a_full_queue_drops_new_events_and_counts_them() -> None:
    kube = RecordingKube()
    dropped: list[float] = []
    recorder = EventRecorder(kube, queue_size=2, dropped=dropped.append)
    for i in range(3):
        recorder.emit(pod(f"u{i}"), "Normal", "Suspended", "suspended")
    recorder.emit(pod("u0"), "Normal", "Suspended", "suspended")  # a repeat of a queued one: not dropped
    assert dropped == [1] and recorder.queued == 2
    await recorder.flush()
    assert sorted(e["involvedObject"]["uid"] for e in stored_events(kube)) == ["u0", "u1"]
    assert [e["count"] for e in stored_events(kube) if e["involvedObject"]["uid"] == "u0"] == [2]
    recorder.emit(pod("u2"), "Normal", "Suspended", "suspended")  # the dropped one, again: a new Event
    await recorder.flush()
    assert len(stored_events(kube)) == 3 and dropped == [1]


async def test_a_refused_create_is_forgotten_and_the_next_occurrence_creates_again() -> None:
    kube = RecordingKube(refuse={"Event": (500, "etcd is down")})
    recorder = EventRecorder(kube)
    recorder.emit(pod(), "Warning", "Refused", "no")
    await recorder.flush()
    assert stored_events(kube) == []
    kube.refuse.clear()
    recorder.emit(pod(), "Warning", "Refused", "no")
    await recorder.flush()
    (event,) = stored_events(kube)
    assert event["count"] == 1 and "series" not in event, "not a series of an Event that was never stored"


async def test_a_flush_out_of_time_drops_what_is_left_and_counts_it() -> None:
    kube = GatedKube()
    dropped: list[float] = []
    recorder = EventRecorder(kube, senders=1, dropped=dropped.append)
    for i in range(3):
        recorder.emit(pod(f"u{i}"), "Normal", "Suspended", "suspended")
    assert await recorder.flush(timeout=0.05) == 2, "one in flight (cancelled), two never sent"
    assert dropped == [2] and recorder.queued == 0
    kube.gate.set()
    recorder.emit(pod("u1"), "Normal", "Suspended", "suspended")
    await recorder.flush()
    assert [e["involvedObject"]["uid"] for e in stored_events(kube)] == ["u1"], "forgotten: created anew"


class SlowEventsKube(RecordingKube):
    """Each Event create takes a few turns of the loop, as a real request does."""

    async def create(self, res: Any, namespace: str | None, obj: JSON, *args: Any, **kwargs: Any) -> JSON:
        if res == EVENTS:
            for _ in range(5):
                await asyncio.sleep(0)
        return await super().create(res, namespace, obj, *args, **kwargs)


async def test_the_managers_graceful_stop_writes_the_events_its_last_reconcile_queued() -> None:
    kube = SlowEventsKube()
    done: list[Key] = []

    def build(ctx: Context) -> Reconcile:
        async def reconcile(key: Key) -> float | None:
            for i in range(8):
                ctx.events.emit(pod(f"{key[1]}-{i}"), "Normal", "Done", "reconciled")
            done.append(key)
            return None

        return reconcile

    manager = new_manager(kube, Settings(), declared=[Controller("trainjob", TRAINJOBS, build)])
    run = asyncio.create_task(manager.run())
    try:
        async with asyncio.timeout(10):
            await manager.ready.wait()
            manager.queues["trainjob"].add(("n", "last"))
            while not done:
                await asyncio.sleep(0)
            manager.stop()
            await run
    finally:
        run.cancel()
    assert len(stored_events(kube)) == 8, "every Event queued before the stop is written"


async def test_the_managers_recorder_counts_drops_in_its_metric() -> None:
    manager = new_manager(RecordingKube(), Settings())
    for i in range(QUEUE_SIZE + 2):
        manager.events.emit(pod(f"u{i}"), "Normal", "Suspended", "suspended")
    dropped = manager.metrics.registry.get_sample_value("kubeflow_trainer_events_dropped_total")
    assert dropped == 2 and manager.events.queued == QUEUE_SIZE
