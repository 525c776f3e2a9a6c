"""The reconcile every kind shares: read -> validate -> managedBy -> derived info -> gang plan -> apply
what differs -> one status write.

A kind (TrainJob, MPIJob) subclasses :class:`Reconciler` and supplies only what differs: how to
derive its info (:meth:`Reconciler.info`), its gang input, its desired children
(:meth:`Reconciler.desired`), its conditions and how its status is spelled. Everything here is
level-triggered and idempotent: objects are read from the controller's caches only, a child is
written (server-side apply, field manager ``trainer``) only when :func:`trainer.diff.needs_apply`
says it differs, and the status is patched only when it changed, so a second reconcile of a
settled object writes nothing.

A spec the operator cannot parse gets condition ``Failed`` once and raises
:class:`~trainer.controller.TerminalError` (not retried). A child the apiserver refuses (422, 403)
becomes a Warning event ``TrainJobResourcesCreationFailed`` on the job instead of a retry loop. Any other
exception of ours on a job's input is retried a few times (:data:`RECONCILE_ATTEMPTS`), then said on the
job as ``Misconfigured``/``ReconcileError`` and not retried; each of these is written once, so the error
counters stop growing.
Mirrors the flow of kubeflow/trainer ``pkg/controller/trainjob_controller.go`` and
kubernetes-sigs/jobset ``pkg/controllers/jobset_controller.go``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar, cast

import aiohttp
import structlog
from pydantic import BaseModel, ValidationError

from api.base import Condition
from api.kinds import CONFIGMAPS, JOBS, SECRETS, SERVICES, Resource, resource_of
from trainer.builders.labels import FIELD_MANAGER
from trainer.controller import (
    Context,
    Controller,
    Key,
    Owns,
    Reconcile,
    TerminalError,
    UndeclaredRead,
    Watches,
    every_primary,
)
from trainer.controllers.own_writes import OwnWrites
from trainer.controllers.progress_clock import ProgressClock
from trainer.controllers.take_over import take_over
from trainer.diff import HASH_ANNOTATION, needs_apply, with_hash
from trainer.gang.base import COND_MISCONFIGURED, GangInput, GangPlan, GangScheduler, problem
from trainer.kube.cache import key_of
from trainer.kube.client import JSON, ApiError
from trainer.kube.events import now_rfc3339
from trainer.kube.projection import kept_fields, owned_by_update
from trainer.status import merge_conditions, transitions

log = structlog.get_logger("trainer.reconciler")
REASON_CREATION_FAILED = "TrainJobResourcesCreationFailed"
REASON_RECONCILE_ERROR = "ReconcileError"
"""Reason of the ``Misconfigured`` condition that says an unexpected exception stopped the reconcile."""
RECONCILE_ATTEMPTS = 5
"""Reconciles of one job (at one generation) that may raise an unexpected exception, each retried with
the work queue's backoff, before the exception is said on the job and the job is no longer retried."""


J = TypeVar("J", bound=BaseModel)
I = TypeVar("I")  # noqa: E741 (the kind's derived info)
T = TypeVar("T")


@dataclass(frozen=True)
class Once:
    """An object created only when absent and never rewritten (an SSH key pair)."""

    resource: Resource
    namespace: str
    name: str
    make: Callable[[], JSON]


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


@dataclass
class Blocked:
    """The job cannot be expanded now (e.g. its runtime is missing): write ``desired`` and, unless
    None, these conditions; no children are built."""

    conditions: list[Condition] | None
    desired: Desired = field(default_factory=Desired)


def first_error(e: ValidationError) -> str:
    """``field.path: message`` of a validation error's first entry."""
    err = e.errors()[0]
    return f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}"


