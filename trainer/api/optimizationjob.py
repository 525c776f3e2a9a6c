"""OptimizationJob, API group ``trainer.kubeflow.org/v1alpha1``: a hyperparameter search whose trials are
TrainJobs.

Field for field with kubeflow/trainer ``pkg/apis/trainer/v1alpha1/optimizationjob_types.go`` (KEP-3562,
``proposals/2605-optimization-job-crd/README.md``; shipped as a CRD with no controller in v2.4): the spec is
immutable, ``parallelTrials <= numTrials``, a grid search takes categorical parameters only, and every CEL
rule carries upstream's message. The status adds, beside upstream's ``conditions`` and ``result``, the
counts and outcomes of the trials (not in upstream). The pydantic validators repeat the CRD's rules for
objects read without an apiserver (:func:`rule_errors`), and refuse what the controller cannot run: two
parameters whose environment variable names collide, or an ``Int`` range with no integer in it.

Ahead of upstream (KEP-3562's Phase 2, §4 and §8.3; KEP-3744's ``EarlyStopped`` trial state):
``searchAlgorithm.tpe``, ``pruneAlgorithm.median`` and ``spec.suspend``, the one field that can change.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, JsonValue, model_validator

from trainer.api.base import Condition, Model, ObjectMeta, cel
from trainer.api.kinds import OPTIMIZATION_JOBS, TRAINER_GROUP, TRAINER_VERSION
from trainer.api.trainer_v1alpha1 import TrainJobSpec

API_VERSION = f"{TRAINER_GROUP}/{TRAINER_VERSION}"

# Condition types and reasons (KEP-3562 "State Transition & Conditions"; the sample's MaxTrialsReached).
COND_CREATED = "Created"
COND_COMPLETE = "Complete"
COND_FAILED = "Failed"
REASON_CREATED = "TrialsCreated"
"""``Created`` True: the job is accepted and its trials are being created (ours; the KEP names none)."""
REASON_MAX_TRIALS = "MaxTrialsReached"
"""``Complete``: every trial of ``numTrials`` finished and at least one reported the objective."""
REASON_SEARCH_EXHAUSTED = "SearchSpaceExhausted"
"""``Complete``: a grid search ran every point of its grid, fewer than ``numTrials`` (ours)."""
REASON_ALL_TRIALS_FAILED = "AllTrialsFailed"
"""``Failed``: every trial finished and none reported the objective (ours)."""
COND_SUSPENDED = "Suspended"
REASON_SUSPENDED, REASON_RESUMED = "Suspended", "Resumed"
"""``Suspended`` True (``spec.suspend``) and False once resumed: TrainJob's condition and reasons (ours on an
OptimizationJob; KEP-3562 lists ``suspend`` as a Phase 2 goal)."""

# Trial states in status.trialResults (ours; ``EarlyStopped`` is KEP-3744's ``TrialStateEarlyStopped``).
TRIAL_RUNNING, TRIAL_SUCCEEDED, TRIAL_FAILED = "Running", "Succeeded", "Failed"
TRIAL_EARLY_STOPPED = "EarlyStopped"
"""A trial pruned by ``pruneAlgorithm``: stopped (suspended) and never resumed; not a failure (KEP-3744)."""

ENV_PREFIX = "KUBEFLOW_TRAINER_OPT_"
"""A trial's parameter ``<name>`` reaches its trainer as ``KUBEFLOW_TRAINER_OPT_<NAME>`` (KEP-3562 §8.2)."""

DOUBLE_PATTERN = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$"
"""Upstream's ``Double``: a decimal number as a string, at most 64 characters."""

IMMUTABLE_MESSAGE = "OptimizationJobSpec is immutable and cannot be updated after creation"
SUSPEND_MESSAGE = "only spec.suspend can change after creation"
PARALLEL_MESSAGE = "parallelTrials cannot exceed numTrials"
GRID_MESSAGE = "Grid search requires all parameters to be Categorical; Uniform and LogUniform are not supported."
MIN_MAX_MESSAGE = "min must be strictly less than max"
LOG_MIN_MESSAGE = "min must be strictly greater than 0"
TEMPLATE_META_MESSAGE = "name and namespace cannot be set in a template."
MAX_GRID_POINTS = 1000
"""The most points a grid search may have (the product of its parameters' choice counts; ours): the search
builds and shuffles the whole grid on every reconcile (Optuna's ``GridSampler``), and at most ``numTrials``
(100) of its points ever run."""


