"""The one writer of a job's status: conditions merged, events told, the lifecycle observer told, progress
coalesced.

:meth:`StatusWriter.write` merges the desired conditions into the stored ones
(:func:`~trainer.jobs.conditions.merge_conditions`: transition times kept unless a status changes),
renders the kind's whole status, and merge-patches it once, only when it changed. Each condition
transition becomes an event (Warning for the kind's warning conditions turning True), and so does a
new message of a condition the kind retells (``ReplicaFailure``), queued once the status that
records it is stored (a refused status write tells nothing; its retry tells it once). The recorder
writes events in the background (:mod:`trainer.framework.kube.events`, as client-go's recorders do),
so a reconcile waits for its status write only; whoever sees a new condition finds its event a moment
later, unless the recorder dropped it (its queue full). Then, written or not, it tells the kind's
:class:`~trainer.jobs.features.lifecycle.LifecycleObserver` the status as stored before and as written
(if it was), which alone decides what the job metrics count (each transition once).

A change of only a rider (:attr:`Telling.riders`: a TrainJob's ``startTime``) is no news: it is written
with the next change of another field, so a running job's first status write carries both its start and
its first counts. A change of only progress counts (``jobsStatus``, ``replicaStatuses``) is coalesced:
written once it has waited ``--status-coalesce-seconds`` since the change itself. The manager's handler
of a child's change starts the owner's :class:`ProgressClock` (the time of the watch event), so the reconcile that the
children batch (``--children-batch-seconds``) brings later finds the wait done and both sees and writes
the change. A reconcile that finds a progress change whose clock has not started starts it then; the
clock of a job stops when its status is written, found unchanged, or the job is gone. The same
gathering as k8s.io/kubernetes ``pkg/controller/job/job_controller.go``, whose status updates follow pod
changes batched by ``syncJobBatchPeriod`` (1 s).

A job's first status (``Suspended`` or ``Created``, with its event) waits while other jobs are new
(waiting for their first reconcile, or created less than a second ago: :meth:`IdleLane.busy`): the
reconcile writes the children and leaves the job in the queue's idle lane, from which it is queued again
once the burst is served (:meth:`IdleLane.add_when_idle`). In a burst every job's children come first and
the statuses follow (a status patch of a custom resource costs the apiserver about twice a create), at
the latest :data:`FIRST_STATUS_MAX_WAIT` seconds after the job's first reconcile; alone, a job's first
status is written by its first reconcile. A first status that tells of a problem (a warning condition)
is never held.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from trainer.api.base import Condition
from trainer.api.conditions import COND_REPLICA_FAILURE, is_true
from trainer.api.kinds import Resource
from trainer.framework.clock import now_rfc3339
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import Key, key_of
from trainer.framework.kube.projection import strip_managed_fields
from trainer.framework.meta import meta
from trainer.framework.permissions import Permission
from trainer.jobs.conditions import merge_conditions, retold, transitions
from trainer.jobs.features.lifecycle import JobMetrics, LifecycleObserver

if TYPE_CHECKING:
    from trainer.framework.kube.client import KubeClient
    from trainer.framework.kube.events import EventRecorder
    from trainer.framework.metrics import Metrics
    from trainer.jobs.features.own_writes import OwnWrites
    from trainer.jobs.kind import Kind

log = structlog.get_logger("trainer.status")
FIRST_STATUS_MAX_WAIT = 60.0
"""Seconds a job's first status waits at most for the children of newer jobs."""


@dataclass(frozen=True, kw_only=True)
class Telling:
    """How a kind's status changes are told: which conditions are warnings, which transitions go
    untold, which conditions are told again when only their message changes, which status fields only
    count progress (coalesced)."""

    warnings: frozenset[str]
    """Condition types told as Warning events when they turn True (and never held as a first status)."""
    progress_fields: frozenset[str] = frozenset()
    """Status fields that only count progress (``jobsStatus``, ``replicaStatuses``): coalesced."""
    riders: frozenset[str] = frozenset()
    """Status fields never worth a write of their own: a change of one is written only together with a
    change of another field (``startTime`` goes with the first counts of the Jobs it dates, or with the
    condition that says the job resumed or restarted), and waits as long as that change does."""
    quiet: frozenset[tuple[str, str]] = frozenset()
    """Condition ``(type, status)`` transitions written without an event (an MPIJob's ``Running``
    turning False: mpi-operator tells only that it runs)."""
    retold: frozenset[str] = frozenset({COND_REPLICA_FAILURE})
    """Condition types told again (an event) when their message changes while they stay True
    (``ReplicaFailure``: another Job, or another refusal)."""