class Reconciler(Generic[J, I]):
    """Reconciles one object of ``resource`` per call. Raise to retry with backoff; return seconds to
    requeue after; raise :class:`TerminalError` for what no retry can fix."""

    resource: ClassVar[Resource]
    model: ClassVar[type[BaseModel]]
    warning_conditions: ClassVar[frozenset[str]]
    """Condition types reported as Warning events when they turn True."""
    succeeded_condition: ClassVar[str]
    """The condition type of success (``Complete``, MPIJob's ``Succeeded``), for the outcome counters."""
    progress_fields: ClassVar[frozenset[str]] = frozenset()
    """Status fields that only count progress (``jobsStatus``): a change of these alone is coalesced, and
    is not written at all while every count is zero and nothing was written before (it tells nothing)."""
    creation_event: ClassVar[bool] = True
    """Whether the children one reconcile creates are told in one ``SuccessfulCreate`` event."""
    settles_children: ClassVar[bool] = False
    """Whether a reconcile's writes of children leave nothing for the next reconcile to do (the kind's
    :meth:`written` reads them back into its info before the conditions and the status): the watch's echo
    of exactly such a write is then not reconciled (:meth:`~trainer.controllers.own_writes.OwnWrites.settled_echo`)."""

    def __init__(self, ctx: Context) -> None:
        self.kube, self.reader, self.recorder, self.gang = ctx.kube, ctx.reader, ctx.events, ctx.gang
        self.running_condition = ctx.running_condition
        self.injection = ctx.status_injection
        self._refusals: dict[tuple[str, str, str], tuple[str, str]] = {}
        self._counted: dict[tuple[str, str, int], None] = {}
        """Outcome events already counted: (job uid, event, restart)."""
        """Children the apiserver refused: (kind, namespace, name) -> (desired hash, message)."""
        self.metrics = ctx.metrics
        self.own_writes: OwnWrites = ctx.own_writes
        """What this controller wrote, until its caches have it (see :mod:`trainer.controllers.own_writes`)."""
        self.status_delay = ctx.status_coalesce_seconds
        self.progress_clock: ProgressClock = ctx.progress_clock
        """Since when each job's progress-only status change waits (see :mod:`trainer.controllers.progress_clock`)."""
        self.max_nodes_per_job = ctx.max_nodes_per_job
        self._failures: dict[str, tuple[int | None, int]] = {}
        """Jobs whose reconcile raised unexpectedly: uid -> (generation, consecutive failures)."""

    # ----------------------------------------------------------------- what each kind supplies

    def invalid(self, obj: JSON, message: str) -> list[Condition]:
        """The conditions of a job whose spec cannot be parsed."""
        raise NotImplementedError

    def managed_by_us(self, obj: JSON) -> bool:
        """Whether this operator reconciles ``obj`` (its ``managedBy``, read before the spec is parsed)."""
        raise NotImplementedError

    def info(self, obj: JSON, job: J) -> I | Blocked:
        """Everything derived from the job and what it depends on, computed once per reconcile."""
        raise NotImplementedError

    def gang_input(self, info: I) -> GangInput:
        """The job's gang, for the gang scheduler module."""
        raise NotImplementedError

    def desired(self, info: I, plan: GangPlan) -> Desired:
        """The writes the job needs now."""
        raise NotImplementedError

    def conditions(self, info: I, plan: GangPlan) -> list[Condition] | None:
        """The conditions the job should carry (without timestamps); None: write no status."""
        raise NotImplementedError

    def status(self, obj: JSON, info: I | None, conditions: list[JSON] | None) -> JSON:
        """The whole status to write for ``obj`` (``info`` None when the job could not be expanded):
        every key it names is compared with the stored status and merge-patched (None deletes)."""
        raise NotImplementedError

    def events(self, info: I | None) -> list[tuple[str, str, str]]:
        """Events ``(type, reason, message)`` to record with this status write besides those of
        condition transitions (e.g. a restart); recorded only when the status changes."""
        return []

    def written(self, info: I, desired: Desired) -> I:
        """``info`` as the writes of ``desired`` left the children (read through :attr:`own_writes`), for
        the conditions and the status computed after them, so that the reconcile the watch's echoes of
        those writes bring finds nothing to write; by default ``info`` itself."""
        return info

    def requeue_after(self, info: I) -> float | None:
        """Seconds after which to look again although nothing changed (e.g. a TTL), or None."""
        return None

    # ----------------------------------------------------------------- the skeleton

    async def reconcile(self, key: Key) -> float | None:
        """Bring the children and status of the object ``key`` in line with its spec."""
        obj = self.own_writes.latest(self.reader, self.resource, *key)
        if obj is None or (obj.get("metadata") or {}).get("deletionTimestamp"):
            self.progress_clock.stop(key)
            return None
        if not self.managed_by_us(obj):
            return None  # e.g. MultiKueue's: not even a status write, whatever its spec holds
        try:
            job = cast(J, self.model.model_validate(obj))
        except ValidationError as e:
            message = f"invalid {self.resource.kind}: {first_error(e)}"
            await self._terminal(obj, self.invalid(obj, message), message, e)
            return None
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        try:
            requeue = await self._reconcile(obj, job)
        except (TerminalError, UndeclaredRead, ApiError, aiohttp.ClientError, OSError):
            # Said already; a wiring bug of ours; the apiserver's trouble, an answer or none at all
            # (connection refused or cut, timeout: it restarts): retried with backoff.
            raise
        except Exception as e:
            await self._unexpected(obj, e)
            return None
        self._failures.pop(uid, None)
        return requeue

    async def _terminal(self, obj: JSON, conditions: list[Condition], message: str, cause: Exception) -> None:
        """Say a failure no retry can fix on the job (its last condition of ``conditions``) and raise
        :class:`TerminalError`, once: when the job already carries that condition (the reconcile its own
        status write triggers, or any later one), return None, so the error counters stop growing."""
        if _carries(obj, conditions[-1]):
            log.debug("reconcile failure already said on the job", error=message)
            return None
        await self.write_status(obj, None, conditions)
        raise TerminalError(message) from cause

    async def _unexpected(self, obj: JSON, e: Exception) -> None:
        """An exception of ours on this job's input (a bug, not the apiserver's trouble): re-raised (retried
        with backoff) for the first :data:`RECONCILE_ATTEMPTS` - 1 failures at one generation; then said on
        the job as ``Misconfigured`` with reason :data:`REASON_RECONCILE_ERROR` and the exception text, and
        :class:`TerminalError` is raised (not retried until the job or one of its children changes). A job
        already carrying that condition is left be (returns None). Raises ``ApiError`` when the condition
        cannot be written."""
        meta = obj.get("metadata") or {}
        uid, generation = str(meta.get("uid") or ""), meta.get("generation")
        seen, failures = self._failures.get(uid, (generation, 0))
        failures = (failures if seen == generation else 0) + 1
        self._failures[uid] = (generation, failures)
        if len(self._failures) > 10000:
            self._failures.pop(next(iter(self._failures)))
        if failures < RECONCILE_ATTEMPTS:
            raise e
        if any(
            c.get("type") == COND_MISCONFIGURED and c.get("reason") == REASON_RECONCILE_ERROR
            for c in (obj.get("status") or {}).get("conditions") or []
        ):
            log.warning("reconcile failed again; already said on the job, not retrying", error=repr(e))
            return None
        message = (
            f"the operator failed to reconcile this {self.resource.kind} {RECONCILE_ATTEMPTS} times: {e!r}; "
            "not retried until it or one of its children changes (a bug of the operator: please report it)"
        )
        log.error("reconcile failed; said on the job, not retrying", error=repr(e), exc_info=e)
        try:
            await self.write_status(obj, None, [*self._kept(obj), problem(REASON_RECONCILE_ERROR, message)])
        except ApiError:
            raise
        except Exception as again:
            log.error("cannot write the reconcile error on the job", error=repr(again))
        raise TerminalError(message) from e

    async def _reconcile(self, obj: JSON, job: J) -> float | None:
        """The reconcile of a job whose spec parsed (see :meth:`reconcile`)."""
        try:
            info = self.info(obj, job)
            if isinstance(info, Blocked):
                await self.write(obj, info.desired)
                if info.conditions is not None:
                    await self.write_status(obj, None, info.conditions)
                return None
            plan = self.gang.plan(self.gang_input(info), self.reader)
            desired = self.desired(info, plan)
        except UndeclaredRead:
            raise  # a wiring bug of ours, not the user's input
        except (ValueError, TypeError, KeyError, AttributeError, IndexError) as e:
            # Input the schema let through that the pure core cannot expand (the webhook, when it
            # runs, refuses it first): said on the job, not retried until it changes.
            message = f"cannot expand the {self.resource.kind}: {e!r}; fix its spec or its runtime"
            await self._terminal(obj, [*self._kept(obj), problem("InvalidSpec", message)], message, e)
            return None
        refused = await self.write(obj, desired)
        info = self.written(info, desired)
        conditions = self.conditions(info, plan)
        if conditions is not None:
            if refused:
                conditions = _with_problem(conditions, problem(REASON_CREATION_FAILED, "; ".join(refused)))
            deferred = await self.write_status(obj, info, conditions)
            if deferred is not None:
                later = self.requeue_after(info)
                return deferred if later is None else min(later, deferred)
        return self.requeue_after(info)

    def _kept(self, obj: JSON, dropped: str = COND_MISCONFIGURED) -> list[Condition]:
        """The job's conditions but those of type ``dropped`` (which the caller sets anew)."""
        return [
            Condition.model_validate(c)
            for c in (obj.get("status") or {}).get("conditions") or []
            if c.get("type") != dropped
        ]

    async def write(self, owner: JSON, desired: Desired) -> list[str]:
        """Carry out ``desired`` against the caches: only what is missing or differs is written.
        Returns the apiserver's refusals of children (``<Kind> <name>: <message>``)."""
        for res, ns, name in desired.delete:
            if await self.kube.delete(res, ns, name):
                log.info("deleted", kind=res.kind, name=name)
        for res, ns, name in desired.delete_foreground:
            if await self.kube.delete(res, ns, name, propagation="Foreground"):
                log.info("deleted", kind=res.kind, name=name, propagation="Foreground")
        for res, ns, name, patch in desired.patch:
            await self.kube.merge_patch(res, ns, name, patch)
        refused: list[str] = []
        created: list[str] = []
        updated: list[str] = []
        todo: list[tuple[JSON, JSON | None, bool]] = [
            (once.make(), None, True)
            for once in desired.once
            if self.own_writes.latest(self.reader, once.resource, once.namespace, once.name) is None
        ]
        todo += [
            (obj, self.own_writes.latest(self.reader, resource_of(obj), *key_of(obj)), False) for obj in desired.apply
        ]
        # Everything a Job may need (its ConfigMaps, Service, SSH Secret, PodGroup) first, then the Jobs;
        # the writes of each stage are sent together.
        for stage in ([t for t in todo if t[0]["kind"] != JOBS.kind], [t for t in todo if t[0]["kind"] == JOBS.kind]):
            if not stage:
                continue
            results = await together([self.apply(owner, obj, existing, once) for obj, existing, once in stage])
            for (obj, existing, _), (refusal, wrote) in zip(stage, results, strict=True):
                if refusal:
                    refused.append(refusal)
                elif wrote:
                    (created if existing is None else updated).append(f"{obj['kind']} {obj['metadata']['name']}")
        if created or updated:  # one line per reconcile, not one per object
            log.info("applied", created=created or None, updated=updated or None)
        if created and self.creation_event:
            # One event per batch of creations, as a person reads it (not one per object).
            await self.recorder.emit(owner, "Normal", "SuccessfulCreate", "Created " + ", ".join(created), "Create")
        return refused

    async def write_status(self, obj: JSON, info: I | None, desired: list[Condition]) -> float | None:
        """Merge ``desired`` into the conditions (transition times kept unless a status changes), record
        an event per transition, then patch the status once, only if it changed.

        A change of only the kind's :attr:`progress_fields` (counts of Jobs or pods) is coalesced: it is
        written once it has waited :attr:`status_delay` seconds (``--status-coalesce-seconds``) since the
        change (:attr:`progress_clock`, started by the child's change when the manager saw it), with
        whatever the status is by then, or at once with the next change of anything else (conditions,
        restarts). Returns the seconds to look again after when the write was deferred, else None."""
        old = obj.get("status") or {}
        current = [Condition.model_validate(c) for c in old.get("conditions") or []]
        generation = (obj.get("metadata") or {}).get("generation")
        merged = merge_conditions(current, desired, now_rfc3339(), generation)
        new = self.status(obj, info, [c.to_dict() for c in merged] or None)
        key = key_of(obj)
        changed = {k for k in new if old.get(k) != new[k]}
        if not changed:
            self.progress_clock.stop(key)
            return None
        progress = info is not None and changed <= self.progress_fields
        if progress and all(_nothing(old.get(k)) and _nothing(new[k]) for k in changed):
            self.progress_clock.stop(key)
            return None  # counts that are all zero, where nothing was written yet: no news
        if progress and self.status_delay > 0:
            waited = self.progress_clock.waited(key)
            if waited < self.status_delay:
                return self.status_delay - waited
        self.progress_clock.stop(key)
        # Events first: whoever sees the new condition finds its event too.
        for type_, reason, message in self.events(info):
            await self.recorder.emit(obj, type_, reason, message)
        for cond in transitions(current, merged):
            warning = cond.type in self.warning_conditions and cond.status == "True"
            await self.recorder.emit(obj, "Warning" if warning else "Normal", cond.reason, cond.message)
        meta = obj["metadata"]
        stored = await self.kube.patch_status(self.resource, meta.get("namespace"), meta["name"], new)
        log.debug("status written", changed=sorted(changed), status=new)
        # Progress counts only: nothing reads them back, so a reconcile of this very version writes nothing.
        self.own_writes.remember(self.resource, kept_fields(self.resource)(stored), settled=progress)
        self._count_outcomes(obj, old, new)
        return None

    def _count_outcomes(self, obj: JSON, old: JSON, new: JSON) -> None:
        """Count what this status write records: the first status, success, failure, a restart; each
        once per job (a reconcile on a cache that has not seen the previous write yet writes again)."""
        if self.metrics is None:
            return

        def true(status: JSON, type_: str) -> JSON | None:
            conditions = status.get("conditions") or []
            return next((c for c in conditions if c["type"] == type_ and c["status"] == "True"), None)

        kind, ns = self.resource.kind, str(obj["metadata"].get("namespace") or "")
        runtime = str(((obj.get("spec") or {}).get("runtimeRef") or {}).get("name") or "")
        uid = str(obj["metadata"].get("uid") or "")
        failed = true(new, "Failed")
        events = [
            ("created", "", not old),
            ("succeeded", "", bool(true(new, self.succeeded_condition)) and not true(old, self.succeeded_condition)),
            ("failed", str((failed or {}).get("reason") or ""), bool(failed) and not true(old, "Failed")),
            ("restarted", "", int(new.get("restarts") or 0) > int(old.get("restarts") or 0)),
        ]
        for event, reason, happened in events:
            once = (uid, event, int(new.get("restarts") or 0) if event == "restarted" else 0)
            if not happened or once in self._counted:
                continue
            self._counted[once] = None
            if len(self._counted) > 100_000:
                self._counted.pop(next(iter(self._counted)))
            self.metrics.outcome(event, kind, ns, runtime, reason)

    # ----------------------------------------------------------------- writing children

    async def _refused(self, owner: JSON, desired: JSON, e: ApiError) -> None:
        await self.recorder.emit(
            owner, "Warning", REASON_CREATION_FAILED, f"{desired['kind']} {desired['metadata']['name']}: {e.message}"
        )

    async def apply(
        self, owner: JSON, desired: JSON, existing: JSON | None, once: bool = False
    ) -> tuple[str | None, bool]:
        """Write ``desired`` unless ``existing`` already matches it. A new child is created with POST, as
        JobSet and mpi-operator create theirs (a create costs the apiserver less than an apply), but for
        a suspended Job and the gang scheduler's objects, which others change later; an existing one is
        server-side applied, after the operator's create's ownership of its fields is taken over
        (:mod:`trainer.controllers.take_over`), so the apply prunes what is no longer desired. With
        ``once`` (an object created only when absent and never rewritten: the runtime snapshot, an SSH
        key pair) a 409 says it exists already, which counts as not written; a new child of another kind
        that exists already (a cache behind) is applied. A refusal (4xx but
        conflict and throttling) is final for that desired object: a Warning event on ``owner`` once,
        then the same object is not sent again (until what is desired changes). Returns ``(refusal,
        written)``: the refusal (``<Kind> <name>: <message>``) or None, and whether the object was
        written. Other errors raise. A suspended Job whose Pod template cannot be changed in place is
        mended by :meth:`_mend_suspended_job`."""
        desired = with_hash(desired)
        res = resource_of(desired)
        if not needs_apply(desired, existing, kept_fields(res)):
            return None, False
        ident = (desired["kind"], *key_of(desired))
        digest = desired["metadata"]["annotations"][HASH_ANNOTATION]
        seen = self._refusals.get(ident)
        if seen is not None and seen[0] == digest:
            return seen[1], False
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
                self._refusals[ident] = (digest, message)
                if len(self._refusals) > 10000:
                    self._refusals.pop(next(iter(self._refusals)))
                await self._refused(owner, desired, e)
                return message, False
            raise
        self._refusals.pop(ident, None)
        # Kept until the cache has it (a moment): the fields the cache keeps, not interned.
        self.own_writes.remember(res, kept_fields(res)(stored), settled=self.settles_children)
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


