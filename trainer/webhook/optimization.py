"""Admission of OptimizationJobs: what the CRD's rules cannot see, checked on create (the spec is immutable
but ``suspend``, which needs no check).

- ``metadata.name``: each trial is the TrainJob ``<name>-trial-<index>``, whose name is an RFC 1035 label
  of at most 63 characters (:func:`trainer.webhook.rules.check_name`), so the name leaves room for the
  longest trial's suffix (:func:`name_errors`).
- ``spec.trainJobTemplate``: the TrainJob of the last trial (the longest name), made as the controller
  makes it (:func:`trainer.optimizationjob.trials.build_trial`), is checked as a TrainJob's create is
  (:func:`trainer.webhook.rules.validate_trainjob`): a runtime that does not exist is refused as it is for a
  TrainJob, and so are children names too long for its runtime, overrides of containers it lacks, reserved
  environment; each message is given the template's path.
- ``spec.trainJobTemplate.metadata``: no label or annotation the controller sets on a trial (whose
  OptimizationJob, which index, its parameters, why it was stopped), no other field than labels,
  annotations and finalizers (an ``ownerReferences`` there would make the trials someone else's):
  refused rather than overwritten (:func:`template_meta_errors`).
- The parameters and the template: the template's ``spec.trainer.env`` may not set a parameter's variable
  ``KUBEFLOW_TRAINER_OPT_<NAME>`` (the trial's value replaces it) nor one of that prefix no parameter has
  (a misspelt parameter); ``$(KUBEFLOW_TRAINER_OPT_<NAME>)`` in the trainer's command, args or environment
  must name a parameter; when the command or args use some parameters so, one they never use is warned of
  (its trainer reads it from its environment or not at all) (:func:`parameter_use`).
- The objective: with the operator's status server off (``--status-server-port`` 0) no trainer can post
  ``status.trainerStatus.metrics``: a warning (:func:`objective_warnings`).

The bounds (``numTrials`` and ``parallelTrials`` at most 100, at most 100 parameters of at most 100
choices, a grid of at most :data:`trainer.api.optimizationjob.MAX_GRID_POINTS` points) are the model's and the
CRD's (:func:`trainer.api.optimizationjob.rule_errors`), refused here too for objects this webhook sees first.
Ours: upstream (kubeflow/trainer ``pkg/apis/trainer/v1alpha1/optimizationjob_types.go``, KEP-3562) ships
the CRD's CEL rules and no webhook.
"""

from __future__ import annotations

import re

from pydantic import ValidationError

from trainer.api.labels import OPTIMIZATION_JOB_NAME, TRIAL_EARLY_STOPPED, TRIAL_INDEX, TRIAL_PARAMETERS
from trainer.api.optimizationjob import ENV_PREFIX, OptimizationJob, env_name, int_bounds
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta
from trainer.jobs.child_writer import HASH_ANNOTATION
from trainer.optimizationjob.search import grid_size
from trainer.optimizationjob.trials import build_trial, trial_name
from trainer.trainjob.validation import RFC1035
from trainer.webhook.rules import AdmissionFacts, Verdict, pydantic_errors, validate_trainjob

MAX_TRAINJOB_NAME = 63
"""The longest TrainJob name admission takes (:func:`trainer.webhook.rules.check_name`)."""
GENERATED_SUFFIX = 5
"""Characters the apiserver appends to ``metadata.generateName`` (which it cuts to 58 first)."""
RESERVED_LABELS = (OPTIMIZATION_JOB_NAME, TRIAL_INDEX)
"""Labels the controller sets on every trial."""
RESERVED_ANNOTATIONS = (TRIAL_PARAMETERS, TRIAL_EARLY_STOPPED, HASH_ANNOTATION)
"""Annotations the controller (and its child writer) sets on trials."""
TEMPLATE_META_FIELDS = ("labels", "annotations", "finalizers")
"""What a template's metadata may hold (``name`` and ``namespace`` are the CRD's refusal)."""
REFERENCE = re.compile(r"\$\((" + re.escape(ENV_PREFIX) + r"[A-Za-z0-9_]*)\)")
"""A Kubernetes variable reference ``$(KUBEFLOW_TRAINER_OPT_...)`` (``$$(...)`` escapes one)."""
TEMPLATE = "spec.trainJobTemplate"


