"""An OptimizationJob's trials as its status says them (pure): which trials it has, the best one, its
conditions and its status fields.

Trials are known from the cluster (the TrainJobs it owns) and, for a trial deleted since, from its own
``status.trialResults``: a deleted trial keeps the outcome it had, and one deleted before it finished counts
as failed, so no index is used twice. Conditions follow KEP-3562 §7.4 (kubeflow/trainer
``proposals/2605-optimization-job-crd/README.md``): ``Created`` while it runs, then ``Complete``
(``MaxTrialsReached``, or ``SearchSpaceExhausted`` for a grid smaller than ``numTrials``) when every trial
finished and one reported the objective, or ``Failed`` (``AllTrialsFailed``) when none did; ``Suspended``
while ``spec.suspend`` holds the search (False, ``Resumed``, once it no longer does).

Median stopping (``pruneAlgorithm.median``, :func:`to_stop`) compares what the trials reported while they
ran: the cluster keeps only a trial's latest ``trainerStatus``, so each trial's ``status.trialResults``
entry keeps the reports the controller saw, one per tenth of its progress (:func:`merge_reports`).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from trainer.api.base import Condition
from trainer.api.optimizationjob import (
    COND_COMPLETE,
    COND_CREATED,
    COND_FAILED,
    COND_SUSPENDED,
    MAX_REPORTS,
    REASON_ALL_TRIALS_FAILED,
    REASON_CREATED,
    REASON_MAX_TRIALS,
    REASON_RESUMED,
    REASON_SEARCH_EXHAUSTED,
    REASON_SUSPENDED,
    TRIAL_EARLY_STOPPED,
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
    """One trial: its TrainJob's name, what it says (:class:`Observed`), why it failed or stopped, and
    what it reports now (progress percentage, objective; running trials)."""

    name: str
    observed: Observed
    message: str = ""
    now: tuple[int, float] | None = None


def recalled_reports(job: OptimizationJob) -> dict[str, tuple[tuple[int, float], ...]]:
    """The reports each trial's ``status.trialResults`` entry keeps, by trial name (unreadable ones left out)."""
    out: dict[str, tuple[tuple[int, float], ...]] = {}
    for r in (job.status.trial_results if job.status else None) or []:
        kept = []
        for rep in r.reports or []:
            try:
                value = float(rep.value)
            except ValueError:
                continue
            if math.isfinite(value):
                kept.append((rep.progress, value))
        out[r.name] = tuple(kept)
    return out


def merge_reports(kept: tuple[tuple[int, float], ...], now: tuple[int, float] | None) -> tuple[tuple[int, float], ...]:
    """``kept`` with the report ``now`` added when it is in a tenth of the progress ``kept`` has none of (the
    first report seen in each tenth is kept), by progress, at most ``MAX_REPORTS``."""
    out = dict(kept)
    if now is not None and now[0] // 10 not in {p // 10 for p in out}:
        out[now[0]] = now[1]
    return tuple(sorted(out.items()))[:MAX_REPORTS]


def recorded(job: OptimizationJob, present: set[str], index_of: dict[str, int]) -> list[Trial]:
    """The trials ``job``'s ``status.trialResults`` names that the cluster no longer has (not in
    ``present``): each with the outcome it had, or ``Failed`` when it had not finished. ``index_of``: the
    index of each recorded name (names that are not trials of the job are left out)."""
    out = []
    kept = recalled_reports(job)
    for r in (job.status.trial_results if job.status else None) or []:
        if r.name in present or r.name not in index_of:
            continue
        index = index_of[r.name]
        try:
            value = float(r.value) if r.state == TRIAL_SUCCEEDED and r.value is not None else None
        except ValueError:  # not as this controller wrote it
            value = None
        reports = kept.get(r.name, ())
        if value is not None and math.isfinite(value):
            out.append(Trial(r.name, Observed(index, {}, TRIAL_SUCCEEDED, value, reports)))
        elif r.state == TRIAL_EARLY_STOPPED:
            out.append(Trial(r.name, Observed(index, {}, TRIAL_EARLY_STOPPED, None, reports), r.message or ""))
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


def _at(reports: tuple[tuple[int, float], ...], progress: int) -> float | None:
    """The value of the last of ``reports`` at or before ``progress``, None when there is none."""
    before = [v for p, v in reports if p <= progress]
    return before[-1] if before else None


