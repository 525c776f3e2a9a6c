"""The parameters of an OptimizationJob's next trials, from the trials it has (pure: trials in, assignments out).

Each call builds an Optuna study in memory from the trials read back from the cluster (their parameters,
outcomes and objective values), so a restart of the operator, or any reconcile, comes to the same answer
and nothing is kept between calls. A trial's parameters depend only on the job's seed and the trial's
index, so a trial created twice (a reconcile that ran before the cache saw the first create) is the same
trial, and the sequence of a seeded job is reproduced on any cluster:

- ``random``: trial ``i`` is drawn by Optuna's ``RandomSampler`` seeded with :func:`trial_seed` of the
  job's seed and ``i``;
- ``grid``: trial ``i`` is point ``i`` of the product of the categorical choices in the order Optuna's
  ``GridSampler`` shuffles it with the job's seed (``GridSampler`` gives trial number ``i`` grid point
  ``i``); an index past the grid has no parameters (:func:`grid_size`);
- ``tpe``: trial ``i`` is asked of Optuna's ``TPESampler`` seeded with :func:`trial_seed` of the job's seed
  and ``i``, over a study of the trials below ``i``: the succeeded ones with their values, the early
  stopped ones with the reports they were stopped on (``PRUNED``), the running and failed ones without.
  The same seed and the same outcomes give the same parameters; an index a trial already holds is never
  asked again (its parameters are those its annotation carries).

Follows KEP-3562 (kubeflow/trainer ``proposals/2605-optimization-job-crd/README.md``, "Stateless Algorithm
Execution": history reconstructed from the TrainJobs, nothing persisted) with Optuna in process instead of
Katib's suggestion service.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.study import StudyDirection
from optuna.trial import TrialState, create_trial

from trainer.api.optimizationjob import (
    TRIAL_EARLY_STOPPED,
    TRIAL_RUNNING,
    TRIAL_SUCCEEDED,
    OptimizationJobSpec,
    Parameter,
    grid_points,
    int_bounds,
)

optuna.logging.set_verbosity(optuna.logging.WARNING)  # no INFO line per study and trial built


@dataclass(frozen=True)
class Observed:
    """A trial as read back from the cluster: its index, parameters (name -> value as a string), state
    (``Running``, ``Succeeded``, ``Failed`` or ``EarlyStopped``), objective value (``Succeeded`` only) and
    the objective it reported while running, as ``(progress percentage, value)`` by progress."""

    index: int
    parameters: dict[str, str]
    state: str
    value: float | None = None
    reports: tuple[tuple[int, float], ...] = ()


def trial_seed(seed: int, index: int) -> int:
    """The seed of trial ``index`` of a job seeded ``seed``: 32 bits of SHA-256 of ``"<seed>:<index>"``
    (NumPy's ``RandomState`` takes 0 to 2**32 - 1; upstream's seed is any int64)."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{index}".encode()).digest()[:4], "big")


def seed_of(text: str) -> int:
    """A seed from a string (the job's uid, when its ``random`` search sets no seed)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big", signed=True)


def distribution(parameter: Parameter) -> BaseDistribution:
    """The Optuna distribution of one parameter: ``uniform`` and ``logUniform`` as ``FloatDistribution``
    (``type: Int``: ``IntDistribution`` over the integers within [min, max]), ``log`` for the latter;
    ``categorical`` as ``CategoricalDistribution``."""
    space = parameter.search_space
    if space.categorical is not None:
        return CategoricalDistribution(list(space.categorical.choices))
    ranged = space.uniform or space.log_uniform
    if ranged is None:
        raise ValueError(f"parameter {parameter.name!r} has no search space")
    log = space.log_uniform is not None
    if ranged.type == "Int":
        low, high = int_bounds(ranged)
        return IntDistribution(low, high, log=log)
    return FloatDistribution(float(ranged.min), float(ranged.max), log=log)


def render(value: object) -> str:
    """A sampled value as the string a trial is given: an int as is, a float as Python's shortest repr."""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def parse(dist: BaseDistribution, value: str) -> float | int | str:
    """The value ``value`` (as a trial carries it) in ``dist``'s terms. Raises ``ValueError``."""
    if isinstance(dist, IntDistribution):
        return int(value)
    if isinstance(dist, FloatDistribution):
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(value)
        return number
    return value


