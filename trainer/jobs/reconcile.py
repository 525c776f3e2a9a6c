"""The reconcile every kind shares, in one function that reads top to bottom:
read -> managedBy -> validate -> expand -> gang plan -> desired -> write children -> write status.

A kind (TrainJob, MPIJob) is a :class:`~trainer.jobs.kind.Kind`: its facts (:class:`trainer.api.jobkinds.KindFacts`:
resource, model, labels, terminal conditions) and a plain function per step of the reconcile. What it derives
once per reconcile (its info) says its gang and when to look again (:class:`~trainer.jobs.kind.Expanded`).
How its changes are told (warnings, quiet transitions, progress fields) is the status writer's
(:class:`~trainer.jobs.status_writer.Telling`); a kind with a ``settle`` step reads its child writes back, so
that their watch echoes need no reconcile.

:meth:`Reconciler.reconcile` is the one path; every child write goes through the
controller's :class:`~trainer.jobs.child_writer.ChildWriter`, every status write through its
:class:`~trainer.jobs.status_writer.StatusWriter`. Everything is level-triggered and idempotent:
objects are read from the controller's caches only, a child is written only when it differs, and the
status is patched only when it changed, so a second reconcile of a settled object writes nothing.

A spec the operator cannot parse gets condition ``Failed`` once and raises
:class:`~trainer.framework.controller.TerminalError` (not retried). A child the apiserver refuses (422, 403)
becomes a Warning event ``TrainJobResourcesCreationFailed`` on the job and condition ``Misconfigured``,
and is sent again with backoff; a child whose name someone else's object holds, ``ErrResourceExists``
(see :mod:`~trainer.jobs.child_writer`). Any
other exception of ours on a job's input is retried a few times (:data:`RECONCILE_ATTEMPTS`), then said
on the job as ``Misconfigured``/``ReconcileError`` and not retried; each of these is written once, so
the error counters stop growing. Mirrors the flow of kubeflow/trainer
``pkg/controller/trainjob_controller.go`` (``Reconcile``) and kubernetes-sigs/jobset
``pkg/controllers/jobset_controller.go`` (``reconcile``).
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any, Generic

import aiohttp
import structlog
from pydantic import ValidationError

from trainer.api.base import Condition
from trainer.api.conditions import (
    COND_MISCONFIGURED,
    COND_REPLICA_FAILURE,
    REASON_CREATION_FAILED,
    REASON_RECONCILE_ERROR,
    REASON_RESOURCE_EXISTS,
)
from trainer.api.jobkinds import KindFacts
from trainer.api.kinds import CONFIGMAPS, EVENTS, JOBS, SECRETS, SERVICES, Resource
from trainer.api.trainer_v1alpha1 import COND_FAILED
from trainer.framework.bounded import BoundedDict
from trainer.framework.controller import (
    Context,
    Controller,
    Key,
    Owns,
    Reader,
    Reconcile,
    TerminalError,
    UndeclaredRead,
    Watches,
    every_primary,
)
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import ApiError
from trainer.framework.kube.projection import strip_managed_fields
from trainer.framework.meta import meta
from trainer.jobs.child_writer import HASH_ANNOTATION, ChildWriter
from trainer.jobs.conditions import JOB_TERMINAL, finished, fold_problems, kept_conditions, problem
from trainer.jobs.event_filter import JobEventFilter
from trainer.jobs.facts import managed_by_us
from trainer.jobs.features.lifecycle import JobMetrics, JobStates
from trainer.jobs.features.own_writes import OwnWrites
from trainer.jobs.features.replica_failure import replica_failure
from trainer.jobs.features.replica_failure import watches as failed_create_events
from trainer.jobs.gang.base import GangScheduler
from trainer.jobs.kind import Blocked, Expanded, I, J, Kind, Latest
from trainer.jobs.status_writer import NoLane, ProgressClock, StatusWriter, Telling, status_permission

__all__ = [
    "Blocked",
    "Expanded",
    "Kind",
    "Latest",
    "Reconciler",
    "declare",
    "first_error",
    "invalid",
    "kept_job",
    "kept_secret",
    "soonest",
]

log = structlog.get_logger("trainer.jobs")
RECONCILE_ATTEMPTS = 5
"""Reconciles of one job (at one generation) that may raise an unexpected exception, each retried with
the work queue's backoff, before the exception is said on the job and the job is no longer retried."""
MAX_FAILING = 10000
"""Jobs whose consecutive failures are remembered at most (the oldest go first)."""
INPUT_ERRORS = (ValueError, TypeError, KeyError, AttributeError, IndexError)
"""What the pure core raises on input the schema let through but it cannot expand."""
RETRIED = (TerminalError, UndeclaredRead, ApiError, aiohttp.ClientError, OSError)
"""Raised as they are: said already (terminal); a wiring bug of ours; the apiserver's trouble, an answer
or none at all (connection refused or cut, timeout: it restarts), retried with backoff."""