@dataclass(frozen=True)
class _Due:
    """A status to write: the stored conditions, the merged ones, the whole status, the fields that
    changed, and whether they only count progress."""

    current: list[Condition]
    merged: list[Condition]
    new: JSON
    changed: set[str]
    progress: bool


class IdleLane(Protocol):
    """What a first status asks of the work queue (:class:`trainer.framework.kube.queue.WorkQueue` is one)."""

    def busy(self, besides: Key) -> bool:
        """Whether jobs other than ``besides`` are new."""
        ...

    def add_when_idle(self, key: Key, at_most: float) -> None:
        """Queue ``key`` once no other job is new, or after ``at_most`` seconds."""
        ...


class NoLane:
    """No queue: no job is ever new (a first status is written at once)."""

    def busy(self, besides: Key) -> bool:
        return False

    def add_when_idle(self, key: Key, at_most: float) -> None:
        raise RuntimeError("nothing is busy: nothing waits")


class ProgressClock:
    """Per job key ``(namespace, name)``: the monotonic time (seconds) its unwritten progress began."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._since: dict[Key, float] = {}
        self.now = clock

    def __len__(self) -> int:
        return len(self._since)

    def start(self, key: Key) -> float:
        """Start ``key``'s clock now unless it runs already; returns when it started."""
        return self._since.setdefault(key, self.now())

    def waited(self, key: Key) -> float:
        """Seconds since ``key``'s clock started, starting it now when it was not running (0.0)."""
        return self.now() - self.start(key)

    def stop(self, key: Key) -> None:
        """Stop ``key``'s clock (its status was written or has nothing to write, or the job is gone)."""
        self._since.pop(key, None)


def status_permission(primary: Resource) -> Permission:
    """``patch`` on ``primary``'s ``status``: what a :class:`StatusWriter` of jobs of ``primary`` asks (a
    merge patch of the status subresource)."""
    return Permission(primary, ("patch",), "the job's status: conditions and the kind's status fields", "status")