def exactly_one(*fields: str) -> tuple[str, str]:
    """The CEL rule and message controller-gen writes for ``+kubebuilder:validation:ExactlyOneOf``."""
    rule = "[" + ",".join(f"has(self.{f})" for f in fields) + "].filter(x,x==true).size() == 1"
    return rule, f"exactly one of the fields in [{' '.join(fields)}] must be set"


IMMUTABLE_FIELDS = ("objectives", "searchAlgorithm", "parameters", "numTrials", "parallelTrials", "trainJobTemplate")
"""The spec's fields upstream makes immutable; with ``pruneAlgorithm`` (optional) all but ``suspend``."""
IMMUTABLE_RULE = " && ".join(
    [f"self.{f} == oldSelf.{f}" for f in IMMUTABLE_FIELDS]
    + ["has(self.pruneAlgorithm) == has(oldSelf.pruneAlgorithm)"]
    + ["(!has(self.pruneAlgorithm) || self.pruneAlgorithm == oldSelf.pruneAlgorithm)"]
)
"""Upstream's ``self == oldSelf`` but for ``suspend`` (ours): ``searchAlgorithm``, ``numTrials`` and
``parallelTrials`` have defaults, so they are always set when the rule runs."""

SPEC_RULES: list[dict[str, JsonValue]] = [
    {"rule": IMMUTABLE_RULE, "message": f"{IMMUTABLE_MESSAGE}: {SUSPEND_MESSAGE}"},
    {"rule": "self.parallelTrials <= self.numTrials", "message": PARALLEL_MESSAGE},
    {
        "rule": "!has(self.searchAlgorithm.grid) || self.parameters.all(p, has(p.searchSpace.categorical))",
        "message": GRID_MESSAGE,
    },
]
"""The CRD's rules on ``spec``: upstream's three, the first letting ``suspend`` change (ours)."""

Double = Annotated[str, Field(min_length=1, max_length=64, pattern=DOUBLE_PATTERN)]


class Objective(Model):
    """A metric the search optimizes."""

    metric: str = Field(min_length=1, max_length=64)
    """Name of the objective metric: a ``status.trainerStatus.metrics[].name`` the trials report."""
    direction: Literal["Maximize", "Minimize"] | None = "Minimize"
    """Whether larger or smaller values of the metric are better. Defaults to ``Minimize``."""


class RandomAlgorithm(Model):
    """Random search: each parameter drawn from its space."""

    seed: int | None = Field(default=None, json_schema_extra={"format": "int64"})
    """Seed of the draws: the same seed gives the same parameters to the same trial index. Unset: a seed
    from the job's uid."""


class GridAlgorithm(Model):
    """Grid search over the product of the categorical parameters' choices."""


class TPEAlgorithm(Model):
    """Bayesian search with a Tree-structured Parzen Estimator (Optuna's ``TPESampler``; KEP-3562 lists TPE
    as a Phase 2 ``searchAlgorithm``; ours)."""

    seed: int | None = Field(default=None, json_schema_extra={"format": "int64"})
    """Seed of the sampler: the same seed and the same trial outcomes give the same parameters. Unset: a
    seed from the job's uid."""
    n_startup_trials: int | None = Field(default=10, ge=0, le=100)
    """Trials drawn at random before the estimator is used (0 to 100). Defaults to 10 (Optuna's)."""


class SearchAlgorithm(Model):
    """How the parameters of each trial are chosen; exactly one of ``random``, ``grid`` and ``tpe``."""

    random: RandomAlgorithm | None = None
    """Random search."""
    grid: GridAlgorithm | None = None
    """Grid search (categorical parameters only)."""
    tpe: TPEAlgorithm | None = None
    """Bayesian search (TPE) from the finished trials' values (ours)."""


class MedianPruning(Model):
    """Median stopping: a trial whose objective at a progress is worse than the median of the succeeded
    trials' at the same progress is stopped (Katib's ``medianstop``, Optuna's ``MedianPruner``; ours)."""

    start_step: int | None = Field(default=0, ge=0, le=100)
    """The progress (``status.trainerStatus.progressPercentage``, 0 to 100) before which no trial is
    stopped. Defaults to 0."""
    min_trials: int | None = Field(default=3, ge=1, le=100)
    """How many succeeded trials must have reported the objective at or before that progress before one is
    stopped (1 to 100). Defaults to 3."""


class PruneAlgorithm(Model):
    """How trials that fall behind are stopped (KEP-3562 §8.3's ``pruneAlgorithm`` block; ours): exactly
    one of ``median``."""

    median: MedianPruning | None = None
    """Median stopping."""