def validate_optimizationjob(obj: JSON, old: JSON | None, facts: AdmissionFacts) -> Verdict:
    """Admission of an OptimizationJob create (``old`` None) or update (only ``spec.suspend`` can change, which
    the CRD enforces: nothing checked)."""
    v = Verdict()
    try:
        job = OptimizationJob.model_validate(obj)
    except ValidationError as e:
        v.errors += pydantic_errors(e)
        return v
    if old is not None:
        return v
    v.errors += name_errors(obj, job)
    v.errors += template_meta_errors(obj)
    errors, warnings = parameter_use(job)
    v.errors += errors
    v.warnings += warnings + objective_warnings(job, facts)
    trial = last_trial(obj, job)
    checked = validate_trainjob(trial, None, facts)
    named = str(meta(trial).name)
    # The trial's own name rule is :func:`name_errors`'s, said of the OptimizationJob's name above.
    v.errors += [in_template(e, named) for e in checked.errors if not e.startswith(f"metadata.name {named!r}")]
    v.warnings += [in_template(w, named) for w in checked.warnings]
    return v


def trial_count(job: OptimizationJob) -> int:
    """How many trials the job can have: ``numTrials``, or a smaller grid's size."""
    num, size = job.spec.num_trials or 1, grid_size(job.spec)
    return min(num, size) if size is not None else num


def max_name_length(job: OptimizationJob) -> int:
    """The longest name the job may have: its last trial's name, ``<name>-trial-<numTrials - 1>``, is at most
    :data:`MAX_TRAINJOB_NAME` characters."""
    return MAX_TRAINJOB_NAME - len(trial_name("", trial_count(job) - 1))


def name_errors(obj: JSON, job: OptimizationJob) -> list[str]:
    """Why ``metadata.name`` (or ``generateName``) cannot prefix the job's trials' names: too long for the last
    trial's TrainJob name, or not the start of an RFC 1035 label. Empty when it can."""
    m = meta(obj)
    name, generate = str(m.name or ""), str(m.data.get("generateName") or "")
    longest = max_name_length(job)
    last = trial_count(job) - 1
    why = (
        f"its trials are TrainJobs named <name>-trial-<index>, up to index {last}, and a TrainJob's name has at "
        f"most {MAX_TRAINJOB_NAME} characters"
    )
    if name:
        out = []
        if len(name) > longest:
            out.append(
                f"metadata.name {name!r} has {len(name)} characters; use at most {longest}: {why} "
                f"({trial_name(name, last)!r} has {len(trial_name(name, last))})"
            )
        if not RFC1035.match(name):
            out.append(
                f"metadata.name {name!r} must be an RFC 1035 label (its trials' TrainJob names start with it): "
                "lower-case letters, digits and '-', starting with a letter and ending with a letter or digit"
            )
        return out
    if generate and min(len(generate), 58) + GENERATED_SUFFIX > longest:
        return [
            f"metadata.generateName {generate!r} makes names of {min(len(generate), 58) + GENERATED_SUFFIX} "
            f"characters; use at most {longest - GENERATED_SUFFIX}: {why}"
        ]
    return []


def template_meta_errors(obj: JSON) -> list[str]:
    """Why ``spec.trainJobTemplate.metadata`` collides with what the controller sets on a trial: a label or an
    annotation of its own (:data:`RESERVED_LABELS`, :data:`RESERVED_ANNOTATIONS`), or a field other than
    :data:`TEMPLATE_META_FIELDS` (``ownerReferences``: a trial's controller is its OptimizationJob). The
    controller's own win on a trial in any case (:func:`trainer.optimizationjob.trials.build_trial`)."""
    tmeta = meta((obj.get("spec") or {}).get("trainJobTemplate") or {}).data
    out = []
    for key in tmeta:
        if key not in (*TEMPLATE_META_FIELDS, "name", "namespace"):
            out.append(
                f"{TEMPLATE}.metadata.{key}: a trial's metadata is made by the operator (its name, namespace and "
                "controller owner reference, the OptimizationJob); only labels, annotations and finalizers are "
                "taken from the template: remove it"
            )
    for field, reserved in (("labels", RESERVED_LABELS), ("annotations", RESERVED_ANNOTATIONS)):
        for key in tmeta.get(field) or {}:
            if key in reserved:
                out.append(
                    f"{TEMPLATE}.metadata.{field}[{key}]: set by the operator on every trial (which OptimizationJob "
                    "and trial it is, its parameters); remove it"
                )
    return out


