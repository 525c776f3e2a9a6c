"""The raw-client baseline of ``bench.burst``: the operator's children written by a plain client.

What the operator wrote for each TrainJob of one namespace is read back (:func:`owned_children`),
stripped of what the apiserver and the Job controller set (:func:`raw_copy`), and written again in
another namespace, which the operator does not watch, by :func:`post_all`: each TrainJob is POSTed,
then its children with their owner reference pointing at the new TrainJob, as fast as the apiserver
takes them with a bounded number of requests in flight. That is the least work any controller could
do to make the same objects: the time it takes is the yardstick of the operator's time-to-children.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from api.kinds import CONFIGMAPS, JOBS, SECRETS, SERVICES, TRAINJOBS, Resource, resource_of
from trainer.json_codec import JSON
from trainer.kube.client import Kube

T = TypeVar("T")

CHILD_KINDS: tuple[Resource, ...] = (JOBS, SERVICES, CONFIGMAPS, SECRETS)
"""The kinds a TrainJob on a torch runtime can own (trainer/controllers/trainjob.py also declares
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
    for field in SERVER_METADATA:
        meta.pop(field, None)
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
    each list in kind order then by name. Raises :class:`trainer.kube.client.ApiError`."""
    out: dict[str, list[JSON]] = {}
    for res in CHILD_KINDS:
        items, _ = await kube.list(res, namespace)
        for obj in sorted(items, key=lambda o: str(o["metadata"]["name"])):
            owner = trainjob_owner(obj)
            if owner is not None:
                out.setdefault(owner, []).append(obj)
    return out


class Creator(Protocol):
    """What :func:`post_all` needs of a client: :meth:`trainer.kube.client.Kube.create`."""

    async def create(self, res: Resource, namespace: str | None, obj: JSON) -> JSON:
        """POST ``obj``; returns the stored object."""
        ...


@dataclass
class RawResult:
    """What :func:`post_all` did: ``started`` (monotonic) just before the first POST was sent,
    ``seconds`` from then to the last child POST answered, ``trainjobs_seconds`` to the last TrainJob
    POST answered, and the POSTs made (TrainJobs, children)."""

    started: float
    seconds: float
    trainjobs_seconds: float
    trainjobs: int
    children: int


async def post_all(
    kube: Creator, trainjobs: Iterable[JSON], children: dict[str, list[JSON]], namespace: str, concurrency: int
) -> RawResult:
    """POST each TrainJob of ``trainjobs`` in ``namespace``, then its ``children`` (by TrainJob name, as
    :func:`owned_children` gives them, copied by :func:`raw_copy` with the new TrainJob's uid), with
    at most ``concurrency`` requests in flight (first come, first served). Raises
    :class:`trainer.kube.client.ApiError` on the first refused POST."""
    gate = asyncio.Semaphore(concurrency)
    last_trainjob = last_child = 0.0
    posted = 0

    async def limited(call: Awaitable[T]) -> T:
        async with gate:
            return await call

    async def one(tj: JSON) -> None:
        nonlocal last_trainjob, last_child, posted
        body = {**tj, "metadata": {**tj["metadata"], "namespace": namespace}}
        created = await limited(kube.create(TRAINJOBS, namespace, body))
        last_trainjob = max(last_trainjob, time.monotonic())
        uid = str(created["metadata"]["uid"])
        copies = [raw_copy(c, namespace, uid) for c in children.get(str(tj["metadata"]["name"]), [])]
        await asyncio.gather(*(limited(kube.create(resource_of(c), namespace, c)) for c in copies))
        if copies:
            last_child = max(last_child, time.monotonic())
        posted += len(copies)

    items = list(trainjobs)
    started = time.monotonic()
    await asyncio.gather(*(one(tj) for tj in items))
    return RawResult(
        started=started,
        seconds=max(last_child, last_trainjob) - started,
        trainjobs_seconds=last_trainjob - started,
        trainjobs=len(items),
        children=posted,
    )