class StatusWriter:
    """Writes the status of one kind's jobs (see the module docstring); ``delay`` is
    ``--status-coalesce-seconds``; ``metrics`` None counts nowhere, else the job families are
    registered in it (:meth:`~trainer.jobs.features.lifecycle.JobMetrics.of`) and observed under
    ``gang_scheduler`` (``--gang-scheduler-name``)."""

    def __init__(
        self,
        kind: Kind[Any, Any],
        telling: Telling,
        kube: KubeClient,
        recorder: EventRecorder,
        own_writes: OwnWrites,
        clock: ProgressClock,
        *,
        delay: float,
        metrics: Metrics | None,
        lane: IdleLane,
        gang_scheduler: str = "none",
    ) -> None:
        self.kind, self.telling, self.kube, self.recorder, self.own_writes = kind, telling, kube, recorder, own_writes
        self.clock, self.delay, self.lane = clock, delay, lane
        self._first = ProgressClock(clock.now)
        """Since when each job's first status waits for the children of newer jobs."""
        self.observer = (
            LifecycleObserver(JobMetrics.of(metrics), kind.facts, gang_scheduler) if metrics is not None else None
        )
        """Told of every write (the module docstring); None: nothing is counted."""

    async def write(self, obj: JSON, info: Any, desired: list[Condition], fields: JSON | None = None) -> float | None:
        """Merge ``desired`` into ``obj``'s conditions, patch the status once, only if it changed
        (``info`` None: the job could not be expanded; the kind's status then holds its conditions only,
        and ``fields``, status fields of the caller's, when given), then queue the kind's events for
        ``info`` (a restart) and an event per transition; tell the lifecycle observer, written or not.
        Returns the seconds to look again after when a progress-only change was deferred, else None.
        Raises :class:`~trainer.framework.kube.client.ApiError` (nothing is told then)."""
        old: JSON = obj.get("status") or {}
        written: JSON | None = None
        try:
            due = self._due(obj, old, info, desired, fields)
            if not isinstance(due, _Due):
                return due
            res = self.kind.facts.resource
            stored = await self.kube.patch_status(res, meta(obj).namespace, obj["metadata"]["name"], due.new)
            log.debug("status written", changed=sorted(due.changed), status=due.new)
            self._tell(obj, info, due.current, due.merged)  # queued: the recorder writes them
            # Progress counts only: nothing reads them back, so a reconcile of this very version writes nothing.
            self.own_writes.remember(res, strip_managed_fields(stored), settled=due.progress)
            written = due.new
            return None
        finally:  # a failed write too: a pod may have turned ready
            if self.observer is not None:
                self.observer.observed(obj, old, written, info)

    def _due(
        self, obj: JSON, old: JSON, info: Any, desired: list[Condition], fields: JSON | None
    ) -> _Due | float | None:
        """The status to write now over ``old`` (:class:`_Due`), else what :meth:`write` answers: the
        seconds a deferred progress-only change waits still, or None (nothing changed, or a first status
        left in the idle lane)."""
        current = [Condition.model_validate(c) for c in old.get("conditions") or []]
        generation = meta(obj).generation
        merged = merge_conditions(current, desired, now_rfc3339(), generation)
        new = {**self.kind.status(obj, info, [c.to_dict() for c in merged] or None), **(fields or {})}
        key = key_of(obj)
        changed = {k for k in new if old.get(k) != new[k]}
        news = changed - self.telling.riders
        progress = info is not None and news <= self.telling.progress_fields
        if not news or (progress and all(_nothing(old.get(k)) and _nothing(new[k]) for k in news)):
            self.clock.stop(key)
            return None  # nothing, riders alone, or counts all zero where nothing was written yet: no news
        if progress and self.delay > 0:
            waited = self.clock.waited(key)
            if waited < self.delay:
                return self.delay - waited
        if not old and (wait := self._first_wait(key, merged)) is not None:
            self.lane.add_when_idle(key, wait)  # nothing told or written yet
            return None
        self._first.stop(key)
        self.clock.stop(key)
        return _Due(current, merged, new, changed, progress)

    def _tell(self, obj: JSON, info: Any, current: list[Condition], merged: list[Condition]) -> None:
        """Queue the kind's events for ``info`` and one per condition transition (or retold message) from
        ``current`` to ``merged``, but the quiet ones (:meth:`~trainer.framework.kube.events.EventRecorder.emit`)."""
        for type_, reason, message in self.kind.events(info):
            self.recorder.emit(obj, type_, reason, message)
        for cond in [*transitions(current, merged), *retold(current, merged, self.telling.retold)]:
            if (cond.type, cond.status) in self.telling.quiet:
                continue
            warning = is_true([cond], *self.telling.warnings)
            self.recorder.emit(obj, "Warning" if warning else "Normal", cond.reason, cond.message)

    def forget(self, key: Key) -> None:
        """The job ``key`` is gone: stop its clocks."""
        self.clock.stop(key)
        self._first.stop(key)

    def _first_wait(self, key: Key, conditions: list[Condition]) -> float | None:
        """The seconds a job's first status (``conditions``) may still wait behind new jobs, or None when
        it is written now: no other job is new, one of ``conditions`` is a warning turned True, or it has
        waited :data:`FIRST_STATUS_MAX_WAIT` seconds."""
        if not self.lane.busy(key):
            return None
        if is_true(conditions, *self.telling.warnings):
            return None
        left = FIRST_STATUS_MAX_WAIT - self._first.waited(key)
        return left if left > 0 else None


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
