"""OptimizationJobs in the CLI: what ``get``/``list`` (and ``get -w``), ``describe`` and ``wait`` print of them
(``optj``): their state (``Suspended`` while ``spec.suspend`` holds the search), the trials that succeeded,
failed, were stopped early (``pruneAlgorithm``) or run, the search and early-stopping algorithms, their
trials table (index, name, state, parameters, objective) and the best trial so far."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

import typer
from rich.table import Table

from trainer.api.kinds import OPTIMIZATION_JOBS
from trainer.api.optimizationjob import OptimizationJob
from trainer.cli.errors import run
from trainer.cli.root import TABLES, Settings
from trainer.cli.tables import age, as_list, console, show, table
from trainer.client import AsyncTrainerClient
from trainer.client.optimize import (
    Trial,
    algorithm_text,
    best_trial,
    early_stopping_text,
    list_trials,
    optimization_status,
)
from trainer.framework.json_codec import JSON

OPTIMIZATION_COLUMNS = (
    "NAME",
    "STATE",
    "METRIC",
    "TRIALS",
    "SUCCEEDED",
    "FAILED",
    "STOPPED",
    "RUNNING",
    "BEST",
    "AGE",
)
"""STOPPED: the trials ``pruneAlgorithm`` stopped early (``status.trialsEarlyStopped``)."""
TRIAL_COLUMNS = ("INDEX", "NAME", "STATE", "PARAMETERS", "OBJECTIVE")


def objective_text(job: OptimizationJob) -> str:
    """``loss (Minimize)``: the objective metric and its direction."""
    o = job.spec.objectives[0]
    return f"{o.metric} ({o.direction or 'Minimize'})"


def best_text(job: OptimizationJob) -> str:
    """``<trial> (<metric>=<value>)`` of ``status.result`` (its value from ``trialResults``); ``-`` before one."""
    result = job.status.result if job.status else None
    if result is None:
        return "-"
    values = {r.name: r.value for r in (job.status.trial_results if job.status else None) or []}
    value = values.get(result.train_job_name)
    return f"{result.train_job_name} ({job.spec.objectives[0].metric}={value})" if value else result.train_job_name


def optimization_row(job: OptimizationJob, now: datetime | None = None) -> list[str]:
    """The cells of :data:`OPTIMIZATION_COLUMNS`: TRIALS is created of ``numTrials``."""
    s = job.status
    return [
        job.metadata.name or "",
        optimization_status(job),
        objective_text(job),
        f"{(s.trials if s else None) or 0}/{job.spec.num_trials or 1}",
        str((s.trials_succeeded if s else None) or 0),
        str((s.trials_failed if s else None) or 0),
        str((s.trials_early_stopped if s else None) or 0),
        str((s.trials_running if s else None) or 0),
        best_text(job),
        age(job.metadata.creation_timestamp, now),
    ]


def optimization_rows(
    jobs: Iterable[OptimizationJob], namespaces: bool = False, now: datetime | None = None
) -> tuple[list[str], list[list[str]]]:
    """The header (:data:`OPTIMIZATION_COLUMNS`, NAMESPACE first with ``namespaces``) and the rows of ``jobs``."""
    header = [*(["NAMESPACE"] if namespaces else []), *OPTIMIZATION_COLUMNS]
    rows = [[*([job.metadata.namespace or ""] if namespaces else []), *optimization_row(job, now)] for job in jobs]
    return header, rows


def optimizations_table(
    jobs: Iterable[OptimizationJob], namespaces: bool = False, now: datetime | None = None
) -> Table:
    """:func:`optimization_rows` of ``jobs`` as a table."""
    header, rows = optimization_rows(jobs, namespaces, now)
    t = table(*header)
    for row in rows:
        t.add_row(*row)
    return t


def parameters_text(parameters: dict[str, str]) -> str:
    """``lr=0.01, batch=32``; ``-`` without any."""
    return ", ".join(f"{k}={v}" for k, v in parameters.items()) or "-"


def trials_table(trials: Sequence[Trial], best: Trial | None = None) -> Table:
    """The ``Trials:`` section: :data:`TRIAL_COLUMNS`, the best trial's STATE marked ``(best)``, a failed
    trial's message after its state; ``<none>`` before the first trial."""
    t = table(*TRIAL_COLUMNS, title="Trials:")
    for trial in trials:
        state = trial.state + (" (best)" if best is not None and trial.name == best.name else "")
        if trial.message:
            state += f": {trial.message}"
        index = str(trial.index) if trial.index >= 0 else "?"
        t.add_row(index, trial.name, state, parameters_text(trial.parameters), trial.objective or "-")
    if not trials:
        t.add_row("<none>", "", "", "", "")
    return t


