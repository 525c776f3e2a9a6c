"""The raw-client baseline of ``bench.burst``: the operator's children written by a plain controller.

What the operator wrote for each TrainJob of one namespace is read back (:func:`owned_children`),
stripped of what the apiserver and the Job controller set (:func:`raw_copy`), and written again in
another namespace, which the operator does not watch, by :class:`RawController`: it lists and watches
the TrainJobs of that namespace and, on the first event of each (``ADDED``, or the list), POSTs its
children with their owner reference pointing at that TrainJob's uid, with a bounded number of requests
in flight. That is the least work any controller could do to make the same objects from the same
watch events: the time it takes is the yardstick of the operator's time-to-children.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

from trainer.api.kinds import CONFIGMAPS, JOBS, SECRETS, SERVICES, TRAINJOBS, Resource, resource_of
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError, Kube

CHILD_KINDS: tuple[Resource, ...] = (JOBS, SERVICES, CONFIGMAPS, SECRETS)
"""The kinds a TrainJob on a torch runtime can own (trainer/trainjob/controller.py also declares
PersistentVolumeClaims, made only for ``volumeClaimPolicies``)."""

SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
"""``metadata`` fields the apiserver sets on every object (k8s.io/apimachinery ``ObjectMeta``)."""

JOB_CONTROLLER_LABELS = (
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
)
"""Labels the apiserver adds to a Job's pod template when it generates the selector
(kubernetes ``pkg/registry/batch/job/strategy.go``, ``generateSelector``); a create carrying the old
``controller-uid`` ones would be refused, as they no longer match the new Job's uid."""


def trainjob_owner(obj: JSON) -> str | None:
    """The name of the TrainJob in ``obj``'s owner references, or None when no TrainJob owns it."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == TRAINJOBS.kind and str(ref.get("apiVersion", "")).startswith(TRAINJOBS.group + "/"):
            return str(ref["name"])
    return None


def raw_copy(child: JSON, namespace: str, owner_uid: str) -> JSON:
    """A copy of ``child`` (an object as read from the apiserver) fit to be POSTed in ``namespace``
    as the child of the TrainJob of uid ``owner_uid``.

    Dropped: ``status``, the server-set ``metadata`` (:data:`SERVER_METADATA`); for a Job its
    ``spec.selector`` and the :data:`JOB_CONTROLLER_LABELS` (the apiserver generates them again for
    the new uid); for a Service its allocated ``clusterIP``/``clusterIPs`` unless headless (``None``).
    The uid of every TrainJob owner reference becomes ``owner_uid``. ``child`` is not changed.
    """
    obj = copy.deepcopy(child)
    obj.pop("status", None)
    meta = obj.setdefault("metadata", {})
    for key in SERVER_METADATA:
        meta.pop(key, None)
    meta["namespace"] = namespace
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == TRAINJOBS.kind:
            ref["uid"] = owner_uid
    spec = obj.get("spec") or {}
    if obj.get("kind") == JOBS.kind:
        spec.pop("selector", None)
        for labels in (meta.get("labels"), ((spec.get("template") or {}).get("metadata") or {}).get("labels")):
            for key in JOB_CONTROLLER_LABELS:
                if labels is not None:
                    labels.pop(key, None)
    if obj.get("kind") == SERVICES.kind and spec.get("clusterIP") != "None":
        spec.pop("clusterIP", None)
        spec.pop("clusterIPs", None)
    return obj


async def owned_children(kube: Kube, namespace: str) -> dict[str, list[JSON]]:
    """Every object of :data:`CHILD_KINDS` in ``namespace`` that a TrainJob owns, by TrainJob name,
    each list in kind order then by name. Raises :class:`trainer.framework.kube.client.ApiError`."""
    out: dict[str, list[JSON]] = {}
    for res in CHILD_KINDS:
        items, _ = await kube.list(res, namespace)
        for obj in sorted(items, key=lambda o: str(o["metadata"]["name"])):
            owner = trainjob_owner(obj)
            if owner is not None:
                out.setdefault(owner, []).append(obj)
    return out


class Client(Protocol):
    """What :class:`RawController` needs of a client: :class:`trainer.framework.kube.client.Kube`'s ``create``,
    ``list`` and ``watch``."""

    async def create(self, res: Resource, namespace: str | None, obj: JSON) -> JSON:
        """POST ``obj``; returns the stored object."""
        ...

    async def list(self, res: Resource, namespace: str | None) -> tuple[list[JSON], str]:
        """Every object of ``res`` in ``namespace`` and the list's resourceVersion."""
        ...

    def watch(self, res: Resource, namespace: str | None, resource_version: str) -> AsyncIterator[tuple[str, JSON]]:
        """Watch events ``(type, object)`` from ``resource_version``."""
        ...


