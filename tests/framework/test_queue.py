"""The work queue: de-duplication, no concurrent processing of one key, backoff."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from trainer.framework.kube.queue import WorkQueue


async def test_a_key_is_queued_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    for _ in range(3):
        q.add("a")
    q.add("b")
    assert len(q) == 2
    assert await q.get() == "a"
    assert await q.get() == "b"


async def test_a_key_added_while_processing_comes_back_after_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    key = await q.get()
    q.add("a")
    assert len(q) == 0, "a key being processed must not be handed to a second worker"
    q.done(key)
    assert len(q) == 1
    assert await q.get() == "a"
    q.done("a")
    assert len(q) == 0


async def test_backoff_doubles_and_forget_resets() -> None:
    q: WorkQueue[str] = WorkQueue(base_delay=0.01, max_delay=0.04)
    delays = [q.add_rate_limited("a") for _ in range(4)]
    assert delays == [0.01, 0.02, 0.04, 0.04]
    assert q.failures("a") == 4
    q.forget("a")
    assert q.failures("a") == 0
    assert await asyncio.wait_for(q.get(), 1) == "a"
    q.shutdown()


async def test_add_after_fires_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_after("a", 0.02)
    q.add_after("a", 0.5)  # a later timer does not postpone the earlier one
    assert await asyncio.wait_for(q.get(), 0.3) == "a"


async def test_urgent_keys_come_first_in_order_and_a_waiting_key_moves_ahead_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    for key in ("old-1", "old-2", "old-3"):
        q.add(key)
    q.add("new-1", urgent=True)
    q.add("new-2", urgent=True)
    q.add("old-3", urgent=True)  # waiting already: moves ahead, still queued once
    q.add("old-3", urgent=True)
    assert len(q) == 5
    order = [await q.get() for _ in range(5)]
    assert order == ["new-1", "new-2", "old-3", "old-1", "old-2"]
    assert len(q) == 0
    for key in order:
        q.done(key)
    q.add("later")
    assert await asyncio.wait_for(q.get(), 1) == "later", "a moved key's first entry is not handed out again"


async def test_a_key_made_urgent_while_processing_comes_back_first_after_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    key = await q.get()
    q.add("b")
    q.add("a", urgent=True)  # added while processing: not handed out, but urgent once done
    assert len(q) == 1
    q.done(key)
    assert [await q.get(), await q.get()] == ["a", "b"]
    q.add("c")
    q.add("a")  # urgency is spent once a key was handed out
    q.done("a")
    assert [await q.get(), await q.get()] == ["c", "a"]


async def test_batched_adds_of_a_key_are_handed_out_once_after_the_period() -> None:
    q: WorkQueue[str] = WorkQueue()
    loop = asyncio.get_running_loop()
    began = loop.time()
    for _ in range(3):
        q.add_batched("a", 0.05)
    assert len(q) == 0, "not before the period"
    assert await asyncio.wait_for(q.get(), 1) == "a"
    assert loop.time() - began >= 0.05
    q.done("a")
    await asyncio.sleep(0.1)
    assert len(q) == 0, "the three adds made one"


async def test_a_batched_add_of_a_key_to_be_handed_out_adds_nothing() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add_batched("a", 0.01)  # the waiting key's reconcile reads the change
    assert await q.get() == "a"
    q.done("a")
    await asyncio.sleep(0.05)
    assert len(q) == 0


async def test_a_batched_add_while_processing_comes_back_after_the_period() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    await q.get()
    q.add_batched("a", 0.05)  # the running reconcile may have read the caches before the change
    q.done("a")
    assert len(q) == 0
    assert await asyncio.wait_for(q.get(), 1) == "a"


async def test_a_batched_add_without_a_period_is_an_add() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_batched("a", 0)
    assert len(q) == 1


async def test_an_add_makes_a_pending_batch_moot_but_not_a_requeue() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add_batched("a", 0.05)
    q.add("a")  # e.g. a Job finished: at once, with the batch's changes
    assert await q.get() == "a"
    q.done("a")
    await asyncio.sleep(0.1)
    assert len(q) == 0, "the batch's timer was cancelled"
    q.add_after("b", 0.05)  # a requeue (a TTL, a deferred status)
    q.add("b")
    assert await q.get() == "b"
    q.done("b")
    assert await asyncio.wait_for(q.get(), 1) == "b", "the requeue's timer stays"
    q.done("b")
    q.add_after("c", 0.05)
    q.add_batched("c", 1)  # an earlier requeue's timer wins and is not a batch's
    q.add("c")
    assert await q.get() == "c"
    q.done("c")
    assert await asyncio.wait_for(q.get(), 1) == "c"


IDLE_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("urgent"), st.integers(0, 5)),
        st.tuples(st.just("idle"), st.integers(0, 5), st.floats(0.0, 3.0)),
        st.tuples(st.just("get")),
        st.tuples(st.just("tick"), st.floats(0.0, 1.5)),
        st.tuples(st.just("release")),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(ops=IDLE_OPS)
async def test_the_idle_lane_releases_exactly_the_keys_past_their_bound_or_not_kept_busy(
    ops: list[tuple[object, ...]],
) -> None:
    """Whatever the order of urgent adds, idle adds, hand-outs and time, a check of the idle lane queues
    exactly the keys whose bound has passed or for which the queue is not busy (:meth:`WorkQueue.busy`),
    and keeps the others with their earliest bound."""
    q: WorkQueue[int] = WorkQueue()
    now = [100.0]
    q.clock = lambda: now[0]
    bounds: dict[int, float] = {}
    for op in ops:
        if op[0] == "urgent":
            q.add(int(str(op[1])), urgent=True)
        elif op[0] == "idle":
            key, at_most = int(str(op[1])), float(str(op[2]))
            bounds[key] = min(bounds.get(key, now[0] + at_most), now[0] + at_most)
            q.add_when_idle(key, at_most)
        elif op[0] == "get" and len(q):
            q.done(await q.get())
        elif op[0] == "tick":
            now[0] += float(str(op[1]))
        elif op[0] == "release":
            going = {k for k, b in bounds.items() if b <= now[0] or not q.busy(k)}
            q._release_idle()
            bounds = {k: b for k, b in bounds.items() if k not in going}
            assert q.idle_waiting() == len(bounds)
            assert q._idle == bounds
    q.shutdown()
