"""The operator process: informers, one work queue per controller, bounded pools of workers.

Two controllers run side by side, TrainJob and MPIJob, each with its own queue and
``max_concurrent_reconciles`` workers (as controller-runtime does per controller). Cache events are
mapped to keys: a child (Job, Service, ConfigMap, Secret, PodGroup) to its controller owner, a
runtime to every TrainJob that references it, a cluster-wide gang object (a Volcano Queue) to every
job. A failed reconcile is retried with per-key exponential backoff.

With a :class:`~trainer.kube.leader.LeaderElector`, the caches start (and :attr:`Manager.ready` is
set) at once, but the workers only once this process leads; a lost Lease cancels the workers at
once and :meth:`Manager.run` raises :class:`~trainer.kube.leader.LeadershipLost`. :meth:`Manager.stop`
is the graceful end (SIGTERM): idle workers stop, in-flight reconciles get ``shutdown_timeout``
seconds to finish, then the Lease is released so a standby takes over at once. Every reconcile is
counted in :class:`~trainer.metrics.Metrics` and logs with its object key bound
(``trainjob=ns/name`` or ``mpijob=ns/name``, and ``controller``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog

from api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainingRuntime
from trainer import gang
from trainer.builders.labels import JOBSET_NAME
from trainer.builders.mpijob import JOB_NAME_LABEL
from trainer.controllers.mpijob import MPIJOBS, MPICaches, MPIJobReconciler
from trainer.controllers.trainjob import Caches, TrainJobReconciler
from trainer.kube.cache import Informer, Key, controller_of, key_of, wait_synced
from trainer.kube.client import (
    CLUSTER_TRAINING_RUNTIMES,
    CONFIGMAPS,
    JOBS,
    JSON,
    SECRETS,
    SERVICES,
    TRAINING_RUNTIMES,
    TRAINJOBS,
    ApiError,
    Kube,
)
from trainer.kube.events import EventRecorder
from trainer.kube.leader import LeaderElector
from trainer.kube.queue import WorkQueue
from trainer.metrics import RESULT_ERROR, RESULT_REQUEUE_AFTER, RESULT_SUCCESS, Metrics

log = structlog.get_logger("trainer.manager")


@dataclass(frozen=True)
class Settings:
    """Operator settings (command-line flags)."""

    namespace: str | None = None
    """Namespace to watch; None watches all."""
    max_concurrent_reconciles: int = 4
    """Reconciles running at once, per controller."""
    gang_scheduler_name: str = "none"
    """The gang scheduler pods are handed to (``--gang-scheduler-name``)."""
    shutdown_timeout: float = 20.0
    """Seconds :meth:`Manager.stop` lets in-flight reconciles finish before cancelling them."""


class Manager:
    """Owns the caches, the queues and the workers of the TrainJob and MPIJob controllers."""

    def __init__(
        self, kube: Kube, settings: Settings, metrics: Metrics | None = None, elector: LeaderElector | None = None
    ) -> None:
        self.kube, self.settings, self.elector = kube, settings, elector
        self.metrics = metrics if metrics is not None else Metrics()
        ns = settings.namespace
        events = EventRecorder(kube)
        self.gang = gang.get(settings.gang_scheduler_name)
        self.gang_informers = {r: Informer(kube, r, ns if r.namespaced else None) for r in self.gang.watches}
        self.caches = Caches(
            trainjobs=Informer(kube, TRAINJOBS, ns),
            runtimes=Informer(kube, TRAINING_RUNTIMES, ns),
            cluster_runtimes=Informer(kube, CLUSTER_TRAINING_RUNTIMES),
            jobs=Informer(kube, JOBS, ns, label_selector=JOBSET_NAME),
            services=Informer(kube, SERVICES, ns, label_selector=JOBSET_NAME),
            configmaps=Informer(kube, CONFIGMAPS, ns, label_selector=JOBSET_NAME),
            secrets=Informer(kube, SECRETS, ns, label_selector=JOBSET_NAME),
            gang=self.gang_informers,
        )
        self.mpi_caches = MPICaches(
            mpijobs=Informer(kube, MPIJOBS, ns),
            jobs=Informer(kube, JOBS, ns, label_selector=JOB_NAME_LABEL),
            services=Informer(kube, SERVICES, ns, label_selector=JOB_NAME_LABEL),
            configmaps=Informer(kube, CONFIGMAPS, ns, label_selector=JOB_NAME_LABEL),
            secrets=Informer(kube, SECRETS, ns, label_selector=JOB_NAME_LABEL),
            facts=self.caches.facts(),
        )
        self.queues: dict[str, WorkQueue[Key]] = {
            kind: WorkQueue(metrics=self.metrics.workqueue(kind.lower())) for kind in ("TrainJob", "MPIJob")
        }
        for kind in self.queues:
            self.metrics.controller(kind.lower(), settings.max_concurrent_reconciles)
        self.reconcilers: dict[str, Callable[[Key], Awaitable[float | None]]] = {
            "TrainJob": TrainJobReconciler(kube, self.caches, events, self.gang).reconcile,
            "MPIJob": MPIJobReconciler(kube, self.mpi_caches, events, self.gang).reconcile,
        }
        self.caches.trainjobs.add_handler(self._on_primary("TrainJob"))
        self.mpi_caches.mpijobs.add_handler(self._on_primary("MPIJob"))
        c = self.caches
        children = [c.jobs, c.services, c.configmaps, c.secrets, *self._mpi_children()]
        for informer in children + [i for r, i in self.gang_informers.items() if r.namespaced]:
            informer.add_handler(self._on_child)
        for res, informer in self.gang_informers.items():
            if not res.namespaced:
                informer.add_handler(self._on_cluster_object)
        self.caches.runtimes.add_handler(self._on_runtime)
        self.caches.cluster_runtimes.add_handler(self._on_runtime)
        self.ready = asyncio.Event()
        """Set once the caches are synced (leading or not): ``/readyz``."""
        self._stop = asyncio.Event()
        self._stopping = False
        self._busy: set[asyncio.Task[Any] | None] = set()

    def _mpi_children(self) -> list[Informer]:
        c = self.mpi_caches
        return [c.jobs, c.services, c.configmaps, c.secrets]

    @property
    def informers(self) -> list[Informer]:
        """Every informer, in start order."""
        c = self.caches
        primary = [c.trainjobs, self.mpi_caches.mpijobs]
        return [
            *self.gang_informers.values(),
            c.cluster_runtimes,
            c.runtimes,
            c.jobs,
            c.services,
            *self._mpi_children(),
            *primary,
        ]

    def _on_primary(self, kind: str) -> Callable[[JSON | None, JSON | None], None]:
        def handler(old: JSON | None, new: JSON | None) -> None:
            obj = new or old
            if obj is not None:
                self.queues[kind].add(key_of(obj))

        return handler

    def _on_child(self, old: JSON | None, new: JSON | None) -> None:
        for obj in (old, new):
            ref = controller_of(obj) if obj is not None else None
            if ref and obj is not None and ref.get("kind") in self.queues:
                self.queues[str(ref["kind"])].add((key_of(obj)[0], str(ref["name"])))

    def _on_cluster_object(self, old: JSON | None, new: JSON | None) -> None:
        """A cluster-wide object a gang scheduler reads (e.g. a Volcano Queue) changed: every job may
        depend on it."""
        for kind, informer in (("TrainJob", self.caches.trainjobs), ("MPIJob", self.mpi_caches.mpijobs)):
            for obj in informer.items():
                self.queues[kind].add(key_of(obj))

    def _on_runtime(self, old: JSON | None, new: JSON | None) -> None:
        obj = new or old
        if obj is None:
            return
        ns, name = key_of(obj)
        kind = obj.get("kind", "")
        for tj in self.caches.trainjobs.items():
            ref = (tj.get("spec") or {}).get("runtimeRef") or {}
            ref_kind = ref.get("kind") or ClusterTrainingRuntime.KIND
            if ref.get("name") != name or ref_kind != kind:
                continue
            if kind == TrainingRuntime.KIND and key_of(tj)[0] != ns:
                continue
            self.queues["TrainJob"].add(key_of(tj))

    async def _worker(self, kind: str) -> None:
        queue, reconcile = self.queues[kind], self.reconcilers[kind]
        controller, me = kind.lower(), asyncio.current_task()
        while not self._stopping:
            key = await queue.get()
            if me is not None:
                self._busy.add(me)
            self.metrics.active_workers.labels(controller).inc()
            started = time.monotonic()
            result: str | None = RESULT_ERROR
            structlog.contextvars.bind_contextvars(controller=controller, **{controller: "/".join(key)})
            try:
                requeue = await reconcile(key)
            except asyncio.CancelledError:
                result = None
                raise
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
                    self.metrics.reconciled(controller, result, time.monotonic() - started)
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
        :class:`~trainer.kube.leader.LeadershipLost` if the Lease is lost meanwhile."""
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
        :class:`~trainer.kube.leader.LeadershipLost`): start the caches, wait for their first list,
        wait to lead (with an elector), then run the workers."""
        tasks: list[asyncio.Task[Any]] = [
            asyncio.create_task(i.run(), name=f"informer-{i.res.plural}") for i in self.informers
        ]
        workers: list[asyncio.Task[None]] = []
        lease: asyncio.Task[None] | None = None
        try:
            if not await self._unless_stopped(wait_synced(self.informers)):
                return
            log.info(
                "caches synced",
                trainjobs=len(self.caches.trainjobs.items()),
                mpijobs=len(self.mpi_caches.mpijobs.items()),
            )
            self.ready.set()
            if self.elector is not None:
                if not await self._unless_stopped(self.elector.acquire()):
                    return
                lease = asyncio.create_task(self.elector.keep(), name="lease")
                tasks.append(lease)
            for kind in self.queues:
                workers += [
                    asyncio.create_task(self._worker(kind), name=f"{kind}-worker-{n}")
                    for n in range(self.settings.max_concurrent_reconciles)
                ]
            stop = asyncio.create_task(self._stop.wait(), name="stop")
            tasks.append(stop)
            done, _ = await asyncio.wait([*tasks, *workers], return_when=asyncio.FIRST_COMPLETED)
            if stop in done:
                await self._drain(workers, lease)
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