class Reconciler(Generic[J, I]):
    """Reconciles one object of ``kind`` per call of :meth:`reconcile`: raises to retry with backoff,
    returns seconds to requeue after, raises :class:`~trainer.framework.controller.TerminalError` for what no
    retry fixes."""

    def __init__(
        self,
        kind: Kind[J, I],
        ctx: Context,
        gang: GangScheduler,
        *,
        telling: Telling,
        announce: bool = True,
        own_writes: OwnWrites | None = None,
        clock: ProgressClock | None = None,
        status_coalesce_seconds: float = 1.0,
        runs_jobs: bool = True,
    ) -> None:
        self.kind, self.ctx, self.gang = kind, ctx, gang
        self.runs_jobs = runs_jobs
        settles = kind.settle is not None
        own_writes = own_writes if own_writes is not None else OwnWrites()
        self.children = ChildWriter(ctx.kube, ctx.reader, ctx.events, own_writes, settles=settles, announce=announce)
        self.status = StatusWriter(
            kind,
            telling,
            ctx.kube,
            ctx.events,
            own_writes,
            clock if clock is not None else ProgressClock(),
            delay=status_coalesce_seconds,
            metrics=ctx.metrics,
            lane=ctx.queue if ctx.queue is not None else NoLane(),
            gang_scheduler=gang.name,
        )
        self._latest = partial(own_writes.latest, ctx.reader)
        self._failures: BoundedDict[str, tuple[int | None, int]] = BoundedDict(MAX_FAILING)
        """Jobs whose reconcile raised unexpectedly: uid -> (generation, consecutive failures)."""

    async def reconcile(self, key: Key) -> float | None:
        """Bring the children and the status of the object ``key`` in line with its spec."""
        kind, facts, reader = self.kind, self.kind.facts, self.ctx.reader
        # Read: the cache, or this controller's own last write while the cache is behind.
        obj = self.children.latest(facts.resource, *key)
        if obj is None or meta(obj).deletion:
            self.status.forget(key)
            return None
        # managedBy: another controller's (e.g. MultiKueue's): not even a status write.
        if not managed_by_us(obj, facts.run_policy):
            return None
        # Validate: a spec that does not parse is said once, not retried.
        try:
            job: Any = facts.model.model_validate(obj)  # the kind's model (J)
        except ValidationError as e:
            message = f"invalid {facts.resource.kind}: {first_error(e)}"
            await self._terminal(obj, invalid(obj, facts, message), message, e)
            return None
        try:
            try:
                # Info: everything derived from the job and what it depends on, once.
                info = kind.expand(reader, obj, job)
                if not isinstance(info, Blocked):
                    if kind.offloaded is not None:  # pure but slow: off the event loop
                        info = await asyncio.to_thread(kind.offloaded, info)
                    # Gang plan, then the desired children.
                    plan = self.gang.plan(info.gang, reader)
                    desired = kind.desired(reader, info, plan)
            except UndeclaredRead:
                raise  # a wiring bug of ours (a KeyError), not the user's input
            except INPUT_ERRORS as e:
                # Input the schema let through that the pure core cannot expand (the webhook, when it
                # runs, refuses it first): said on the job, not retried until it changes.
                message = f"cannot expand the {facts.resource.kind}: {e!r}; fix its spec or its runtime"
                await self._terminal(obj, [*kept_conditions(obj), problem("InvalidSpec", message)], message, e)
                return None
            if isinstance(info, Blocked):
                later = await self._blocked(obj, info)
            else:
                # Write the children, then read those writes back into the info.
                written = await self.children.write(obj, desired)
                if kind.settle is not None:
                    info = kind.settle(info, desired, self._latest)
                # Write the status: the conditions (a refusal folded into Misconfigured), the kind's events.
                conditions = kind.conditions(info, plan)
                later = soonest(info.requeue_after, written.retry_in)
                if conditions is not None:
                    conditions = self._with_replica_failure(obj, conditions)
                    for reason in (REASON_RESOURCE_EXISTS, REASON_CREATION_FAILED):
                        if messages := written.messages(reason):
                            conditions = fold_problems([*conditions, problem(reason, "; ".join(messages))])
                    later = soonest(later, await self.status.write(obj, info, conditions))
        except RETRIED:
            raise
        except Exception as e:
            await self._unexpected(obj, e)
            return None
        self._failures.pop(str(meta(obj).uid or ""), None)
        return later

    async def _blocked(self, obj: JSON, blocked: Blocked) -> float | None:
        """Write what a job that cannot be expanded now needs (:class:`Blocked`): its writes, and its
        conditions and status fields unless None. Returns when to look again."""
        await self.children.write(obj, blocked.desired)
        if blocked.conditions is not None:
            conditions = self._with_replica_failure(obj, blocked.conditions)
            await self.status.write(obj, None, conditions, blocked.status)
        return blocked.requeue_after

    def _with_replica_failure(self, obj: JSON, conditions: list[Condition]) -> list[Condition]:
        """``conditions`` with the job's ``ReplicaFailure`` as its Jobs' ``FailedCreate`` Events call for it
        now (:func:`trainer.jobs.features.replica_failure.replica_failure`), none once ``conditions`` say it
        finished or when the kind runs no Jobs."""
        kept = [c for c in conditions if c.type != COND_REPLICA_FAILURE]
        if not self.runs_jobs or finished(kept, self.kind.facts.terminal):
            return kept
        reader = self.ctx.reader
        uid = str(meta(obj).uid or "")
        jobs = [j for j in reader.owned(JOBS, uid) if not meta(j).deletion]
        current = [Condition.model_validate(c) for c in (obj.get("status") or {}).get("conditions") or []]
        failure = replica_failure(jobs, lambda job: reader.about(EVENTS, job), current)
        return kept if failure is None else [*kept, failure]

    async def _terminal(self, obj: JSON, conditions: list[Condition], message: str, cause: Exception) -> None:
        """Say a failure no retry can fix on the job (its last condition of ``conditions``) and raise
        :class:`TerminalError`, once: when the job already carries that condition (the reconcile its own
        status write triggers, or any later one), return None, so the error counters stop growing."""
        if _carries(obj, conditions[-1]):
            log.debug("reconcile failure already said on the job", error=message)
            return None
        await self.status.write(obj, None, conditions)
        raise TerminalError(message) from cause

    async def _unexpected(self, obj: JSON, e: Exception) -> None:
        """An exception of ours on this job's input (a bug, not the apiserver's trouble): re-raised (retried
        with backoff) for the first :data:`RECONCILE_ATTEMPTS` - 1 failures at one generation; then said on
        the job as ``Misconfigured`` with reason :data:`REASON_RECONCILE_ERROR` and the exception text, and
        :class:`TerminalError` is raised (not retried until the job or one of its children changes). A job
        already carrying that condition is left be (returns None). Raises ``ApiError`` when the condition
        cannot be written."""
        uid, generation = str(meta(obj).uid or ""), meta(obj).generation
        seen, failures = self._failures.get(uid, (generation, 0))
        failures = (failures if seen == generation else 0) + 1
        self._failures[uid] = (generation, failures)
        if failures < RECONCILE_ATTEMPTS:
            raise e
        if any(
            c.get("type") == COND_MISCONFIGURED and c.get("reason") == REASON_RECONCILE_ERROR
            for c in (obj.get("status") or {}).get("conditions") or []
        ):
            log.warning("reconcile failed again; already said on the job, not retrying", error=repr(e))
            return None
        message = (
            f"the operator failed to reconcile this {self.kind.facts.resource.kind} {RECONCILE_ATTEMPTS} times: {e!r}; "
            "not retried until it or one of its children changes (a bug of the operator: please report it)"
        )
        log.error("reconcile failed; said on the job, not retrying", error=repr(e), exc_info=e)
        try:
            await self.status.write(obj, None, [*kept_conditions(obj), problem(REASON_RECONCILE_ERROR, message)])
        except ApiError:
            raise
        except Exception as again:
            log.error("cannot write the reconcile error on the job", error=repr(again))
        raise TerminalError(message) from e