def declare(
    name: str,
    reconciler: type[Reconciler[Any, Any]],
    child_label: str,
    gang: GangScheduler,
    watches: tuple[Watches, ...] = (),
    also_owns: tuple[Resource, ...] = (),
) -> Controller:
    """A job controller's declaration: its primary is ``reconciler.resource``; it owns its Jobs,
    Services, ConfigMaps and Secrets and ``also_owns`` (each carrying ``child_label``) and the gang
    scheduler's objects (PodGroups); it watches ``watches`` and the gang scheduler's cluster-wide
    objects (Volcano Queues), each mapped to every job."""
    primary = reconciler.resource

    def build(ctx: Context) -> Reconcile:
        return reconciler(ctx).reconcile

    return Controller(
        name=name,
        for_=primary,
        build=build,
        owns=(
            *(Owns(r, child_label) for r in (JOBS, SERVICES, CONFIGMAPS, SECRETS, *also_owns)),
            *(Owns(r) for r in gang.owns),
        ),
        watches=(*watches, *(Watches(r, every_primary(primary)) for r in gang.watches)),
    )


async def together(calls: list[Coroutine[Any, Any, T]]) -> list[T]:
    """The results of ``calls``, run at once, in their order. The first to raise cancels the rest
    and its exception is raised as it is (not in an ``ExceptionGroup``)."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(call) for call in calls]
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None
    return [task.result() for task in tasks]


def _nothing(value: Any) -> bool:
    """Whether a progress field holds no count at all: absent, or entries whose numbers are all zero
    (``[{"name": "node", "active": 0, "ready": 0, ...}]``)."""
    entries = value if isinstance(value, list) else list(value.values()) if isinstance(value, dict) else []
    if value not in (None, [], {}) and not entries:
        return False
    return all(
        isinstance(e, dict) and all(not v for k, v in e.items() if isinstance(v, int) and not isinstance(v, bool))
        for e in entries
    )


def created_by_post(desired: JSON) -> bool:
    """Whether a new child ``desired`` is created with POST (a Job but a suspended one, a Service, a
    ConfigMap); else it is created by server-side apply: a suspended Job is changed on resume (by the
    operator, by Kueue), and the gang scheduler's objects are the scheduler's to change too."""
    kind = desired.get("kind")
    if kind == JOBS.kind:
        return not (desired.get("spec") or {}).get("suspend")
    return kind in (SERVICES.kind, CONFIGMAPS.kind)


def _carries(obj: JSON, cond: Condition) -> bool:
    """Whether ``obj`` already has ``cond`` (same type, status, reason and message)."""
    return any(
        (c.get("type"), c.get("status"), c.get("reason", ""), c.get("message", ""))
        == (cond.type, cond.status, cond.reason, cond.message)
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def _with_problem(conditions: list[Condition], extra: Condition) -> list[Condition]:
    """``conditions`` with ``extra`` folded into their ``Misconfigured`` condition (one per job)."""
    for i, c in enumerate(conditions):
        if c.type == COND_MISCONFIGURED:
            merged = c.model_copy(update={"message": f"{c.message}; {extra.message}"})
            return [*conditions[:i], merged, *conditions[i + 1 :]]
    return [*conditions, extra]