class UniformSpace(Model):
    """A continuous uniform distribution over [min, max]."""

    min: Double
    """Smallest value, a decimal number as a string."""
    max: Double
    """Largest value, a decimal number as a string; greater than ``min``."""
    type: Literal["Int", "Float"] | None = "Float"
    """The parameter's type: ``Float`` (default) or ``Int`` (integers within [min, max])."""


class LogUniformSpace(UniformSpace):
    """A log-uniform distribution over [min, max], min > 0."""


class CategoricalSpace(Model):
    """A set of unordered strings to choose from."""

    choices: list[str] = Field(
        min_length=1,
        max_length=100,
        json_schema_extra={"items": {"type": "string", "maxLength": 64}, "x-kubernetes-list-type": "set"},
    )
    """The strings to choose from (1 to 100, each at most 64 characters, no duplicates)."""


_ONE_SPACE = exactly_one("uniform", "logUniform", "categorical")
_ONE_ALGORITHM = exactly_one("random", "grid", "tpe")
_ONE_PRUNER = exactly_one("median")
_MIN_LT_MAX = ("double(self.min) < double(self.max)", MIN_MAX_MESSAGE)


class SearchSpace(Model):
    """The distribution of one parameter; exactly one of ``uniform``, ``logUniform``, ``categorical``."""

    uniform: UniformSpace | None = cel(_MIN_LT_MAX, default=None)
    """Uniform over [min, max]."""
    log_uniform: LogUniformSpace | None = cel(("double(self.min) > 0.0", LOG_MIN_MESSAGE), _MIN_LT_MAX, default=None)
    """Log-uniform over [min, max]."""
    categorical: CategoricalSpace | None = None
    """One of a set of strings."""


class Parameter(Model):
    """A hyperparameter and the space it is searched in."""

    name: str = Field(min_length=1, max_length=64)
    """Name of the hyperparameter; the trainer reads it as ``KUBEFLOW_TRAINER_OPT_<NAME>`` (upper case, every
    character but letters, digits and ``_`` as ``_``)."""
    search_space: SearchSpace = cel(_ONE_SPACE)
    """Its search space."""


class ParameterAssignment(Model):
    """A hyperparameter and the value a trial was given."""

    name: str = Field(min_length=1, max_length=64)
    """Name of the hyperparameter."""
    value: str = Field(min_length=1, max_length=64)
    """Its value, as a string."""


class TemplateMeta(Model):
    """Labels and annotations of every trial TrainJob; a template has no name or namespace."""

    name: str | None = None
    """Refused: each trial is named ``<job>-trial-<index>``."""
    namespace: str | None = None
    """Refused: trials run in the job's namespace."""
    labels: dict[str, str] | None = None
    """Labels of every trial."""
    annotations: dict[str, str] | None = None
    """Annotations of every trial."""
    finalizers: list[str] | None = None
    """Finalizers of every trial."""


class TrainJobTemplateSpec(Model):
    """The TrainJob each trial is made from."""

    metadata: TemplateMeta | None = cel(
        ("!has(self.name) && !has(self.namespace)", TEMPLATE_META_MESSAGE), default=None
    )
    """Labels, annotations and finalizers of each trial."""
    spec: TrainJobSpec
    """The trial's TrainJob spec; the controller adds the parameters to ``trainer.env``."""


