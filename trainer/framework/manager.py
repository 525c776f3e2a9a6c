"""The operator process: the controllers' informers, queues and bounded pools of workers, all derived
from the controllers' declarations (:mod:`trainer.framework.controller`).

Each declared cache (resource, label and field selectors, what it keeps: a
:class:`~trainer.framework.controller.Source`) gets one informer, shared between controllers; each controller gets
a work queue and ``max_concurrent_reconciles`` workers (as controller-runtime does per controller),
its metrics, and a :class:`~trainer.framework.controller.Reader` over the informers it declared. Cache events
become keys: a primary's own key; an owned object's controller owner when that owner is of the
controller's primary kind; a watched object's keys through the declaration's map function. A failed
reconcile is retried with per-key exponential backoff; a :class:`~trainer.framework.controller.TerminalError`
is counted and not retried. Nothing is started that is not declared, and everything declared is
started: :attr:`Manager.informers` is the one list.

With a :class:`~trainer.framework.kube.leader.LeaderElector`, the caches start (and :attr:`Manager.ready` is
set) at once, but the workers only once this process leads; a lost Lease cancels the workers at
once and :meth:`Manager.run` raises :class:`~trainer.framework.kube.leader.LeadershipLost`. The controllers
then write through :attr:`Manager.writer`, fenced by the elector's renew deadline: a write refused
(:class:`~trainer.framework.kube.leader.FencedWrite`) is never sent and ends :meth:`Manager.run` the same way.
Readiness (:meth:`Manager.not_ready`, ``/readyz``) needs every cache listed and watched now. :meth:`Manager.stop`
is the graceful end (SIGTERM): idle workers stop, in-flight reconciles get ``shutdown_timeout``
seconds to finish, the Events they queued are written (:meth:`~trainer.framework.kube.events.EventRecorder.flush`,
in what is left of that time, at least :data:`EVENTS_FLUSH_AT_LEAST` seconds), then the Lease is
released so a standby takes over at once. The recorder's senders run from the start, as the caches do
(:meth:`~trainer.framework.kube.events.EventRecorder.run`). Every reconcile is
counted in :class:`~trainer.framework.metrics.Metrics` and logs with its object key bound
(``trainjob=ns/name`` or ``mpijob=ns/name``, and ``controller``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

import structlog

from trainer.api.kinds import Resource
from trainer.framework.controller import (
    Context,
    Controller,
    EventFilter,
    MapFn,
    Owns,
    Reader,
    Reconcile,
    Source,
    TerminalError,
    UndeclaredRead,
)
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import Handler, Informer, Key, key_of, owner_keys, wait_synced
from trainer.framework.kube.client import ApiError, KubeClient
from trainer.framework.kube.events import EventRecorder
from trainer.framework.kube.leader import LeaderElector, LeadershipLost
from trainer.framework.kube.projection import projection
from trainer.framework.kube.queue import WorkQueue
from trainer.framework.metrics import RESULT_ERROR, RESULT_REQUEUE_AFTER, RESULT_SUCCESS, Metrics

log = structlog.get_logger("trainer.framework.manager")
EVENTS_FLUSH_AT_LEAST = 1.0
"""Seconds the Events queued by the last reconciles get at least at a graceful stop."""


DEFAULT_MAX_CONCURRENT_RECONCILES = 16
"""Reconciles running at once per controller unless ``--max-concurrent-reconciles`` says otherwise."""


@dataclass(frozen=True, kw_only=True)
class ManagerOptions:
    """What the manager itself needs of the operator's settings (no kind's)."""

    namespace: str | None = None
    """Namespace to watch; None watches all."""
    max_concurrent_reconciles: int = DEFAULT_MAX_CONCURRENT_RECONCILES
    """Reconciles running at once, per controller; as many Events are written at once (each reconcile's
    status write may queue one: :class:`~trainer.framework.kube.events.EventRecorder`'s ``senders``)."""
    shutdown_timeout: float = 20.0
    """Seconds :meth:`Manager.stop` lets in-flight reconciles finish before cancelling them."""
    children_batch_seconds: float = 1.0
    """Seconds the changes of a job's children are gathered before the job is reconciled for them
    (``--children-batch-seconds``; :meth:`~trainer.framework.kube.queue.WorkQueue.add_batched`); 0: at once."""


class Manager:
    """Owns the informers, the queues and the workers of the declared controllers."""

    def __init__(
        self,
        kube: KubeClient,
        settings: ManagerOptions,
        controllers: list[Controller],
        *,
        metrics: Metrics | None = None,
        elector: LeaderElector | None = None,
    ) -> None:
        self.kube, self.settings, self.elector = kube, settings, elector
        self.metrics = metrics if metrics is not None else Metrics()
        self.controllers = controllers
        self.writer = kube.fenced(elector.check_write) if elector is not None else kube
        """What the controllers and their Events write through: ``kube``, fenced by the elector if any."""
        events = self.events = EventRecorder(
            self.writer, senders=settings.max_concurrent_reconciles, dropped=self.metrics.events_dropped.inc
        )
        self._informers: dict[Source, Informer] = {}
        self.readers: dict[str, Reader] = {}
        self.queues: dict[str, WorkQueue[Key]] = {}
        self.reconcilers: dict[str, Reconcile] = {}
        for c in self.controllers:
            sources = c.sources()
            stores = {s.resource: self._informer(s) for s in sources}
            reader = self.readers[c.name] = Reader(c.name, dict(stores), {s.resource: s.keep for s in sources})
            queue = self.queues[c.name] = WorkQueue(metrics=self.metrics.workqueue(c.name))
            self.metrics.controller(c.name, settings.max_concurrent_reconciles)
            stores[c.for_].add_handler(_enqueue_primary(queue, c.for_, c.event_filter))
            batch = settings.children_batch_seconds
            for owned in c.owns:
                handler = _enqueue_owner(queue, c.for_, owned, batch, c.event_filter)
                stores[owned.resource].add_handler(handler)
            for watched in c.watches:
                stores[watched.resource].add_handler(_enqueue_mapped(queue, watched.to_keys, reader))
            context = Context(kube=self.writer, reader=reader, events=events, metrics=self.metrics, queue=queue)
            self.reconcilers[c.name] = c.build(context)
        self.ready = asyncio.Event()
        """Set once the caches are synced (leading or not); see :meth:`not_ready` for ``/readyz``."""
        self._stop = asyncio.Event()
        self._stopping = False
        self._busy: set[asyncio.Task[Any] | None] = set()

    def _informer(self, source: Source) -> Informer:
        if source not in self._informers:
            res = source.resource
            namespace = self.settings.namespace if res.namespaced else None
            self._informers[source] = Informer(
                self.kube,
                res,
                namespace,
                label_selector=source.label,
                field_selector=source.field_selector,
                transform=projection(source.keep),
                index=source.index_by,
                optional=source.optional,
            )
        return self._informers[source]

    @property
    def informers(self) -> list[Informer]:
        """Every informer the declarations name, each once: exactly what :meth:`run` starts."""
        return list(self._informers.values())

    def not_ready(self) -> str | None:
        """Why this process is not ready (``/readyz``), None when it is: ready once every cache has
        listed, and while every one is watched (:attr:`~trainer.framework.kube.cache.Informer.healthy`; a watch
        that ends normally and is reopened stays healthy, a failed one is not until it lists again),
        leading or not. The reason names the caches: ``not synced: <names>`` before the first sync,
        ``not watching: <names>`` after."""
        if not self.ready.is_set():
            names = [i.name for i in self.informers if not i.synced.is_set()]
            return "not synced: " + (", ".join(names) or "starting")
        names = [i.name for i in self.informers if not i.healthy]
        return "not watching: " + ", ".join(names) if names else None

    async def _worker(self, controller: str) -> None:
        queue, reconcile = self.queues[controller], self.reconcilers[controller]
        me = asyncio.current_task()
        while not self._stopping:
            key = await queue.get()
            if me is not None:
                self._busy.add(me)
            self.metrics.active_workers.labels(controller).inc()
            started = time.monotonic()
            result: str | None = RESULT_ERROR
            terminal = False
            structlog.contextvars.bind_contextvars(controller=controller, **{controller: "/".join(key)})
            try:
                requeue = await reconcile(key)
            except asyncio.CancelledError:
                result = None
                raise
            except LeadershipLost:  # a fenced write: this process may write no more; run() ends
                raise
            except (TerminalError, UndeclaredRead) as e:
                terminal = True
                queue.forget(key)
                log.error("reconcile failed; not retrying", error=str(e), terminal=True)
            except ApiError as e:
                if e.namespace_terminating:
                    queue.forget(key)
                    log.debug("namespace terminating, not retrying")
                else:
                    delay = queue.add_rate_limited(key)
                    log.warning("reconcile failed", error=str(e), retry_in=round(delay, 3))
            except Exception as e:
                delay = queue.add_rate_limited(key)
                log.exception("reconcile failed", error=repr(e), retry_in=round(delay, 3))
            else:
                result = RESULT_REQUEUE_AFTER if requeue else RESULT_SUCCESS
                queue.forget(key)
                if requeue:
                    queue.add_after(key, requeue)
                log.debug("reconciled", seconds=round(time.monotonic() - started, 4))
            finally:
                queue.done(key)
                if result is not None:
                    self.metrics.reconciled(controller, result, time.monotonic() - started, terminal)
                self.metrics.active_workers.labels(controller).dec()
                self._busy.discard(me)
                structlog.contextvars.clear_contextvars()

    def stop(self) -> None:
        """Ask :meth:`run` to end gracefully (see the module docstring); safe from a signal handler."""
        self._stop.set()

    async def _unless_stopped(self, aw: Awaitable[Any]) -> bool:
        """Await ``aw``; False (``aw`` cancelled) if :meth:`stop` came first. Raises what ``aw`` raises."""
        task, stop = asyncio.ensure_future(aw), asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (task, stop):
                if not t.done():
                    t.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await t
        if task.cancelled():
            return False
        task.result()
        return True

    async def _drain(self, workers: list[asyncio.Task[None]], lease: asyncio.Task[None] | None) -> None:
        """Stop idle workers; give busy ones ``shutdown_timeout`` to finish their reconcile. Raises
        :class:`~trainer.framework.kube.leader.LeadershipLost` if the Lease is lost meanwhile."""
        self._stopping = True
        busy = {t for t in workers if t in self._busy}
        for t in workers:
            if t not in busy:
                t.cancel()
        log.info("stopping: waiting for in-flight reconciles", in_flight=len(busy))
        deadline = time.monotonic() + self.settings.shutdown_timeout
        while busy:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                log.warning("shutdown timeout: cancelling in-flight reconciles", in_flight=len(busy))
                return
            waits: set[asyncio.Task[None]] = busy | ({lease} if lease is not None else set())
            done, _ = await asyncio.wait(waits, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            if lease is not None and lease in done:
                lease.result()
            busy -= done

    async def run(self) -> None:
        """Run until cancelled, until :meth:`stop`, or until leadership is lost (raises
        :class:`~trainer.framework.kube.leader.LeadershipLost`): start the caches, wait for their first list,
        wait to lead (with an elector), then run the workers."""
        tasks: list[asyncio.Task[Any]] = [
            asyncio.create_task(i.run(), name=f"informer-{i.res.plural}") for i in self.informers
        ]
        tasks.append(asyncio.create_task(self.events.run(), name="events"))
        workers: list[asyncio.Task[None]] = []
        lease: asyncio.Task[None] | None = None
        try:
            if not await self._unless_stopped(wait_synced(self.informers)):
                return
            log.info(
                "caches synced", **{c.name + "s": len(self.readers[c.name].items(c.for_)) for c in self.controllers}
            )
            self.ready.set()
            if self.elector is not None:
                if not await self._unless_stopped(self.elector.acquire()):
                    return
                lease = asyncio.create_task(self.elector.keep(), name="lease")
                tasks.append(lease)
            for name in self.queues:
                workers += [
                    asyncio.create_task(self._worker(name), name=f"{name}-worker-{n}")
                    for n in range(self.settings.max_concurrent_reconciles)
                ]
            stop = asyncio.create_task(self._stop.wait(), name="stop")
            tasks.append(stop)
            done, _ = await asyncio.wait([*tasks, *workers], return_when=asyncio.FIRST_COMPLETED)
            if stop in done:
                stopping = time.monotonic()
                await self._drain(workers, lease)
                left = self.settings.shutdown_timeout - (time.monotonic() - stopping)
                await self.events.flush(max(left, EVENTS_FLUSH_AT_LEAST))
                return
            for t in done:
                t.result()  # the Lease was lost (LeadershipLost), or a bug ended a task
            raise RuntimeError(f"manager task ended: {', '.join(t.get_name() for t in done)}")
        finally:
            for queue in self.queues.values():
                queue.shutdown()
            for t in [*workers, *tasks]:
                t.cancel()
            for t in [*workers, *tasks]:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
            if self.elector is not None:
                await self.elector.release()


def _enqueue_primary(queue: WorkQueue[Key], primary: Resource, accepts: EventFilter | None) -> Handler:
    """Enqueue a changed primary that the controller's event filter accepts; one that has just appeared
    is urgent (its children are to be made)."""

    def handler(old: JSON | None, new: JSON | None) -> None:
        if accepts is not None and not accepts(primary, old, new):
            return
        obj = new or old
        if obj is not None:
            queue.add(key_of(obj), urgent=old is None and new is not None)

    return handler


def _enqueue_owner(
    queue: WorkQueue[Key], primary: Resource, owns: Owns, batch: float, accepts: EventFilter | None
) -> Handler:
    """Enqueue the controller owner of a changed ``owned`` object that the controller's event filter
    accepts (:func:`~trainer.framework.kube.cache.owner_keys`: both the old and the new owner, should the
    reference have changed), within ``batch`` seconds together with the other changes of its children
    meanwhile (:meth:`~trainer.framework.kube.queue.WorkQueue.add_batched`). A change the declaration calls
    urgent (:attr:`~trainer.framework.controller.Owns.urgent`: a Job that has just finished) brings its
    owner's reconcile at once."""
    owned, urgent = owns.resource, owns.urgent

    def handler(old: JSON | None, new: JSON | None) -> None:
        if accepts is not None and not accepts(owned, old, new):
            return
        finished = urgent is not None and new is not None and urgent(old, new)
        for key in owner_keys(primary, old, new):
            if finished:
                queue.add(key)
            else:
                queue.add_batched(key, batch)

    return handler


def _enqueue_mapped(queue: WorkQueue[Key], to_keys: MapFn, reader: Reader) -> Handler:
    def handler(old: JSON | None, new: JSON | None) -> None:
        obj = new or old
        if obj is not None:
            for key in to_keys(obj, reader):
                queue.add(key)

    return handler