def declare(
    name: str,
    kind: Kind[Any, Any],
    gang: GangScheduler,
    *,
    telling: Telling,
    announce: bool = True,
    also_owns: tuple[Resource | Owns, ...] = (),
    watches: tuple[Watches, ...] = (),
    status_coalesce_seconds: float = 1.0,
    runs_jobs: bool = True,
) -> Controller:
    """A job controller's declaration: its primary is ``kind.facts.resource``; it owns its Jobs, Services,
    ConfigMaps, Secrets and ``also_owns`` (each carrying ``kind.facts.child_label``; an :class:`Owns` as
    declared) and the gang scheduler's objects; it watches ``watches``, its Jobs' ``FailedCreate`` Events
    (:mod:`trainer.jobs.features.replica_failure`) and the gang scheduler's cluster-wide objects (Volcano
    Queues, mapped to every job). Its caches keep of a Job no Pod template (:func:`kept_job`), of a
    Service its metadata and selector (:func:`kept_service`) and of a Secret no data (:func:`kept_secret`);
    a Job that has just finished brings its owner's reconcile at once (:func:`just_finished`). Its RBAC
    (:meth:`~trainer.framework.controller.Controller.permissions`) is what these imply and the patch of its
    status (:func:`~trainer.jobs.status_writer.status_permission`).

    ``telling``: how the status writer tells the kind's changes. The watch echo of a child write a kind's
    ``settle`` read back is dropped by the event filter (:class:`~trainer.jobs.event_filter.JobEventFilter`),
    as is that of a settled status write. ``announce``: the children one reconcile creates are told in one
    ``SuccessfulCreate`` event. ``status_coalesce_seconds``: ``--status-coalesce-seconds``. ``runs_jobs``
    False: a kind whose children are other jobs (an OptimizationJob's TrainJobs) owns only ``also_owns`` and
    watches no ``FailedCreate`` Events (it has no ``ReplicaFailure``)."""
    primary, label = kind.facts.resource, kind.facts.child_label
    own_writes, clock = OwnWrites(), ProgressClock()

    def build(ctx: Context) -> Reconcile:
        if ctx.metrics is not None:
            reader = ctx.reader
            JobMetrics.of(ctx.metrics).job_states(primary.kind, gang.name, job_states(reader, kind.facts))
            if kind.facts.objective is not None:
                JobMetrics.of(ctx.metrics).best_objectives(primary.kind, lambda: best_objectives(reader, kind.facts))
        return Reconciler(
            kind,
            ctx,
            gang,
            telling=telling,
            announce=announce,
            own_writes=own_writes,
            clock=clock,
            status_coalesce_seconds=status_coalesce_seconds,
            runs_jobs=runs_jobs,
        ).reconcile

    return Controller(
        name=name,
        for_=primary,
        build=build,
        owns=(
            *(job_children(label) if runs_jobs else ()),
            *(r if isinstance(r, Owns) else Owns(r, label) for r in also_owns),
            *gang.owns,
        ),
        watches=(
            *watches,
            *((failed_create_events(primary),) if runs_jobs else ()),
            *(Watches(r, every_primary(primary)) for r in gang.watches),
        ),
        event_filter=JobEventFilter(primary, own_writes, clock).accepts,
        needs=(status_permission(primary),),
    )


