"""OptimizationJobs (``trainer.kubeflow.org/v1alpha1``) in the SDK: the arguments of the kubeflow SDK's
``OptimizerClient.optimize()`` (``kubeflow/optimizer/api/optimizer_client.py``, ``types/``, kubeflow 0.5.0)
made into an OptimizationJob, and what is read back: its status and its trials (TrainJobs labelled
``trainer.kubeflow.org/optimizationjob-name``) with their parameters, state and objective value.

The argument types mirror the SDK's: :class:`Search` (``uniform``, ``loguniform``, ``choice``),
:class:`Objective`, :class:`TrialConfig`, :class:`RandomSearch`, :class:`GridSearch`,
:class:`TrainJobTemplate`; and the OptimizationJob's own, ahead of upstream: :class:`TPESearch`
(``searchAlgorithm.tpe``), :class:`MedianStopping` (``pruneAlgorithm.median``) and ``suspend``. The
SDK's own objects of those names are read as well (its ``Search`` gives
Katib ``V1beta1ParameterSpec`` objects, read by their ``parameter_type`` and ``feasible_space``).
:meth:`trainer.client.AsyncTrainerClient.optimize` and the ``*_optimization_job*`` methods use them.
The SDK's backend creates a Katib Experiment; this one creates an OptimizationJob, which the operator runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from trainer.api.conditions import is_true
from trainer.api.kinds import OPTIMIZATION_JOBS, TRAINJOBS
from trainer.api.labels import OPTIMIZATION_JOB_NAME, TRIAL_INDEX, TRIAL_PARAMETERS
from trainer.api.optimizationjob import (
    COND_COMPLETE,
    COND_FAILED,
    COND_SUSPENDED,
    TRIAL_FAILED,
    TRIAL_RUNNING,
    CategoricalSpace,
    LogUniformSpace,
    OptimizationJob,
    SearchSpace,
    UniformSpace,
    env_name,
)
from trainer.api.trainer_v1alpha1 import TrainJob
from trainer.client.errors import JobFailedError, JobFinishedError, NotFoundError, WaitTimeoutError
from trainer.client.jobs import observe
from trainer.client.types import COMPLETE, CREATED, FAILED, RUNNING, SUSPENDED, trainjob_status
from trainer.framework.json_codec import JSON
from trainer.framework.kube.client import Kube

OPTIMIZATION_STATUSES: tuple[str, ...] = (CREATED, SUSPENDED, RUNNING, COMPLETE, FAILED)
"""Every status :func:`optimization_status` returns: the kubeflow SDK's ``OPTIMIZATION_JOB_*`` constants and
``Suspended`` (``spec.suspend``, ours)."""


class Search:
    """Search spaces, as the kubeflow SDK's ``kubeflow.optimizer.Search`` names them; each returns the
    :class:`trainer.api.optimizationjob.SearchSpace` of one parameter. Raises ``ValueError`` for bounds that are
    not finite numbers or, through the model, ``min >= max`` and a log-uniform ``min <= 0``."""

    @staticmethod
    def uniform(min: float, max: float) -> SearchSpace:
        """A float drawn uniformly in [min, max]."""
        return SearchSpace(uniform=UniformSpace(min=decimal(min), max=decimal(max)))

    @staticmethod
    def loguniform(min: float, max: float) -> SearchSpace:
        """A float drawn log-uniformly in [min, max], min > 0."""
        return SearchSpace(log_uniform=LogUniformSpace(min=decimal(min), max=decimal(max)))

    @staticmethod
    def randint(min: int, max: int) -> SearchSpace:
        """An integer drawn uniformly in [min, max] (``uniform`` with ``type: Int``; not in the SDK)."""
        return SearchSpace(uniform=UniformSpace(min=decimal(min), max=decimal(max), type="Int"))

    @staticmethod
    def choice(values: Collection[Any]) -> SearchSpace:
        """One of ``values``, each given to the trial as ``str(value)``."""
        return SearchSpace(categorical=CategoricalSpace(choices=[str(v) for v in values]))


def decimal(value: float | int | str) -> str:
    """``value`` as the decimal string the CRD's ``Double`` takes (``0.001``, ``1e-05``, ``5``). Raises
    ``ValueError`` for a value that is not a finite number."""
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"a search bound must be a finite number, not {value!r}")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    text = repr(number)
    return text[:-2] if text.endswith(".0") else text


class Direction(StrEnum):
    """Whether the objective is maximized or minimized (the kubeflow SDK's ``Direction``)."""

    MAXIMIZE = "maximize"
    MINIMIZE = "minimize"


@dataclass
class Objective:
    """The metric the search optimizes (the kubeflow SDK's ``Objective``): ``metric`` is a name the trials
    report in ``status.trainerStatus.metrics``; ``direction`` ``minimize`` (default) or ``maximize``."""

    metric: str = "loss"
    direction: Direction | str = Direction.MINIMIZE


@dataclass
class TrialConfig:
    """How many trials (the kubeflow SDK's ``TrialConfig``): ``num_trials`` in all (default 10, at most
    100), ``parallel_trials`` at once (default 1). ``max_failed_trials`` has no field in the
    OptimizationJob API: :func:`optimization_job` refuses it."""

    num_trials: int = 10
    parallel_trials: int = 1
    max_failed_trials: int | None = None


@dataclass
class RandomSearch:
    """Random search (the kubeflow SDK's ``RandomSearch``); ``random_state`` becomes
    ``spec.searchAlgorithm.random.seed``."""

    random_state: int | None = None
    algorithm_name: str = field(default="random", init=False)


@dataclass
class GridSearch:
    """Grid search over categorical parameters (the kubeflow SDK's ``GridSearch``)."""

    algorithm_name: str = field(default="grid", init=False)


@dataclass
class TPESearch:
    """Bayesian search with a Tree-structured Parzen Estimator (``spec.searchAlgorithm.tpe``; ours, not in the
    kubeflow SDK): ``random_state`` becomes its ``seed``, ``n_startup_trials`` (0 to 100, default 10) the
    trials drawn at random before the estimator is used."""

    random_state: int | None = None
    n_startup_trials: int | None = None
    algorithm_name: str = field(default="tpe", init=False)


@dataclass
class MedianStopping:
    """Median stopping (``spec.pruneAlgorithm.median``; ours, Katib's ``medianstop``): a running trial whose
    objective at a progress is worse than the median of the succeeded trials' at that progress is stopped
    (``EarlyStopped``). ``start_step``: the progress percentage (0 to 100, default 0) before which none is;
    ``min_trials``: succeeded trials needed first (1 to 100, default 3)."""

    start_step: int | None = None
    min_trials: int | None = None


@dataclass
class TrainJobTemplate:
    """The TrainJob every trial is made from (the kubeflow SDK's ``TrainJobTemplate``): a trainer
    (:class:`trainer.client.CustomTrainer` or another the client's ``train`` takes), a runtime (name or
    ``Runtime``; default ``torch-distributed``) and an optional initializer. Each trial's trainer reads its
    parameters from the environment, ``KUBEFLOW_TRAINER_OPT_<NAME>``."""

    trainer: Any
    runtime: Any = None
    initializer: Any = None


@dataclass(frozen=True)
class FromEnvironment:
    """A function argument read where the trial runs, from the environment variable ``name``: its ``repr``
    is the Python expression that reads it, which is what the function's call is written with
    (:func:`trainer.client.trainers.function_source`)."""

    name: str

    def __repr__(self) -> str:
        return f"__import__('os').environ[{self.name!r}]"


def with_parameters(trainer: Any, names: list[str]) -> Any:
    """``trainer`` whose function is also called with each parameter of ``names`` that it takes (by name, or
    all of them for a ``**kwargs``), read from ``KUBEFLOW_TRAINER_OPT_<NAME>`` when the trial runs: a string,
    as the kubeflow SDK's Katib trials substitute theirs into the function's arguments. A trainer without a
    function (a container, a builtin trainer) or a function that takes none of them is returned as it is."""
    func = getattr(trainer, "func", None)
    if func is None or not dataclasses.is_dataclass(trainer) or isinstance(trainer, type):
        return trainer
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return trainer
    anything = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    taken = [n for n in names if anything or n in params]
    if not taken:
        return trainer
    args = {**(getattr(trainer, "func_args", None) or {}), **{n: FromEnvironment(env_name(n)) for n in taken}}
    return dataclasses.replace(trainer, func_args=args)


def search_space_of(name: str, space: Any) -> SearchSpace:
    """The :class:`SearchSpace` of parameter ``name``: ``space`` itself, or one read from a Katib
    ``V1beta1ParameterSpec`` (what the kubeflow SDK's ``Search`` returns: ``parameter_type`` ``double``,
    ``int`` or ``categorical``, ``feasible_space`` with ``min``/``max``/``distribution`` or ``list``).
    Raises ``ValueError`` naming the parameter for anything else."""
    if isinstance(space, SearchSpace):
        return space
    kind, feasible = getattr(space, "parameter_type", None), getattr(space, "feasible_space", None)
    if feasible is None:
        raise ValueError(f"search_space[{name!r}]: expected Search.uniform(), Search.loguniform() or Search.choice()")
    if kind == "categorical":
        return Search.choice(feasible.list or [])
    if kind in ("double", "int"):
        bounds = {"min": str(feasible.min), "max": str(feasible.max), "type": "Int" if kind == "int" else "Float"}
        if (feasible.distribution or "uniform") == "logUniform":
            return SearchSpace(log_uniform=LogUniformSpace.model_validate(bounds))
        if (feasible.distribution or "uniform") == "uniform":
            return SearchSpace(uniform=UniformSpace.model_validate(bounds))
    raise ValueError(
        f"search_space[{name!r}]: parameter type {kind!r} with distribution "
        f"{getattr(feasible, 'distribution', None)!r} has no OptimizationJob search space"
    )


def direction_of(objective: Any) -> str:
    """``Maximize`` or ``Minimize`` from an objective's ``direction`` (an enum or a string, any case).
    Raises ``ValueError`` for anything else."""
    value = getattr(objective.direction, "value", objective.direction)
    text = str(value).lower()
    if text not in ("maximize", "minimize"):
        raise ValueError(f"objective {objective.metric!r}: direction must be maximize or minimize, not {value!r}")
    return text.capitalize()


def algorithm_of(algorithm: Any) -> JSON:
    """``spec.searchAlgorithm`` of an algorithm (:class:`RandomSearch`, :class:`GridSearch`,
    :class:`TPESearch` or the SDK's, by ``algorithm_name``; None: random). Raises ``ValueError`` for another
    algorithm."""
    name = getattr(algorithm, "algorithm_name", "random") if algorithm is not None else "random"
    seed = getattr(algorithm, "random_state", None)
    if name == "random":
        return {"random": {"seed": int(seed)} if seed is not None else {}}
    if name == "grid":
        return {"grid": {}}
    if name == "tpe":
        startup = getattr(algorithm, "n_startup_trials", None)
        tpe = {"seed": int(seed)} if seed is not None else {}
        return {"tpe": {**tpe, **({"nStartupTrials": int(startup)} if startup is not None else {})}}
    raise ValueError(f"algorithm {name!r} is not supported: use RandomSearch, GridSearch or TPESearch")


def prune_algorithm_of(early_stopping: Any) -> JSON | None:
    """``spec.pruneAlgorithm`` of :class:`MedianStopping` (None: none). Raises ``ValueError`` for anything else."""
    if early_stopping is None:
        return None
    if not isinstance(early_stopping, MedianStopping):
        raise ValueError(f"early_stopping: {early_stopping!r} is not supported: use MedianStopping")
    median = {"startStep": early_stopping.start_step, "minTrials": early_stopping.min_trials}
    return {"median": {k: int(v) for k, v in median.items() if v is not None}}


def optimization_job(
    name: str,
    trial_spec: JSON,
    search_space: Mapping[str, Any],
    objectives: list[Any] | None = None,
    algorithm: Any = None,
    trial_config: Any = None,
    labels: Mapping[str, str] | None = None,
    early_stopping: MedianStopping | None = None,
    suspend: bool = False,
) -> OptimizationJob:
    """The OptimizationJob ``optimize`` creates: ``trial_spec`` (a TrainJob spec, JSON) as
    ``spec.trainJobTemplate.spec``, one parameter per ``search_space`` entry in its order,
    ``objectives`` (default ``loss``, minimized; exactly one), ``algorithm`` (default random),
    ``trial_config`` (default 10 trials, 1 at a time), ``early_stopping`` as ``pruneAlgorithm`` (default
    none), ``suspend`` as ``spec.suspend`` (created held: no trial until it is resumed). Raises
    ``ValueError`` naming the argument: no
    parameter, not exactly one objective, ``max_failed_trials`` set (the API has no such field), or what
    the model refuses (``pydantic.ValidationError`` is a ``ValueError``: ``parallelTrials cannot exceed
    numTrials``, a grid over a non-categorical parameter...)."""
    if not search_space:
        raise ValueError("search_space: give at least one parameter, e.g. {'lr': Search.loguniform(1e-4, 1e-1)}")
    objectives = objectives if objectives is not None else [Objective()]
    if len(objectives) != 1:
        raise ValueError(f"objectives: an OptimizationJob optimizes exactly one metric, got {len(objectives)}")
    config = trial_config if trial_config is not None else TrialConfig()
    if getattr(config, "max_failed_trials", None) is not None:
        raise ValueError(
            "trial_config.max_failed_trials: the OptimizationJob API has no such field; failed trials count "
            "towards num_trials"
        )
    spec: JSON = {
        "objectives": [{"metric": o.metric, "direction": direction_of(o)} for o in objectives],
        "searchAlgorithm": algorithm_of(algorithm),
        "parameters": [{"name": n, "searchSpace": search_space_of(n, s).to_dict()} for n, s in search_space.items()],
        "numTrials": int(config.num_trials),
        "parallelTrials": int(config.parallel_trials),
        "trainJobTemplate": {"spec": trial_spec},
    }
    if (prune := prune_algorithm_of(early_stopping)) is not None:
        spec["pruneAlgorithm"] = prune
    if suspend:
        spec["suspend"] = True
    metadata: JSON = {"name": name, **({"labels": dict(labels)} if labels else {})}
    return OptimizationJob.model_validate({"metadata": metadata, "spec": spec})


def optimization_status(job: OptimizationJob) -> str:
    """One of :data:`OPTIMIZATION_STATUSES`: ``Failed`` or ``Complete`` when that condition is True, else
    ``Suspended`` while its ``Suspended`` condition is True (``spec.suspend``), else ``Running`` once the
    operator created a trial (``status.trials``), else ``Created``."""
    conditions = (job.status.conditions if job.status else None) or []
    if is_true(conditions, COND_FAILED):
        return FAILED
    if is_true(conditions, COND_COMPLETE):
        return COMPLETE
    if is_true(conditions, COND_SUSPENDED):
        return SUSPENDED
    return RUNNING if job.status and job.status.trials else CREATED


def algorithm_text(job: OptimizationJob) -> str:
    """The search algorithm as the CLI and the dashboard show it: ``random``, ``random (seed 7)``, ``grid``,
    ``tpe (seed 7, 10 startup trials)``."""
    algorithm = job.spec.search_algorithm
    if algorithm is not None and algorithm.grid is not None:
        return "grid"
    if algorithm is not None and algorithm.tpe is not None:
        tpe = algorithm.tpe
        seed = [f"seed {tpe.seed}"] if tpe.seed is not None else []
        startup = tpe.n_startup_trials if tpe.n_startup_trials is not None else 10
        return f"tpe ({', '.join([*seed, f'{startup} startup trials'])})"
    seed_of = algorithm.random.seed if algorithm is not None and algorithm.random is not None else None
    return "random" + (f" (seed {seed_of})" if seed_of is not None else "")


def early_stopping_text(job: OptimizationJob) -> str:
    """``spec.pruneAlgorithm`` as the CLI and the dashboard show it: ``median (from 20% progress, after 3
    succeeded trials)``, or ``none``."""
    prune = job.spec.prune_algorithm
    median = prune.median if prune is not None else None
    if median is None:
        return "none"
    start = median.start_step if median.start_step is not None else 0
    trials = median.min_trials if median.min_trials is not None else 3
    return f"median (from {start}% progress, after {trials} succeeded trials)"


def failure_of(job: OptimizationJob) -> str:
    """``reason: message`` of the True ``Failed`` condition ("" without one)."""
    for c in (job.status.conditions if job.status else None) or []:
        if c.type == COND_FAILED and c.status == "True":
            return f"{c.reason}: {c.message}" if c.reason else c.message
    return ""


@dataclass(frozen=True)
class Trial:
    """One trial of an OptimizationJob: what :func:`trials_of` reads."""

    index: int
    """Its index (label ``trainer.kubeflow.org/trial-index``; -1 when it has none)."""
    name: str
    """Its TrainJob's name, ``<job>-trial-<index>``."""
    state: str
    """``Running``, ``Succeeded``, ``Failed`` or ``EarlyStopped`` (stopped by ``pruneAlgorithm``) as the job's
    ``status.trialResults`` records it; a trial not recorded yet: ``Running``."""
    parameters: dict[str, str]
    """Its parameters (annotation ``trainer.kubeflow.org/trial-parameters``, else the recorded result's)."""
    objective: str | None
    """Its objective value: the recorded one, else the last value a running trial reported (None: none)."""
    message: str = ""
    """Why it failed or was stopped early."""
    trainjob: TrainJob | None = None
    """Its TrainJob (None when deleted: its outcome stays in ``status.trialResults``)."""

    def to_dict(self) -> JSON:
        """The trial as JSON (``trainjob`` left out): index, name, state, parameters, objective, message."""
        return {
            "index": self.index,
            "name": self.name,
            "state": self.state,
            "parameters": dict(self.parameters),
            "objective": self.objective,
            "message": self.message,
        }


def parameters_of(trainjob: TrainJob) -> dict[str, str]:
    """A trial's parameters from its annotation (JSON ``[{name, value}]``); empty when absent or unreadable."""
    text = (trainjob.metadata.annotations or {}).get(TRIAL_PARAMETERS)
    try:
        items = json.loads(text) if text else []
        return {str(i["name"]): str(i["value"]) for i in items}
    except (ValueError, TypeError, KeyError):
        return {}


def reported(trainjob: TrainJob, metric: str) -> str | None:
    """The last value of ``metric`` in the TrainJob's ``status.trainerStatus.metrics``, None when not reported."""
    status = trainjob.status.trainer_status if trainjob.status else None
    values = [m.value for m in (status.metrics if status else None) or [] if m.name == metric]
    return values[-1] if values else None


def index_of(trainjob: TrainJob) -> int:
    """A trial's index from its label, -1 when it has none."""
    text = (trainjob.metadata.labels or {}).get(TRIAL_INDEX, "")
    return int(text) if text.isdigit() else -1


def controlled_by(trainjob: TrainJob, uid: str | None) -> bool:
    """Whether ``trainjob``'s controller owner reference names ``uid`` (a job without a uid, built here and
    never stored, controls what is labelled with its name)."""
    if not uid:
        return True
    refs = trainjob.metadata.owner_references or []
    return any(r.get("controller") is True and r.get("uid") == uid for r in refs)


def trials_of(job: OptimizationJob, trainjobs: list[TrainJob]) -> list[Trial]:
    """The trials of ``job`` by index: each of its TrainJobs (``trainjobs``, those labelled with its name,
    of which only those it controls: anyone may label a TrainJob so) with its recorded result
    (``status.trialResults``), and each recorded trial whose TrainJob is gone. A trial not recorded yet is
    ``Running`` (``Failed`` when its TrainJob failed) with the value it last reported."""
    trainjobs = [tj for tj in trainjobs if controlled_by(tj, job.metadata.uid)]
    metric = job.spec.objectives[0].metric
    recorded = {r.name: r for r in (job.status.trial_results if job.status else None) or []}
    best = job.status.result if job.status else None
    kept = {best.train_job_name: {p.name: p.value for p in best.parameters or []}} if best else {}
    out: dict[str, Trial] = {}
    for tj in trainjobs:
        name = tj.metadata.name or ""
        r = recorded.get(name)
        state = r.state if r else (TRIAL_FAILED if trainjob_status(tj) == FAILED else TRIAL_RUNNING)
        objective = r.value if r and r.value is not None else reported(tj, metric)
        out[name] = Trial(index_of(tj), name, state, parameters_of(tj), objective, (r.message or "") if r else "", tj)
    for name, r in recorded.items():
        if name not in out:
            tail = name.rsplit("-trial-", 1)[-1]
            index = int(tail) if tail.isdigit() else -1
            out[name] = Trial(index, name, r.state, kept.get(name, {}), r.value, r.message or "")
    return sorted(out.values(), key=lambda t: (t.index, t.name))


def best_trial(job: OptimizationJob, trials: list[Trial]) -> Trial | None:
    """The trial ``status.result`` names (the operator's choice), None before one succeeded."""
    best = job.status.result if job.status else None
    return next((t for t in trials if best and t.name == best.train_job_name), None)


async def list_trials(kube: Kube, namespace: str, job: OptimizationJob) -> list[Trial]:
    """The trials of ``job`` (:func:`trials_of`), its TrainJobs listed by label. Raises :class:`ApiError`."""
    selector = f"{OPTIMIZATION_JOB_NAME}={job.metadata.name}"
    items, _ = await kube.list(TRAINJOBS, namespace, selector)
    return trials_of(job, [TrainJob.model_validate(i) for i in items])


async def wait_for_status(
    kube: Kube,
    namespace: str,
    name: str,
    status: Collection[str],
    timeout: float,
    callbacks: Collection[Callable[[OptimizationJob], None]] = (),
) -> OptimizationJob:
    """Wait, following a watch, until OptimizationJob ``name``'s :func:`optimization_status` is one of
    ``status``; returns it. Raises ``ValueError`` for a status not in :data:`OPTIMIZATION_STATUSES` or
    ``timeout <= 0``; :class:`JobFailedError` when it Failed and that is not wanted; :class:`JobFinishedError`
    when it is Complete and that is not wanted; :class:`WaitTimeoutError` after ``timeout`` seconds;
    :class:`NotFoundError` when it does not exist or is deleted meanwhile."""
    wanted = set(status)
    if not wanted or wanted - set(OPTIMIZATION_STATUSES):
        raise ValueError(f"status must be a non-empty subset of {', '.join(OPTIMIZATION_STATUSES)}; got {wanted}")
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    kind = OPTIMIZATION_JOBS.kind
    last: list[str] = []

    async def run() -> OptimizationJob:
        async for items in observe(kube, OPTIMIZATION_JOBS, namespace, field_selector=f"metadata.name={name}"):
            obj = items.get(name)
            if obj is None:
                raise NotFoundError(kind, namespace, name)
            job = OptimizationJob.model_validate(obj)
            current = optimization_status(job)
            last[:] = [current]
            for hook in callbacks:
                hook(job)
            if current in wanted:
                return job
            if current == FAILED:
                raise JobFailedError(kind, namespace, name, failure_of(job))
            if current == COMPLETE:
                raise JobFinishedError(kind, namespace, name, current, wanted)
        raise NotFoundError(kind, namespace, name)  # observe never ends

    try:
        async with asyncio.timeout(timeout) as scope:
            return await run()
    except TimeoutError:
        if not scope.expired():
            raise
        what = f"{kind} {namespace}/{name} to be {' or '.join(sorted(wanted))}"
        raise WaitTimeoutError(what, timeout, last[0] if last else None) from None