def to_stop(job: OptimizationJob, trials: list[Trial]) -> dict[str, str]:
    """The running trials median stopping stops now (``pruneAlgorithm.median``), by name, each with why: a
    running trial whose latest report, at progress ``p >= startStep``, is worse (``direction``) than the
    median of the succeeded trials' values at ``p`` (each one's last report at or before ``p``, its final
    value counting as its report at 100), when at least ``minTrials`` succeeded trials have one; as Katib's
    ``medianstop`` and Optuna's ``MedianPruner``, which compare with completed trials only. Empty without
    ``pruneAlgorithm``. Reports are what the controller saw (one per tenth of the progress), so which
    trials are stopped depends on when the trainers post and the controller looks."""
    pruner = job.spec.prune_algorithm.median if job.spec.prune_algorithm is not None else None
    if pruner is None:
        return {}
    start = pruner.start_step or 0
    least = pruner.min_trials or 3
    sign = -1.0 if job.spec.objectives[0].direction == "Maximize" else 1.0
    metric = job.spec.objectives[0].metric
    done = [
        (*[r for r in t.observed.reports if r[0] < 100], (100, t.observed.value))
        for t in trials
        if t.observed.state == TRIAL_SUCCEEDED and t.observed.value is not None
    ]
    out = {}
    for t in trials:
        if t.observed.state != TRIAL_RUNNING or (t.now is None and not t.observed.reports):
            continue
        progress, value = t.now or t.observed.reports[-1]
        if progress < start:
            continue
        others = [v for reports in done if (v := _at(reports, progress)) is not None]
        if len(others) < least:
            continue
        median = statistics.median(others)
        if sign * value > sign * median:
            out[t.name] = (
                f"early stopped by median stopping: {metric}={value!r} at {progress}% progress is worse than "
                f"the median {median!r} of {len(others)} succeeded trials at that progress"
            )
    return out


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
    held = _suspended(job, trials)
    if not finished(trials, limit):
        return [created, *held]
    top = best(job, trials)
    succeeded = sum(t.observed.state == TRIAL_SUCCEEDED for t in trials)
    if top is None:
        message = f"all {len(trials)} trials failed or finished without the objective metric; see status.trialResults"
        failed = Condition(type=COND_FAILED, status="True", reason=REASON_ALL_TRIALS_FAILED, message=message)
        return [created, *held, failed]
    reason = REASON_MAX_TRIALS if limit >= num else REASON_SEARCH_EXHAUSTED
    metric = job.spec.objectives[0].metric
    message = (
        f"{succeeded} of {len(trials)} trials reported {metric}; the best is {top.name} "
        f"({metric}={top.observed.value!r})"
    )
    if reason == REASON_SEARCH_EXHAUSTED:
        message += f"; the grid has {limit} points, fewer than numTrials {num}"
    return [created, *held, Condition(type=COND_COMPLETE, status="True", reason=reason, message=message)]


def _suspended(job: OptimizationJob, trials: list[Trial]) -> list[Condition]:
    """``Suspended`` True while ``spec.suspend`` holds; False (``Resumed``) once it no longer does after it
    did; none when it never did."""
    if job.spec.suspend:
        running = sum(t.observed.state == TRIAL_RUNNING for t in trials)
        message = f"spec.suspend: no trial is created and the {running} running ones are suspended"
        return [Condition(type=COND_SUSPENDED, status="True", reason=REASON_SUSPENDED, message=message)]
    old = [c for c in (job.status.conditions if job.status else None) or [] if c.type == COND_SUSPENDED]
    if not old:
        return []
    message = "spec.suspend is false: the running trials are resumed and the search goes on"
    return [Condition(type=COND_SUSPENDED, status="False", reason=REASON_RESUMED, message=message)]


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
        if job.spec.prune_algorithm is not None and t.observed.reports:
            entry["reports"] = [{"progress": p, "value": repr(v)} for p, v in t.observed.reports]
        results.append(entry)
    return {
        "result": result,
        "trials": len(trials),
        "trialsRunning": sum(t.observed.state == TRIAL_RUNNING for t in trials),
        "trialsSucceeded": sum(t.observed.state == TRIAL_SUCCEEDED for t in trials),
        "trialsFailed": sum(t.observed.state == TRIAL_FAILED for t in trials),
        "trialsEarlyStopped": sum(t.observed.state == TRIAL_EARLY_STOPPED for t in trials) or None,
        "trialResults": results or None,
    }