def job_children(label: str) -> tuple[Owns, ...]:
    """What a kind that runs Jobs owns, each carrying ``label``: its Jobs (no Pod template kept, a finished
    one urgent), Secrets (no data kept), Services (metadata and selector kept) and ConfigMaps."""
    return (
        Owns(JOBS, label, keep=kept_job, urgent=just_finished),
        Owns(SECRETS, label, keep=kept_secret),
        Owns(SERVICES, label, keep=kept_service),
        Owns(CONFIGMAPS, label),
    )


def job_states(reader: Reader, facts: KindFacts) -> JobStates:
    """How many jobs of kind ``facts`` in the cache that this operator manages and that are not being
    deleted are in each state (:func:`trainer.jobs.features.lifecycle.state_of`), for
    ``kubeflow_trainer_jobs`` at scrape time (:class:`~trainer.jobs.features.lifecycle.JobStates`: each
    job's state derived once per change the cache tells)."""

    def counted(obj: JSON) -> bool:
        return not meta(obj).deletion and managed_by_us(obj, facts.run_policy)

    return JobStates(reader.store(facts.resource), facts, counted)


def best_objectives(reader: Reader, facts: KindFacts) -> list[tuple[str, str, str, float]]:
    """``(namespace, name, metric, value)`` of the best objective (``facts.objective``) of every job of kind
    ``facts`` in the cache that has one, for ``kubeflow_trainer_optimizationjob_best_objective`` at scrape time."""
    out = []
    for obj in reader.items(facts.resource):
        found = facts.objective(obj) if facts.objective is not None and not meta(obj).deletion else None
        if found is not None:
            out.append((str(meta(obj).namespace or ""), str(meta(obj).name or ""), *found))
    return out