def grid_size(spec: OptimizationJobSpec) -> int | None:
    """How many points a grid search has (the product of the choices' counts), None for a random search."""
    algorithm = spec.search_algorithm
    if algorithm is None or algorithm.grid is None:
        return None
    return grid_points(spec)


def _frozen(
    index: int, observed: Observed | None, dists: dict[str, BaseDistribution], grid: dict[str, list[str]] | None
) -> optuna.trial.FrozenTrial:
    """Trial ``index`` as Optuna keeps it: ``observed``'s parameters and outcome, or a failed trial without
    parameters for an index the cluster no longer has (a deleted trial); a grid trial carries the grid point
    it took (``grid_id``, its index), so ``GridSampler`` counts it."""
    attrs: dict[str, object] = {"grid_id": index, "search_space": grid} if grid is not None else {}
    steps: dict[int, float] | None = None
    if observed is not None and observed.state == TRIAL_SUCCEEDED and observed.value is not None:
        state, value = TrialState.COMPLETE, observed.value
    elif observed is not None and observed.state == TRIAL_EARLY_STOPPED:
        state, value, steps = TrialState.PRUNED, None, dict(observed.reports)
    elif observed is not None and observed.state == TRIAL_RUNNING:
        state, value = TrialState.RUNNING, None
    else:
        state, value = TrialState.FAIL, None
    try:
        params = {n: parse(dists[n], v) for n, v in (observed.parameters if observed else {}).items() if n in dists}
        fit = {n: dists[n] for n in params}
        return create_trial(
            state=state, value=value, params=params, distributions=fit, system_attrs=attrs, intermediate_values=steps
        )
    except ValueError:  # a value outside its space (the annotation edited): the trial counts, its values do not
        return create_trial(state=TrialState.FAIL, system_attrs=attrs)


def next_assignments(
    spec: OptimizationJobSpec, seed: int, observed: Sequence[Observed], indices: Sequence[int]
) -> dict[int, dict[str, str]]:
    """The parameters (name -> value) of trials ``indices``, given the trials ``observed``: a study is built
    with one trial per index below the largest asked for (what ``observed`` has, else a failed trial), then
    each new index is asked of the sampler (the module says which); an index is asked with only the trials
    below it in the study. A grid index past the grid is left out. Every index of
    ``indices`` must be one ``observed`` lacks."""
    dists = {p.name: distribution(p) for p in spec.parameters}
    direction = StudyDirection.MAXIMIZE if spec.objectives[0].direction == "Maximize" else StudyDirection.MINIMIZE
    size = grid_size(spec)
    grid = {p.name: list(p.search_space.categorical.choices) for p in spec.parameters if p.search_space.categorical}
    by_index = {o.index: o for o in observed}
    tpe = spec.search_algorithm.tpe if spec.search_algorithm is not None else None
    out: dict[int, dict[str, str]] = {}
    wanted = sorted(set(indices))
    if size is not None:
        wanted = [i for i in wanted if i < size]
    if not wanted:
        return out
    study = optuna.create_study(direction=direction)
    grid_attrs = grid if size is not None else None
    for i in range(max(wanted) + 1):
        if i in wanted:
            if size is not None:
                study.sampler = optuna.samplers.GridSampler(grid, seed=trial_seed(seed, -1))
            elif tpe is not None:
                study.sampler = optuna.samplers.TPESampler(
                    seed=trial_seed(seed, i),
                    n_startup_trials=10 if tpe.n_startup_trials is None else tpe.n_startup_trials,
                )
            else:
                study.sampler = optuna.samplers.RandomSampler(seed=trial_seed(seed, i))
            trial = study.ask(dists)
            if trial.number != i:
                raise AssertionError(f"trial {i} numbered {trial.number}")  # the study has one trial per index
            out[i] = {name: render(trial.params[name]) for name in dists}
        else:
            study.add_trial(_frozen(i, by_index.get(i), dists, grid_attrs))
    return out
