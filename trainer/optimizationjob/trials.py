"""An OptimizationJob's trials: each a TrainJob made from ``spec.trainJobTemplate`` (pure: JSON in, JSON out),
and what a trial TrainJob read back says of itself.

A trial is named ``<job>-trial-<index>`` (index from 0), carries the labels
``trainer.kubeflow.org/optimizationjob-name`` and ``trainer.kubeflow.org/trial-index`` beside the template's,
and the annotation ``trainer.kubeflow.org/trial-parameters`` (its parameters as JSON ``[{name, value}]``),
from which the search is rebuilt; its trainer gets each parameter as the environment variable
``KUBEFLOW_TRAINER_OPT_<NAME>`` in ``spec.trainer.env`` (replacing a template entry of that name), as
KEP-3562 §8.2 (kubeflow/trainer ``proposals/2605-optimization-job-crd/README.md``) says. Its objective is
the last value of the objective metric in its ``status.trainerStatus.metrics`` (KEP-2779) when it completes;
while it runs, that value and its ``progressPercentage`` are its report (:func:`report`). A trial the job's
``pruneAlgorithm`` stopped carries the annotation ``trainer.kubeflow.org/trial-early-stopped`` (why) and
``spec.suspend: true`` (:func:`stop_patch`), and is ``EarlyStopped`` from then on whatever it does.
"""

from __future__ import annotations

import copy
import json
import math
import re

from trainer.api.conditions import true_condition
from trainer.api.kinds import TRAINJOBS
from trainer.api.labels import OPTIMIZATION_JOB_NAME, TRIAL_EARLY_STOPPED, TRIAL_INDEX, TRIAL_PARAMETERS
from trainer.api.optimizationjob import TRIAL_EARLY_STOPPED as EARLY_STOPPED
from trainer.api.optimizationjob import TRIAL_FAILED, TRIAL_RUNNING, TRIAL_SUCCEEDED, env_name
from trainer.api.trainer_v1alpha1 import API_VERSION, COND_COMPLETE, COND_FAILED
from trainer.framework.json_codec import JSON
from trainer.framework.meta import meta
from trainer.framework.owner import owner_reference
from trainer.optimizationjob.search import Observed

TRIAL_NAME = re.compile(r"^(?P<job>.+)-trial-(?P<index>0|[1-9][0-9]{0,5})$")


def trial_name(job: str, index: int) -> str:
    """The name of trial ``index`` of job ``job``: ``<job>-trial-<index>``."""
    return f"{job}-trial-{index}"


def index_of_name(job: str, name: str) -> int | None:
    """The index a trial name of job ``job`` holds, or None when ``name`` is not one."""
    m = TRIAL_NAME.match(name)
    return int(m["index"]) if m and m["job"] == job else None


def build_trial(owner: JSON, index: int, parameters: dict[str, str]) -> JSON:
    """Trial ``index`` of the OptimizationJob ``owner`` (as stored: its template carries the apiserver's
    defaults) with ``parameters`` (name -> value, in the spec's order): the template's TrainJob, owned by
    ``owner`` (controller reference), labelled and annotated as the module says, each parameter in
    ``spec.trainer.env``. Raises ``ValueError`` when ``owner`` has no uid."""
    m = meta(owner)
    template = owner["spec"]["trainJobTemplate"]
    tmeta = template.get("metadata") or {}
    spec = copy.deepcopy(template["spec"])
    trainer = spec.setdefault("trainer", {})
    injected = [{"name": env_name(n), "value": v} for n, v in parameters.items()]
    names = {e["name"] for e in injected}
    trainer["env"] = [e for e in trainer.get("env") or [] if e.get("name") not in names] + injected
    metadata: JSON = {
        "name": trial_name(str(m.name), index),
        "namespace": m.namespace,
        "labels": {**(tmeta.get("labels") or {}), OPTIMIZATION_JOB_NAME: str(m.name), TRIAL_INDEX: str(index)},
        "annotations": {
            **(tmeta.get("annotations") or {}),
            TRIAL_PARAMETERS: json.dumps([{"name": n, "value": v} for n, v in parameters.items()]),
        },
        "ownerReferences": [owner_reference(owner)],
    }
    if tmeta.get("finalizers"):
        metadata["finalizers"] = list(tmeta["finalizers"])
    return {"apiVersion": API_VERSION, "kind": TRAINJOBS.kind, "metadata": metadata, "spec": spec}


