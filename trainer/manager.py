"""The operator process: informers, one work queue per controller, bounded pools of workers.

Two controllers run side by side, TrainJob and MPIJob, each with its own queue and
``max_concurrent_reconciles`` workers (as controller-runtime does per controller). Cache events are
mapped to keys: a child (Job, Service, ConfigMap, Secret, PodGroup) to its controller owner, a
runtime to every TrainJob that references it, a cluster-wide gang object (a Volcano Queue) to every
job. A failed reconcile is retried with per-key exponential backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

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
from trainer.kube.queue import WorkQueue

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


class Manager:
    """Owns the caches, the queues and the workers of the TrainJob and MPIJob controllers."""

    def __init__(self, kube: Kube, settings: Settings) -> None:
        self.kube, self.settings = kube, settings
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
        self.queues: dict[str, WorkQueue[Key]] = {"TrainJob": WorkQueue(), "MPIJob": WorkQueue()}
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
        while True:
            key = await queue.get()
            started = time.monotonic()
            structlog.contextvars.bind_contextvars(**{kind.lower(): "/".join(key)})
            try:
                requeue = await reconcile(key)
            except asyncio.CancelledError:
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
                queue.forget(key)
                if requeue:
                    queue.add_after(key, requeue)
                log.debug("reconciled", seconds=round(time.monotonic() - started, 4))
            finally:
                queue.done(key)
                structlog.contextvars.clear_contextvars()

    async def run(self) -> None:
        """Run until cancelled: start the caches, wait for their first list, then the workers."""
        tasks = [asyncio.create_task(i.run(), name=f"informer-{i.res.plural}") for i in self.informers]
        try:
            await wait_synced(self.informers)
            log.info(
                "caches synced",
                trainjobs=len(self.caches.trainjobs.items()),
                mpijobs=len(self.mpi_caches.mpijobs.items()),
            )
            for kind in self.queues:
                tasks += [
                    asyncio.create_task(self._worker(kind), name=f"{kind}-worker-{n}")
                    for n in range(self.settings.max_concurrent_reconciles)
                ]
            self.ready.set()
            await asyncio.gather(*tasks)
        finally:
            for queue in self.queues.values():
                queue.shutdown()
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t
