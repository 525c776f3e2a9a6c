"""Conditions, each rule once: which condition is True, when a job or a batch/v1 Job has finished (and
when), whether a batch/v1 Job failed, how a job's problems fold into its one ``Misconfigured``
condition, and how desired conditions merge into the stored ones.

Conditions come in two shapes: the API models (:class:`trainer.api.base.Condition`, what the kinds' status
logic works on) and JSON as the caches keep an object (``{"type", "status", "reason", "message",
"lastTransitionTime"}``); every reader here takes either, or a whole object (JSON with
``status.conditions``). The condition types and reasons themselves are in :mod:`trainer.api` (upstream's
beside their kinds, the operator's own in :mod:`trainer.api.conditions`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from trainer.api.base import Condition
from trainer.api.conditions import COND_MISCONFIGURED, JOB_COMPLETE, JOB_FAILED, Conditions, true_condition
from trainer.api.conditions import condition_true as _true
from trainer.api.conditions import first_true as _first_true
from trainer.api.conditions import listed_conditions as _listed
from trainer.api.jobkinds import MPIJOB, TRAINJOB
from trainer.framework.json_codec import JSON

TRAINJOB_TERMINAL = TRAINJOB.terminal
"""The condition types that end a TrainJob (its facts', ``Failed`` first: it wins when both are True)."""
MPIJOB_TERMINAL = MPIJOB.terminal
"""The condition types that end an MPIJob (its facts')."""
JOB_TERMINAL = (JOB_COMPLETE, JOB_FAILED)
"""The condition types that end a batch/v1 Job."""


def finished(conditions: Conditions, terminal: Sequence[str]) -> str | None:
    """The first type of ``terminal`` whose condition is True, or None while none is: whether (and how) a
    job has finished. ``terminal``: :data:`TRAINJOB_TERMINAL`, :data:`MPIJOB_TERMINAL`, or
    :data:`JOB_TERMINAL` for a batch/v1 Job (``"Complete"`` or ``"Failed"``)."""
    listed = list(_listed(conditions))
    return next((t for t in terminal if _first_true(listed, (t,)) is not None), None)


def finished_at(conditions: Iterable[Condition], terminal: Iterable[str]) -> str | None:
    """The transition time of the first True condition of a ``terminal`` type, or None (also when
    that condition carries no time)."""
    done = true_condition(conditions, *terminal)
    return done.last_transition_time if done is not None else None


def job_failed(job: JSON) -> JSON | None:
    """The ``Failed`` condition (a copy) of a batch/v1 Job when it is True, else None."""
    cond = true_condition(job, JOB_FAILED)
    return dict(cond) if cond is not None else None


def problem(reason: str, message: str) -> Condition:
    """A ``Misconfigured`` condition: what the job asks for cannot be made now (``reason`` says why)."""
    return Condition(type=COND_MISCONFIGURED, status="True", reason=reason, message=message)


def fold_problems(conditions: Iterable[Condition]) -> list[Condition]:
    """``conditions`` with every ``Misconfigured`` condition folded into the first (one per job): its
    place and reason, the messages of all, each once, joined by ``"; "``."""
    out: list[Condition] = []
    first: int | None = None
    messages: list[str] = []
    for c in conditions:
        if c.type != COND_MISCONFIGURED:
            out.append(c)
            continue
        if first is None:
            first = len(out)
            out.append(c)
        messages.append(c.message)
    if first is not None and len(messages) > 1:
        out[first] = out[first].model_copy(update={"message": "; ".join(dict.fromkeys(messages))})
    return out


def kept_conditions(obj: JSON, dropped: str = COND_MISCONFIGURED) -> list[Condition]:
    """The job's conditions but those of type ``dropped`` (which the caller sets anew)."""
    return [Condition.model_validate(c) for c in _listed(obj) if isinstance(c, dict) and c.get("type") != dropped]


def merge_conditions(
    current: list[Condition], desired: list[Condition], now: str, generation: int | None = None
) -> list[Condition]:
    """The new condition list: each desired condition keeps its ``lastTransitionTime`` unless its status
    changed; conditions that became True move to the end (so ``conditions[-1:]``, an MPIJob's State
    column, is the latest thing that happened; a TrainJob's shows its first True one, kubeflow/trainer#3963);
    conditions the controller no longer wants are dropped, except
    Suspended/Running/Complete/Failed history which ``desired`` carries itself."""
    out = [c.model_copy() for c in current]
    by_type = {c.type: i for i, c in enumerate(out)}
    wanted = {c.type for c in desired}
    for new in desired:
        i = by_type.get(new.type)
        if i is not None and out[i].status == new.status:
            if (out[i].reason, out[i].message) != (new.reason, new.message):
                out[i] = out[i].model_copy(update={"reason": new.reason, "message": new.message})
            continue
        fresh = new.model_copy(update={"last_transition_time": now, "observed_generation": generation})
        if i is not None:
            out[i] = fresh
            if _true(new):
                out.append(out.pop(i))
        else:
            out.append(fresh)
        by_type = {c.type: j for j, c in enumerate(out)}
    return [c for c in out if c.type in wanted]


def transitions(before: list[Condition], after: list[Condition]) -> list[Condition]:
    """Conditions of ``after`` that are new or whose status changed (each becomes an event)."""
    old = {c.type: c.status for c in before}
    return [c for c in after if old.get(c.type) != c.status]


def retold(before: list[Condition], after: list[Condition], types: frozenset[str]) -> list[Condition]:
    """Conditions of ``after`` of ``types`` that were True and stay True with another message (each
    becomes an event too)."""
    old = {c.type: c.message for c in before if _true(c)}
    return [c for c in after if _true(c, types) and c.type in old and old[c.type] != c.message]