class OptimizationJobSpec(Model):
    """Specification of the desired OptimizationJob."""

    objectives: list[Objective] = Field(
        min_length=1,
        max_length=1,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["metric"]},
    )
    """The objective to optimize (exactly one)."""
    search_algorithm: SearchAlgorithm | None = Field(
        default=None,
        json_schema_extra={
            "default": {"random": {}},
            "x-kubernetes-validations": [{"rule": _ONE_ALGORITHM[0], "message": _ONE_ALGORITHM[1]}],
        },
    )
    """The search algorithm. Defaults to ``random: {}``."""
    prune_algorithm: PruneAlgorithm | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-validations": [{"rule": _ONE_PRUNER[0], "message": _ONE_PRUNER[1]}]},
    )
    """How trials that fall behind are stopped (ours). Unset: none is."""
    parameters: list[Parameter] = Field(
        min_length=1,
        max_length=100,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """The hyperparameters to search over (1 to 100)."""
    num_trials: int | None = Field(default=1, ge=1, le=100)
    """Trials to run in all, failed ones included (1 to 100). Defaults to 1."""
    parallel_trials: int | None = Field(default=1, ge=1, le=100)
    """Trials running at once, at most ``numTrials``. Defaults to 1."""
    train_job_template: TrainJobTemplateSpec
    """The TrainJob each trial is made from."""
    suspend: bool | None = False
    """Hold the search (ours; KEP-3562 Phase 2): no trial is created and the running ones are suspended
    (their ``spec.suspend``); false again resumes them and the search. The one field that can change.
    Defaults to false."""

    @model_validator(mode="after")
    def _rules(self) -> OptimizationJobSpec:
        """The CRD's rules and the controller's own (:func:`rule_errors`). Raises ``ValueError``."""
        errors = rule_errors(self)
        if errors:
            raise ValueError("; ".join(errors))
        return self


def env_name(parameter: str) -> str:
    """The environment variable of parameter ``parameter``: ``KUBEFLOW_TRAINER_OPT_`` + its name in upper case,
    every character but ASCII letters, digits and ``_`` replaced by ``_`` (``learning-rate`` ->
    ``KUBEFLOW_TRAINER_OPT_LEARNING_RATE``)."""
    return ENV_PREFIX + re.sub(r"[^A-Z0-9_]", "_", parameter.upper())


def int_bounds(space: UniformSpace) -> tuple[int, int]:
    """The integers an ``Int`` space spans: ``(ceil(min), floor(max))``."""
    return math.ceil(float(space.min)), math.floor(float(space.max))


def space_errors(name: str, space: SearchSpace) -> list[str]:
    """What is wrong with the space of parameter ``name`` (each naming the field), empty when nothing is."""
    at = f"spec.parameters[{name}].searchSpace"
    chosen = [s for s in ("uniform", "log_uniform", "categorical") if getattr(space, s) is not None]
    if len(chosen) != 1:
        return [f"{at}: {_ONE_SPACE[1]}"]
    ranged = space.uniform or space.log_uniform
    out = []
    if ranged is not None:
        where = f"{at}.{'uniform' if space.uniform else 'logUniform'}"
        low, high = float(ranged.min), float(ranged.max)
        if space.log_uniform is not None and low <= 0:
            out.append(f"{where}: {LOG_MIN_MESSAGE}")
        if low >= high:
            out.append(f"{where}: {MIN_MAX_MESSAGE}")
        elif ranged.type == "Int" and int_bounds(ranged)[0] > int_bounds(ranged)[1]:
            out.append(f"{where}: type Int needs an integer between min and max: widen the range or use Float")
    if space.categorical is not None and len(set(space.categorical.choices)) != len(space.categorical.choices):
        out.append(f"{at}.categorical.choices: duplicate choices: list each once")
    if space.categorical is not None and "" in space.categorical.choices:
        out.append(f"{at}.categorical.choices: an empty choice cannot be a trial's value (status.result): remove it")
    return out


def grid_points(spec: OptimizationJobSpec) -> int:
    """The product of the categorical parameters' choice counts: the points of a grid over them."""
    return math.prod(len(p.search_space.categorical.choices) for p in spec.parameters if p.search_space.categorical)


def rule_errors(spec: OptimizationJobSpec) -> list[str]:
    """The CRD's rules on ``spec`` but immutability (upstream's messages), and the controller's own: parameter
        names unique and distinct as environment variables, ``Int`` ranges holding an integer, a grid of at most
    :data:`MAX_GRID_POINTS` points. Empty: none."""
    out = []
    if (spec.parallel_trials or 1) > (spec.num_trials or 1):
        out.append(f"spec: {PARALLEL_MESSAGE}")
    algorithm = spec.search_algorithm or SearchAlgorithm(random=RandomAlgorithm())
    if sum(a is not None for a in (algorithm.random, algorithm.grid, algorithm.tpe)) != 1:
        out.append(f"spec.searchAlgorithm: {_ONE_ALGORITHM[1]}")
    if spec.prune_algorithm is not None and spec.prune_algorithm.median is None:
        out.append(f"spec.pruneAlgorithm: {_ONE_PRUNER[1]}")
    if algorithm.grid is not None and any(p.search_space.categorical is None for p in spec.parameters):
        out.append(f"spec: {GRID_MESSAGE}")
    elif algorithm.grid is not None and (points := grid_points(spec)) > MAX_GRID_POINTS:
        out.append(
            f"spec.parameters: a grid search over {points} points (the product of the parameters' choice counts) "
            f"is more than {MAX_GRID_POINTS}, and at most numTrials of them run: give fewer choices, or use "
            "searchAlgorithm random or tpe"
        )
    seen: dict[str, str] = {}
    for p in spec.parameters:
        out += space_errors(p.name, p.search_space)
        env = env_name(p.name)
        if env in seen:
            out.append(
                f"spec.parameters[{p.name}].name: its environment variable {env} is that of parameter "
                f"{seen[env]!r}: rename one of them"
            )
        seen.setdefault(env, p.name)
    if spec.train_job_template.metadata is not None and (
        spec.train_job_template.metadata.name is not None or spec.train_job_template.metadata.namespace is not None
    ):
        out.append(f"spec.trainJobTemplate.metadata: {TEMPLATE_META_MESSAGE}")
    return out


class Result(Model):
    """The best trial so far and its parameters."""

    train_job_name: str = Field(min_length=1, max_length=63)
    """Name of the TrainJob that achieved this result."""
    parameters: list[ParameterAssignment] | None = Field(
        default=None,
        max_length=100,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """Its parameters."""


MAX_REPORTS = 11
"""Reports kept per trial: one per tenth of the progress, 0 to 100."""


class Report(Model):
    """The objective a running trial reported at a progress (ours)."""

    progress: int = Field(ge=0, le=100)
    """Its ``status.trainerStatus.progressPercentage`` then."""
    value: str = Field(min_length=1, max_length=64)
    """The objective's value then, as the trial reported it."""


class TrialResult(Model):
    """One trial's outcome (not in upstream)."""

    name: str = Field(min_length=1, max_length=63)
    """Name of the trial's TrainJob."""
    state: Literal["Running", "Succeeded", "Failed", "EarlyStopped"]
    """``Running`` until its TrainJob finishes; ``Succeeded`` when it completed and reported the objective
    metric; ``EarlyStopped`` when ``pruneAlgorithm`` stopped it (KEP-3744's state); ``Failed`` otherwise."""
    value: str | None = Field(default=None, max_length=64)
    """The objective metric's final value, as the trial reported it."""
    message: str | None = Field(default=None, max_length=1024)
    """Why a trial failed or was stopped."""
    reports: list[Report] | None = Field(default=None, max_length=MAX_REPORTS)
    """The objective as the controller saw the trial report it while running, at most one per tenth of
    its progress (with ``pruneAlgorithm`` only; ours): what median stopping compares."""


class OptimizationJobStatus(Model):
    """Observed state of an OptimizationJob."""

    conditions: list[Condition] | None = Field(
        default=None,
        max_length=100,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    """Conditions: ``Created``, ``Complete``, ``Failed``."""
    result: Result | None = None
    """The best trial that reported the objective, and its parameters."""
    trials: int | None = Field(default=None, ge=0)
    """Trials created (not in upstream; Katib's Experiment ``status.trials``)."""
    trials_running: int | None = Field(default=None, ge=0)
    """Trials not finished (not in upstream; Katib's ``trialsRunning``)."""
    trials_succeeded: int | None = Field(default=None, ge=0)
    """Trials that reported the objective (not in upstream; Katib's ``trialsSucceeded``)."""
    trials_failed: int | None = Field(default=None, ge=0)
    """Trials that failed or finished without the objective (not in upstream; Katib's ``trialsFailed``)."""
    trials_early_stopped: int | None = Field(default=None, ge=0)
    """Trials ``pruneAlgorithm`` stopped (not in upstream; Katib's ``trialsEarlyStopped``)."""
    trial_results: list[TrialResult] | None = Field(
        default=None,
        max_length=100,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """Each trial's state and objective value, in trial order (not in upstream)."""


class OptimizationJob(Model):
    """A hyperparameter search: ``numTrials`` TrainJobs made from one template, ``parallelTrials`` at a time,
    each given parameters drawn by the search algorithm; the best is the result."""

    KIND: ClassVar[str] = OPTIMIZATION_JOBS.kind
    PLURAL: ClassVar[str] = OPTIMIZATION_JOBS.plural
    api_version: str = API_VERSION
    kind: str = OPTIMIZATION_JOBS.kind
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: OptimizationJobSpec = Field(json_schema_extra={"x-kubernetes-validations": list(SPEC_RULES)})
    status: OptimizationJobStatus | None = None


def best_objective(obj: dict[str, Any]) -> tuple[str, float] | None:
    """``(metric, value)`` of an OptimizationJob's best trial so far, read as stored (JSON): the objective
    metric of ``spec.objectives[0]`` and the value ``status.trialResults`` records for the trial
    ``status.result`` names; None before a trial reported it, or when the value is not a finite number."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    objectives = spec.get("objectives") or [{}]
    metric, best = objectives[0].get("metric"), (status.get("result") or {}).get("trainJobName")
    if not isinstance(metric, str) or not best:
        return None
    for r in status.get("trialResults") or []:
        if isinstance(r, dict) and r.get("name") == best:
            try:
                value = float(str(r.get("value")))
            except (TypeError, ValueError):
                return None
            return (metric, value) if math.isfinite(value) else None
    return None
