"""Rate limiting of status writes.

A JSON merge-patch of ``status.trainerStatus`` (fields the post leaves out are removed, as upstream's
server-side apply does) through the status subresource, at most one per TrainJob per
``--status-write-interval`` seconds: the first post of an idle TrainJob is written at once; later ones
are answered 200 at once and the latest of them is written when the interval has passed. The
reconciler's status writes patch only the keys they own, so neither overwrites the other. Limits are
per operator replica (every replica serves, as upstream).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog

from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import Key
from trainer.framework.kube.client import ApiError

log = structlog.get_logger("trainer.statusserver")


@dataclass
class _Slot:
    last: float = -math.inf
    pending: JSON | None = None
    flusher: asyncio.Task[None] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


Writer = Callable[[Key, JSON], Awaitable[None]]
"""Writes one patch for a TrainJob key; raises what the apiserver answers."""


class WriteLimiter:
    """At most one write per key per ``interval`` seconds; posts in between are coalesced into the
    next write by ``merge(pending, newer)`` (default: the latest wins). ``clock`` (monotonic seconds)
    is for tests."""

    def __init__(
        self,
        write: Writer,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
        merge: Callable[[JSON | None, JSON], JSON] = lambda _older, newer: newer,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"the write interval must be positive, not {interval}")
        self._write, self.interval, self._clock, self._merge = write, interval, clock, merge
        self._slots: dict[Key, _Slot] = {}
        self.writes = 0
        """Writes started so far."""

    async def submit(self, key: Key, patch: JSON) -> bool:
        """Write ``patch`` for ``key`` now if the interval since its last write has passed (True, once
        written; raises what the write raises), else keep it for the next write (False)."""
        slot = self._slots.get(key)
        if slot is None:
            self._prune()
            slot = self._slots[key] = _Slot()
        if slot.flusher is None and self._clock() - slot.last >= self.interval:
            slot.last = self._clock()
            async with slot.lock:
                self.writes += 1
                await self._write(key, patch)
            return True
        slot.pending = self._merge(slot.pending, patch)
        if slot.flusher is None:
            slot.flusher = asyncio.ensure_future(self._flush(key, slot))
        return False

    async def _flush(self, key: Key, slot: _Slot) -> None:
        try:
            while slot.pending is not None:
                wait = slot.last + self.interval - self._clock()
                if wait > 0:
                    await asyncio.sleep(wait)
                patch, slot.pending = slot.pending, None
                slot.last = self._clock()
                async with slot.lock:
                    self.writes += 1
                    try:
                        await self._write(key, patch)
                    except ApiError as e:
                        level = log.debug if e.not_found else log.warning
                        level("trainer status not written", trainjob=f"{key[0]}/{key[1]}", error=str(e))
                    except Exception as e:  # a later post writes again
                        log.warning("trainer status not written", trainjob=f"{key[0]}/{key[1]}", error=repr(e))
        finally:
            slot.flusher = None

    def _prune(self) -> None:
        """Forget keys idle for an interval, once there are many."""
        if len(self._slots) < 1024:
            return
        now = self._clock()
        idle = [k for k, s in self._slots.items() if s.flusher is None and not s.lock.locked()]
        for key in [k for k in idle if now - self._slots[k].last >= self.interval]:
            del self._slots[key]

    async def close(self) -> None:
        """Drop what is pending (posts after a restart write again)."""
        tasks = [s.flusher for s in self._slots.values() if s.flusher is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
