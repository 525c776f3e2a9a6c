"""The one writer of a job's status: conditions merged, events told, outcomes counted, progress coalesced.

:meth:`StatusWriter.write` merges the desired conditions into the stored ones
(:func:`~trainer.jobs.conditions.merge_conditions`: transition times kept unless a status changes),
renders the kind's whole status, and merge-patches it once, only when it changed. Each condition
transition becomes an event (Warning for the kind's warning conditions turning True), and so does a
new message of a condition the kind retells (``ReplicaFailure``), recorded before the status so
whoever sees the condition finds its event; each outcome (first status, success, failure, restart) is
counted once per job in :class:`~trainer.framework.metrics.Metrics`.

The lifecycle metrics (:mod:`trainer.jobs.features.lifecycle`) are observed after the status write that records
what they measure, from the status as stored before (``old``) and as written (``new``), so a reconcile
that finds nothing to write observes nothing, and an operator restarted over settled jobs neither. A
finish, a failure, a restart and a refusal are transitions of the status itself (a terminal condition
turned True, ``restarts`` grown, a refusal's condition turned True): each is observed once, and a
second write of the same transition from a cache that had not seen the first is recognised by
``(job uid, event, marker)`` remembered (:data:`MAX_COUNTED` of them). The first start (admission
wait) and the first ready pod (startup, looked for at every write, changed or not: the kind's
``info.pod_ready``) are not kept in the status (a suspend clears ``startTime``), so they are observed
only for a job this process saw without a status, once each (remembered, for :data:`MAX_COUNTED` jobs):
a job an earlier process (or leader) saw born is never observed twice, at the price of its milestones
that fall after the restart not being observed at all.

A change of only progress counts (``jobsStatus``, ``replicaStatuses``) is coalesced: written once it has
waited ``--status-coalesce-seconds`` since the change itself. The manager's handler of a child's change
starts the owner's :class:`ProgressClock` (the time of the watch event), so the reconcile that the
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
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from api.base import Condition
from api.conditions import COND_REPLICA_FAILURE
from api.kinds import Resource
from api.trainer_v1alpha1 import COND_FAILED
from trainer.framework.bounded import BoundedDict
from trainer.framework.clock import now_rfc3339
from trainer.framework.json_codec import JSON
from trainer.framework.kube.cache import Key, key_of
from trainer.framework.kube.projection import strip_managed_fields
from trainer.framework.meta import meta
from trainer.framework.permissions import Permission
from trainer.jobs.conditions import is_true, merge_conditions, retold, transitions, true_condition
from trainer.jobs.features import lifecycle

if TYPE_CHECKING:
    from trainer.framework.kube.client import KubeClient
    from trainer.framework.kube.events import EventRecorder
    from trainer.framework.metrics import Metrics
    from trainer.jobs.features.own_writes import OwnWrites
    from trainer.jobs.kind import Kind

log = structlog.get_logger("trainer.status")
MAX_COUNTED = 100_000
"""Outcomes remembered as counted at most (the oldest go first)."""
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
    quiet: frozenset[tuple[str, str]] = frozenset()
    """Condition ``(type, status)`` transitions written without an event (an MPIJob's ``Running``
    turning False: mpi-operator tells only that it runs)."""
    retold: frozenset[str] = frozenset({COND_REPLICA_FAILURE})
    """Condition types told again (an event) when their message changes while they stay True
    (``ReplicaFailure``: another Job, or another refusal)."""


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
    ``--status-coalesce-seconds``; ``metrics`` None counts nowhere."""

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
        self.clock, self.delay, self.metrics = clock, delay, metrics
        self.lane = lane
        self._first = ProgressClock(clock.now)
        """Since when each job's first status waits for the children of newer jobs."""
        self.gang_scheduler = gang_scheduler
        """The ``gang_scheduler`` label of the lifecycle metrics (``--gang-scheduler-name``)."""
        self._counted: BoundedDict[tuple[str, str, int | str], None] = BoundedDict(MAX_COUNTED)
        """Outcome events already counted: (job uid, event, restart or marker)."""
        self._born: BoundedDict[str, set[str]] = BoundedDict(MAX_COUNTED)
        """Jobs whose first status this process wrote: uid -> milestones observed (admitted, running)."""

    async def write(self, obj: JSON, info: Any, desired: list[Condition], fields: JSON | None = None) -> float | None:
        """Merge ``desired`` into ``obj``'s conditions, record the kind's events for ``info`` (a restart)
        and an event per transition, then
        patch the status once, only if it changed (``info`` None: the job could not be expanded; the
        kind's status then holds its conditions only, and ``fields``, status fields of the caller's, when
        given). Returns the seconds to look again after when a
        progress-only change was deferred, else None. Raises :class:`~trainer.framework.kube.client.ApiError`."""
        old = obj.get("status") or {}
        self._startup(obj, old, info)
        current = [Condition.model_validate(c) for c in old.get("conditions") or []]
        generation = meta(obj).generation
        merged = merge_conditions(current, desired, now_rfc3339(), generation)
        new = {**self.kind.status(obj, info, [c.to_dict() for c in merged] or None), **(fields or {})}
        key = key_of(obj)
        changed = {k for k in new if old.get(k) != new[k]}
        if not changed:
            self.clock.stop(key)
            return None
        progress = info is not None and changed <= self.telling.progress_fields
        if progress and all(_nothing(old.get(k)) and _nothing(new[k]) for k in changed):
            self.clock.stop(key)
            return None  # counts that are all zero, where nothing was written yet: no news
        if progress and self.delay > 0:
            waited = self.clock.waited(key)
            if waited < self.delay:
                return self.delay - waited
        if not old and (wait := self._first_wait(key, merged)) is not None:
            self.lane.add_when_idle(key, wait)  # nothing told or written yet
            return None
        self._first.stop(key)
        self.clock.stop(key)
        # Events first: whoever sees the new condition finds its event too.
        for type_, reason, message in self.kind.events(info):
            await self.recorder.emit(obj, type_, reason, message)
        for cond in [*transitions(current, merged), *retold(current, merged, self.telling.retold)]:
            if (cond.type, cond.status) in self.telling.quiet:
                continue
            warning = is_true([cond], *self.telling.warnings)
            await self.recorder.emit(obj, "Warning" if warning else "Normal", cond.reason, cond.message)
        res = self.kind.facts.resource
        stored = await self.kube.patch_status(res, meta(obj).namespace, obj["metadata"]["name"], new)
        log.debug("status written", changed=sorted(changed), status=new)
        # Progress counts only: nothing reads them back, so a reconcile of this very version writes nothing.
        self.own_writes.remember(res, strip_managed_fields(stored), settled=progress)
        self._count_outcomes(obj, old, new)
        self._observe(obj, old, new)
        return None

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

    def _count_outcomes(self, obj: JSON, old: JSON, new: JSON) -> None:
        """Count what this status write records: the first status, success, failure, a restart; each
        once per job (a reconcile on a cache that has not seen the previous write yet writes again)."""
        if self.metrics is None:
            return

        def true(status: JSON, type_: str) -> JSON | None:
            conditions: list[JSON] = status.get("conditions") or []
            return true_condition(conditions, type_)

        kind, ns = self.kind.facts.resource.kind, str(obj["metadata"].get("namespace") or "")
        runtime = str(((obj.get("spec") or {}).get("runtimeRef") or {}).get("name") or "")
        uid = str(obj["metadata"].get("uid") or "")
        failed = true(new, COND_FAILED)  # an MPIJob's too
        succeeded = self.kind.facts.succeeded
        events = [
            ("created", "", not old),
            ("succeeded", "", bool(true(new, succeeded)) and not true(old, succeeded)),
            ("failed", str((failed or {}).get("reason") or ""), bool(failed) and not true(old, COND_FAILED)),
            ("restarted", "", int(new.get("restarts") or 0) > int(old.get("restarts") or 0)),
        ]
        for event, reason, happened in events:
            once = (uid, event, int(new.get("restarts") or 0) if event == "restarted" else 0)
            if not happened or once in self._counted:
                continue
            self._counted[once] = None
            self.metrics.outcome(event, kind, ns, runtime, reason)

    def _startup(self, obj: JSON, old: JSON, info: Any) -> None:
        """Observe the job's startup (creation to its first ready pod, ``info.pod_ready``) when this
        process saw it born (no status yet: remembered from now on) and has not observed it yet. Asked
        on every write, changed or not: a pod turning ready need not change the status."""
        if self.metrics is None:
            return
        uid = str(obj["metadata"].get("uid") or "")
        if not old:
            self._born.setdefault(uid, set())
        born = self._born.get(uid)
        if born is None or "running" in born or info is None or not info.pod_ready:
            return
        born.add("running")
        startup = lifecycle.seconds_between(obj["metadata"].get("creationTimestamp"), datetime.now(UTC))
        if startup is not None:
            kind = self.kind.facts.resource.kind
            self.metrics.startup.labels(kind, self.gang_scheduler).observe(startup)

    def _observe(self, obj: JSON, old: JSON, new: JSON) -> None:
        """Observe the lifecycle metrics the write of ``new`` over ``old`` records (see the module
        docstring for the rule that keeps each once)."""
        m = self.metrics
        if m is None:
            return
        facts = self.kind.facts
        kind, gs = facts.resource.kind, self.gang_scheduler
        uid = str(obj["metadata"].get("uid") or "")

        def once(event: str, marker: int | str = 0) -> bool:
            key = (uid, event, marker)
            if key in self._counted:
                return False
            self._counted[key] = None
            return True

        born = self._born.get(uid)
        if born is not None and "admitted" not in born and lifecycle.admitted(obj, new, facts):
            born.add("admitted")
            wait = lifecycle.seconds_between(obj["metadata"].get("creationTimestamp"), new.get("startTime"))
            if wait is not None:
                m.admission_wait.labels(kind, gs).observe(wait)
        end = lifecycle.finish(old, new, facts)
        if end is not None and once("finished"):
            if end.run_seconds is not None:
                m.run.labels(kind, gs, end.result).observe(end.run_seconds)
            if end.result == "failed":
                m.failures.labels(kind, gs, end.reason).inc()
        restarts = int(new.get("restarts") or 0)
        restarted = restarts > int(old.get("restarts") or 0)
        turned = _restart_turned(old, new)
        if (restarted or turned) and once("restart", f"{restarts}/{turned[0] if turned else ''}"):
            m.restarts.labels(kind, gs, lifecycle.restart_reason(new)).inc()
        for reason, marker in lifecycle.refusals(old, new):
            if once("refused:" + reason, marker):
                m.refusals.labels(kind, reason).inc()


def _restart_turned(old: JSON, new: JSON) -> list[str]:
    """The transition times of restart conditions (JobSet's ``RestartingJobSet``, an MPIJob's
    ``Restarting``) True in ``new`` and not in ``old``."""
    out = []
    for type_ in lifecycle.RESTART_CONDITIONS:
        now = true_condition(new.get("conditions") or [], type_)
        if now is not None and true_condition(old.get("conditions") or [], type_) is None:
            out.append(str(now.get("lastTransitionTime") or ""))
    return out


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