@dataclass
class RawResult:
    """What :class:`RawController` did by the time it is read: per TrainJob name, the monotonic time
    its first watch event arrived (``seen``) and its last child POST was answered (``done``); the
    children POSTed."""

    seen: dict[str, float] = field(default_factory=dict)
    done: dict[str, float] = field(default_factory=dict)
    children: int = 0


class RawController:
    """POSTs the children of each TrainJob of ``namespace`` on its first watch event: ``templates`` by
    TrainJob name, as :func:`owned_children` gives them, copied by :func:`raw_copy` with the uid the
    event carries; at most ``concurrency`` POSTs in flight. A TrainJob without templates gets none."""

    def __init__(self, kube: Client, namespace: str, templates: dict[str, list[JSON]], concurrency: int) -> None:
        """Describe the controller; :meth:`start` runs its watch."""
        self.kube, self.namespace, self.templates = kube, namespace, templates
        self.gate = asyncio.Semaphore(concurrency)
        self.result = RawResult()
        self._tasks: set[asyncio.Task[None]] = set()
        self._watch: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self.error: BaseException | None = None

    def handle(self, obj: JSON) -> None:
        """One watch event's TrainJob: the first one of its name starts the POSTs of its children."""
        name = str(obj["metadata"]["name"])
        if name in self.result.seen:
            return
        self.result.seen[name] = time.monotonic()
        task = asyncio.create_task(self._children(name, str(obj["metadata"]["uid"])))
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and self.error is None:
            self.error = task.exception()
        self._changed.set()

    async def _post(self, child: JSON) -> None:
        async with self.gate:
            await self.kube.create(resource_of(child), self.namespace, child)

    async def _children(self, name: str, uid: str) -> None:
        copies = [raw_copy(c, self.namespace, uid) for c in self.templates.get(name, [])]
        await asyncio.gather(*(self._post(c) for c in copies))
        self.result.children += len(copies)
        self.result.done[name] = time.monotonic()

    async def _run(self, synced: asyncio.Event) -> None:
        rv = ""
        while True:
            if not rv:
                items, rv = await self.kube.list(TRAINJOBS, self.namespace)
                for obj in items:
                    self.handle(obj)
                synced.set()
            try:
                async for kind, obj in self.kube.watch(TRAINJOBS, self.namespace, rv):
                    rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                    if kind == "ADDED":
                        self.handle(obj)
            except ApiError as e:
                if not e.gone:
                    raise
                rv = ""  # too old: list again
            await asyncio.sleep(0.1)  # the server closed the watch: open it again shortly

    async def start(self) -> None:
        """List, then watch in the background; returns once the list is handled. Raises what the
        list raised."""
        synced = asyncio.Event()
        self._watch = asyncio.create_task(self._run(synced))
        waiter = asyncio.ensure_future(synced.wait())
        await asyncio.wait({self._watch, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if self._watch.done():
            self._watch.result()

    async def wait(self, count: int, deadline: float) -> None:
        """Until ``count`` TrainJobs have every child POSTed. Raises the first refused POST's error,
        the watch's, and ``TimeoutError`` at ``deadline`` (monotonic)."""
        while len(self.result.done) < count:
            if self.error is not None:
                raise self.error
            if self._watch is not None and self._watch.done():
                self._watch.result()
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), max(0.0, min(1.0, deadline - time.monotonic())))
            except TimeoutError:
                if time.monotonic() >= deadline:
                    raise
        if self.error is not None:
            raise self.error

    async def stop(self) -> None:
        """Stop the watch and any POST still running."""
        tasks = [*self._tasks, *((self._watch,) if self._watch else ())]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
