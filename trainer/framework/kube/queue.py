"""A de-duplicating work queue with per-key exponential backoff, as client-go's workqueue behaves.

A key is queued at most once; a key added while it is being processed is queued again when its
processing is done, so one key is never reconciled by two workers at once and no change is lost.
The queue tells an optional :class:`QueueMetrics` what happens, at the points client-go's
``workqueue`` calls its metrics provider (``Add`` after de-duplication, ``Get``, ``Done``, and
``AddRateLimited`` for retries), so ``workqueue_*`` metrics mean what they mean there.

A key may be added as urgent (``add(key, urgent=True)``): urgent keys are handed out before every other
waiting key, first in first out among themselves; a waiting key added again as urgent moves ahead. The
manager adds a primary object that has just appeared as urgent, so that in a burst every new job gets its
children before the status of older ones is counted again (as controller-runtime's priority queue,
sigs.k8s.io/controller-runtime ``pkg/controller/priorityqueue``, hands out higher priorities first).
A key may also wait for the queue to be idle of new keys (:meth:`add_when_idle`): it is queued once no
urgent key waits and none was added for :data:`IDLE_QUIET` seconds (a burst of new jobs is over, as far
as the watch has told), or once its own bound passes. That is how a job's first status waits for the
children of the jobs created with it (:mod:`trainer.jobs.status_writer`); :meth:`busy` tells
whether it should.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)
IDLE_QUIET = 1.0
"""Seconds without a new (urgent) key after which the queue counts as idle of new keys."""


class QueueMetrics(Protocol[K_contra]):
    """What a work queue reports (client-go ``workqueue.queueMetrics``)."""

    def add(self, key: K_contra) -> None:
        """``key`` was queued (it was not already waiting)."""

    def get(self, key: K_contra) -> None:
        """A worker took ``key``."""

    def done(self, key: K_contra) -> None:
        """A worker finished ``key``."""

    def retry(self) -> None:
        """A key was queued again after a failure."""


class _NoMetrics:
    def add(self, key: Hashable) -> None:
        pass

    def get(self, key: Hashable) -> None:
        pass

    def done(self, key: Hashable) -> None:
        pass

    def retry(self) -> None:
        pass


class WorkQueue(Generic[K]):
    """Keys to reconcile. ``add`` is synchronous so that cache handlers can call it."""

    def __init__(
        self,
        base_delay: float = 0.05,
        max_delay: float = 300.0,
        metrics: QueueMetrics[K] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._entries: asyncio.PriorityQueue[tuple[int, int, K]] = asyncio.PriorityQueue()
        """``(0 urgent / 1 not, sequence, key)``; an entry whose key is no longer waiting (it was taken at
        an earlier, urgent entry) is skipped."""
        self._sequence = itertools.count()
        self._waiting: set[K] = set()
        """Keys with an entry in :attr:`_entries` to be handed out."""
        self._urgent: set[K] = set()
        """Keys added as urgent since they were last handed out."""
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._failures: dict[K, int] = {}
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self._batched: set[K] = set()
        """Keys whose pending timer is a batch's (:meth:`add_batched`): an :meth:`add` makes it moot."""
        self.base_delay, self.max_delay = base_delay, max_delay
        self.metrics: QueueMetrics[K] = metrics if metrics is not None else _NoMetrics()
        self.clock = clock
        self._arrivals: deque[tuple[float, K]] = deque(maxlen=2)
        """The last two urgent adds: (clock, key), the newest last."""
        self._idle: dict[K, float] = {}
        """Keys waiting for the queue to be idle of new keys -> the clock at which they go anyway."""
        self._idle_timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._waiting)

    def busy(self, besides: K) -> bool:
        """Whether keys other than ``besides`` are new: added as urgent and not handed out yet, or added
        as urgent less than :data:`IDLE_QUIET` seconds ago (more may be on their way)."""
        if len(self._urgent) - (besides in self._urgent) > 0:
            return True
        now = self.clock()
        return any(now - at < IDLE_QUIET and key != besides for at, key in self._arrivals)

    def add_when_idle(self, key: K, at_most: float) -> None:
        """Queue ``key`` once no other key is new (:meth:`busy` says False for it), checked every
        :data:`IDLE_QUIET` seconds, or after ``at_most`` seconds, whichever comes first (an earlier
        bound of a key already waiting so stays)."""
        deadline = self.clock() + at_most
        self._idle[key] = min(self._idle.get(key, deadline), deadline)
        if self._idle_timer is None:
            self._idle_timer = asyncio.get_running_loop().call_later(IDLE_QUIET, self._release_idle)

    def idle_waiting(self) -> int:
        """Keys waiting for the queue to be idle of new keys (:meth:`add_when_idle`)."""
        return len(self._idle)

    def _release_idle(self) -> None:
        self._idle_timer = None
        now = self.clock()
        for key, deadline in list(self._idle.items()):
            if deadline <= now or not self.busy(key):
                del self._idle[key]
                self.add(key)
        if self._idle:
            self._idle_timer = asyncio.get_running_loop().call_later(IDLE_QUIET, self._release_idle)

    def add(self, key: K, urgent: bool = False) -> None:
        """Queue ``key`` unless it is already waiting; ``urgent``: ahead of every key that is not (a
        waiting key moves ahead). A pending batch timer of ``key`` is cancelled: the reconcile this add
        brings reads the batch's changes (a timer of :meth:`add_after` stays)."""
        if key in self._batched:
            self._batched.discard(key)
            pending = self._timers.pop(key, None)
            if pending is not None:
                pending.cancel()
        if urgent:
            self._arrivals.append((self.clock(), key))
        if urgent and key not in self._urgent:
            self._urgent.add(key)
            if key in self._waiting:
                self._push(key)
        if key in self._dirty:
            return
        self.metrics.add(key)
        self._dirty.add(key)
        if key not in self._processing:
            self._push(key)

    def _push(self, key: K) -> None:
        self._waiting.add(key)
        self._entries.put_nowait((0 if key in self._urgent else 1, next(self._sequence), key))

    def add_after(self, key: K, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds (an earlier pending timer for it wins)."""
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        pending = self._timers.get(key)
        if pending is not None and pending.when() <= loop.time() + delay:
            return
        if pending is not None:
            pending.cancel()
        self._batched.discard(key)
        self._timers[key] = loop.call_later(delay, self._fire, key)

    def add_batched(self, key: K, period: float) -> None:
        """Queue ``key`` within ``period`` seconds, once for every batched add of it meanwhile (k8s.io/kubernetes
        ``pkg/controller/job/job_controller.go`` batches the pod updates of a Job the same way): nothing when
        ``key`` is already to be handed out (waiting, or added again while processing), for that reconcile
        reads the caches as they are then; else after ``period`` unless a timer for it fires sooner.
        ``period`` <= 0 is :meth:`add`."""
        if period <= 0:
            self.add(key)
        elif key not in self._dirty:
            pending = self._timers.get(key)
            self.add_after(key, period)
            if self._timers.get(key) is not pending:  # this batch's timer, not an earlier one
                self._batched.add(key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self._batched.discard(key)
        self.add(key)

    def add_rate_limited(self, key: K) -> float:
        """Queue ``key`` after its backoff (base * 2^failures, capped); returns the delay used."""
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        self.metrics.retry()
        delay = float(min(self.base_delay * (2**n), self.max_delay))
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """Reset the backoff of ``key`` after a success."""
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        """How many times in a row ``key`` failed."""
        return self._failures.get(key, 0)

    async def get(self) -> K:
        """The next key (urgent ones first); it counts as processing until :meth:`done`."""
        while True:
            _, _, key = await self._entries.get()
            if key in self._waiting:
                break
        self._waiting.discard(key)
        self._urgent.discard(key)
        self._dirty.discard(key)
        self._processing.add(key)
        self.metrics.get(key)
        return key

    def done(self, key: K) -> None:
        """Mark ``key`` processed; queue it again if it was added meanwhile."""
        self._processing.discard(key)
        self.metrics.done(key)
        if key in self._dirty:
            self._push(key)

    def shutdown(self) -> None:
        """Cancel pending timers."""
        for timer in self._timers.values():
            timer.cancel()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        self._timers.clear()
        self._batched.clear()
