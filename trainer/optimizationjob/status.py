"""An OptimizationJob's trials as its status says them (pure): which trials it has, the best one, its
conditions and its status fields.

Trials are known from the cluster (the TrainJobs it owns) and, for a trial deleted since, from its own
``status.trialResults``: a deleted trial keeps the outcome it had, and one deleted before it finished counts
as failed, so no index is used twice. Conditions follow KEP-3562 §7.4 (kubeflow/trainer
``proposals/2605-optimization-job-crd/README.md``): ``Created`` while it runs, then ``Complete``
(``MaxTrialsReached``, or ``SearchSpaceExhausted`` for a grid smaller than ``numTrials``) when every trial
finished and one reported the objective, or ``Failed`` (``AllTrialsFailed``) when none did.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from api.base import Condition
from api.optimizationjob import (
    COND_COMPLETE,
    COND_CREATED,
    COND_FAILED,
    REASON_ALL_TRIALS_FAILED,
    REASON_CREATED,
    REASON_MAX_TRIALS,
    REASON_SEARCH_EXHAUSTED,
    TRIAL_FAILED,
    TRIAL_RUNNING,
    TRIAL_SUCCEEDED,
    OptimizationJob,
)
from trainer.framework.json_codec import JSON
from trainer.optimizationjob.search import Observed

MESSAGE_MAX = 1024
"""Longest message of a trial in ``status.trialResults``, in characters."""


@dataclass(frozen=True)
class Trial:
    """One trial: its TrainJob's name, what it says (:class:`Observed`) and why it failed."""

    name: str
    observed: Observed
    message: str = ""


def recorded(job: OptimizationJob, present: set[str], index_of: dict[str, int]) -> list[Trial]:
    """The trials ``job``'s ``status.trialResults`` names that the cluster no longer has (not in
    ``present``): each with the outcome it had, or ``Failed`` when it had not finished. ``index_of``: the
    index of each recorded name (names that are not trials of the job are left out)."""
    out = []
    for r in (job.status.trial_results if job.status else None) or []:
        if r.name in present or r.name not in index_of:
            continue
        index = index_of[r.name]
        try:
            value = float(r.value) if r.state == TRIAL_SUCCEEDED and r.value is not None else None
        except ValueError:  # not as this controller wrote it
            value = None
        if value is not None and math.isfinite(value):
            out.append(Trial(r.name, Observed(index, {}, TRIAL_SUCCEEDED, value)))
        elif r.state == TRIAL_FAILED:
            out.append(Trial(r.name, Observed(index, {}, TRIAL_FAILED), r.message or ""))
        else:
            out.append(Trial(r.name, Observed(index, {}, TRIAL_FAILED), "TrainJob deleted before it finished"))
    return out


def best(job: OptimizationJob, trials: list[Trial]) -> Trial | None:
    """The succeeded trial with the best objective value (``direction``), the lowest index on a tie; None
    when none succeeded."""
    done = [t for t in trials if t.observed.state == TRIAL_SUCCEEDED and t.observed.value is not None]
    if not done:
        return None
    sign = -1.0 if job.spec.objectives[0].direction == "Maximize" else 1.0
    return min(done, key=lambda t: (sign * (t.observed.value or 0.0), t.observed.index))


def finished(trials: list[Trial], limit: int) -> bool:
    """Whether the search is over: ``limit`` trials made (``numTrials``, or the grid's size when smaller) and
    none running."""
    return len({t.observed.index for t in trials}) >= limit and not any(
        t.observed.state == TRIAL_RUNNING for t in trials
    )


def conditions(job: OptimizationJob, trials: list[Trial], limit: int) -> list[Condition]:
    """``Created`` (True), and once :func:`finished`, ``Complete`` or ``Failed`` with a message that counts
    the trials and names the best."""
    num = job.spec.num_trials or 1
    created = Condition(
        type=COND_CREATED,
        status="True",
        reason=REASON_CREATED,
        message=f"OptimizationJob accepted: {limit} trials, at most {job.spec.parallel_trials or 1} at a time",
    )
    if not finished(trials, limit):
        return [created]
    top = best(job, trials)
    succeeded = sum(t.observed.state == TRIAL_SUCCEEDED for t in trials)
    if top is None:
        message = f"all {len(trials)} trials failed or finished without the objective metric; see status.trialResults"
        return [created, Condition(type=COND_FAILED, status="True", reason=REASON_ALL_TRIALS_FAILED, message=message)]
    reason = REASON_MAX_TRIALS if limit >= num else REASON_SEARCH_EXHAUSTED
    metric = job.spec.objectives[0].metric
    message = (
        f"{succeeded} of {len(trials)} trials reported {metric}; the best is {top.name} "
        f"({metric}={top.observed.value!r})"
    )
    if reason == REASON_SEARCH_EXHAUSTED:
        message += f"; the grid has {limit} points, fewer than numTrials {num}"
    return [created, Condition(type=COND_COMPLETE, status="True", reason=reason, message=message)]


def status_fields(job: OptimizationJob, trials: list[Trial], parameters: dict[str, dict[str, str]]) -> JSON:
    """The status fields besides the conditions: ``result`` (the best trial and its parameters, from
    ``parameters`` by trial name, else those the stored result has of it), the trial counts and
    ``trialResults`` in index order."""
    top = best(job, trials)
    result: JSON | None = None
    if top is not None:
        params = parameters.get(top.name)
        old = job.status.result if job.status else None
        if not params and old is not None and old.train_job_name == top.name:
            params = {p.name: p.value for p in old.parameters or []}
        result = {"trainJobName": top.name, "parameters": [{"name": n, "value": v} for n, v in (params or {}).items()]}
    ordered = sorted(trials, key=lambda t: t.observed.index)
    results = []
    for t in ordered:
        entry: JSON = {"name": t.name, "state": t.observed.state}
        if t.observed.value is not None:
            entry["value"] = repr(t.observed.value)
        if t.message:
            entry["message"] = t.message[:MESSAGE_MAX]
        results.append(entry)
    return {
        "result": result,
        "trials": len(trials),
        "trialsRunning": sum(t.observed.state == TRIAL_RUNNING for t in trials),
        "trialsSucceeded": sum(t.observed.state == TRIAL_SUCCEEDED for t in trials),
        "trialsFailed": sum(t.observed.state == TRIAL_FAILED for t in trials),
        "trialResults": results or None,
    }
