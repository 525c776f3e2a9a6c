"""The operator process: informers, the work queue and a bounded pool of reconcile workers.

Events from the caches are mapped to TrainJob keys (a child Job or Service to its controller owner,
a runtime to every TrainJob that references it) and queued; ``max_concurrent_reconciles`` workers
take keys off the queue. A failed reconcile is retried with per-key exponential backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

import structlog

from api.trainer_v1alpha1 import ClusterTrainingRuntime, TrainingRuntime
from trainer import gang
from trainer.builders.labels import JOBSET_NAME
from trainer.controllers.trainjob import Caches, TrainJobReconciler
from trainer.kube.cache import Informer, Key, controller_of, key_of, wait_synced
from trainer.kube.client import (
    CLUSTER_TRAINING_RUNTIMES,
    JOBS,
    JSON,
    SERVICES,
    TRAINING_RUNTIMES,
    TRAINJOBS,
    ApiError,
    Kube,
)
from trainer.kube.events import EventRecorder
from trainer.kube.queue import WorkQueue

log = structlog.get_logger("trainer.manager")


@dataclass(frozen=True)
class Settings:
    """Operator settings (command-line flags)."""

    namespace: str | None = None
    """Namespace to watch; None watches all."""
    max_concurrent_reconciles: int = 4
    """Reconciles running at once."""
    gang_scheduler_name: str = "none"
    """The gang scheduler pods are handed to (``--gang-scheduler-name``)."""


class Manager:
    """Owns the caches, the queue and the workers of the TrainJob controller."""

    def __init__(self, kube: Kube, settings: Settings) -> None:
        self.kube, self.settings = kube, settings
        ns = settings.namespace
        self.caches = Caches(
            trainjobs=Informer(kube, TRAINJOBS, ns),
            runtimes=Informer(kube, TRAINING_RUNTIMES, ns),
            cluster_runtimes=Informer(kube, CLUSTER_TRAINING_RUNTIMES),
            jobs=Informer(kube, JOBS, ns, label_selector=JOBSET_NAME),
            services=Informer(kube, SERVICES, ns, label_selector=JOBSET_NAME),
        )
        self.gang = gang.get(settings.gang_scheduler_name)
        for res in self.gang.watches:
            informer = Informer(kube, res, ns if res.namespaced else None)
            informer.add_handler(self._on_child if res.namespaced else self._on_cluster_object)
            self.caches.gang[res] = informer
        self.queue: WorkQueue[Key] = WorkQueue()
        self.reconciler = TrainJobReconciler(kube, self.caches, EventRecorder(kube), self.gang)
        self.caches.trainjobs.add_handler(self._on_trainjob)
        self.caches.jobs.add_handler(self._on_child)
        self.caches.services.add_handler(self._on_child)
        self.caches.runtimes.add_handler(self._on_runtime)
        self.caches.cluster_runtimes.add_handler(self._on_runtime)
        self.ready = asyncio.Event()

    @property
    def informers(self) -> list[Informer]:
        """Every informer, in start order."""
        c = self.caches
        return [*c.gang.values(), c.cluster_runtimes, c.runtimes, c.jobs, c.services, c.trainjobs]

    def _on_trainjob(self, old: JSON | None, new: JSON | None) -> None:
        obj = new or old
        if obj is not None:
            self.queue.add(key_of(obj))

    def _on_child(self, old: JSON | None, new: JSON | None) -> None:
        for obj in (old, new):
            ref = controller_of(obj) if obj is not None else None
            if ref and ref.get("kind") == "TrainJob" and obj is not None:
                self.queue.add((key_of(obj)[0], str(ref["name"])))

    def _on_cluster_object(self, old: JSON | None, new: JSON | None) -> None:
        """A cluster-wide object a gang scheduler reads (e.g. a Volcano Queue) changed: every
        TrainJob may depend on it."""
        for tj in self.caches.trainjobs.items():
            self.queue.add(key_of(tj))

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
            self.queue.add(key_of(tj))

    async def _worker(self, n: int) -> None:
        while True:
            key = await self.queue.get()
            started = time.monotonic()
            structlog.contextvars.bind_contextvars(trainjob="/".join(key))
            try:
                requeue = await self.reconciler.reconcile(key)
            except asyncio.CancelledError:
                raise
            except ApiError as e:
                if e.namespace_terminating:
                    self.queue.forget(key)
                    log.debug("namespace terminating, not retrying")
                else:
                    delay = self.queue.add_rate_limited(key)
                    log.warning("reconcile failed", error=str(e), retry_in=round(delay, 3))
            except Exception as e:
                delay = self.queue.add_rate_limited(key)
                log.exception("reconcile failed", error=repr(e), retry_in=round(delay, 3))
            else:
                self.queue.forget(key)
                if requeue:
                    self.queue.add_after(key, requeue)
                log.debug("reconciled", seconds=round(time.monotonic() - started, 4))
            finally:
                self.queue.done(key)
                structlog.contextvars.clear_contextvars()

    async def run(self) -> None:
        """Run until cancelled: start the caches, wait for their first list, then the workers."""
        tasks = [asyncio.create_task(i.run(), name=f"informer-{i.res.plural}") for i in self.informers]
        try:
            await wait_synced(self.informers)
            log.info("caches synced", trainjobs=len(self.caches.trainjobs.items()))
            tasks += [
                asyncio.create_task(self._worker(n), name=f"worker-{n}")
                for n in range(self.settings.max_concurrent_reconciles)
            ]
            self.ready.set()
            await asyncio.gather(*tasks)
        finally:
            self.queue.shutdown()
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