def _trainer(job: OptimizationJob) -> JSON:
    return (job.spec.train_job_template.spec.to_dict().get("trainer")) or {}


def parameter_use(job: OptimizationJob) -> tuple[list[str], list[str]]:
    """``(errors, warnings)`` of how the template's trainer meets the parameters (see the module docstring)."""
    trainer = _trainer(job)
    by_env = {env_name(p.name): p.name for p in job.spec.parameters}
    errors: list[str] = []
    where = f"{TEMPLATE}.spec.trainer.env"
    for e in trainer.get("env") or []:
        name = str(e.get("name") or "")
        if name in by_env:
            errors.append(
                f"{where}[{name}]: the variable of parameter {by_env[name]!r}, set on each trial to the value the "
                "search chose: remove it from the template"
            )
        elif name.startswith(ENV_PREFIX):
            errors.append(
                f"{where}[{name}]: no parameter has this variable (parameter <name> reaches the trainer as "
                f"{ENV_PREFIX}<NAME>): rename it, or add the parameter to spec.parameters"
            )
    used: set[str] = set()
    for field in ("command", "args"):
        for i, text in enumerate(trainer.get(field) or []):
            for ref in REFERENCE.findall(str(text)):
                used.add(ref)
                if ref not in by_env:
                    errors.append(
                        f"{TEMPLATE}.spec.trainer.{field}[{i}]: $({ref}) names no parameter (it would stay as "
                        f"written): use one of {', '.join(f'$({n})' for n in by_env)}"
                    )
    for e in trainer.get("env") or []:
        for ref in REFERENCE.findall(str(e.get("value") or "")):
            if ref not in by_env:
                errors.append(
                    f"{where}[{e.get('name')}].value: $({ref}) names no parameter (it would stay as written): use "
                    f"one of {', '.join(f'$({n})' for n in by_env)}"
                )
    warnings = []
    if used:
        for env, name in by_env.items():
            if env not in used:
                warnings.append(
                    f"spec.parameters[{name}]: the template's trainer command and args use other parameters as "
                    f"$(...) but never $({env}); its trainer gets it only from its environment: use it, or remove "
                    "the parameter"
                )
    return errors, warnings


def objective_warnings(job: OptimizationJob, facts: AdmissionFacts) -> list[str]:
    """A warning when no trainer can report the objective: the operator's status server is off."""
    if facts.status_server is not False:
        return []
    metric = job.spec.objectives[0].metric
    return [
        f"spec.objectives[0].metric: the operator runs without its status server (--status-server-port 0), so no "
        f"trainer can post {metric!r} to status.trainerStatus.metrics and every trial will fail without it: "
        "start the operator with --status-server-port"
    ]


def sample(job: OptimizationJob) -> dict[str, str]:
    """A value of each parameter, as a trial's: a categorical's longest choice, a range's maximum."""
    out = {}
    for p in job.spec.parameters:
        space = p.search_space
        if space.categorical is not None:
            out[p.name] = max(space.categorical.choices, key=len)
        elif (ranged := space.uniform or space.log_uniform) is not None:
            out[p.name] = str(int_bounds(ranged)[1]) if ranged.type == "Int" else ranged.max
    return out


def last_trial(obj: JSON, job: OptimizationJob) -> JSON:
    """The job's last trial TrainJob, as the controller would make it (a placeholder uid while the job has
    none; a generated name's placeholder)."""
    m = meta(obj)
    name = str(m.name or "") or str(m.data.get("generateName") or "")[:58] + "x" * GENERATED_SUFFIX
    metadata = {**(obj.get("metadata") or {}), "name": name, "uid": m.uid or "admission"}
    return build_trial({**obj, "metadata": metadata}, trial_count(job) - 1, sample(job))


def in_template(message: str, trial: str) -> str:
    """A message of the trial's TrainJob admission given the template's path: ``spec...`` and ``metadata...``
    (its labels and annotations: a queue) under ``spec.trainJobTemplate``; ``metadata.name...`` (names
    derived from the trial's) said of the OptimizationJob's name, naming the trial."""
    if message.startswith("metadata.name"):
        inner = message.removeprefix("metadata.name: ")
        return f"metadata.name: its trial TrainJob {trial!r} would be refused: {inner}"
    if message.startswith(("spec", "metadata")):
        return f"{TEMPLATE}.{message}"
    return f"{TEMPLATE}: {message}"
