"""The one writer of a job's children: every create, server-side apply, merge patch and delete of an
object a job owns goes through :class:`ChildWriter`.

What one reconcile wants is a :class:`Desired`: deletions, merge patches, objects created only when
absent (:class:`Once`: the runtime snapshot, an SSH key pair, a PVC) and objects applied where they
differ from the cache (:func:`needs_apply`). A new child is created with POST, as JobSet and
mpi-operator create theirs (a create costs the apiserver less than an apply, and never takes over an
object that exists); an existing one is server-side applied (field manager ``trainer``), after the
create's ownership of its fields is taken over (:func:`take_over`) so that the apply prunes what is no
longer desired.

Ownership: the writer applies, patches and deletes only objects controlled by the job (a controller
owner reference with the job's uid, :func:`claim`), whether it finds them in its cache or learns of
them from a create's 409 (then it reads the object). An object of that name that the job does not
control is left as it is: it is a refusal with reason :data:`REASON_RESOURCE_EXISTS`, told once as a
Warning event on the job in mpi-operator's words (``Resource "<name>" of Kind "<Kind>" already exists
and is not managed by <Kind>``, kubeflow/mpi-operator ``pkg/controller/mpi_job_controller.go``), and
while a child other than a Job is such a conflict no Job is written, so no Pod starts with a Secret or
a hostfile someone else wrote. A child of an earlier job of the same kind and name (deleted and created
again, its children not yet collected) is waited for (:data:`REASON_PREVIOUS`), not taken. Deletes carry
the uid of the object read as a precondition, so what replaced it meanwhile is never deleted.

A child the apiserver refuses (4xx but conflict and
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

Every answer of the apiserver is kept in :class:`~trainer.jobs.features.own_writes.OwnWrites` until the
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

from trainer.api.conditions import REASON_CREATION_FAILED, REASON_PREVIOUS, REASON_RESOURCE_EXISTS
from trainer.api.kinds import JOBS, Resource, resource_of
from trainer.framework.bounded import BoundedDict
from trainer.framework.json_codec import JSON, dumps_sorted
from trainer.framework.kube.cache import controller_of, key_of
from trainer.framework.kube.client import ApiError
from trainer.framework.kube.projection import FIELD_MANAGER, managed_entry, owned_by_update
from trainer.framework.meta import meta
from trainer.framework.permissions import Permission
from trainer.jobs.facts import started

if TYPE_CHECKING:
    from trainer.framework.controller import Reader
    from trainer.framework.kube.client import KubeClient
    from trainer.framework.kube.events import EventRecorder
    from trainer.jobs.features.own_writes import OwnWrites

log = structlog.get_logger("trainer.children")
OURS, PREVIOUS, FOREIGN = "ours", "previous", "foreign"
MAX_REFUSALS = 10000
"""Refused children remembered at most (the oldest go first)."""
RETRY_FIRST = 5.0
"""Seconds before a refused child is first sent again."""
RETRY_MAX = 300.0
"""The longest wait, in seconds, between two sends of a child that is refused again and again."""
RETRY_PREVIOUS = 1.0
"""Seconds before a child held by an earlier job of the same name is looked for again (doubling)."""
T = TypeVar("T")
CREATED_ONCE = ("create", "get", "patch")
"""The verbs on an owned kind whose objects are only ever :class:`Once` (a gang's Workload): created,
read on a create's 409, labelled when it lacks the desired labels; never applied, never deleted."""
PERMISSIONS = (
    Permission(JOBS, ("patch",), "clearing startTime of a suspended Job whose Pod template must change", "status"),
)


@dataclass(frozen=True)
class Once:
    """An object created only when absent and never rewritten (an SSH key pair)."""

    resource: Resource
    namespace: str
    name: str
    make: Callable[[], JSON]


@dataclass(frozen=True)
class Refusal:
    """A child not written: what was sent (its desired hash), why (``reason``:
    :data:`REASON_CREATION_FAILED` when the apiserver refused it, :data:`REASON_RESOURCE_EXISTS` or
    :data:`REASON_PREVIOUS` when its name is taken), the message (``<Kind> <name>: ...``), when to try
    again (monotonic seconds) and how many tries in a row failed."""

    digest: str
    message: str
    retry_at: float
    attempts: int
    reason: str = REASON_CREATION_FAILED

    @property
    def conflict(self) -> bool:
        """Whether the child's name is taken by an object the job does not control."""
        return self.reason != REASON_CREATION_FAILED


@dataclass(frozen=True)
class Taken:
    """A child's name held by an object the job does not control: its :func:`claim` and the object."""

    claim: str
    obj: JSON


@dataclass(frozen=True)
class Written:
    """What :meth:`ChildWriter.write` did: the children not written (:class:`Refusal`) and the seconds
    until the first of them is tried again (None: none)."""

    refusals: list[Refusal]
    retry_in: float | None

    def messages(self, reason: str) -> list[str]:
        """The messages of the refusals with ``reason``."""
        return [r.message for r in self.refusals if r.reason == reason]


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
    told: list[tuple[str, str, str]] = field(default_factory=list)
    """Events ``(type, reason, message)`` told on the owner once the deletions are sent (what they do
    for the job, e.g. a resize), in this order."""


class ChildWriter:
    """Writes the children of one controller's jobs (see the module docstring).

    ``settles``: the controller's reconcile reads its writes of children back before its status, so the
    watch's echo of exactly such a write needs no reconcile
    (:meth:`~trainer.jobs.features.own_writes.OwnWrites.settled_echo`). ``announce``: the children one
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
        raises :class:`~trainer.framework.kube.client.ApiError` for any other failure (retried by the caller)."""
        for res, ns, name in desired.delete:
            await self.delete(owner, res, ns, name)
        for res, ns, name in desired.delete_foreground:
            await self.delete(owner, res, ns, name, propagation="Foreground")
        for type_, reason, message in desired.told:
            self.recorder.emit(owner, type_, reason, message)
        for res, ns, name, patch in desired.patch:
            if self._controls(owner, res, ns, name):
                await self.kube.merge_patch(res, ns, name, patch)
        todo: list[tuple[JSON, JSON | None, bool]] = []
        refusals: list[Refusal] = []
        for once in desired.once:
            existing = self.latest(once.resource, once.namespace, once.name)
            ident = (once.resource.kind, once.namespace, once.name)
            if existing is not None:
                if (taken := claim(existing, owner)) != OURS:
                    refusals.append(await self._refuse(owner, ident, "", taken_message(existing, owner, taken), taken))
            elif (seen := self._refusals.get(ident)) is not None and self.clock() < seen.retry_at:
                refusals.append(seen)  # not made again (an SSH key) before it is due
            else:
                todo.append((once.make(), None, True))
        todo += [(obj, self.latest(resource_of(obj), *key_of(obj)), False) for obj in desired.apply]
        created: list[str] = []
        updated: list[str] = []
        # Everything a Job may need (its ConfigMaps, Service, SSH Secret, PodGroup) first, then the Jobs;
        # the writes of each stage are sent together. While one of the first is someone else's, no Job
        # is written: its Pods would use that object.
        for stage in ([t for t in todo if t[0]["kind"] != JOBS.kind], [t for t in todo if t[0]["kind"] == JOBS.kind]):
            if not stage or (stage[0][0]["kind"] == JOBS.kind and any(r.conflict for r in refusals)):
                continue
            results = await together([self.apply(owner, obj, existing, once) for obj, existing, once in stage])
            for (obj, existing, _), (refusal, wrote) in zip(stage, results, strict=True):
                if refusal:
                    refusals.append(refusal)
                elif wrote:
                    (created if existing is None else updated).append(f"{obj['kind']} {obj['metadata']['name']}")
        if created or updated:  # one line per reconcile, not one per object
            log.info("applied", created=created or None, updated=updated or None)
        if created and self.announce:
            # One event per batch of creations, as a person reads it (not one per object).
            self.recorder.emit(owner, "Normal", "SuccessfulCreate", "Created " + ", ".join(created), "Create")
        waits = [r.retry_at - self.clock() for r in refusals]
        return Written(refusals, max(min(waits), 0.0) if waits else None)

    def _controls(self, owner: JSON, res: Resource, namespace: str | None, name: str) -> JSON | None:
        """The cached object ``res`` ``namespace/name`` when ``owner`` controls it or it is ``owner``
        itself; None otherwise (absent, or someone else's)."""
        target = self.latest(res, namespace, name)
        if target is None:
            return None
        itself = target.get("kind", res.kind) == owner.get("kind") and meta(target).uid == meta(owner).uid
        return target if itself or claim(target, owner) == OURS else None

    async def delete(
        self, owner: JSON, res: Resource, namespace: str | None, name: str, propagation: str = "Background"
    ) -> bool:
        """Delete ``res`` ``namespace/name`` when ``owner`` controls it (or it is ``owner``), with its uid
        as a precondition; an object of that name that is someone else's is left (logged). Returns
        whether it deleted. Raises :class:`~trainer.framework.kube.client.ApiError` when the apiserver refuses."""
        target = self._controls(owner, res, namespace, name)
        if target is None:
            if self.latest(res, namespace, name) is not None:
                log.warning("not deleting an object the job does not control", kind=res.kind, name=name)
            return False
        uid = str(meta(target).uid or "") or None
        if not await self.kube.delete(res, namespace, name, propagation=propagation, uid=uid):
            return False
        log.info("deleted", kind=res.kind, name=name, propagation=propagation)
        return True

    async def apply(
        self, owner: JSON, desired: JSON, existing: JSON | None, once: bool = False
    ) -> tuple[Refusal | None, bool]:
        """Write ``desired`` unless ``existing`` already matches it (see the module docstring). With
        ``once`` a 409 says it exists already, which counts as not written. Returns ``(refusal,
        written)``: the :class:`Refusal` (its message ``<Kind> <name>: <message>``) or None, and whether the object was
        written. Other errors raise :class:`~trainer.framework.kube.client.ApiError`."""
        desired = with_hash(desired)
        res = resource_of(desired)
        ident = (desired["kind"], *key_of(desired))
        # What is created once is made anew each time (an SSH key): its content is not what was refused.
        digest = "" if once else desired["metadata"]["annotations"][HASH_ANNOTATION]
        if existing is not None and (taken := claim(existing, owner)) != OURS:
            return await self._refuse(owner, ident, digest, taken_message(existing, owner, taken), taken), False
        if not needs_apply(desired, existing, self.reader.kept(res)) or _runs_on(desired, existing):
            return None, False
        seen = self._refusals.get(ident)
        if seen is not None and seen.digest != digest:
            seen = None  # what is desired changed: sent at once, counted afresh
        if seen is not None and self.clock() < seen.retry_at:
            return seen, False
        taking = existing is not None and not once and owned_by_update(existing)
        if taking and await take_over(self.kube, res, desired, FIELD_MANAGER):
            log.info("took over for apply", kind=desired["kind"], name=desired["metadata"]["name"])
        try:
            if existing is not None:
                stored = await self.kube.apply(desired, FIELD_MANAGER)
            else:
                created = await self._create(owner, res, desired, once)
                if isinstance(created, Taken):  # the name is someone else's
                    message = taken_message(created.obj, owner, created.claim)
                    return await self._refuse(owner, ident, digest, message, created.claim), False
                if created is None:
                    return None, False
                stored = created
        except ApiError as e:
            if e.namespace_terminating:
                return None, False
            if e.invalid and desired["kind"] == JOBS.kind and await self._mend_suspended_job(owner, desired, existing):
                return None, True
            if 400 <= e.status < 500 and e.status not in (409, 429):
                message = f"{desired['kind']} {desired['metadata']['name']}: {e.message}"
                return await self._refuse(owner, ident, digest, message, REASON_CREATION_FAILED), False
            raise
        self._refusals.pop(ident, None)
        # Kept until the cache has it (a moment): the fields the cache keeps, not interned.
        self.own_writes.remember(res, self.reader.kept(res)(stored), settled=self.settles)
        return None, True

    async def _create(self, owner: JSON, res: Resource, desired: JSON, once: bool) -> JSON | Taken | None:
        """POST ``desired``; returns the stored object. When its name is taken (409), the stored object
        is read: one the job controls is server-side applied (``once``: left, None returned), anyone
        else's is returned as :class:`Taken`. Raises :class:`~trainer.framework.kube.client.ApiError`."""
        try:
            return await self.kube.create(res, desired["metadata"].get("namespace"), desired, FIELD_MANAGER)
        except ApiError as e:
            if not e.conflict:
                raise
        stored = await self.kube.get_or_none(res, desired["metadata"].get("namespace"), desired["metadata"]["name"])
        if stored is None:
            raise ApiError(409, {"reason": "Conflict", "message": "created and deleted meanwhile; tried again"})
        taken = claim(stored, owner)
        if taken != OURS:
            return Taken(taken, stored)
        if once:
            await self._label(res, stored, desired)
            return None
        if owned_by_update(stored):
            await take_over(self.kube, res, desired, FIELD_MANAGER)
        return await self.kube.apply(desired, FIELD_MANAGER)

    async def _label(self, res: Resource, stored: JSON, desired: JSON) -> None:
        """Give ``stored``, created once by the job's controller but not carrying ``desired``'s labels (a
        runtime snapshot Kubeflow Trainer made), those labels, so the label-narrowed cache sees it and
        the next reconcile neither creates it again nor builds without it. Raises
        :class:`~trainer.framework.kube.client.ApiError`."""
        labels = meta(stored).labels
        missing = {k: v for k, v in (desired["metadata"].get("labels") or {}).items() if labels.get(k) != v}
        if missing:
            patch = {"metadata": {"labels": missing}}
            await self.kube.merge_patch(res, meta(stored).namespace, str(meta(stored).name), patch)
            log.info("labelled", kind=desired["kind"], name=meta(stored).name, labels=missing)

    async def _refuse(self, owner: JSON, ident: tuple[str, str, str], digest: str, message: str, why: str) -> Refusal:
        """Remember a child not written (``why``: :data:`REASON_CREATION_FAILED`, or a :func:`claim`
        that is not :data:`OURS`), to be tried again after a backoff; told once as a Warning event on
        ``owner`` (not for :data:`PREVIOUS`: the wait is short and expected)."""
        reason = {FOREIGN: REASON_RESOURCE_EXISTS, PREVIOUS: REASON_PREVIOUS}.get(why, why)
        seen = self._refusals.get(ident)
        if seen is not None and seen.retry_at > self.clock() and seen.message == message:
            return seen  # found in the cache again before the retry is due: nothing new
        attempts = seen.attempts + 1 if seen is not None and seen.digest == digest else 1
        first = RETRY_PREVIOUS if reason == REASON_PREVIOUS else RETRY_FIRST
        wait = min(first * 2 ** (attempts - 1), RETRY_MAX)
        refusal = self._refusals[ident] = Refusal(digest, message, self.clock() + wait, attempts, reason)
        if seen is None or seen.message != message:  # told once, not at every retry
            if reason == REASON_PREVIOUS:
                log.info("waiting for a child of an earlier job to be deleted", child=message)
            else:
                self.recorder.emit(owner, "Warning", reason, _event_message(message, reason, owner, ident))
        return refusal

    async def _mend_suspended_job(self, owner: JSON, desired: JSON, existing: JSON | None) -> bool:
        """Kubernetes lets a suspended Job's Pod template change only in its scheduling directives, and
        only before the Job first started: clear its startTime and apply again; if that is not enough,
        delete it to be recreated by the next reconcile (it has no Pods, so nothing is lost), whether it
        stays suspended or is resumed (a Job made by an earlier release of the operator, whose template
        differs). A running Job to be suspended whose template cannot change is suspended alone (merge
        patch), to be mended so by the next reconcile. True when mended; raises what a retried apply
        raises unless it is a refusal."""
        if existing is None:
            return False
        if started([existing]):
            if started([desired]):
                return False
            await self.kube.merge_patch(JOBS, *key_of(desired), {"spec": {"suspend": True}})
            return True
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
        await self.kube.delete(JOBS, *key_of(desired), uid=meta(existing).uid)
        self.recorder.emit(
            owner,
            "Normal",
            "RecreatingJob",
            f"Recreating suspended Job {desired['metadata']['name']} to apply the changed Pod template",
        )
        return True


def _runs_on(desired: JSON, existing: JSON | None) -> bool:
    """Whether ``existing`` is a Job that runs (not suspended) and ``desired`` lets it run on: such a Job
    is never written, as JobSet writes no Job it started (its Pod template is immutable, and a template
    changed by a newer release of the operator must not fail a running job)."""
    if existing is None or desired.get("kind") != JOBS.kind:
        return False
    return started([existing]) and started([desired])


def claim(obj: JSON, owner: JSON) -> str:
    """Whose ``obj`` is, for the job ``owner``: :data:`OURS` (its controller owner reference has the
    owner's uid), :data:`PREVIOUS` (it names an earlier object of the owner's kind and name: a job
    deleted and created again whose children are not yet collected) or :data:`FOREIGN`."""
    ref = controller_of(obj) or {}
    own = meta(owner)
    if ref.get("uid") and ref.get("uid") == own.uid:
        return OURS
    if ref.get("kind") == owner.get("kind") and ref.get("name") == own.name:
        return PREVIOUS
    return FOREIGN


def taken_message(obj: JSON, owner: JSON, taken: str) -> str:
    """``<Kind> <name>: ...`` saying whose ``obj`` is (``taken``: its :func:`claim` for ``owner``) and
    the way out."""
    kind, name = obj.get("kind") or "object", meta(obj).name
    what = f"{owner.get('kind')} {(owner.get('metadata') or {}).get('name')}"
    if taken == PREVIOUS:
        return f"{kind} {name}: still held by an earlier {what} (being deleted); waiting for it to go"
    return f"{kind} {name}: already exists and is not controlled by {what}; delete or rename it, then the job goes on"


def _event_message(message: str, reason: str, owner: JSON, ident: tuple[str, str, str]) -> str:
    """The Warning event's text: mpi-operator's for a taken name, else ``message``."""
    if reason != REASON_RESOURCE_EXISTS:
        return message
    kind, _, name = ident
    return f'Resource "{name}" of Kind "{kind}" already exists and is not managed by {owner.get("kind")}'


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
    is what the cache keeps of such an object (:mod:`trainer.framework.kube.projection`): the fields it drops are
    compared through the hash only."""
    if existing is None:
        return True
    have = meta(existing).annotations.get(HASH_ANNOTATION)
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
    whether it patched. Raises :class:`~trainer.framework.kube.client.ApiError` (409 when the object changed
    since it was read, 404 when it is gone)."""
    namespace, name = key_of(obj)
    stored = await kube.get(res, namespace or None, name)
    m = meta(stored)
    entries = taken_over(list(m.managed_fields or []), manager)
    if entries is None:
        return False
    ops: list[JSON] = [
        {"op": "replace", "path": "/metadata/managedFields", "value": entries},
        {"op": "replace", "path": "/metadata/resourceVersion", "value": m.resource_version},
    ]
    await kube.json_patch(res, namespace or None, name, ops)
    return True