def parameters_of(trial: JSON) -> dict[str, str]:
    """The parameters a trial carries in its annotation (name -> value); {} when it has none readable."""
    text = meta(trial).annotations.get(TRIAL_PARAMETERS)
    try:
        items = json.loads(text) if isinstance(text, str) else []
    except ValueError:
        return {}
    if not isinstance(items, list):
        return {}
    return {str(i["name"]): str(i["value"]) for i in items if isinstance(i, dict) and "name" in i and "value" in i}


def objective(trial: JSON, metric: str) -> tuple[float | None, str]:
    """The value of ``metric`` a trial last reported in ``status.trainerStatus.metrics`` and, when there is
    no usable one, why: ``(value, "")`` or ``(None, message)``."""
    metrics = (((trial.get("status") or {}).get("trainerStatus") or {}).get("metrics")) or []
    found = [m.get("value") for m in metrics if isinstance(m, dict) and m.get("name") == metric]
    if not found:
        return None, f"completed without reporting metric {metric!r} in status.trainerStatus.metrics"
    text = str(found[-1])
    try:
        value = float(text)
    except ValueError:
        return None, f"reported metric {metric!r} as {text[:64]!r}, not a number"
    if not math.isfinite(value):
        return None, f"reported metric {metric!r} as {text[:64]!r}, not a finite number"
    return value, ""


def report(trial: JSON, metric: str) -> tuple[int, float] | None:
    """What a trial reports now: its ``status.trainerStatus.progressPercentage`` (0 to 100) and the last
    finite value of ``metric`` in its ``metrics``; None when it reports either not."""
    status = (trial.get("status") or {}).get("trainerStatus") or {}
    progress = status.get("progressPercentage")
    value, _why = objective(trial, metric)
    if value is None or not isinstance(progress, int) or isinstance(progress, bool) or not 0 <= progress <= 100:
        return None
    return progress, value


def early_stopped(trial: JSON) -> str | None:
    """Why the trial was stopped early (its annotation), None when it was not."""
    why = meta(trial).annotations.get(TRIAL_EARLY_STOPPED)
    return str(why) if why is not None else None


def stop_patch(why: str) -> JSON:
    """The merge patch that stops a trial early: the annotation saying ``why`` and ``spec.suspend: true``."""
    return {"metadata": {"annotations": {TRIAL_EARLY_STOPPED: why}}, "spec": {"suspend": True}}


def observe(trial: JSON, index: int, metric: str) -> tuple[Observed, str]:
    """What trial ``trial`` (index ``index``) says: its :class:`Observed` (``EarlyStopped`` when stopped
    early; ``Failed`` when its TrainJob failed or completed without a finite ``metric``; ``Succeeded`` with
    the value; else ``Running``) and, for a failed or stopped one, why."""
    parameters = parameters_of(trial)
    if (why := early_stopped(trial)) is not None:
        return Observed(index, parameters, EARLY_STOPPED), why
    conditions = (trial.get("status") or {}).get("conditions") or []
    failed = true_condition(conditions, COND_FAILED)
    if failed is not None:
        why = f"TrainJob failed: {failed.get('reason') or COND_FAILED}: {failed.get('message') or ''}".rstrip(": ")
        return Observed(index, parameters, TRIAL_FAILED), why
    if true_condition(conditions, COND_COMPLETE) is not None:
        value, why = objective(trial, metric)
        if value is None:
            return Observed(index, parameters, TRIAL_FAILED), why
        return Observed(index, parameters, TRIAL_SUCCEEDED, value), ""
    return Observed(index, parameters, TRIAL_RUNNING), ""