def _hash_only(out: JSON) -> JSON:
    """``out`` with no annotation but the desired hash (:data:`~trainer.jobs.child_writer.HASH_ANNOTATION`),
    which stands for all the others: the child writer compares a desired object through the same projection,
    so a changed annotation still shows as a changed hash."""
    metadata = out.get("metadata")
    if not isinstance(metadata, dict):
        return out
    annotations = metadata.get("annotations")
    if not isinstance(annotations, dict) or set(annotations) <= {HASH_ANNOTATION}:
        return out
    kept = {HASH_ANNOTATION: annotations[HASH_ANNOTATION]} if HASH_ANNOTATION in annotations else {}
    return {**out, "metadata": {**metadata, "annotations": kept}}


def kept_job(obj: JSON) -> JSON:
    """What a job controller reads of a child Job: no managedFields, no Pod template, no selector, no
    annotation but the desired hash (:func:`_hash_only`; JobSet's annotations repeat its labels). A Job's Pod
    template is immutable once created (but for a suspended Job's scheduling directives, which the operator
    itself sets), and what the operator wants of it is in the desired-hash annotation."""
    out = _hash_only(strip_managed_fields(obj))
    spec = out.get("spec")
    if not isinstance(spec, dict) or ("template" not in spec and "selector" not in spec):
        return out
    return {**out, "spec": {k: v for k, v in spec.items() if k not in ("template", "selector")}}


def kept_service(obj: JSON) -> JSON:
    """What a job controller reads of a child Service: its metadata (no managedFields, no annotation but
    the desired hash) and ``spec.selector``; the rest of its spec (ports, cluster IPs, families) is compared
    through the hash. A Service changed by hand is put back when its selector changed (as mpi-operator
    does, ``pkg/controller/mpi_job_controller.go`` getOrCreateService) or when the operator's desired Service
    changes; JobSet never rewrites the headless Service it created
    (kubernetes-sigs/jobset ``pkg/controllers/jobset_controller.go`` createHeadlessSvcIfNecessary)."""
    out = _hash_only(strip_managed_fields(obj))
    spec = out.get("spec")
    if not isinstance(spec, dict) or set(spec) <= {"selector"}:
        return out
    return {**out, "spec": {"selector": spec["selector"]} if "selector" in spec else {}}


def kept_secret(obj: JSON) -> JSON:
    """What a job controller reads of a child Secret (an SSH key, created once, never read back): no
    managedFields, no ``data``/``stringData``."""
    out = strip_managed_fields(obj)
    if "data" not in out and "stringData" not in out:
        return out
    return {k: v for k, v in out.items() if k not in ("data", "stringData")}


def just_finished(old: JSON | None, new: JSON) -> bool:
    """Whether a Job's change is its finishing (``Complete`` or ``Failed`` turned True)."""
    return finished(new, JOB_TERMINAL) is not None and not (old and finished(old, JOB_TERMINAL))


def soonest(*waits: float | None) -> float | None:
    """The shortest of the waits (seconds) that are set, or None when none is."""
    known = [w for w in waits if w is not None]
    return min(known) if known else None


def first_error(e: ValidationError) -> str:
    """``field.path: message`` of a validation error's first entry."""
    err = e.errors()[0]
    return f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}"


def invalid(obj: JSON, facts: KindFacts, message: str) -> list[Condition]:
    """The conditions of a job whose spec cannot be read or expanded: its others, and ``Failed`` with the
    kind's reason (TrainJob: ``ResourcesCreationFailed``; MPIJob: ``InvalidSpec``) and ``message``."""
    failed = Condition(type=COND_FAILED, status="True", reason=facts.invalid_reason, message=message)
    return [*kept_conditions(obj, COND_FAILED), failed]


def _carries(obj: JSON, cond: Condition) -> bool:
    """Whether ``obj`` already has ``cond`` (same type, status, reason and message)."""
    return any(
        (c.get("type"), c.get("status"), c.get("reason", ""), c.get("message", ""))
        == (cond.type, cond.status, cond.reason, cond.message)
        for c in (obj.get("status") or {}).get("conditions") or []
    )
