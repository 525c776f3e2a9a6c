"""The one writer of a job's children: every create, server-side apply, merge patch and delete of an
object a job owns goes through :class:`ChildWriter`.

What one reconcile wants is a :class:`Desired`: deletions, merge patches, objects created only when
absent (:class:`Once`: the runtime snapshot, an SSH key pair, a PVC) and objects applied where they
differ from the cache (:func:`needs_apply`). A new child is created with POST, as JobSet and
mpi-operator create theirs (a create costs the apiserver less than an apply), but for a suspended Job
and the gang scheduler's objects, which others change later; an existing one is server-side applied
(field manager ``trainer``), after the create's ownership of its fields is taken over (:func:`take_over`)
so that the apply prunes what is no longer desired. A child the apiserver refuses (4xx but conflict and
throttling) becomes one Warning event ``TrainJobResourcesCreationFailed`` on the owner and is sent again
after a backoff (:data:`RETRY_FIRST` seconds, doubling up to :data:`RETRY_MAX`; at once when what is
desired of it changes): a refusal can pass (an exceeded quota, a webhook's verdict), so it is never
remembered forever; :meth:`ChildWriter.write` says when to look again. A suspended Job whose Pod
template cannot change in place is mended (its ``startTime`` cleared, or it is recreated while it has
no Pods).

Whether a child needs a write: a desired object carries the hash of itself in an annotation
(:data:`HASH_ANNOTATION`), so a change of what the operator wants (including a removed field, which a
subset test cannot see) is always written, and a stored object that drifted from the desired fields
is written again (:func:`needs_apply`).

Every answer of the apiserver is kept in :class:`~trainer.reconciler.own_writes.OwnWrites` until the
caches have it, so the next reconcile reads its own writes.

Taking over, for server-side apply, the fields of a child created with POST: such a child's fields are
owned by an ``Update`` entry of ``trainer`` in ``metadata.managedFields``, which a later apply by
``trainer`` would not prune. So before the first apply its ``Update`` entry becomes ``trainer``'s
``Apply`` entry (merged into it when there is one), in one JSON patch of ``managedFields`` that carries
the resourceVersion read (a compare-and-swap: 409 when the object changed meanwhile, and the reconcile
is retried). Mirrors k8s.io/client-go ``util/csaupgrade/upgrade.go`` (``UpgradeManagedFieldsPatch``);
the writes follow kubernetes-sigs/jobset ``pkg/controllers/jobset_controller.go`` (``createJobs``,
``deleteJobs``) and kubeflow/mpi-operator ``pkg/controller/mpi_job_controller.go``.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import structlog

from api.kinds import CONFIGMAPS, JOBS, SERVICES, Resource, resource_of
from trainer.bounded import BoundedDict
from trainer.json_codec import JSON, dumps_sorted
from trainer.kube.cache import key_of
from trainer.kube.client import ApiError
from trainer.kube.projection import FIELD_MANAGER, managed_entry, owned_by_update

if TYPE_CHECKING:
    from trainer.controller import Reader
    from trainer.kube.client import KubeClient
    from trainer.kube.events import EventRecorder
    from trainer.reconciler.own_writes import OwnWrites

log = structlog.get_logger("trainer.children")
REASON_CREATION_FAILED = "TrainJobResourcesCreationFailed"
MAX_REFUSALS = 10000
"""Refused children remembered at most (the oldest go first)."""
RETRY_FIRST = 5.0
"""Seconds before a refused child is first sent again."""
RETRY_MAX = 300.0
"""The longest wait, in seconds, between two sends of a child that is refused again and again."""
T = TypeVar("T")


@dataclass(frozen=True)
class Once:
    """An object created only when absent and never rewritten (an SSH key pair)."""

    resource: Resource
    namespace: str
    name: str
    make: Callable[[], JSON]


@dataclass(frozen=True)
class Refusal:
    """A child the apiserver refused: what was sent (its desired hash), what it said, when to send it
    again (monotonic seconds) and how many sends in a row it refused."""

    digest: str
    message: str
    retry_at: float
    attempts: int


@dataclass(frozen=True)
class Written:
    """What :meth:`ChildWriter.write` did: the children refused (``<Kind> <name>: <message>``) and the
    seconds until the first of them is sent again (None: none refused)."""

    refused: list[str]
    retry_in: float | None


@dataclass
class Desired:
    """What one reconcile writes, in this order: deletions, merge patches, then the created-once objects
    and the objects applied where they differ from the cache, in two stages each sent at once:
    everything but Jobs, then the Jobs (so what a Job's Pods mount or join exists first)."""

    delete: list[tuple[Resource, str, str]] = field(default_factory=list)
    delete_foreground: list[tuple[Resource, str, str]] = field(default_factory=list)
    """Deleted with ``propagationPolicy: Foreground``: the object stays (terminating) until its
    dependents (a Job's Pods) are gone."""
    patch: list[tuple[Resource, str, str, JSON]] = field(default_factory=list)
    once: list[Once] = field(default_factory=list)
    apply: list[JSON] = field(default_factory=list)


class ChildWriter:
    """Writes the children of one controller's jobs (see the module docstring).

    ``settles``: the controller's reconcile reads its writes of children back before its status, so the
    watch's echo of exactly such a write needs no reconcile
    (:meth:`~trainer.reconciler.own_writes.OwnWrites.settled_echo`). ``announce``: the children one
    reconcile creates are told in one ``SuccessfulCreate`` event on the owner."""

    def __init__(
        self,
        kube: KubeClient,
        reader: Reader,
        recorder: EventRecorder,
        own_writes: OwnWrites,
        *,
        settles: bool,
        announce: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube, self.reader, self.recorder, self.own_writes = kube, reader, recorder, own_writes
        self.settles, self.announce, self.clock = settles, announce, clock
        self._refusals: BoundedDict[tuple[str, str, str], Refusal] = BoundedDict(MAX_REFUSALS)
        """Children the apiserver refused, by (kind, namespace, name)."""

    def latest(self, res: Resource, namespace: str | None, name: str) -> JSON | None:
        """The cached object, or this controller's last write of it while the cache is behind."""
        return self.own_writes.latest(self.reader, res, namespace, name)

    async def write(self, owner: JSON, desired: Desired) -> Written:
        """Carry out ``desired`` against the caches: only what is missing or differs is written.
        Returns the apiserver's refusals of children and when to send them again (:class:`Written`);
        raises :class:`~trainer.kube.client.ApiError` for any other failure (retried by the caller)."""
        for res, ns, name in desired.delete:
            if await self.kube.delete(res, ns, name):
                log.info("deleted", kind=res.kind, name=name)
        for res, ns, name in desired.delete_foreground:
            if await self.kube.delete(res, ns, name, propagation="Foreground"):
                log.info("deleted", kind=res.kind, name=name, propagation="Foreground")
        for res, ns, name, patch in desired.patch:
            await self.kube.merge_patch(res, ns, name, patch)
        todo: list[tuple[JSON, JSON | None, bool]] = [
            (once.make(), None, True)
            for once in desired.once
            if self.latest(once.resource, once.namespace, once.name) is None
        ]
        todo += [(obj, self.latest(resource_of(obj), *key_of(obj)), False) for obj in desired.apply]
        refused: list[str] = []
        waits: list[float] = []
        created: list[str] = []
        updated: list[str] = []
        # Everything a Job may need (its ConfigMaps, Service, SSH Secret, PodGroup) first, then the Jobs;
        # the writes of each stage are sent together.
        for stage in ([t for t in todo if t[0]["kind"] != JOBS.kind], [t for t in todo if t[0]["kind"] == JOBS.kind]):
            if not stage:
                continue
            results = await together([self.apply(owner, obj, existing, once) for obj, existing, once in stage])
            for (obj, existing, _), (refusal, wrote) in zip(stage, results, strict=True):
                if refusal:
                    refused.append(refusal.message)
                    waits.append(refusal.retry_at - self.clock())
                elif wrote:
                    (created if existing is None else updated).append(f"{obj['kind']} {obj['metadata']['name']}")
        if created or updated:  # one line per reconcile, not one per object
            log.info("applied", created=created or None, updated=updated or None)
        if created and self.announce:
            # One event per batch of creations, as a person reads it (not one per object).
            await self.recorder.emit(owner, "Normal", "SuccessfulCreate", "Created " + ", ".join(created), "Create")
        return Written(refused, max(min(waits), 0.0) if waits else None)

    async def apply(
        self, owner: JSON, desired: JSON, existing: JSON | None, once: bool = False
    ) -> tuple[Refusal | None, bool]:
        """Write ``desired`` unless ``existing`` already matches it (see the module docstring). With
        ``once`` a 409 says it exists already, which counts as not written. Returns ``(refusal,
        written)``: the :class:`Refusal` (its message ``<Kind> <name>: <message>``) or None, and whether the object was
        written. Other errors raise :class:`~trainer.kube.client.ApiError`."""
        desired = with_hash(desired)
        res = resource_of(desired)
        if not needs_apply(desired, existing, self.reader.kept(res)):
            return None, False
        ident = (desired["kind"], *key_of(desired))
        digest = desired["metadata"]["annotations"][HASH_ANNOTATION]
        seen = self._refusals.get(ident)
        if seen is not None and seen.digest != digest:
            seen = None  # what is desired changed: sent at once, counted afresh
        if seen is not None and self.clock() < seen.retry_at:
            return seen, False
        taking = existing is not None and not once and owned_by_update(existing)
        if taking and await take_over(self.kube, res, desired, FIELD_MANAGER):
            log.info("took over for apply", kind=desired["kind"], name=desired["metadata"]["name"])
        try:
            stored = await self._send(res, desired, existing, once)
        except ApiError as e:
            if e.namespace_terminating or (once and e.conflict):
                return None, False
            if e.invalid and desired["kind"] == JOBS.kind and await self._mend_suspended_job(owner, desired, existing):
                return None, True
            if 400 <= e.status < 500 and e.status not in (409, 429):
                message = f"{desired['kind']} {desired['metadata']['name']}: {e.message}"
                attempts = seen.attempts + 1 if seen is not None else 1
                wait = min(RETRY_FIRST * 2 ** (attempts - 1), RETRY_MAX)
                refusal = self._refusals[ident] = Refusal(digest, message, self.clock() + wait, attempts)
                if seen is None or seen.message != message:  # told once, not at every retry
                    await self.recorder.emit(owner, "Warning", REASON_CREATION_FAILED, message)
                return refusal, False
            raise
        self._refusals.pop(ident, None)
        # Kept until the cache has it (a moment): the fields the cache keeps, not interned.
        self.own_writes.remember(res, self.reader.kept(res)(stored), settled=self.settles)
        return None, True

    async def _send(self, res: Resource, desired: JSON, existing: JSON | None, once: bool) -> JSON:
        """Create (``once``, or a new child :func:`created_by_post`) or server-side apply ``desired``;
        returns the stored object. A new child of the latter kinds that exists already (a cache behind)
        is applied; a created-once one's 409 is raised."""
        if not once and (existing is not None or not created_by_post(desired)):
            return await self.kube.apply(desired, FIELD_MANAGER)
        try:
            return await self.kube.create(res, desired["metadata"].get("namespace"), desired, FIELD_MANAGER)
        except ApiError as e:
            if once or not e.conflict:
                raise
        return await self.kube.apply(desired, FIELD_MANAGER)

    async def _mend_suspended_job(self, owner: JSON, desired: JSON, existing: JSON | None) -> bool:
        """Kubernetes lets a suspended Job's Pod template change only in its scheduling directives, and
        only before the Job first started: clear its startTime and apply again; if that is not enough,
        delete it to be recreated by the next reconcile (it has no Pods, so nothing is lost). True when
        mended; raises what a retried apply raises unless it is a refusal."""
        if existing is None or not (existing.get("spec") or {}).get("suspend") or not desired["spec"]["suspend"]:
            return False
        if (existing.get("status") or {}).get("startTime"):
            await self.kube.patch_status(JOBS, *key_of(desired), {"startTime": None})
            try:
                await self.kube.apply(desired, FIELD_MANAGER)
                return True
            except ApiError as again:
                if not again.invalid:
                    raise
        if int((existing.get("status") or {}).get("active") or 0) > 0:
            return False
        log.info("recreating suspended job", name=desired["metadata"]["name"])
        await self.kube.delete(JOBS, *key_of(desired))
        await self.recorder.emit(
            owner,
            "Normal",
            "RecreatingJob",
            f"Recreating suspended Job {desired['metadata']['name']} to apply the changed Pod template",
        )
        return True


def created_by_post(desired: JSON) -> bool:
    """Whether a new child ``desired`` is created with POST (a Job but a suspended one, a Service, a
    ConfigMap); else it is created by server-side apply: a suspended Job is changed on resume (by the
    operator, by Kueue), and the gang scheduler's objects are the scheduler's to change too."""
    kind = desired.get("kind")
    if kind == JOBS.kind:
        return not (desired.get("spec") or {}).get("suspend")
    return kind in (SERVICES.kind, CONFIGMAPS.kind)


async def together(calls: list[Coroutine[Any, Any, T]]) -> list[T]:
    """The results of ``calls``, run at once, in their order. The first to raise cancels the rest
    and its exception is raised as it is (not in an ``ExceptionGroup``)."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(call) for call in calls]
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None
    return [task.result() for task in tasks]


# ---------------------------------------------------------------------- does a child need a write


HASH_ANNOTATION = "trainer.kubeflow.org/desired-hash"


def desired_hash(obj: dict[str, Any]) -> str:
    """A short stable hash of an object (key order does not matter)."""
    return hashlib.sha256(dumps_sorted(obj)).hexdigest()[:16]


def with_hash(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with :data:`HASH_ANNOTATION` set to its hash (a shallow copy; ``obj`` is not changed)."""
    meta = dict(obj.get("metadata") or {})
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != HASH_ANNOTATION}
    meta["annotations"] = annotations
    digest = desired_hash({**obj, "metadata": meta})
    meta["annotations"] = {**annotations, HASH_ANNOTATION: digest}
    return {**obj, "metadata": meta}


def is_subset(want: Any, have: Any) -> bool:
    """True when every field of ``want`` is in ``have`` with the same value (lists element-wise and
    of equal length; numbers compared as values)."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(is_subset(v, have.get(k)) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(want) == len(have) and all(map(is_subset, want, have))
    return bool(want == have)


def needs_apply(
    desired: dict[str, Any],
    existing: dict[str, Any] | None,
    project: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> bool:
    """Whether ``desired`` (made by :func:`with_hash`) must be written over ``existing``. ``project``
    is what the cache keeps of such an object (:mod:`trainer.kube.projection`): the fields it drops are
    compared through the hash only."""
    if existing is None:
        return True
    have = ((existing.get("metadata") or {}).get("annotations") or {}).get(HASH_ANNOTATION)
    want = desired["metadata"]["annotations"][HASH_ANNOTATION]
    return have != want or not is_subset(project(desired) if project else desired, existing)


# ---------------------------------------------------------------------- taking over for apply


def union(a: JSON, b: JSON) -> JSON:
    """The union of two ``fieldsV1`` sets (nested objects of ``f:``/``k:``/``v:``/``i:`` keys and ``.``)."""
    out = copy.deepcopy(a)
    for key, value in b.items():
        out[key] = union(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out


def taken_over(entries: list[JSON], manager: str) -> list[JSON] | None:
    """``managedFields`` with ``manager``'s ``Update`` entry of the object turned into its ``Apply``
    entry (its fields added to that entry when there is one, of the same apiVersion); None when there
    is nothing to take over."""
    old = managed_entry(entries, manager, "Update")
    if old is None:
        return None
    applied = managed_entry(entries, manager, "Apply")
    if applied is not None and applied.get("apiVersion") != old.get("apiVersion"):
        return None  # two versions' field sets are not merged here (the operator writes one version)
    out: list[JSON] = []
    for entry in entries:
        if entry is old:
            if applied is None:
                out.append({**entry, "operation": "Apply"})
            continue
        if entry is applied:
            fields = union(entry.get("fieldsV1") or {}, old.get("fieldsV1") or {})
            out.append({**entry, "fieldsV1": fields})
            continue
        out.append(entry)
    return out


async def take_over(kube: KubeClient, res: Resource, obj: JSON, manager: str) -> bool:
    """Read the stored ``obj`` (of ``res``) and take over ``manager``'s ``Update`` entry for its
    ``Apply`` (:func:`taken_over`) with a JSON patch that also sets the resourceVersion read. Returns
    whether it patched. Raises :class:`~trainer.kube.client.ApiError` (409 when the object changed
    since it was read, 404 when it is gone)."""
    namespace, name = key_of(obj)
    stored = await kube.get(res, namespace or None, name)
    meta = stored.get("metadata") or {}
    entries = taken_over(list(meta.get("managedFields") or []), manager)
    if entries is None:
        return False
    ops: list[JSON] = [
        {"op": "replace", "path": "/metadata/managedFields", "value": entries},
        {"op": "replace", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")},
    ]
    await kube.json_patch(res, namespace or None, name, ops)
    return True
