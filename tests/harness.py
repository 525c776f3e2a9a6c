"""The one harness of the reconciler tests: a :class:`World` (the real manager, wired from the real
declarations, over the recording double of ``Kube``) and object builders in the style of upstream's
test wrappers (kubeflow/trainer ``pkg/util/testing/wrapper.go``: ``MakeTrainJobWrapper``,
``MakeTrainingRuntimeWrapper``), so a test says only what differs from the samples."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.conftest import load_sample
from tests.kube_double import RecordingKube
from trainer.api.kinds import JOBS, MPIJOBS, TRAINJOBS, VOLCANO_QUEUES, Resource
from trainer.framework.clock import format_time
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import key_of
from trainer.jobs.reconcile import Reconciler
from trainer.wiring import Settings, new_manager

SAMPLES = {
    "torch": ("trainjob", TRAINJOBS, ["torch-distributed.yaml", "trainjob.yaml"]),
    "deepspeed-mpi": ("trainjob", TRAINJOBS, ["deepspeed-distributed.yaml", "trainjob-deepspeed.yaml"]),
    "mpijob": ("mpijob", MPIJOBS, ["mpijob.yaml"]),
    "flux": ("trainjob", TRAINJOBS, ["upstream/flux-distributed.yaml", "trainjob-flux.yaml"]),
}
"""Each sample: (its controller, its primary resource, the manifests of config/samples it stores)."""
VOLCANO_DEFAULT_QUEUE = {
    "apiVersion": VOLCANO_QUEUES.api_version,
    "kind": VOLCANO_QUEUES.kind,
    "metadata": {"name": "default"},
    "spec": {"weight": 1},
    "status": {"state": "Open"},
}


def ago(seconds: float) -> str:
    """The RFC 3339 time ``seconds`` ago."""
    return format_time(datetime.now(UTC) - timedelta(seconds=seconds))


class RuntimeWrapper:
    """A ClusterTrainingRuntime built from a sample (``torch-distributed.yaml`` by default)."""

    def __init__(self, sample: str = "torch-distributed.yaml") -> None:
        self._obj = load_sample(sample)

    def _jobset(self) -> JSON:
        spec: JSON = self._obj["spec"]["template"]["spec"]
        return spec

    def failure_policy(self, policy: JSON) -> RuntimeWrapper:
        """``template.spec.failurePolicy``."""
        self._jobset()["failurePolicy"] = policy
        return self

    def ttl_seconds_after_finished(self, seconds: int) -> RuntimeWrapper:
        """``template.spec.ttlSecondsAfterFinished``."""
        self._jobset()["ttlSecondsAfterFinished"] = seconds
        return self

    def obj(self) -> JSON:
        """The runtime as a manifest (a copy)."""
        return copy.deepcopy(self._obj)


class TrainJobWrapper:
    """A TrainJob built from a sample (``trainjob.yaml`` by default), created just now."""

    def __init__(self, sample: str = "trainjob.yaml") -> None:
        self._obj = load_sample(sample)
        self._obj["metadata"]["creationTimestamp"] = ago(0)

    def active_deadline_seconds(self, seconds: int) -> TrainJobWrapper:
        """``spec.activeDeadlineSeconds``."""
        self._obj["spec"]["activeDeadlineSeconds"] = seconds
        return self

    def num_nodes(self, n: int) -> TrainJobWrapper:
        """``spec.trainer.numNodes``."""
        self._obj["spec"].setdefault("trainer", {})["numNodes"] = n
        return self

    def obj(self) -> JSON:
        """The TrainJob as a manifest (a copy)."""
        return copy.deepcopy(self._obj)


class World:
    """A manager on the recording double with one sample stored (``sample`` of :data:`SAMPLES`), or with
    ``objects`` (a runtime and a TrainJob from the wrappers); ``settings`` are :class:`Settings` fields
    (each status change is written at once unless ``status_coalesce_seconds`` says otherwise)."""

    def __init__(
        self, sample: str = "torch", scheduler: str = "none", *, objects: list[JSON] | None = None, **settings: Any
    ) -> None:
        self.controller, self.resource, files = SAMPLES[sample]
        self.kube = RecordingKube()
        settings = {"status_coalesce_seconds": 0, **settings}
        self.manager = new_manager(self.kube, Settings(gang_scheduler_name=scheduler, **settings))
        self.kube.connect(self.manager.informers)
        self.key = ("", "")
        self.kube.put({**VOLCANO_DEFAULT_QUEUE})
        for obj in objects if objects is not None else [load_sample(f) for f in files]:
            stored = self.kube.put(obj)
            if stored["kind"] in (TRAINJOBS.kind, MPIJOBS.kind):
                self.key = key_of(stored)

    def reconciler(self) -> Reconciler[Any, Any]:
        """The reconciler of the sample's controller."""
        bound: Any = self.manager.reconcilers[self.controller]
        reconciler: Reconciler[Any, Any] = bound.__self__
        return reconciler

    async def reconcile(self) -> int:
        """One reconcile of the sample, and the Events it queued written; returns how many writes it
        made (Events included)."""
        before = len(self.kube.writes)
        try:
            await self.manager.reconcilers[self.controller](self.key)
        finally:  # a reconcile that raised may have queued Events too
            await self.manager.events.flush()
        return len(self.kube.writes) - before

    async def settle(self) -> float | None:
        """Reconcile until a reconcile writes nothing (at most 8 rounds; each one's Events written);
        returns its requeue."""
        for _ in range(8):
            before = len(self.kube.writes)
            try:
                requeue = await self.manager.reconcilers[self.controller](self.key)
            finally:
                await self.manager.events.flush()
            if len(self.kube.writes) == before:
                return requeue
        raise AssertionError(f"never settled; last writes: {self.kube.writes[-5:]}")

    async def run_worker(self, until: Any) -> None:
        """Run one worker of the controller, and the Events' senders, until ``until()`` holds, its queue
        is idle and no Event waits (at most 10 s)."""
        queue, events = self.manager.queues[self.controller], self.manager.events
        worker = asyncio.create_task(self.manager._worker(self.controller))
        senders = asyncio.create_task(events.run())
        queue.add(self.key)
        try:
            for _ in range(1000):
                if until() and len(queue) == 0 and not self.manager._busy and not events.queued:
                    await events.flush()
                    return
                await asyncio.sleep(0.01)
            raise AssertionError("the worker never got there")
        finally:
            worker.cancel()
            senders.cancel()

    @property
    def obj(self) -> JSON:
        """The stored primary (the TrainJob or MPIJob)."""
        return self.kube.objects[(self.resource, self.key)]

    tj = obj

    def jobs(self) -> list[JSON]:
        """Every stored Job."""
        return [o for (res, _), o in self.kube.objects.items() if res == JOBS]

    def condition(self, type_: str) -> JSON | None:
        """The primary's condition of ``type_``, or None."""
        return next((c for c in self.obj.get("status", {}).get("conditions") or [] if c["type"] == type_), None)

    def set_status(self, res: Resource, obj: JSON, status: JSON) -> None:
        """Another controller (the Job controller, Volcano) writes a status."""
        new = copy.deepcopy(obj)
        new["status"] = {**(new.get("status") or {}), **status}
        self.kube.put(new)

    def fail_jobs(self, reason: str) -> None:
        """The Job controller fails every Job with ``reason``."""
        for job in self.jobs():
            new = copy.deepcopy(job)
            cond = {"type": "Failed", "status": "True", "reason": reason, "lastTransitionTime": ago(0)}
            new["status"] = {"failed": 1, "conditions": [cond]}
            self.kube.put(new)

    def complete_jobs(self) -> None:
        """The Job controller completes every Job."""
        for job in self.jobs():
            new = copy.deepcopy(job)
            new["status"] = {"succeeded": 2, "conditions": [{"type": "Complete", "status": "True"}]}
            self.kube.put(new)


def complete_condition() -> JSON:
    """A Job's ``Complete`` condition as the Job controller writes it."""
    return {"type": "Complete", "status": "True", "reason": "CompletionsReached"}


def env_of(job: JSON, container: str = "node") -> dict[str, Any]:
    """The env of ``container`` in a Job's (or any pod-template owner's) pod template, name -> value."""
    pod = job["spec"]["template"]["spec"]
    (c,) = [c for c in pod["containers"] if c["name"] == container]
    return {e["name"]: e.get("value") for e in c.get("env") or []}


def job(w: World, rjob: str) -> JSON:
    """The one Job of replicated job ``rjob`` in ``w``."""
    (out,) = [j for j in w.jobs() if j["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == rjob]
    return out
