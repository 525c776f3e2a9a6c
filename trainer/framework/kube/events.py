"""Kubernetes Events about the objects the operator manages (``kubectl describe``, ``kubectl events``
and the kubeflow SDK's ``get_job_events`` show them), with client-go's series for repeats, written
in the background so that recording one never holds up a reconcile.

As client-go's recorders (k8s.io/client-go ``tools/events/event_broadcaster.go`` and
``tools/record/event.go``: a broadcaster whose queue holds ``maxQueuedEvents`` = 1000 and drops what
comes when it is full, ``watch.DropIfChannelFull``, written to the apiserver by goroutines of its own),
:meth:`EventRecorder.emit` only queues and returns: no await, no error. Up to ``senders`` writes
run at once (:data:`SENDERS` unless given; the manager gives one per reconcile worker, since each
reconcile's status write may queue one), from the sender tasks of :meth:`EventRecorder.run` (started
and stopped with the manager); the queue holds at most :data:`QUEUE_SIZE` writes, and an Event that finds it full is
dropped and counted (``kubeflow_trainer_events_dropped_total``, given as ``dropped``).
:meth:`EventRecorder.flush` writes what is queued, within a bound (the manager's shutdown).

So what holds is client-go's: an Event is queued before the call that records it returns (the status
writer queues a transition's Event once the status that records it is stored), and written shortly
after, in the order queued for each series; one that finds the queue full, or that the apiserver
refuses, is lost (an event is never worth a retry). Whoever reads a new condition may find its Event
only a moment later.

Repeats follow k8s.io/client-go ``tools/events`` (``event_broadcaster.go`` ``recordToSink``,
``refreshExistingEventSeries``, ``finishSeries``; ``event_recorder.go`` ``makeEvent``): the first
occurrence of an event is created; the second turns it into a series (``series.count: 2``,
``series.lastObservedTime``) with one patch; later repeats only count in memory, and the series is
patched every :data:`SERIES_REFRESH` seconds (client-go: 30 min) and once more when it ends (no repeat
for :data:`SERIES_FINISH` seconds; client-go: 6 min). So a repeating event costs at most two writes,
then one per refresh, however often it repeats. The series state is kept in memory when the event is
queued, not when it is written, and each series is in the queue at most once and written by one sender
at a time: a repeat that comes before its Event is created is folded into the create (which then
carries the series), one that comes while a write is in flight is written after it.

The Event is written through the ``core/v1`` API with both shapes filled in, as the apiserver accepts
for that version: the ``events.k8s.io`` fields (``eventTime``, ``series``, ``action``,
``reportingComponent``, ``reportingInstance``) and the legacy ones that older readers need
(``firstTimestamp``, ``lastTimestamp``, ``count``, ``source.component``; the kubeflow SDK skips an
event without ``firstTimestamp``, which an ``events.k8s.io/v1`` create may not set). Repeats are
matched on the message too (client-go matches on regarding, action, reason, reporting controller), so
two different messages never fold into one.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from trainer.api.kinds import EVENTS
from trainer.framework.bounded import BoundedDict
from trainer.framework.clock import now_micro, now_rfc3339
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError, KubeClient
from trainer.framework.meta import meta
from trainer.framework.permissions import Permission

log = structlog.get_logger("trainer.events")
COMPONENT = "trainer"
"""``reportingComponent`` and ``source.component`` of every Event."""
SERIES_REFRESH = 30 * 60.0
"""Seconds between patches of a series that keeps repeating (client-go's ``refreshTime``)."""
SERIES_FINISH = 6 * 60.0
"""Seconds without a repeat after which a series ends (client-go's ``finishTime``)."""
QUEUE_SIZE = 1000
"""Writes waiting at most (client-go's ``maxQueuedEvents``); an Event beyond is dropped."""
SENDERS = 4
"""Events written at once unless the recorder is given another number."""
DROPS_LOGGED_EVERY = 10.0
"""Seconds between two log lines about Events dropped (each line says how many since the last)."""
MAX_CACHED = 10_000
NOTE_LIMIT = 1024
"""The apiserver refuses a longer ``note`` (1 kB)."""
PERMISSIONS = (Permission(EVENTS, ("create", "patch"), "events; a repeat patches its series"),)

Ident = tuple[str, str, str, str, str]
"""What makes two events the same series: the object's uid, type, reason, action and note."""


@dataclass(eq=False)
class _Recorded:
    """An Event this process queued or wrote, and what it knows of its series since."""

    ident: Ident
    namespace: str
    name: str
    count: int
    """Occurrences so far (in memory)."""
    last_observed: str
    seen: float
    """Monotonic time of the last occurrence."""
    written: float
    """Monotonic time of the last write (the create, or a series patch)."""
    event: JSON | None = field(default=None, repr=False)
    """The Event to create, until it is created (then None)."""
    stored: int = 0
    """The count the apiserver has: 0 until the Event is created."""
    queued: bool = False
    """In the queue or being written (then not queued again)."""

    @property
    def urgent(self) -> bool:
        """Written as soon as a sender is free: not created yet, or repeated and not yet a series."""
        return self.stored == 0 or (self.stored == 1 and self.count > 1)

    @property
    def dirty(self) -> bool:
        """Created, and its in-memory count is ahead of the stored series (for the next refresh)."""
        return 0 < self.stored < self.count


class EventRecorder:
    """Queues Events and writes them in the background (see the module docstring). Failures are
    logged, never raised. ``clock`` is the monotonic clock (a test's); ``queue_size`` and ``senders``
    bound the queue and the writes at once; ``dropped`` is called with the number of Events dropped
    (never written: the queue was full, or :meth:`flush` ran out of time)."""

    def __init__(
        self,
        kube: KubeClient,
        instance: str | None = None,
        clock: Any = time.monotonic,
        *,
        queue_size: int = QUEUE_SIZE,
        senders: int = SENDERS,
        dropped: Callable[[float], None] | None = None,
    ) -> None:
        self.kube = kube
        self.instance = (instance or socket.gethostname())[:128]
        """``reportingInstance``: this replica (the pod's host name)."""
        self._clock = clock
        self._recorded: BoundedDict[Ident, _Recorded] = BoundedDict(MAX_CACHED)
        self._queue: asyncio.Queue[_Recorded] = asyncio.Queue(max(1, queue_size))
        self.senders = max(1, senders)
        self._slots = asyncio.Semaphore(self.senders)
        """Writes in flight at most, whoever sends them (:meth:`run`'s senders, :meth:`flush`)."""
        self._dropped = dropped
        self._unlogged, self._logged_at = 0, float("-inf")
        """Drops not yet logged, and when drops were last logged (one line per interval at most)."""

    @property
    def queued(self) -> int:
        """Writes queued, not yet taken by a sender."""
        return self._queue.qsize()

    def emit(self, obj: JSON, type_: str, reason: str, message: str, action: str | None = None) -> None:
        """Queue an event of ``type_`` (``Normal``/``Warning``) with ``reason`` about ``obj``;
        ``action`` (what the operator did or failed to do) defaults to ``reason``. Returns at once."""
        m = meta(obj)
        namespace = m.namespace or "default"
        note = message[:NOTE_LIMIT]
        action = (action or reason)[:128]
        ident = (str(m.uid), type_, reason, action, note)
        now = self._clock()
        seen = self._recorded.get(ident)
        if seen is not None:
            seen.count, seen.last_observed, seen.seen = seen.count + 1, now_micro(), now
            if seen.urgent:
                self._enqueue(seen)  # else counted in memory, written by a refresh
            return
        name = f"{m.name}.{uuid.uuid4().hex[:16]}"
        stamp = now_rfc3339()
        event: JSON = {
            "apiVersion": EVENTS.api_version,
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": now_micro(),
            "reportingComponent": COMPONENT,
            "reportingInstance": self.instance,
            "action": action,
            "reason": reason,
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": m.name,
                "namespace": m.namespace,
                "uid": m.uid,
                "resourceVersion": m.resource_version,
            },
            "message": note,
            "type": type_,
            "source": {"component": COMPONENT},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        recorded = _Recorded(ident, namespace, name, 1, event["eventTime"], now, now, event)
        if self._enqueue(recorded):
            self._recorded[ident] = recorded

    def _enqueue(self, recorded: _Recorded) -> bool:
        """Queue ``recorded`` for a write unless it is queued already; False when the queue is full (an
        Event not yet created is then dropped and counted; a series waits for the next refresh)."""
        if recorded.queued:
            return True
        try:
            self._queue.put_nowait(recorded)
        except asyncio.QueueFull:
            if recorded.stored == 0:
                self._count_dropped(1)
                self._unlogged += 1
                now = self._clock()
                if now - self._logged_at >= DROPS_LOGGED_EVERY:
                    log.warning("events dropped: the queue is full", dropped=self._unlogged, queued=self._queue.qsize())
                    self._unlogged, self._logged_at = 0, now
            return False
        recorded.queued = True
        return True

    def _count_dropped(self, events: int) -> None:
        if self._dropped is not None and events:
            self._dropped(events)

    def _tracked(self, recorded: _Recorded) -> bool:
        """Whether ``recorded`` is still the series of its ident (not forgotten, ended or evicted)."""
        return self._recorded.get(recorded.ident) is recorded

    def _forget(self, recorded: _Recorded) -> None:
        if self._tracked(recorded):
            self._recorded.pop(recorded.ident, None)

    async def _write(self, recorded: _Recorded) -> None:
        """Create ``recorded``'s Event (with its series when it repeated meanwhile) or patch its series
        with the count now; then queue it again when a repeat made it urgent meanwhile. Never raises but
        ``CancelledError``."""
        count, observed = recorded.count, recorded.last_observed
        reason = recorded.ident[2]
        try:
            if recorded.event is not None:
                event = recorded.event
                if count > 1:
                    event.update(_series(count, observed))
                await self.kube.create(EVENTS, recorded.namespace, event)
                recorded.event = None
            else:
                await self.kube.merge_patch(EVENTS, recorded.namespace, recorded.name, _series(count, observed))
            recorded.stored, recorded.written = count, self._clock()
        except ApiError as e:
            if recorded.stored == 0 or e.not_found:
                self._forget(recorded)  # not created, or the Event expired: the next one starts anew
            if not e.namespace_terminating:
                log.warning("event not recorded", reason=reason, error=str(e))
        except Exception as e:
            if recorded.stored == 0:
                self._forget(recorded)
            log.warning("event not recorded", reason=reason, error=repr(e))
        finally:
            recorded.queued = False
        if recorded.urgent and recorded.stored and self._tracked(recorded):
            self._enqueue(recorded)  # repeated while it was written: now a series

    async def _send(self, recorded: _Recorded) -> None:
        """Write one queued item within the bound of writes at once, and mark it done."""
        try:
            async with self._slots:
                await self._write(recorded)
        finally:
            self._queue.task_done()

    async def _sender(self) -> None:
        while True:
            await self._send(await self._queue.get())

    def refresh(self) -> None:
        """Queue the count of each series that repeated since its last write, when that write is
        :data:`SERIES_REFRESH` seconds old or the series has ended (no repeat for
        :data:`SERIES_FINISH` seconds), and forget ended series (client-go's
        ``refreshExistingEventSeries`` and ``finishSeries``); the senders write them."""
        now = self._clock()
        for ident, seen in list(self._recorded.items()):
            ended = now - seen.seen >= SERIES_FINISH
            if seen.dirty and (ended or now - seen.written >= SERIES_REFRESH):
                self._enqueue(seen)
            if ended:
                self._recorded.pop(ident, None)

    async def flush(self, timeout: float | None = None) -> int:
        """Write what is queued now and what those writes queue again, at most :attr:`senders` writes
        at once (with :meth:`run`'s senders, if they run), and wait for the writes in flight; at most
        ``timeout`` seconds (None: no bound). Returns the Events left unwritten (queued, never created)
        when the time ran out: dropped, logged and counted."""

        async def drain() -> None:
            async def one() -> None:
                while True:
                    try:
                        recorded = self._queue.get_nowait()
                    except asyncio.QueueEmpty:
                        return
                    await self._send(recorded)

            await asyncio.gather(*(one() for _ in range(self.senders)))
            await self._queue.join()

        try:
            await asyncio.wait_for(drain(), timeout)
        except TimeoutError:
            left = 0
            while not self._queue.empty():
                recorded = self._queue.get_nowait()
                recorded.queued = False
                if recorded.stored == 0:
                    left += 1
                    self._forget(recorded)
                self._queue.task_done()
            self._count_dropped(left)
            log.warning("events not written in time", dropped=left, seconds=timeout)
            return left
        return 0

    async def run(self, interval: float = SERIES_FINISH) -> None:
        """Write queued events with :attr:`senders` tasks, and call :meth:`refresh` every ``interval``
        seconds, until cancelled (the writes in flight are cancelled too: :meth:`flush` first to
        finish them)."""
        senders = [asyncio.create_task(self._sender(), name=f"event-sender-{n}") for n in range(self.senders)]
        try:
            while True:
                await asyncio.sleep(interval)
                self.refresh()
        finally:
            for task in senders:
                task.cancel()
            for task in senders:
                with contextlib.suppress(asyncio.CancelledError):
                    await task


def _series(count: int, observed: str) -> JSON:
    """The fields of an Event that say it happened ``count`` times, the last at ``observed`` (a
    MicroTime): the ``events.k8s.io`` series and the legacy count."""
    return {
        "series": {"count": count, "lastObservedTime": observed},
        "count": count,
        "lastTimestamp": observed[:19] + "Z",
    }