def head_rows(job: OptimizationJob, now: datetime | None = None) -> list[tuple[str, str]]:
    """The ``key: value`` lines of ``describe optj``: name, namespace, state with the finishing (or holding:
    ``Suspended``) condition's reason and message, objective, algorithm, early stopping, trials, the best
    trial and its parameters, creation."""
    m, spec = job.metadata, job.spec
    state = optimization_status(job)
    finished = [
        c for c in (job.status.conditions if job.status else None) or [] if c.type == state and c.status == "True"
    ]
    if finished and finished[0].reason:
        state += f" ({finished[0].reason}: {finished[0].message or ''})"
    result = job.status.result if job.status else None
    rows = [
        ("Name:", m.name or ""),
        ("Namespace:", m.namespace or ""),
        ("Kind:", job.kind),
        ("State:", state),
        ("Objective:", objective_text(job)),
        ("Algorithm:", algorithm_text(job)),
        ("Early stopping:", early_stopping_text(job)),
        ("Parameters:", ", ".join(p.name for p in spec.parameters)),
        ("Trials:", f"{spec.num_trials or 1} in all, {spec.parallel_trials or 1} at a time"),
        ("Best:", best_text(job)),
    ]
    if result is not None:
        rows.append(("Best parameters:", parameters_text({p.name: p.value for p in result.parameters or []})))
    rows.append(("Created:", f"{m.creation_timestamp or ''} ({age(m.creation_timestamp, now)} ago)"))
    return rows


def describe_tables(job: OptimizationJob, trials: Sequence[Trial], now: datetime | None = None) -> list[Table]:
    """What ``describe optj`` prints: :func:`head_rows`, the conditions and :func:`trials_table`."""
    head = Table(box=None, show_header=False, pad_edge=False)
    head.add_column()
    head.add_column()
    for key, value in head_rows(job, now):
        head.add_row(key, value)
    conditions = table("TYPE", "STATUS", "REASON", "MESSAGE", "LAST TRANSITION", title="Conditions:")
    for c in (job.status.conditions if job.status else None) or []:
        conditions.add_row(c.type, c.status, c.reason or "", c.message or "", c.last_transition_time or "")
    return [head, conditions, trials_table(trials, best_trial(job, list(trials)))]


def describe_data(job: OptimizationJob, trials: Sequence[Trial]) -> JSON:
    """What ``describe optj -o json|yaml`` prints: the job, its state and its trials."""
    best = best_trial(job, list(trials))
    return {
        "optimizationJob": job.to_dict(),
        "state": optimization_status(job),
        "best": best.to_dict() if best else None,
        "trials": [t.to_dict() for t in trials],
    }


def list_optimization_jobs(s: Settings, *, selector: str | None = None, all_namespaces: bool = False) -> None:
    """``get optj``: the OptimizationJobs, oldest first; ``No OptimizationJobs found.`` on stderr without any."""

    async def listed(c: AsyncTrainerClient) -> list[OptimizationJob]:
        return await c.list_optimization_jobs(label_selector=selector, all_namespaces=all_namespaces)

    jobs = run(s, listed, crd=OPTIMIZATION_JOBS)
    if not jobs and s.output in TABLES:
        typer.echo("No OptimizationJobs found.", err=True)
        return
    show(as_list(jobs), s.output, lambda: [optimizations_table(jobs, namespaces=all_namespaces)], jobs)


def get_optimization_job(s: Settings, name: str) -> None:
    """``get optj NAME``: one OptimizationJob's row (or JSON/YAML, or name)."""
    job = run(s, lambda c: c.get_optimization_job(name), crd=OPTIMIZATION_JOBS)
    show(job, s.output, lambda: [optimizations_table([job])], [job])


def describe_optimization_job(s: Settings, name: str) -> None:
    """``describe optj NAME``: :func:`describe_tables` (or :func:`describe_data` as JSON/YAML)."""

    async def gather(c: AsyncTrainerClient) -> tuple[OptimizationJob, list[Trial]]:
        job = await c.get_optimization_job(name)
        return job, await list_trials(c.kube, c.namespace, job)

    job, trials = run(s, gather, crd=OPTIMIZATION_JOBS)
    show(describe_data(job, trials), s.output, lambda: describe_tables(job, trials), [job])


def wait_optimization_job(s: Settings, name: str, wanted: set[str], timeout: float) -> None:
    """``wait optj NAME``: until its status is one of ``wanted``, printing each change of its trial counts
    on stderr; then ``<name> <status>`` (or the job as JSON/YAML)."""
    err = console(stderr=True)
    seen: list[str] = []

    def progress(job: OptimizationJob) -> None:
        row = dict(zip(OPTIMIZATION_COLUMNS, optimization_row(job), strict=True))
        text = (
            f"{name}: {row['STATE']} trials {row['TRIALS']} ({row['SUCCEEDED']} succeeded, {row['FAILED']} failed, "
            f"{row['STOPPED']} stopped early, {row['RUNNING']} running) best {row['BEST']}"
        )
        if not seen or seen[-1] != text:
            seen.append(text)
            err.print(text)

    async def watch(c: AsyncTrainerClient) -> OptimizationJob:
        return await c.wait_for_optimization_job_status(name, wanted, timeout, callbacks=[progress])

    job = run(s, watch, crd=OPTIMIZATION_JOBS)
    if s.output in TABLES:
        typer.echo(f"{name} {optimization_status(job)}")
    else:
        show(job, s.output, list, [job])
